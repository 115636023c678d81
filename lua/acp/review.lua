--- :AcpReview, the view of the turn ledger (acp.ledger): a quickfix list
--- of the hunks the agent changed, a diff of a file against its snapshot,
--- and reverting a hunk, a file or everything. Reverting tells the agent
--- nothing.

local ledger = require('acp.ledger')

local M = {}
local H = {}

-- Module definition ==========================================================

--- Subcommands of :AcpReview, for completion.
M.subcommands = { 'turn', 'session', 'diff', 'revert' }

--- :AcpReview [turn|session] | diff [file] | revert [file|all]
---@param args string
function M.command(args)
  local words = {}
  for w in (args or ''):gmatch('%S+') do
    words[#words + 1] = w
  end
  local sub = words[1] or 'turn'
  if sub == 'turn' or sub == 'session' then
    M.quickfix(sub)
  elseif sub == 'diff' then
    M.diff(words[2] and vim.fn.fnamemodify(words[2], ':p') or nil)
  elseif sub == 'revert' then
    M.revert(words[2])
  else
    vim.notify(("(acp) :AcpReview %s: expected turn, session, diff or revert"):format(sub), vim.log.levels.ERROR)
  end
end

--- Fills the quickfix list with the hunks of the last turn ('turn') or of
--- the session ('session') and opens it. Returns the number of hunks.
---@param scope string|nil
---@return integer
function M.quickfix(scope)
  scope = scope or 'turn'
  H.scope = scope
  local list = ledger.review({ scope = scope })
  if #list == 0 then
    vim.notify(
      ('(acp) nothing to review: the agent changed no file in %s'):format(scope == 'turn' and 'its last turn' or 'this session'),
      vim.log.levels.INFO
    )
    return 0
  end
  local items = H.items(list)
  vim.fn.setqflist({}, ' ', { title = H.title(scope, list), items = items })
  vim.cmd('botright copen')
  return #items
end

--- Opens a tab page with the file (default: the current buffer's, or the
--- quickfix entry's) beside its snapshot, in diff mode.
---@param path string|nil
---@return boolean
function M.diff(path)
  path = path or H.here()
  if path == nil then
    vim.notify('(acp) :AcpReview diff: which file? Name it, or put the cursor in it', vim.log.levels.ERROR)
    return false
  end
  local snap, scope = H.snapshot(path)
  if snap == nil then
    vim.notify(('(acp) the agent changed nothing in %s'):format(H.show(path)), vim.log.levels.INFO)
    return false
  end
  H.scope = scope
  vim.cmd('tab split ' .. vim.fn.fnameescape(path))
  local file_win = vim.api.nvim_get_current_win()
  local ft = vim.bo.filetype
  vim.cmd('leftabove vnew')
  local buf = vim.api.nvim_get_current_buf()
  vim.bo[buf].buftype = 'nofile'
  vim.bo[buf].bufhidden = 'wipe'
  vim.bo[buf].swapfile = false
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, snap.lines)
  vim.bo[buf].modifiable = false
  vim.bo[buf].filetype = ft
  vim.b[buf].acp_review_path = path
  pcall(vim.api.nvim_buf_set_name, buf, 'acp-snapshot://' .. path)
  vim.cmd('diffthis')
  vim.api.nvim_set_current_win(file_win)
  vim.cmd('diffthis')
  return true
end

--- :AcpReview revert: the hunk under the cursor (in the file, its
--- snapshot in the diff view, or the quickfix list); `file`: every hunk of
--- that file; `all`: every hunk of the review.
---@param what string|nil
---@return boolean
function M.revert(what)
  local opts = { scope = H.scope }
  if what == 'all' then
    local list, n = ledger.review(opts), 0
    for _, f in ipairs(list) do
      local ok, msg = ledger.revert(f.path, nil, opts)
      n = n + (ok and 1 or 0)
      vim.notify(msg, ok and vim.log.levels.INFO or vim.log.levels.ERROR)
    end
    H.refresh()
    return n > 0 and n == #list
  end
  local path, lnum, old_side = H.here()
  if path == nil then
    vim.notify('(acp) :AcpReview revert: put the cursor in a changed file or on a quickfix entry', vim.log.levels.ERROR)
    return false
  end
  local index
  if what ~= 'file' then
    index = H.hunk_at(path, lnum, old_side, opts)
    if index == nil then
      vim.notify(('(acp) no changed hunk of %s at line %d'):format(H.show(path), lnum), vim.log.levels.ERROR)
      return false
    end
  end
  local ok, msg = ledger.revert(path, index, opts)
  vim.notify(msg, ok and vim.log.levels.INFO or vim.log.levels.ERROR)
  H.refresh()
  return ok
end

-- Helper functionality =======================================================

--- The scope of the last review: 'turn' or 'session'.
H.scope = 'turn'

function H.items(list)
  local items = {}
  for _, f in ipairs(list) do
    local now = ledger.current(f.path)
    local lines = now and now.lines or {}
    for i, h in ipairs(f.hunks) do
      local first = h.new_count > 0 and lines[h.new_start] or nil
      -- The call that made this hunk, else (none known) every call that
      -- named the file.
      local why = H.why(h.toolCall and { h.toolCall } or f.toolCalls)
      items[#items + 1] = {
        filename = f.path,
        lnum = math.max(h.new_start, 1),
        col = 1,
        text = ('hunk %d/%d: -%d +%d%s %s'):format(
          i,
          #f.hunks,
          h.old_count,
          h.new_count,
          h.conflict and ' (you edited it since)' or '',
          first and vim.trim(first) or '(lines removed)'
        ) .. why,
      }
    end
  end
  return items
end

--- "  [Write a.c: allowed by you]": tool calls and their decisions (the
--- audit log has a line for each, by toolCallId).
function H.why(calls)
  local parts = {}
  for _, c in ipairs(calls or {}) do
    parts[#parts + 1] = ('%s: %s'):format(c.title or c.toolCallId, c.decision or 'no request seen')
  end
  return #parts > 0 and ('  [%s]'):format(table.concat(parts, '; ')) or ''
end

function H.title(scope, list)
  return ('acp review (%s): %d file%s'):format(scope == 'turn' and 'last turn' or 'session', #list, #list == 1 and '' or 's')
end

--- The snapshot of path in the current scope, else in the session's.
function H.snapshot(path)
  local snap = ledger.snapshot_of(path, { scope = H.scope })
  if snap ~= nil then
    return snap, H.scope
  end
  return ledger.snapshot_of(path, { scope = 'session' }), 'session'
end

--- path, line and whether the line is in the snapshot (old side), for
--- the cursor: in the quickfix list, its entry.
function H.here()
  if vim.bo.buftype == 'quickfix' then
    local item = vim.fn.getqflist()[vim.fn.line('.')]
    if item == nil or item.bufnr == 0 then
      return nil
    end
    return vim.api.nvim_buf_get_name(item.bufnr), item.lnum, false
  end
  local lnum = vim.api.nvim_win_get_cursor(0)[1]
  if type(vim.b.acp_review_path) == 'string' then
    return vim.b.acp_review_path, lnum, true
  end
  local name = vim.api.nvim_buf_get_name(0)
  if name == '' then
    return nil
  end
  return name, lnum, false
end

--- Index of the hunk of path at line lnum (of the snapshot when old_side).
function H.hunk_at(path, lnum, old_side, opts)
  local real = ledger.norm(vim.fn.fnamemodify(path, ':p'))
  for _, f in ipairs(ledger.review(opts)) do
    if f.path == real or f.path == path then
      for i, h in ipairs(f.hunks) do
        local start, count = h.new_start, h.new_count
        if old_side then
          start, count = h.old_start, h.old_count
        end
        if count == 0 then
          if lnum == math.max(start, 1) or lnum == start + 1 then
            return i
          end
        elseif lnum >= start and lnum < start + count then
          return i
        end
      end
    end
  end
  return nil
end

--- Updates the diff view and a quickfix list of ours after a revert.
function H.refresh()
  pcall(vim.cmd, 'diffupdate')
  local title = vim.fn.getqflist({ title = 0 }).title
  if type(title) == 'string' and title:match('^acp review') then
    local list = ledger.review({ scope = H.scope })
    vim.fn.setqflist({}, 'r', { title = H.title(H.scope, list), items = H.items(list) })
  end
end

function H.show(path)
  return vim.fn.fnamemodify(path, ':~:.')
end

return M
