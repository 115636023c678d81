--- fs/read_text_file and fs/write_text_file through Neovim's buffers.
---
--- The broker checks every path (project root, rules, symlinks) and then
--- calls `handle()` here: when the file is loaded in a buffer, the agent
--- reads what the person sees (unsaved edits included) and its writes land
--- in the buffer as one undoable change. When no buffer holds the file, the
--- broker uses the disk itself.
---
--- A write never drops the person's work (doc/acp.txt `acp-unsaved`): what
--- the agent last saw of the file is kept (acp.merge); when the buffer
--- changed since then, the agent's changes are merged into it, or, where
--- both changed the same lines, the person is asked and the broker's answer
--- to the agent waits (`{wait = token}`, answered with `acp_fs_answer`). A
--- buffer with unsaved changes is never written to disk unless the person
--- chose the agent's text.

local compat = require('acp.compat')
local merge = require('acp.merge')
local state = require('acp.state')
local text = require('acp.text')

local M = {}
local H = {}

-- Module definition ==========================================================

--- Writes waiting for the person's answer, at most.
M.max_waiting = 16

--- Entry point of the broker's calls (doc/protocol.md, `fs`). A read with
--- `c == 'peek'` is the broker looking (the diff of its own prompt about a
--- write the agent did not ask about), not the agent; a write with `b ==
--- 'approved'` is one the person allowed in that prompt.
---@param op 'read'|'write'
---@param path string absolute, symlinks resolved
---@return any result read: the text, or nil (no buffer); write: true (the buffer took it), false (no buffer), a reason it could not, or {wait = token}
function M.handle(op, path, a, b, c)
  if op == 'read' then
    return M.read(path, a, b, c == 'peek')
  end
  -- Fail closed: an error here must not send the write to the disk under
  -- the buffer (the broker writes the disk for anything but an answer).
  local ok, r = pcall(M.write, path, a, b == 'approved')
  if not ok then
    return ('acp could not put the write into the buffer of %s: %s'):format(path, tostring(r))
  end
  return r
end

--- The text of the loaded buffer holding path, lines `line` (1-based; 0
--- means 1) to `line + limit - 1` (limit 0: to the end), or nil. Unless
--- `peek`, the whole buffer is remembered as what the agent saw.
---@param path string
---@param line integer|nil
---@param limit integer|nil
---@param peek boolean|nil
---@return string|nil
function M.read(path, line, limit, peek)
  local buf = M.find(path)
  if buf == nil then
    return nil
  end
  if peek then
    if H.npeeked >= 64 then
      H.peeked, H.npeeked = {}, 0
    end
    H.npeeked = H.npeeked + 1
    H.peeked[path] = M.text(buf)
  else
    merge.saw(path, M.text(buf))
  end
  local first = math.max((line or 0) - 1, 0)
  local total = vim.api.nvim_buf_line_count(buf)
  local last = total
  if limit ~= nil and limit > 0 then
    last = math.min(total, first + limit)
  end
  if first >= total then
    return ''
  end
  local lines = vim.api.nvim_buf_get_lines(buf, first, last, false)
  local s = table.concat(lines, '\n')
  -- The newline after the last line is in the file (unless 'noeol'), and
  -- after every line that is not the buffer's last.
  if last < total or H.ends_with_eol(buf) then
    s = s .. '\n'
  end
  return s
end

--- The whole text of buffer buf, as the file would hold it.
---@param buf integer
---@return string
function M.text(buf)
  local lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  if #lines == 1 and lines[1] == '' then
    return ''
  end
  return table.concat(lines, '\n') .. (H.ends_with_eol(buf) and '\n' or '')
end

--- What the person has of path: the loaded buffer's text (unsaved changes
--- included), else the file on disk (at most acp.merge.max_bytes), else
--- nil; and where it came from.
---@param path string
---@param max integer|nil the largest text wanted (bytes)
---@return string|nil text
---@return 'buffer'|'disk'|nil from
---@return boolean modified the buffer has unsaved changes
function M.current(path, max)
  local buf = M.find(path)
  if buf ~= nil then
    local s = M.text(buf)
    if max ~= nil and #s > max then
      return nil, nil, false
    end
    return s, 'buffer', vim.api.nvim_buf_get_option(buf, 'modified')
  end
  local s = H.disk(path, max)
  return s, s and 'disk' or nil, false
end

--- Puts content into the loaded buffer holding path without dropping the
--- person's lines (see the module's comment). Returns false when no buffer
--- holds path.
---@param path string
---@param content string
---@param approved boolean|nil the person allowed it, seeing the diff from the buffer as it was then
---@return boolean|string|table
function M.write(path, content, approved)
  local peeked = H.peeked[path]
  H.peeked[path] = nil
  local buf = M.find(path)
  if buf == nil then
    merge.saw(path, content)
    return false
  end
  if not vim.api.nvim_buf_get_option(buf, 'modifiable') then
    return ('the buffer of %s is not modifiable'):format(path)
  end
  local mine = M.text(buf)
  local modified = vim.api.nvim_buf_get_option(buf, 'modified')
  local base = merge.seen(path)
  if approved and peeked ~= nil then
    -- The person saw the diff from `peeked` to content and allowed it.
    if mine == peeked then
      return H.apply(buf, path, content, content, true)
    end
    base = peeked
  end
  if base == nil and not modified then
    base = mine
  elseif base == nil then
    -- Unsaved changes and no read through the buffer: the agent saw the
    -- file (or nothing: a new file).
    local uv = vim.uv or vim.loop
    base = H.disk(path) or (uv.fs_stat(path) == nil and '' or nil)
  end
  if mine == content or mine == base then
    local ok = H.apply(buf, path, content, content, not modified)
    if ok == true and modified and mine ~= content then
      H.tell(('acp: the agent changed %s; your buffer had unsaved changes, so it is not saved (:w saves it)'):format(H.short(path)))
    end
    return ok
  end
  local r = base and merge.merge3(base, mine, content) or { conflicts = 1 }
  if r.text ~= nil then
    local ok = H.apply(buf, path, r.text, content, not modified)
    if ok == true then
      H.tell(
        ('acp: the agent changed %s, which you had changed since it read it: its changes were merged with yours (u undoes them)%s'):format(
          H.short(path),
          modified and '; not saved, as your changes were not (:w saves)' or ''
        )
      )
    end
    return ok
  end
  return H.hold(buf, path, content, r.conflicts)
end

--- The person's answer to a held write: 'mine' (the write is refused),
--- 'theirs' (the agent's text goes into the buffer, undoable, and is
--- saved) or 'diff' (both open in a diff in a new tab; the write is
--- refused). Answers the broker. Also what the choice window calls.
---@param token integer
---@param choice 'mine'|'theirs'|'diff'|nil
function M.decide(token, choice)
  local w = H.waiting[token]
  if w == nil then
    return
  end
  H.waiting[token] = nil
  H.nwaiting = H.nwaiting - 1
  local shown = H.short(w.path)
  local result
  if choice == 'theirs' and w.stale then
    -- The broker refused the call when the turn ended (a cancel, the
    -- agent gone): its text is not applied behind its back.
    result = ('the turn ended before the person answered about %s'):format(w.path)
    H.tell(("acp: the agent's turn ended before you answered: its text of %s was not applied"):format(shown))
  elseif choice == 'theirs' then
    if vim.api.nvim_buf_is_loaded(w.buf) and vim.api.nvim_buf_get_option(w.buf, 'modifiable') then
      result = H.apply(w.buf, w.path, w.content, w.content, true)
      if result == true then
        H.tell(("acp: the agent's text of %s replaced yours and was saved (u brings yours back)"):format(shown))
      end
    else
      result = ('the buffer of %s was closed before the person answered'):format(w.path)
    end
  elseif choice == 'diff' then
    local ok, err = pcall(H.open_diff, w)
    if not ok then
      H.tell(('acp: could not open the diff: %s'):format(tostring(err)), vim.log.levels.ERROR)
    end
    result = ('the person has unsaved changes in %s that overlap your edit and is comparing the two versions; nothing was written: read the file again before changing it'):format(w.path)
  else
    result = ('the person has unsaved changes in %s that overlap your edit and kept their own version; nothing was written: read the file again before changing it'):format(w.path)
  end
  require('acp.rpc').fs_answer(token, result)
end

--- Tokens of the writes waiting for the person (tests, :AcpPending-like
--- views): {token = {path = , conflicts = }}.
function M.waiting()
  local r = {}
  for token, w in pairs(H.waiting) do
    r[token] = { path = w.path, conflicts = w.conflicts }
  end
  return r
end

--- The loaded, file-backed buffer whose file is path (compared after
--- resolving symlinks, compat.realpath), or nil.
---@param path string
---@return integer|nil
function M.find(path)
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(buf) and vim.api.nvim_buf_get_option(buf, 'buftype') == '' then
      local name = vim.api.nvim_buf_get_name(buf)
      if name ~= '' and (name == path or compat.realpath(name) == path) then
        return buf
      end
    end
  end
  return nil
end

-- Helper functionality =======================================================

H.waiting = {}
H.nwaiting = 0
--- path -> the buffer's text the broker's own prompt showed (a 'peek'
--- read), until the next write of path (a rejected write leaves its entry:
--- at most 64 are kept).
H.peeked = {}
H.npeeked = 0
H.next_token = 0

function H.ends_with_eol(buf)
  return vim.api.nvim_buf_get_option(buf, 'eol') or vim.api.nvim_buf_get_option(buf, 'fixeol')
end

function H.short(path)
  return text.short_path(path)
end

function H.tell(msg, level)
  vim.schedule(function()
    vim.notify(msg, level or vim.log.levels.WARN)
  end)
end

--- The file's text, or nil (missing, unreadable, too large).
function H.disk(path, max)
  return (compat.read_file(path, max or merge.max_bytes))
end

--- Replaces the buffer's text with new_text as one undoable change
--- touching only the lines that differ; remembers agent_text as what the
--- agent saw; writes the buffer when save. true, or why not.
function H.apply(buf, path, new_text, agent_text, save)
  local lines, eol = text.file_lines(new_text)
  if #lines == 0 then
    lines = { '' }
  end
  local old = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  local top = 0
  while top < #old and top < #lines and old[top + 1] == lines[top + 1] do
    top = top + 1
  end
  local bottom = 0
  while
    bottom < #old - top
    and bottom < #lines - top
    and old[#old - bottom] == lines[#lines - bottom]
  do
    bottom = bottom + 1
  end
  local new = {}
  for i = top + 1, #lines - bottom do
    new[#new + 1] = lines[i]
  end
  if top < #old - bottom or #new > 0 then
    -- Its own undo block, apart from the person's last change (setting
    -- 'undolevels' syncs undo).
    pcall(vim.api.nvim_buf_call, buf, function()
      vim.cmd('let &g:undolevels = &g:undolevels')
    end)
    vim.api.nvim_buf_set_lines(buf, top, #old - bottom, false, new)
  end
  vim.api.nvim_buf_set_option(buf, 'eol', eol)
  vim.api.nvim_buf_set_option(buf, 'fixeol', eol)
  merge.saw(path, agent_text)
  if not save then
    return true
  end
  local ok, err = pcall(vim.api.nvim_buf_call, buf, function()
    vim.cmd('silent noautocmd keepalt write!')
  end)
  if not ok then
    return ('the buffer of %s took the change but could not be written: %s'):format(path, tostring(err))
  end
  return true
end

--- Holds a write whose changes overlap the person's: the broker waits for
--- M.decide (the person's choice, asked once this call has returned).
function H.hold(buf, path, content, conflicts)
  if H.nwaiting >= M.max_waiting then
    return ('the person has unsaved changes in %s that overlap your edit, and too many writes wait for their answer'):format(path)
  end
  H.next_token = H.next_token + 1
  local token = H.next_token
  H.waiting[token] = { buf = buf, path = path, content = content, conflicts = conflicts }
  H.nwaiting = H.nwaiting + 1
  vim.schedule(function()
    H.ask(token)
  end)
  return { wait = token }
end

--- A turn that ends (or an agent that exits) while a write is held means
--- the broker refused it (client_cancel): taking it later would apply text
--- the agent was told was not written.
state.subscribe(function()
  for _, w in pairs(H.waiting) do
    w.stale = true
  end
end, { 'turn_end', 'agent_exit' })

H.choices = {
  { key = 'mine', label = 'Keep mine (the agent is told its write was refused)' },
  { key = 'theirs', label = "Take the agent's (undoable with u; saved)" },
  { key = 'diff', label = 'Open both in a diff in a new tab (the write is refused)' },
}

function H.ask(token)
  local w = H.waiting[token]
  if w == nil then
    return
  end
  local prompt = ("acp: the agent wants to write %s, but you changed the same lines (%d place%s) and did not save: "):format(
    H.short(w.path),
    w.conflicts,
    w.conflicts == 1 and '' or 's'
  )
  local ok, err = pcall(vim.ui.select, H.choices, {
    prompt = prompt,
    kind = 'acp_unsaved',
    format_item = function(item)
      return item.label
    end,
  }, function(item)
    M.decide(token, item and item.key or nil)
  end)
  if not ok then
    H.tell(('acp: could not ask about %s (%s): kept your version'):format(H.short(w.path), tostring(err)), vim.log.levels.ERROR)
    M.decide(token, 'mine')
  end
end

--- A new tab: the person's buffer on the left, the agent's text (a scratch
--- buffer) on the right, in diff mode.
function H.open_diff(w)
  if not vim.api.nvim_buf_is_loaded(w.buf) then
    error('the buffer was closed')
  end
  vim.cmd('tabnew')
  local scratch = vim.api.nvim_get_current_buf()
  vim.api.nvim_win_set_buf(0, w.buf)
  pcall(vim.api.nvim_buf_delete, scratch, { force = true })
  vim.cmd('diffthis')
  local left = vim.api.nvim_get_current_win()
  vim.cmd('rightbelow vertical new')
  local agent = vim.api.nvim_get_current_buf()
  local lines = text.lines(w.content)
  if #lines > 1 and lines[#lines] == '' then
    table.remove(lines)
  end
  vim.api.nvim_buf_set_lines(agent, 0, -1, false, lines)
  for k, v in pairs({ buftype = 'nofile', bufhidden = 'wipe', swapfile = false, modified = false }) do
    vim.api.nvim_buf_set_option(agent, k, v)
  end
  pcall(vim.api.nvim_buf_set_name, agent, ('acp://agent/%d/%s'):format(w.buf, vim.fn.fnamemodify(w.path, ':t')))
  local ft = vim.api.nvim_buf_get_option(w.buf, 'filetype')
  if ft ~= '' then
    vim.api.nvim_buf_set_option(agent, 'filetype', ft)
  end
  vim.api.nvim_buf_set_option(agent, 'modifiable', false)
  vim.cmd('diffthis')
  vim.api.nvim_set_current_win(left)
end

return M
