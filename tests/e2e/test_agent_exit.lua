-- The agent dies while a prompt is open: the prompt closes, the person is
-- told, AcpPermissionResolved (cancelled), AcpTurnEnd (error) and
-- AcpAgentExit fire, nothing is busy, and :AcpStart works again.
local T = require('helpers')

local function agent_pid(name)
  return T.wait(function()
    local a = require('acp.state').agents[name]
    return a and a.pid
  end, nil, 'the pid of agent ' .. name)
end

-- Checks what must follow the death of the agent of ctx with a prompt open.
local function check_aftermath(ctx, ev, expect)
  T.wait(function()
    return #ev.exits == 1
  end, nil, 'AcpAgentExit')
  T.eq(ev.exits[1].agent, ctx.agent, 'AcpAgentExit agent')
  for k, v in pairs(expect) do
    T.eq(ev.exits[1][k], v, 'AcpAgentExit ' .. k)
  end
  T.wait(function()
    return #T.floats() == 0
  end, nil, 'the prompt window to close')
  T.eq(#ev.resolved, 1, 'AcpPermissionResolved count')
  T.eq(ev.resolved[1].outcome, 'cancelled', 'AcpPermissionResolved outcome')
  T.eq(#ev.turn_end, 1, 'AcpTurnEnd count')
  T.eq(ev.turn_end[1].stopReason, 'error', 'AcpTurnEnd stopReason')
  T.eq(type(ev.turn_end[1].message), 'string', 'type of AcpTurnEnd message')
  local st = require('acp').status()
  T.eq({ busy = st.busy, pending = st.pending }, { busy = false, pending = 0 }, 'status() after the exit')
  T.eq(require('acp').pending(), {}, 'pending()')
  T.contains(T.notes_text(), ctx.agent, 'messages to the person')
end

local function collect()
  return {
    exits = T.on('AcpAgentExit'),
    resolved = T.on('AcpPermissionResolved'),
    turn_end = T.on('AcpTurnEnd'),
  }
end

T.test('agent killed (SIGKILL) while a prompt is open', function()
  local ctx = T.start_demo('gemini.json')
  local ev = collect()
  local pid = agent_pid(ctx.agent)
  require('acp').prompt('Please create test.txt')
  T.wait_prompt('write_file__call_write_1')
  vim.loop.kill(pid, 9)
  check_aftermath(ctx, ev, { signal = 9 })
  T.ok(not T.exists(ctx.project .. '/test.txt'), 'test.txt must not exist')
  T.wait(function()
    return not T.alive(pid)
  end, nil, 'the agent process to be gone')
end)

T.test('agent exits with status 9 while its request is open (crash.json)', function()
  local ctx = T.start_demo('crash.json')
  local ev = collect()
  T.ok(require('acp').chat(), 'the chat opens')
  local chat_buf = vim.fn.bufnr(('acp://chat/%s/%s'):format(ctx.agent, ctx.session))
  T.ok(chat_buf > 0, 'the chat buffer')
  require('acp').prompt('Crash, please')
  T.wait_prompt('crash_write_1')
  check_aftermath(ctx, ev, { code = 9 })
  T.contains(T.notes_text(), '9', 'messages to the person mention the status')
  -- The agent's last stderr lines (the demo agent says each step there),
  -- and where the rest is.
  local note = T.notes_with('exited (code 9)')[1]
  T.ok(note, 'the exit notification: ' .. T.notes_text())
  T.contains(note, 'Its last stderr:\n', 'the stderr heading')
  T.contains(note, '  acp-demo-agent: scenario step: exit 9', 'the last stderr line')
  T.contains(note, 'Log: ' .. require('acp.config').log_path(), 'the log path')
  local n = 0
  for _ in note:gmatch('\n  ') do
    n = n + 1
  end
  T.ok(n >= 1 and n <= 5, 'at most five stderr lines: ' .. n)
  -- The chat says it too, in one line (the broker's message).
  T.wait(function()
    local t = table.concat(vim.api.nvim_buf_get_lines(chat_buf, 0, -1, false), '\n')
    return t:find('its last stderr: ', 1, true) and t:find('scenario step: exit 9', 1, true) and t:find('; log: ', 1, true)
  end, nil, 'the stderr lines and the log in the chat')
end)

T.test(':AcpStart works again after the agent died (a new session)', function()
  local ctx = T.start_demo('gemini.json')
  local ev = collect()
  local pid = agent_pid(ctx.agent)
  vim.loop.kill(pid, 9)
  T.wait(function()
    return #ev.exits == 1
  end, nil, 'AcpAgentExit')
  T.eq(require('acp').status().agent, nil, 'status().agent after the exit')

  vim.cmd('AcpStart')
  local session = T.wait(function()
    return require('acp').status().session
  end, nil, 'a new session after :AcpStart')
  T.ok(session ~= ctx.session, 'the new session differs from the old one: ' .. session)
  T.ok(require('acp').status().agent ~= nil, 'an agent runs again')
end)

T.test('start() with the same spec after a crash starts a new agent process', function()
  local ctx = T.start_demo('crash.json')
  local ev = collect()
  local pid = agent_pid(ctx.agent)
  require('acp').prompt('Crash, please')
  T.wait(function()
    return #ev.exits == 1
  end, nil, 'AcpAgentExit')
  local ctx2 = T.start_demo('gemini.json', { setup = false, project = ctx.project })
  T.ok(ctx2.session ~= ctx.session, 'a new session')
  T.ok(agent_pid(ctx2.agent) ~= pid, 'a new agent process')
  require('acp').prompt('Please create test.txt')
  T.answer_with_keys('write_file__call_write_1', 'a')
  T.eq(T.answer(ctx2, 'write_file__call_write_1').result.outcome.optionId, 'proceed_once', 'answer in the new session')
end)

T.done()
