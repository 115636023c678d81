-- The person answers the prompt float with a key; the agent receives exactly
-- the chosen offered optionId, and the action happens only when allowed.
-- One scenario per real agent shape (ids: int for Gemini and Claude, UUID
-- strings for codex).
local T = require('helpers')

local cases = {
  {
    scenario = 'gemini.json',
    tool = 'write_file__call_write_1',
    allow = 'proceed_once',
    reject = 'cancel',
  },
  {
    scenario = 'claude.json',
    tool = 'toolu_fake_write_1',
    allow = 'allow',
    reject = 'reject',
  },
  {
    scenario = 'codex.json',
    tool = 'call_patch_1',
    allow = 'approved',
    reject = 'abort',
  },
}

local function selected(option_id)
  return { outcome = { outcome = 'selected', optionId = option_id } }
end

for _, c in ipairs(cases) do
  T.test(c.scenario .. ': a (allow once) sends ' .. c.allow .. ' and test.txt is written', function()
    local ctx = T.start_demo(c.scenario)
    local resolved = T.on('AcpPermissionResolved')
    local requests = require('acp.events').requests
    require('acp').prompt('Please create test.txt')
    T.answer_with_keys(c.tool, 'a')
    -- The prompt counts as a request of the agent (a hidden chat waits
    -- while they come: lua/acp/chat/window.lua).
    T.eq(require('acp.events').requests - requests, 1, 'requests counted')
    local resp = T.answer(ctx, c.tool)
    T.eq(resp.result, selected(c.allow), 'answer to the request')
    -- The write may be in progress: wait for the whole content.
    T.wait(function()
      return T.read(ctx.project .. '/test.txt') == 'hello from the fake LLM\n'
    end, nil, 'test.txt to hold the content the agent wrote')
    T.wait(function()
      return #resolved >= 1
    end, nil, 'AcpPermissionResolved')
    T.eq(resolved[1].outcome, 'selected', 'AcpPermissionResolved outcome')
    T.eq(resolved[1].optionId, c.allow, 'AcpPermissionResolved optionId')
    T.eq(resolved[1].toolCallId, c.tool, 'AcpPermissionResolved toolCallId')
    -- The prompt for the write is gone; the next request (the shell step)
    -- gets its own prompt.
    local p = T.wait(function()
      local list = require('acp').pending()
      return list[1] and list[1].toolCallId ~= c.tool and list[1]
    end, nil, 'the second request to be pending')
    T.eq(p.kind, 'execute', 'kind of the second request')
  end)

  T.test(c.scenario .. ': r (reject once) sends ' .. c.reject .. ' and nothing is written', function()
    local ctx = T.start_demo(c.scenario)
    require('acp').prompt('Please create test.txt')
    T.answer_with_keys(c.tool, 'r')
    local resp = T.answer(ctx, c.tool)
    T.eq(resp.result, selected(c.reject), 'answer to the request')
    -- After a reject the agent goes on (next request) or ends the turn
    -- (codex); either way it has handled the answer by then.
    T.wait(function()
      return not require('acp').status().busy or #T.requests(ctx) >= 2
    end, nil, 'the agent to move on after the reject')
    T.ok(not T.exists(ctx.project .. '/test.txt'), 'test.txt must not exist after a reject')
    T.eq(#T.tr_events(T.transcript(ctx.transcript), 'wrote'), 0, 'wrote events in the transcript')
  end)
end

T.test('the prompt float shows the title and the offered options in order', function()
  T.start_demo('claude.json')
  require('acp').prompt('Please create test.txt')
  local win = T.wait_prompt('toolu_fake_write_1')
  local text = T.win_text(win)
  T.contains(text, 'Write test.txt', 'prompt text')
  local a = text:find('Always Allow', 1, true)
  local b = text:find('Allow', (a or 0) + #'Always Allow', true)
  local r = text:find('Reject', 1, true)
  T.ok(a and b and r and a < b and b < r, 'options in the agent order in:\n' .. text)
  local p = require('acp').pending()[1]
  T.eq(p.options, {
    { optionId = 'allow_always', name = 'Always Allow', kind = 'allow_always' },
    { optionId = 'allow', name = 'Allow', kind = 'allow_once' },
    { optionId = 'reject', name = 'Reject', kind = 'reject_once' },
  }, 'pending()[1].options')
  T.eq(p.title, 'Write test.txt', 'pending()[1].title')
  T.eq(p.kind, 'edit', 'pending()[1].kind')
  T.eq(type(p.id), 'number', 'type of pending()[1].id')
  T.eq(require('acp').status().pending, 1, 'status().pending')
  T.eq(require('acp').status().busy, true, 'status().busy while the prompt waits')
end)

T.done()
