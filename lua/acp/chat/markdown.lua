--- Markdown highlights of one finished chat message: lines in, highlights
--- out ({row, start_col, end_col, group}, 0-based, end exclusive). No
--- buffer here. acp.chat.window applies them once a message is complete,
--- so that streaming never waits for them: a whole-buffer highlighter
--- (vim.treesitter.start, the markdown syntax) re-parses the growing
--- buffer as it streams, which made streaming many times slower.
---
--- With treesitter's markdown parser (Neovim 0.9+, shipped from 0.10) the
--- message is parsed as a string, fenced code with its language's parser
--- when that one is installed; else a small line-based highlighter marks
--- headings, emphasis, inline code and fenced code blocks.

local M = {}
local H = {}

-- Module definition ==========================================================

--- Messages larger than this are left plain (a bounded cost per message).
M.max_bytes = 64 * 1024

--- Highlights of markdown `lines`; {} when the text is too large or
--- anything fails (the draw path must never raise).
---@param lines string[]
---@return table[]
function M.highlights(lines)
  local n = 0
  for _, l in ipairs(lines) do
    n = n + #l + 1
    if n > M.max_bytes then
      return {}
    end
  end
  if H.treesitter() then
    local ok, hls = pcall(H.ts_highlights, lines)
    if ok then
      return hls
    end
  end
  local ok, hls = pcall(H.line_highlights, lines)
  return ok and hls or {}
end

-- Helper data ================================================================

--- Captures that are not colours.
H.skip = { spell = true, nospell = true, conceal = true, none = true }

-- Helper functionality =======================================================

--- Whether treesitter can parse markdown here (checked once).
function H.treesitter()
  if H.ts_ok == nil then
    local ts = vim.treesitter
    H.ts_ok = vim.fn.has('nvim-0.9') == 1
      and ts ~= nil
      and ts.get_string_parser ~= nil
      and pcall(ts.get_string_parser, '', 'markdown')
      and pcall(ts.query.get, 'markdown', 'highlights')
  end
  return H.ts_ok
end

function H.ts_highlights(lines)
  local ts = vim.treesitter
  local src = table.concat(lines, '\n')
  local parser = ts.get_string_parser(src, 'markdown')
  parser:parse(true)
  local hls = {}
  parser:for_each_tree(function(tree, ltree)
    local lang = ltree:lang()
    local query = ts.query.get(lang, 'highlights')
    if query == nil then
      return
    end
    for id, node in query:iter_captures(tree:root(), src) do
      local name = query.captures[id]
      if not H.skip[name] and name:sub(1, 1) ~= '_' then
        H.add_range(hls, lines, '@' .. name .. '.' .. lang, node:range())
      end
    end
  end)
  return hls
end

--- Adds a highlight over rows sr..er, one item per line.
function H.add_range(hls, lines, group, sr, sc, er, ec)
  for row = sr, er do
    local line = lines[row + 1]
    if line ~= nil then
      local s = row == sr and sc or 0
      local e = row == er and ec or #line
      if e > s then
        hls[#hls + 1] = { row, s, math.min(e, #line), group }
      end
    end
  end
end

--- Without treesitter: headings, fenced code, **bold**, *italic*, `code`.
function H.line_highlights(lines)
  local hls, fence = {}, nil
  for i, line in ipairs(lines) do
    local row = i - 1
    local ticks = line:match('^%s*(```+)') or line:match('^%s*(~~~+)')
    if fence ~= nil then
      if ticks ~= nil and ticks:sub(1, 1) == fence:sub(1, 1) and #ticks >= #fence and line:match('^%s*[`~]+%s*$') then
        fence = nil
        hls[#hls + 1] = { row, 0, #line, 'AcpChatMeta' }
      elseif #line > 0 then
        hls[#hls + 1] = { row, 0, #line, 'AcpChatCode' }
      end
    elseif ticks ~= nil then
      fence = ticks
      hls[#hls + 1] = { row, 0, #line, 'AcpChatMeta' }
    elseif line:match('^#+%s') and #line:match('^#+') <= 6 then
      hls[#hls + 1] = { row, 0, #line, 'AcpChatHeading' }
    else
      H.inline(hls, row, line)
    end
  end
  return hls
end

function H.inline(hls, row, line)
  local pos = 1
  while pos <= #line do
    local s, e = line:find('`[^`]+`', pos)
    local bs, be = line:find('%*%*[^%*]+%*%*', pos)
    local is, ie = line:find('%f[%*]%*[^%*%s][^%*]-%*', pos)
    -- The first of the three, in that order of precedence.
    local best, group = nil, nil
    for _, m in ipairs({ { s, e, 'AcpChatCode' }, { bs, be, 'AcpChatBold' }, { is, ie, 'AcpChatItalic' } }) do
      if m[1] ~= nil and (best == nil or m[1] < best[1]) then
        best, group = m, m[3]
      end
    end
    if best == nil then
      return
    end
    hls[#hls + 1] = { row, best[1] - 1, best[2], group }
    pos = best[2] + 1
  end
end

return M
