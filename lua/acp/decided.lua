--- The data of the broker's `decided` event (doc/protocol.md): an array in
--- a fixed order, not a map. Neovim decodes thousands of them a second, and
--- a key costs it about as much as its value; the hot readers (acp.events,
--- acp.ledger, the chat model) read by position. Every other reader (the
--- event log, a view that reads any event by name) reads by name through a
--- shared metatable, so `d.session` still works.
---
--- The kind, the decision and `by` come as a small integer n when they are
--- the n-th word of M.words[item] (src/broker/verdict.c has the same
--- lists): a string costs Neovim a malloc, a copy and an interning per
--- event, an integer nothing. M.wrap puts the words back, so every reader
--- sees strings.
---
--- A missing string is nil or vim.NIL (compat.str takes both, and the
--- empty string, as nil), and the items after the last one present are
--- left out. A title that is the command is `true` (M.title). No paths are
--- nil. The atoms are flat: kind, text, inner (a boolean) for each.
---
--- Hot code reads an item that may be left out with rawget: d[i] of an
--- absent item calls the metatable's __index (a Lua call, ~600 instructions
--- per read on 0.7.2, as much as a quarter of what Lua does per event).

local M = {}

M.AGENT = 1
M.SESSION = 2
M.TOOL_CALL_ID = 3
M.KIND = 4
M.TITLE = 5
M.COMMAND = 6
M.DECISION = 7
M.BY = 8
M.OPTION_ID = 9
M.REASON = 10
M.RULE = 11
M.SOURCE = 12
M.ATOMS = 13
M.PATHS = 14
M.SNAPSHOTS = 15

--- The names of the items, in order (the keys of the map form).
M.names = {
  'agent',
  'session',
  'toolCallId',
  'kind',
  'title',
  'command',
  'decision',
  'by',
  'optionId',
  'reason',
  'rule',
  'source',
  'atoms',
  'paths',
  'snapshots',
}

--- The words sent as numbers, by item (the same lists, in the same order,
--- as src/broker/verdict.c's).
M.words = {
  [M.KIND] = { 'read', 'edit', 'delete', 'move', 'search', 'execute', 'think', 'fetch', 'other', 'switch_mode' },
  [M.DECISION] = { 'allow', 'deny' },
  [M.BY] = { 'rule', 'memory', 'mode', 'yolo' },
}
local KIND, DECISION, BY = M.KIND, M.DECISION, M.BY
local KINDS, DECISIONS, BYS = M.words[KIND], M.words[DECISION], M.words[BY]

local pos = {}
for i, k in ipairs(M.names) do
  pos[k] = i
end

--- Named reads and writes of an event's items (vim.NIL reads as nil).
M.mt = {
  __index = function(t, k)
    local i = pos[k]
    if i == nil then
      return nil
    end
    local v = rawget(t, i)
    if v == vim.NIL then
      return nil
    elseif v == true and i == M.TITLE then
      return rawget(t, M.COMMAND)
    end
    return v
  end,
  __newindex = function(t, k, v)
    rawset(t, pos[k] or k, v)
  end,
}

--- The event's data as it came (an array), made readable by name; a map
--- (the form before, tests) is turned into the array first. Cheap when
--- already done.
---@param d table
---@return table
function M.wrap(d)
  if getmetatable(d) == M.mt then
    return d
  end
  if rawget(d, 1) == nil and next(d) ~= nil and type(next(d)) == 'string' then
    d = M.from_map(d)
  end
  -- The words sent as numbers (an unknown number: nil).
  local v = rawget(d, KIND)
  if type(v) == 'number' then
    d[KIND] = KINDS[v] or vim.NIL
  end
  v = rawget(d, DECISION)
  if type(v) == 'number' then
    d[DECISION] = DECISIONS[v] or vim.NIL
  end
  v = rawget(d, BY)
  if type(v) == 'number' then
    d[BY] = BYS[v] or vim.NIL
  end
  return setmetatable(d, M.mt)
end

--- The array of a map with the items' names as keys ({kind, text, inner}
--- atoms become flat).
---@param m table
---@return table
function M.from_map(m)
  local d = {}
  for i, k in ipairs(M.names) do
    local v = m[k]
    if v == nil then
      v = vim.NIL
    end
    d[i] = v
  end
  if type(m.atoms) == 'table' then
    local flat = {}
    for _, a in ipairs(m.atoms) do
      if type(a) == 'table' then
        flat[#flat + 1] = a.kind
        flat[#flat + 1] = a.text
        flat[#flat + 1] = a.inner == true
      end
    end
    d[M.ATOMS] = flat
  end
  return d
end

--- The title of event d (a non-empty string), or nil.
---@param d table
---@return string|nil
function M.title(d)
  local t = rawget(d, M.TITLE)
  if t == true then
    t = rawget(d, M.COMMAND)
  end
  if type(t) == 'string' and t ~= '' then
    return t
  end
  return nil
end

--- The atoms of event d as {kind, text, inner} tables (the form of a
--- `permission` event and of `User AcpPermissionDecided`): none sent means
--- one `command` atom whose text is the command, or none without a command.
---@param d table
---@param command string|nil d's command (compat.str)
---@return {kind: string, text: string, inner: boolean}[]
function M.atoms(d, command)
  local flat = rawget(d, M.ATOMS)
  if type(flat) ~= 'table' then
    return command and { { kind = 'command', text = command, inner = false } } or {}
  end
  local out = {}
  for i = 1, #flat - 2, 3 do
    local kind, text = flat[i], flat[i + 1]
    if type(text) == 'string' and text ~= '' then
      out[#out + 1] = { kind = type(kind) == 'string' and kind ~= '' and kind or 'other', text = text, inner = flat[i + 2] == true }
    end
  end
  return out
end

return M
