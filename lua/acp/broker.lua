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
local util = require('acp.util')
-- The views subscribe to acp.state when they load.
require('acp.auth')
require('acp.chat')
require('acp.commands')
require('acp.ledger')
require('acp.prompt')

local M = setmetatable({}, { __index = rpc })
local H = {}

-- Module definition ==========================================================

--- Entry point of every broker event (doc/protocol.md). Called through
--- `nvim_exec_lua` while the broker may be waiting, so it only updates the
--- mirror and schedules the rest.
---@param name string
---@param data table|nil
---@return boolean
function M._on_event(name, data)
  if name == 'permission' then
    -- A request: an error here reaches the broker, which answers the agent
    -- `cancelled` (fail closed).
    return H.handle(name, data)
  end
  local ok, err = pcall(H.handle, name, data)
  if not ok then
    H.report(name, err)
  end
  return ok
end

--- The notifications of one broker loop iteration, in order:
--- `{ {name, data}, ... }`. Each is handled as by `_on_event`; a failing
--- one does not keep the others from being handled.
---
--- One pcall covers the whole batch (a burst of `decided` events costs no
--- pcall per event); when an event fails, it is reported and the batch goes
--- on with the next one under a new pcall.
---@param list table
function M._on_events(list)
  compat.user_cache = {}
  util.each_protected(1, #list, 1, H.handle_at, H.report_at, list)
  compat.user_cache = nil
end

-- Helper functionality =======================================================

--- Handles one event; errors are the caller's.
function H.handle(name, data)
  if type(data) ~= 'table' then
    data = {}
  end
  if name == 'ready' then
    rpc.info = data
  end
  return events.handle(name, data)
end

function H.handle_at(list, i)
  local e = list[i]
  if type(e) == 'table' then
    H.handle(e[1], e[2])
  end
end

function H.report_at(list, i, err)
  local e = list[i]
  H.report(type(e) == 'table' and e[1] or '?', err)
end

function H.report(name, err)
  vim.schedule(function()
    vim.notify(('(acp) internal error handling broker event %s: %s'):format(tostring(name), tostring(err)), vim.log.levels.ERROR)
  end)
end

return M
