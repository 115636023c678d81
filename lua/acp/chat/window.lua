--- The chat's buffers, windows and keymaps: draws the model's queued work
--- into one buffer per session (acp.chat.render makes the lines), at most
--- every `H.interval_ms` and within a time budget, so thousands of streamed
--- chunks per second cost one buffer change per tick. The buffer is a list
--- of blocks: the header, then messages, thoughts, tool calls, plans and
--- notes in arrival order. Each block remembers its first line with an
--- extmark and its height, so a tool call, the plan of a turn or the
--- message being streamed is redrawn where it is. The person types into a
--- separate input buffer under the chat window; `<CR>` in normal mode
--- and `chat.keys.send` (`<C-s>`) in both modes send it to the chat's own
--- agent, with the context it names (`@path`, `#buffer`, `#selection`,
--- `#diagnostics`) and the staged context, which is shown above the input.
--- A prompt sent while the agent works waits in the chat's outbox, shown
--- under the input (virtual lines), and goes when the turn ends. A tab
--- page has one chat window: opening another chat shows it there.

local compat = require('acp.compat')
local config = require('acp.config')
local context = require('acp.context')
local events = require('acp.events')
local highlight = require('acp.highlight')
local markdown = require('acp.chat.markdown')
local model = require('acp.chat.model')
local render = require('acp.chat.render')
local rpc = require('acp.rpc')
local state = require('acp.state')
local text = require('acp.text')

local M = {}
local H = {}

-- Module definition ==========================================================

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
  local chat, err, starting = model.resolve(opts)
  if chat == nil and starting ~= nil then
    -- The agent is starting: the chat opens with its session.
    H.waiting[starting] = true
    return true
  end
  if chat == nil then
    vim.notify(err, vim.log.levels.ERROR)
    return false, err
  end
  -- The person waits for it: a whole tick's budget at once.
  H.t0, H.spent_ms = compat.uv.hrtime(), 0
  H.deadline = H.t0 + H.budget_ms * 1e6
  H.tick_deadline = H.deadline
  H.ops_left = math.huge
  if H.flush(chat) then
    H.kick(chat, chat.busy and H.interval_ms or H.catchup_ms)
  else
    H.dirty[chat] = nil
  end
  -- The person asked for the chat: the one-time cost of the markdown
  -- parser is paid now, not in the middle of a stream.
  markdown.warm()
  H.arm_markdown()
  H.show(chat)
  return true
end

--- The chat buffer of `session`, or nil while it has not been drawn (for
--- tests and statuslines; it does not draw what is queued).
---@param session string
---@return integer|nil
function M.buffer(session)
  local chat = model.chats[session]
  if chat ~= nil and H.loaded(chat.buf) then
    return chat.buf
  end
  return nil
end

--- 'omnifunc' of the input buffer: completes the agent's slash commands
--- (`/name`) at the start of the input, project files after `@` and the
--- context words after `#`.
---@param findstart integer
---@param base string
---@return integer|table
function M.complete(findstart, base)
  local chat = H.by_buf[vim.api.nvim_get_current_buf()]
  if findstart == 1 then
    local col = vim.api.nvim_win_get_cursor(0)[2]
    local before = vim.api.nvim_get_current_line():sub(1, col)
    local at = before:find('[@#][^%s@#]*$')
    if chat ~= nil and at ~= nil and (at == 1 or before:sub(at - 1, at - 1):match('%s')) then
      return at - 1
    end
    local start = before:find('/[^%s/]*$')
    if chat == nil or start == nil or not before:sub(1, start - 1):match('^%s*$') then
      return -3
    end
    return start - 1
  end
  if base:sub(1, 1) == '@' then
    return context.complete_files(base:sub(2))
  end
  if base:sub(1, 1) == '#' then
    local items = {}
    for _, w in ipairs(context.words) do
      if ('#' .. w):sub(1, #base) == base then
        items[#items + 1] = { word = '#' .. w, menu = 'context' }
      end
    end
    return items
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

--- Opens the chat of an agent that was waiting for its session (:AcpChat
--- right after :AcpStart), once `session_new` comes.
---@param name string broker event
---@param data table
function M.open_pending(name, data)
  if name ~= 'session_new' and name ~= 'agent_exit' then
    -- Before reading data: a `decided` event is read by name through a
    -- metatable (acp.decided), and there are thousands a second.
    return
  end
  local agent = compat.str(data.agent)
  if agent == nil or not H.waiting[agent] then
    return
  end
  if name == 'session_new' then
    H.waiting[agent] = nil
    H.open_later(compat.str(data.session))
  elseif name == 'agent_exit' then
    H.waiting[agent] = nil
  end
end

-- The closures of the functions called for every broker event are made in
-- functions of their own: a function that makes a closure returns through
-- bytecode UCLO, which LuaJIT does not compile, and every trace through it
-- falls back to the interpreter.

function H.open_later(session)
  vim.schedule(function()
    -- Opened later than asked for: a float that has focus by now (the
    -- permission prompt that came with the session) keeps it.
    local cur = vim.api.nvim_get_current_win()
    M.open({ session = session })
    if compat.is_float(cur) and vim.api.nvim_win_is_valid(cur) then
      vim.api.nvim_set_current_win(cur)
    end
  end)
end

--- Opens the chat of the next session of `agent` once it exists (after
--- :AcpNew or a resume from :AcpSessions), not of the one it has now.
---@param agent string
function M.open_next(agent)
  H.waiting[agent] = true
end

--- After the model saw event `name`: a turn that ended sends the next
--- prompt of its chat's outbox (scheduled: not inside the RPC call).
---@param name string broker event
---@param data table
function M.on_event(name, data)
  if name ~= 'turn_end' and name ~= 'agent_exit' then
    return
  end
  for _, chat in pairs(model.chats) do
    if #chat.outbox > 0 and (name == 'agent_exit' or chat == model.chat_for(data)) then
      H.outbox_later(name, chat)
    end
  end
end

function H.outbox_later(name, chat)
  vim.schedule(function()
    if name == 'turn_end' then
      H.drain(chat)
    end
    H.draw_outbox(chat)
  end)
end

--- The chat keys (`chat.keys` of the config).
function M.keys()
  local chat = config.options.chat
  return type(chat) == 'table' and type(chat.keys) == 'table' and chat.keys or H.default_keys
end

--- Schedules a draw of `chat` within H.interval_ms (the model calls it
--- when it queues work).
---@param chat acp.Chat
function M.kick(chat)
  -- A chat not drawn yet gets its buffer at once: making it (its name,
  -- 'filetype') holds Neovim for about a millisecond, better spent when its
  -- session starts than in the middle of a turn, before a prompt.
  H.kick(chat, H.loaded(chat.buf) and H.interval_ms or 0)
end

--- Schedules a draw of `chat` within `ms`.
function H.kick(chat, ms)
  H.dirty[chat] = true
  -- Armed already, for as soon (or it fired and the draw is scheduled).
  local due = compat.uv.now() + ms
  if H.armed and due >= H.due then
    return
  end
  H.armed, H.due = true, due
  H.timer = H.timer or compat.uv.new_timer()
  if ms > 0 then
    -- No closure here: this runs inside the handling of broker events
    -- (see H.open_later).
    H.timer:start(ms, 0, H.on_timer)
    return
  end
  -- At once, but after Neovim polled for input: a check handle runs right
  -- after the poll (an idle handle keeps the poll from waiting), so what
  -- came meanwhile (a permission request) is queued before the draw.
  H.timer:stop()
  H.idle = H.idle or compat.uv.new_idle()
  H.check = H.check or compat.uv.new_check()
  H.idle:start(H.noop)
  H.check:start(H.on_check)
end

function H.on_timer()
  vim.schedule(H.flush_all)
end

function H.noop() end

--- The last permission event's effect ran (its window is open): a draw
--- that waited for it goes now.
function H.asked()
  local first = next(H.dirty)
  if first ~= nil and H.ask_since ~= nil then
    H.kick(first, 0)
  end
end
events.on_asked = H.asked

function H.on_check()
  H.idle:stop()
  H.check:stop()
  vim.schedule(H.flush_all)
end

-- Helper data ================================================================

--- Drawing is coalesced: at most one buffer update per chat per interval.
H.interval_ms = 30
--- Drawing time per tick (ms): what is left waits for the next tick, so a
--- flood of text never holds the editor longer than this.
H.budget_ms = 4
--- A tick draws blocks (tool calls, notes, the plan) in slices of at most
--- this long (ms) or this many blocks; between two slices Neovim takes in
--- what came meanwhile (a permission request, a key), so a prompt waits
--- for one slice of the chat's drawing, not for a whole tick. Streamed
--- text is drawn as before, up to the tick's budget at once: a slice per
--- 32 KiB would draw less of a flood.
H.slice_ms = 0.3
H.slice_ops = 6
--- Drawing time (ms) of the slices since the last pause.
H.spent_ms = 0
--- The slice being drawn: when it ends (hrtime), the blocks it may still
--- draw, and when the tick's budget ends (hrtime; text).
H.deadline = 0
H.ops_left = 0
H.tick_deadline = 0
--- When the slice started (hrtime).
H.t0 = 0
--- A draw waits for a permission's window at most this long (ms), and
--- since when it waits (hrtime in ms), or nil.
H.ask_wait_ms = 500
H.ask_since = nil
--- While the agents' requests come (one since the last check, every
--- H.interval_ms), chats that no window shows are not drawn, for at most
--- H.hidden_hold_ms (ms); since when they wait (uv.now() ms), or nil; the
--- count of requests (acp.events.requests) at the last check.
H.hidden_hold_ms = 2000
H.hold_since = nil
H.requests_seen = 0
--- The next tick when a draw ran out of budget with work left and no
--- turn runs (ms).
H.catchup_ms = 10
--- Text drawn in one piece at most (the budget is checked between pieces).
H.slice_bytes = 32 * 1024
--- Height of the input window.
H.input_height = 4
--- Height of the input window at most while it shows queued prompts.
H.max_input_height = 9
--- Prompts waiting in a chat's outbox at most, and shown under the input.
H.max_outbox = 32
H.shown_outbox = 3

H.default_keys = { send = '<C-s>', queue_edit = '<C-e>', queue_drop = '<C-x>' }

H.ns = vim.api.nvim_create_namespace('acp-chat')
H.outbox_ns = vim.api.nvim_create_namespace('acp-chat-outbox')
H.md_ns = vim.api.nvim_create_namespace('acp-chat-markdown')
H.marks = vim.api.nvim_create_namespace('acp-chat-blocks')

--- Chat and input buffers -> chat.
H.by_buf = {}
--- Chat window -> the input window opened with it.
H.pairs = {}
--- Chats with something to draw.
H.dirty = {}
H.armed = false
--- When the armed timer fires (uv.now(), ms).
H.due = 0

--- Finished messages waiting for their markdown highlights (bounded), and
--- how long drawing must pause before they are drawn.
H.md_queue = {}
H.max_md_queue = 200
H.md_delay_ms = 100

--- Agents whose chat opens as soon as their session exists.
H.waiting = {}

-- Helper functionality =======================================================

--- One slice of drawing (see H.slice_ms): the dirty chats in turn, until
--- the slice ends; what is left goes on in the next slice once Neovim
--- polled for input (H.kick with 0 ms), so a request that came meanwhile
--- is handled between two slices (a vim.schedule'd slice would run
--- first). Once the tick's budget is spent, a pause.
function H.flush_all()
  H.armed = false
  local first = next(H.dirty)
  if first ~= nil and events.asking > 0 then
    -- A permission request came meanwhile: its window first (its effect
    -- is queued behind this draw), the draw right after (events.on_asked,
    -- or the timer: never a loop polling for it, which would also keep a
    -- vim.wait() from timing out). A window opens within milliseconds: a
    -- count still up after H.ask_wait_ms was left up by a bug, and must
    -- not keep the chat undrawn.
    local now = compat.uv.hrtime() / 1e6
    H.ask_since = H.ask_since or now
    if now - H.ask_since < H.ask_wait_ms then
      H.kick(first, H.interval_ms)
      return
    end
    events.asking = 0
  end
  H.ask_since = nil
  if first ~= nil and H.hold() then
    H.kick(first, H.interval_ms)
    return
  end
  local dirty = H.dirty
  H.dirty = {}
  local t0 = compat.uv.hrtime()
  H.t0 = t0
  H.deadline = t0 + math.min(H.slice_ms, H.budget_ms) * 1e6
  H.tick_deadline = t0 + math.max(H.budget_ms - H.spent_ms, H.slice_ms) * 1e6
  H.ops_left = H.slice_ops
  local left = {}
  for chat in pairs(dirty) do
    local ok, err = pcall(H.flush, chat)
    if not ok and err ~= H.last_error then
      -- Once per distinct error: a broken draw would repeat every tick.
      H.last_error = err
      vim.notify('(acp) chat: ' .. tostring(err), vim.log.levels.ERROR)
    end
    if ok and err then
      left[#left + 1] = chat
    end
  end
  if #left > 0 then
    H.spent_ms = H.spent_ms + (compat.uv.hrtime() - t0) / 1e6
    local pause = H.spent_ms >= H.budget_ms
    if pause then
      H.spent_ms = 0
    end
    for _, chat in ipairs(left) do
      -- Behind once the turn has ended: the rest sooner (while the agent
      -- streams, the time between ticks goes to taking in its updates).
      H.kick(chat, not pause and 0 or chat.busy and H.interval_ms or H.catchup_ms)
    end
  else
    H.spent_ms = 0
  end
  H.arm_markdown()
end

--- Whether the draw of the dirty chats waits: no window shows any of
--- them and the agents' requests (prompts, requests decided by rules) are
--- coming. Nobody sees such a draw, and each of its slices, with the
--- garbage it leaves for the collector, came in front of the next prompt
--- or decision (bench/README.md, round 6); it comes once the requests
--- pause, or after H.hidden_hold_ms.
function H.hold()
  local coming = events.requests ~= H.requests_seen
  H.requests_seen = events.requests
  if not coming then
    H.hold_since = nil
    return false
  end
  local now = compat.uv.now()
  for chat in pairs(H.dirty) do
    if not H.loaded(chat.buf) or #vim.fn.win_findbuf(chat.buf) > 0 then
      H.hold_since = nil
      return false
    end
  end
  H.hold_since = H.hold_since or now
  if now - H.hold_since >= H.hidden_hold_ms then
    H.hold_since = nil
    return false
  end
  return true
end

--- Whether the slice being drawn is over (its time or its ops spent).
function H.slice_over()
  return H.ops_left <= 0 or compat.uv.hrtime() > H.deadline
end

--- Draws what is queued for `chat` (creating its buffer when needed) until
--- the slice ends (H.deadline, H.ops_left; M.open draws a whole tick's
--- budget at once); windows whose cursor was on the last line follow the
--- end. Returns whether ops are left.
---@return boolean
function H.flush(chat)
  if not H.loaded(chat.buf) then
    H.ensure_buffer(chat)
    H.ops_left = 0 -- that was the slice: one op more, then Neovim's turn
  end
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
      chat.queued_bytes = chat.queued_bytes - (op.off or 0)
      for _, piece in ipairs(op.pieces) do
        chat.queued_bytes = chat.queued_bytes + #piece
      end
    end
  end
  H.left = nil
  local last = vim.api.nvim_buf_line_count(buf)
  for _, win in ipairs(follow) do
    if vim.api.nvim_win_is_valid(win) and vim.api.nvim_win_get_buf(win) == buf then
      vim.api.nvim_win_set_cursor(win, { last, 0 })
    end
  end
  if bars and not chat.header_dirty then
    H.update_bars(chat)
  end
  if not ok then
    error(err, 0)
  end
  return #chat.queue > 0
end

--- Draws the ops of `queue` in order until the slice ends (H.slice_over);
--- what is left is put in H.left (a text op split at a piece). The header
--- is drawn once the queue is (or the tick's budget is spent): every
--- permission changes it, and one slice per prompt should not draw it.
function H.apply(chat, queue)
  for i, op in ipairs(queue) do
    -- (text goes on until the tick's budget is spent, as it did)
    local over = op.kind == 'text' and compat.uv.hrtime() > H.tick_deadline or op.kind ~= 'text' and H.slice_over()
    if i > 1 and over then
      H.left = H.slice(queue, i, #queue)
      break
    end
    if op.kind == 'text' then
      H.apply_text(chat, op)
      if #op.pieces > 0 then
        H.left = H.slice(queue, i, #queue)
        break
      end
    else
      H.ops_left = H.ops_left - 1
      H.ops[op.kind](chat, op)
    end
  end
  if chat.header_dirty and (H.left == nil or H.spent_ms + (compat.uv.hrtime() - H.t0) / 1e6 >= H.budget_ms) then
    chat.header_dirty = false
    H.replace(chat, chat.header, render.header(chat))
  end
end

--- Draws a text op's pieces a slice at a time until the tick's budget is
--- spent;
--- the pieces left stay in op (`op.off`: bytes of the first one drawn
--- already, when a long piece was drawn in part).
function H.apply_text(chat, op)
  local pieces = op.pieces
  if #pieces == 0 then
    -- Only text left out since the last draw: the count under the message
    -- is brought up to date.
    H.ops.text(chat, op)
    return
  end
  local first, off = 1, op.off or 0
  while first <= #pieces do
    local piece = pieces[first]
    if #piece - off > H.slice_bytes then
      -- A long piece (the broker joins a message's chunks) is drawn a
      -- slice at a time too, cut after a line where it can be; the rest
      -- is not copied (off moves on).
      local head = model.cut(piece:sub(off + 1, off + H.slice_bytes + 3), H.slice_bytes)
      local nl = head:match('^.*()\n')
      head = nl and head:sub(1, nl) or head ~= '' and head or piece:sub(off + 1, off + H.slice_bytes)
      off = off + #head
      H.ops.text(chat, { cur = op.cur, pieces = { head } })
    else
      local n, last = #piece - off, first + 1
      while last <= #pieces and n + #pieces[last] <= H.slice_bytes do
        n = n + #pieces[last]
        last = last + 1
      end
      local group = H.slice(pieces, first, last - 1)
      if off > 0 then
        group[1] = piece:sub(off + 1)
      end
      H.ops.text(chat, { cur = op.cur, pieces = group })
      first, off = last, 0
    end
    if compat.uv.hrtime() > H.tick_deadline then
      break
    end
  end
  op.pieces, op.off = H.slice(pieces, first, #pieces), off
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
    local b, prefix, group = render.message_head(chat, cur.role)
    s = { cur = cur, tail = '', marker = false, prefix = prefix, group = group, head = #b.lines }
    s.block = H.append(chat, b)
    chat.stream = s
  end
  -- The last line of the block is unfinished: redraw it with what follows.
  local str = s.tail .. table.concat(op.pieces)
  local lines = text.lines(str:find('\r', 1, true) and str:gsub('\r', '') or str)
  s.tail = lines[#lines]
  local b = render.message_lines(lines, s.prefix, s.group, cur.dropped)
  H.replace_tail(chat, s.block, s.marker and 2 or 1, b)
  s.marker = cur.dropped > 0
end

function H.ops.tool(chat, op)
  local rec = op.rec
  rec.queued = false
  rec.block = H.put(chat, rec.block, render.tool(chat, rec))
end

function H.ops.plan(chat, op)
  if chat.plan_op == op then
    chat.plan_op = nil
  end
  chat.plan_block = H.put(chat, chat.plan_block, render.plan(op.entries))
end

function H.ops.turn(chat)
  chat.plan_block = nil
end

--- The turn ended: the message streamed last is complete.
function H.ops.settle(chat)
  H.finish_stream(chat)
end

--- Queues the message streamed last for markdown highlighting, once it is
--- complete (another block follows it, or the turn ended). The highlights
--- are drawn when no turn runs and the chat has not drawn for
--- H.md_delay_ms, so they never slow streaming down (the first use of a
--- treesitter parser and its query costs about 100 ms).
function H.finish_stream(chat)
  local s = chat.stream
  if s == nil or s.done then
    return
  end
  s.done = true
  local cur = s.cur
  if s.prefix ~= nil or cur.dropped > 0 or cur.bytes > markdown.max_bytes then
    return
  end
  local queue = H.md_queue
  queue[#queue + 1] = { chat = chat, buf = chat.buf, stream = s }
  if #queue > H.max_md_queue then
    table.remove(queue, 1)
  end
end

--- (Re)arms the markdown timer: it fires once drawing has paused.
function H.arm_markdown()
  if #H.md_queue == 0 then
    return
  end
  H.md_timer = H.md_timer or compat.uv.new_timer()
  H.md_timer:stop()
  H.md_timer:start(H.md_delay_ms, 0, function()
    vim.schedule(H.run_markdown)
  end)
end

--- Highlights queued messages within H.budget_ms; the rest waits for the
--- next pause.
function H.run_markdown()
  if H.armed then
    return -- drawing again: flush_all re-arms the timer
  end
  for _, chat in pairs(model.chats) do
    if chat.busy then
      return -- its turn_end is drawn, and re-arms the timer
    end
  end
  local deadline = compat.uv.hrtime() + H.budget_ms * 1e6
  while #H.md_queue > 0 and compat.uv.hrtime() < deadline do
    pcall(H.highlight_message, table.remove(H.md_queue, 1))
  end
  H.arm_markdown()
end

function H.highlight_message(item)
  local chat, buf, s = item.chat, item.buf, item.stream
  if chat.buf ~= buf or not H.loaded(buf) then
    return
  end
  local pos = vim.api.nvim_buf_get_extmark_by_id(buf, H.marks, s.block.mark, {})
  if pos[1] == nil then
    return
  end
  -- The text replaced the last line of the head (the unfinished line).
  local first = pos[1] + s.head - 1
  local last = pos[1] + s.block.height
  local lines = vim.api.nvim_buf_get_lines(buf, first, last, false)
  for _, hl in ipairs(markdown.highlights(lines)) do
    pcall(vim.api.nvim_buf_set_extmark, buf, H.md_ns, first + hl[1], hl[2], {
      end_row = first + hl[1],
      end_col = hl[3],
      hl_group = hl[4],
      priority = 90,
    })
  end
end

--- The line counting the requests decided without a block (one per turn,
--- redrawn in place).
function H.ops.auto(chat, op)
  op.queued = false
  op.block = H.put(chat, op.block, render.auto(op))
end

function H.ops.note(chat, op)
  H.append(chat, render.note(op))
end

--- Appends block lines `b` at the end of the buffer.
---@return acp.ChatBlock
function H.append(chat, b)
  H.finish_stream(chat)
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

--- Draws `b` in place of `block`, or (nil) appends it; returns its block.
---@return acp.ChatBlock
function H.put(chat, block, b)
  if block ~= nil then
    H.replace(chat, block, b)
    return block
  end
  return H.append(chat, b)
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
  vim.api.nvim_buf_clear_namespace(buf, H.ns, row, row + n)
  if block == chat.last and row > pos[1] then
    -- No block follows (the message being streamed), and the lines do not
    -- hold this block's mark: whole lines, which costs less.
    vim.api.nvim_buf_set_lines(buf, row, row + n, true, b.lines)
  else
    local last = vim.api.nvim_buf_get_lines(buf, row + n - 1, row + n, true)[1]
    vim.api.nvim_buf_set_text(buf, row, 0, row + n - 1, #last, b.lines)
  end
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

function H.loaded(buf)
  return buf ~= nil and vim.api.nvim_buf_is_valid(buf) and vim.api.nvim_buf_is_loaded(buf)
end

--- Creates the chat buffer when it does not exist (first draw, or the
--- person wiped it: drawing starts again from what is still to come).
function H.ensure_buffer(chat)
  if H.loaded(chat.buf) then
    return
  end
  highlight.setup()
  local buf = H.scratch(chat, chat.buf, ('acp://chat/%s/%s'):format(chat.agent, chat.session))
  -- The history is rewritten as it streams: no undo to keep.
  compat.set_buf(buf, 'undolevels', -1)
  chat.buf = buf
  chat.stream, chat.last, chat.plan_block = nil, nil, nil
  for _, rec in pairs(chat.tools) do
    rec.block = nil
  end
  local header = render.header(chat)
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
  end, { [compat.buf_key] = buf, desc = 'acp: type a prompt' })
  vim.keymap.set('n', 'q', function()
    pcall(vim.api.nvim_win_close, 0, false)
  end, { [compat.buf_key] = buf, desc = 'acp: close the chat window' })
  vim.keymap.set('n', '<C-c>', function()
    H.cancel(chat)
  end, { [compat.buf_key] = buf, desc = 'acp: cancel the turn' })
  compat.set_buf(buf, 'filetype', 'acpchat')
end

function H.ensure_input(chat)
  if H.loaded(chat.input) then
    return
  end
  local buf = H.scratch(chat, chat.input, ('acp://chat/%s/%s/input'):format(chat.agent, chat.session))
  compat.set_buf(buf, 'omnifunc', "v:lua.require'acp.chat.window'.complete")
  chat.input = buf
  vim.keymap.set('n', '<CR>', function()
    H.send(chat)
  end, { [compat.buf_key] = buf, desc = 'acp: send the prompt' })
  local keys = M.keys()
  if keys.send ~= '' then
    vim.keymap.set({ 'n', 'i' }, keys.send, function()
      H.send(chat)
    end, { [compat.buf_key] = buf, desc = 'acp: send the prompt (queued while the agent works)' })
  end
  if keys.queue_edit ~= '' then
    -- Normal mode only: in Insert mode <C-e> closes the completion menu.
    vim.keymap.set('n', keys.queue_edit, function()
      H.edit_queued(chat, vim.v.count)
    end, { [compat.buf_key] = buf, desc = 'acp: take a queued prompt back into the input ([count]: which)' })
  end
  if keys.queue_drop ~= '' then
    vim.keymap.set('n', keys.queue_drop, function()
      H.drop_queued(chat, vim.v.count)
    end, { [compat.buf_key] = buf, desc = 'acp: drop a queued prompt ([count]: which; kept in register ")' })
  end
  -- The outbox stays under the last line of the input.
  vim.api.nvim_create_autocmd({ 'TextChanged', 'TextChangedI' }, {
    [compat.buf_key] = buf,
    callback = function()
      if #chat.outbox > 0 then
        H.draw_outbox(chat)
      end
    end,
  })
  -- `@` at the start of a word completes the project's files.
  vim.keymap.set('i', '@', function()
    local col = vim.api.nvim_win_get_cursor(0)[2]
    local prev = vim.api.nvim_get_current_line():sub(col, col)
    if col == 0 or prev:match('%s') then
      return '@<C-x><C-o>'
    end
    return '@'
  end, { [compat.buf_key] = buf, expr = true, desc = 'acp: complete a project file' })
  vim.keymap.set('n', '<C-c>', function()
    H.cancel(chat)
  end, { [compat.buf_key] = buf, desc = 'acp: cancel the turn' })
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
  context.remember_win(vim.api.nvim_get_current_win())
  if compat.is_float(vim.api.nvim_get_current_win()) then
    -- A split cannot be made from a float: start from the tab's first window.
    vim.api.nvim_set_current_win(vim.api.nvim_tabpage_list_wins(0)[1])
  end
  local win = H.tab_window(chat.buf)
  local other = win == nil and H.tab_chat_window()
  if other then
    -- One chat window per tab page: it switches to this chat, and the
    -- input window opened with it to this chat's input.
    local input = H.pairs[other]
    win = other
    vim.api.nvim_win_set_buf(win, chat.buf)
    H.chat_options(win)
    vim.api.nvim_win_set_cursor(win, { vim.api.nvim_buf_line_count(chat.buf), 0 })
    if input ~= nil and vim.api.nvim_win_is_valid(input) and H.by_buf[vim.api.nvim_win_get_buf(input)] then
      vim.api.nvim_win_set_buf(input, chat.input)
    end
  elseif win == nil then
    vim.cmd('botright vsplit')
    win = vim.api.nvim_get_current_win()
    vim.api.nvim_win_set_buf(win, chat.buf)
    vim.api.nvim_win_set_width(win, math.max(40, math.floor(vim.o.columns * 0.4)))
    H.chat_options(win)
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
  H.draw_outbox(chat)
  vim.api.nvim_set_current_win(input)
end

--- The window of the current tab page showing a chat (not a float), or nil.
function H.tab_chat_window()
  for _, win in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    local buf = vim.api.nvim_win_get_buf(win)
    local chat = H.by_buf[buf]
    if chat ~= nil and chat.buf == buf and not compat.is_float(win) then
      return win
    end
  end
  return nil
end

--- Options of a window showing a chat: wrapped lines, indented when they
--- wrap, no gutter.
function H.chat_options(win)
  H.set_options(win, {
    wrap = true,
    linebreak = true,
    breakindent = true,
    breakindentopt = 'shift:2',
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

--- The staged context above the input: the winbar of the input windows
--- (Neovim 0.8+), else the statusline of the chat windows (right above
--- the input); nothing staged, no line.
function H.set_context_bar(win, buf, chat)
  local name
  if compat.has(8) then
    name = buf == chat.input and 'winbar' or nil
  else
    name = buf == chat.buf and not compat.is_float(win) and 'statusline' or nil
  end
  if name == nil then
    return
  end
  local summary = context.summary()
  local ok, had = pcall(vim.api.nvim_win_get_var, win, 'acp_chat_context')
  if summary == nil then
    if ok then
      compat.set_win(win, had, '')
      vim.api.nvim_win_del_var(win, 'acp_chat_context')
    end
    return
  end
  compat.set_win(win, name, ' ' .. summary:gsub('%%', '%%%%') .. '%=:AcpAdd clear ')
  vim.api.nvim_win_set_var(win, 'acp_chat_context', name)
end

--- Redraws the staged-context line of every chat shown.
function M.context_changed()
  for _, win in ipairs(vim.api.nvim_list_wins()) do
    local chat = H.by_buf[vim.api.nvim_win_get_buf(win)]
    if chat ~= nil then
      H.set_context_bar(win, vim.api.nvim_win_get_buf(win), chat)
    end
  end
end

--- Sets the bar of `win`, which shows `buf` (the chat or its input), and
--- marks the window so that another buffer shown in it gets its own bars back.
function H.set_bar(chat, win, buf)
  H.set_context_bar(win, buf, chat)
  local summary = (chat.agent .. ' · ' .. render.summary(chat)):gsub('%%', '%%%%')
  local name, value
  if buf == chat.input then
    -- Narrow windows cut the help on the right (%<), not the summary.
    local n = #chat.outbox
    local queued = n > 0 and ('%d queued%s · '):format(n, chat.held and ' (held)' or '') or ''
    name, value = 'statusline', ' ' .. queued .. summary .. ' %<%=' .. H.input_help(chat):gsub('%%', '%%%%') .. ' '
  elseif compat.has(8) and not compat.is_float(win) then
    name, value = 'winbar', ' ' .. summary
  else
    return
  end
  compat.set_win(win, name, value)
  vim.api.nvim_win_set_var(win, 'acp_chat_bar', name)
end

--- The right part of the input's statusline: what its keys do, or how to
--- go on when the agent is gone.
function H.input_help(chat)
  if chat.exited then
    return ('agent exited: :AcpStart %s · :AcpSessions'):format(chat.agent)
  end
  local keys = M.keys()
  local send = keys.send ~= '' and (keys.send .. '/<CR>') or '<CR>'
  return ('%s send · <C-c> cancel · @ files · # context'):format(send)
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
  -- `#buffer` and `:AcpAdd buffer` mean the code window the person left.
  vim.api.nvim_create_autocmd('WinLeave', {
    group = H.augroup,
    callback = function()
      context.remember_win(vim.api.nvim_get_current_win())
    end,
  })
  -- The bars belong to the chat, not to the window showing it.
  vim.api.nvim_create_autocmd('BufWinEnter', {
    group = H.augroup,
    callback = function(args)
      local win = vim.api.nvim_get_current_win()
      local chat = H.by_buf[args.buf]
      for _, var in ipairs({ 'acp_chat_bar', 'acp_chat_context' }) do
        local ok, bar = pcall(vim.api.nvim_win_get_var, win, var)
        if ok then
          compat.set_win(win, bar, '')
          vim.api.nvim_win_del_var(win, var)
        end
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

--- Sends the input area to the chat's agent with the context it names and
--- the staged context; clears both once sent. While the agent works (or
--- prompts already wait) it joins the outbox instead; an empty input sends
--- the outbox held after a cancelled turn.
function H.send(chat)
  local lines = vim.api.nvim_buf_get_lines(chat.input, 0, -1, false)
  local text = table.concat(lines, '\n')
  local blank = text:match('^%s*$') ~= nil
  if blank and #chat.outbox == 0 then
    return
  end
  if not blank and (chat.busy or chat.sending or #chat.outbox > 0) then
    if #chat.outbox >= H.max_outbox then
      vim.notify(('(acp) %d prompts already wait: send or drop some first'):format(H.max_outbox), vim.log.levels.ERROR)
      return
    end
    chat.outbox[#chat.outbox + 1] = text
    vim.api.nvim_buf_set_lines(chat.input, 0, -1, false, {})
    blank = true
  end
  chat.held = false
  if blank then
    H.drain(chat)
    H.outbox_changed(chat)
    return
  end
  local ok, err = H.prompt(chat, text)
  if not ok then
    vim.notify(err, vim.log.levels.ERROR)
    return
  end
  vim.api.nvim_buf_set_lines(chat.input, 0, -1, false, {})
end

--- Sends the oldest prompt of the outbox when the agent is free for it.
function H.drain(chat)
  if chat.busy or chat.sending or chat.held or chat.exited or #chat.outbox == 0 then
    return
  end
  local text = table.remove(chat.outbox, 1)
  local ok, err = H.prompt(chat, text)
  if not ok then
    table.insert(chat.outbox, 1, text)
    vim.notify(err, vim.log.levels.ERROR)
  end
  H.outbox_changed(chat)
end

--- Which queued prompt a count names (0: the newest), or nil.
function H.queued_index(chat, count)
  local n = #chat.outbox
  if n == 0 then
    vim.notify('(acp) no prompt is queued', vim.log.levels.WARN)
    return nil
  end
  local i = count > 0 and count or n
  if i > n then
    vim.notify(('(acp) only %d prompt%s queued'):format(n, n == 1 and ' is' or 's are'), vim.log.levels.WARN)
    return nil
  end
  return i
end

--- Takes a queued prompt (the newest, or the count-th) back into the
--- input to edit it; an input with text in it is kept: the prompt goes
--- after it.
function H.edit_queued(chat, count)
  local i = H.queued_index(chat, count)
  if i == nil then
    return
  end
  local text = table.remove(chat.outbox, i)
  local lines = vim.api.nvim_buf_get_lines(chat.input, 0, -1, false)
  local new = vim.split(text, '\n', { plain = true })
  if table.concat(lines, '\n'):match('^%s*$') then
    vim.api.nvim_buf_set_lines(chat.input, 0, -1, false, new)
  else
    vim.api.nvim_buf_set_lines(chat.input, -1, -1, false, new)
  end
  H.outbox_changed(chat)
end

--- Drops a queued prompt (the newest, or the count-th); its text goes to
--- the unnamed register, so that a slip can be undone with `p`.
function H.drop_queued(chat, count)
  local i = H.queued_index(chat, count)
  if i == nil then
    return
  end
  local text = table.remove(chat.outbox, i)
  vim.fn.setreg('"', text)
  vim.notify(('(acp) dropped queued prompt %d (in register ")'):format(i), vim.log.levels.INFO)
  H.outbox_changed(chat)
end

function H.outbox_changed(chat)
  if #chat.outbox == 0 then
    chat.held = false
  end
  H.draw_outbox(chat)
  H.update_bars(chat)
end

--- The outbox as virtual lines under the last line of the input; the
--- input windows grow to show them (and shrink back once it is empty).
function H.draw_outbox(chat)
  if not H.loaded(chat.input) then
    return
  end
  vim.api.nvim_buf_clear_namespace(chat.input, H.outbox_ns, 0, -1)
  local n = vim.api.nvim_buf_line_count(chat.input)
  local virt = #chat.outbox > 0 and render.outbox(chat, H.shown_outbox, M.keys()) or {}
  if #virt > 0 then
    vim.api.nvim_buf_set_extmark(chat.input, H.outbox_ns, n - 1, 0, { virt_lines = virt })
  end
  local height = math.min(H.max_input_height, math.max(H.input_height, math.min(n, H.input_height) + #virt))
  for _, win in ipairs(vim.api.nvim_list_wins()) do
    if vim.api.nvim_win_get_buf(win) == chat.input and not compat.is_float(win) then
      local ok, had = pcall(vim.api.nvim_win_get_var, win, 'acp_outbox_height')
      if height ~= (ok and had or H.input_height) then
        pcall(vim.api.nvim_win_set_height, win, height)
        vim.api.nvim_win_set_var(win, 'acp_outbox_height', height)
      end
    end
  end
end

--- Like require('acp').prompt(), for this chat's session.
function H.prompt(chat, text)
  if state.agents[chat.agent] == nil then
    return false, ("(acp) agent '%s' is not running: :AcpStart starts a new session"):format(chat.agent)
  end
  local items, err = context.from_input(text)
  if items == nil then
    return false, err
  end
  local blocks, notes = context.build(chat.agent, items)
  local ok, send_err = rpc.prompt(chat.agent, text, chat.session, blocks)
  if not ok then
    return false, send_err
  end
  context.take()
  state.prompt_sent(chat.agent)
  if #notes > 0 then
    vim.notify('(acp) ' .. table.concat(notes, '\n'), vim.log.levels.WARN)
  end
  return true
end

function H.cancel(chat)
  if state.agents[chat.agent] ~= nil then
    rpc.cancel(chat.agent)
  end
end

state.on('context', M.context_changed)

return M
