-- Neovim goes away: the broker and the agent must be gone within a second,
-- with no orphan left, and the pending request answered cancelled.
--
-- The Neovim under test is a child (`--embed --headless`, same minimal init)
-- driven over RPC; it starts the demo agent, gets a prompt, and is then
-- ended with :qa! or SIGKILL.
local T = require('helpers')

local GONE_MS = 1000

local function child_lua(ch, code, ...)
  return vim.fn.rpcrequest(ch, 'nvim_exec_lua', code, { ... })
end

--- Starts a child Neovim with the demo agent and one pending prompt.
--- Returns {ch, nvim_pid, broker_pid, agent_pid, transcript}.
local function child_with_prompt()
  local c = { transcript = T.tmpname('transcript', '.jsonl') }
  c.ch = vim.fn.jobstart({ vim.v.progpath, '--embed', '--headless', '--clean', '-u', T.dir .. '/minimal_init.lua' }, {
    rpc = true,
  })
  T.ok(c.ch > 0, 'jobstart of the child Neovim returned ' .. tostring(c.ch))
  T.defer(function()
    pcall(vim.fn.jobstop, c.ch)
  end)
  c.nvim_pid = vim.fn.jobpid(c.ch)
  local ok = child_lua(
    c.ch,
    [[
      local bin, scenario, transcript, cwd = ...
      require('acp').setup({ ui = { arm_ms = 50 } })
      return require('acp').start(
        { cmd = { bin }, env = { ACP_DEMO_SCENARIO = scenario, ACP_DEMO_TRANSCRIPT = transcript } },
        { cwd = cwd })
    ]],
    os.getenv('ACP_DEMO_AGENT_BIN'),
    T.scenario('gemini.json'),
    c.transcript,
    T.project()
  )
  T.eq(ok, true, 'start() in the child')
  local info = T.wait(function()
    local r = child_lua(
      c.ch,
      [[
        local s = require('acp').status()
        local b = require('acp.broker')
        local a = require('acp.state').agents[s.agent or '']
        return { session = s.session, broker = b.chan and vim.fn.jobpid(b.chan) or nil,
                 agent = a and a.pid or nil }
      ]]
    )
    return r.session and r.broker and r.agent and r
  end, nil, 'the session, broker pid and agent pid in the child')
  c.broker_pid, c.agent_pid = info.broker, info.agent
  T.ok(T.alive(c.broker_pid), 'broker alive')
  T.ok(T.alive(c.agent_pid), 'agent alive')
  child_lua(c.ch, [[require('acp').prompt('Please create test.txt')]])
  T.wait(function()
    return child_lua(c.ch, [[return #require('acp').pending()]]) == 1
  end, nil, 'a pending prompt in the child')
  return c
end

local function check_gone(c)
  local ok = T.wait(function()
    return not T.alive(c.nvim_pid)
  end, 5000, 'the child Neovim to exit')
  T.ok(ok, 'child exited')
  T.wait(function()
    return not T.alive(c.broker_pid) and not T.alive(c.agent_pid)
  end, GONE_MS, string.format(
    'broker (pid %d) and agent (pid %d) to be gone within %d ms of Neovim',
    c.broker_pid,
    c.agent_pid,
    GONE_MS
  ))
end

T.test(':qa! in Neovim ends the broker and the agent within a second', function()
  local c = child_with_prompt()
  vim.fn.rpcnotify(c.ch, 'nvim_command', 'qa!')
  check_gone(c)
end)

T.test(':qa! with a prompt open answers the request cancelled', function()
  local c = child_with_prompt()
  vim.fn.rpcnotify(c.ch, 'nvim_command', 'qa!')
  check_gone(c)
  local ctx = { transcript = c.transcript }
  local resp = T.requests(ctx, 'write_file__call_write_1')[1]
  T.ok(resp and resp.response, 'the request got an answer before the agent ended')
  T.eq(resp.response.result, { outcome = { outcome = 'cancelled' } }, 'answer to the request')
end)

T.test('Neovim killed (SIGKILL) leaves no broker or agent behind', function()
  local c = child_with_prompt()
  vim.loop.kill(c.nvim_pid, 9)
  check_gone(c)
end)

T.done()
