-- terminal/* (design §9): commands run in their own process group; output
-- is kept up to the agent's outputByteLimit (the oldest dropped first, at
-- a character boundary); kill, wait_for_exit, exit codes, env and args;
-- release of a running terminal kills it; an agent's terminals die with it.
local T = require('helpers')

local function ran(tr, pattern)
  for _, e in ipairs(T.tr_events(tr, 'ran')) do
    if tostring(e.command):find(pattern, 1, true) then
      return e
    end
  end
end

local function terminals(session)
  local s = require('acp.state').sessions[session]
  return s and s.terminals or {}
end

T.test('output limit, kill, exit status, env and args, release while running', function()
  local ctx = T.start_demo('terminal.json', {
    setup = {
      ui = { arm_ms = 50 },
      permissions = { allow = { 'Bash(printenv DEMO_GREETING)', 'Bash(sleep 30)' } },
    },
  })
  require('acp').prompt('Run the commands')
  T.answer_with_keys('term_seq_1', 'a')
  T.answer_with_keys('term_exit_1', 'a')
  T.idle()
  local tr = T.transcript(ctx.transcript)

  local seq = ran(tr, 'seq 1 100000')
  T.ok(seq, 'seq ran through a terminal')
  T.eq(seq.via, 'terminal', 'via')
  T.eq(seq.exit, 0, 'seq exit code')
  T.eq(seq.truncated, true, 'truncated')
  T.ok(#seq.output <= 1000 and #seq.output > 900, 'at most 1000 bytes kept, about that many: ' .. #seq.output)
  T.ok(seq.output:sub(-7) == '100000\n', 'the newest output is kept (the oldest dropped)')

  local killed = ran(tr, 'sleep 30')
  T.ok(killed, 'sleep 30 ran')
  T.eq(killed.signal, 'SIGKILL', 'terminal/kill ended it')
  T.eq(killed.exit, vim.NIL, 'no exit code when killed')

  local failing = ran(tr, 'exit 3')
  T.eq(failing.exit, 3, 'exit code 3 reported')
  T.eq(failing.output, 'failing\n', 'its output')

  local env = ran(tr, 'printenv')
  T.ok(env, 'printenv ran (allowed by a rule, without asking)')
  T.eq(env.output, 'hello from the scenario\n', 'env given to terminal/create reached the command')

  -- Every terminal Lua heard of has ended: released while running means
  -- killed, and no process of any terminal group is left.
  local pids = {}
  for _, t in pairs(terminals(ctx.session)) do
    pids[#pids + 1] = t.pid
  end
  T.ok(#pids >= 5, 'terminal events for each command: ' .. #pids)
  T.wait(function()
    return #T.group_members(pids) == 0
  end, nil, 'every terminal process group to be gone')
end)

T.test("an agent's running terminals are killed when it stops", function()
  local ctx = T.start_demo({
    name = 'terminal-stop',
    steps = {
      {
        type = 'permission',
        toolCall = { toolCallId = 'long_${turn}', title = 'sleep 60', kind = 'execute', rawInput = { command = 'sleep 60' } },
        options = { { optionId = 'ok', name = 'Allow', kind = 'allow_once' } },
        on_allow = { type = 'run', command = 'sleep 60' },
      },
    },
  })
  require('acp').prompt('Sleep')
  T.answer_with_keys('long_1', 'a')
  local pid = T.wait(function()
    for _, t in pairs(terminals(ctx.session)) do
      if #T.group_members(t.pid) > 0 then
        return t.pid
      end
    end
  end, nil, 'the terminal running sleep 60')
  require('acp').stop()
  T.wait(function()
    return #T.group_members(pid) == 0
  end, nil, 'the terminal group to be gone after stop()')
end)

T.done()
