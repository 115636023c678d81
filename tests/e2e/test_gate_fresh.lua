-- The gate looks at the settings files (and the paths a request names) at
-- most once a millisecond, not for every request; what the broker sees
-- change them (a message from Neovim, the agent's report of a tool call of
-- its own, ...) makes it look again at once. Here the look is made to last a
-- minute (ACP_BROKER_TEST_EPOCH_MS), so only that can make a change apply.
local T = require('helpers')
local selected = T.selected
local write = T.write
local shell = T.shell_request

vim.env.ACP_BROKER_TEST_EPOCH_MS = '60000'

T.test('a settings file changed between two turns applies to the next turn: a message from Neovim makes the gate look again', function()
  T.fresh_broker() -- started with the environment above
  local project = T.project()
  write(project .. '/.acp/settings.json', '{"permissions":{"deny":["Bash(rm *)"]}}')
  local ctx = T.start_demo({
    name = 'gate-fresh',
    steps = { shell('rm_${turn}', 'rm -rf build'), { type = 'message', text = 'Done.' } },
  }, { project = project })
  require('acp').prompt('Clean up')
  T.eq(T.answer(ctx, 'rm_1').result, selected('reject'), 'the answer in turn 1 (the deny rule)')
  T.idle()

  -- The rule is gone; the next prompt reaches the broker before the request.
  write(project .. '/.acp/settings.json', '{"permissions":{"deny":[]}}')
  require('acp').prompt('Clean up again')
  T.wait_pending('rm_2')
  vim.cmd('AcpAllow')
  T.eq(T.answer(ctx, 'rm_2').result, selected('allow'), 'the answer in turn 2 (asked, allowed)')
  T.idle()
  local audit = T.audit_lines()
  T.eq(audit[#audit - 1].decision, 'deny', 'the audit line of turn 1')
  T.eq(audit[#audit].decision, 'ask', 'the audit line of turn 2')
end)

-- A turn that is denied `rm -rf build`, sleeps 1.5 s (the test changes the
-- settings meanwhile; nothing reaches the broker), reports a tool call of its
-- own with `status`, then asks for `rm -rf build` again.
local function tool_turn(project, status)
  return T.start_demo({
    name = 'gate-fresh-' .. status,
    steps = {
      shell('rm_a_${turn}', 'rm -rf build'),
      { type = 'sleep', ms = 1500 },
      {
        type = 'update',
        update = { sessionUpdate = 'tool_call', toolCallId = 'think_${turn}', title = 'Think', kind = 'think', status = status },
      },
      shell('rm_b_${turn}', 'rm -rf build'),
      { type = 'message', text = 'Done.' },
    },
  }, { project = project })
end

T.test('a settings file changed while the agent works applies once the agent reports a tool call of its own that ran', function()
  T.fresh_broker()
  local project = T.project()
  write(project .. '/.acp/settings.json', '{"permissions":{"deny":["Bash(rm *)"]}}')
  local ctx = tool_turn(project, 'completed')
  require('acp').prompt('Clean up')
  T.eq(T.answer(ctx, 'rm_a_1').result, selected('reject'), 'the answer before the change (the deny rule)')
  write(project .. '/.acp/settings.json', '{"permissions":{"deny":[]}}')
  T.wait_pending('rm_b_1')
  vim.cmd('AcpAllow')
  T.eq(T.answer(ctx, 'rm_b_1').result, selected('allow'), 'the answer after the change (asked, allowed)')
  T.idle()
end)

T.test('announcing a tool call (pending) does not make the gate look again: it ran nothing', function()
  T.fresh_broker()
  local project = T.project()
  write(project .. '/.acp/settings.json', '{"permissions":{"deny":["Bash(rm *)"]}}')
  local ctx = tool_turn(project, 'pending')
  require('acp').prompt('Clean up')
  T.eq(T.answer(ctx, 'rm_a_1').result, selected('reject'), 'the answer before the change (the deny rule)')
  write(project .. '/.acp/settings.json', '{"permissions":{"deny":[]}}')
  -- Within the minute the look lasts here, the rule removed still applies.
  T.eq(T.answer(ctx, 'rm_b_1').result, selected('reject'), 'the answer after the change (the look of before)')
  T.idle()
end)

T.done()
