--- Context for prompts: what the person points the agent at (a selection,
--- a file, a buffer, diagnostics, the quickfix list), staged with :AcpAdd
--- or named in the chat input (`@path`, `#buffer`, `#selection`,
--- `#diagnostics`), and turned into the ACP content blocks the agent's
--- promptCapabilities allow (`:help acp-context`).
---
--- A selection and the quickfix list are copied when they are staged (the
--- person moves on); a file, a buffer and diagnostics are read when the
--- prompt is sent (a loaded buffer with its unsaved changes, else the disk).

local compat = require('acp.compat')
local state = require('acp.state')

local M = {}
local H = {}

-- Module definition ==========================================================

--- Items staged for the next prompt (`:AcpAdd`, `require('acp').add_context`).
---@type table[]
M.staged = {}

--- Items staged at most (a new one past this replaces the oldest).
M.max_staged = 32
--- Text of one item sent at most (bytes): a larger file is linked, not embedded.
M.max_text = 512 * 1024
--- Image size sent at most (bytes, before base64).
M.max_image = 4 * 1024 * 1024
--- Bytes of text and images in one prompt's blocks at most (the broker
--- refuses more than 16 MiB).
M.max_total = 8 * 1024 * 1024
--- Project files `@` completes at most.
M.max_files = 20000

--- Checks and completes a context item (`:help acp-context-items`); a
--- selection and a quickfix list are copied now. Returns the item, or nil
--- and an `(acp)` message.
---@param item table
---@return table|nil item
---@return string|nil err
function M.normalize(item)
  if type(item) ~= 'table' then
    return nil, '(acp) a context item should be a table, got ' .. vim.inspect(item)
  end
  local kind = item.kind
  local fn = H.normalize[kind]
  if fn == nil then
    return nil,
      ("(acp) context kind should be 'selection', 'file', 'buffer', 'diagnostics' or 'quickfix', got %s"):format(
        vim.inspect(kind)
      )
  end
  return fn(item)
end

--- Stages `item` for the next prompt (what :AcpAdd does).
---@param item table
---@return boolean ok
---@return string|nil err
function M.add(item)
  local it, err = M.normalize(item)
  if it == nil then
    return false, err
  end
  local label = M.label(it)
  for i, old in ipairs(M.staged) do
    if M.label(old) == label then
      -- Staged again: the newer copy (a selection's text) wins.
      table.remove(M.staged, i)
      break
    end
  end
  if #M.staged >= M.max_staged then
    table.remove(M.staged, 1)
  end
  M.staged[#M.staged + 1] = it
  state.try_emit('context')
  return true
end

--- The staged items, cleared (they go with the prompt being sent).
---@return table[]
function M.take()
  local items = M.staged
  M.staged = {}
  if #items > 0 then
    state.try_emit('context')
  end
  return items
end

--- Drops the staged items.
function M.clear()
  M.take()
end

--- A short name of an item for the person ("selection src/a.c:3-7").
---@param item table
---@return string
function M.label(item)
  local k = item.kind
  if k == 'selection' then
    return ('selection %s:%d-%d'):format(H.display(item), item.first, item.last)
  elseif k == 'file' then
    return 'file ' .. H.rel(item.path)
  elseif k == 'buffer' then
    return 'buffer ' .. H.display(item)
  elseif k == 'diagnostics' then
    return 'diagnostics ' .. H.display(item)
  end
  return ('quickfix (%d)'):format(#item.entries)
end

--- One line naming the staged items, or nil when none is.
---@return string|nil
function M.summary()
  if #M.staged == 0 then
    return nil
  end
  local names = {}
  for _, it in ipairs(M.staged) do
    names[#names + 1] = M.label(it)
  end
  return 'context: ' .. table.concat(names, ' · ')
end

--- The context items a chat input names: `@path` (a file of the project),
--- `#buffer`, `#selection`, `#diagnostics` (of the person's code buffer,
--- `buf`). Returns the items, or nil and an `(acp)` message.
---@param input string
---@param buf integer|nil the buffer `#` words refer to
---@return table[]|nil items
---@return string|nil err
function M.from_input(input, buf)
  local items = {}
  local root = H.root()
  for path in (' ' .. input):gmatch('%s@([^%s]+)') do
    local abs = H.resolve(root, path)
    -- "look at @src/a.c." : the sentence's punctuation is not the name.
    while abs == nil and path:match('[%.,;:!%?%)%]\'"]$') do
      path = path:sub(1, -2)
      abs = H.resolve(root, path)
    end
    if abs ~= nil then
      items[#items + 1] = { kind = 'file', path = abs }
    end
  end
  for word in (' ' .. input):gmatch('%s#(%a+)') do
    if word == 'buffer' or word == 'selection' or word == 'diagnostics' then
      local target = buf or M.code_buffer()
      if target == nil then
        return nil, ('(acp) #%s: no code buffer is open'):format(word)
      end
      local item
      if word == 'selection' then
        local first, last = H.last_selection(target)
        if first == nil then
          return nil, ('(acp) #selection: %s has no selection (select lines with V first)'):format(H.display({ buf = target }))
        end
        item = { kind = 'selection', buf = target, first = first, last = last }
      else
        item = { kind = word, buf = target }
      end
      local it, err = M.normalize(item)
      if it == nil then
        return nil, err
      end
      items[#items + 1] = it
    end
  end
  return items
end

--- The ACP content blocks of `items` for an agent offering `caps`
--- (promptCapabilities; nil: the baseline, text and resource_link):
--- a file or buffer is an embedded `resource` with its text when
--- `embeddedContext` is offered, else a `resource_link`; an image file an
--- `image` when `image` is offered; a selection its text with its path and
--- line range (embedded, else a `resource_link` and a text block);
--- diagnostics and the quickfix list a text block. Returns the blocks and
--- the notes for the person (items linked rather than embedded, skipped).
---@param items table[]
---@param caps table|nil
---@return table[] blocks
---@return string[] notes
function M.blocks(items, caps)
  caps = type(caps) == 'table' and caps or {}
  local ctx = {
    blocks = {},
    notes = {},
    total = 0,
    embed = caps.embeddedContext == true,
    image = caps.image == true,
    seen = {},
  }
  for _, it in ipairs(items) do
    local label = M.label(it)
    if not ctx.seen[label] then
      ctx.seen[label] = true
      local ok, err = pcall(H.to_blocks[it.kind], ctx, it)
      if not ok then
        ctx.notes[#ctx.notes + 1] = ('%s not sent: %s'):format(label, tostring(err))
      end
    end
  end
  return ctx.blocks, ctx.notes
end

--- The blocks of a prompt to agent `name`: the staged items, then
--- `items`. The staged items stay staged until `M.take()` (once the prompt
--- went out). Returns the blocks (nil when there are none) and the notes.
---@param name string
---@param items table[]|nil
---@return table[]|nil blocks
---@return string[] notes
function M.build(name, items)
  local all = {}
  for _, it in ipairs(M.staged) do
    all[#all + 1] = it
  end
  for _, it in ipairs(items or {}) do
    all[#all + 1] = it
  end
  if #all == 0 then
    return nil, {}
  end
  local blocks, notes = M.blocks(all, M.caps(name))
  return #blocks > 0 and blocks or nil, notes
end

--- The promptCapabilities agent `name` offered (nil before it is ready).
---@param name string
---@return table|nil
function M.caps(name)
  local a = state.agents[name]
  local info = a and a.info
  local ac = info and info.agentCapabilities
  local pc = type(ac) == 'table' and ac.promptCapabilities or nil
  return type(pc) == 'table' and pc or nil
end

--- The buffer of the person's code the `#` words and `:AcpAdd buffer` mean:
--- the current buffer when it is a file buffer, else that of the window
--- the person was last in (`M.last_win`), else of the first such window of
--- the tab page.
---@return integer|nil
function M.code_buffer()
  local cur = vim.api.nvim_get_current_buf()
  if H.is_code(cur) then
    return cur
  end
  local win = M.last_win
  if win ~= nil and vim.api.nvim_win_is_valid(win) and H.is_code(vim.api.nvim_win_get_buf(win)) then
    return vim.api.nvim_win_get_buf(win)
  end
  for _, w in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    local b = vim.api.nvim_win_get_buf(w)
    if not compat.is_float(w) and H.is_code(b) then
      return b
    end
  end
  return nil
end

--- The last window that showed a code buffer (set by the chat, which
--- records the window the person leaves).
---@type integer|nil
M.last_win = nil

--- Records `win` as the person's code window when it shows a code buffer.
---@param win integer
function M.remember_win(win)
  if vim.api.nvim_win_is_valid(win) and not compat.is_float(win) and H.is_code(vim.api.nvim_win_get_buf(win)) then
    M.last_win = win
  end
end

--- Paths of the project's files, relative to `root`, for `@` completion:
--- `git ls-files` (tracked and untracked, .gitignore respected) in a git
--- work tree, else a bounded walk that skips hidden directories. Cached
--- for a few seconds.
---@param root string
---@return string[]
function M.project_files(root)
  local now = compat.now_ms()
  local c = H.files_cache
  if c and c.root == root and now - c.t < 5000 then
    return c.list
  end
  local list = H.git_files(root) or H.walk(root)
  H.files_cache = { root = root, t = now, list = list }
  return list
end

--- Completion candidates for `@lead` (words with the `@`).
---@param lead string the text after `@`
---@return string[]
function M.complete_files(lead)
  local out = {}
  local low = lead:lower()
  for _, p in ipairs(M.project_files(H.root())) do
    if p:sub(1, #lead) == lead then
      out[#out + 1] = '@' .. p
      if #out >= 2000 then
        break
      end
    end
  end
  if #out == 0 and lead ~= '' then
    -- No prefix match: any path containing it (case-insensitive).
    for _, p in ipairs(M.project_files(H.root())) do
      if p:lower():find(low, 1, true) then
        out[#out + 1] = '@' .. p
        if #out >= 500 then
          break
        end
      end
    end
  end
  return out
end

--- The `#` words the chat input understands.
M.words = { 'buffer', 'selection', 'diagnostics' }

--- Base64 of `s` (vim.base64 on Neovim 0.10+, else in Lua).
---@param s string
---@return string
function M.base64(s)
  if vim.base64 ~= nil then
    return vim.base64.encode(s)
  end
  return H.base64(s)
end

-- Helper data ================================================================

H.images = {
  png = 'image/png',
  jpg = 'image/jpeg',
  jpeg = 'image/jpeg',
  gif = 'image/gif',
  webp = 'image/webp',
}

H.b64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'

-- Helper functionality =======================================================

H.normalize = {}

function H.normalize.selection(item)
  local buf, err = H.buf(item.buf)
  if buf == nil then
    return nil, err
  end
  local first, last = tonumber(item.first), tonumber(item.last)
  local n = vim.api.nvim_buf_line_count(buf)
  if first == nil or last == nil or first < 1 or last < first or last > n then
    return nil, ('(acp) selection: lines %s-%s are not in the buffer (1-%d)'):format(
      tostring(item.first),
      tostring(item.last),
      n
    )
  end
  first, last = math.floor(first), math.floor(last)
  return {
    kind = 'selection',
    buf = buf,
    path = H.buf_path(buf),
    first = first,
    last = last,
    text = table.concat(vim.api.nvim_buf_get_lines(buf, first - 1, last, true), '\n'),
    filetype = vim.bo[buf].filetype,
  }
end

function H.normalize.file(item)
  if type(item.path) ~= 'string' or item.path == '' then
    return nil, '(acp) file: path should be a non-empty string'
  end
  -- Relative to the project, else to the current directory (what
  -- :AcpAdd file completes).
  local abs = H.resolve(H.root(), item.path) or H.resolve(vim.fn.getcwd(), item.path)
  if abs == nil then
    return nil, ('(acp) file: %s is not a readable file'):format(item.path)
  end
  return { kind = 'file', path = abs }
end

function H.normalize.buffer(item)
  local buf, err = H.buf(item.buf)
  if buf == nil then
    return nil, err
  end
  return { kind = 'buffer', buf = buf, path = H.buf_path(buf) }
end

function H.normalize.diagnostics(item)
  local buf, err = H.buf(item.buf)
  if buf == nil then
    return nil, err
  end
  return { kind = 'diagnostics', buf = buf, path = H.buf_path(buf) }
end

function H.normalize.quickfix(item)
  local entries = {}
  local list = item.entries
  if list == nil then
    list = vim.fn.getqflist()
  end
  for _, e in ipairs(list) do
    local name = e.filename
    if name == nil and (e.bufnr or 0) > 0 then
      name = vim.api.nvim_buf_get_name(e.bufnr)
    end
    entries[#entries + 1] = {
      path = name ~= nil and name ~= '' and H.rel(vim.fn.fnamemodify(name, ':p')) or nil,
      lnum = e.lnum or 0,
      col = e.col or 0,
      text = compat.str(e.text) or '',
      type = compat.str(e.type) or '',
    }
  end
  if #entries == 0 then
    return nil, '(acp) quickfix: the quickfix list is empty'
  end
  return { kind = 'quickfix', entries = entries }
end

H.to_blocks = {}

function H.to_blocks.file(ctx, it)
  H.file_blocks(ctx, it.path, nil)
end

function H.to_blocks.buffer(ctx, it)
  if not vim.api.nvim_buf_is_valid(it.buf) then
    error('the buffer was closed', 0)
  end
  H.file_blocks(ctx, it.path, it.buf)
end

function H.to_blocks.selection(ctx, it)
  local name = ('%s:%d-%d'):format(it.path and H.rel(it.path) or H.display(it), it.first, it.last)
  local uri = ('%s#L%d-%d'):format(H.uri(it), it.first, it.last)
  H.spend(ctx, #it.text)
  if ctx.embed then
    H.push(ctx, { type = 'resource', resource = { uri = uri, text = it.text, mimeType = H.mime(it.path) } })
    return
  end
  if it.path ~= nil then
    H.push(ctx, { type = 'resource_link', uri = uri, name = name })
  end
  H.push(ctx, { type = 'text', text = ('%s (lines %d-%d):\n```%s\n%s\n```'):format(
    it.path and H.rel(it.path) or H.display(it),
    it.first,
    it.last,
    it.filetype or '',
    it.text
  ) })
end

function H.to_blocks.diagnostics(ctx, it)
  if not vim.api.nvim_buf_is_valid(it.buf) then
    error('the buffer was closed', 0)
  end
  local name = it.path and H.rel(it.path) or H.display(it)
  local lines = {}
  for _, d in ipairs(vim.diagnostic.get(it.buf)) do
    local sev = vim.diagnostic.severity[d.severity] or '?'
    lines[#lines + 1] = ('%s:%d:%d: %s: %s%s'):format(
      name,
      d.lnum + 1,
      d.col + 1,
      tostring(sev):lower(),
      tostring(d.message),
      d.source and (' [%s]'):format(d.source) or ''
    )
  end
  local body = #lines > 0 and table.concat(lines, '\n') or '(none)'
  local text = ('Diagnostics of %s:\n%s'):format(name, body)
  H.spend(ctx, #text)
  H.push(ctx, { type = 'text', text = text })
end

function H.to_blocks.quickfix(ctx, it)
  local lines = {}
  for _, e in ipairs(it.entries) do
    local where = e.path and ('%s:%d:%d: '):format(e.path, e.lnum, e.col) or ''
    local kind = e.type ~= '' and (e.type .. ': ') or ''
    lines[#lines + 1] = where .. kind .. e.text
  end
  local text = 'Quickfix list:\n' .. table.concat(lines, '\n')
  H.spend(ctx, #text)
  H.push(ctx, { type = 'text', text = text })
end

--- The blocks of a file (from `buf` when given or loaded, else the disk).
function H.file_blocks(ctx, path, buf)
  if path == nil then
    -- A buffer without a file: only its text can go.
    local text = table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), '\n')
    H.spend(ctx, #text)
    if ctx.embed then
      H.push(ctx, { type = 'resource', resource = { uri = H.uri({ buf = buf }), text = text } })
    else
      H.push(ctx, { type = 'text', text = ('%s:\n```\n%s\n```'):format(H.display({ buf = buf }), text) })
    end
    return
  end
  local uri, name = vim.uri_from_fname(path), H.rel(path)
  local link = { type = 'resource_link', uri = uri, name = name }
  local mime = H.images[(path:match('%.(%w+)$') or ''):lower()]
  local st = compat.uv.fs_stat(path)
  if st ~= nil then
    link.size = st.size
  end
  if mime ~= nil then
    link.mimeType = mime
    if ctx.image and st ~= nil and st.size <= M.max_image and ctx.total + st.size * 4 / 3 <= M.max_total then
      local data = compat.read_file(path, M.max_image)
      if data ~= nil then
        local b64 = M.base64(data)
        H.spend(ctx, #b64)
        H.push(ctx, { type = 'image', data = b64, mimeType = mime, uri = uri })
        return
      end
    end
    H.push(ctx, link)
    return
  end
  if ctx.embed then
    local text = H.text_of(path, buf)
    if text ~= nil and #text <= M.max_text and ctx.total + #text <= M.max_total then
      H.spend(ctx, #text)
      H.push(ctx, { type = 'resource', resource = { uri = uri, text = text, mimeType = H.mime(path) } })
      return
    end
    ctx.notes[#ctx.notes + 1] = ('%s is linked, not embedded (too large or not text)'):format(name)
  end
  H.push(ctx, link)
end

function H.push(ctx, block)
  ctx.blocks[#ctx.blocks + 1] = block
end

function H.spend(ctx, n)
  if ctx.total + n > M.max_total then
    error(('the prompt would hold more than %d bytes of context'):format(M.max_total), 0)
  end
  ctx.total = ctx.total + n
end

--- The text of a file: its loaded buffer (unsaved changes included) when
--- there is one, else the disk; nil when it is not text or too large.
function H.text_of(path, buf)
  if buf == nil then
    local b = vim.fn.bufnr(path)
    if b > 0 and vim.api.nvim_buf_is_loaded(b) then
      buf = b
    end
  end
  if buf ~= nil then
    local lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
    local text = table.concat(lines, '\n')
    if vim.bo[buf].eol and #lines > 0 and text ~= '' then
      text = text .. '\n'
    end
    return text
  end
  local data = compat.read_file(path, M.max_text)
  if data == nil or data:find('\0', 1, true) then
    return nil
  end
  return data
end

--- A mimeType for a text file, when its extension says one plainly.
function H.mime(path)
  local ext = path and (path:match('%.(%w+)$') or ''):lower()
  local known = { md = 'text/markdown', json = 'application/json', html = 'text/html', css = 'text/css' }
  if ext ~= nil and known[ext] then
    return known[ext]
  end
  return 'text/plain'
end

function H.buf(b)
  if b == nil or b == 0 then
    b = vim.api.nvim_get_current_buf()
  end
  if type(b) ~= 'number' or not vim.api.nvim_buf_is_valid(b) then
    return nil, '(acp) context: not a valid buffer: ' .. vim.inspect(b)
  end
  return b
end

--- The absolute path of a buffer's file, or nil (no name, or not a file).
function H.buf_path(buf)
  local name = vim.api.nvim_buf_get_name(buf)
  if name == '' or vim.bo[buf].buftype ~= '' then
    return nil
  end
  return vim.fn.fnamemodify(name, ':p')
end

--- A buffer that holds the person's code: a named, listed file buffer.
function H.is_code(buf)
  return vim.api.nvim_buf_is_valid(buf)
    and vim.bo[buf].buftype == ''
    and vim.api.nvim_buf_get_name(buf) ~= ''
    and not vim.api.nvim_buf_get_name(buf):match('^acp://')
end

function H.uri(it)
  if it.path ~= nil then
    return vim.uri_from_fname(it.path)
  end
  return ('untitled:buffer-%d'):format(it.buf or 0)
end

function H.display(it)
  if it.path ~= nil then
    return H.rel(it.path)
  end
  local p = it.buf and H.buf_path(it.buf)
  return p and H.rel(p) or ('[buffer %d]'):format(it.buf or 0)
end

--- The project root (the current agent's session directory, else the
--- project of the current directory).
function H.root()
  local a = state.agent()
  if a ~= nil and type(a.cwd) == 'string' then
    return a.cwd
  end
  return (require('acp.config').project_dir())
end

--- `path` relative to the project root when inside it, else with `~`.
function H.rel(path)
  local root = H.root()
  if root ~= nil and path:sub(1, #root + 1) == root .. '/' then
    return path:sub(#root + 2)
  end
  return vim.fn.fnamemodify(path, ':~')
end

--- The absolute path of a readable file `path` (relative to root), or nil.
function H.resolve(root, path)
  if path:sub(1, 1) == '~' then
    path = vim.fn.expand(path)
  end
  local abs = path:sub(1, 1) == '/' and path or compat.join(root, path)
  abs = vim.fn.fnamemodify(abs, ':p')
  if vim.fn.filereadable(abs) ~= 1 then
    return nil
  end
  return abs
end

--- Lines of the last visual selection in `buf` (its '< and '> marks).
function H.last_selection(buf)
  local s = vim.api.nvim_buf_get_mark(buf, '<')
  local e = vim.api.nvim_buf_get_mark(buf, '>')
  if s[1] == 0 or e[1] == 0 then
    return nil
  end
  local n = vim.api.nvim_buf_line_count(buf)
  local first, last = math.min(s[1], e[1]), math.min(math.max(s[1], e[1]), n)
  if first > n then
    return nil
  end
  return first, last
end

function H.git_files(root)
  if vim.fn.executable('git') ~= 1 or vim.fn.isdirectory(root) ~= 1 then
    return nil
  end
  local out = vim.fn.systemlist({ 'git', '-C', root, 'ls-files', '--cached', '--others', '--exclude-standard' })
  if vim.v.shell_error ~= 0 then
    return nil
  end
  local list, seen = {}, {}
  for _, p in ipairs(out) do
    if p ~= '' and not seen[p] then
      seen[p] = true
      list[#list + 1] = p
      if #list >= M.max_files then
        break
      end
    end
  end
  return list
end

--- Files under root, breadth first, hidden directories and common build
--- output skipped, at most M.max_files entries and 8 levels.
function H.walk(root)
  local list, queue, head = {}, { { dir = root, rel = '', depth = 0 } }, 1
  local skip = { node_modules = true, build = true, target = true, dist = true }
  local visited = 0
  while head <= #queue and #list < M.max_files and visited < 5000 do
    local d = queue[head]
    head = head + 1
    visited = visited + 1
    local h = compat.uv.fs_scandir(d.dir)
    while h do
      local name, typ = compat.uv.fs_scandir_next(h)
      if name == nil then
        break
      end
      local rel = d.rel == '' and name or (d.rel .. '/' .. name)
      if typ == 'directory' then
        if name:sub(1, 1) ~= '.' and not skip[name] and d.depth < 8 then
          queue[#queue + 1] = { dir = d.dir .. '/' .. name, rel = rel, depth = d.depth + 1 }
        end
      elseif typ == 'file' or typ == 'link' then
        list[#list + 1] = rel
        if #list >= M.max_files then
          break
        end
      end
    end
  end
  table.sort(list)
  return list
end

function H.base64(s)
  local out, b64 = {}, H.b64
  for i = 1, #s, 3 do
    local a, b, c = s:byte(i, i + 2)
    local n = a * 65536 + (b or 0) * 256 + (c or 0)
    local c1 = math.floor(n / 262144) % 64
    local c2 = math.floor(n / 4096) % 64
    local c3 = math.floor(n / 64) % 64
    local c4 = n % 64
    out[#out + 1] = b64:sub(c1 + 1, c1 + 1)
      .. b64:sub(c2 + 1, c2 + 1)
      .. (b and b64:sub(c3 + 1, c3 + 1) or '=')
      .. (c and b64:sub(c4 + 1, c4 + 1) or '=')
  end
  return table.concat(out)
end

return M
