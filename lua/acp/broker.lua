--- The broker as the rest of Neovim sees it: the entry point of its events
--- (doc/protocol.md), and everything acp.rpc offers (the channel, `ensure`,
--- `shutdown`, `log_path`, the notifications) under the name scripts and
--- the broker use.
---
--- This module is the top of the Lua side: it loads the controller
--- (acp.events) and the views that subscribe to the model (the chat, the
--- prompt, the login, the commands), so that every event finds them
--- listening. Nothing in the plugin requires it.

local compat = require('acp.compat')
local events = require('acp.events')
local rpc = require('acp.rpc')
-- The views subscribe to acp.state when they load.
require('acp.auth')
require('acp.chat')
require('acp.commands')
require('acp.ledger')
require('acp.prompt')

local M = setmetatable({}, { __index = rpc })

-- Module definition ==========================================================

--- Entry point of every broker event (doc/protocol.md). Called through
--- `nvim_exec_lua` while the broker may be waiting, so it only updates the
--- mirror and schedules the rest.
---@param name string
---@param data table|nil
---@return boolean
function M._on_event(name, data)
  if type(data) ~= 'table' then
    data = {}
  end
  if name == 'ready' then
    rpc.info = data
  end
  if name == 'permission' then
    -- A request: an error here reaches the broker, which answers the agent
    -- `cancelled` (fail closed).
    return events.handle(name, data)
  end
  local ok, err = pcall(events.handle, name, data)
  if not ok then
    vim.schedule(function()
      vim.notify(('(acp) internal error handling broker event %s: %s'):format(name, tostring(err)), vim.log.levels.ERROR)
    end)
  end
  return ok
end

--- The notifications of one broker loop iteration, in order:
--- `{ {name, data}, ... }`. Each is handled as by `_on_event`; a failing
--- one does not keep the others from being handled.
---@param list table
function M._on_events(list)
  compat.user_cache = {}
  for i = 1, #list do
    local e = list[i]
    local ok, err = true, nil
    if type(e) == 'table' then
      ok, err = pcall(M._on_event, e[1], e[2])
    end
    if not ok then
      vim.schedule(function()
        vim.notify('(acp) internal error handling broker events: ' .. tostring(err), vim.log.levels.ERROR)
      end)
    end
  end
  compat.user_cache = nil
end

return M
