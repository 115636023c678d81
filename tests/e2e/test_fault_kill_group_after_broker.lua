-- A broker killed while its agent runs a command: each agent leads its own
-- process group, which only the broker would end; Neovim ends those groups
-- when the broker dies unexpectedly, so nothing the agent started lives on.
local T = require('helpers')

local function pgrp(pid)
  local s = T.read('/proc/' .. pid .. '/stat')
  local after = s and s:match('%) (.*)')
  return after and tonumber(select(3, after:match('(%S+) (%S+) (%S+)')))
end

local function group_members(g)
  local pids = {}
  for _, name in ipairs(vim.fn.readdir('/proc')) do
    local pid = tonumber(name)
    if pid and pgrp(pid) == g and T.alive(pid) then
      pids[#pids + 1] = pid
    end
  end
  return pids
end

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
  local members = T.wait(function()
    local m = group_members(apid)
    return #m >= 3 and m
  end, nil, 'the agent and its commands in its process group')
  vim.loop.kill(vim.fn.jobpid(require('acp.broker').chan), 9)
  T.wait(function()
    return require('acp.broker').chan == nil
  end, nil, 'the broker channel to close')
  T.wait(function()
    return #group_members(apid) == 0
  end, 5000, 'the process group ' .. apid .. ' ' .. vim.inspect(members) .. ' to be gone')
end)

T.done()
