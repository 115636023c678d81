-- Which optionId reaches the agent: digits pick exactly the option at that
-- position (also when several options share a kind), :AcpAllow / :AcpDeny
-- pick the first allow_once / reject_once, and an optionId that was not
-- offered is refused without reaching the agent.
local T = require('helpers')

local function selected(option_id)
  return { outcome = { outcome = 'selected', optionId = option_id } }
end

T.test('respond() with an optionId that was not offered is refused; the prompt stays pending', function()
  local ctx = T.start_demo('gemini.json')
  require('acp').prompt('Please create test.txt')
  local p = T.wait_pending('write_file__call_write_1')
  local n_errors = #T.notes
  require('acp').respond(p.id, 'bogus')
  T.wait(function()
    for i = n_errors + 1, #T.notes do
      if T.notes[i].level == vim.log.levels.ERROR then
        return true
      end
    end
  end, nil, 'an error message for the refused optionId')
  -- The refusal comes from the broker (the authority), as an `error` event.
  T.wait(function()
    for _, e in ipairs(require('acp.state').logged()) do
      if e.event == 'error' and tostring(e.data.message):find('was not offered', 1, true) then
        return true
      end
    end
  end, nil, "an 'error' event from the broker")
  -- Still pending, and the prompt comes back on screen.
  T.wait(function()
    local list = require('acp').pending()
    return #list == 1 and list[1].id == p.id
  end, nil, 'the prompt to be pending still')
  T.wait_prompt('write_file__call_write_1')
  T.eq(require('acp.state').pending[p.id] ~= nil, true, 'still in the mirror')
  T.eq(T.requests(ctx, 'write_file__call_write_1')[1].response, nil, 'answer received by the agent')
  T.ok(not T.read(ctx.transcript):find('bogus', 1, true), "the agent must never receive 'bogus'")
  -- A valid answer still works afterwards.
  T.answer_with_keys('write_file__call_write_1', 'a')
  T.eq(T.answer(ctx, 'write_file__call_write_1').result, selected('proceed_once'), 'answer after the refusal')
  T.ok(not T.read(ctx.transcript):find('bogus', 1, true), "the agent must never receive 'bogus'")
end)

T.test('digits choose that exact option when several share a kind (multi-kind.json)', function()
  local ctx = T.start_demo('multi-kind.json')
  require('acp').prompt('Go')
  -- 1: proceed_always, 2: proceed_always_and_save (both allow_always)
  T.answer_with_keys('write_file__call_multi_1', '2')
  T.eq(T.answer(ctx, 'write_file__call_multi_1').result, selected('proceed_always_and_save'), 'answer to request 1')
  -- 3: decline, 4: cancel (both reject_once)
  T.answer_with_keys('call_multi_shell_1', '4')
  T.eq(T.answer(ctx, 'call_multi_shell_1').result, selected('cancel'), 'answer to request 2')
  -- All four kinds offered: R is the reject_always key.
  T.answer_with_keys('call_all_kinds_1', 'R')
  T.eq(T.answer(ctx, 'call_all_kinds_1').result, selected('reject-always'), 'answer to request 3')
  T.wait(function()
    return T.exists(ctx.project .. '/multi.txt')
  end, nil, 'multi.txt to be written')
  T.wait(function()
    return not require('acp').status().busy
  end, nil, 'the turn to end')
  T.ok(not T.exists(ctx.project .. '/multi-ran.txt'), 'multi-ran.txt must not exist')
end)

T.test('A chooses the first allow_always option', function()
  local ctx = T.start_demo('multi-kind.json')
  require('acp').prompt('Go')
  T.answer_with_keys('write_file__call_multi_1', 'A')
  T.eq(T.answer(ctx, 'write_file__call_multi_1').result, selected('proceed_always'), 'answer')
end)

T.test(':AcpAllow answers the oldest prompt with its first allow_once; :AcpDeny with reject_once', function()
  local ctx = T.start_demo('multi-kind.json')
  require('acp').prompt('Go')
  T.wait_pending('write_file__call_multi_1')
  vim.cmd('AcpAllow') -- proceed_once is the third option here
  T.eq(T.answer(ctx, 'write_file__call_multi_1').result, selected('proceed_once'), ':AcpAllow answer')
  T.wait_pending('call_multi_shell_1')
  vim.cmd('AcpDeny') -- the first reject_once of two
  T.eq(T.answer(ctx, 'call_multi_shell_1').result, selected('decline'), ':AcpDeny answer')
  T.wait_pending('call_all_kinds_1')
  vim.cmd('AcpDeny')
  T.eq(T.answer(ctx, 'call_all_kinds_1').result, selected('reject-once'), ':AcpDeny answer (all kinds offered)')
end)

T.test(':AcpAllow with two pending answers only the oldest; :AcpAllow! answers every one', function()
  local ctx = T.start_demo('two-pending.json')
  require('acp').prompt('Two at once')
  T.wait(function()
    return #require('acp').pending() == 2
  end, nil, 'two pending prompts')
  local oldest = require('acp').pending()[1]
  vim.cmd('AcpAllow')
  T.eq(T.answer(ctx, oldest.toolCallId).result, selected('allow'), 'answer to the oldest')
  local other = oldest.toolCallId == 'toolu_par_write_1' and 'toolu_par_bash_1' or 'toolu_par_write_1'
  T.wait(function()
    return #require('acp').pending() == 1
  end, nil, 'one prompt left')
  T.eq(T.requests(ctx, other)[1].response, nil, 'the other request is not answered yet')
  vim.cmd('AcpAllow!')
  T.eq(T.answer(ctx, other).result, selected('allow'), 'answer to the other one')
  T.wait(function()
    return T.exists(ctx.project .. '/first.txt') and T.exists(ctx.project .. '/second.txt')
  end, nil, 'first.txt and second.txt')
end)

T.test(':AcpDeny! rejects every pending prompt', function()
  local ctx = T.start_demo('two-pending.json')
  require('acp').prompt('Two at once')
  T.wait(function()
    return #require('acp').pending() == 2
  end, nil, 'two pending prompts')
  vim.cmd('AcpDeny!')
  T.eq(T.answer(ctx, 'toolu_par_write_1').result, selected('reject'), 'answer to the first')
  T.eq(T.answer(ctx, 'toolu_par_bash_1').result, selected('reject'), 'answer to the second')
  T.wait(function()
    return not require('acp').status().busy
  end, nil, 'the turn to end')
  T.ok(not T.exists(ctx.project .. '/first.txt'), 'first.txt must not exist')
  T.ok(not T.exists(ctx.project .. '/second.txt'), 'second.txt must not exist')
end)

T.done()
