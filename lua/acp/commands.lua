--- Implementations of the user commands (plugin/acp.lua only declares them)
--- and their completion.

local state = require('acp.state')
local text = require('acp.text')

local M = {}
local H = {}

-- Module definition ==========================================================

--- :AcpStart [agent]
---@param agent string|nil
function M.start(agent, resume)
  if agent == '' then
    agent = nil
  end
  local acp = require('acp')
  if acp.start(agent, { resume = resume or nil }) then
    local st = acp.status()
    if st.session then
      H.echo(('acp: %s is running (session %s)'):format(st.agent, st.session))
    else
      H.echo(('acp: starting %s…'):format(st.agent))
    end
  end
end

--- :AcpStop [agent]
---@param agent string|nil
function M.stop(agent)
  if agent == '' then
    agent = nil
  end
  require('acp').stop(agent)
end

--- :[range]AcpPrompt {text}: with a range, those lines of the current
--- buffer go with the text as a selection.
---@param text string
---@param range {first: integer, last: integer}|nil
function M.prompt(text, range)
  local opts
  if range ~= nil then
    opts = { context = { { kind = 'selection', buf = 0, first = range.first, last = range.last } } }
  end
  require('acp').prompt(text, opts)
end

--- :[range]AcpAdd buffer|file {path}|selection|diagnostics|quickfix|clear;
--- no argument lists what is staged.
---@param args string[]
---@param range {first: integer, last: integer}|nil
function M.add(args, range)
  local context = require('acp.context')
  local what, rest = args[1], table.concat(args, ' ', 2)
  if what == nil then
    H.echo(context.summary() or 'acp: no context staged (:AcpAdd buffer|file {path}|selection|diagnostics|quickfix)')
    return
  end
  if what == 'clear' then
    context.clear()
    H.echo('acp: context cleared')
    return
  end
  local item
  local buf = context.code_buffer() or vim.api.nvim_get_current_buf()
  if what == 'buffer' or what == 'diagnostics' then
    item = { kind = what, buf = buf }
  elseif what == 'file' then
    if rest == '' then
      return H.error('(acp) :AcpAdd file {path}')
    end
    item = { kind = 'file', path = vim.fn.expand(rest) }
  elseif what == 'selection' then
    local first, last
    if range ~= nil then
      buf = vim.api.nvim_get_current_buf()
      first, last = range.first, range.last
    else
      local s, e = vim.api.nvim_buf_get_mark(buf, '<'), vim.api.nvim_buf_get_mark(buf, '>')
      first, last = s[1], e[1]
      if first == 0 then
        return H.error('(acp) :AcpAdd selection: no selection in this buffer (select lines, then :AcpAdd selection)')
      end
    end
    item = { kind = 'selection', buf = buf, first = first, last = last }
  elseif what == 'quickfix' then
    item = { kind = 'quickfix' }
  else
    return H.error(('(acp) :AcpAdd: unknown kind %s (buffer, file, selection, diagnostics, quickfix, clear)'):format(what))
  end
  local ok, err = context.add(item)
  if not ok then
    return H.error(err)
  end
  H.echo('acp: ' .. context.summary())
end

--- Completion of :AcpAdd.
function M.complete_add(arglead, cmdline)
  local words = vim.split(cmdline:sub(1, #cmdline - #arglead), '%s+', { trimempty = true })
  if #words <= 1 or (#words == 2 and words[1]:match("^%A")) then
    return H.filter({ 'buffer', 'file', 'selection', 'diagnostics', 'quickfix', 'clear' }, arglead)
  end
  if words[#words] == 'file' then
    return vim.fn.getcompletion(arglead, 'file')
  end
  return {}
end

--- :AcpCancel
function M.cancel()
  if require('acp').cancel() then
    H.echo('acp: turn cancelled')
  end
end

--- :AcpPending: one line listing the queue, and the oldest prompt reopened
--- and focused.
function M.pending()
  local list = require('acp').pending()
  if #list == 0 then
    H.echo('acp: no pending permission prompts')
    return
  end
  local parts = {}
  for i, p in ipairs(list) do
    parts[#parts + 1] = ('%d. %s (%s)'):format(i, p.title, p.kind)
  end
  local msg = ('acp: %d pending: %s'):format(#list, table.concat(parts, ' · '))
  -- One screen line, so no hit-enter prompt swallows the next key.
  H.echo(text.truncate(msg, vim.o.columns - 13))
  require('acp.prompt').open()
end

--- :AcpAllow[!]: allow once the oldest pending prompt (! = all).
--- :AcpAllow [scope] {rule}: add an allow rule.
---@param bang boolean
---@param args string
function M.allow(bang, args)
  local targets = H.answering('allow', bang, args)
  if targets == nil then
    return
  end
  local acp, missing = require('acp'), 0
  for _, p in ipairs(targets) do
    local o = H.picked(p, 'allow')
    if o then
      acp.respond(p.id, o.optionId)
    else
      missing = missing + 1
    end
  end
  if missing > 0 then
    local what = #targets == 1 and 'no allow-once option offered'
      or ('%d of %d prompts offer no allow-once option'):format(missing, #targets)
    H.error(('(acp) %s: choose in the prompt'):format(what))
    require('acp.prompt').open()
  end
end

--- :AcpDeny[!]: reject once the oldest pending prompt (! = all);
--- reject_always when that is all that is offered, else `cancelled`.
--- :AcpDeny [scope] {rule}: add a deny rule.
---@param bang boolean
---@param args string
function M.deny(bang, args)
  local targets = H.answering('deny', bang, args)
  if targets == nil then
    return
  end
  local acp = require('acp')
  for _, p in ipairs(targets) do
    local o = H.picked(p, 'reject')
    acp.respond(p.id, o and o.optionId or nil)
  end
end

--- :AcpAsk [scope] {rule}: add an ask rule.
---@param args string
function M.ask(args)
  if args == nil or not args:match('%S') then
    H.error('(acp) :AcpAsk needs a rule, e.g. :AcpAsk Bash(git push *)')
    return
  end
  H.rule('ask', args)
end

--- :AcpRules: the effective rules of the project in a scratch buffer.
function M.rules()
  local root = M.root()
  local state = require('acp.state')
  if H.send(require('acp.rpc').rules(root)) then
    state.expect('rules', root, M.show_rules)
  end
end

--- :AcpYolo [on|off|toggle]: per-project yolo (no argument: show it).
---@param arg string|nil
function M.yolo(arg)
  local action = (arg == nil or arg == '') and 'status' or arg
  if not vim.tbl_contains({ 'on', 'off', 'toggle', 'status' }, action) then
    H.error(("(acp) :AcpYolo takes on, off or toggle, not '%s'"):format(action))
    return
  end
  local root = M.root()
  local a = require('acp.state').agent()
  if H.send(require('acp.rpc').yolo(root, action, a and a.name or nil)) then
    require('acp.state').expect('settings', root, function(st)
      local msg = ('(acp) yolo is %s in %s'):format(st.yolo and 'on' or 'off', H.short(st.root))
      if st.yolo and st.yoloSource then
        msg = msg .. ' (' .. H.short(st.yoloSource) .. ')'
      end
      if st.veto then
        msg = msg .. ': vetoed by ' .. H.short(st.vetoSource or 'a Gemini settings file') .. ' (security.disableYoloMode)'
      elseif st.failClosed then
        msg = msg .. ': suspended until the settings files are fixed (:AcpRules)'
      end
      vim.notify(msg, vim.log.levels.INFO)
    end)
  end
end

--- :AcpMode [mode]: the project's policy mode (no argument: show it).
---@param arg string|nil
function M.mode(arg)
  local mode = (arg ~= nil and arg ~= '') and arg or nil
  local config = require('acp.config')
  local agent_modes, a, s = H.agent_modes()
  local explicit = mode ~= nil and mode:match('^agent:(.+)$')
  local is_broker = mode ~= nil and not explicit and vim.tbl_contains(config.modes, mode)
  local wanted = explicit or mode
  local is_agent = wanted ~= nil and vim.tbl_contains(agent_modes, wanted)
  if mode ~= nil and not is_broker and not is_agent then
    local names = vim.deepcopy(config.modes)
    for _, m in ipairs(agent_modes) do
      names[#names + 1] = 'agent:' .. m
    end
    H.error(("(acp) unknown mode '%s': use one of %s"):format(mode, table.concat(names, ', ')))
    return
  end
  -- The agent's own mode: a name only the agent has, an explicit
  -- `agent:` one, or a broker mode the agent also has (kept in step) —
  -- except yolo, which would make the agent stop asking the broker. The
  -- broker's `default` takes the agent out of plan (or any other mode) into
  -- the mode it asks in, whatever the agent calls it (`read-only`, `ask`).
  local target = is_agent and (explicit or not is_broker or wanted ~= 'yolo') and wanted or nil
  if is_broker and not explicit and mode == 'default' and s ~= nil then
    local asking = s.default_mode
    if asking ~= nil and vim.tbl_contains(agent_modes, asking) then
      target = s.current_mode ~= asking and asking or nil
    end
  end
  if target ~= nil then
    require('acp.rpc').set_mode(a.name, a.session, target)
  end
  if is_agent and not is_broker then
    return
  end
  if mode == nil and s ~= nil and #agent_modes > 0 then
    H.echo(('acp: %s mode %s (modes: %s)'):format(a.name, tostring(s.current_mode or '?'), table.concat(agent_modes, ', ')))
  end
  local root = M.root()
  if H.send(require('acp.rpc').mode(root, mode)) then
    require('acp.state').expect('settings', root, function(st)
      vim.notify(('(acp) mode %s in %s'):format(st.mode, H.short(st.root)), vim.log.levels.INFO)
    end)
  end
end

--- :AcpTrust: show what trusting the project enables, ask, then trust it.
function M.trust()
  local root = M.root()
  local state = require('acp.state')
  if not H.send(require('acp.rpc').rules(root)) then
    return
  end
  state.expect('rules', root, function(d)
    H.confirm_trust(d, root)
  end)
end

--- :AcpLog[!]: the decision audit log as a table, of the current project
--- (`!`: every project); see lua/acp/logview.lua.
---@param all boolean|nil
function M.log(all)
  local root
  if not all then
    -- The root the broker reported for the project (the log's `root`).
    local cwd = M.root()
    local st = require('acp.state').settings_for(cwd)
    root = st and require('acp.compat').str(st.root) or cwd
  end
  require('acp.logview').open(root)
end

--- :AcpNew [agent]: a new conversation (a new session) with the agent
--- (started when it does not run), shown in this tab's chat window.
---@param agent string|nil
function M.new(agent)
  if agent == '' then
    agent = nil
  end
  local acp, state = require('acp'), require('acp.state')
  local name = agent or state.current or require('acp.config').options.default_agent
  if acp.start(name, { new = true }) then
    require('acp.chat').open_next(state.current)
    H.echo(('acp: starting a new conversation with %s…'):format(state.current))
  end
end

--- :AcpSessions: picks a session among those of every agent (the chats of
--- this Neovim and the sessions remembered for resuming) and shows it in
--- this tab's chat window, resuming it when its agent no longer has it.
function M.sessions()
  local items = M.session_items()
  if #items == 0 then
    H.echo('acp: no session yet (:AcpStart starts one)')
    return
  end
  vim.ui.select(items, {
    prompt = 'acp sessions',
    format_item = function(item)
      return item.label
    end,
  }, function(item)
    if item ~= nil then
      M.switch_session(item)
    end
  end)
end

--- The entries of :AcpSessions, the live ones first (newest first), then
--- the ones that can be resumed: `{session, agent, cwd, live, label}`.
---@return table[]
function M.session_items()
  local state, model = require('acp.state'), require('acp.chat.model')
  local live, rest, seen = {}, {}, {}
  local chats = vim.tbl_values(model.chats)
  table.sort(chats, function(a, b)
    return a.seq > b.seq
  end)
  for _, chat in ipairs(chats) do
    local a = state.agents[chat.agent]
    local item = {
      session = chat.session,
      agent = chat.agent,
      cwd = chat.cwd,
      title = chat.title,
      live = a ~= nil and not chat.exited,
      current = a ~= nil and a.session == chat.session,
    }
    seen[chat.session] = true
    table.insert(item.live and live or rest, item)
  end
  for _, e in ipairs(state.saved_sessions()) do
    if not seen[e.session] then
      seen[e.session] = true
      rest[#rest + 1] = { session = e.session, agent = e.agent, cwd = e.cwd, time = e.time }
    end
  end
  local items = vim.list_extend(live, rest)
  for _, item in ipairs(items) do
    local what = item.live and (item.current and 'current' or 'open') or 'resume'
    local when = type(item.time) == 'number' and (' · ' .. os.date('%Y-%m-%d %H:%M', item.time)) or ''
    item.label = ('[%s] %s · %s%s%s'):format(
      what,
      item.agent,
      item.title and text.one_line(item.title) or item.session,
      item.cwd and (' · ' .. H.short(item.cwd)) or '',
      when
    )
  end
  return items
end

--- Shows the session of :AcpSessions entry `item`: its chat when its agent
--- still has it, else the agent resumes it (session/load; an agent that
--- cannot load sessions starts a new one, and says so).
---@param item table
function M.switch_session(item)
  if item.live then
    require('acp').chat({ session = item.session })
    return
  end
  local opts = { resume = item.session }
  if item.cwd ~= nil and vim.fn.isdirectory(item.cwd) == 1 then
    opts.cwd = item.cwd
  end
  if require('acp').start(item.agent, opts) then
    require('acp.chat').open_next(require('acp.state').current)
    H.echo(('acp: resuming %s session %s…'):format(item.agent, item.session))
  end
end

--- The project directory commands act on: the current agent's, else the
--- nearest ancestor of the current directory holding a project marker, else
--- the current directory.
---@return string
function M.root()
  local a = require('acp.state').agent()
  if a and a.cwd then
    return a.cwd
  end
  return require('acp.config').project_dir()
end

--- Opens (or refreshes) the scratch buffer of :AcpRules for `rules` event
--- data `d`.
---@param d table
function M.show_rules(d)
  local lines = H.rules_lines(d)
  local compat = require('acp.compat')
  local buf
  for _, win in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    local b = vim.api.nvim_win_get_buf(win)
    if vim.bo[b].filetype == 'acp-rules' then
      buf = b
      vim.api.nvim_set_current_win(win)
      break
    end
  end
  if buf == nil then
    vim.cmd('botright new')
    buf = vim.api.nvim_get_current_buf()
    compat.set_buf(buf, 'buftype', 'nofile')
    compat.set_buf(buf, 'bufhidden', 'wipe')
    compat.set_buf(buf, 'swapfile', false)
    compat.set_buf(buf, 'filetype', 'acp-rules')
    pcall(vim.api.nvim_buf_set_name, buf, 'acp://rules')
    vim.keymap.set('n', 'q', function()
      if not pcall(vim.cmd, 'close') then
        vim.cmd('bwipeout')
      end
    end, { [compat.buf_key] = buf, nowait = true, silent = true, desc = 'acp: close' })
  end
  compat.set_buf(buf, 'modifiable', true)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  compat.set_buf(buf, 'modifiable', false)
  compat.set_buf(buf, 'modified', false)
  local height = math.min(#lines, math.max(5, math.floor(vim.o.lines / 2)))
  pcall(vim.api.nvim_win_set_height, 0, height)
  pcall(vim.api.nvim_win_set_cursor, 0, { 1, 0 })
end

--- Completion of :AcpAllow, :AcpAsk and :AcpDeny: scopes, then tool names;
--- a rule that looks complete is checked by the broker binary, and an
--- invalid one gets no completion and its reason echoed.
function M.complete_rule(arglead, cmdline, cursorpos)
  arglead = arglead or ''
  local before = (cmdline or ''):sub(1, cursorpos or #(cmdline or ''))
  local rest = before:match('^%s*%S-Acp%a+!?%s+(.*)$') or ''
  local scope, rule = rest:match('^(%S+)%s+(.*)$')
  if scope == nil or not vim.tbl_contains(H.scopes, scope) then
    rule = rest
  end
  local first = rule == rest and not rest:find('%s')
  if not rule:find('[%(%s]') then
    local candidates = vim.deepcopy(H.tools)
    if first then
      -- Only allow rules can be kept for a session.
      local allow = before:match('^%s*%S-AcpAllow') ~= nil
      local scopes = vim.tbl_filter(function(sc)
        return allow or sc ~= 'session'
      end, H.scopes)
      candidates = vim.list_extend(scopes, candidates)
    end
    if vim.tbl_contains(H.bare_tools, rule) then
      if not H.check_rule(rule) then
        return {}
      end
    end
    return H.filter(candidates, arglead)
  end
  local kind = rule:match('^Kind%((%w*)$')
  if kind ~= nil then
    return H.filter(
      vim.tbl_map(function(k)
        return 'Kind(' .. k .. ')'
      end, H.kinds),
      arglead
    )
  end
  if rule:sub(-1) == ')' then
    H.check_rule(rule)
  end
  return {}
end

--- Completion of :AcpYolo.
function M.complete_yolo(arglead)
  return H.filter({ 'on', 'off', 'toggle' }, arglead)
end

--- Completion of :AcpMode.
function M.complete_mode(arglead)
  local names = vim.deepcopy(require('acp.config').modes)
  for _, m in ipairs((H.agent_modes())) do
    if not vim.tbl_contains(names, m) then
      names[#names + 1] = m
    end
    names[#names + 1] = 'agent:' .. m
  end
  return H.filter(names, arglead)
end

--- The current session's agent mode ids, its agent and session mirror.
function H.agent_modes()
  local state = require('acp.state')
  local a = state.agent()
  local s = a and a.session and state.sessions[a.session]
  local ids = {}
  local modes = s and s.modes
  if type(modes) == 'table' and type(modes.availableModes) == 'table' then
    for _, m in ipairs(modes.availableModes) do
      if type(m) == 'table' and type(m.id) == 'string' then
        ids[#ids + 1] = m.id
      end
    end
  end
  return ids, a, s
end

--- Completion: built-in presets and configured agents.
function M.complete_agents(arglead)
  return H.filter(require('acp.config').agent_names(), arglead)
end

--- Completion: running agents.
function M.complete_running(arglead)
  local names = vim.tbl_keys(require('acp.state').agents)
  table.sort(names)
  return H.filter(names, arglead)
end

-- Helper data ================================================================

H.scopes = { 'session', 'project', 'user' }

H.lists = { 'deny', 'ask', 'allow' }

--- Offered after the scope (Claude names, Gemini aliases, the broker's
--- Kind()); those without "(" are complete rules by themselves.
H.tools = {
  'Bash(',
  'Read(',
  'Edit(',
  'Write(',
  'WebFetch(domain:',
  'WebSearch',
  'Kind(',
  'mcp__',
  'run_shell_command(',
  'read_file(',
  'write_file',
  'replace',
  'web_fetch',
  'google_web_search',
}

H.bare_tools = { 'Bash', 'Read', 'Edit', 'Write', 'WebFetch', 'WebSearch', 'write_file', 'replace', 'web_fetch', 'google_web_search' }

H.kinds = { 'read', 'edit', 'delete', 'move', 'search', 'execute', 'think', 'fetch', 'switch_mode', 'other' }

--- rule-check answers by rule text (the check runs a process).
H.checked = {}
H.nchecked = 0

-- Helper functionality =======================================================

function H.echo(msg, hl)
  vim.api.nvim_echo({ { msg, hl or 'None' } }, false, {})
end

function H.error(msg)
  vim.notify(msg, vim.log.levels.ERROR)
end

function H.filter(names, arglead)
  arglead = arglead or ''
  return vim.tbl_filter(function(n)
    return n:sub(1, #arglead) == arglead
  end, names)
end

--- The option the broker chose to answer pending prompt `p` ('allow' |
--- 'reject'), or nil (for 'reject': the outcome `cancelled`).
function H.picked(p, what)
  local state = require('acp.state')
  local _, o = state.picked_option(state.pending[p.id] or p, what)
  return o
end

--- :AcpAllow / :AcpDeny: with `args`, adds the rule to `list` and returns
--- nil; without, the prompts to answer (H.targets).
function H.answering(list, bang, args)
  if args ~= nil and args:match('%S') then
    H.rule(list, args)
    return nil
  end
  return H.targets(bang)
end

--- The prompts a bare :AcpAllow / :AcpDeny answers: the oldest, or (bang)
--- all; skips those already answered here. Nil when there are none.
function H.targets(bang)
  local prompt = require('acp.prompt')
  local list = {}
  for _, p in ipairs(require('acp').pending()) do
    if not prompt.awaiting(p.id) then
      list[#list + 1] = p
      if not bang then
        break
      end
    end
  end
  if #list == 0 then
    H.echo('acp: no pending permission prompts')
    return nil
  end
  return list
end

--- :AcpAllow / :AcpAsk / :AcpDeny with arguments add rules
--- ("[scope] Tool(spec)"). The broker validates the rule and answers
--- `rule_added` or an `error` naming the reason.
---@param list 'allow'|'ask'|'deny'
---@param args string
function H.rule(list, args)
  args = vim.trim(args)
  local scope, rule = args:match('^(%S+)%s+(.*)$')
  if scope == nil or not vim.tbl_contains(H.scopes, scope) then
    if vim.tbl_contains(H.scopes, args) then
      local name = (list:gsub('^%l', string.upper))
      H.error(('(acp) :Acp%s %s needs a rule, e.g. Bash(npm test)'):format(name, args))
      return
    end
    scope, rule = 'project', args
  end
  rule = vim.trim(rule)
  local a = require('acp.state').agent()
  if scope == 'session' and (a == nil or a.session == nil) then
    H.error('(acp) no session to add a session rule to: :AcpStart first')
    return
  end
  H.send(require('acp.rpc').rule(scope, list, rule, { cwd = M.root(), agent = a and a.name or nil }))
end

--- Reports a failed send; returns whether it was sent.
function H.send(ok, err)
  if not ok then
    H.error(err or '(acp) the broker is not running')
  end
  return ok
end

H.short = text.home_path

--- Runs `<broker> rule-check <rule>` (cached). Echoes the reason and
--- returns false when the broker refuses the rule; true when it accepts it
--- or cannot tell (binary missing, older broker).
function H.check_rule(rule)
  local r = H.checked[rule]
  if r == nil then
    local bin = require('acp.config').broker_bin()
    if vim.fn.executable(bin) ~= 1 then
      return true
    end
    local ok, out = pcall(vim.fn.system, { bin, 'rule-check', rule })
    if not ok then
      return true
    end
    r = { ok = vim.v.shell_error ~= 1, reason = vim.trim(out or '') }
    if H.nchecked > 200 then
      H.checked, H.nchecked = {}, 0
    end
    H.checked[rule], H.nchecked = r, H.nchecked + 1
  end
  if not r.ok then
    local reason = r.reason ~= '' and r.reason or 'invalid rule'
    -- Kept in :messages: the reason is worth reading again.
    vim.api.nvim_echo({ { ('acp: %s: %s'):format(rule, (reason:gsub('\n', ' '))), 'ErrorMsg' } }, true, {})
  end
  return r.ok
end

--- The text of :AcpRules: what decides, and where each piece comes from.
function H.rules_lines(d)
  local compat, state = require('acp.compat'), require('acp.state')
  local root = compat.str(d.root) or '?'
  local st = state.settings_for(root) or {}
  local lines = {}
  local function add(l)
    lines[#lines + 1] = l
  end
  -- Files inside the project are shown relative to its root.
  local function rel(path)
    path = compat.str(path)
    if path and path:sub(1, #root + 1) == root .. '/' then
      return path:sub(#root + 2)
    end
    return H.short(path)
  end
  local function src(s)
    s = compat.str(s)
    return s and (' (' .. rel(s) .. ')') or ''
  end
  add('Permission settings of ' .. H.short(root))
  add('')
  -- Settings files that cannot be used: what they suspend comes first.
  local closed = type(d.failClosed) == 'table' and d.failClosed or nil
  local closed_errors = {}
  if closed then
    local where = closed.scope == 'everywhere' and 'everywhere' or 'for this project'
    add('FAILING CLOSED: these settings files cannot be used until they are fixed:')
    for _, f in ipairs(type(closed.files) == 'table' and closed.files or {}) do
      local e = type(f) == 'table' and compat.str(f.error)
      if e then
        closed_errors[e] = true
        add('  ' .. rel(e))
      end
    end
    add(('Suspended %s: yolo, acceptEdits, allow rules and trust. Deny and ask rules'):format(where))
    add('of the other files still apply; everything else is asked.')
    add('')
  end
  add('Mode:   ' .. (compat.str(d.mode) or 'default') .. (compat.str(d.modeSource) and src(d.modeSource) or ' (default)'))
  local yolo
  if d.veto == true then
    yolo = 'off: vetoed by ' .. rel(compat.str(d.vetoSource) or 'a Gemini settings file') .. ' (security.disableYoloMode: true)'
  elseif d.yolo == true then
    yolo = 'on' .. src(d.yoloSource) .. ': allowed unless a deny or ask rule, an opaque command or a protected path says otherwise'
  elseif closed then
    yolo = 'off: suspended (a settings file cannot be used; :AcpYolo on is refused)'
  else
    yolo = 'off'
  end
  add('Yolo:   ' .. yolo)
  local trust
  if closed then
    trust = 'suspended: a settings file cannot be used (:AcpTrust is refused until it is fixed)'
  elseif d.trusted == true and st.hasPermissive == false then
    trust = 'nothing to trust: the project files only restrict'
  elseif d.trusted == true then
    trust = "trusted: the project's allow rules, yolo and acceptEdits apply"
  else
    trust = "NOT trusted: the project's allow rules, yolo and acceptEdits are ignored (:AcpTrust shows and enables them)"
  end
  add('Trust:  ' .. trust)
  add('')

  local rules = type(d.rules) == 'table' and d.rules or {}
  add(('Rules (%d; deny wins over ask, ask over allow):'):format(#rules))
  if #rules == 0 then
    add('  none: every request not allowed by the mode is asked')
  end
  local width = 0
  for _, r in ipairs(rules) do
    width = math.max(width, vim.fn.strdisplaywidth(compat.str(r.rule) or '?'))
  end
  for _, list in ipairs(H.lists) do
    for _, r in ipairs(rules) do
      if type(r) == 'table' and r.list == list then
        local text = compat.str(r.rule) or '?'
        local pad = (' '):rep(width - vim.fn.strdisplaywidth(text))
        add(('  %-5s  %s%s  %s'):format(list, text, pad, rel(compat.str(r.source) or '?')))
      end
    end
  end

  local memory = type(d.memory) == 'table' and d.memory or {}
  if #memory > 0 then
    add('')
    add('Allowed for a session (the prompt\'s "allow for this session", :AcpAllow session):')
    for _, m in ipairs(memory) do
      if type(m) == 'table' then
        local who = compat.str(m.agent) and (compat.str(m.agent) .. ', ') or ''
        add(('  %s  (%ssession %s)'):format(compat.str(m.rule) or '?', who, compat.str(m.session) or '?'))
      end
    end
  end

  -- Agents trusted with the prompt's "trust this agent" (user settings).
  local trusted_agents = {}
  if type(d.agents) == 'table' then
    for name, v in pairs(d.agents) do
      if v == true or (type(v) == 'table' and v.yolo == true) then
        trusted_agents[#trusted_agents + 1] = tostring(name)
      end
    end
  end
  if #trusted_agents > 0 then
    table.sort(trusted_agents)
    add('')
    add('Agents in yolo everywhere ("trust this agent"; :AcpYolo off ends it):')
    for _, name in ipairs(trusted_agents) do
      add('  ' .. name)
    end
  end

  local function list_of(title, v)
    local items = {}
    for _, x in ipairs(type(v) == 'table' and v or {}) do
      if compat.str(x) then
        items[#items + 1] = x
      end
    end
    if #items > 0 then
      add('')
      add(title)
      for _, x in ipairs(items) do
        add('  ' .. x)
      end
    end
  end
  local errors = {}
  for _, e in ipairs(type(d.errors) == 'table' and d.errors or {}) do
    if not closed_errors[e] then
      errors[#errors + 1] = e
    end
  end
  list_of('Errors:', errors)
  list_of('Warnings:', d.warnings)
  if d.trusted ~= true and st.permissive ~= nil then
    list_of('Trusting the project would enable:', require('acp.format').describe_permissive(st.permissive))
  end
  add('')
  add('q: close · :AcpLog: past decisions · :help acp-rules')
  return lines
end

--- :AcpTrust, once the broker said what the project's settings hold.
function H.confirm_trust(d, root)
  local compat, state = require('acp.compat'), require('acp.state')
  root = compat.str(d.root) or root
  local st = state.settings_for(root) or {}
  local permissive = compat.present(d.permissive) and d.permissive or st.permissive
  local has = d.hasPermissive
  if has == nil then
    has = st.hasPermissive
  end
  local items = require('acp.format').describe_permissive(permissive)
  if has == false or (has == nil and #items == 0 and d.trusted == true) then
    H.echo(("acp: nothing to trust in %s: its settings files only restrict"):format(H.short(root)))
    return
  end
  if d.trusted == true then
    H.echo(('acp: %s is trusted already%s'):format(H.short(root), #items > 0 and (': ' .. table.concat(items, ', ')) or ''))
    return
  end
  local msg = {
    ('Trust the permission settings of %s?'):format(H.short(root)),
    '',
    'This enables:',
  }
  if #items == 0 then
    items = { "the project's allow rules, yolo and acceptEdits (:AcpRules lists the files)" }
  end
  for _, i in ipairs(items) do
    msg[#msg + 1] = '  ' .. i
  end
  msg[#msg + 1] = ''
  msg[#msg + 1] = 'If these files change, you are asked again.'
  local choice = vim.fn.confirm(table.concat(msg, '\n'), '&Trust\n&No', 2, 'Question')
  if choice ~= 1 then
    H.echo('acp: not trusted')
    return
  end
  H.send(require('acp.rpc').trust(root))
end

-- A `rules` answer no command waited for (it came late) is shown anyway.
--- :AcpReview [turn|session] | diff [file] | revert [file|all]
---@param args string
function M.review(args)
  require('acp.review').command(args)
end

function M.complete_review(arglead, cmdline)
  local words = {}
  for w in cmdline:gmatch('%S+') do
    words[#words + 1] = w
  end
  local n = #words - (arglead == '' and 0 or 1)
  if n <= 1 then
    return H.filter(require('acp.review').subcommands, arglead)
  elseif words[2] == 'revert' and n == 2 then
    return H.filter({ 'file', 'all' }, arglead)
  elseif words[2] == 'diff' and n == 2 then
    return vim.fn.getcompletion(arglead, 'file')
  end
  return {}
end

state.on('rules', M.show_rules)

return M
