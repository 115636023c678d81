--- The Lua mirror of the broker's state: agents, sessions, tool calls and
--- pending permission prompts, updated from broker events.
---
--- The broker is the authority; this mirror only lets the UI and the API
--- answer at once (status(), pending()). Each event updates the mirror
--- synchronously and schedules its effects (User autocmds, notifications,
--- the prompt window) so they run in event order, outside the RPC call.

local compat = require('acp.compat')

local M = {}
local H = {}

-- Module definition ==========================================================

---@class acp.Agent
---@field name string
---@field session string|nil
---@field cwd string
---@field pid integer|nil
---@field prompts integer prompts sent and not yet ended (busy while > 0)
---@field stopping boolean
---@field info table|nil agent_ready data

---@type table<string, acp.Agent>
M.agents = {}

--- Name of the most recently started agent.
---@type string|nil
M.current = nil

---@class acp.Pending
---@field id integer broker token
---@field agent string
---@field session string
---@field toolCallId string
---@field title any
---@field kind any
---@field options table[]
---@field toolCall table
---@field reason string|nil why the person is asked (the broker's words)
---@field rule string|nil the rule that made it ask, if one did
---@field source string|nil that rule's file, or the mode
---@field narrow string[] rules "allow for the session/project" would record
---@field command string|nil the shell command the policy analysed
---@field atoms {kind: string, text: string, inner: boolean|nil}[] what it judged
---@field allowOption string|nil the optionId an allow answers with (the broker's choice)
---@field rejectOption string|nil the optionId a reject answers with (nil: `cancelled`)
---@field t number arrival (ms, monotonic)

---@type table<integer, acp.Pending>
M.pending = {}

--- Tokens of pending prompts, oldest first.
---@type integer[]
M.order = {}

--- session id -> {agent, cwd, modes, tools = {toolCallId -> merged tool call}, tool_order}
M.sessions = {}

--- The last events seen, oldest first (at least max_events, at most twice
--- as many): broker events by their
--- protocol name (streamed message chunks left out), autocmds by their
--- pattern. For tests and debugging.
---@type {event: string, data: table}[]
M.events = {}
M.max_events = 200

--- Most tool calls remembered per session (for titles and prompt bodies).
M.max_tools = 500

---@class acp.Settings
---@field root string
---@field mode string
---@field yolo boolean
---@field yoloSource string|nil what turned yolo on
---@field veto boolean
---@field vetoSource string|nil
---@field trusted boolean
---@field hasPermissive boolean
---@field permissive any what trusting would enable (the broker's shape)
---@field errors string[]
---@field warnings string[]
---@field failClosed acp.FailClosed|nil settings files that cannot be used

---@class acp.FailClosed
---@field message string what is broken and what is suspended, for a person
---@field scope string 'project' or 'everywhere'
---@field files {file: string, error: string, scope: string}[]

--- Project root -> the effective settings the broker last reported.
---@type table<string, acp.Settings>
M.settings = {}

--- Functions called as fn(name, data) after each broker event (after the
--- mirror is updated, from the scheduled effects). For other modules.
M.listeners = {}

---@param fn fun(name: string, data: table)
function M.subscribe(fn)
  table.insert(M.listeners, fn)
end

--- Updates the mirror for one broker event and schedules its effects.
---@param name string
---@param data table
---@return boolean
function M.handle(name, data)
  if not H.is_chunk(name, data) then
    M.log(name, data)
  end
  local handler = H.handlers[name]
  local effect
  if handler ~= nil then
    effect = handler(data)
  end
  -- The chat buffers keep every session's history, window open or not; they
  -- only queue here and draw on a timer (lua/acp/chat.lua).
  local cok, cerr = pcall(require('acp.chat').on_event, name, data)
  if not cok then
    H.chat_error = tostring(cerr)
  end
  if effect == nil and #M.listeners == 0 then
    return true
  end
  M.defer(function()
    if effect ~= nil then
      effect()
    end
    for _, fn in ipairs(M.listeners) do
      local ok, err = pcall(fn, name, data)
      if not ok then
        vim.notify('(acp) listener error: ' .. tostring(err), vim.log.levels.ERROR)
      end
    end
  end)
  return true
end

--- Runs fn once Neovim may block again (vim.schedule), after every function
--- deferred before it. A burst of events costs one scheduled callback.
---@param fn function
function M.defer(fn)
  local q = H.deferred
  q[#q + 1] = fn
  if #q == 1 then
    vim.schedule(H.run_deferred)
  end
end

H.deferred = {}

function H.run_deferred()
  local q = H.deferred
  H.deferred = {}
  for i = 1, #q do
    local ok, err = pcall(q[i])
    if not ok then
      vim.notify('(acp) internal error: ' .. tostring(err), vim.log.levels.ERROR)
    end
  end
end

---@param event string
---@param data table
function M.log(event, data)
  local ev = M.events
  ev[#ev + 1] = { event = event, data = data }
  -- Trimmed in one pass once twice as long as kept: O(1) per event.
  if #ev > 2 * M.max_events then
    local keep = {}
    for i = #ev - M.max_events + 1, #ev do
      keep[#keep + 1] = ev[i]
    end
    M.events = keep
  end
end

--- Records that `name` is being started in `cwd` and makes it current.
---@param name string
---@param cwd string
---@param env table|nil the agent's environment additions (for logins)
function M.agent_starting(name, cwd, env)
  M.agents[name] = M.agents[name] or { name = name, prompts = 0, stopping = false }
  M.agents[name].cwd = cwd
  M.agents[name].env = env or M.agents[name].env
  H.seq = H.seq + 1
  M.agents[name].seq = H.seq
  M.current = name
end

---@param name string|nil
---@return acp.Agent|nil
function M.agent(name)
  return M.agents[name or M.current or '']
end

--- Records a prompt sent to `name` (busy until its turn ends).
function M.prompt_sent(name)
  local a = M.agents[name]
  if a then
    a.prompts = a.prompts + 1
  end
end

function M.agent_stopping(name)
  local a = M.agents[name]
  if a then
    a.stopping = true
  end
end

---@param name string|nil
---@return boolean
function M.busy(name)
  local a = M.agent(name)
  return a ~= nil and a.prompts > 0
end

--- Pending prompts, oldest first (internal records).
---@return acp.Pending[]
function M.pending_list()
  local list = {}
  for _, id in ipairs(M.order) do
    list[#list + 1] = M.pending[id]
  end
  return list
end

--- 1-based position of `id` in the queue, and the queue length.
---@return integer|nil pos
---@return integer total
function M.position(id)
  for i, v in ipairs(M.order) do
    if v == id then
      return i, #M.order
    end
  end
  return nil, #M.order
end

--- The tool call as known from `update` events merged with the request's
--- `toolCall` (the request wins where it has a value).
---@param req acp.Pending
---@return table
function M.tool_call(req)
  local merged = {}
  local s = M.sessions[req.session]
  local known = s and s.tools[req.toolCallId]
  for k, v in pairs(known or {}) do
    merged[k] = v
  end
  for k, v in pairs(type(req.toolCall) == 'table' and req.toolCall or {}) do
    if compat.present(v) then
      merged[k] = v
    end
  end
  return merged
end

--- Title of a pending prompt: the request's, else the last title seen for its
--- tool call, else its kind.
---@param req acp.Pending
---@return string
function M.title(req)
  local tc = M.tool_call(req)
  return compat.str(req.title) or compat.str(tc.title) or M.kind(req)
end

--- The shell command of an `execute` tool call's rawInput (a string, or an
--- argv list quoted as a shell would need it), or nil. Only for tool calls
--- no permission request was judged for: a prompt shows the command the
--- broker analysed (`command` in the permission event).
---@param input any the tool call's rawInput
---@return string|nil
function M.command(input)
  if type(input) ~= 'table' then
    return nil
  end
  local cmd = input.command or input.cmd
  if type(cmd) == 'string' and cmd ~= '' then
    return cmd
  elseif type(cmd) == 'table' and compat.islist(cmd) and #cmd > 0 then
    local parts = {}
    for _, p in ipairs(cmd) do
      p = tostring(p)
      if p == '' or p:find("[^%w@%%+=:,./_-]") then
        p = "'" .. p:gsub("'", [['\'']]) .. "'"
      end
      parts[#parts + 1] = p
    end
    return table.concat(parts, ' ')
  end
  return nil
end

--- Text split into lines (CR LF and CR count as LF; no empty last line
--- for a final newline).
---@param text any
---@return string[]
function M.split_lines(text)
  text = tostring(text):gsub('\r\n', '\n'):gsub('\r', '\n')
  local lines = vim.split(text, '\n', { plain = true })
  if #lines > 1 and lines[#lines] == '' then
    table.remove(lines)
  end
  return lines
end

--- A path as the person reads it: relative to the current directory or ~.
---@param p string
---@return string
function M.short_path(p)
  return vim.fn.fnamemodify(p, ':~:.')
end

--- A ToolCallContent `diff` as unified-diff text to show, for the prompt
--- and the chat: `from` and `to` are the ---/+++ lines, then either `lines`
--- (the hunks) or a `note` saying why there are none.
---@param item table
---@return {from: string, to: string, lines: string[]|nil, note: string|nil}
function M.diff(item)
  local path = M.short_path(compat.str(item.path) or '?')
  local new = type(item.newText) == 'string' and item.newText or ''
  local old = type(item.oldText) == 'string' and item.oldText or nil
  local r = {
    from = '--- ' .. (old and path or '/dev/null'),
    to = '+++ ' .. path .. (old and '' or '  (new file)'),
  }
  -- Both texts end with a newline, so vim.diff does not flag the last line.
  local function nl(s)
    return (s ~= '' and s:sub(-1) ~= '\n') and s .. '\n' or s
  end
  local ok, diff = pcall(vim.diff, nl(old or ''), nl(new), { result_type = 'unified', ctxlen = 3 })
  if not ok or type(diff) ~= 'string' then
    r.note = '(could not compute the diff)'
  elseif diff == '' then
    r.note = '(no changes)'
  else
    r.lines = M.split_lines(diff)
  end
  return r
end

---@param req acp.Pending
---@return string
function M.kind(req)
  local tc = M.tool_call(req)
  return compat.str(req.kind) or compat.str(tc.kind) or 'other'
end

--- The public shape of a pending prompt (:help acp-api).
---@param req acp.Pending
function M.public(req)
  local options = {}
  for _, o in ipairs(req.options) do
    options[#options + 1] = { optionId = o.optionId, name = o.name, kind = o.kind }
  end
  return {
    id = req.id,
    session = req.session,
    toolCallId = req.toolCallId,
    title = M.title(req),
    kind = M.kind(req),
    options = options,
  }
end

--- The settings of the project `dir` belongs to: the reported root equal to
--- `dir`, else the longest one that contains it. Nil when none is known.
---@param dir string|nil
---@return acp.Settings|nil
function M.settings_for(dir)
  if dir == nil then
    return nil
  end
  if M.settings[dir] ~= nil then
    return M.settings[dir]
  end
  local best
  for root, s in pairs(M.settings) do
    if (dir:sub(1, #root + 1) == root .. '/' or root == '/') and (best == nil or #root > #best.root) then
      best = s
    end
  end
  return best
end

--- Calls fn(data) with the next broker event `event` ('rules' or
--- 'settings') about `root` (an answer to a command just sent). Waiters
--- expire after a few seconds and are dropped by an `error` event (a
--- refused command gets no other answer).
---@param event string
---@param root string
---@param fn fun(data: table)
function M.expect(event, root, fn)
  table.insert(H.waiters, { event = event, root = root, fn = fn, t = compat.now_ms() })
end

--- What trusting a project would enable, as lines for a person
--- (`permissive` of the `settings` event, whatever its exact shape).
---@param p any
---@param opts {sources: boolean|nil}|nil sources = false leaves out the files
---@return string[]
function M.describe_permissive(p, opts)
  local items = {}
  H.describe(p, nil, items, not (opts and opts.sources == false))
  return items
end

--- Why the broker decided or asks, for a person: its `reason`, plus the
--- rule and its source when the reason does not name them.
---@param d {reason: string|nil, rule: string|nil, source: string|nil, by: string|nil}
---@return string
function M.why(d)
  return H.why(d)
end

--- The broker died: clean up as if every agent exited.
---@param code integer
function M.broker_exited(code)
  local names = vim.tbl_keys(M.agents)
  table.sort(names)
  for _, name in ipairs(names) do
    local effect = H.agent_gone(name, {
      agent = name,
      by = 'broker_exit',
      message = ('the broker exited (code %d)'):format(code),
      quiet = true,
    })
    M.defer(effect)
  end
  -- Prompts of agents the mirror did not know (should not happen).
  local leftover = H.resolve_all(function()
    return true
  end, 'broker_exit')
  M.defer(leftover)
  -- Runtime yolo and modes die with the broker.
  M.settings = {}
  H.waiters = {}
end

-- Helper functionality =======================================================

H.handlers = {}
H.seq = 0

--- Commands waiting for the broker's answer (see M.expect).
H.waiters = {}
H.waiter_ms = 5000

--- What the person has been told already, so each notice comes once per
--- Neovim session: untrusted roots, settings errors and warnings by text.
H.told = { untrusted = {}, errors = {}, warnings = {}, closed = {} }

--- Streamed text would push everything else out of the bounded event log.
function H.is_chunk(name, data)
  if name ~= 'update' or type(data.update) ~= 'table' then
    return false
  end
  local kind = data.update.sessionUpdate
  return kind == 'agent_message_chunk' or kind == 'agent_thought_chunk' or kind == 'user_message_chunk'
end

function H.handlers.agent_started(d)
  local name = compat.str(d.agent)
  if name == nil then
    return
  end
  M.agents[name] = M.agents[name] or { name = name, prompts = 0, stopping = false, cwd = vim.fn.getcwd() }
  M.agents[name].pid = d.pid
end

function H.handlers.agent_ready(d)
  local a = M.agents[d.agent or '']
  if a then
    a.info = d
  end
end

function H.handlers.session_new(d)
  local name, session = compat.str(d.agent), compat.str(d.session)
  if name == nil or session == nil then
    return
  end
  local a = M.agents[name]
  if a == nil then
    a = { name = name, prompts = 0, stopping = false }
    M.agents[name] = a
  end
  a.session = session
  a.cwd = compat.str(d.cwd) or a.cwd
  local s = H.session(session, name)
  s.cwd = a.cwd
  if compat.present(d.modes) then
    s.modes = d.modes
    s.current_mode = compat.str(d.modes.currentModeId) or s.current_mode
  end
  s.loading = false
  local resumed = d.resumed == true
  return function()
    H.remember_session(name, s.cwd, session)
    vim.notify(('(acp) %s: session %s'):format(name, resumed and 'resumed' or 'ready'), vim.log.levels.INFO)
  end
end

function H.handlers.session_loading(d)
  local session = compat.str(d.session)
  if session ~= nil then
    local s = H.session(session, d.agent)
    s.cwd = compat.str(d.cwd) or s.cwd
    s.loading = true
  end
end

function H.handlers.mode_set(d)
  local session = compat.str(d.session)
  if session == nil then
    return
  end
  local s = H.session(session, d.agent)
  s.current_mode = compat.str(d.modeId)
  if d.by == 'broker' then
    return -- the broker keeping the asking posture: the posture event tells
  end
  return function()
    vim.notify(('(acp) %s: agent mode %s'):format(tostring(d.agent), tostring(s.current_mode)), vim.log.levels.INFO)
  end
end

--- The agent's asking posture for a session (design §6): 'asking' once the
--- broker has put it in its asking mode, else 'unverified' with a reason.
--- The person is told before the first prompt; prompts are not blocked.
function H.handlers.posture(d)
  local session = compat.str(d.session)
  if session == nil then
    return
  end
  local s = H.session(session, d.agent)
  local before = s.posture_reason
  s.posture = compat.str(d.posture) or 'unverified'
  s.posture_reason = compat.str(d.reason)
  s.posture_family = compat.str(d.family)
  if s.posture ~= 'unverified' or s.posture_reason == before then
    return
  end
  return function()
    vim.notify(
      ('(acp) %s: %s — it may act without asking you. Prompts still go to it; :checkhealth acp, :AcpLog'):format(
        tostring(d.agent),
        tostring(s.posture_reason)
      ),
      vim.log.levels.WARN
    )
  end
end

function H.handlers.terminal(d)
  local session = compat.str(d.session)
  local id = compat.str(d.terminalId)
  if session ~= nil and id ~= nil then
    local s = H.session(session, d.agent)
    s.terminals = s.terminals or {}
    s.terminals[id] = d
  end
end

function H.handlers.auth_required(d)
  local name = compat.str(d.agent)
  local a = name and M.agents[name]
  if a == nil then
    return
  end
  local methods = {}
  for _, m in ipairs((a.info and type(a.info.authMethods) == 'table') and a.info.authMethods or {}) do
    -- Terminal logins are run by the person, never sent to `authenticate`.
    if type(m) == 'table' and compat.str(m.id) and m.type ~= 'terminal' then
      methods[#methods + 1] = m
    end
  end
  return function()
    require('acp.auth').choose(name, methods)
  end
end

function H.handlers.authenticated(d)
  return function()
    vim.notify(('(acp) %s: logged in (%s)'):format(tostring(d.agent), tostring(d.methodId)), vim.log.levels.INFO)
  end
end

--- The newest session of agent in cwd that this Neovim (or an earlier one)
--- saw, from the state file; nil when there is none.
---@param agent string
---@param cwd string
---@return string|nil
function M.last_session(agent, cwd)
  for _, e in ipairs(H.read_sessions()) do
    if e.agent == agent and e.cwd == cwd and type(e.session) == 'string' then
      return e.session
    end
  end
  return nil
end

--- Sessions remembered for `:AcpStart!`, newest first (bounded).
M.max_saved_sessions = 100

function H.read_sessions()
  local path = compat.state_path('sessions.json')
  local ok, lines = pcall(vim.fn.readfile, path)
  if not ok or #lines == 0 then
    return {}
  end
  local dok, list = pcall(vim.fn.json_decode, table.concat(lines, '\n'))
  if not dok or type(list) ~= 'table' then
    return {}
  end
  return list
end

function H.remember_session(agent, cwd, session)
  if agent == nil or cwd == nil then
    return
  end
  local list = { { agent = agent, cwd = cwd, session = session, time = os.time() } }
  for _, e in ipairs(H.read_sessions()) do
    if type(e) == 'table' and e.session ~= session and #list < M.max_saved_sessions then
      list[#list + 1] = e
    end
  end
  local path = compat.state_path('sessions.json')
  pcall(vim.fn.mkdir, vim.fn.fnamemodify(path, ':h'), 'p')
  local tmp = path .. '.tmp'
  if pcall(vim.fn.writefile, { vim.fn.json_encode(list) }, tmp) then
    (vim.uv or vim.loop).fs_rename(tmp, path)
  end
end

function H.handlers.update(d)
  local u = d.update
  local session = compat.str(d.session)
  if type(u) ~= 'table' or session == nil then
    return
  end
  local s = H.session(session, d.agent)
  if u.sessionUpdate == 'agent_message_chunk' and type(u.content) == 'table' and type(u.content.text) == 'string' then
    -- The agent's last message of the turn is what the turn-end note shows
    -- (until the chat buffer exists). A new messageId, or a tool call in
    -- between, starts a new message; only a bounded tail is kept.
    local id = compat.str(u.messageId)
    if s.reply_done or (id ~= nil and id ~= s.reply_id) then
      s.reply, s.reply_done = nil, false
    end
    s.reply_id = id
    s.reply = ((s.reply or '') .. u.content.text):sub(-600)
  elseif u.sessionUpdate == 'tool_call' or u.sessionUpdate == 'tool_call_update' then
    s.reply_done = true
    H.upsert_tool(s, u)
  elseif u.sessionUpdate == 'current_mode_update' then
    s.current_mode = compat.str(u.currentModeId) or s.current_mode
  end
end

function H.handlers.turn_start(d)
  local session = compat.str(d.session)
  if session ~= nil then
    H.session(session, d.agent).reply = nil
  end
  local a = M.agents[d.agent or '']
  if a and a.prompts == 0 then
    -- A prompt this Neovim did not send through prompt() (e.g. another
    -- client of the API); still busy until it ends.
    a.prompts = 1
  end
end

function H.handlers.turn_end(d)
  local a = M.agents[d.agent or '']
  if a then
    a.prompts = math.max(0, a.prompts - 1)
  end
  local data = { session = d.session, stopReason = d.stopReason, message = d.message }
  -- Stopping the agent ends its turn with 'error'; that is no news.
  local quiet = a ~= nil and a.stopping
  local session = compat.str(d.session)
  local reply = session and M.sessions[session] and M.sessions[session].reply
  return function()
    compat.fire_user('AcpTurnEnd', H.log_user('AcpTurnEnd', data))
    if d.stopReason == 'error' and not quiet then
      vim.notify(
        ('(acp) %s: the turn failed: %s'):format(tostring(d.agent), compat.str(d.message) or 'unknown error'),
        vim.log.levels.ERROR
      )
    elseif d.stopReason ~= 'error' then
      local msg = ('(acp) %s [%s] %s'):format(tostring(d.agent), tostring(d.stopReason), H.one_line(reply))
      -- One screen line: a wrapped message would stop for "Press ENTER".
      local max = vim.o.columns - 12
      if vim.fn.strdisplaywidth(msg) > max then
        msg = vim.fn.strcharpart(msg, 0, max - 1) .. '…'
      end
      vim.notify(msg, vim.log.levels.INFO)
    end
  end
end

function H.handlers.permission(d)
  local id = d.id
  if type(id) ~= 'number' then
    error('(acp) permission event without a numeric id')
  end
  local options = {}
  for _, o in ipairs(type(d.options) == 'table' and d.options or {}) do
    if type(o) == 'table' then
      options[#options + 1] = o
    end
  end
  local tc = type(d.toolCall) == 'table' and d.toolCall or {}
  local req = {
    id = id,
    agent = compat.str(d.agent) or '?',
    session = compat.str(d.session) or '',
    toolCallId = compat.str(d.toolCallId) or compat.str(tc.toolCallId) or '',
    title = d.title,
    kind = d.kind,
    options = options,
    toolCall = tc,
    reason = compat.str(d.reason),
    rule = compat.str(d.rule),
    source = compat.str(d.source),
    narrow = H.strings(d.narrow),
    command = compat.str(d.command),
    atoms = H.atoms(d.atoms),
    allowOption = compat.str(d.allowOption),
    rejectOption = compat.str(d.rejectOption),
    t = compat.now_ms(),
  }
  if M.pending[id] == nil then
    table.insert(M.order, id)
  end
  M.pending[id] = req
  -- The request's toolCall is an upsert too (agents ask about calls they
  -- never announced).
  local s = H.session(req.session, req.agent)
  H.upsert_tool(s, vim.tbl_extend('force', tc, { toolCallId = req.toolCallId }))
  local data = {
    id = id,
    session = req.session,
    toolCallId = req.toolCallId,
    title = M.title(req),
    kind = M.kind(req),
  }
  return function()
    compat.fire_user('AcpPermissionRequest', H.log_user('AcpPermissionRequest', data))
    require('acp.prompt').refresh()
  end
end

function H.handlers.permission_resolved(d)
  local req = M.pending[d.id]
  if req == nil then
    return
  end
  H.remove_pending(d.id)
  -- Counted for the exit message ("1 pending permission prompt was
  -- cancelled"): the broker cancels them just before agent_exit.
  local a = M.agents[req.agent]
  if a and d.outcome ~= 'selected' and (d.by == 'agent_exit' or (a.stopping and d.by == 'cancel')) then
    a.cancelled_by_exit = (a.cancelled_by_exit or 0) + 1
  end
  return H.resolved_effect(req, d.outcome, d.optionId, d.by)
end

function H.handlers.agent_exit(d)
  local name = compat.str(d.agent)
  if name == nil or M.agents[name] == nil then
    return
  end
  return H.agent_gone(name, d)
end

function H.handlers.decided(d)
  local session = compat.str(d.session) or ''
  local tcid = compat.str(d.toolCallId) or ''
  local s = M.sessions[session]
  local known = s and s.tools[tcid] or {}
  local data = {
    agent = compat.str(d.agent),
    session = session,
    toolCallId = tcid,
    title = compat.str(d.title) or compat.str(known.title) or compat.str(d.kind) or 'a tool call',
    kind = compat.str(d.kind) or compat.str(known.kind) or 'other',
    decision = compat.str(d.decision) or '?',
    optionId = compat.str(d.optionId),
    reason = compat.str(d.reason),
    rule = compat.str(d.rule),
    source = compat.str(d.source),
    by = compat.str(d.by),
    command = compat.str(d.command),
    atoms = H.atoms(d.atoms),
  }
  return function()
    compat.fire_user('AcpPermissionDecided', H.log_user('AcpPermissionDecided', data))
    if data.decision == 'deny' then
      vim.notify(('(acp) denied %s: %s'):format(H.one_line(data.title), H.why(data)), vim.log.levels.WARN)
    elseif data.decision == 'allow' then
      H.echo_allowed(data)
    end
  end
end

--- A tool call that acted without a request the broker saw, where the
--- policy would have asked or denied (the broker audited it as `unasked`).
function H.handlers.unasked(d)
  local session = compat.str(d.session) or ''
  local tcid = compat.str(d.toolCallId) or ''
  local s = H.session(session, d.agent)
  s.unasked = (s.unasked or 0) + 1
  local known = s.tools[tcid] or {}
  local paths = H.strings(d.paths)
  local data = {
    agent = compat.str(d.agent),
    session = session,
    toolCallId = tcid,
    title = compat.str(d.title) or compat.str(known.title) or compat.str(d.kind) or 'a tool call',
    kind = compat.str(d.kind) or compat.str(known.kind) or 'other',
    command = compat.str(d.command),
    paths = paths,
    decision = compat.str(d.decision) or '?',
    reason = compat.str(d.reason),
    rule = compat.str(d.rule),
    source = compat.str(d.source),
  }
  return function()
    compat.fire_user('AcpUnasked', H.log_user('AcpUnasked', data))
    local what = data.command or (#paths > 0 and table.concat(paths, ', ')) or data.title
    vim.notify(
      ('(acp) %s acted WITHOUT ASKING: %s %s (the policy would have %s: %s)'):format(
        tostring(data.agent),
        data.kind,
        H.one_line(what),
        data.decision == 'deny' and 'denied it' or 'asked you',
        H.why(data)
      ),
      data.decision == 'deny' and vim.log.levels.ERROR or vim.log.levels.WARN
    )
  end
end

function H.handlers.settings(d)
  local root = compat.str(d.root)
  if root == nil then
    return
  end
  local st = {
    root = root,
    mode = compat.str(d.mode) or 'default',
    yolo = d.yolo == true,
    yoloSource = compat.str(d.yoloSource),
    veto = d.veto == true,
    vetoSource = compat.str(d.vetoSource),
    trusted = d.trusted == true,
    hasPermissive = d.hasPermissive == true,
    permissive = compat.present(d.permissive) and d.permissive or nil,
    errors = H.strings(d.errors),
    warnings = H.strings(d.warnings),
    failClosed = H.fail_closed(d.failClosed),
  }
  M.settings[root] = st
  -- A broken file's error is part of the fail-closed message: one notice
  -- per root and message, again when it changes or breaks anew.
  local closed, own = nil, {}
  if st.failClosed then
    for _, f in ipairs(st.failClosed.files) do
      own[f.error] = true
    end
    if H.told.closed[root] ~= st.failClosed.message then
      closed = st.failClosed.message
    end
  end
  H.told.closed[root] = st.failClosed and st.failClosed.message or nil
  local other = {}
  for _, e in ipairs(st.errors) do
    if not own[e] then
      other[#other + 1] = e
    end
  end
  local errors, warnings = H.news(H.told.errors, other), H.news(H.told.warnings, st.warnings)
  local untrusted = false
  -- (While a file fails closed, trust is suspended and :AcpTrust refused:
  -- the notice waits until it is fixed.)
  if st.hasPermissive and not st.trusted and not st.failClosed then
    untrusted = not H.told.untrusted[root]
    H.told.untrusted[root] = true
  else
    -- Trusted now: a later change of the files is worth telling again.
    H.told.untrusted[root] = nil
  end
  local waiter = H.take_waiter('settings', root)
  return function()
    if closed then
      -- The broker's text names file:line:column and what is suspended.
      vim.notify('(acp) ' .. closed, vim.log.levels.ERROR)
    end
    if #errors > 0 then
      vim.notify('(acp) ' .. table.concat(errors, '; '), vim.log.levels.ERROR)
    end
    if #warnings > 0 then
      vim.notify('(acp) settings: ' .. table.concat(warnings, '; '), vim.log.levels.WARN)
    end
    if untrusted then
      local items = M.describe_permissive(st.permissive, { sources = false })
      local what = #items > 0 and (' (' .. H.shorten(items, 3) .. ')') or ''
      vim.notify(
        ("(acp) this project's settings allow more%s but are not trusted: :AcpTrust to review and enable them"):format(what),
        vim.log.levels.WARN
      )
    end
    if waiter then
      waiter(st)
    end
  end
end

function H.handlers.rules(d)
  local root = compat.str(d.root) or ''
  local waiter = H.take_waiter('rules', root)
  return function()
    if waiter then
      waiter(d)
    else
      require('acp.commands').show_rules(d)
    end
  end
end

function H.handlers.rule_added(d)
  local list, rule, scope = compat.str(d.list) or '?', compat.str(d.rule) or '?', compat.str(d.scope)
  local file = compat.str(d.file)
  local where
  if scope == 'session' then
    where = 'for this session'
  elseif file then
    where = 'to ' .. vim.fn.fnamemodify(file, ':~:.')
  else
    where = ('(%s)'):format(scope or '?')
  end
  local note = compat.str(d.note)
  return function()
    local msg = ('(acp) added %s rule %s %s'):format(list, rule, where)
    if note then
      vim.notify(msg .. '; ' .. note, vim.log.levels.WARN)
    else
      vim.notify(msg, vim.log.levels.INFO)
    end
  end
end

function H.handlers.trusted(d)
  local root = compat.str(d.root) or '?'
  local items = M.describe_permissive(d.enabled)
  return function()
    local what = #items > 0 and ('; now in force: ' .. table.concat(items, ', ')) or '; it enables nothing beyond the defaults'
    vim.notify(('(acp) trusted the settings of %s%s'):format(vim.fn.fnamemodify(root, ':~'), what), vim.log.levels.INFO)
  end
end

function H.handlers.error(d)
  -- A refused command gets this instead of the answer it waited for.
  H.waiters = {}
  return function()
    local who = compat.str(d.agent)
    local msg = compat.str(d.message) or 'unknown error'
    vim.notify(('(acp) %s%s'):format(who and (who .. ': ') or '', msg), vim.log.levels.ERROR)
    -- An answer the broker refused leaves its prompt pending: show it again.
    require('acp.prompt').on_error()
  end
end

function H.one_line(text)
  return text and vim.trim((text:gsub('%s+', ' '))) or ''
end

--- A list of the non-empty strings in `v` (a list from the broker, or nil).
function H.strings(v)
  local list = {}
  if type(v) == 'table' then
    for _, x in ipairs(v) do
      if compat.str(x) then
        list[#list + 1] = compat.str(x)
      end
    end
  end
  return list
end

--- The broker's failClosed value (settings files that cannot be used), or nil.
---@return acp.FailClosed|nil
function H.fail_closed(v)
  if type(v) ~= 'table' or compat.str(v.message) == nil then
    return nil
  end
  local files = {}
  for _, f in ipairs(type(v.files) == 'table' and v.files or {}) do
    if type(f) == 'table' and compat.str(f.file) then
      files[#files + 1] = {
        file = compat.str(f.file),
        error = compat.str(f.error) or compat.str(f.file),
        scope = compat.str(f.scope) or 'project',
      }
    end
  end
  return { message = compat.str(v.message), scope = compat.str(v.scope) or 'project', files = files }
end

--- The entries of `list` not in the set `seen` (which learns them).
function H.news(seen, list)
  local new = {}
  for _, x in ipairs(list) do
    if not seen[x] then
      seen[x] = true
      new[#new + 1] = x
    end
  end
  return new
end

function H.take_waiter(event, root)
  local now, keep, pick = compat.now_ms(), {}, nil
  for _, w in ipairs(H.waiters) do
    if now - w.t <= H.waiter_ms then
      keep[#keep + 1] = w
    end
  end
  -- The one about this root, else the oldest for this event (the broker may
  -- name the root differently than the command did).
  for _, w in ipairs(keep) do
    if w.event == event and w.root == root then
      pick = w
      break
    end
  end
  if pick == nil then
    for _, w in ipairs(keep) do
      if w.event == event then
        pick = w
        break
      end
    end
  end
  H.waiters = vim.tbl_filter(function(w)
    return w ~= pick
  end, keep)
  return pick and pick.fn
end

--- Why the broker decided: its reason, plus the rule and its file when the
--- reason does not name them.
--- The atoms of a permission or decided event, as the broker judged them.
---@param v any
---@return {kind: string, text: string, inner: boolean|nil}[]
function H.atoms(v)
  local out = {}
  for _, a in ipairs(type(v) == 'table' and v or {}) do
    if type(a) == 'table' and compat.str(a.text) then
      out[#out + 1] = { kind = compat.str(a.kind) or 'other', text = a.text, inner = a.inner == true }
    end
  end
  return out
end

--- The optionId that answers `req` with `what` ('allow' | 'reject'), as the
--- broker chose it (policy_pick_option): index and option, or nil (for
--- 'reject', nil means the answer is `cancelled`).
---@param req acp.Pending
---@param what 'allow'|'reject'
---@return integer|nil
---@return table|nil
function M.picked_option(req, what)
  local id = req.rejectOption
  if what == 'allow' then
    id = req.allowOption
  end
  for i, o in ipairs(id ~= nil and req.options or {}) do
    if o.optionId == id then
      return i, o
    end
  end
  return nil, nil
end

function H.why(d)
  local why = d.reason or (d.by and ('by ' .. d.by)) or 'no reason given'
  if d.rule and not why:find(d.rule, 1, true) then
    why = why .. ' (rule ' .. d.rule .. ')'
  end
  -- The broker's reasons name the file relative to the project root.
  local tail = d.source and d.source:match('[^/]+/[^/]+$') or d.source
  if d.source and not why:find(tail, 1, true) then
    local src = d.source:find('/', 1, true) and vim.fn.fnamemodify(d.source, ':~:.') or d.source
    why = why .. ' [' .. src .. ']'
  end
  return why
end

--- Echoes one line about automatic allows without a hit-enter prompt:
--- allows that come in a burst are folded into one message.
--- Echoes "acp: allowed {title}: {why}" for a decision; a burst within
--- 30 ms is one message counting them (formatted once, for the last).
function H.echo_allowed(data)
  H.allowed = H.allowed or { n = 0 }
  local a = H.allowed
  a.n, a.last = a.n + 1, data
  if a.timer then
    return
  end
  a.timer = true
  vim.defer_fn(function()
    local last = ('%s: %s'):format(H.one_line(a.last.title), H.why(a.last))
    local text = a.n > 1 and ('acp: %d requests allowed; last: %s'):format(a.n, last) or ('acp: allowed ' .. last)
    a.n, a.last, a.timer = 0, nil, false
    local max = vim.o.columns - 12
    if vim.fn.strdisplaywidth(text) > max then
      text = vim.fn.strcharpart(text, 0, math.max(1, max - 1)) .. '…'
    end
    vim.api.nvim_echo({ { text, 'None' } }, true, {})
  end, 30)
end

--- The first `n` items joined, with "…" when there are more.
function H.shorten(items, n)
  local head = {}
  for i = 1, math.min(n, #items) do
    head[i] = items[i]
  end
  return table.concat(head, ', ') .. (#items > n and ', …' or '')
end

--- Describes `p` into `items`. The broker sends `{["<file>"] = {allow =
--- {...}, defaultMode = 'acceptEdits', yolo = true}}`; lists, rule records
--- and strings are understood too. `list` is the rule list `p` belongs to,
--- `from` the file it comes from, when known.
function H.describe(p, list, items, sources, from)
  local function src(path)
    path = compat.str(path) or from
    return (sources and path) and (' (' .. vim.fn.fnamemodify(path, ':~:.') .. ')') or ''
  end
  if not compat.present(p) or p == false then
    return
  end
  if type(p) == 'string' then
    items[#items + 1] = ((list and list ~= 'allow') and (list .. ' ') or '') .. p .. src(nil)
  elseif type(p) ~= 'table' then
    items[#items + 1] = tostring(p) .. src(nil)
  elseif compat.islist(p) then
    for _, x in ipairs(p) do
      H.describe(x, list, items, sources, from)
    end
  elseif compat.str(p.rule) then
    local l = compat.str(p.list) or list
    items[#items + 1] = ((l and l ~= 'allow') and (l .. ' ') or '') .. p.rule .. src(p.source)
  else
    local keys = vim.tbl_keys(p)
    table.sort(keys, function(x, y)
      return tostring(x) < tostring(y)
    end)
    for _, k in ipairs(keys) do
      local v = p[k]
      if k == 'allow' or k == 'rules' then
        H.describe(v, 'allow', items, sources, from)
      elseif k == 'yolo' then
        if v == true then
          items[#items + 1] = 'yolo' .. src(nil)
        elseif compat.str(v) then
          items[#items + 1] = 'yolo' .. src(v)
        elseif type(v) == 'table' then
          items[#items + 1] = 'yolo' .. src(v.source)
        end
      elseif k == 'mode' or k == 'defaultMode' then
        if type(v) == 'table' then
          items[#items + 1] = 'mode ' .. tostring(compat.str(v.mode) or '?') .. src(v.source)
        elseif compat.str(v) then
          items[#items + 1] = 'mode ' .. v .. src(nil)
        end
      elseif type(v) == 'table' and not compat.islist(v) then
        -- Keyed by the file it comes from.
        H.describe(v, list, items, sources, tostring(k))
      elseif compat.present(v) and v ~= false then
        local ok, json = pcall(vim.fn.json_encode, v)
        items[#items + 1] = tostring(k) .. ': ' .. (ok and json or tostring(v)) .. src(nil)
      end
    end
  end
end

function H.session(id, agent)
  local s = M.sessions[id]
  if s == nil then
    s = { agent = compat.str(agent), tools = {}, tool_order = {} }
    M.sessions[id] = s
  end
  return s
end

--- `tool_call`, `tool_call_update` and a request's `toolCall` all upsert:
--- fields with a value replace the stored ones (content/locations whole).
function H.upsert_tool(s, u)
  local id = compat.str(u.toolCallId)
  if id == nil then
    return
  end
  local t = s.tools[id]
  if t == nil then
    t = { toolCallId = id }
    s.tools[id] = t
    table.insert(s.tool_order, id)
    if #s.tool_order > M.max_tools then
      s.tools[table.remove(s.tool_order, 1)] = nil
    end
  end
  for k, v in pairs(u) do
    if k ~= 'sessionUpdate' and compat.present(v) then
      t[k] = v
    end
  end
end

function H.remove_pending(id)
  M.pending[id] = nil
  for i, v in ipairs(M.order) do
    if v == id then
      table.remove(M.order, i)
      break
    end
  end
end

function H.log_user(pattern, data)
  M.log(pattern, data)
  return data
end

function H.resolved_effect(req, outcome, option_id, by)
  local data = {
    id = req.id,
    session = req.session,
    toolCallId = req.toolCallId,
    outcome = compat.str(outcome) or 'cancelled',
    optionId = compat.str(option_id),
    by = compat.str(by),
  }
  return function()
    require('acp.prompt').on_resolved(req.id)
    compat.fire_user('AcpPermissionResolved', H.log_user('AcpPermissionResolved', data))
  end
end

--- Resolves (cancelled) every pending prompt for which `pred(req)` holds;
--- returns the effect and the count.
function H.resolve_all(pred, by)
  local effects = {}
  for _, req in ipairs(M.pending_list()) do
    if pred(req) then
      H.remove_pending(req.id)
      effects[#effects + 1] = H.resolved_effect(req, 'cancelled', nil, by)
    end
  end
  return function()
    for _, e in ipairs(effects) do
      e()
    end
  end, #effects
end

--- An agent is gone (exit, crash or broker exit): its pending prompts are
--- cancelled, a running turn ends with 'error', then AcpAgentExit fires.
function H.agent_gone(name, d)
  local a = M.agents[name]
  M.agents[name] = nil
  if M.current == name then
    M.current = H.latest_agent()
  end
  local resolve, n = H.resolve_all(function(req)
    return req.agent == name
  end, d.by or 'agent_exit')
  n = n + (a.cancelled_by_exit or 0)
  for sid, s in pairs(M.sessions) do
    if s.agent == name then
      M.sessions[sid] = nil
    end
  end
  local turn_end = a.prompts > 0 and a.session ~= nil
  local exit_data = { agent = name, code = d.code, signal = d.signal }
  return function()
    resolve()
    if turn_end then
      local te = { session = a.session, stopReason = 'error', message = compat.str(d.message) or 'the agent exited' }
      compat.fire_user('AcpTurnEnd', H.log_user('AcpTurnEnd', te))
    end
    compat.fire_user('AcpAgentExit', H.log_user('AcpAgentExit', exit_data))
    if not d.quiet then
      H.notify_exit(a, d, n)
    end
  end
end

function H.notify_exit(a, d, n)
  local how
  if compat.present(d.signal) and d.signal ~= 0 and d.signal ~= '' then
    how = 'signal ' .. tostring(d.signal)
  else
    how = 'code ' .. tostring(compat.present(d.code) and d.code or '?')
  end
  local cancelled = ''
  if n > 0 then
    cancelled = ('; %d pending permission prompt%s %s cancelled'):format(n, n == 1 and '' or 's', n == 1 and 'was' or 'were')
  end
  if a.stopping then
    vim.notify(("(acp) agent '%s' stopped%s"):format(a.name, cancelled), vim.log.levels.INFO)
  else
    -- The broker's message often just repeats the status.
    local msg = compat.str(d.message)
    local extra = ''
    if msg and not msg:match('exited with code') and not msg:match('killed by signal') then
      extra = ': ' .. msg
    end
    if a.session == nil then
      -- Typically a missing sign-in or a bad flag: the agent's stderr is in the log.
      extra = extra .. ' before its session was ready; see ' .. require('acp.broker').log_path()
    end
    vim.notify(("(acp) agent '%s' exited (%s)%s%s"):format(a.name, how, extra, cancelled), vim.log.levels.WARN)
  end
end

--- The most recently started agent still alive.
function H.latest_agent()
  local best
  for name, a in pairs(M.agents) do
    if best == nil or (a.seq or 0) > (M.agents[best].seq or 0) then
      best = name
    end
  end
  return best
end

--- The first offered option of a kind ('allow_once', ...): index and option,
--- or nil. Agents offer several options of one kind; the first one wins.
---@param req {options: table[]}
---@param kind string
---@return integer|nil index
---@return table|nil option
function M.first_option(req, kind)
  for i, o in ipairs(req.options or {}) do
    if o.kind == kind then
      return i, o
    end
  end
  return nil, nil
end

return M
