--- The prompt's text layout: lines wrapped at spaces to a number of screen
--- cells, with highlights, collected in blocks. Pure functions of their
--- arguments (and of the widths Neovim gives characters).

-- Not compiled by LuaJIT, as acp.prompt (which says why).
if jit ~= nil then
  jit.off(true, true)
end

local text = require('acp.text')

local M = {}
local H = {}

--- `s` cut into pieces of at most `first` cells (then `rest` cells), at the
--- last space that fits; the space at a break is dropped. Tabs count as four
--- spaces.
---@param s string
---@param first integer
---@param rest integer
---@return string[]
function M.wrap(s, first, rest)
  -- No character takes more cells than bytes, but for control characters.
  if #s <= first and not s:find('%c') then
    return { s }
  end
  s = s:gsub('\t', '    ')
  local ascii = not s:find('[\128-\255]')
  if ascii and #s <= first then
    return { s }
  end
  if ascii then
    return H.wrap_ascii(s, first, rest)
  end
  local chars, widths = {}, {}
  do
    for ch in s:gmatch('[%z\1-\127\192-\255][\128-\191]*') do
      chars[#chars + 1] = ch
      local cw = #ch == 1 and 1 or H.cells[ch]
      if cw == nil then
        cw = vim.fn.strdisplaywidth(ch)
        if H.cells_n >= 4096 then -- bounded: start again
          H.cells, H.cells_n = {}, 0
        end
        H.cells[ch], H.cells_n = cw, H.cells_n + 1
      end
      widths[#widths + 1] = cw
    end
  end
  local out, i, n, width = {}, 1, #chars, math.max(1, first)
  while i <= n do
    local w, j = 0, i
    while j <= n and w + widths[j] <= width do
      w = w + widths[j]
      j = j + 1
    end
    if j > n then
      out[#out + 1] = table.concat(chars, '', i, n)
      break
    end
    local cut, nexti
    if chars[j] == ' ' then
      cut, nexti = j - 1, j + 1
    else
      local k = j - 1
      while k > i and chars[k] ~= ' ' do
        k = k - 1
      end
      if k > i then
        cut, nexti = k - 1, k + 1
      else
        cut, nexti = j - 1, j
      end
    end
    if cut < i then -- a character wider than the line
      cut, nexti = i, i + 1
    end
    out[#out + 1] = table.concat(chars, '', i, cut)
    i = nexti
    width = math.max(1, rest)
  end
  if #out == 0 then
    out[1] = ''
  end
  return out
end

--- H.wrap for text of printable ASCII characters (one byte, one cell).
function H.wrap_ascii(s, first, rest)
  local out, i, n, width = {}, 1, #s, math.max(1, first)
  while n - i + 1 > width do
    local j = i + width -- the first byte that does not fit
    if s:byte(j) == 32 then
      out[#out + 1] = s:sub(i, j - 1)
      i = j + 1
    else
      local k = j - 1
      while k > i and s:byte(k) ~= 32 do
        k = k - 1
      end
      if k > i then
        out[#out + 1] = s:sub(i, k - 1)
        i = k + 1
      else
        out[#out + 1] = s:sub(i, j - 1)
        i = j
      end
    end
    width = math.max(1, rest)
  end
  if i <= n or #out == 0 then
    out[#out + 1] = s:sub(i)
  end
  return out
end

--- The option_rows of a block that has none yet (never written to).
H.no_rows = setmetatable({}, {
  __newindex = function()
    error('(acp) layout: H.no_rows is shared')
  end,
})

--- The option_rows of block b, made its own before the first write.
function H.rows(b)
  if b.option_rows == H.no_rows then
    b.option_rows = {}
  end
  return b.option_rows
end

--- Display cells of the characters seen (a character's width never changes
--- while Neovim runs, but for 'ambiwidth').
H.cells, H.cells_n = {}, 0

--- Lines with highlights, every line at most `width` cells:
--- {lines, hls = {row, scol, ecol, group, row, scol, ...}, option_rows =
--- {row -> option}}. The highlights are flat, four slots each: a prompt is
--- laid out from some twenty blocks, and a table per highlight, copied
--- from block to block, was a third of the layout's garbage.
M.Block = {}
M.Block.__index = M.Block

function M.block(width, rows)
  -- Most blocks mark no option: they share one empty table until then.
  local lines, hls
  if rows ~= nil and H.new_table ~= nil then
    -- Sized for `rows` rows of one highlight each: no table grown
    -- (and the smaller ones left to the collector) row after row.
    lines, hls = H.new_table(rows, 0), H.new_table(rows * 4, 0)
  else
    lines, hls = {}, {}
  end
  return setmetatable({ lines = lines, hls = hls, option_rows = H.no_rows, width = width }, M.Block)
end

--- LuaJIT's table.new, where it exists.
do
  local ok, new = pcall(require, 'table.new')
  H.new_table = ok and new or nil
end

--- Adds one line made of {text, group} chunks; a line too long is wrapped
--- (`indent` before the following rows), in the group of its first chunk.
--- Returns the rows added.
function M.Block:add(chunks, indent)
  local width = self.width
  local line = #chunks == 1 and chunks[1][1] or ''
  if #chunks ~= 1 then
    for _, c in ipairs(chunks) do
      line = line .. c[1]
    end
  end
  local hls = self.hls
  if #line <= width and not line:find('%c') then
    local row, col = #self.lines, 0
    for _, c in ipairs(chunks) do
      local t = c[1]
      if c[2] ~= nil and #t > 0 then
        H.push_hl(hls, row, col, col + #t, c[2])
      end
      col = col + #t
    end
    self.lines[row + 1] = line
    return 1
  end
  local group = chunks[1] and chunks[1][2]
  indent = indent or ''
  local pieces = M.wrap(line, width, width - #indent)
  for i, p in ipairs(pieces) do
    local l = i == 1 and p or indent .. p
    if group ~= nil then
      H.push_hl(hls, #self.lines, i == 1 and 0 or #indent, #l, group)
    end
    self.lines[#self.lines + 1] = l
  end
  return #pieces
end

--- Adds one line of text in one group (nil: none), as :add({ { t, group } },
--- indent) does, without the tables.
function M.Block:line(t, group, indent)
  if #t <= self.width and not t:find('%c') then
    local row = #self.lines
    if group ~= nil and #t > 0 then
      H.push_hl(self.hls, row, 0, #t, group)
    end
    self.lines[row + 1] = t
    return 1
  end
  return self:add({ { t, group } }, indent)
end

function H.push_hl(hls, row, s, e, group)
  local n = #hls
  hls[n + 1], hls[n + 2], hls[n + 3], hls[n + 4] = row, s, e, group
end

--- Adds possibly multi-line text, every line in `group`, the first one
--- after `prefix`, the others and the wrapped rows after `indent`.
function M.Block:text(str, group, prefix, indent)
  indent = indent or ''
  if type(str) == 'string' and not str:find('%c') then
    -- One line: no split (a table) needed.
    H.text_line(self, str, true, group, prefix, indent)
    return
  end
  for i, l in ipairs(text.split_lines(str)) do
    H.text_line(self, l, i == 1, group, prefix, indent)
  end
end

--- One line of M.Block:text (`first`: the text's first line).
function H.text_line(b, l, first, group, prefix, indent)
  local width = b.width
  local lead = (first and prefix) or indent
  if #l <= width - #lead and not l:find('%c') then
    H.text_row(b, lead, l, first and prefix, group)
    return
  end
  local pieces = M.wrap(l, width - #lead, width - #indent)
  for k, p in ipairs(pieces) do
    H.text_row(b, k == 1 and lead or indent, p, first and k == 1 and prefix, group)
  end
end

--- A row of M.Block:text: `pre` (highlighted as a label when it is the
--- prefix) and `p` in `group`.
function H.text_row(b, pre, p, is_prefix, group)
  local row = #b.lines
  if pre ~= '' and is_prefix then
    H.push_hl(b.hls, row, 0, #pre, 'AcpPromptLabel')
  end
  if group ~= nil and #p > 0 then
    H.push_hl(b.hls, row, #pre, #pre + #p, group)
  end
  b.lines[row + 1] = pre .. p
end

--- Marks the rows added since `from` (a row count) as option `index`.
function M.Block:mark(from, index)
  for row = from + 1, #self.lines do
    H.rows(self)[row] = index
  end
end

--- Appends block `src` to block `dst` (its first `max` lines when given).
function M.append(dst, src, max)
  M.append_rows(dst, src, 0, math.min(#src.lines, max or math.huge))
end

--- Appends rows `first` to `last` - 1 (counted from 0) of block `src` to
--- block `dst`, with their highlights and options.
function M.append_rows(dst, src, first, last)
  local off = #dst.lines - first
  for r = first + 1, last do
    dst.lines[r + off] = src.lines[r]
  end
  local hls, dhls = src.hls, dst.hls
  for i = 1, #hls, 4 do
    local r = hls[i]
    if r >= first and r < last then
      H.push_hl(dhls, r + off, hls[i + 1], hls[i + 2], hls[i + 3])
    end
  end
  for row, i in pairs(src.option_rows) do
    if row > first and row <= last then
      H.rows(dst)[row + off] = i
    end
  end
end

return M
