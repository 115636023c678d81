--- Chat buffers: one per session, holding its whole history.
---
--- acp.chat.model holds what each transcript needs (fed by every broker
--- event, through acp.state), acp.chat.render makes its lines, and
--- acp.chat.window draws them into buffers and windows on a timer. This
--- module keeps the public functions and subscribes the chat to the model.

local model = require('acp.chat.model')
local state = require('acp.state')
local window = require('acp.chat.window')

local M = {}

--- Called for every broker event, after acp.state updated its mirror
--- (inside the RPC call). Cheap: updates the chat model and queues drawing.
---@param name string
---@param data table
function M.on_event(name, data)
  model.on_event(name, data)
  window.open_pending(name, data)
  window.on_event(name, data)
end

--- Opens the chat of a session in a split on the right with the input area
--- under it, or focuses the input area when the chat is already shown in
--- this tab page. `opts.session` (an ACP sessionId) wins over `opts.agent`
--- (that agent's current session, else its latest chat); with neither, the
--- current agent's session, else the latest chat.
---@param opts {session: string|nil, agent: string|nil}|nil
---@return boolean ok
---@return string|nil err
M.open = window.open

--- The chat buffer of `session`, or nil while it has not been drawn (for
--- tests and statuslines; it does not draw what is queued).
---@param session string
---@return integer|nil
M.buffer = window.buffer

--- Opens the chat of the next session `agent` opens (a new conversation,
--- a resumed session) when it does.
---@param agent string
M.open_next = window.open_next

--- 'omnifunc' of the input buffer: completes the agent's slash commands.
M.complete = window.complete

model.changed = window.kick
state.on('event', M.on_event)

return M
