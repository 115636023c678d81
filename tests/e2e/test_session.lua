-- Sessions beyond the first prompt: the agent's own modes (session/set_mode,
-- current_mode_update), resuming with session/load, logging in when the
-- agent asks for it, and agent errors (a 429) ending the turn readably.
local T = require('helpers')

local function demo_spec(ctx)
  return {
    cmd = { os.getenv('ACP_DEMO_AGENT_BIN') },
    env = { ACP_DEMO_SCENARIO = ctx.scenario, ACP_DEMO_TRANSCRIPT = ctx.transcript },
  }
end


T.test('agent modes: shown, :AcpMode sets them (session/set_mode), updates followed', function()
  local ctx = T.start_demo('modes.json')
  local state = require('acp.state')
  local s = state.sessions[ctx.session]
  T.eq(s.current_mode, 'ask', 'the current mode from session/new')
  T.eq(#s.modes.availableModes, 3, 'the available modes')
  local names = require('acp.commands').complete_mode('')
  T.ok(vim.tbl_contains(names, 'code') and vim.tbl_contains(names, 'agent:plan'), 'completion offers the agent modes')

  vim.cmd('AcpMode code')
  T.wait(function()
    return s.current_mode == 'code'
  end, nil, 'the mode to become code')
  local sets = T.messages(T.transcript(ctx.transcript), 'in', 'session/set_mode')
  T.eq(#sets, 1, 'one session/set_mode')
  T.eq(sets[1].params, { sessionId = ctx.session, modeId = 'code' }, 'its params')
  require('acp').prompt('Which mode?')
  T.idle()
  T.ok(T.agent_text(ctx):find('mode code', 1, true), 'the agent works in mode code: ' .. T.agent_text(ctx))

  -- A name both have sets both; the broker keeps its own policy mode.
  vim.cmd('AcpMode plan')
  T.wait(function()
    return s.current_mode == 'plan' and require('acp').status().mode == 'plan'
  end, nil, 'plan: the agent mode and the broker mode')
  -- default takes the agent out of plan too, into the mode it asks in
  -- (here `ask`: the agent has no mode called default).
  T.eq(s.default_mode, 'ask', 'the posture event names the asking mode')
  vim.cmd('AcpMode default')
  T.wait(function()
    return require('acp').status().mode == 'default' and s.current_mode == 'ask'
  end, nil, 'the broker mode back to default, the agent in ask')
  T.eq(T.messages(T.transcript(ctx.transcript), 'in', 'session/set_mode')[3].params.modeId, 'ask', 'set_mode ask')
  vim.cmd('AcpMode default')
  T.wait_ms(100)
  T.eq(#T.messages(T.transcript(ctx.transcript), 'in', 'session/set_mode'), 3, 'already asking: no second set_mode')

  -- An unknown mode is refused and sends nothing.
  local ok, err = pcall(vim.cmd, 'AcpMode nonsense')
  T.ok(not ok and tostring(err):find("unknown mode 'nonsense'", 1, true), 'unknown mode message: ' .. tostring(err))
  T.eq(#T.messages(T.transcript(ctx.transcript), 'in', 'session/set_mode'), 3, 'session/set_mode count')
end)

T.test('resume: :AcpStart! loads the last session; its history replays', function()
  local ctx = T.start_demo('resume.json')
  local first = ctx.session
  local spec = demo_spec(ctx)
  -- Lua remembers the session (for the next Neovim too).
  T.wait(function()
    return require('acp.state').last_session('acp-demo-agent', ctx.project) == first
  end, nil, 'the session remembered')
  require('acp').stop()
  T.wait(function()
    return require('acp').status().agent == nil
  end, nil, 'the agent to stop')

  local updates = {}
  require('acp.state').subscribe(function(name, d)
    if name == 'update' and d.session == first then
      updates[#updates + 1] = d.update.sessionUpdate
    end
  end)
  T.ok(require('acp').start(spec, { cwd = ctx.project, resume = true }), 'start() with resume')
  T.wait(function()
    return require('acp').status().session == first
  end, nil, 'the same session back')
  local loads = T.messages(T.transcript(ctx.transcript), 'in', 'session/load')
  T.eq(#loads, 1, 'one session/load')
  T.eq(loads[1].params.sessionId, first, 'of the first session')
  T.eq(#T.messages(T.transcript(ctx.transcript), 'in', 'session/new'), 1, 'no second session/new')
  T.wait(function()
    return #updates >= 4
  end, nil, 'the replayed history')
  T.eq(updates, { 'user_message_chunk', 'agent_message_chunk', 'tool_call', 'agent_message_chunk' }, 'history')
  require('acp').prompt('Hello again')
  T.idle()
  T.ok(T.agent_text(ctx):find('Welcome back to ' .. first, 1, true), 'the resumed session answers')
end)

T.test('resume with an agent that cannot load: a new session, and the person is told', function()
  local ctx = T.start_demo('modes.json')
  local first = ctx.session
  local spec = demo_spec(ctx)
  require('acp').stop()
  T.wait(function()
    return require('acp').status().agent == nil
  end, nil, 'the agent to stop')
  T.notes = {}
  require('acp').start(spec, { cwd = ctx.project, resume = first })
  local second = T.wait(function()
    local s = require('acp').status().session
    return s ~= nil and s ~= first and s
  end, nil, 'a new session')
  T.ok(second ~= first, 'a new session')
  T.wait(function()
    return T.notes_text():find('cannot resume', 1, true)
  end, nil, 'the message that it cannot resume')
  T.eq(#T.messages(T.transcript(ctx.transcript), 'in', 'session/load'), 0, 'no session/load sent')
end)

T.test('login: the agent refuses a session until authenticate; the person picks the method', function()
  local picked
  local orig = vim.ui.select
  vim.ui.select = function(items, opts, cb)
    picked = { items = items, prompt = opts.prompt }
    cb(items[1])
  end
  T.defer(function()
    vim.ui.select = orig
  end)
  local ctx = T.start_demo('auth.json')
  T.ok(picked and #picked.items == 2, 'the two login methods offered')
  local auths = T.messages(T.transcript(ctx.transcript), 'in', 'authenticate')
  T.eq(#auths, 1, 'one authenticate')
  T.eq(auths[1].params, { methodId = 'demo-login' }, 'the chosen method')
  require('acp').prompt('Hi')
  T.idle()
  T.ok(T.agent_text(ctx):find('Authenticated', 1, true), 'the session works after the login')
end)

T.test('login from the environment: no question when the key is set', function()
  local asked = false
  local orig = vim.ui.select
  vim.ui.select = function()
    asked = true
  end
  T.defer(function()
    vim.ui.select = orig
  end)
  local scenario = {
    name = 'auth-env',
    require_auth = true,
    auth_methods = {
      { id = 'demo-login', name = 'Log in' },
      { id = 'demo-env', name = 'Key from the environment', type = 'env_var', varName = 'DEMO_ENV_KEY' },
    },
    steps = { { type = 'message', text = 'ok' } },
  }
  local path = T.scenario(scenario)
  local transcript = T.tmpname('transcript', '.jsonl')
  require('acp').setup({ ui = { arm_ms = 50 } })
  T.defer(T.stop_all)
  require('acp').start({
    cmd = { os.getenv('ACP_DEMO_AGENT_BIN') },
    env = { ACP_DEMO_SCENARIO = path, ACP_DEMO_TRANSCRIPT = transcript, DEMO_ENV_KEY = 'secret' },
  }, { cwd = T.project() })
  T.wait(function()
    return require('acp').status().session
  end, nil, 'the session after the automatic login')
  T.ok(not asked, 'the person was not asked')
  local auths = T.messages(T.transcript(transcript), 'in', 'authenticate')
  T.eq(auths[1].params, { methodId = 'demo-env' }, 'the environment method')
end)

T.test('an agent error (429) ends the turn with a readable message; the next prompt works', function()
  local ctx = T.start_demo('error.json')
  local ends = T.on('AcpTurnEnd')
  T.notes = {}
  require('acp').prompt('Go')
  T.wait(function()
    return #ends == 1
  end, nil, 'AcpTurnEnd')
  T.eq(ends[1].stopReason, 'error', 'stopReason')
  T.ok(tostring(ends[1].message):find('Rate limit exceeded', 1, true), 'the message: ' .. tostring(ends[1].message))
  T.ok(tostring(ends[1].message):find('429', 1, true), 'with its code')
  T.ok(not require('acp').status().busy, 'not busy')
  T.wait(function()
    return T.notes_text():find('Rate limit exceeded', 1, true)
  end, nil, 'the person is told')
  require('acp').prompt('Again')
  T.wait(function()
    return #ends == 2
  end, nil, 'the second turn ends too')
end)

T.test('two agents side by side: separate sessions, prompts, permissions', function()
  local bin = os.getenv('ACP_DEMO_AGENT_BIN')
  local project = T.project()
  local tr = { one = T.tmpname('transcript', '.jsonl'), two = T.tmpname('transcript', '.jsonl') }
  local function agent(name)
    return {
      cmd = { bin },
      env = {
        ACP_DEMO_TRANSCRIPT = tr[name],
        ACP_DEMO_SCENARIO = T.scenario({
          name = name,
          steps = {
            {
              type = 'permission',
              toolCall = {
                toolCallId = name .. '_${turn}',
                title = 'Write ' .. name .. '.txt',
                kind = 'edit',
                -- The path the write below needs an answer for.
                locations = { { path = '${cwd}/' .. name .. '.txt' } },
              },
              options = { { optionId = 'ok', name = 'Allow', kind = 'allow_once' } },
              on_allow = { type = 'write', path = name .. '.txt', content = name .. '\n' },
            },
          },
        }),
      },
    }
  end
  require('acp').setup({ ui = { arm_ms = 50 }, agents = { one = agent('one'), two = agent('two') } })
  T.defer(T.stop_all)
  local state = require('acp.state')
  require('acp').start('one', { cwd = project })
  require('acp').start('two', { cwd = project })
  T.wait(function()
    return state.agents.one and state.agents.one.session and state.agents.two and state.agents.two.session
  end, nil, 'both sessions')
  T.ok(state.agents.one.session ~= state.agents.two.session, 'two sessions')
  T.eq(require('acp').status().agent, 'two', 'the last started is current')
  require('acp').prompt('Write yours')
  require('acp').start('one', { cwd = project }) -- reuse: becomes current again
  require('acp').prompt('Write yours too')
  T.wait(function()
    return #require('acp').pending() == 2
  end, nil, 'a prompt from each agent')
  vim.cmd('AcpAllow!')
  T.wait(function()
    return T.exists(project .. '/one.txt') and T.exists(project .. '/two.txt')
  end, nil, 'both files written')
  T.eq(#T.messages(T.transcript(tr.one), 'in', 'session/prompt'), 1, 'one prompt to one')
  T.eq(#T.messages(T.transcript(tr.two), 'in', 'session/prompt'), 1, 'one prompt to two')
end)

T.done()
