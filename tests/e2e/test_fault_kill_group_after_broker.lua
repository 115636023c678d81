-- A broker killed while its agent runs a command: each agent leads its own
-- process group, and so does each command it runs through terminal/*; only
-- the broker would end them. Neovim ends those groups when the broker dies
-- unexpectedly, so nothing the agent started lives on.
local T = require('helpers')

T.test('broker killed (SIGKILL) while the agent runs a command: the agent and its group go', function()
  local ctx = T.start_demo({
    name = 'group-after-broker',
    steps = {
      {
        type = 'permission',
        toolCall = { toolCallId = 'bg_${turn}', title = 'sleep in the background', kind = 'execute' },
        options = { { optionId = 'ok', name = 'Allow', kind = 'allow_once' } },
        on_allow = { type = 'run', command = 'sleep 300 & sleep 301' },
      },
    },
  })
  local apid = require('acp.state').agents[ctx.agent].pid
  require('acp').prompt('Sleep, please')
  local p = T.wait_pending('bg_1')
  require('acp').respond(p.id, 'ok')
  -- The agent leads its group; the command's shell and both sleeps are in
  -- the group of the terminal the broker runs it in.
  local seen = T.wait(function()
    local g = T.agent_groups(apid)
    local m = T.group_members(g)
    return #g >= 2 and #m >= 4 and { members = m, groups = g }
  end, nil, 'the agent and its command in their process groups')
  local members, groups = seen.members, seen.groups
  vim.loop.kill(vim.fn.jobpid(require('acp.broker').chan), 9)
  T.wait(function()
    return require('acp.broker').chan == nil
  end, nil, 'the broker channel to close')
  T.wait(function()
    return #T.group_members(groups) == 0
  end, 5000, 'the process groups ' .. vim.inspect(groups) .. ' ' .. vim.inspect(members) .. ' to be gone')
end)

T.done()
