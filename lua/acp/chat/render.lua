--- The chat's rendering: lines and highlights from the model (a header,
--- a message, a tool call, a plan, a note), as blocks that
--- acp.chat.window writes into the buffer. No buffer or window here.

local compat = require('acp.compat')
local format = require('acp.format')
local model = require('acp.chat.model')
local state = require('acp.state')
local text = require('acp.text')

local M = {}
local H = {}

-- Module definition ==========================================================

--- Lines with highlights: {lines, hls = {{row, scol, ecol, group}}}.
---@return table
function M.block()
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
  function b.text(s, indent, group, max)
    local lines = text.split_lines(s)
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

--- The lines that open a message of `role` ('user', 'agent', 'thought'),
--- and the prefix and group of its text lines.
---@return table block
---@return string|nil prefix
---@return string|nil group
function M.message_head(chat, role)
  local b = M.block()
  b.add({ { '' } })
  if role == 'user' then
    b.add({ { 'You', 'AcpChatUser' } })
  elseif role == 'thought' then
    b.add({ { chat.agent .. ' · thinking', 'AcpChatThought' } })
  else
    b.add({ { chat.agent, 'AcpChatAgent' } })
  end
  b.add({ { '' } })
  if role == 'thought' then
    return b, H.thought_prefix, 'AcpChatThought'
  end
  return b, nil, nil
end

--- The text lines of a message, and a line counting what was not kept.
---@param lines string[]
---@param prefix string|nil
---@param group string|nil
---@param dropped integer bytes left out
---@return table block
function M.message_lines(lines, prefix, group, dropped)
  local b = M.block()
  if prefix == nil and group == nil then
    -- An agent's or the person's text: the lines as they are (taken, not
    -- copied: a slice of streamed text has hundreds).
    b.lines = lines
  else
    for _, l in ipairs(lines) do
      b.add({ { (prefix or '') .. l, group } })
    end
  end
  if dropped > 0 then
    b.add({ { ('… %s more not shown'):format(text.size(dropped)), 'AcpChatMeta' } })
  end
  return b
end

--- The line counting the requests decided without a block (one per turn).
---@param op table {allowed, denied, last, last_id}
---@return table block
function M.auto(op)
  local b = M.block()
  local n = op.allowed + op.denied
  local counts = op.denied == 0 and ('%d allowed'):format(op.allowed)
    or op.allowed == 0 and ('%d denied'):format(op.denied)
    or ('%d allowed, %d denied'):format(op.allowed, op.denied)
  b.add({
    { ('acp decided %d request%s the agent did not announce: %s'):format(n, n == 1 and '' or 's', counts), 'AcpChatMeta' },
  })
  local last = op.last
  local line = ('%s %s'):format(compat.str(last.title) or op.last_id, model.decided_perm(last).text)
  b.add({ { '  last: ' .. text.one_line(line), 'AcpChatMeta' } })
  return b
end

--- A line of its own (a note about the turn or the agent).
---@param op table {text, group}
---@return table block
function M.note(op)
  local b = M.block()
  b.add({ { '' } })
  b.add({ { text.one_line(op.text), op.group } })
  return b
end

--- The header: agent, session, directory, summary, warnings, commands.
function M.header(chat)
  local b = M.block()
  local where = chat.cwd and (' · ' .. vim.fn.fnamemodify(chat.cwd, ':~')) or ''
  b.add({ { ('acp chat · %s · session %s%s'):format(chat.agent, chat.session, where), 'AcpChatHeader' } })
  if chat.title ~= nil then
    b.add({ { chat.title, 'AcpChatHeader' } })
  end
  b.add({ { M.summary(chat), 'AcpChatMeta' } })
  if chat.exited then
    b.add({
      {
        ('the agent exited: this chat is history only (:AcpStart %s starts a new session, :AcpSessions resumes one)'):format(
          chat.agent
        ),
        'AcpChatError',
      },
    })
  end
  if (chat.unasked or 0) > 0 then
    local n = chat.unasked
    b.add({ { ('%d tool call%s acted WITHOUT ASKING (see :AcpLog)'):format(n, n == 1 and '' or 's'), 'AcpChatError' } })
  end
  local st = state.sessions[chat.session] or {}
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
function M.summary(chat)
  local parts = {}
  if chat.mode ~= nil then
    parts[#parts + 1] = 'mode: ' .. model.mode_name(chat)
  end
  if (state.sessions[chat.session] or {}).posture == 'asking' then
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
  for _, req in pairs(state.pending) do
    if req.session == chat.session then
      n = n + 1
    end
  end
  if n > 0 then
    parts[#parts + 1] = ('%d awaiting your answer'):format(n)
  end
  local u = chat.usage
  if u ~= nil then
    local usage = ('context %s/%s'):format(text.tokens(u.used), text.tokens(u.size))
    if u.cost ~= nil and type(u.cost.amount) == 'number' then
      usage = usage .. (' · %.2f %s'):format(u.cost.amount, compat.str(u.cost.currency) or '')
    end
    parts[#parts + 1] = usage
  end
  return table.concat(parts, ' · ')
end

--- The outbox of `chat` as virtual lines (at most `max` prompts, one line
--- each, then a count of the others) and a line naming `keys`.
---@param chat acp.Chat
---@param max integer
---@param keys table
---@return table[] virt_lines
function M.outbox(chat, max, keys)
  local lines, n = {}, #chat.outbox
  for i = 1, math.min(n, max) do
    lines[#lines + 1] = {
      { ('queued %d: '):format(i), 'AcpChatLabel' },
      { text.truncate(text.one_line(chat.outbox[i]), 200), 'AcpChatMeta' },
    }
  end
  if n > max then
    lines[#lines + 1] = { { ('… %d more queued'):format(n - max), 'AcpChatMeta' } }
  end
  local send = keys.send ~= '' and keys.send or '<CR>'
  local how = chat.exited and 'kept: the agent exited'
    or chat.held and ('held: %s on an empty input sends them'):format(send)
    or 'sent when the turn ends'
  local edit = {}
  if keys.queue_edit ~= '' then
    edit[#edit + 1] = keys.queue_edit .. ' edit'
  end
  if keys.queue_drop ~= '' then
    edit[#edit + 1] = keys.queue_drop .. ' drop'
  end
  lines[#lines + 1] = { { how .. (#edit > 0 and (' · ' .. table.concat(edit, ' · ')) or ''), 'AcpChatMeta' } }
  return lines
end

--- The block of tool call record `rec` (its content rendered once per change).
function M.tool(chat, rec)
  if rec.content_dirty then
    rec.parts = H.render_content(model.field(rec, 'content') or {})
    rec.over.content, rec.content_dirty = nil, false
  end
  local status, kind = model.field(rec, 'status'), model.field(rec, 'kind')
  local b = M.block()
  b.add({ { '' } })
  local word, group
  if rec.rejected and (status == nil or status == 'pending') then
    word, group = 'rejected', 'AcpChatFailed'
  elseif rec.ended and (status == nil or status == 'pending' or status == 'in_progress') then
    word, group = rec.ended, 'AcpChatMeta'
  else
    local s = H.statuses[status or 'pending'] or { status, 'AcpChatStatus' }
    word, group = s[1], s[2]
  end
  local title = text.one_line(model.field(rec, 'title') or (rec.command or kind or 'tool call'))
  b.add({
    { '[' .. word .. ']', group },
    { ' ' },
    { title, 'AcpChatToolTitle' },
    { ' · ' .. (kind or 'other'), 'AcpChatMeta' },
  })
  if rec.perm ~= nil then
    b.add({ { '  ' }, { text.one_line(rec.perm.text), rec.perm.group } })
  end
  local parts, diff, terminal = rec.parts or {}, false, false
  for _, part in ipairs(parts) do
    diff, terminal = diff or part.diff == true, terminal or part.terminal ~= nil
  end
  -- A terminal shows its command itself.
  if rec.command ~= nil and not terminal and text.one_line(rec.command) ~= title then
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
  if not diff and kind ~= 'execute' then
    for i, loc in ipairs(model.field(rec, 'locations') or {}) do
      if i > 3 then
        break
      end
      if type(loc) == 'table' and compat.str(loc.path) then
        local line = type(loc.line) == 'number' and (':' .. loc.line) or ''
        b.add({ { '  ' .. text.short_path(loc.path) .. line, 'AcpChatMeta' } })
      end
    end
  end
  return b
end

--- The plan of a turn.
function M.plan(entries)
  local b = M.block()
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
        { ' ' .. text.one_line(compat.str(e.content) or '') },
        { priority and (' (' .. priority .. ')') or '', 'AcpChatMeta' },
      })
    end
  end
  return b
end

-- Helper data ================================================================

--- Lines shown per tool call content item (a diff, a text).
H.max_part_lines = 200
--- Last lines of output shown per terminal.
H.terminal_lines = 20

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

H.thought_prefix = '│ '

-- Helper functionality =======================================================

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
  local b = M.block()
  if item.type == 'diff' then
    b.diff = true
    local d = format.diff(item)
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
    b.text(model.content_text(item.content) or '[content]', '  ', nil, H.max_part_lines)
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
  b.add({ { ('  $ %s  (%s)'):format(text.one_line(t.command or id), state), 'AcpChatMeta' } })
  local lines = t.output and t.output ~= '' and text.split_lines(t.output) or {}
  local first = math.max(1, #lines - H.terminal_lines + 1)
  if first > 1 or t.truncated then
    b.add({ { '  │ …', 'AcpChatMeta' } })
  end
  for i = first, #lines do
    b.add({ { '  │ ', 'AcpChatMeta' }, { lines[i] } })
  end
end

return M
