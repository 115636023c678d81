--- Chat buffers: one per session, holding its whole history.
---
--- Every broker event goes through `M.on_event` (called by acp.state, inside
--- the RPC call): it only updates a small model and queues drawing work.
--- A timer draws the queue at most every `H.interval_ms`, so thousands of
--- streamed chunks per second cost one buffer change per tick. The history
--- lives in the buffer itself (hidden when no window shows it, never wiped);
--- the model keeps only what in-place updates need.
---
--- The buffer is a list of blocks: the header, then messages, thoughts,
--- tool calls, plans and notes in arrival order. Each block remembers its
--- first line with an extmark and its height, so a tool call, the plan of a
--- turn or the message being streamed is redrawn where it is. The person
--- types into a separate input buffer under the chat window; `<CR>` in
--- normal mode sends it to the chat's own agent.

local compat = require('acp.compat')

local M = {}
local H = {}

-- Module definition ==========================================================

--- Called by acp.state for every broker event, after its mirror is updated.
--- Cheap: updates the model and queues drawing.
---@param name string
---@param data table
function M.on_event(name, data)
  local handler = H.events[name]
  if handler ~= nil and type(data) == 'table' then
    handler(data)
  end
  H.open_pending(name, data)
end

--- Opens the chat of a session in a split on the right with the input area
--- under it, or focuses the input area when the chat is already shown in
--- this tab page. `opts.session` (an ACP sessionId) wins over `opts.agent`
--- (that agent's current session, else its latest chat); with neither, the
--- current agent's session, else the latest chat.
---@param opts {session: string|nil, agent: string|nil}|nil
---@return boolean ok
---@return string|nil err
function M.open(opts)
  opts = opts or {}
  local chat, err, starting = H.resolve(opts)
  if chat == nil and starting ~= nil then
    -- The agent is starting: the chat opens with its session.
    H.waiting[starting] = true
    return true
  end
  if chat == nil then
    vim.notify(err, vim.log.levels.ERROR)
    return false, err
  end
  H.flush(chat)
  H.dirty[chat] = nil
  H.show(chat)
  return true
end

--- The chat buffer of `session`, or nil while it has not been drawn (for
--- tests and statuslines; it does not draw what is queued).
---@param session string
---@return integer|nil
function M.buffer(session)
  local chat = H.chats[session]
  if chat ~= nil and H.loaded(chat.buf) then
    return chat.buf
  end
  return nil
end

--- 'omnifunc' of the input buffer: completes the agent's slash commands
--- (`/name`) at the start of the input.
---@param findstart integer
---@param base string
---@return integer|table
function M.complete(findstart, base)
  local chat = H.by_buf[vim.api.nvim_get_current_buf()]
  if findstart == 1 then
    local col = vim.api.nvim_win_get_cursor(0)[2]
    local before = vim.api.nvim_get_current_line():sub(1, col)
    local start = before:find('/[^%s/]*$')
    if chat == nil or start == nil or not before:sub(1, start - 1):match('^%s*$') then
      return -3
    end
    return start - 1
  end
  local items = {}
  for _, c in ipairs(chat and chat.commands or {}) do
    local word = '/' .. c.name
    if word:sub(1, #base) == base then
      items[#items + 1] = { word = word, menu = c.description, info = c.hint or '' }
    end
  end
  return items
end

-- Helper data ================================================================

--- Drawing is coalesced: at most one buffer update per chat per interval.
H.interval_ms = 30
--- Text kept per message or thought; the rest is counted and reported.
H.max_message_bytes = 256 * 1024
--- Text queued per chat between two draws; beyond it, chunks are counted.
H.max_queued_bytes = 4 * 1024 * 1024
--- Drawing time per tick (ms): what is left waits for the next tick, so a
--- flood of text never holds the editor longer than this.
H.budget_ms = 4
--- Text drawn in one piece at most (the budget is checked between pieces).
H.slice_bytes = 32 * 1024
--- Lines shown per tool call content item (a diff, a text).
H.max_part_lines = 200
--- Last lines of output shown per terminal, and bytes of output kept.
H.terminal_lines = 20
H.terminal_bytes = 16 * 1024
--- Tool calls and terminals remembered per chat for in-place updates;
--- older ones stay in the buffer as drawn.
H.max_tools = 500
H.max_terminals = 50
--- Height of the input window.
H.input_height = 4

H.ns = vim.api.nvim_create_namespace('acp-chat')
H.marks = vim.api.nvim_create_namespace('acp-chat-blocks')

--- Highlight groups (default links; re-applied on ColorScheme by
--- acp.highlight).
H.links = {
  AcpChatHeader = 'Title',
  AcpChatMeta = 'Comment',
  AcpChatUser = 'Special',
  AcpChatAgent = 'Identifier',
  AcpChatThought = 'Comment',
  AcpChatToolTitle = 'Function',
  AcpChatStatus = 'Comment',
  AcpChatDone = 'String',
  AcpChatFailed = 'ErrorMsg',
  AcpChatAwaiting = 'WarningMsg',
  AcpChatLabel = 'Title',
  AcpChatError = 'ErrorMsg',
  AcpChatDiffAdd = 'DiffAdd',
  AcpChatDiffDelete = 'DiffDelete',
  AcpChatDiffHunk = 'Special',
}

--- ACP tool call status -> {word, group}.
H.statuses = {
  pending = { 'pending', 'AcpChatStatus' },
  in_progress = { 'running', 'AcpChatStatus' },
  completed = { 'done', 'AcpChatDone' },
  failed = { 'failed', 'AcpChatFailed' },
}

H.plan_marks = { completed = '[x]', in_progress = '[~]', pending = '[ ]' }
H.plan_groups = { completed = 'AcpChatDone', in_progress = 'AcpChatAwaiting' }

H.diff_groups = { ['+'] = 'AcpChatDiffAdd', ['-'] = 'AcpChatDiffDelete' }

--- Why a turn ended, for every stop reason but end_turn.
H.stop_reasons = {
  cancelled = 'turn cancelled',
  max_tokens = 'turn ended: the agent reached its token limit',
  max_turn_requests = 'turn ended: the agent reached its request limit for one turn',
  refusal = 'the agent refused to continue',
}

H.thought_prefix = '│ '

---@class acp.ChatBlock
---@field mark integer extmark (H.marks) on its first line
---@field height integer

---@class acp.Chat
---@field session string
---@field agent string
---@field seq integer creation order
---@field cwd string|nil
---@field modes table[] availableModes of the session
---@field mode string|nil current mode id
---@field commands {name: string, description: string, hint: string|nil}[]
---@field busy boolean a turn runs
---@field loading boolean the agent replays the history (session/load)
---@field exited boolean
---@field buf integer|nil chat buffer
---@field input integer|nil input buffer
---@field queue table[] drawing work, in event order
---@field queued_bytes integer text in the queue
---@field cur table|nil the message being streamed: {role, id, bytes, dropped}
---@field stream table|nil the drawn text block chunks go to
---@field last acp.ChatBlock|nil the block drawn last
---@field tools table<string, table> tool calls by toolCallId
---@field tool_order string[]
---@field turn table<string, table> tool calls of the running turn
---@field plan_op table|nil the queued plan drawing: {kind, entries}
---@field plan_new boolean the next plan starts a new block (a new turn)
---@field plan_block acp.ChatBlock|nil the plan block of this turn
---@field terminals table<string, table> terminalId -> {command, output, truncated, exit}
---@field term_order string[]
---@field term_users table<string, table<string, boolean>> terminalId -> toolCallIds showing it
---@field header acp.ChatBlock|nil
---@field header_dirty boolean

---@type table<string, acp.Chat>
H.chats = {}
H.seq = 0
--- Chat and input buffers -> chat.
H.by_buf = {}
--- Chat window -> the input window opened with it.
H.pairs = {}
--- Chats with something to draw.
H.dirty = {}
H.armed = false

-- Helper functionality =======================================================

-- The model ------------------------------------------------------------------

--- The chat of `session`, created on first use (updates can come before
--- session_new, e.g. during a session/load replay).
function H.get(session, agent)
  local chat = H.chats[session]
  if chat == nil then
    H.seq = H.seq + 1
    chat = {
      session = session,
      agent = compat.str(agent) or '?',
      seq = H.seq,
      modes = {},
      commands = {},
      busy = false,
      loading = false,
      exited = false,
      queue = {},
      queued_bytes = 0,
      tools = {},
      tool_order = {},
      turn = {},
      plan_new = true,
      terminals = {},
      term_order = {},
      term_users = {},
      header_dirty = true,
    }
    H.chats[session] = chat
  elseif chat.agent == '?' and compat.str(agent) then
    chat.agent = agent
  end
  return chat
end

--- The chat an event is about: its session's, else (no session) the
--- agent's current or latest one.
function H.chat_for(d)
  local session = compat.str(d.session)
  if session ~= nil then
    return H.get(session, d.agent)
  end
  local agent = compat.str(d.agent)
  if agent == nil then
    return nil
  end
  local a = require('acp.state').agents[agent]
  if a ~= nil and a.session ~= nil then
    return H.get(a.session, agent)
  end
  return H.latest(agent)
end

---@return acp.Chat|nil
function H.latest(agent)
  local best
  for _, chat in pairs(H.chats) do
    if (agent == nil or chat.agent == agent) and (best == nil or chat.seq > best.seq) then
      best = chat
    end
  end
  return best
end

function H.resolve(opts)
  local state = require('acp.state')
  local session = compat.str(opts.session)
  if session ~= nil then
    local known = H.chats[session] or state.sessions[session]
    if known == nil then
      return nil, ("(acp) no session '%s'"):format(session)
    end
    return H.get(session, known.agent)
  end
  local agent = compat.str(opts.agent) or state.current
  local a = agent and state.agents[agent]
  if a ~= nil and a.session ~= nil then
    return H.get(a.session, agent)
  elseif a ~= nil then
    -- Starting: its new session's chat, not an older one.
    return nil, ("(acp) agent '%s' has no session yet"):format(agent), agent
  end
  local chat = H.latest(agent)
  if chat == nil and opts.agent == nil then
    chat = H.latest(nil)
  end
  if chat ~= nil then
    return chat
  end
  if opts.agent ~= nil then
    return nil, ("(acp) no chat for agent '%s': :AcpStart %s starts it"):format(opts.agent, opts.agent)
  end
  return nil, '(acp) no session yet: :AcpStart starts an agent'
end

--- Agents whose chat opens as soon as their session exists (:AcpChat
--- right after :AcpStart).
H.waiting = {}

function H.open_pending(name, data)
  local agent = compat.str(data.agent)
  if agent == nil or not H.waiting[agent] then
    return
  end
  if name == 'session_new' then
    H.waiting[agent] = nil
    local session = compat.str(data.session)
    vim.schedule(function()
      M.open({ session = session })
    end)
  elseif name == 'agent_exit' then
    H.waiting[agent] = nil
  end
end

--- Queues drawing work.
function H.push(chat, op)
  chat.queue[#chat.queue + 1] = op
  H.kick(chat)
end

--- Marks the header (and the window bars) for redrawing.
function H.touch(chat)
  chat.header_dirty = true
  H.kick(chat)
end

--- Schedules a draw of `chat` within H.interval_ms.
function H.kick(chat)
  H.dirty[chat] = true
  if H.armed then
    return
  end
  H.armed = true
  H.timer = H.timer or compat.uv.new_timer()
  H.timer:start(H.interval_ms, 0, function()
    vim.schedule(H.flush_all)
  end)
end

--- Adds a line of its own (a note about the turn or the agent).
function H.note(chat, text, group)
  chat.cur = nil
  H.push(chat, { kind = 'note', text = text, group = group or 'AcpChatMeta' })
end

--- Streams `text` into the message of `role` ('user', 'agent', 'thought')
--- with message id `id`: chunks of one message are drawn as one block.
function H.text(chat, role, id, text)
  local cur = chat.cur
  if cur == nil or cur.role ~= role or cur.id ~= id then
    cur = { role = role, id = id, bytes = 0, dropped = 0 }
    chat.cur = cur
  end
  local op = chat.queue[#chat.queue]
  if op == nil or op.cur ~= cur then
    op = { kind = 'text', cur = cur, pieces = {} }
    H.push(chat, op)
  end
  if cur.bytes + #text > H.max_message_bytes or chat.queued_bytes + #text > H.max_queued_bytes then
    cur.dropped = cur.dropped + #text
  else
    cur.bytes = cur.bytes + #text
    chat.queued_bytes = chat.queued_bytes + #text
    op.pieces[#op.pieces + 1] = text
  end
  H.kick(chat)
end

--- A ContentBlock as text: text as is, other types as a short placeholder.
function H.content_text(c)
  if type(c) ~= 'table' then
    return nil
  end
  if c.type == 'text' then
    return type(c.text) == 'string' and c.text or nil
  elseif c.type == 'image' or c.type == 'audio' then
    return ('[%s %s]'):format(c.type, compat.str(c.mimeType) or '')
  elseif c.type == 'resource_link' then
    return ('[link %s]'):format(compat.str(c.name) or compat.str(c.uri) or '')
  elseif c.type == 'resource' then
    local r = type(c.resource) == 'table' and c.resource or {}
    return ('[resource %s]'):format(compat.str(r.uri) or '')
  end
  return ('[%s]'):format(compat.str(c.type) or 'content')
end

--- The tool call `id` of `chat`, created when unknown (tool_call,
--- tool_call_update, a permission's toolCall and a decision all upsert).
function H.tool(chat, id)
  local rec = chat.tools[id]
  if rec == nil then
    rec = { id = id }
    local decided = H.decided_for(chat, id)
    if decided ~= nil then
      H.apply_decided(rec, decided)
    end
    chat.tools[id] = rec
    chat.tool_order[#chat.tool_order + 1] = id
    if #chat.tool_order > H.max_tools then
      chat.tools[table.remove(chat.tool_order, 1)] = nil
    end
  end
  if chat.busy then
    chat.turn[id] = rec
  end
  return rec
end

--- Merges the fields of a ToolCall / ToolCallUpdate that have a value;
--- `content` and `locations` replace the old ones whole.
function H.merge(rec, u)
  rec.title = compat.str(u.title) or rec.title
  rec.kind = compat.str(u.kind) or rec.kind
  rec.status = compat.str(u.status) or rec.status
  if type(u.content) == 'table' then
    rec.content = u.content
    rec.content_dirty = true
  end
  if type(u.locations) == 'table' then
    rec.locations = u.locations
  end
  if type(u.rawInput) == 'table' and not rec.judged then
    rec.command = require('acp.state').command(u.rawInput) or rec.command
  end
end

--- Queues a (re)draw of tool call `rec`, once per draw.
function H.queue_tool(chat, rec)
  if rec == nil or rec.queued then
    return
  end
  rec.queued = true
  if rec.block == nil then
    chat.cur = nil
  end
  H.push(chat, { kind = 'tool', rec = rec })
end

function H.upsert_tool(chat, u)
  local id = compat.str(u.toolCallId)
  if id ~= nil then
    local rec = H.tool(chat, id)
    H.merge(rec, u)
    H.queue_tool(chat, rec)
  end
end

--- The last `max` bytes of `s`, starting at a character boundary.
function H.tail(s, max)
  if #s <= max then
    return s
  end
  local i = #s - max + 1
  while i <= #s and s:byte(i) >= 0x80 and s:byte(i) < 0xC0 do
    i = i + 1
  end
  return s:sub(i)
end

-- Events ---------------------------------------------------------------------

H.events = {}
H.updates = {}

function H.events.session_loading(d)
  local session = compat.str(d.session)
  if session == nil then
    return
  end
  local chat = H.get(session, d.agent)
  chat.cwd = compat.str(d.cwd) or chat.cwd
  chat.loading = true
  H.touch(chat)
  H.note(chat, 'loading the history of this session…')
end

function H.events.session_new(d)
  local session = compat.str(d.session)
  if session == nil then
    return
  end
  local chat = H.get(session, d.agent)
  chat.cwd = compat.str(d.cwd) or chat.cwd
  chat.exited = false
  if type(d.modes) == 'table' then
    chat.modes = type(d.modes.availableModes) == 'table' and d.modes.availableModes or {}
    chat.mode = compat.str(d.modes.currentModeId) or chat.mode
  end
  if chat.loading or d.resumed == true then
    chat.loading = false
    H.note(chat, 'session resumed: the history above was replayed by the agent')
  end
  H.touch(chat)
end

function H.events.posture(d)
  local session = compat.str(d.session)
  if session == nil then
    return
  end
  local chat = H.get(session, d.agent)
  local reason = compat.str(d.reason)
  H.touch(chat)
  if d.posture == 'unverified' and reason ~= nil and reason ~= chat.posture_noted then
    chat.posture_noted = reason
    H.note(chat, 'not in asking posture: ' .. reason, 'AcpChatError')
  end
end

function H.events.mode_set(d)
  local session = compat.str(d.session)
  local id = compat.str(d.modeId)
  if session == nil or id == nil then
    return
  end
  local chat = H.get(session, d.agent)
  chat.mode = id
  H.touch(chat)
end

function H.events.update(d)
  local u = d.update
  local session = compat.str(d.session)
  if type(u) ~= 'table' or session == nil then
    return
  end
  local fn = H.updates[u.sessionUpdate]
  if fn ~= nil then
    fn(H.get(session, d.agent), u)
  end
end

function H.updates.user_message_chunk(chat, u)
  H.chunk(chat, 'user', u)
end

function H.updates.agent_message_chunk(chat, u)
  H.chunk(chat, 'agent', u)
end

function H.updates.agent_thought_chunk(chat, u)
  H.chunk(chat, 'thought', u)
end

function H.chunk(chat, role, u)
  local text = H.content_text(u.content)
  if text ~= nil and text ~= '' then
    H.text(chat, role, compat.str(u.messageId), text)
  end
end

function H.updates.tool_call(chat, u)
  H.upsert_tool(chat, u)
end

H.updates.tool_call_update = H.updates.tool_call

function H.updates.plan(chat, u)
  if type(u.entries) ~= 'table' then
    return
  end
  if chat.plan_op ~= nil then
    chat.plan_op.entries = u.entries
    return
  end
  if chat.plan_new then
    chat.cur = nil
  end
  chat.plan_new = false
  chat.plan_op = { kind = 'plan', entries = u.entries }
  H.push(chat, chat.plan_op)
end

function H.updates.available_commands_update(chat, u)
  local list = {}
  for _, c in ipairs(type(u.availableCommands) == 'table' and u.availableCommands or {}) do
    if type(c) == 'table' and compat.str(c.name) then
      local input = type(c.input) == 'table' and c.input or {}
      list[#list + 1] = {
        name = compat.str(c.name),
        description = compat.str(c.description) or '',
        hint = compat.str(input.hint),
      }
    end
  end
  chat.commands = list
  H.touch(chat)
end

function H.updates.current_mode_update(chat, u)
  local id = compat.str(u.currentModeId)
  if id == nil or id == chat.mode then
    return
  end
  chat.mode = id
  H.touch(chat)
  H.note(chat, 'mode changed to ' .. H.mode_name(chat))
end

function H.updates.session_info_update(chat, u)
  if u.title ~= nil then
    chat.title = compat.str(u.title) -- null clears it
    H.touch(chat)
  end
end

function H.updates.usage_update(chat, u)
  if type(u.used) == 'number' and type(u.size) == 'number' then
    chat.usage = { used = u.used, size = u.size, cost = type(u.cost) == 'table' and u.cost or nil }
    H.touch(chat)
  end
end

function H.updates.config_option_update(chat, u)
  local list = {}
  for _, o in ipairs(type(u.configOptions) == 'table' and u.configOptions or {}) do
    if type(o) == 'table' and compat.str(o.id) then
      local value = o.currentValue
      if type(value) ~= 'string' and type(value) ~= 'number' and type(value) ~= 'boolean' then
        value = nil
      end
      list[#list + 1] = ('%s: %s'):format(compat.str(o.name) or o.id, tostring(value == nil and '?' or value))
    end
  end
  chat.options = list
  H.touch(chat)
end

function H.events.turn_start(d)
  local chat = H.chat_for(d)
  if chat == nil then
    return
  end
  chat.busy = true
  chat.turn = {}
  chat.plan_op, chat.plan_new = nil, true
  chat.cur = nil
  H.push(chat, { kind = 'turn' })
  local text = compat.str(d.text)
  if text ~= nil then
    -- A message of its own: what the agent streams next starts another.
    H.text(chat, 'user', nil, text)
    chat.cur = nil
  end
  H.touch(chat)
end

function H.events.turn_end(d)
  local chat = H.chat_for(d)
  if chat == nil then
    return
  end
  chat.busy = false
  local reason = compat.str(d.stopReason) or 'end_turn'
  if reason ~= 'end_turn' then
    -- The agent leaves calls of a cancelled or failed turn unfinished.
    H.end_tools(chat, reason == 'cancelled' and 'cancelled' or 'interrupted')
  end
  chat.turn = {}
  if reason == 'error' then
    H.note(chat, 'error: ' .. (compat.str(d.message) or 'the turn failed'), 'AcpChatError')
  elseif reason ~= 'end_turn' then
    H.note(chat, H.stop_reasons[reason] or ('turn ended: ' .. reason))
  end
  H.touch(chat)
end

--- Marks the unfinished tool calls of the turn as ended with `word`.
function H.end_tools(chat, word)
  for _, rec in pairs(chat.turn) do
    if rec.status == nil or rec.status == 'pending' or rec.status == 'in_progress' then
      rec.ended = word
      H.queue_tool(chat, rec)
    end
  end
end

function H.events.permission(d)
  local chat = H.chat_for(d)
  if chat == nil then
    return
  end
  local tc = type(d.toolCall) == 'table' and d.toolCall or {}
  local id = compat.str(d.toolCallId) or compat.str(tc.toolCallId)
  if id == nil then
    return
  end
  local rec = H.tool(chat, id)
  H.merge(rec, tc)
  H.judged(rec, d)
  rec.title = compat.str(d.title) or rec.title
  rec.kind = compat.str(d.kind) or rec.kind
  rec.rejected, rec.ended = nil, nil
  local why = compat.str(d.reason)
  rec.perm = {
    id = d.id,
    options = type(d.options) == 'table' and d.options or {},
    text = '? awaiting your answer (:AcpPending)' .. (why and (' — ' .. why) or ''),
    group = 'AcpChatAwaiting',
  }
  H.queue_tool(chat, rec)
  H.touch(chat)
end

--- What became of a permission prompt, by who answered it.
H.resolved_by = {
  cancel = 'not answered: the turn was cancelled',
  agent_exit = 'not answered: the agent exited',
  agent = 'withdrawn by the agent',
  error = 'not answered: the prompt could not be shown',
}

function H.events.permission_resolved(d)
  local chat = H.chat_for(d)
  local rec = chat and chat.tools[compat.str(d.toolCallId) or '']
  if rec == nil or rec.perm == nil or rec.perm.id ~= d.id then
    if chat then
      H.touch(chat)
    end
    return
  end
  local option
  for _, o in ipairs(rec.perm.options) do
    if type(o) == 'table' and o.optionId == d.optionId then
      option = o
      break
    end
  end
  if d.outcome == 'selected' and option ~= nil then
    rec.rejected = not tostring(option.kind):match('^allow')
    local name = compat.str(option.name) or compat.str(option.optionId) or '?'
    rec.perm = { text = 'you chose: ' .. name, group = rec.rejected and 'AcpChatFailed' or 'AcpChatMeta' }
  else
    -- Not run: the agent sends no update for a call it was not allowed.
    rec.ended = d.by == 'agent_exit' and 'interrupted' or 'cancelled'
    rec.perm = { text = H.resolved_by[d.by] or 'not answered (cancelled)', group = 'AcpChatMeta' }
  end
  H.queue_tool(chat, rec)
  H.touch(chat)
end

function H.events.decided(d)
  local chat = H.chat_for(d)
  local id = compat.str(d.toolCallId)
  if chat == nil or id == nil then
    return
  end
  local rec = chat.tools[id]
  if rec == nil then
    -- A call the agent has not announced: counted on one line per turn
    -- (an agent can have thousands decided by rules), and its block gets
    -- the decision if the agent reports on it later.
    H.count_decided(chat, id, d)
    return
  end
  H.apply_decided(rec, d)
  H.queue_tool(chat, rec)
end

--- A tool call that acted without asking: its block gets a red line (and
--- the change, when the agent's updates did not carry it), and a red note
--- marks the moment it was noticed.
function H.events.unasked(d)
  local chat = H.chat_for(d)
  local id = compat.str(d.toolCallId)
  if chat == nil or id == nil then
    return
  end
  local rec = H.tool(chat, id)
  local u = { title = d.title, kind = d.kind, status = d.status }
  if rec.parts == nil and rec.content == nil and type(d.content) == 'table' and #d.content > 0 then
    u.content = d.content
  end
  if rec.locations == nil and type(d.locations) == 'table' and #d.locations > 0 then
    u.locations = d.locations
  end
  H.merge(rec, u)
  local why = require('acp.state').why({
    reason = compat.str(d.reason),
    rule = compat.str(d.rule),
    source = compat.str(d.source),
  })
  local would = d.decision == 'deny' and 'would have denied it' or 'would have asked you'
  rec.perm = { text = ('UNASKED: the agent did this without asking; the policy %s: %s'):format(would, why), group = 'AcpChatError' }
  H.queue_tool(chat, rec)
  local what = compat.str(d.command) or compat.str(rec.title) or compat.str(d.kind) or id
  H.note(chat, ('UNASKED: %s %s (the policy %s)'):format(compat.str(d.kind) or 'tool call', what, would), 'AcpChatError')
  chat.unasked = (chat.unasked or 0) + 1
  H.touch(chat)
end

--- The permission line of a tool call's block, from a `decided` event.
function H.decided_perm(d)
  local allowed = d.decision == 'allow'
  local why = require('acp.state').why({
    reason = compat.str(d.reason),
    rule = compat.str(d.rule),
    source = compat.str(d.source),
    by = compat.str(d.by),
  })
  return {
    text = (allowed and 'allowed: ' or 'denied: ') .. why,
    group = allowed and 'AcpChatMeta' or 'AcpChatFailed',
  }
end

--- The command the broker's policy analysed replaces the one read from
--- rawInput, for good: the chat shows what was judged.
function H.judged(rec, d)
  local cmd = compat.str(d.command)
  if cmd ~= nil then
    rec.command, rec.judged = cmd, true
  end
end

function H.apply_decided(rec, d)
  H.merge(rec, { title = d.title, kind = d.kind })
  H.judged(rec, d)
  rec.rejected = d.decision ~= 'allow'
  rec.perm = H.decided_perm(d)
end

--- Unannounced decisions kept for their blocks, per chat: the newest
--- max_decided to twice as many (two generations, O(1) per decision).
H.max_decided = 500

function H.count_decided(chat, id, d)
  local keep = chat.decided
  if keep == nil then
    keep = { cur = {}, old = {}, n = 0 }
    chat.decided = keep
  end
  if keep.cur[id] == nil then
    keep.n = keep.n + 1
    if keep.n > H.max_decided then
      keep.old, keep.cur, keep.n = keep.cur, {}, 1
    end
  end
  keep.cur[id] = d
  local op = chat.auto_op
  if op == nil or op.turn ~= chat.turn then
    op = { kind = 'auto', allowed = 0, denied = 0, turn = chat.turn }
    chat.auto_op = op
  end
  if d.decision == 'allow' then
    op.allowed = op.allowed + 1
  else
    op.denied = op.denied + 1
  end
  -- Formatted when drawn: only the last one of a burst is shown.
  op.last, op.last_id = d, id
  if not op.queued then
    op.queued = true
    H.push(chat, op)
  end
end

--- The decision kept for an unannounced call, or nil.
function H.decided_for(chat, id)
  local keep = chat.decided
  return keep and (keep.cur[id] or keep.old[id])
end

function H.events.terminal(d)
  local chat = H.chat_for(d)
  local id = compat.str(d.terminalId)
  if chat == nil or id == nil then
    return
  end
  local t = chat.terminals[id]
  if t == nil then
    t = {}
    chat.terminals[id] = t
    chat.term_order[#chat.term_order + 1] = id
    if #chat.term_order > H.max_terminals then
      local old = table.remove(chat.term_order, 1)
      chat.terminals[old], chat.term_users[old] = nil, nil
    end
  end
  t.command = compat.str(d.command) or t.command
  if type(d.output) == 'string' then
    t.output = H.tail(d.output, H.terminal_bytes)
  end
  t.truncated = d.truncated == true
  t.exit = type(d.exitStatus) == 'table' and d.exitStatus or nil
  for tcid in pairs(chat.term_users[id] or {}) do
    H.queue_tool(chat, chat.tools[tcid])
  end
end

function H.events.agent_exit(d)
  local agent = compat.str(d.agent)
  for _, chat in pairs(H.chats) do
    if chat.agent == agent and not chat.exited then
      chat.exited, chat.busy, chat.loading = true, false, false
      H.end_tools(chat, 'interrupted')
      chat.turn = {}
      -- The broker's words: "the agent was stopped", "... exited with code 9".
      H.note(chat, compat.str(d.message) or 'the agent exited')
      H.touch(chat)
    end
  end
end

-- Drawing --------------------------------------------------------------------

--- The lines of `text` (split at '\n'; the last one may be empty). Not
--- vim.split: on Neovim 0.7.2 (its LuaJIT 2.1.0-beta3), run this often, its
--- vim.validate() call now and then fails on a table it was never given
--- ("opt[true]: expected table, got boolean"), and after an error message
--- Neovim 0.7 sleeps a second in its next screen update without handling
--- RPC (bench/README.md): the stream stalled for a second.
---@param text string
---@return string[]
function H.split_lines(text)
  local lines, from = {}, 1
  while true do
    local nl = text:find('\n', from, true)
    if nl == nil then
      lines[#lines + 1] = text:sub(from)
      return lines
    end
    lines[#lines + 1] = text:sub(from, nl - 1)
    from = nl + 1
  end
end

function H.flush_all()
  H.armed = false
  local dirty = H.dirty
  H.dirty = {}
  for chat in pairs(dirty) do
    local ok, err = pcall(H.flush, chat)
    if not ok and err ~= H.last_error then
      -- Once per distinct error: a broken draw would repeat every tick.
      H.last_error = err
      vim.notify('(acp) chat: ' .. tostring(err), vim.log.levels.ERROR)
    end
  end
end

--- Draws everything queued for `chat` (creating its buffer when needed);
--- windows whose cursor was on the last line follow the end.
function H.flush(chat)
  H.ensure_buffer(chat)
  local buf = chat.buf
  local follow = H.followers(buf)
  local queue = chat.queue
  chat.queue = {}
  local bars = chat.header_dirty
  compat.set_buf(buf, 'modifiable', true)
  local ok, err = pcall(H.apply, chat, queue)
  compat.set_buf(buf, 'modifiable', false)
  -- Over budget: the rest (and whatever came meanwhile) on the next tick.
  if ok and chat.queue ~= queue and H.left ~= nil then
    local rest = H.left
    for _, op in ipairs(chat.queue) do
      rest[#rest + 1] = op
    end
    chat.queue = rest
  end
  chat.queued_bytes = 0
  for _, op in ipairs(chat.queue) do
    if op.kind == 'text' then
      for _, piece in ipairs(op.pieces) do
        chat.queued_bytes = chat.queued_bytes + #piece
      end
    end
  end
  H.left = nil
  if #chat.queue > 0 then
    H.kick(chat)
  end
  local last = vim.api.nvim_buf_line_count(buf)
  for _, win in ipairs(follow) do
    if vim.api.nvim_win_is_valid(win) and vim.api.nvim_win_get_buf(win) == buf then
      vim.api.nvim_win_set_cursor(win, { last, 0 })
    end
  end
  if bars then
    H.update_bars(chat)
  end
  if not ok then
    error(err, 0)
  end
end

--- Draws the ops of `queue` in order until the time budget is spent; what
--- is left is put in H.left (a text op split at a piece).
function H.apply(chat, queue)
  if chat.header_dirty then
    chat.header_dirty = false
    H.replace(chat, chat.header, H.render_header(chat))
  end
  local deadline = compat.uv.hrtime() + H.budget_ms * 1e6
  for i, op in ipairs(queue) do
    if i > 1 and compat.uv.hrtime() > deadline then
      H.left = H.slice(queue, i, #queue)
      return
    end
    if op.kind == 'text' then
      H.apply_text(chat, op, deadline)
      if #op.pieces > 0 then
        H.left = H.slice(queue, i, #queue)
        return
      end
    else
      H.ops[op.kind](chat, op)
    end
  end
end

--- Draws a text op's pieces a slice at a time while the budget lasts;
--- the pieces left stay in op.
function H.apply_text(chat, op, deadline)
  local pieces = op.pieces
  local first = 1
  while first <= #pieces do
    local n, last = 0, first
    while last <= #pieces and (last == first or n + #pieces[last] <= H.slice_bytes) do
      n = n + #pieces[last]
      last = last + 1
    end
    H.ops.text(chat, { cur = op.cur, pieces = H.slice(pieces, first, last - 1) })
    first = last
    if compat.uv.hrtime() > deadline then
      break
    end
  end
  op.pieces = H.slice(pieces, first, #pieces)
end

--- t[i..j] as a new list (unpack() is limited to a few thousand values).
function H.slice(t, i, j)
  local out = {}
  for k = i, j do
    out[#out + 1] = t[k]
  end
  return out
end

H.ops = {}

function H.ops.text(chat, op)
  local cur, s = op.cur, chat.stream
  if s == nil or s.cur ~= cur or s.block ~= chat.last then
    local b = H.block()
    b.add({ { '' } })
    if cur.role == 'user' then
      b.add({ { 'You', 'AcpChatUser' } })
    elseif cur.role == 'thought' then
      b.add({ { chat.agent .. ' · thinking', 'AcpChatThought' } })
    else
      b.add({ { chat.agent, 'AcpChatAgent' } })
    end
    b.add({ { '' } })
    s = { cur = cur, tail = '', marker = false }
    if cur.role == 'thought' then
      s.prefix, s.group = H.thought_prefix, 'AcpChatThought'
    end
    s.block = H.append(chat, b)
    chat.stream = s
  end
  -- The last line of the block is unfinished: redraw it with what follows.
  local lines = H.split_lines((s.tail .. table.concat(op.pieces)):gsub('\r', ''))
  s.tail = lines[#lines]
  local b = H.block()
  for _, l in ipairs(lines) do
    b.add({ { (s.prefix or '') .. l, s.group } })
  end
  if cur.dropped > 0 then
    b.add({ { ('… %s more not shown'):format(H.size(cur.dropped)), 'AcpChatMeta' } })
  end
  H.replace_tail(chat, s.block, s.marker and 2 or 1, b)
  s.marker = cur.dropped > 0
end

function H.ops.tool(chat, op)
  local rec = op.rec
  rec.queued = false
  local b = H.render_tool(chat, rec)
  if rec.block ~= nil then
    H.replace(chat, rec.block, b)
  else
    rec.block = H.append(chat, b)
  end
end

function H.ops.plan(chat, op)
  if chat.plan_op == op then
    chat.plan_op = nil
  end
  local b = H.render_plan(op.entries)
  if chat.plan_block ~= nil then
    H.replace(chat, chat.plan_block, b)
  else
    chat.plan_block = H.append(chat, b)
  end
end

function H.ops.turn(chat)
  chat.plan_block = nil
end

--- The line counting the requests decided without a block (one per turn,
--- redrawn in place).
function H.ops.auto(chat, op)
  op.queued = false
  local b = H.block()
  local n = op.allowed + op.denied
  local counts = op.denied == 0 and ('%d allowed'):format(op.allowed)
    or op.allowed == 0 and ('%d denied'):format(op.denied)
    or ('%d allowed, %d denied'):format(op.allowed, op.denied)
  b.add({
    { ('acp decided %d request%s the agent did not announce: %s'):format(n, n == 1 and '' or 's', counts), 'AcpChatMeta' },
  })
  local last = op.last
  local text = ('%s %s'):format(compat.str(last.title) or op.last_id, H.decided_perm(last).text)
  b.add({ { '  last: ' .. H.one_line(text), 'AcpChatMeta' } })
  if op.block ~= nil then
    H.replace(chat, op.block, b)
  else
    op.block = H.append(chat, b)
  end
end

function H.ops.note(chat, op)
  local b = H.block()
  b.add({ { '' } })
  b.add({ { H.one_line(op.text), op.group } })
  H.append(chat, b)
end

-- Blocks ---------------------------------------------------------------------

--- Lines with highlights: {lines, hls = {{row, scol, ecol, group}}}.
function H.block()
  local b = { lines = {}, hls = {} }
  --- Adds one line made of {text, group} chunks.
  function b.add(chunks)
    local text = ''
    for _, c in ipairs(chunks) do
      if c[2] ~= nil and #c[1] > 0 then
        b.hls[#b.hls + 1] = { #b.lines, #text, #text + #c[1], c[2] }
      end
      text = text .. c[1]
    end
    b.lines[#b.lines + 1] = text
  end
  --- Adds multi-line `text`, each line after `indent`, at most `max` lines.
  function b.text(text, indent, group, max)
    local lines = H.split(text)
    for i, l in ipairs(lines) do
      if max and i > max then
        b.add({ { indent .. ('… %d more lines'):format(#lines - max), 'AcpChatMeta' } })
        return
      end
      b.add({ { indent }, { l, group } })
    end
  end
  return b
end

--- Appends block lines `b` at the end of the buffer.
---@return acp.ChatBlock
function H.append(chat, b)
  local buf = chat.buf
  local row = vim.api.nvim_buf_line_count(buf)
  vim.api.nvim_buf_set_lines(buf, -1, -1, false, b.lines)
  H.highlight(buf, row, b)
  local block = {
    mark = vim.api.nvim_buf_set_extmark(buf, H.marks, row, 0, { right_gravity = false }),
    height = #b.lines,
  }
  chat.last = block
  return block
end

--- Replaces the lines of `block` with `b`.
function H.replace(chat, block, b)
  H.replace_tail(chat, block, block.height, b)
end

--- Replaces the last `n` lines of `block` with `b`. The text is replaced up
--- to the end of its last line (not to the start of the next block), so the
--- extmark of the next block moves with it and this block's stays.
function H.replace_tail(chat, block, n, b)
  local buf = chat.buf
  local pos = vim.api.nvim_buf_get_extmark_by_id(buf, H.marks, block.mark, {})
  local row = pos[1] + block.height - n
  local last = vim.api.nvim_buf_get_lines(buf, row + n - 1, row + n, true)[1]
  vim.api.nvim_buf_clear_namespace(buf, H.ns, row, row + n)
  vim.api.nvim_buf_set_text(buf, row, 0, row + n - 1, #last, b.lines)
  H.highlight(buf, row, b)
  block.height = block.height - n + #b.lines
end

function H.highlight(buf, row, b)
  for _, hl in ipairs(b.hls) do
    vim.api.nvim_buf_set_extmark(buf, H.ns, row + hl[1], hl[2], {
      end_row = row + hl[1],
      end_col = hl[3],
      hl_group = hl[4],
    })
  end
end

function H.split(text)
  return require('acp.state').split_lines(text)
end

function H.one_line(text)
  return (tostring(text):gsub('%s*[\r\n]+%s*', ' '))
end

function H.size(n)
  if n >= 1024 * 1024 then
    return ('%.1f MiB'):format(n / (1024 * 1024))
  elseif n >= 1024 then
    return ('%.1f KiB'):format(n / 1024)
  end
  return ('%d bytes'):format(n)
end

function H.path(p)
  return require('acp.state').short_path(p)
end

-- Rendering ------------------------------------------------------------------

function H.render_header(chat)
  local b = H.block()
  local where = chat.cwd and (' · ' .. vim.fn.fnamemodify(chat.cwd, ':~')) or ''
  b.add({ { ('acp chat · %s · session %s%s'):format(chat.agent, chat.session, where), 'AcpChatHeader' } })
  if chat.title ~= nil then
    b.add({ { chat.title, 'AcpChatHeader' } })
  end
  b.add({ { H.summary(chat), 'AcpChatMeta' } })
  if (chat.unasked or 0) > 0 then
    local n = chat.unasked
    b.add({ { ('%d tool call%s acted WITHOUT ASKING (see :AcpLog)'):format(n, n == 1 and '' or 's'), 'AcpChatError' } })
  end
  local st = require('acp.state').sessions[chat.session] or {}
  if st.posture == 'unverified' then
    b.add({ { 'posture: unverified — ' .. (st.posture_reason or 'not checked yet'), 'AcpChatError' } })
  end
  if chat.options ~= nil and #chat.options > 0 then
    b.add({ { 'options: ' .. table.concat(chat.options, ' · '), 'AcpChatMeta' } })
  end
  if #chat.commands > 0 then
    local names = {}
    for _, c in ipairs(chat.commands) do
      names[#names + 1] = '/' .. c.name
    end
    b.add({ { 'commands: ' .. table.concat(names, ' '), 'AcpChatMeta' } })
  end
  return b
end

--- One line about the session: mode, what it is doing, prompts waiting.
function H.summary(chat)
  local parts = {}
  if chat.mode ~= nil then
    parts[#parts + 1] = 'mode: ' .. H.mode_name(chat)
  end
  if (require('acp.state').sessions[chat.session] or {}).posture == 'asking' then
    parts[#parts + 1] = 'asking posture'
  end
  if chat.exited then
    parts[#parts + 1] = 'agent exited'
  elseif chat.loading then
    parts[#parts + 1] = 'loading history…'
  else
    parts[#parts + 1] = chat.busy and 'working…' or 'idle'
  end
  local n = 0
  for _, req in pairs(require('acp.state').pending) do
    if req.session == chat.session then
      n = n + 1
    end
  end
  if n > 0 then
    parts[#parts + 1] = ('%d awaiting your answer'):format(n)
  end
  local u = chat.usage
  if u ~= nil then
    local usage = ('context %s/%s'):format(H.tokens(u.used), H.tokens(u.size))
    if u.cost ~= nil and type(u.cost.amount) == 'number' then
      usage = usage .. (' · %.2f %s'):format(u.cost.amount, compat.str(u.cost.currency) or '')
    end
    parts[#parts + 1] = usage
  end
  return table.concat(parts, ' · ')
end

--- 1234 → "1.2k", 200000 → "200k".
function H.tokens(n)
  if n >= 1000 then
    local k = n / 1000
    return (k >= 100 and '%.0fk' or '%.1fk'):format(k)
  end
  return tostring(n)
end

function H.mode_name(chat)
  for _, m in ipairs(chat.modes) do
    if type(m) == 'table' and m.id == chat.mode then
      return compat.str(m.name) or chat.mode
    end
  end
  return chat.mode
end

function H.render_tool(chat, rec)
  if rec.content_dirty then
    rec.parts = H.render_content(rec.content)
    rec.content, rec.content_dirty = nil, false
  end
  local b = H.block()
  b.add({ { '' } })
  local word, group
  if rec.rejected and (rec.status == nil or rec.status == 'pending') then
    word, group = 'rejected', 'AcpChatFailed'
  elseif rec.ended and (rec.status == nil or rec.status == 'pending' or rec.status == 'in_progress') then
    word, group = rec.ended, 'AcpChatMeta'
  else
    local s = H.statuses[rec.status or 'pending'] or { rec.status, 'AcpChatStatus' }
    word, group = s[1], s[2]
  end
  local title = H.one_line(rec.title or (rec.command or rec.kind or 'tool call'))
  b.add({
    { '[' .. word .. ']', group },
    { ' ' },
    { title, 'AcpChatToolTitle' },
    { ' · ' .. (rec.kind or 'other'), 'AcpChatMeta' },
  })
  if rec.perm ~= nil then
    b.add({ { '  ' }, { H.one_line(rec.perm.text), rec.perm.group } })
  end
  local parts, diff, terminal = rec.parts or {}, false, false
  for _, part in ipairs(parts) do
    diff, terminal = diff or part.diff == true, terminal or part.terminal ~= nil
  end
  -- A terminal shows its command itself.
  if rec.command ~= nil and not terminal and H.one_line(rec.command) ~= title then
    b.text('$ ' .. rec.command, '  ', nil, H.max_part_lines)
  end
  for _, part in ipairs(parts) do
    if part.terminal then
      H.render_terminal(chat, b, part.terminal, rec.id)
    else
      for i, l in ipairs(part.lines) do
        b.lines[#b.lines + 1] = l
        for _, hl in ipairs(part.hls) do
          if hl[1] == i - 1 then
            b.hls[#b.hls + 1] = { #b.lines - 1, hl[2], hl[3], hl[4] }
          end
        end
      end
    end
  end
  if not diff and rec.kind ~= 'execute' then
    for i, loc in ipairs(rec.locations or {}) do
      if i > 3 then
        break
      end
      if type(loc) == 'table' and compat.str(loc.path) then
        local line = type(loc.line) == 'number' and (':' .. loc.line) or ''
        b.add({ { '  ' .. H.path(loc.path) .. line, 'AcpChatMeta' } })
      end
    end
  end
  return b
end

--- ToolCallContent items as blocks (with `diff = true` for diffs), or
--- {terminal = id} for terminals, drawn with their latest output.
function H.render_content(content)
  local parts = {}
  for _, item in ipairs(content) do
    if type(item) == 'table' then
      if item.type == 'terminal' and compat.str(item.terminalId) then
        parts[#parts + 1] = { terminal = compat.str(item.terminalId) }
      else
        parts[#parts + 1] = H.render_item(item)
      end
    end
  end
  return parts
end

function H.render_item(item)
  local b = H.block()
  if item.type == 'diff' then
    b.diff = true
    local d = require('acp.state').diff(item)
    b.add({ { '  ' .. d.from, 'AcpChatMeta' } })
    b.add({ { '  ' .. d.to, 'AcpChatMeta' } })
    if d.note then
      b.add({ { '  ' .. d.note, 'AcpChatMeta' } })
    else
      local lines = d.lines
      for i, l in ipairs(lines) do
        if i > H.max_part_lines then
          b.add({ { ('  … %d more lines'):format(#lines - H.max_part_lines), 'AcpChatMeta' } })
          break
        end
        b.add({ { '  ' }, { l, H.diff_groups[l:sub(1, 1)] or (l:sub(1, 2) == '@@' and 'AcpChatDiffHunk' or nil) } })
      end
    end
  elseif item.type == 'content' then
    b.text(H.content_text(item.content) or '[content]', '  ', nil, H.max_part_lines)
  else
    b.add({ { ('  [%s]'):format(compat.str(item.type) or 'content'), 'AcpChatMeta' } })
  end
  return b
end

function H.render_terminal(chat, b, id, tcid)
  chat.term_users[id] = chat.term_users[id] or {}
  chat.term_users[id][tcid] = true
  local t = chat.terminals[id]
  if t == nil then
    b.add({ { ('  terminal %s (no output yet)'):format(id), 'AcpChatMeta' } })
    return
  end
  local state = 'running'
  if t.exit ~= nil then
    if compat.present(t.exit.signal) then
      state = 'signal ' .. tostring(t.exit.signal)
    else
      state = 'exit ' .. tostring(compat.present(t.exit.exitCode) and t.exit.exitCode or '?')
    end
  end
  b.add({ { ('  $ %s  (%s)'):format(H.one_line(t.command or id), state), 'AcpChatMeta' } })
  local lines = t.output and t.output ~= '' and H.split(t.output) or {}
  local first = math.max(1, #lines - H.terminal_lines + 1)
  if first > 1 or t.truncated then
    b.add({ { '  │ …', 'AcpChatMeta' } })
  end
  for i = first, #lines do
    b.add({ { '  │ ', 'AcpChatMeta' }, { lines[i] } })
  end
end

function H.render_plan(entries)
  local b = H.block()
  b.add({ { '' } })
  local done = 0
  for _, e in ipairs(entries) do
    if type(e) == 'table' and e.status == 'completed' then
      done = done + 1
    end
  end
  b.add({ { ('Plan · %d/%d done'):format(done, #entries), 'AcpChatLabel' } })
  for _, e in ipairs(entries) do
    if type(e) == 'table' then
      local status = compat.str(e.status) or 'pending'
      local group = H.plan_groups[status] or 'AcpChatMeta'
      local priority = compat.str(e.priority)
      b.add({
        { '  ' .. (H.plan_marks[status] or ('[' .. status .. ']')), group },
        { ' ' .. H.one_line(compat.str(e.content) or '') },
        { priority and (' (' .. priority .. ')') or '', 'AcpChatMeta' },
      })
    end
  end
  return b
end

-- Buffers and windows --------------------------------------------------------

function H.loaded(buf)
  return buf ~= nil and vim.api.nvim_buf_is_valid(buf) and vim.api.nvim_buf_is_loaded(buf)
end

--- Creates the chat buffer when it does not exist (first draw, or the
--- person wiped it: drawing starts again from what is still to come).
function H.ensure_buffer(chat)
  if H.loaded(chat.buf) then
    return
  end
  H.setup_highlights()
  local buf = H.scratch(chat, chat.buf, ('acp://chat/%s/%s'):format(chat.agent, chat.session))
  -- The history is rewritten as it streams: no undo to keep.
  compat.set_buf(buf, 'undolevels', -1)
  chat.buf = buf
  chat.stream, chat.last, chat.plan_block = nil, nil, nil
  for _, rec in pairs(chat.tools) do
    rec.block = nil
  end
  local header = H.render_header(chat)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, header.lines)
  H.highlight(buf, 0, header)
  chat.header = {
    mark = vim.api.nvim_buf_set_extmark(buf, H.marks, 0, 0, { right_gravity = false }),
    height = #header.lines,
  }
  chat.header_dirty = false
  chat.last = chat.header
  compat.set_buf(buf, 'modifiable', false)
  vim.keymap.set('n', 'i', function()
    H.focus_input(chat)
  end, { buffer = buf, desc = 'acp: type a prompt' })
  vim.keymap.set('n', 'q', function()
    pcall(vim.api.nvim_win_close, 0, false)
  end, { buffer = buf, desc = 'acp: close the chat window' })
  vim.keymap.set('n', '<C-c>', function()
    H.cancel(chat)
  end, { buffer = buf, desc = 'acp: cancel the turn' })
  compat.set_buf(buf, 'filetype', 'acpchat')
end

--- Adds the chat's groups to acp.highlight, which defines them and keeps
--- them across colorscheme changes.
function H.setup_highlights()
  local hl = require('acp.highlight')
  for name, link in pairs(H.links) do
    hl.links[name] = hl.links[name] or link
  end
  hl.setup()
end

function H.ensure_input(chat)
  if H.loaded(chat.input) then
    return
  end
  local buf = H.scratch(chat, chat.input, ('acp://chat/%s/%s/input'):format(chat.agent, chat.session))
  compat.set_buf(buf, 'omnifunc', "v:lua.require'acp.chat'.complete")
  chat.input = buf
  vim.keymap.set('n', '<CR>', function()
    H.send(chat)
  end, { buffer = buf, desc = 'acp: send the prompt' })
  vim.keymap.set('n', '<C-c>', function()
    H.cancel(chat)
  end, { buffer = buf, desc = 'acp: cancel the turn' })
  compat.set_buf(buf, 'filetype', 'acpchatinput')
end

--- A new unlisted buffer of chat named `name` that is hidden, never
--- wiped, when its window closes; `stale` (the one it replaces, or nil) is
--- deleted.
function H.scratch(chat, stale, name)
  if stale ~= nil then
    H.by_buf[stale] = nil
    pcall(vim.api.nvim_buf_delete, stale, { force = true })
  end
  local buf = vim.api.nvim_create_buf(false, true)
  H.by_buf[buf] = chat
  H.name(buf, name)
  compat.set_buf(buf, 'buftype', 'nofile')
  compat.set_buf(buf, 'bufhidden', 'hide')
  compat.set_buf(buf, 'swapfile', false)
  return buf
end

--- Names `buf`; a name still held by a stale buffer gets a suffix.
function H.name(buf, name)
  if not pcall(vim.api.nvim_buf_set_name, buf, name) then
    pcall(vim.api.nvim_buf_set_name, buf, name .. '#' .. buf)
  end
end

--- Windows (any tab page) showing `buf` with the cursor on its last line.
function H.followers(buf)
  local n, list = vim.api.nvim_buf_line_count(buf), {}
  for _, win in ipairs(vim.api.nvim_list_wins()) do
    if vim.api.nvim_win_get_buf(win) == buf and vim.api.nvim_win_get_cursor(win)[1] >= n then
      list[#list + 1] = win
    end
  end
  return list
end

--- A window of the current tab page showing `buf` (not a float), or nil.
function H.tab_window(buf)
  for _, win in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    if vim.api.nvim_win_get_buf(win) == buf and not compat.is_float(win) then
      return win
    end
  end
  return nil
end

function H.show(chat)
  H.ensure_input(chat)
  H.create_autocommands()
  if compat.is_float(vim.api.nvim_get_current_win()) then
    -- A split cannot be made from a float: start from the tab's first window.
    vim.api.nvim_set_current_win(vim.api.nvim_tabpage_list_wins(0)[1])
  end
  local win = H.tab_window(chat.buf)
  if win == nil then
    vim.cmd('botright vsplit')
    win = vim.api.nvim_get_current_win()
    vim.api.nvim_win_set_buf(win, chat.buf)
    vim.api.nvim_win_set_width(win, math.max(40, math.floor(vim.o.columns * 0.4)))
    H.set_options(win, {
      wrap = true,
      linebreak = true,
      number = false,
      relativenumber = false,
      signcolumn = 'no',
      foldcolumn = '0',
      foldenable = false,
      list = false,
      spell = false,
      cursorline = false,
      winfixwidth = true,
    })
    vim.api.nvim_win_set_cursor(win, { vim.api.nvim_buf_line_count(chat.buf), 0 })
  end
  local input = H.tab_window(chat.input)
  if input == nil then
    vim.api.nvim_set_current_win(win)
    vim.cmd('belowright split')
    input = vim.api.nvim_get_current_win()
    vim.api.nvim_win_set_buf(input, chat.input)
    vim.api.nvim_win_set_height(input, H.input_height)
    H.set_options(input, {
      wrap = true,
      number = false,
      relativenumber = false,
      signcolumn = 'no',
      foldcolumn = '0',
      spell = false,
      winfixheight = true,
    })
    H.pairs[win] = input
  end
  H.update_bars(chat)
  vim.api.nvim_set_current_win(input)
end

function H.set_options(win, opts)
  for name, value in pairs(opts) do
    compat.set_win(win, name, value)
  end
end

--- The session summary where it stays visible: the winbar of the chat
--- windows (Neovim 0.8+) and the statusline of the input windows.
function H.update_bars(chat)
  for _, win in ipairs(vim.api.nvim_list_wins()) do
    local buf = vim.api.nvim_win_get_buf(win)
    if buf == chat.buf or buf == chat.input then
      H.set_bar(chat, win, buf)
    end
  end
end

--- Sets the bar of `win`, which shows `buf` (the chat or its input), and
--- marks the window so that another buffer shown in it gets its own bars back.
function H.set_bar(chat, win, buf)
  local summary = (chat.agent .. ' · ' .. H.summary(chat)):gsub('%%', '%%%%')
  local name, value
  if buf == chat.input then
    name, value = 'statusline', ' ' .. summary .. '%=<CR> send · <C-c> cancel · /<C-x><C-o> commands '
  elseif compat.has(8) and not compat.is_float(win) then
    name, value = 'winbar', ' ' .. summary
  else
    return
  end
  compat.set_win(win, name, value)
  vim.api.nvim_win_set_var(win, 'acp_chat_bar', name)
end

function H.create_autocommands()
  if H.augroup ~= nil then
    return
  end
  H.augroup = vim.api.nvim_create_augroup('AcpChat', { clear = true })
  -- Closing a chat window closes the input window opened with it.
  vim.api.nvim_create_autocmd('WinClosed', {
    group = H.augroup,
    callback = function(args)
      local closed = tonumber(args.match)
      local input = closed and H.pairs[closed]
      if input == nil then
        return
      end
      H.pairs[closed] = nil
      vim.schedule(function()
        if vim.api.nvim_win_is_valid(input) then
          pcall(vim.api.nvim_win_close, input, false)
        end
      end)
    end,
  })
  -- The bars belong to the chat, not to the window showing it.
  vim.api.nvim_create_autocmd('BufWinEnter', {
    group = H.augroup,
    callback = function(args)
      local win = vim.api.nvim_get_current_win()
      local chat = H.by_buf[args.buf]
      local ok, bar = pcall(vim.api.nvim_win_get_var, win, 'acp_chat_bar')
      if ok then
        compat.set_win(win, bar, '')
        vim.api.nvim_win_del_var(win, 'acp_chat_bar')
      end
      if chat ~= nil then
        H.set_bar(chat, win, args.buf)
      end
    end,
  })
end

function H.focus_input(chat)
  local win = chat.input and H.tab_window(chat.input)
  if win ~= nil then
    vim.api.nvim_set_current_win(win)
  else
    H.show(chat)
  end
  vim.cmd('startinsert!')
end

-- Sending --------------------------------------------------------------------

--- Sends the input area to the chat's agent; clears it once sent.
function H.send(chat)
  local lines = vim.api.nvim_buf_get_lines(chat.input, 0, -1, false)
  local text = table.concat(lines, '\n')
  if text:match('^%s*$') then
    return
  end
  local ok, err = H.prompt(chat, text)
  if not ok then
    vim.notify(err, vim.log.levels.ERROR)
    return
  end
  vim.api.nvim_buf_set_lines(chat.input, 0, -1, false, {})
end

--- Like require('acp').prompt(), for this chat's session.
function H.prompt(chat, text)
  local state = require('acp.state')
  if state.agents[chat.agent] == nil then
    return false, ("(acp) agent '%s' is not running: :AcpStart starts a new session"):format(chat.agent)
  end
  local ok, err = require('acp.broker').prompt(chat.agent, text, chat.session)
  if not ok then
    return false, err
  end
  state.prompt_sent(chat.agent)
  return true
end

function H.cancel(chat)
  if require('acp.state').agents[chat.agent] ~= nil then
    require('acp.broker').cancel(chat.agent)
  end
end

return M
