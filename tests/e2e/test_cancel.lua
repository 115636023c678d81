-- :AcpCancel with two prompts pending: the turn is cancelled, both requests
-- are answered {"outcome":{"outcome":"cancelled"}} (ACP's MUST), both prompts
-- resolve as cancelled and their windows close.
local T = require('helpers')

local CANCELLED = { outcome = { outcome = 'cancelled' } }

T.test(':AcpCancel answers both pending requests cancelled and closes the prompt', function()
  local ctx = T.start_demo('two-pending.json')
  local resolved = T.on('AcpPermissionResolved')
  local turn_end = T.on('AcpTurnEnd')
  require('acp').prompt('Do two things at once')
  T.wait(function()
    return #require('acp').pending() == 2
  end, nil, 'two pending prompts')
  T.wait_prompt()

  vim.cmd('AcpCancel')

  local a = T.answer(ctx, 'toolu_par_write_1')
  local b = T.answer(ctx, 'toolu_par_bash_1')
  T.eq(a.result, CANCELLED, 'answer to the first request')
  T.eq(b.result, CANCELLED, 'answer to the second request')
  T.eq(#T.messages(T.transcript(ctx.transcript), 'in', 'session/cancel'), 1, 'session/cancel notifications received')

  T.wait(function()
    return #resolved == 2
  end, nil, 'AcpPermissionResolved twice')
  for i, d in ipairs(resolved) do
    T.eq(d.outcome, 'cancelled', 'AcpPermissionResolved[' .. i .. '].outcome')
    T.eq(d.optionId, nil, 'AcpPermissionResolved[' .. i .. '].optionId')
  end
  local tools = { resolved[1].toolCallId, resolved[2].toolCallId }
  table.sort(tools)
  T.eq(tools, { 'toolu_par_bash_1', 'toolu_par_write_1' }, 'resolved toolCallIds')

  T.wait(function()
    return #T.floats() == 0
  end, nil, 'every prompt window to close')
  T.eq(require('acp').pending(), {}, 'pending() after the cancel')
  T.wait(function()
    return #turn_end == 1
  end, nil, 'AcpTurnEnd')
  T.eq(turn_end[1].stopReason, 'cancelled', 'stopReason of the cancelled turn')
  T.eq(require('acp').status().busy, false, 'status().busy after the turn ended')
  T.ok(not T.exists(ctx.project .. '/first.txt'), 'first.txt must not exist')
  T.ok(not T.exists(ctx.project .. '/second.txt'), 'second.txt must not exist')
end)

T.test(':AcpStop answers a pending request cancelled and fires AcpAgentExit', function()
  local ctx = T.start_demo('gemini.json')
  local exits = T.on('AcpAgentExit')
  local resolved = T.on('AcpPermissionResolved')
  require('acp').prompt('Please create test.txt')
  T.wait_prompt('write_file__call_write_1')
  vim.cmd('AcpStop')
  -- The agent must read the answer: the broker may signal the agent only
  -- after the answer is written (a SIGTERM sent at once races with it).
  T.eq(T.answer(ctx, 'write_file__call_write_1').result, CANCELLED, 'answer to the request')
  T.wait(function()
    return #exits == 1
  end, nil, 'AcpAgentExit')
  T.eq(exits[1].agent, ctx.agent, 'AcpAgentExit agent')
  T.eq(#resolved, 1, 'AcpPermissionResolved count')
  T.eq(resolved[1].outcome, 'cancelled', 'AcpPermissionResolved outcome')
  T.wait(function()
    return #T.floats() == 0
  end, nil, 'the prompt window to close')
  local st = require('acp').status()
  T.eq({ st.agent, st.busy, st.pending }, { nil, false, 0 }, '{agent, busy, pending} after :AcpStop')
end)

T.done()
