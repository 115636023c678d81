--- :AcpLog: the decision audit log ($XDG_STATE_HOME/acp-broker/audit.jsonl)
--- as a table — time, agent, decision, by, rule, title — of the current
--- project's decisions (all projects with `:AcpLog!`), oldest first, the
--- cursor on the newest. <CR> or K on a row shows its line of JSON as
--- written, key by key. Reads at most the last READ_MAX bytes of the file.

local compat = require('acp.compat')

local M = {}
local H = {}

H.READ_MAX = 2 * 1024 * 1024 -- bytes read from the end of the log
H.ROWS_MAX = 5000 -- rows shown (the newest)
H.FILETYPE = 'acp-log'

--- The rows of each table buffer: buf -> { [line] = raw JSON }.
H.raw = {}

--- The last lines of the file at path (at most READ_MAX bytes; a line cut
--- by that limit is dropped), or nil when it cannot be read.
---@param path string
---@return string[]|nil
function H.tail_lines(path)
  local f = io.open(path, 'rb')
  if not f then
    return nil
  end
  local size = f:seek('end')
  local from = math.max(0, size - H.READ_MAX)
  f:seek('set', from)
  local data = f:read('*a') or ''
  f:close()
  local lines = vim.split(data, '\n', { plain = true })
  if from > 0 then
    table.remove(lines, 1)
  end
  return lines
end

--- A time for the table, as the log has it (UTC): "HH:MM:SS" today,
--- else "YYYY-MM-DD HH:MM".
function H.time(ts, today)
  ts = compat.str(ts) or ''
  local date, clock = ts:match('^(%d%d%d%d%-%d%d%-%d%d)T(%d%d:%d%d:%d%d)')
  if not date then
    return ts
  end
  return date == today and clock or (date .. ' ' .. clock:sub(1, 5))
end

--- One cell: a string without line breaks, cut to width display cells.
function H.cell(v, width)
  local s = compat.str(v) or ''
  s = s:gsub('[%c]', ' ')
  if width and vim.fn.strdisplaywidth(s) > width then
    local cut = s
    while #cut > 0 and vim.fn.strdisplaywidth(cut) > width - 1 do
      cut = vim.fn.strcharpart(cut, 0, vim.fn.strchars(cut) - 1)
    end
    s = cut .. '…'
  end
  return s
end

function H.pad(s, width)
  return s .. string.rep(' ', width - vim.fn.strdisplaywidth(s))
end

--- The decoded entries of the log for root (nil: every project): a list
--- of {raw, v}, oldest first, at most ROWS_MAX; and how many lines were read.
function H.entries(lines, root)
  local out, total = {}, 0
  for _, line in ipairs(lines) do
    if line:find('%S') then
      total = total + 1
      local ok, v = pcall(vim.fn.json_decode, line)
      if ok and type(v) == 'table' and (root == nil or v.root == root) then
        out[#out + 1] = { raw = line, v = v }
      end
    end
  end
  if #out > H.ROWS_MAX then
    out = { unpack(out, #out - H.ROWS_MAX + 1) }
  end
  return out, total
end

--- The table's lines for entries: a header, the column names, one row per
--- entry (raw JSON by line number in rows).
function H.render(entries, root, width)
  local today = os.date('!%Y-%m-%d') -- the log's times are UTC
  local cols = {
    { name = 'time', max = 16 },
    { name = 'agent', max = 16 },
    { name = 'decision', max = 8 },
    { name = 'by', max = 12 },
    { name = 'rule', max = 36 },
    { name = 'title' },
  }
  local cells = {}
  for i, e in ipairs(entries) do
    local v = e.v
    cells[i] = {
      H.cell(H.time(v.ts, today), cols[1].max),
      H.cell(v.agent, cols[2].max),
      H.cell(v.decision, cols[3].max),
      H.cell(v.by, cols[4].max),
      H.cell(v.rule, cols[5].max),
    }
  end
  local widths = {}
  for c = 1, 5 do
    widths[c] = #cols[c].name
    for _, row in ipairs(cells) do
      widths[c] = math.max(widths[c], vim.fn.strdisplaywidth(row[c]))
    end
  end
  local used = 0
  for c = 1, 5 do
    used = used + widths[c] + 2
  end
  local title_w = math.max(20, width - used)
  local lines = {
    root and ('Decisions in %s (%d) · <CR>/K: JSON · q: close · :AcpLog! all projects'):format(
      vim.fn.fnamemodify(root, ':t'),
      #entries
    ) or ('Decisions in every project (%d) · <CR>/K: JSON · q: close'):format(#entries),
  }
  local function row(values)
    local parts = {}
    for c = 1, 5 do
      parts[c] = H.pad(values[c], widths[c])
    end
    parts[6] = values[6]
    return (table.concat(parts, '  ')):gsub('%s+$', '')
  end
  lines[2] = row({ 'time', 'agent', 'decision', 'by', 'rule', 'title' })
  local rows = {}
  for i, e in ipairs(entries) do
    local r = cells[i]
    r[6] = H.cell(e.v.title or e.v.command, title_w)
    lines[#lines + 1] = row(r)
    rows[#lines] = e.raw
  end
  if #entries == 0 then
    lines[#lines + 1] = root and '(no decision in this project yet)' or '(no decision yet)'
  end
  return lines, rows
end

--- Opens (or refreshes) the table of the decisions in project root (its
--- absolute path as the log has it); nil: every project (`:AcpLog!`).
---@param root string|nil
function M.open(root)
  local path = compat.state_path('audit.jsonl')
  local lines = vim.fn.filereadable(path) == 1 and H.tail_lines(path) or nil
  if lines == nil then
    vim.api.nvim_echo({ { ('acp: no decision logged yet (%s does not exist)'):format(vim.fn.fnamemodify(path, ':~')) } }, false, {})
    return
  end
  local entries = H.entries(lines, root)
  local buf = H.window()
  local text, rows = H.render(entries, root, vim.api.nvim_win_get_width(0))
  H.raw[buf] = rows
  compat.set_buf(buf, 'modifiable', true)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, text)
  compat.set_buf(buf, 'modifiable', false)
  compat.set_buf(buf, 'modified', false)
  vim.api.nvim_win_set_cursor(0, { #text, 0 })
end

--- The table's window: the one open in this tab, else a new split.
function H.window()
  for _, win in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    local b = vim.api.nvim_win_get_buf(win)
    if vim.bo[b].filetype == H.FILETYPE then
      vim.api.nvim_set_current_win(win)
      return b
    end
  end
  vim.cmd('botright new')
  local buf = vim.api.nvim_get_current_buf()
  compat.set_buf(buf, 'buftype', 'nofile')
  compat.set_buf(buf, 'bufhidden', 'wipe')
  compat.set_buf(buf, 'swapfile', false)
  compat.set_buf(buf, 'filetype', H.FILETYPE)
  pcall(vim.api.nvim_buf_set_name, buf, 'acp://log')
  vim.wo.wrap = false
  local function map(lhs, fn, desc)
    vim.keymap.set('n', lhs, fn, { [compat.buf_key] = buf, nowait = true, silent = true, desc = desc })
  end
  map('q', function()
    if not pcall(vim.cmd, 'close') then
      vim.cmd('bwipeout')
    end
  end, 'acp: close')
  map('<CR>', M.show_json, 'acp: the JSON of this decision')
  map('K', M.show_json, 'acp: the JSON of this decision')
  vim.api.nvim_create_autocmd('BufWipeout', {
    [compat.buf_key] = buf,
    once = true,
    callback = function()
      H.raw[buf] = nil
    end,
  })
  return buf
end

--- The raw JSON line under the cursor of the table, or nil.
---@return string|nil
function M.json_at_cursor()
  local rows = H.raw[vim.api.nvim_get_current_buf()]
  return rows and rows[vim.api.nvim_win_get_cursor(0)[1]]
end

--- Shows the line of JSON under the cursor as written, then key by key, in
--- a floating window (q or <Esc> closes it).
function M.show_json()
  local raw = M.json_at_cursor()
  if raw == nil then
    return
  end
  local lines = { raw, '' }
  local ok, v = pcall(vim.fn.json_decode, raw)
  if ok and type(v) == 'table' then
    local keys = vim.tbl_keys(v)
    table.sort(keys)
    for _, k in ipairs(keys) do
      local val = v[k]
      local shown = type(val) == 'string' and val or vim.fn.json_encode(val)
      lines[#lines + 1] = ('%-11s %s'):format(k, (shown:gsub('[%c]', ' ')))
    end
  end
  local buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  compat.set_buf(buf, 'modifiable', false)
  compat.set_buf(buf, 'bufhidden', 'wipe')
  compat.set_buf(buf, 'filetype', 'acp-log-entry')
  local width = math.max(20, math.min(vim.o.columns - 4, 100))
  local rows = 0
  for _, l in ipairs(lines) do
    rows = rows + math.max(1, math.ceil(vim.fn.strdisplaywidth(l) / width))
  end
  local height = math.max(1, math.min(vim.o.lines - 4, rows))
  local win = vim.api.nvim_open_win(buf, true, {
    relative = 'editor',
    row = math.max(0, math.floor((vim.o.lines - height) / 2) - 1),
    col = math.max(0, math.floor((vim.o.columns - width) / 2)),
    width = width,
    height = height,
    style = 'minimal',
    border = require('acp.config').get().ui.border,
  })
  vim.wo[win].wrap = true
  for _, lhs in ipairs({ 'q', '<Esc>' }) do
    vim.keymap.set('n', lhs, function()
      pcall(vim.api.nvim_win_close, win, true)
    end, { [compat.buf_key] = buf, nowait = true, silent = true, desc = 'acp: close' })
  end
end

M._H = H
return M
