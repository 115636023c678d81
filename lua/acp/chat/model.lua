--- The chat model: what the transcript of each session holds, and the
--- drawing work queued for it.
---
--- Every broker event reaches `M.on_event` (through acp.chat, a subscriber
--- of acp.state, inside the RPC call): it only updates this model and
--- queues drawing work, which acp.chat.window draws on a timer. The history
--- itself lives in the chat buffer; the model keeps only what in-place
--- updates need: the message being streamed, the plan of the turn, and a
--- record per tool call (its permission line, how it ended, where it is
--- drawn) around the tool call as acp.state merged it (`rec.tc`, stored
--- once, in the model of the broker's state).

local compat = require('acp.compat')
local decided = require('acp.decided')
-- The items of a `decided` event read for each one.
local D_AGENT, D_SESSION, D_TOOL_CALL_ID, D_DECISION = decided.AGENT, decided.SESSION, decided.TOOL_CALL_ID, decided.DECISION
local format = require('acp.format')
local state = require('acp.state')
local text = require('acp.text')

local M = {}
local H = {}

-- Module definition ==========================================================

--- Called when a chat has new drawing work or a changed header (set by
--- acp.chat.window, which draws on a timer).
---@type fun(chat: acp.Chat, header: boolean|nil)
M.changed = function() end

--- Updates the model for one broker event (after acp.state did) and queues
--- the drawing. Cheap.
---@param name string
---@param data table
function M.on_event(name, data)
  local handler = H.events[name]
  if handler ~= nil and type(data) == 'table' then
    handler(data)
  end
end

--- A field of tool call record `rec`: what the broker reported last about
--- the call (a permission request, a decision), else the tool call as the
--- agent's updates left it in acp.state. Strings for title, kind and
--- status; tables (or nil) for content and locations.
---@param rec table
---@param key string
---@return any
function M.field(rec, key)
  local v = rec.over[key]
  if v ~= nil then
    return v
  end
  v = rec.tc[key]
  if key == 'content' or key == 'locations' then
    return type(v) == 'table' and v or nil
  end
  return compat.str(v)
end

-- Helper data ================================================================

--- Text kept per message or thought; the rest is counted and reported.
H.max_message_bytes = 256 * 1024
--- Text queued per chat between two draws; beyond it, chunks are counted.
H.max_queued_bytes = 4 * 1024 * 1024
--- Bytes of output kept per terminal.
H.terminal_bytes = 16 * 1024
--- Tool calls and terminals remembered per chat for in-place updates;
--- older ones stay in the buffer as drawn.
H.max_tools = 500
H.max_terminals = 50

--- Why a turn ended, for every stop reason but end_turn.
H.stop_reasons = {
  cancelled = 'turn cancelled',
  max_tokens = 'turn ended: the agent reached its token limit',
  max_turn_requests = 'turn ended: the agent reached its request limit for one turn',
  refusal = 'the agent refused to continue',
}

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
---@field outbox string[] prompts typed while the agent works, oldest first
---@field sending boolean a prompt was sent and its turn has not started yet
---@field held boolean the turn was cancelled or the agent exited: the outbox waits for the person
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

-- Helper functionality =======================================================

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
      outbox = {},
      sending = false,
      held = false,
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
  local chat = H.session_chat(d)
  if chat ~= nil then
    return chat
  end
  local agent = compat.str(d.agent)
  if agent == nil then
    return nil
  end
  local a = state.agents[agent]
  if a ~= nil and a.session ~= nil then
    return H.get(a.session, agent)
  end
  return H.latest(agent)
end

--- The chat event `d` is about and its field `key` (a toolCallId, a
--- terminalId) as a string; nil when either is missing.
---@return acp.Chat|nil
---@return string|nil
function H.chat_with(d, key)
  local chat, id = H.chat_for(d), compat.str(d[key])
  if chat ~= nil and id ~= nil then
    return chat, id
  end
  return nil, nil
end

--- The chat of the session event `d` names, or nil when it names none.
---@return acp.Chat|nil
function H.session_chat(d)
  local session = compat.str(d.session)
  return session and H.get(session, d.agent) or nil
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

--- Queues drawing work.
function H.push(chat, op)
  chat.queue[#chat.queue + 1] = op
  M.changed(chat)
end

--- Marks the header (and the window bars) for redrawing.
function H.touch(chat)
  chat.header_dirty = true
  M.changed(chat)
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
  -- What fits under both bounds is kept (the broker joins the chunks of a
  -- message that come together, so one piece can be a whole batch).
  local room = math.min(H.max_message_bytes - cur.bytes, H.max_queued_bytes - chat.queued_bytes)
  local keep = #text <= room and text or H.cut(text, room)
  cur.dropped = cur.dropped + #text - #keep
  if #keep > 0 then
    cur.bytes = cur.bytes + #keep
    chat.queued_bytes = chat.queued_bytes + #keep
    op.pieces[#op.pieces + 1] = keep
  end
  M.changed(chat)
end

--- The longest start of `s` of at most `n` bytes that does not end inside
--- a UTF-8 sequence.
---@param s string
---@param n integer
---@return string
function H.cut(s, n)
  if n <= 0 then
    return ''
  elseif n >= #s then
    return s
  end
  -- Byte n + 1 is the first one left out: while it continues a sequence
  -- (10xxxxxx), that sequence's start is left out too.
  local i = n + 1
  while i > n - 2 and i > 1 do
    local b = s:byte(i)
    if b < 0x80 or b >= 0xC0 then
      break
    end
    i = i - 1
  end
  return s:sub(1, i - 1)
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

--- The record of tool call `id` in `chat`, created when unknown (tool_call,
--- tool_call_update, a permission's toolCall and a decision all upsert).
--- `rec.tc` is the tool call acp.state merged (kept when acp.state forgets
--- it: the agent exited, or it is one of the oldest); `rec.over` what the
--- broker reported about it since.
function H.tool(chat, id)
  local rec = chat.tools[id]
  if rec == nil then
    rec = { id = id, over = {} }
    local kept = H.decided_for(chat, id)
    if kept ~= nil then
      H.apply_decided(rec, kept)
    end
    chat.tools[id] = rec
    chat.tool_order[#chat.tool_order + 1] = id
    if #chat.tool_order > H.max_tools then
      chat.tools[table.remove(chat.tool_order, 1)] = nil
    end
  end
  rec.tc = state.tool(chat.session, id) or rec.tc or {}
  if chat.busy then
    chat.turn[id] = rec
  end
  return rec
end

--- Values the broker reports about a tool call (in a permission request,
--- a decision, an unasked call) stand until the agent updates that field.
function H.override(rec, u)
  local over = rec.over
  over.title = compat.str(u.title) or over.title
  over.kind = compat.str(u.kind) or over.kind
  over.status = compat.str(u.status) or over.status
  if type(u.content) == 'table' then
    rec.over.content = u.content
    rec.content_dirty = true
  end
  if type(u.locations) == 'table' then
    rec.over.locations = u.locations
  end
end

--- acp.state merged `u` (a ToolCall, ToolCallUpdate or a request's
--- toolCall) into rec.tc: what it has a value for replaces what the broker
--- reported (`content` and `locations` whole).
function H.updated(rec, u)
  local over = rec.over
  if compat.str(u.title) then
    over.title = nil
  end
  if compat.str(u.kind) then
    over.kind = nil
  end
  if compat.str(u.status) then
    over.status = nil
  end
  if type(u.content) == 'table' then
    rec.over.content = nil
    rec.content_dirty = true
  end
  if type(u.locations) == 'table' then
    rec.over.locations = nil
  end
  if type(u.rawInput) == 'table' and not rec.judged then
    rec.command = format.command(u.rawInput) or rec.command
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
    H.updated(rec, u)
    H.queue_tool(chat, rec)
  end
end

-- Events ---------------------------------------------------------------------

H.events = {}
H.updates = {}

--- A handler of events about a session: fn(chat, d) with the session's
--- chat (created on first use); an event that names no session is ignored.
function H.for_chat(fn)
  return function(d)
    local chat = H.session_chat(d)
    if chat ~= nil then
      fn(chat, d)
    end
  end
end

H.events.session_loading = H.for_chat(function(chat, d)
  chat.cwd = compat.str(d.cwd) or chat.cwd
  chat.loading = true
  H.touch(chat)
  H.note(chat, 'loading the history of this session…')
end)

H.events.session_new = H.for_chat(function(chat, d)
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
end)

H.events.posture = H.for_chat(function(chat, d)
  local reason = compat.str(d.reason)
  H.touch(chat)
  if d.posture == 'unverified' and reason ~= nil and reason ~= chat.posture_noted then
    chat.posture_noted = reason
    H.note(chat, 'not in asking posture: ' .. reason, 'AcpChatError')
  end
end)

function H.events.mode_set(d)
  local id = compat.str(d.modeId)
  local chat = id and H.session_chat(d)
  if not chat then
    return
  end
  chat.mode = id
  H.touch(chat)
end

function H.events.update(d)
  local u = d.update
  local fn = type(u) == 'table' and H.updates[u.sessionUpdate]
  local chat = fn and H.session_chat(d)
  if chat then
    fn(chat, u)
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
  chat.busy, chat.sending = true, false
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
  chat.busy, chat.sending = false, false
  local reason = compat.str(d.stopReason) or 'end_turn'
  -- The person stopped the agent: what they queued waits for them.
  chat.held = reason == 'cancelled' and #chat.outbox > 0
  if reason ~= 'end_turn' then
    -- The agent leaves calls of a cancelled or failed turn unfinished.
    H.end_tools(chat, reason == 'cancelled' and 'cancelled' or 'interrupted')
  end
  chat.turn = {}
  -- The message streamed last is complete: its markdown can be drawn.
  H.push(chat, { kind = 'settle' })
  if reason == 'error' then
    H.note(chat, 'error: ' .. (compat.str(d.message) or 'the turn failed'), 'AcpChatError')
  elseif reason ~= 'end_turn' then
    H.note(chat, H.stop_reasons[reason] or ('turn ended: ' .. reason))
  end
  H.touch(chat)
end

--- The files the turn changed (acp.ledger emits 'changes' at its end), as
--- a note after it.
state.on('changes', function(d)
  local chat = type(d) == 'table' and H.session_chat(d)
  if chat and type(d.summary) == 'string' then
    H.note(chat, d.summary .. ' (:AcpReview)')
  end
end)

--- Marks the unfinished tool calls of the turn as ended with `word`.
function H.end_tools(chat, word)
  for _, rec in pairs(chat.turn) do
    local status = M.field(rec, 'status')
    if status == nil or status == 'pending' or status == 'in_progress' then
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
  H.updated(rec, tc)
  H.judged(rec, d)
  H.override(rec, { title = d.title, kind = d.kind })
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

--- d: an array (acp.decided), read by position.
function H.events.decided(d)
  local session, id = compat.str(d[D_SESSION]), compat.str(d[D_TOOL_CALL_ID])
  local chat
  if session ~= nil then
    chat = H.get(session, d[D_AGENT])
  else
    chat = H.chat_for(d)
  end
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
  local chat, id = H.chat_with(d, 'toolCallId')
  if chat == nil then
    return
  end
  local rec = H.tool(chat, id)
  local u = { title = d.title, kind = d.kind, status = d.status }
  if rec.parts == nil and M.field(rec, 'content') == nil and type(d.content) == 'table' and #d.content > 0 then
    u.content = d.content
  end
  if M.field(rec, 'locations') == nil and type(d.locations) == 'table' and #d.locations > 0 then
    u.locations = d.locations
  end
  H.override(rec, u)
  local why = format.why({
    reason = compat.str(d.reason),
    rule = compat.str(d.rule),
    source = compat.str(d.source),
  })
  local would = d.decision == 'deny' and 'would have denied it' or 'would have asked you'
  rec.perm = { text = ('UNASKED: the agent did this without asking; the policy %s: %s'):format(would, why), group = 'AcpChatError' }
  H.queue_tool(chat, rec)
  local what = compat.str(d.command) or M.field(rec, 'title') or compat.str(d.kind) or id
  H.note(chat, ('UNASKED: %s %s (the policy %s)'):format(compat.str(d.kind) or 'tool call', what, would), 'AcpChatError')
  chat.unasked = (chat.unasked or 0) + 1
  H.touch(chat)
end

--- The permission line of a tool call's block, from a `decided` event.
function H.decided_perm(d)
  local allowed = rawget(d, decided.DECISION) == 'allow'
  local why = format.why({
    reason = compat.str(rawget(d, decided.REASON)),
    rule = compat.str(rawget(d, decided.RULE)),
    source = compat.str(rawget(d, decided.SOURCE)),
    by = compat.str(rawget(d, decided.BY)),
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
  local over = rec.over
  over.title = decided.title(d) or over.title
  over.kind = compat.str(rawget(d, decided.KIND)) or over.kind
  local cmd = compat.str(rawget(d, decided.COMMAND))
  if cmd ~= nil then
    -- As H.judged: the command the policy analysed, for good.
    rec.command, rec.judged = cmd, true
  end
  rec.rejected = rawget(d, decided.DECISION) ~= 'allow'
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
  if d[D_DECISION] == 'allow' then
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
  local chat, id = H.chat_with(d, 'terminalId')
  if chat == nil then
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
    t.output = text.tail(d.output, H.terminal_bytes)
  end
  t.truncated = d.truncated == true
  t.exit = type(d.exitStatus) == 'table' and d.exitStatus or nil
  for tcid in pairs(chat.term_users[id] or {}) do
    H.queue_tool(chat, chat.tools[tcid])
  end
end

--- Keeps of a record's tool call what a redraw needs once acp.state forgot
--- the call: not the content already drawn, nor the input.
function H.detach(rec)
  local tc = rec.tc
  rec.tc = {
    title = tc.title,
    kind = tc.kind,
    status = tc.status,
    locations = tc.locations,
    content = rec.content_dirty and tc.content or nil,
  }
end

function H.events.agent_exit(d)
  local agent = compat.str(d.agent)
  for _, chat in pairs(H.chats) do
    if chat.agent == agent and not chat.exited then
      chat.exited, chat.busy, chat.loading, chat.sending = true, false, false, false
      -- What was queued is not sent to a session that comes back by itself.
      chat.held = #chat.outbox > 0
      H.end_tools(chat, 'interrupted')
      chat.turn = {}
      -- acp.state forgets the session: keep what the blocks still show.
      for _, rec in pairs(chat.tools) do
        H.detach(rec)
      end
      -- The broker's words: "the agent was stopped", "... exited with code 9".
      H.note(chat, compat.str(d.message) or 'the agent exited')
      H.touch(chat)
    end
  end
end

function H.mode_name(chat)
  for _, m in ipairs(chat.modes) do
    if type(m) == 'table' and m.id == chat.mode then
      return compat.str(m.name) or chat.mode
    end
  end
  return chat.mode
end

M.chats = H.chats
M.chat_for = H.chat_for
M.get = H.get
M.latest = H.latest
M.resolve = H.resolve
M.content_text = H.content_text
M.decided_perm = H.decided_perm
M.mode_name = H.mode_name
M.max_message_bytes = H.max_message_bytes
M.max_queued_bytes = H.max_queued_bytes
M.cut = H.cut

return M
