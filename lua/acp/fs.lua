--- fs/read_text_file and fs/write_text_file through Neovim's buffers.
---
--- The broker checks every path (project root, rules, symlinks) and then
--- calls `handle()` here: when the file is loaded in a buffer, the agent
--- reads what the person sees (unsaved edits included) and its writes land
--- in the buffer as one undoable change, then the buffer is written. When
--- no buffer holds the file, the broker uses the disk itself.

local text = require('acp.text')

local M = {}
local H = {}

-- Module definition ==========================================================

--- Entry point of the broker's calls (doc/protocol.md, `fs`).
---@param op 'read'|'write'
---@param path string absolute, symlinks resolved
---@return string|boolean|nil result read: the text, or nil (no buffer); write: true (the buffer took it), false (no buffer) or a reason it could not
function M.handle(op, path, a, b)
  if op == 'read' then
    return M.read(path, a, b)
  end
  return M.write(path, a)
end

--- The text of the loaded buffer holding path, lines `line` (1-based; 0
--- means 1) to `line + limit - 1` (limit 0: to the end), or nil.
---@param path string
---@param line integer|nil
---@param limit integer|nil
---@return string|nil
function M.read(path, line, limit)
  local buf = M.find(path)
  if buf == nil then
    return nil
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
  local text = table.concat(lines, '\n')
  -- The newline after the last line is in the file (unless 'noeol'), and
  -- after every line that is not the buffer's last.
  if last < total or H.ends_with_eol(buf) then
    text = text .. '\n'
  end
  return text
end

--- Replaces the text of the loaded buffer holding path with content, as
--- one undoable change touching only the lines that differ, then writes
--- the buffer. Returns false when no buffer holds path.
---@param path string
---@param content string
---@return boolean|string
function M.write(path, content)
  local buf = M.find(path)
  if buf == nil then
    return false
  end
  if not vim.api.nvim_buf_get_option(buf, 'modifiable') then
    return ('the buffer of %s is not modifiable'):format(path)
  end
  local lines = text.lines(content)
  local eol = lines[#lines] == ''
  if eol then
    table.remove(lines)
  end
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
    vim.api.nvim_buf_set_lines(buf, top, #old - bottom, false, new)
  end
  vim.api.nvim_buf_set_option(buf, 'eol', eol)
  vim.api.nvim_buf_set_option(buf, 'fixeol', eol)
  local ok, err = pcall(vim.api.nvim_buf_call, buf, function()
    vim.cmd('silent noautocmd keepalt write!')
  end)
  if not ok then
    return ('the buffer of %s took the change but could not be written: %s'):format(path, tostring(err))
  end
  return true
end

--- The loaded, file-backed buffer whose file is path (compared after
--- resolving symlinks), or nil.
---@param path string
---@return integer|nil
function M.find(path)
  local uv = vim.uv or vim.loop
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(buf) and vim.api.nvim_buf_get_option(buf, 'buftype') == '' then
      local name = vim.api.nvim_buf_get_name(buf)
      if name ~= '' and (name == path or uv.fs_realpath(name) == path) then
        return buf
      end
    end
  end
  return nil
end

-- Helper functionality =======================================================

function H.ends_with_eol(buf)
  return vim.api.nvim_buf_get_option(buf, 'eol') or vim.api.nvim_buf_get_option(buf, 'fixeol')
end

return M
