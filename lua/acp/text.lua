--- Text helpers for what the plugin shows: splitting into lines, folding
--- onto one line, truncating to the screen, sizes, paths, shell quoting.
--- Pure functions of their arguments (and of the screen width they are
--- given); no state.

local M = {}

--- The lines of `text` (split at '\n'; the last one may be empty). Not
--- vim.split: on Neovim 0.7.2 (its LuaJIT 2.1.0-beta3), run this often, its
--- vim.validate() call now and then fails on a table it was never given
--- ("opt[true]: expected table, got boolean"), and after an error message
--- Neovim 0.7 sleeps a second in its next screen update without handling
--- RPC (bench/README.md): the stream stalled for a second.
---@param text string
---@return string[]
function M.lines(text)
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

--- A file's text as buffer lines: its lines without the empty one after a
--- final newline, and whether there was one (a buffer's 'eol').
---@param text string
---@return string[] lines
---@return boolean eol
function M.file_lines(text)
  local lines = M.lines(text)
  local eol = lines[#lines] == ''
  if eol then
    table.remove(lines)
  end
  return lines, eol
end

--- Text split into lines (CR LF and CR count as LF; no empty last line
--- for a final newline).
---@param text any
---@return string[]
function M.split_lines(text)
  text = tostring(text):gsub('\r\n', '\n'):gsub('\r', '\n')
  local lines = M.lines(text)
  if #lines > 1 and lines[#lines] == '' then
    table.remove(lines)
  end
  return lines
end

--- `text` with its line breaks (and the blanks around them) as one space.
---@param text any
---@return string
function M.one_line(text)
  return (tostring(text):gsub('%s*[\r\n]+%s*', ' '))
end

--- `text` with every run of white space as one space, trimmed ('' for nil).
---@param text string|nil
---@return string
function M.squash(text)
  return text and vim.trim((text:gsub('%s+', ' '))) or ''
end

--- `text` cut to `max` display cells, ending in "…" when cut.
---@param text string
---@param max integer
---@return string
function M.truncate(text, max)
  if vim.fn.strdisplaywidth(text) > max then
    return vim.fn.strcharpart(text, 0, math.max(1, max - 1)) .. '…'
  end
  return text
end

--- Screen rows `lines` take in a window `width` wide with 'wrap'.
---@param lines string[]
---@param width integer
---@return integer
function M.rows(lines, width)
  local h = 0
  for _, l in ipairs(lines) do
    h = h + math.max(1, math.ceil(vim.fn.strdisplaywidth(l) / width))
  end
  return h
end

--- The last `max` bytes of `s`, starting at a character boundary.
---@param s string
---@param max integer
---@return string
function M.tail(s, max)
  if #s <= max then
    return s
  end
  local i = #s - max + 1
  while i <= #s and s:byte(i) >= 0x80 and s:byte(i) < 0xC0 do
    i = i + 1
  end
  return s:sub(i)
end

--- The first `n` items joined, with "…" when there are more.
---@param items string[]
---@param n integer
---@return string
function M.shorten(items, n)
  local head = {}
  for i = 1, math.min(n, #items) do
    head[i] = items[i]
  end
  return table.concat(head, ', ') .. (#items > n and ', …' or '')
end

--- A byte count for a person: "12 bytes", "3.4 KiB", "1.2 MiB".
---@param n number
---@return string
function M.size(n)
  if n >= 1024 * 1024 then
    return ('%.1f MiB'):format(n / (1024 * 1024))
  elseif n >= 1024 then
    return ('%.1f KiB'):format(n / 1024)
  end
  return ('%d bytes'):format(n)
end

--- A token count: 1234 → "1.2k", 200000 → "200k".
---@param n number
---@return string
function M.tokens(n)
  if n >= 1000 then
    local k = n / 1000
    return (k >= 100 and '%.0fk' or '%.1fk'):format(k)
  end
  return tostring(n)
end

--- A path as the person reads it: relative to the current directory or ~.
---@param p string
---@return string
function M.short_path(p)
  return vim.fn.fnamemodify(p, ':~:.')
end

--- A path relative to ~ (a value that is not a path is returned as text).
---@param path any
---@return string
function M.home_path(path)
  if type(path) ~= 'string' or not path:find('/', 1, true) then
    return tostring(path)
  end
  return vim.fn.fnamemodify(path, ':~')
end

--- An argv list as a shell would need it quoted.
---@param argv any[]
---@return string
function M.shell_join(argv)
  local parts = {}
  for _, p in ipairs(argv) do
    p = tostring(p)
    if p == '' or p:find("[^%w@%%+=:,./_-]") then
      p = "'" .. p:gsub("'", [['\'']]) .. "'"
    end
    parts[#parts + 1] = p
  end
  return table.concat(parts, ' ')
end

--- vim.diff, or vim.text.diff where it exists (compat.diff).
M.diff = require('acp.compat').diff

--- lines as text for M.diff: every line ends with a newline, so that a
--- missing final newline is not a change of the last line.
---@param lines string[]
---@return string
function M.diff_text(lines)
  if #lines == 0 then
    return ''
  end
  return table.concat(lines, '\n') .. '\n'
end

return M
