-- A tiny test framework for headless Neovim (0.7.2 and later).
--
--   local T = require('helpers')
--   T.test('allow writes the file', function()
--     ...
--     T.wait(function() return T.find_float() end, 5000, 'the prompt float')
--     T.eq(actual, expected, 'what is compared')
--   end)
--   T.done()
--
-- Results go, one TAP line per test, to the file named by $ACP_TEST_OUT
-- (stdout of a headless nvim is unreliable); tests/e2e/run_one.sh prints it.
-- Tests wait on conditions (T.wait), never on bare sleeps.

local M = {}

local uv = vim.uv or vim.loop
local api = vim.api

local out_path = os.getenv('ACP_TEST_OUT')

--- This directory (tests/e2e), absolute.
M.dir = vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':p:h')
local failures = 0
local count = 0
local finished = false
local deferred = {}

-- The marker run_one.sh looks for: a file whose output lacks it did not finish.
M.DONE_MARKER = '# acp-e2e: done'

M.timeout = 5000 -- default for T.wait, in ms

local function emit(line)
  if out_path and out_path ~= '' then
    local f = assert(io.open(out_path, 'a'))
    f:write(line, '\n')
    f:close()
  else
    io.stdout:write(line, '\n')
  end
end

-- A traceback without the frames of this framework (from its xpcall down).
local function trim(err)
  local s = tostring(err)
  local cut = s:find('\n%s*%[C%]: in function \'xpcall\'')
  if cut then
    s = s:sub(1, cut - 1)
  end
  return (s:gsub('\n%s*%[C%]: in function \'error\'', ''))
end

local function one_line(s)
  return (tostring(s):gsub('[\r\n]+', ' '))
end

-- Dump of the plugin's event log (if it keeps one), for failure messages.
local function events_dump(max)
  local ok, state = pcall(require, 'acp.state')
  if not ok or type(state) ~= 'table' or type(state.logged) ~= 'function' then
    return '(no acp.state.logged)'
  end
  local ev = state.logged()
  local first = math.max(1, #ev - (max or 40) + 1)
  local lines = { string.format('acp.state.logged() (%d, last %d):', #ev, #ev - first + 1) }
  for i = first, #ev do
    lines[#lines + 1] = '  ' .. one_line(vim.inspect(ev[i], { newline = ' ', indent = '' }))
  end
  return table.concat(lines, '\n')
end
M.events_dump = events_dump

-- vim.notify capture: every test starts with an empty list.
M.notes = {}
local real_notify = vim.notify
vim.notify = function(msg, level, opts)
  M.notes[#M.notes + 1] = { msg = tostring(msg), level = level }
  return real_notify(msg, level, opts)
end

-- Deprecated Neovim features used by the plugin or by the tests: every call
-- of vim.deprecate whose traceback passes through this repository (0.12
-- prints the hard deprecations and records even the soft ones for
-- :checkhealth vim.deprecated). M.done() fails the file on any, and on an
-- "is deprecated" line in :messages.
local root = vim.fn.fnamemodify(M.dir, ':h:h')
local deprecations = {}
local real_deprecate = vim.deprecate
vim.deprecate = function(name, ...)
  local where = debug.traceback('', 2)
  if where:find(root, 1, true) then
    deprecations[#deprecations + 1] = tostring(name) .. where
  end
  return real_deprecate(name, ...)
end

--- Messages given to vim.notify since the test began, joined by newlines.
function M.notes_text()
  local t = {}
  for _, n in ipairs(M.notes) do
    t[#t + 1] = n.msg
  end
  return table.concat(t, '\n')
end

--- The messages given to vim.notify since the test began that contain sub
--- (at `level` when given).
function M.notes_with(sub, level)
  local r = {}
  for _, n in ipairs(M.notes) do
    if n.msg:find(sub, 1, true) and (level == nil or n.level == level) then
      r[#r + 1] = n.msg
    end
  end
  return r
end

--- Run fn after the current test (last registered runs first).
function M.defer(fn)
  deferred[#deferred + 1] = fn
end

local function run_deferred()
  local errs = {}
  while #deferred > 0 do
    local fn = table.remove(deferred)
    local ok, err = xpcall(fn, debug.traceback)
    if not ok then
      errs[#errs + 1] = 'cleanup: ' .. tostring(err)
    end
  end
  return errs
end

--- Run fn as one test; record `ok - name` or `not ok - name` with the error.
function M.test(name, fn)
  count = count + 1
  M.notes = {}
  local t0 = uv.hrtime()
  local ok, err = xpcall(fn, debug.traceback)
  local cerrs = run_deferred()
  if ok and #cerrs > 0 then
    ok, err = false, table.concat(cerrs, '\n')
  end
  local ms = math.floor((uv.hrtime() - t0) / 1e6)
  if ok then
    emit(string.format('ok - %s # %d ms', name, ms))
  else
    failures = failures + 1
    emit(string.format('not ok - %s # %d ms', name, ms))
    for line in (trim(err) .. '\n'):gmatch('([^\n]*)\n') do
      emit('#   ' .. line)
    end
  end
  return ok
end

--- Wait until cond() returns a truthy value, at most timeout_ms; returns that
--- value. On timeout raises an error naming `what` with the plugin's events.
--- An error raised by cond counts as "not yet" and is reported on timeout.
function M.wait(cond, timeout_ms, what)
  timeout_ms = timeout_ms or M.timeout
  local value, last_err
  local done = vim.wait(timeout_ms, function()
    local ok, v = pcall(cond)
    if ok then
      value = v
      return v and true or false
    end
    last_err = v
    return false
  end, 10)
  if done then
    return value
  end
  local msg = string.format('timed out after %d ms waiting for %s', timeout_ms, what or 'a condition')
  if last_err then
    msg = msg .. '\nlast error from the condition: ' .. tostring(last_err)
  end
  error(msg .. '\n' .. events_dump(), 2)
end

--- Assert that cond() stays falsy for ms milliseconds (for "nothing happens").
function M.never(cond, ms, what)
  local hit = vim.wait(ms, function()
    local ok, v = pcall(cond)
    return ok and v and true or false
  end, 10)
  if hit then
    error(string.format('did not expect %s (within %d ms)\n%s', what or 'the condition', ms, events_dump()), 2)
  end
end

--- Deep compare: actual, expected.
function M.eq(actual, expected, what)
  if not vim.deep_equal(actual, expected) then
    error(
      string.format('%s: expected %s, got %s', what or 'values differ', vim.inspect(expected), vim.inspect(actual)),
      2
    )
  end
end

--- Assert a truthy value; returns it.
function M.ok(v, what)
  if not v then
    error((what or 'assertion failed') .. ': got ' .. vim.inspect(v), 2)
  end
  return v
end

--- Assert that string s contains the plain text sub.
function M.contains(s, sub, what)
  if type(s) ~= 'string' or not s:find(sub, 1, true) then
    error(string.format('%s: %s does not contain %s', what or 'text', vim.inspect(s), vim.inspect(sub)), 2)
  end
end

--- Every floating window (any tab page).
function M.floats()
  local wins = {}
  for _, w in ipairs(api.nvim_list_wins()) do
    local ok, cfg = pcall(api.nvim_win_get_config, w)
    if ok and cfg.relative and cfg.relative ~= '' then
      wins[#wins + 1] = w
    end
  end
  return wins
end

--- The first floating window, or nil.
function M.find_float()
  return M.floats()[1]
end

--- The text of a window's buffer, lines joined by newlines.
function M.win_text(win)
  local buf = api.nvim_win_get_buf(win)
  return table.concat(api.nvim_buf_get_lines(buf, 0, -1, false), '\n')
end

--- Type keys as the person would (termcodes replaced, mappings apply). mode
--- defaults to 'x' (execute now); 'mt' only queues them in typeahead, as if
--- typed, until Neovim next reads input (or T.feed('', 'x')). Note that 'n'
--- means "no remap" and would bypass the prompt's mappings.
function M.feed(keys, mode)
  api.nvim_feedkeys(api.nvim_replace_termcodes(keys, true, false, true), mode or 'x', false)
end

--- The demo agent's transcript: one decoded JSON object per line, e.g.
--- {dir = 'in'|'out', msg = {...}} or {event = 'wrote'|'ran'|'exit'|'sigterm', ...}.
--- A partly written last line is skipped. Uses vim.fn.json_decode (no vim.json on 0.7).
function M.transcript(path)
  local list = {}
  local f = io.open(path, 'r')
  if not f then
    return list
  end
  for line in f:lines() do
    if line ~= '' then
      local ok, v = pcall(vim.fn.json_decode, line)
      if ok then
        list[#list + 1] = v
      end
    end
  end
  f:close()
  return list
end

--- Messages in a transcript, filtered: dir 'in' (to the agent) or 'out'
--- (from the agent), and optionally by method.
function M.messages(tr, dir, method)
  local r = {}
  for _, e in ipairs(tr) do
    if e.dir == dir and type(e.msg) == 'table' and (method == nil or e.msg.method == method) then
      r[#r + 1] = e.msg
    end
  end
  return r
end

--- The text of the first block of each session/prompt the demo agent of ctx
--- received, in order.
function M.prompts(ctx)
  local list = {}
  for _, m in ipairs(M.messages(M.transcript(ctx.transcript), 'in', 'session/prompt')) do
    list[#list + 1] = m.params.prompt[1].text
  end
  return list
end

--- The text of every agent_message_chunk the demo agent of ctx sent (its
--- transcript), joined.
function M.agent_text(ctx)
  local text = ''
  for _, m in ipairs(M.messages(M.transcript(ctx.transcript), 'out')) do
    local u = m.params and m.params.update
    if type(u) == 'table' and u.sessionUpdate == 'agent_message_chunk' then
      text = text .. u.content.text
    end
  end
  return text
end

--- The permission requests the agent sent, each with the answer it received:
--- {{request = msg, response = msg|nil}, ...} in the order sent. Ids are
--- matched with their JSON type (0 and "0" differ).
function M.permissions(tr)
  local r = {}
  for _, req in ipairs(M.messages(tr, 'out', 'session/request_permission')) do
    local entry = { request = req }
    for _, resp in ipairs(M.messages(tr, 'in')) do
      if resp.method == nil and resp.id == req.id and type(resp.id) == type(req.id) then
        entry.response = resp
        break
      end
    end
    r[#r + 1] = entry
  end
  return r
end

--- Transcript events (lines with an "event" key) named name.
function M.tr_events(tr, name)
  local r = {}
  for _, e in ipairs(tr) do
    if e.event == name then
      r[#r + 1] = e
    end
  end
  return r
end

local project_n = 0
--- A fresh, empty project directory under $TMPDIR (run_one.sh gives each
--- test file its own). Returns its absolute, resolved path.
function M.project()
  project_n = project_n + 1
  local base = os.getenv('TMPDIR')
  if not base or base == '' then
    base = '/tmp'
  end
  local dir = assert(uv.fs_mkdtemp(base .. '/project-' .. project_n .. '-XXXXXX'))
  return uv.fs_realpath(dir) or dir
end

function M.exists(path)
  return uv.fs_stat(path) ~= nil
end

function M.read(path)
  local f = io.open(path, 'r')
  if not f then
    return nil
  end
  local s = f:read('*a')
  f:close()
  return s
end

--- Is process pid alive (a zombie counts as gone)?
function M.alive(pid)
  if type(pid) ~= 'number' or pid <= 0 then
    return false
  end
  local f = io.open('/proc/' .. pid .. '/stat', 'r')
  if f then
    local s = f:read('*a') or ''
    f:close()
    local state = s:match('%) (%a)')
    return state ~= nil and state ~= 'Z' and state ~= 'X'
  end
  return uv.kill(pid, 0) == 0
end

--- Collect the data of User autocmd `event` (e.g. 'AcpAgentExit') from now on
--- until the current test ends. Data comes from the autocmd (Neovim >= 0.8) or
--- vim.g.acp_last_event (0.7).
function M.on(event)
  local list = {}
  local group = api.nvim_create_augroup('acp_e2e_' .. event .. '_' .. count, { clear = true })
  api.nvim_create_autocmd('User', {
    group = group,
    pattern = event,
    callback = function(args)
      local data = args.data
      if data == nil then
        local last = vim.g.acp_last_event
        if type(last) == 'table' and last.event == event then
          data = last.data
        end
      end
      list[#list + 1] = data or {}
    end,
  })
  M.defer(function()
    pcall(api.nvim_del_augroup_by_id, group)
  end)
  return list
end

-- Driving the plugin with the demo agent ========================================

local tmp_n = 0
--- A fresh file name under $TMPDIR (not created).
function M.tmpname(prefix, ext)
  tmp_n = tmp_n + 1
  local base = os.getenv('TMPDIR')
  if not base or base == '' then
    base = '/tmp'
  end
  return string.format('%s/%s-%d-%d%s', base, prefix, vim.fn.getpid(), tmp_n, ext or '')
end

--- Path of a scenario: a file name in tests/scenarios, an absolute path, or a
--- table (a scenario document, written to a temporary file).
function M.scenario(s)
  if type(s) == 'table' then
    local path = M.tmpname('scenario', '.json')
    local f = assert(io.open(path, 'w'))
    f:write(vim.fn.json_encode(s))
    f:close()
    return path
  end
  if s:sub(1, 1) == '/' then
    return s
  end
  return assert(os.getenv('ACP_SCENARIOS'), 'ACP_SCENARIOS not set') .. '/' .. s
end

--- Starts the demo agent on `scenario` in a fresh project and waits for its
--- session. opts: setup (table for require('acp').setup, default
--- {ui = {arm_ms = 50}}; false = leave the config alone), project (dir).
--- Returns ctx = {project, transcript (path), session, agent}. The agent is
--- stopped when the test ends.
function M.start_demo(scenario, opts)
  opts = opts or {}
  local acp = require('acp')
  if opts.setup ~= false then
    acp.setup(opts.setup or { ui = { arm_ms = 50 } })
  end
  local ctx = {
    project = opts.project or M.project(),
    transcript = M.tmpname('transcript', '.jsonl'),
    scenario = M.scenario(scenario),
  }
  M.defer(M.stop_all)
  local ok, err = acp.start({
    cmd = { (assert(os.getenv('ACP_DEMO_AGENT_BIN'), 'ACP_DEMO_AGENT_BIN not set')) },
    env = { ACP_DEMO_SCENARIO = ctx.scenario, ACP_DEMO_TRANSCRIPT = ctx.transcript },
  }, { cwd = ctx.project })
  M.ok(ok, 'require("acp").start() failed: ' .. tostring(err))
  ctx.agent = acp.status().agent
  local state = require('acp.state')
  local r = M.wait(function()
    if state.agents[ctx.agent] == nil then
      return 'exited'
    end
    return acp.status().session
  end, M.timeout, 'status().session after start()')
  if r == 'exited' then
    error('the agent exited before its session existed; messages:\n' .. M.notes_text() .. '\n' .. events_dump(), 2)
  end
  ctx.session = r
  return ctx
end

--- Stops every agent and waits until the plugin has seen them exit; closes
--- floating windows left open. Used after each test that starts an agent.
function M.stop_all()
  local state = package.loaded['acp.state']
  if state then
    for name in pairs(state.agents) do
      pcall(require('acp').stop, name)
    end
    M.wait(function()
      return next(state.agents) == nil
    end, M.timeout, 'every agent to exit after stop()')
  end
  for _, w in ipairs(M.floats()) do
    pcall(api.nvim_win_close, w, true)
  end
end

--- Permission requests in ctx's transcript whose toolCallId is tcid, with
--- their answers (see M.permissions).
function M.requests(ctx, tcid)
  local r = {}
  for _, p in ipairs(M.permissions(M.transcript(ctx.transcript))) do
    local params = type(p.request.params) == 'table' and p.request.params or {}
    local tc = type(params.toolCall) == 'table' and params.toolCall or {}
    if tcid == nil or tc.toolCallId == tcid then
      r[#r + 1] = p
    end
  end
  return r
end

--- Waits until the agent has received the answer to its request about tool
--- call tcid; returns the response message ({id=, result=} or {id=, error=}).
function M.answer(ctx, tcid, timeout)
  return M.wait(function()
    local p = M.requests(ctx, tcid)[1]
    return p and p.response
  end, timeout, 'the answer to the request for ' .. tcid .. ' in the transcript')
end

--- Waits until acp.pending() holds a prompt for tool call tcid; returns it.
function M.wait_pending(tcid, timeout)
  return M.wait(function()
    for _, p in ipairs(require('acp').pending()) do
      if p.toolCallId == tcid then
        return p
      end
    end
  end, timeout, 'a pending prompt for ' .. tcid)
end

--- The decoded lines of the audit log ($XDG_STATE_HOME/acp-broker/audit.jsonl),
--- oldest first; {} when there is none yet.
function M.audit_lines()
  local path = (os.getenv('XDG_STATE_HOME') or (os.getenv('HOME') .. '/.local/state')) .. '/acp-broker/audit.jsonl'
  local lines = {}
  local f = io.open(path, 'r')
  if f then
    for line in f:lines() do
      lines[#lines + 1] = vim.fn.json_decode(line)
    end
    f:close()
  end
  return lines
end

--- Waits for the prompt window (a focused float showing pending prompt tcid,
--- when given); returns the window.
function M.wait_prompt(tcid, timeout)
  return M.wait(function()
    local cur = require('acp.prompt').current()
    if cur == nil or not api.nvim_win_is_valid(cur.win) then
      return nil
    end
    if tcid ~= nil then
      local p = require('acp.state').pending[cur.id]
      if p == nil or p.toolCallId ~= tcid then
        return nil
      end
    end
    return cur.win
  end, timeout, 'the prompt window' .. (tcid and (' for ' .. tcid) or ''))
end

--- Waits until ms have passed since now (the prompt's arming delay; not a
--- sleep standing in for a condition).
function M.wait_ms(ms)
  local t0 = uv.hrtime()
  vim.wait(ms + 1000, function()
    return (uv.hrtime() - t0) / 1e6 >= ms
  end, 5)
end

--- Waits for the prompt of tcid, checks it has focus, lets the arming delay
--- pass and types keys into it.
function M.answer_with_keys(tcid, keys, arm_ms)
  local win = M.wait_prompt(tcid)
  M.eq(api.nvim_get_current_win(), win, 'the prompt window has focus')
  M.wait_ms((arm_ms or require('acp.config').get().ui.arm_ms) + 30)
  M.feed(keys)
  return win
end

--- The JSON-RPC result of choosing option_id.
function M.selected(option_id)
  return { outcome = { outcome = 'selected', optionId = option_id } }
end

--- Writes text to path, creating its directory.
function M.write(path, text)
  vim.fn.mkdir(vim.fn.fnamemodify(path, ':h'), 'p')
  local f = assert(io.open(path, 'w'))
  f:write(text)
  f:close()
end

--- A scenario step: a Claude-shaped shell permission request
--- (rawInput.command, announced first), with Claude's options unless
--- options are given. It runs nothing when allowed.
function M.shell_request(tcid, command, options)
  return {
    type = 'permission',
    announce = true,
    toolCall = { toolCallId = tcid, title = command, kind = 'execute', rawInput = { command = command } },
    options = options or {
      { kind = 'allow_always', name = 'Always Allow', optionId = 'allow_always' },
      { kind = 'allow_once', name = 'Allow', optionId = 'allow' },
      { kind = 'reject_once', name = 'Reject', optionId = 'reject' },
    },
  }
end

--- Waits for the running turn to end.
function M.idle()
  M.wait(function()
    return not require('acp').status().busy
  end, nil, 'the turn to end')
end

--- A TAP comment line in the results (measured figures).
function M.note(fmt, ...)
  local out = os.getenv('ACP_TEST_OUT')
  local line = '# ' .. fmt:format(...)
  if out and out ~= '' then
    local f = assert(io.open(out, 'a'))
    f:write(line, '\n')
    f:close()
  else
    print(line)
  end
end

--- The pid of the running broker, or nil.
function M.broker_pid()
  local chan = require('acp.broker').chan
  return chan and vim.fn.jobpid(chan) or nil
end

--- A "<field>: N kB" value of /proc/<pid>/status (VmHWM, VmRSS), in KiB.
function M.status_kib(pid, field)
  local s = M.read('/proc/' .. pid .. '/status') or ''
  return tonumber(s:match(field .. ':%s*(%d+) kB'))
end

-- Restarts the broker so that its peak memory (VmHWM) is this test's own.
function M.fresh_broker()
  local broker = require('acp.broker')
  if broker.chan then
    M.stop_all()
    broker.shutdown()
    M.wait(function()
      return broker.chan == nil
    end, nil, 'the broker to exit')
  end
  M.ok(broker.ensure(), 'the broker starts')
  local pid = M.wait(M.broker_pid, nil, 'the broker pid')
  M.wait(function()
    return broker.info and broker.info.pid == pid
  end, nil, 'the ready event of the new broker')
  return pid, M.wait(function()
    return M.status_kib(pid, 'VmHWM')
  end, nil, 'VmHWM of the broker')
end

--- The window-local value of option `name` of window `win` ('' when only
--- the global value applies; `vim.wo` gives the value in effect from 0.12).
--- Highlight groups of the extmarks of namespace `ns_name` on 0-based `row`
--- of `buf`.
function M.hl_groups(buf, ns_name, row)
  local ns = vim.api.nvim_get_namespaces()[ns_name]
  local list = {}
  for _, m in ipairs(vim.api.nvim_buf_get_extmarks(buf, ns, { row, 0 }, { row, -1 }, { details = true })) do
    list[#list + 1] = m[4].hl_group
  end
  return list
end

--- Windows of the current tab page showing `buf`.
function M.windows(buf)
  local list = {}
  for _, w in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    if vim.api.nvim_win_get_buf(w) == buf then
      list[#list + 1] = w
    end
  end
  return list
end

--- Closes every window but the current one when the test ends (tests open
--- splits).
function M.only()
  M.defer(function()
    vim.cmd('silent! only!')
  end)
end

function M.win_local(win, name)
  if vim.fn.has('nvim-0.10') == 1 then
    return api.nvim_get_option_value(name, { win = win, scope = 'local' })
  end
  return api.nvim_win_get_option(win, name)
end

--- Write the results and quit: exit code 0 when every test passed, else 1.
function M.done()
  if finished then
    return
  end
  finished = true
  if count == 0 then
    failures = failures + 1
    emit('not ok - no tests ran')
  end
  local messages = vim.fn.execute('messages')
  if #deprecations > 0 or messages:find('is deprecated', 1, true) then
    failures = failures + 1
    emit('not ok - no deprecated Neovim feature is used (:checkhealth vim.deprecated)')
    local text = table.concat(deprecations, '\n') .. '\n:messages:' .. messages
    for line in (text .. '\n'):gmatch('([^\n]*)\n') do
      emit('#   ' .. line)
    end
  end
  emit(M.DONE_MARKER)
  if failures > 0 then
    vim.cmd('cquit')
  else
    vim.cmd('qa!')
  end
end

--- Used by run_one.sh: run a test file; an error outside T.test fails it.
function M.run_file(path)
  local ok, err = xpcall(function()
    dofile(path)
  end, debug.traceback)
  if not ok then
    count = count + 1
    failures = failures + 1
    emit('not ok - ' .. vim.fn.fnamemodify(path, ':t') .. ': error outside a test')
    for line in (trim(err) .. '\n'):gmatch('([^\n]*)\n') do
      emit('#   ' .. line)
    end
  end
  M.done()
end

--- The process group of pid (from /proc), or nil.
function M.pgrp(pid)
  local s = M.read('/proc/' .. pid .. '/stat')
  local after = s and s:match('%) (.*)')
  return after and tonumber(select(3, after:match('(%S+) (%S+) (%S+)')))
end

--- The live processes in any of the process groups (a pgid or a list).
function M.group_members(groups)
  if type(groups) ~= 'table' then
    groups = { groups }
  end
  local want = {}
  for _, g in ipairs(groups) do
    want[g] = true
  end
  local pids = {}
  for _, name in ipairs(vim.fn.readdir('/proc')) do
    local pid = tonumber(name)
    local g = pid and M.pgrp(pid)
    if g and want[g] and M.alive(pid) then
      pids[#pids + 1] = pid
    end
  end
  return pids
end

--- The process groups of the agent and of the terminals it has running,
--- from the Lua mirror (`state` may be a table returned by a child Neovim).
function M.agent_groups(agent_pid, sessions)
  local groups = { agent_pid }
  for _, s in pairs(sessions or require('acp.state').sessions) do
    for _, t in pairs(s.terminals or {}) do
      if type(t.pid) == 'number' then
        groups[#groups + 1] = t.pid
      end
    end
  end
  return groups
end

--- A raw JSON-RPC request step for the demo agent (variables such as
--- ${session} and ${cwd} are expanded by the agent).
function M.raw_request(id, method, params)
  return {
    type = 'raw',
    line = vim.fn.json_encode({ jsonrpc = '2.0', id = id, method = method, params = params }),
  }
end

--- Waits until the client has answered the agent's request with this id
--- (same JSON type); returns the response message.
function M.response_to(ctx, id, timeout)
  return M.wait(function()
    for _, m in ipairs(M.messages(M.transcript(ctx.transcript), 'in')) do
      if m.method == nil and m.id == id and type(m.id) == type(id) then
        return m
      end
    end
  end, timeout, 'the answer to request ' .. tostring(id) .. ' in the transcript')
end

return M
