--- Markdown highlights of one finished chat message: lines in, highlights
--- out ({row, start_col, end_col, group}, 0-based, end exclusive). No
--- buffer here. acp.chat.window applies them once a message is complete,
--- so that streaming never waits for them: a whole-buffer highlighter
--- (vim.treesitter.start, the markdown syntax) re-parses the growing
--- buffer as it streams, which made streaming many times slower.
---
--- With treesitter's markdown parser (Neovim 0.10+) the message's blocks
--- are parsed as a string, fenced code with its language's parser when
--- that one is installed, inline markup by line; else a small line-based
--- highlighter marks headings, emphasis, inline code and fenced code.

local M = {}
local H = {}

-- Module definition ==========================================================

--- Messages larger than this are left plain (a bounded cost per message).
M.max_bytes = 64 * 1024
--- Messages up to this size get their block structure from treesitter's
--- markdown parser (about 2 ms per KiB); larger ones are read by line.
M.max_ts_bytes = 8 * 1024

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
  if n <= M.max_ts_bytes and H.treesitter() then
    local ok, hls = pcall(H.ts_highlights, lines)
    if ok then
      return hls
    end
  end
  local ok, hls = pcall(H.line_highlights, lines)
  return ok and hls or {}
end

--- Loads the treesitter markdown parser and its query now (about 100 ms
--- on Neovim 0.10, once), so that the first highlights drawn later do
--- not pause Neovim. Never raises.
function M.warm()
  if H.warmed then
    return
  end
  H.warmed = true
  pcall(M.highlights, { '# acp', '', 'warm up' })
end

-- Helper data ================================================================

--- Captures that are not colours.
H.skip = { spell = true, nospell = true, conceal = true, none = true }

-- Helper functionality =======================================================

--- Whether treesitter can parse markdown here (checked once): Neovim 0.10+,
--- where parse() without a range leaves the injections alone.
function H.treesitter()
  if H.ts_ok == nil then
    local ts = vim.treesitter
    H.ts_ok = vim.fn.has('nvim-0.10') == 1
      and ts ~= nil
      and pcall(ts.get_string_parser, '', 'markdown')
      and pcall(ts.query.get, 'markdown', 'highlights')
  end
  return H.ts_ok
end

--- The block structure by treesitter (headings, lists, quotes, code
--- blocks), each fenced code block by its language's parser, and the
--- inline markup of the other lines by line. Parsing every paragraph with
--- markdown_inline (the injection) costs hundreds of ms for 15 KiB.
function H.ts_highlights(lines)
  local ts = vim.treesitter
  local src = table.concat(lines, '\n')
  local tree = ts.get_string_parser(src, 'markdown'):parse()[1]
  local query = ts.query.get('markdown', 'highlights')
  local hls, code_rows = {}, {}
  for id, node in query:iter_captures(tree:root(), src) do
    local name = query.captures[id]
    if not H.skip[name] and name:sub(1, 1) ~= '_' then
      H.add_range(hls, lines, '@' .. name .. '.markdown', node:range())
    end
    if node:type() == 'fenced_code_block' then
      H.code_block(hls, lines, node, src, code_rows)
    end
  end
  for i, line in ipairs(lines) do
    if not code_rows[i - 1] then
      H.inline(hls, i - 1, line)
    end
  end
  return hls
end

--- Highlights the content of fenced code block `node` with the parser of
--- its language, when there is one; marks its rows as code.
function H.code_block(hls, lines, node, src, code_rows)
  local sr, _, er = node:range()
  for row = sr, er do
    code_rows[row] = true
  end
  local info, content
  for child in node:iter_children() do
    if child:type() == 'info_string' then
      for c in child:iter_children() do
        if c:type() == 'language' then
          info = H.ts_text(c, src)
        end
      end
    elseif child:type() == 'code_fence_content' then
      content = child
    end
  end
  if info == nil or content == nil then
    return
  end
  local cs, _, ce, cec = content:range()
  local last = cec == 0 and ce - 1 or ce
  local code_lines = {}
  for row = cs, last do
    code_lines[#code_lines + 1] = lines[row + 1] or ''
  end
  H.code(hls, code_lines, info, cs)
end

--- Highlights `code_lines` (at rows from `offset`) with the treesitter
--- parser of language `info` (a fence's info word); false when there is
--- none (Neovim before 0.10, or no such parser installed).
function H.code(hls, code_lines, info, offset)
  local ts = vim.treesitter
  if vim.fn.has('nvim-0.10') ~= 1 or ts == nil or info == nil or info == '' then
    return false
  end
  local lang = ts.language.get_lang(info) or info
  local ok, parser = pcall(ts.get_string_parser, '', lang)
  local qok, query = pcall(ts.query.get, lang, 'highlights')
  if not ok or parser == nil or not qok or query == nil then
    return false
  end
  local code = table.concat(code_lines, '\n')
  local ctree = ts.get_string_parser(code, lang):parse()[1]
  for id, n in query:iter_captures(ctree:root(), code) do
    local name = query.captures[id]
    if not H.skip[name] and name:sub(1, 1) ~= '_' then
      local a, b, c, d = n:range()
      H.add_range(hls, code_lines, '@' .. name .. '.' .. lang, a, b, c, d, offset)
    end
  end
  return true
end

function H.ts_text(node, src)
  return vim.treesitter.get_node_text(node, src)
end

--- Adds a highlight over rows sr..er of `lines`, one item per line, at
--- rows shifted by `offset`.
function H.add_range(hls, lines, group, sr, sc, er, ec, offset)
  for row = sr, er do
    local line = lines[row + 1]
    if line ~= nil then
      local s = row == sr and sc or 0
      local e = row == er and ec or #line
      if e > s then
        hls[#hls + 1] = { row + (offset or 0), s, math.min(e, #line), group }
      end
    end
  end
end

--- By line: headings, fenced code (in its language where treesitter has
--- its parser), **bold**, *italic*, `code`.
function H.line_highlights(lines)
  local hls, fence, info, code = {}, nil, nil, nil
  for i, line in ipairs(lines) do
    local row = i - 1
    local ticks = line:match('^%s*(```+)') or line:match('^%s*(~~~+)')
    if fence ~= nil then
      if ticks ~= nil and ticks:sub(1, 1) == fence:sub(1, 1) and #ticks >= #fence and line:match('^%s*[`~]+%s*$') then
        fence = nil
        hls[#hls + 1] = { row, 0, #line, 'AcpChatMeta' }
        local ok, done = pcall(H.code, hls, code.lines, info, code.row)
        if not (ok and done) then
          for j, l in ipairs(code.lines) do
            if #l > 0 then
              hls[#hls + 1] = { code.row + j - 1, 0, #l, 'AcpChatCode' }
            end
          end
        end
      else
        code.lines[#code.lines + 1] = line
      end
    elseif ticks ~= nil then
      fence, code = ticks, { row = row + 1, lines = {} }
      info = line:match('^%s*[`~]+%s*([%w_+#.-]+)')
      hls[#hls + 1] = { row, 0, #line, 'AcpChatMeta' }
    elseif line:match('^#+%s') and #line:match('^#+') <= 6 then
      hls[#hls + 1] = { row, 0, #line, 'AcpChatHeading' }
    else
      H.inline(hls, row, line)
    end
  end
  -- A fence left open: the rest is code.
  for j, l in ipairs(fence and code.lines or {}) do
    if #l > 0 then
      hls[#hls + 1] = { code.row + j - 1, 0, #l, 'AcpChatCode' }
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
