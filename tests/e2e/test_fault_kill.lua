-- Fault injection: processes killed with SIGKILL.
--
-- * The agent, in the middle of a turn that is streaming (no prompt open):
--   the turn ends 'error', nothing stays busy, AcpAgentExit fires, and
--   :AcpStart starts it again. (test_agent_exit.lua kills it with a prompt
--   open; test_nvim_exit.lua kills Neovim.)
-- * The broker, while an agent runs and a prompt is open: Neovim tells the
--   person (naming the broker and its log), the prompt closes, the events
--   fire, status() is clean, the orphaned agent ends (it reads EOF), and
--   :AcpStart starts a new broker in which a session works.
-- * Neovim, while the agent's allowed command runs with a background child:
--   the broker and the agent's whole process group go (test_nvim_exit.lua
--   checks the broker and the agent within a second; this checks the
--   group, with a generous wait, and notes the time).
local T = require('helpers')
local broker_pid = T.broker_pid

local uv = vim.uv or vim.loop

local function agent_pid(name)
  return T.wait(function()
    local a = require('acp.state').agents[name]
    return a and a.pid
  end, nil, 'the pid of agent ' .. name)
end

local function collect()
  return {
    exits = T.on('AcpAgentExit'),
    resolved = T.on('AcpPermissionResolved'),
    turn_end = T.on('AcpTurnEnd'),
    requests = T.on('AcpPermissionRequest'),
  }
end

local function ask(tcid)
  return {
    type = 'permission',
    toolCall = { toolCallId = tcid, title = 'Write again.txt', kind = 'edit' },
    options = {
      { optionId = 'ok', name = 'Allow', kind = 'allow_once' },
      { optionId = 'no', name = 'Reject', kind = 'reject_once' },
    },
  }
end

-- Configures agent `faulty` (the default for :AcpStart) to play scenario,
-- and makes a fresh project the current directory; returns the transcript.
local function faulty_agent(scenario)
  local transcript = T.tmpname('transcript', '.jsonl')
  require('acp').setup({
    ui = { arm_ms = 50 },
    default_agent = 'faulty',
    agents = {
      faulty = {
        cmd = { os.getenv('ACP_DEMO_AGENT_BIN') },
        env = { ACP_DEMO_SCENARIO = T.scenario(scenario), ACP_DEMO_TRANSCRIPT = transcript },
      },
    },
  })
  local old = vim.fn.getcwd()
  vim.cmd('cd ' .. vim.fn.fnameescape(T.project()))
  T.defer(function()
    vim.cmd('cd ' .. vim.fn.fnameescape(old))
    require('acp').setup({ ui = { arm_ms = 50 } })
  end)
  return transcript
end

-- :AcpStart, then a prompt whose request tcid is answered 'ok'.
local function start_and_use(transcript, tcid)
  vim.cmd('AcpStart')
  local st = T.wait(function()
    local s = require('acp').status()
    return s.session and s
  end, nil, 'a session after :AcpStart')
  T.eq(st.agent, 'faulty', 'the agent :AcpStart started')
  require('acp').prompt('Once more')
  local p = T.wait_pending(tcid)
  T.ok(require('acp').respond(p.id, 'ok'), 'respond()')
  T.eq(T.answer({ transcript = transcript }, tcid).result, T.selected('ok'), 'the answer after the restart')
  T.idle()
  return st
end

T.test('agent killed (SIGKILL) while it streams a turn, no prompt open', function()
  -- 100 chunks, 100 ms apart: the turn streams for 10 s unless killed.
  local steps = {}
  for i = 1, 100 do
    steps[#steps + 1] = { type = 'message', text = ('Working, step %d. '):format(i) }
    steps[#steps + 1] = { type = 'sleep', ms = 100 }
  end
  local ctx = T.start_demo({ name = 'streaming', steps = steps })
  local ev = collect()
  local pid, bpid = agent_pid(ctx.agent), broker_pid()
  require('acp').prompt('Think for a while')
  -- Streaming: a few chunks have reached Lua.
  T.wait(function()
    local s = require('acp.state').sessions[ctx.session]
    return s and s.reply and s.reply:find('step 3', 1, true)
  end, nil, 'the streamed message in Lua')
  T.eq(require('acp').status().busy, true, 'busy while streaming')
  uv.kill(pid, 9)

  T.wait(function()
    return #ev.exits == 1
  end, nil, 'AcpAgentExit')
  T.eq({ ev.exits[1].agent, ev.exits[1].signal }, { ctx.agent, 9 }, '{agent, signal} of AcpAgentExit')
  T.wait(function()
    return #ev.turn_end == 1
  end, nil, 'AcpTurnEnd')
  T.eq(ev.turn_end[1].stopReason, 'error', 'stopReason')
  T.eq(type(ev.turn_end[1].message), 'string', 'type of the AcpTurnEnd message')
  T.never(function()
    return #ev.turn_end > 1 or #ev.exits > 1
  end, 300, 'a second AcpTurnEnd or AcpAgentExit')
  T.eq(#ev.resolved, 0, 'AcpPermissionResolved count (nothing was pending)')
  local st = require('acp').status()
  T.eq({ st.agent, st.session, st.busy, st.pending }, { nil, nil, false, 0 }, '{agent, session, busy, pending}')
  T.contains(T.notes_text(), ctx.agent, 'messages to the person')
  T.contains(T.notes_text(), 'signal 9', 'messages to the person')
  T.wait(function()
    return not T.alive(pid)
  end, nil, 'the agent process to be gone')
  T.eq(broker_pid(), bpid, 'the same broker')
  T.ok(T.alive(bpid), 'the broker is alive')

  -- :AcpStart starts the agent again, and a turn works.
  local transcript = faulty_agent({
    name = 'again',
    steps = { ask('again_${turn}'), { type = 'message', text = 'ok' } },
  })
  local again = start_and_use(transcript, 'again_1')
  T.ok(again.session ~= ctx.session, 'a new session: ' .. tostring(again.session))
  T.eq(broker_pid(), bpid, 'the same broker after :AcpStart')
end)

T.test('broker killed (SIGKILL) with a prompt open: the person is told, :AcpStart recovers', function()
  local ctx = T.start_demo('gemini.json')
  local ev = collect()
  local apid, bpid = agent_pid(ctx.agent), broker_pid()
  T.ok(bpid and T.alive(bpid), 'the broker runs')
  local log = require('acp.broker').log_path()
  require('acp').prompt('Please create test.txt')
  T.wait_prompt('write_file__call_write_1')
  T.notes = {}
  uv.kill(bpid, 9)

  -- Neovim sees the broker go and tells the person, once.
  T.wait(function()
    return require('acp.broker').chan == nil
  end, nil, 'the broker channel to close')
  T.wait(function()
    return #ev.exits == 1
  end, nil, 'AcpAgentExit')
  T.wait(function()
    return #T.floats() == 0
  end, nil, 'the prompt window to close')
  local told = {}
  for _, n in ipairs(T.notes) do
    if n.msg:find('broker', 1, true) then
      told[#told + 1] = n
    end
  end
  T.eq(#told, 1, 'messages about the broker: ' .. T.notes_text())
  T.contains(told[1].msg, log, 'the message names the log')
  T.contains(told[1].msg, ':AcpStart', 'the message says how to recover')
  T.eq(told[1].level, vim.log.levels.ERROR, 'its level')

  T.eq(#ev.resolved, 1, 'AcpPermissionResolved count')
  T.eq(ev.resolved[1].outcome, 'cancelled', 'AcpPermissionResolved outcome')
  T.eq(ev.resolved[1].toolCallId, 'write_file__call_write_1', 'AcpPermissionResolved toolCallId')
  T.eq(#ev.turn_end, 1, 'AcpTurnEnd count')
  T.eq(ev.turn_end[1].stopReason, 'error', 'AcpTurnEnd stopReason')
  T.eq(ev.exits[1].agent, ctx.agent, 'AcpAgentExit agent')
  local st = require('acp').status()
  T.eq({ st.agent, st.session, st.busy, st.pending }, { nil, nil, false, 0 }, '{agent, session, busy, pending}')
  T.eq(require('acp').pending(), {}, 'pending()')
  T.eq(require('acp.state').agents, {}, 'the mirror knows no agent')

  -- The orphaned agent reads EOF on stdin and exits, or (on a slow machine)
  -- Neovim kills what is left of its group 300 ms after the broker died;
  -- either way it is gone and nothing was allowed.
  T.wait(function()
    return not T.alive(apid)
  end, 5000, 'the old agent (pid ' .. apid .. ') to exit after the broker died')
  local exits = T.tr_events(T.transcript(ctx.transcript), 'exit')
  T.ok(#exits <= 1, 'at most one exit in the old agent transcript')
  if exits[1] then
    T.eq(exits[1].code, 0, 'the old agent exit code (end of input)')
  end
  T.ok(not T.exists(ctx.project .. '/test.txt'), 'test.txt must not exist')

  -- :AcpStart starts a new broker; a session works in it.
  local transcript = faulty_agent({ name = 'after-broker', steps = { ask('after_${turn}') } })
  start_and_use(transcript, 'after_1')
  local nb = broker_pid()
  T.ok(nb and nb ~= bpid and T.alive(nb), 'a new broker: ' .. tostring(nb))
end)

-- The process group of pid (field 5 of /proc/<pid>/stat), or nil.
local function child_lua(ch, code, ...)
  return vim.fn.rpcrequest(ch, 'nvim_exec_lua', code, { ... })
end

T.test('Neovim killed (SIGKILL) while the agent runs commands: its whole process group goes', function()
  -- A child Neovim (as in test_nvim_exit.lua) runs the demo agent, whose
  -- allowed command leaves a background process in the agent's group and
  -- waits on another: neither may outlive Neovim, nor may the terminal the
  -- broker runs the command in.
  local project = T.project()
  local transcript = T.tmpname('transcript', '.jsonl')
  local scenario = T.scenario({
    name = 'group',
    steps = {
      {
        type = 'permission',
        toolCall = { toolCallId = 'bg_${turn}', title = 'sleep in the background', kind = 'execute' },
        options = { { optionId = 'ok', name = 'Allow', kind = 'allow_once' } },
        on_allow = { type = 'run', command = 'sleep 300 & sleep 301' },
      },
    },
  })
  local argv = { vim.v.progpath, '--embed', '--headless', '--clean', '-u', T.dir .. '/minimal_init.lua' }
  local ch = vim.fn.jobstart(argv, { rpc = true })
  T.ok(ch > 0, 'jobstart of the child Neovim')
  T.defer(function()
    pcall(vim.fn.jobstop, ch)
  end)
  local nvim_pid = vim.fn.jobpid(ch)
  T.eq(
    child_lua(
      ch,
      [[
        local bin, scenario, transcript, cwd = ...
        require('acp').setup({ ui = { arm_ms = 50 } })
        return require('acp').start(
          { cmd = { bin }, env = { ACP_DEMO_SCENARIO = scenario, ACP_DEMO_TRANSCRIPT = transcript } },
          { cwd = cwd })
      ]],
      os.getenv('ACP_DEMO_AGENT_BIN'),
      scenario,
      transcript,
      project
    ),
    true,
    'start() in the child'
  )
  local info = T.wait(function()
    local r = child_lua(
      ch,
      [[
        local s = require('acp').status()
        local b = require('acp.broker')
        local a = require('acp.state').agents[s.agent or '']
        return { session = s.session, broker = b.chan and vim.fn.jobpid(b.chan) or nil, agent = a and a.pid or nil }
      ]]
    )
    return r.session and r.broker and r.agent and r
  end, nil, 'the session, broker pid and agent pid in the child')
  child_lua(ch, [[require('acp').prompt('Sleep, please')]])
  T.wait(function()
    return child_lua(
      ch,
      [[
        local p = require('acp').pending()[1]
        return p ~= nil and require('acp').respond(p.id, 'ok')
      ]]
    )
  end, nil, 'the prompt in the child, answered')
  -- The agent leads its own group (the broker starts it with setsid); the
  -- command's shell and both sleeps are in the group of the terminal the
  -- broker runs it in (also its own).
  T.eq(T.pgrp(info.agent), info.agent, 'the agent leads its process group')
  local seen = T.wait(function()
    local sessions = child_lua(ch, [[return require('acp.state').sessions]])
    local g = T.agent_groups(info.agent, sessions)
    local m = T.group_members(g)
    return #g >= 2 and #m >= 4 and { members = m, groups = g }
  end, nil, 'the agent and its command in their process groups')
  local members, groups = seen.members, seen.groups

  vim.loop.kill(nvim_pid, 9)
  local t0 = vim.loop.hrtime()
  T.wait(function()
    return not T.alive(nvim_pid)
  end, nil, 'the child Neovim to exit')
  T.wait(function()
    return not T.alive(info.broker) and #T.group_members(groups) == 0
  end, 5000, ('the broker (%d) and the process groups %s %s to be gone'):format(
    info.broker,
    vim.inspect(groups),
    vim.inspect(members)
  ))
  local ms = (vim.loop.hrtime() - t0) / 1e6
  local out = os.getenv('ACP_TEST_OUT')
  if out and out ~= '' then
    local f = assert(io.open(out, 'a'))
    f:write(('# process group of %d processes gone %.0f ms after SIGKILL of Neovim\n'):format(#members, ms))
    f:close()
  end
end)

T.done()
