-- The asking posture (design §6, doc/acp.txt acp-posture): the broker puts
-- the agent in its asking mode when a session starts, sets it back when
-- the agent switches itself to a mode the person did not ask for, and says
-- so in status(), the chat, notifications and the audit log when it cannot.
local T = require('helpers')

local audit_lines = T.audit_lines

local function posture_lines(session)
  local r = {}
  for _, l in ipairs(audit_lines()) do
    if l.kind == 'posture' and l.sessionId == session then
      r[#r + 1] = l
    end
  end
  return r
end

local function modes(current)
  return {
    currentModeId = current,
    availableModes = {
      { id = 'default', name = 'Default' },
      { id = 'acceptEdits', name = 'Accept edits' },
      { id = 'plan', name = 'Plan' },
    },
  }
end

local function set_modes(ctx)
  local r = {}
  for _, m in ipairs(T.messages(T.transcript(ctx.transcript), 'in', 'session/set_mode')) do
    r[#r + 1] = m.params.modeId
  end
  return r
end


T.test('a session that starts in a mode that would not ask is set to the asking mode before the first prompt', function()
  local ctx = T.start_demo({
    name = 'posture-start',
    modes = modes('acceptEdits'),
    steps = { { type = 'message', text = 'Turn ${turn} in mode ${mode}.' } },
  })
  local acp = require('acp')
  require('acp').prompt('Which mode?')
  T.wait(function()
    return acp.status().posture == 'asking'
  end, nil, 'posture asking')
  T.idle()
  T.eq(set_modes(ctx), { 'default' }, 'one session/set_mode, to default')
  T.ok(T.agent_text(ctx):find('mode default', 1, true), 'the prompt ran in the asking mode: ' .. T.agent_text(ctx))
  -- The set_mode went out before the prompt.
  local order = {}
  for _, m in ipairs(T.messages(T.transcript(ctx.transcript), 'in')) do
    if m.method == 'session/set_mode' or m.method == 'session/prompt' then
      order[#order + 1] = m.method
    end
  end
  T.eq(order, { 'session/set_mode', 'session/prompt' }, 'set_mode first')
  T.eq(require('acp.state').sessions[ctx.session].current_mode, 'default', 'the mode Lua shows')
  T.eq(#posture_lines(ctx.session), 0, 'nothing to audit: the posture holds')
end)

T.test('an unrequested current_mode_update is set back to the asking mode and audited', function()
  local ctx = T.start_demo({
    name = 'posture-switch',
    modes = modes('default'),
    steps = {
      { type = 'update', update = { sessionUpdate = 'current_mode_update', currentModeId = 'acceptEdits' } },
      { type = 'message', text = 'Turn ${turn} in mode ${mode}.' },
    },
  })
  local acp = require('acp')
  T.eq(acp.status().posture, 'asking', 'asking from the start (no set_mode needed)')
  T.eq(set_modes(ctx), {}, 'no set_mode at start')
  local seen = {}
  require('acp.state').subscribe(function(name, d)
    if name == 'posture' then
      seen[#seen + 1] = { posture = d.posture, reasserted = d.reasserted }
    end
  end)
  acp.prompt('go')
  T.idle()
  T.wait(function()
    return #set_modes(ctx) == 1 and acp.status().posture == 'asking'
  end, nil, 'the mode set back')
  T.eq(set_modes(ctx), { 'default' }, 'session/set_mode default')
  T.eq(seen[1], { posture = 'unverified', reasserted = true }, 'told: unverified while it is set back')
  T.eq(seen[#seen].posture, 'asking', 'then asking again')
  local lines = posture_lines(ctx.session)
  T.eq(#lines, 1, 'one audit line')
  T.eq({ lines[1].by, lines[1].outcome, lines[1].sessionId }, { 'agent', 'reasserted', ctx.session }, 'by agent, reasserted')
  T.contains(lines[1].title, "switched itself to its mode 'acceptEdits'", 'the reason in the title')

  -- A mode the person asks for is not set back (but is not asking either).
  vim.cmd('AcpMode agent:acceptEdits')
  T.wait(function()
    return acp.status().posture == 'unverified'
  end, nil, 'the person chose a mode that does not ask')
  T.contains(acp.status().posture_reason, "own mode 'acceptEdits'", 'the reason')
  T.never(function()
    return #set_modes(ctx) > 2
  end, 300, 'no re-assertion of a mode the person chose')
  vim.cmd('AcpMode agent:default')
  T.wait(function()
    return acp.status().posture == 'asking'
  end, nil, 'back to asking with the asking mode')
end)

T.test('ACP_BROKER_TEST_NO_POSTURE: unverified, told before the first prompt, audited; prompts still go', function()
  -- The broker reads the switch from its environment: start a new one.
  vim.env.ACP_BROKER_TEST_NO_POSTURE = '1'
  T.defer(function()
    vim.env.ACP_BROKER_TEST_NO_POSTURE = nil
    T.fresh_broker()
  end)
  T.fresh_broker()
  local ctx = T.start_demo({
    name = 'posture-off',
    modes = modes('acceptEdits'),
    steps = { { type = 'message', text = 'Turn ${turn} in mode ${mode}.' } },
  })
  local acp = require('acp')
  T.wait(function()
    return acp.status().posture_reason ~= nil
  end, nil, 'the posture judged')
  T.eq(acp.status().posture, 'unverified', 'unverified')
  T.contains(acp.status().posture_reason, 'switched off', 'the reason')
  T.wait(function()
    return T.notes_text():find('it may act without asking you', 1, true)
  end, nil, 'a notification')
  vim.cmd('AcpChat')
  local text = ''
  T.wait(function()
    local buf = require('acp.chat').buffer(ctx.session)
    text = buf and table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), '\n') or ''
    return text:find('posture: unverified', 1, true)
  end, nil, 'the chat header says so')
  T.ok(text:find('not in asking posture: the asking posture is switched off', 1, true), 'and a red line:\n' .. text)
  vim.cmd('checkhealth acp')
  local health = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\n')
  T.contains(health, ('acp-demo-agent session %s: posture unverified: the asking posture is switched off'):format(ctx.session), 'checkhealth says so')
  acp.prompt('go')
  T.idle()
  T.eq(set_modes(ctx), {}, 'no set_mode: the mechanism is off')
  T.ok(T.agent_text(ctx):find('mode acceptEdits', 1, true), 'the prompt went, in the agent mode')
  local lines = posture_lines(ctx.session)
  T.eq(#lines, 1, 'one audit line')
  T.eq({ lines[1].by, lines[1].outcome, lines[1].decision }, { 'agent', 'unverified', 'ask' }, 'the audit line')
end)

T.test('an agent the broker does not know is unverified, with the reason, before the first prompt', function()
  -- The demo agent under another name, reporting another agentInfo.name.
  local bin = T.tmpname('some-other-agent')
  vim.loop.fs_symlink(os.getenv('ACP_DEMO_AGENT_BIN'), bin)
  local ctx = {
    project = T.project(),
    transcript = T.tmpname('transcript', '.jsonl'),
    scenario = T.scenario({
      name = 'posture-unknown',
      agent_name = 'some-other-agent',
      modes = modes('default'),
      steps = { { type = 'message', text = 'Turn ${turn} in mode ${mode}.' } },
    }),
  }
  T.defer(T.stop_all)
  local acp = require('acp')
  acp.setup({ ui = { arm_ms = 50 } })
  T.ok(acp.start({ cmd = { bin }, env = { ACP_DEMO_SCENARIO = ctx.scenario, ACP_DEMO_TRANSCRIPT = ctx.transcript } }, { cwd = ctx.project }))
  ctx.session = T.wait(function()
    return acp.status().session
  end, nil, 'the session')
  T.wait(function()
    return acp.status().posture_reason ~= nil
  end, nil, 'the posture judged')
  T.eq(acp.status().posture, 'unverified', 'unverified')
  T.contains(acp.status().posture_reason, 'does not know how to keep this agent asking', 'the reason')
  T.wait(function()
    return T.notes_text():find('it may act without asking you', 1, true)
  end, nil, 'a notification')
  local lines = posture_lines(ctx.session)
  T.eq(#lines, 1, 'one audit line')
  T.eq(lines[1].outcome, 'unverified', 'outcome unverified')
  acp.prompt('go')
  T.idle()
  T.ok(T.agent_text(ctx):find('Turn 1', 1, true), 'the prompt still went')
end)

T.test('the demo agent without modes is asking; status() reports it', function()
  T.start_demo('demo.json')
  T.wait(function()
    return require('acp').status().posture == 'asking'
  end, nil, 'asking')
  T.eq(require('acp').status().posture_reason, nil, 'no reason')
  vim.cmd('checkhealth acp')
  local health = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\n')
  T.contains(health, 'asking posture (demo)', 'checkhealth: asking')
end)

T.done()
