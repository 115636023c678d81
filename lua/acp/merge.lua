--- What the agent last saw of each file, and the 3-way merge of its write
--- with what the person has (doc/acp.txt `acp-unsaved`).
---
--- `saw(path, text)` keeps, per file, the text the agent last saw: what an
--- fs/read returned to it from the buffer, what its last write put there,
--- the oldText of an edit request it made. `merge3(base, mine, theirs)`
--- merges two sets of changes to `base` line by line (vim.diff 'indices'):
--- changes that overlap or touch are a conflict, identical changes are
--- taken once. Requires only acp.text and acp.state (for the requests).

local state = require('acp.state')
local text = require('acp.text')

local M = {}
local H = {}

-- Module definition ==========================================================

--- Files kept at most (the oldest one seen is dropped first), and the
--- largest text kept for one.
M.max_files = 256
M.max_bytes = 8 * 1024 * 1024

--- path -> {text = string, n = integer (order seen)}
H.seen = {}
H.count = 0
H.n = 0

--- Remembers that the agent saw `s` as the whole text of `path` (absolute,
--- symlinks resolved). A text over max_bytes forgets what was kept.
---@param path string
---@param s string|nil
function M.saw(path, s)
  if type(path) ~= 'string' then
    return
  end
  if H.seen[path] ~= nil then
    H.seen[path] = nil
    H.count = H.count - 1
  end
  if type(s) ~= 'string' or #s > M.max_bytes then
    return
  end
  if H.count >= M.max_files then
    H.drop_oldest()
  end
  H.n = H.n + 1
  H.seen[path] = { text = s, n = H.n }
  H.count = H.count + 1
end

--- The text the agent last saw of `path`, or nil.
---@param path string
---@return string|nil
function M.seen(path)
  local e = H.seen[path]
  return e and e.text or nil
end

--- Forgets everything (tests).
function M.reset()
  H.seen, H.count, H.n = {}, 0, 0
end

--- Merges the changes base → mine and base → theirs (whole texts; a final
--- newline is kept as the side that changed it has it).
---@param base string
---@param mine string
---@param theirs string
---@return {text: string|nil, conflicts: integer, mine_hunks: integer, theirs_hunks: integer}
function M.merge3(base, mine, theirs)
  local b, m, t = H.split(base), H.split(mine), H.split(theirs)
  local hm = H.hunks(b, m, 'mine')
  local ht = H.hunks(b, t, 'theirs')
  local all = {}
  for _, h in ipairs(hm) do
    all[#all + 1] = h
  end
  for _, h in ipairs(ht) do
    all[#all + 1] = h
  end
  table.sort(all, function(x, y)
    if x.lo ~= y.lo then
      return x.lo < y.lo
    end
    return x.side < y.side
  end)
  -- Clusters of hunks that overlap or touch, in base order.
  local clusters = {}
  for _, h in ipairs(all) do
    local c = clusters[#clusters]
    if c ~= nil and h.lo <= c.hi then
      c.hi = math.max(c.hi, h.hi)
      c.list[#c.list + 1] = h
    else
      clusters[#clusters + 1] = { lo = h.lo, hi = h.hi, list = { h } }
    end
  end
  local out, pos, conflicts = {}, 0, 0
  for _, c in ipairs(clusters) do
    for i = pos + 1, c.lo do
      out[#out + 1] = b.lines[i]
    end
    local vm = H.version(b, m, c, 'mine')
    local vt = H.version(b, t, c, 'theirs')
    local take
    if not H.has(c, 'theirs') then
      take = vm
    elseif not H.has(c, 'mine') or vim.deep_equal(vm, vt) then
      take = vt
    else
      conflicts = conflicts + 1
      take = vt
    end
    for _, l in ipairs(take) do
      out[#out + 1] = l
    end
    pos = c.hi
  end
  for i = pos + 1, #b.lines do
    out[#out + 1] = b.lines[i]
  end
  local r = { conflicts = conflicts, mine_hunks = #hm, theirs_hunks = #ht }
  if conflicts == 0 then
    local eol = m.eol
    if t.eol ~= b.eol then
      eol = t.eol
    end
    r.text = H.join(out, eol)
  end
  return r
end

-- Helper functionality =======================================================

function H.drop_oldest()
  local oldest, key = math.huge, nil
  for k, e in pairs(H.seen) do
    if e.n < oldest then
      oldest, key = e.n, k
    end
  end
  if key ~= nil then
    H.seen[key] = nil
    H.count = H.count - 1
  end
end

--- {lines, eol}: the lines of s, and whether it ends with a newline.
function H.split(s)
  local lines, eol = text.file_lines(s)
  return { lines = lines, eol = eol or #lines == 0 }
end

function H.join(lines, eol)
  if #lines == 0 then
    return ''
  end
  return table.concat(lines, '\n') .. (eol and '\n' or '')
end


--- The hunks base → other as {lo, hi (base lines lo+1..hi replaced, 0-based
--- half-open), from, count (other's lines), side}.
function H.hunks(b, o, side)
  local list = {}
  local idx = text.diff(text.diff_text(b.lines), text.diff_text(o.lines), { result_type = 'indices' })
  for _, d in ipairs(idx or {}) do
    local sa, ca, sb, cb = d[1], d[2], d[3], d[4]
    -- A count of 0 gives the line after which the change goes.
    local lo = ca == 0 and sa or sa - 1
    local from = cb == 0 and sb + 1 or sb
    list[#list + 1] = { lo = lo, hi = lo + ca, from = from, count = cb, side = side }
  end
  return list
end

function H.has(c, side)
  for _, h in ipairs(c.list) do
    if h.side == side then
      return true
    end
  end
  return false
end

--- The lines of cluster c's base range as `side` has them.
function H.version(b, o, c, side)
  local v, pos = {}, c.lo
  for _, h in ipairs(c.list) do
    if h.side == side then
      for i = pos + 1, h.lo do
        v[#v + 1] = b.lines[i]
      end
      for i = h.from, h.from + h.count - 1 do
        v[#v + 1] = o.lines[i]
      end
      pos = h.hi
    end
  end
  for i = pos + 1, c.hi do
    v[#v + 1] = b.lines[i]
  end
  return v
end

--- The oldText of an edit request is what the agent saw of that file, when
--- it is the whole file (Claude's Edit sends only the snippet it replaces,
--- with old_string in its rawInput).
function H.on_pending()
  for _, req in ipairs(state.pending_list()) do
    if not H.requests[req.id] then
      H.requests[req.id] = true
      local tc = type(req.toolCall) == 'table' and req.toolCall or {}
      local input = type(tc.rawInput) == 'table' and tc.rawInput or {}
      if input.old_string == nil then
        for _, item in ipairs(type(tc.content) == 'table' and tc.content or {}) do
          if type(item) == 'table' and item.type == 'diff' and type(item.path) == 'string' and type(item.oldText) == 'string' then
            M.saw(H.uv.fs_realpath(item.path) or item.path, item.oldText)
          end
        end
      end
    end
  end
end

H.uv = vim.uv or vim.loop

--- Ids of the requests looked at (kept small: cleared when none is pending).
H.requests = {}

state.on('pending', H.on_pending)
state.on('resolved', function()
  if next(state.pending) == nil then
    H.requests = {}
  end
end)

return M
