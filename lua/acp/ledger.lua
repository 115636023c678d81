--- The turn ledger: what the agent changed in each turn, and files that
--- changed on disk under a loaded buffer.
---
--- A file is snapshotted the first time a turn names it (a tool call's
--- locations or diff, a permission request, an fs read), before the agent
--- changes it: the loaded buffer (unsaved edits included), else the disk.
--- It counts as changed by the turn when the agent wrote it through fs/*
--- (the `fs` event), when it changed on disk under its buffer, or (no
--- buffer) when the disk no longer matches the snapshot at a checkpoint: a
--- tool call that completed, a terminal that exited, the end of the turn.
--- At the end of a turn the summary (files, +/- lines) is emitted on the
--- state bus as 'changes' and told to the person.
---
--- At each checkpoint the loaded buffers are checked (`:checktime`, with
--- a FileChangedShell handler of ours only for that call): an unmodified
--- buffer whose file changed is reloaded (views kept, undoable), a modified
--- one is never touched and the person is warned. During a turn a libuv
--- watch of the directories of the loaded buffers' files (within the
--- session's cwd) and of the files the turn named (at most max_watches,
--- not recursive, stopped at the turn end and when the agent goes) checks
--- those files as soon as they change (H.flush).
---
--- review() and revert() (acp.review/revert, :AcpReview) compare each file
--- with its snapshot. Reverting changes the buffer (undoable) and tells the
--- agent nothing. This module requires only acp.compat, acp.decided,
--- acp.state and acp.text.

local compat = require('acp.compat')
local decided = require('acp.decided')
-- The items of a `decided` event the ledger reads for each one.
local D_SESSION, D_TOOL_CALL_ID, D_PATHS, D_SNAPSHOTS = decided.SESSION, decided.TOOL_CALL_ID, decided.PATHS, decided.SNAPSHOTS
local fs = require('acp.fs')
local state = require('acp.state')
local text = require('acp.text')

local M = {}
local H = {}

-- Module definition ==========================================================

--- Files snapshotted per turn at most (the rest are not tracked).
M.max_files = 200
--- Largest file snapshotted, in bytes.
M.max_bytes = 4 * 1024 * 1024
--- Bytes of snapshots kept per turn at most (the rest are not tracked).
M.max_turn_bytes = 32 * 1024 * 1024
--- Turns kept per session.
M.max_turns = 100

--- Session id -> ledger: {turn = n, turns = {record, ...}, files = {path -> {first = snap, turn = n}}}.
--- A turn record: {n, seen = {path -> snap}, nseen, changed = {path -> info}, order = {path, ...}, live}.
M.sessions = {}

--- Called for every broker event (inside the RPC call): snapshots the
--- paths it names before the agent changes them, and schedules a check at
--- the checkpoints. Cheap unless a path is seen for the first time.
---@param name string
---@param d table
function M.on_event(name, d)
  if type(d) ~= 'table' then
    return
  end
  if name == 'agent_exit' then
    H.unwatch_agent(compat.str(d.agent))
    return
  end
  local given
  if name == 'decided' then
    -- An array (acp.decided). What the broker read before answering (kept
    -- out of the event log).
    -- rawget: an item left out would call the metatable's __index.
    d = decided.wrap(d)
    given = rawget(d, D_SNAPSHOTS)
    if given ~= nil then
      d[D_SNAPSHOTS] = nil
    end
  end
  local sid = compat.str(name == 'decided' and d[D_SESSION] or d.session)
  if sid == nil then
    return
  end
  if name == 'turn_start' then
    H.begin(sid)
    H.watch_start(sid, compat.str(d.agent))
    return
  end
  local rec = H.current(sid)
  if rec == nil or not rec.live then
    return
  end
  if name == 'update' and type(d.update) == 'table' then
    local u = d.update
    if u.sessionUpdate == 'tool_call' or u.sessionUpdate == 'tool_call_update' then
      local done = u.status == 'completed' or u.status == 'failed'
      H.see_tool(sid, rec, u, done)
      if done then
        H.schedule(sid)
      end
    end
  elseif name == 'permission' or name == 'unasked' then
    local tc = type(d.toolCall) == 'table' and d.toolCall or d
    H.see_tool(sid, rec, vim.tbl_extend('force', tc, { toolCallId = d.toolCallId or tc.toolCallId }), name == 'unasked')
    if name == 'permission' and type(d.id) == 'number' then
      -- The files the policy judged, a command's operands too.
      H.name_paths(sid, rec, d)
      H.asked(sid, d)
    else
      H.decision(sid, d.toolCallId, 'acted without asking')
    end
  elseif name == 'permission_resolved' then
    H.resolved(sid, d)
  elseif name == 'decided' then
    -- An allowed call that may change files names them (doc/protocol.md),
    -- with the broker's snapshots of those the turn had not named.
    local paths = rawget(d, D_PATHS)
    if type(paths) == 'table' and #paths > 0 then
      H.name_paths(sid, rec, d, given)
    end
    -- Kept as the event, put in words when the review asks (H.words).
    H.decision(sid, d[D_TOOL_CALL_ID], d)
  elseif name == 'fs' then
    local path = compat.str(d.path)
    if path ~= nil and d.op == 'write' then
      H.wrote(sid, rec, H.norm(path))
      H.schedule(sid)
    elseif path ~= nil then
      H.see(rec, H.norm(path))
    end
  elseif name == 'terminal' then
    if compat.present(d.exitStatus) then
      H.schedule(sid)
    end
  elseif name == 'turn_end' then
    rec.live = false
    H.watch_stop(sid)
    H.schedule(sid, rec)
  end
end

--- What the agent changed, each file with its hunks against its snapshot:
--- `{ {path=, hunks={ {old_start=, old_count=, new_start=, new_count=, conflict=, toolCall=}, ... }}, ... }`.
--- A hunk is a change the agent made (the file at the end of the turn
--- against the snapshot), placed where it is now: `new_start` counts lines
--- of the buffer (else the disk) as they are, the person's later edits
--- included; `conflict` is true when the person has since edited those
--- lines (such a hunk is not reverted). old_* count lines of the snapshot.
--- toolCall is the tool call that made the change, `{toolCallId=, title=,
--- decision=}` (see H.blame); nil when no call named the file.
--- opts.scope 'session' (default): every file changed in the session,
--- against the file before the agent's first change in it; 'turn': the
--- files of the last turn that changed any, against the file before that
--- turn. opts.session: default the current agent's session (else the last
--- session that had a turn). Reverted hunks
--- are left out, and files with none left.
---@param opts {scope: string|nil, session: string|nil}|nil
---@return table[]
function M.review(opts)
  local list = {}
  for _, e in ipairs(H.entries(opts or {})) do
    local hunks = H.agent_hunks(e)
    if #hunks > 0 then
      local public = {}
      for i, h in ipairs(hunks) do
        public[i] = {
          old_start = h.old_start,
          old_count = h.old_count,
          new_start = h.new_start,
          new_count = h.new_count,
          conflict = h.conflict,
          toolCall = H.blame(e, h),
        }
      end
      list[#list + 1] = { path = e.path, hunks = public, toolCalls = e.why or {} }
    end
  end
  return list
end

--- The snapshot `path` is compared with in review(opts): {lines, eol} or
--- {missing = true}; nil when the path is not in the review.
---@return table|nil
function M.snapshot_of(path, opts)
  local e = H.entry(path, opts)
  return e and e.snap
end

--- Restores hunk `index` (from review(opts)) of `path`, or every hunk when
--- index is nil, in the loaded buffer (loaded for it when there is none),
--- as an undoable change that touches only the hunk's lines: lines the
--- person edited since are never touched (a hunk that overlaps them is
--- refused). A buffer that had no unsaved changes is written; one that had
--- keeps them, unwritten. The agent is told nothing.
---@param path string
---@param index integer|nil
---@param opts table|nil as for review()
---@return boolean ok
---@return string message for the person
function M.revert(path, index, opts)
  if type(path) ~= 'string' or path == '' then
    return false, '(acp) revert(): path should be a file name'
  end
  path = H.norm(vim.fn.fnamemodify(path, ':p'))
  local e = H.entry(path, opts)
  local hunks = e and H.agent_hunks(e) or {}
  if #hunks == 0 then
    return false, ('(acp) %s: nothing the agent changed is left to revert'):format(H.show(path))
  end
  if index ~= nil and hunks[index] == nil then
    return false, ('(acp) %s has %d changed hunk%s, no hunk %s'):format(H.show(path), #hunks, #hunks == 1 and '' or 's', tostring(index))
  end
  local chosen, skipped = {}, 0
  for i, h in ipairs(hunks) do
    if index == nil or i == index then
      if h.conflict then
        skipped = skipped + 1
      else
        chosen[#chosen + 1] = h
      end
    end
  end
  if #chosen == 0 then
    return false,
      ('(acp) %s: you edited those lines after the agent did; revert them by hand (:AcpReview diff)'):format(H.show(path))
  end
  local buf = H.find(path)
  if buf == nil then
    buf = vim.fn.bufadd(path)
    vim.fn.bufload(buf)
  end
  if not vim.api.nvim_buf_get_option(buf, 'modifiable') then
    return false, ('(acp) the buffer of %s is not modifiable'):format(H.show(path))
  end
  local modified = vim.api.nvim_buf_get_option(buf, 'modified')
  H.undo_break(buf)
  -- Bottom up, so that the line numbers of the hunks above stay right; the
  -- file as the agent left it follows, so that review() forgets them.
  for i = #chosen, 1, -1 do
    local h = chosen[i]
    local lines = H.slice(e.snap.lines, h.old_start, h.old_count)
    H.replace_buf(buf, h.new_start, h.new_count, lines)
    H.splice(e.after.lines, h.after_start, h.new_count, lines)
    H.shift_spans(e.after, h.after_start, h.new_count, #lines)
  end
  H.undo_break(buf)
  local wrote
  if not modified then
    local ok, err = pcall(vim.api.nvim_buf_call, buf, function()
      vim.cmd('silent noautocmd keepalt write!')
    end)
    if not ok then
      return false, ('(acp) reverted %s in its buffer but could not write it: %s'):format(H.show(path), tostring(err))
    end
    wrote = ' (written)'
  else
    wrote = ' in its buffer (your unsaved changes are kept; not written)'
  end
  local what = index and ('hunk %d of %d'):format(index, #hunks) or ('%d hunk%s'):format(#chosen, #chosen == 1 and '' or 's')
  local left = skipped > 0 and ('; %d hunk%s you edited since left as they are'):format(skipped, skipped == 1 and '' or 's') or ''
  state.log('reverted', { path = path, hunk = index, count = #chosen })
  return true, ('(acp) reverted %s of %s%s%s; u undoes it'):format(what, H.show(path), wrote, left)
end

--- What the person has of path now: {lines, eol} of the loaded buffer,
--- else of the disk; {missing = true, lines = {}} when neither.
---@param path string
---@return table|nil
function M.current(path)
  return H.snapshot(H.norm(path))
end

--- The ledger of `session`, or nil.
---@param session string
function M.ledger(session)
  return M.sessions[session]
end

-- Helper functionality =======================================================

--- Starts turn n+1 of session sid.
function H.begin(sid)
  local l = M.sessions[sid]
  if l == nil then
    l = { turn = 0, turns = {}, files = {} }
    M.sessions[sid] = l
  end
  l.turn = l.turn + 1
  H.last = sid
  local rec = { sid = sid, n = l.turn, seen = {}, nseen = 0, bytes = 0, changed = {}, order = {}, live = true }
  l.turns[#l.turns + 1] = rec
  if #l.turns > M.max_turns then
    table.remove(l.turns, 1)
  end
end

--- The record of the running turn of sid (or of the last one, until its
--- end is processed), or nil.
function H.current(sid)
  local l = M.sessions[sid]
  return l and l.turns[#l.turns] or nil
end

--- The paths a tool call names (locations, diffs) are seen; `done` (the
--- call already acted): a diff's oldText is the snapshot.
function H.see_tool(sid, rec, tc, done)
  local cwd = state.sessions[sid] and state.sessions[sid].cwd
  for _, loc in ipairs(type(tc.locations) == 'table' and tc.locations or {}) do
    local p = type(loc) == 'table' and compat.str(loc.path)
    if p then
      H.named(rec, H.see(rec, H.norm(H.abs(p, cwd)), done and H.old_text(tc, p) or nil), tc.toolCallId)
    end
  end
  for _, c in ipairs(type(tc.content) == 'table' and tc.content or {}) do
    if type(c) == 'table' and c.type == 'diff' and compat.str(c.path) then
      H.named(rec, H.see(rec, H.norm(H.abs(c.path, cwd)), done and H.from_old(c.oldText) or nil), tc.toolCallId)
    end
  end
end

--- Remembers that tool call tcid named path in rec (a few per path).
function H.named(rec, path, tcid)
  tcid = compat.str(tcid)
  if path == nil or tcid == nil then
    return
  end
  rec.tools = rec.tools or {}
  local list = rec.tools[path] or {}
  rec.tools[path] = list
  if #list < 5 and not vim.tbl_contains(list, tcid) then
    list[#list + 1] = tcid
  end
end

--- A permission prompt for a tool call: its answer is told later by id.
function H.asked(sid, d)
  local l = M.sessions[sid]
  local kinds = {}
  for _, o in ipairs(type(d.options) == 'table' and d.options or {}) do
    if type(o) == 'table' and compat.str(o.optionId) then
      kinds[o.optionId] = compat.str(o.kind)
    end
  end
  l.asked = l.asked or {}
  l.asked[d.id] = { tcid = compat.str(d.toolCallId), kinds = kinds }
end

function H.resolved(sid, d)
  local l = M.sessions[sid]
  local a = l and l.asked and l.asked[d.id]
  if a == nil then
    return
  end
  l.asked[d.id] = nil
  local kind = d.outcome == 'selected' and a.kinds[d.optionId] or nil
  local verb = kind and kind:match('^allow') and 'allowed' or 'not allowed'
  local by = d.by == 'person' and 'you' or tostring(d.by)
  H.decision(sid, a.tcid, ('%s by %s'):format(verb, by))
end

--- How tool call tcid of sid was decided, in words or as its `decided`
--- event (for the review, through H.words).
function H.decision(sid, tcid, words)
  local l = M.sessions[sid]
  tcid = compat.str(tcid)
  if l == nil or tcid == nil then
    return
  end
  l.decisions = l.decisions or {}
  if l.decisions[tcid] == nil then
    l.ndecisions = (l.ndecisions or 0) + 1
  end
  l.decisions[tcid] = words
  if l.ndecisions > 4 * M.max_files then
    -- Bounded: the decisions of tool calls of the last turns only.
    l.decisions, l.ndecisions = { [tcid] = words }, 1
  end
end

--- How a call was decided, in words: what H.decision kept (words, or the
--- `decided` event).
function H.words(v)
  if type(v) ~= 'table' then
    return v
  end
  local by = compat.str(v.by) or '?'
  local how = compat.str(v.rule) and (by .. ' ' .. v.rule) or by
  return ('%s by %s'):format(v.decision == 'allow' and 'allowed' or 'denied', how)
end

--- The tool calls that named path in a turn and how each was decided:
--- `{ {toolCallId=, title=, decision=}, ... }`.
function H.why(sid, rec, path)
  local l, s = M.sessions[sid], state.sessions[sid]
  local out = {}
  for _, tcid in ipairs(rec.tools and rec.tools[path] or {}) do
    local tc = s and s.tools[tcid]
    out[#out + 1] = {
      toolCallId = tcid,
      title = tc and compat.str(tc.title) or nil,
      decision = H.words(l and l.decisions and l.decisions[tcid]),
    }
  end
  return out
end

--- Spans of the file as the agent left it (`after`, lines) and the tool
--- call that made each: `{ {s=, c=, tcid=}, ... }`, lines s .. s+c-1 (c =
--- 0: the place after line s), later ones first in precedence. In order:
--- the spans of earlier turns (`prev`, that file as the turn before left
--- it), placed where they are now; this turn's hunks no call of it covers,
--- given to its last call; the lines each call's diffs changed and its
--- locations' lines, in the order the calls named the file.
function H.spans(sid, rec, path, snap, after, prev)
  local spans = {}
  if prev ~= nil and prev.spans ~= nil and #prev.spans > 0 then
    local edits = H.hunks(prev, after)
    for _, sp in ipairs(prev.spans) do
      spans[#spans + 1] = { s = H.place(edits, sp.s, sp.c), c = sp.c, tcid = sp.tcid }
    end
  end
  local calls = rec.tools and rec.tools[path] or {}
  if #calls == 0 or after.unknown then
    return spans
  end
  local s = state.sessions[sid]
  local cwd = s and s.cwd
  local mine = {}
  for _, tcid in ipairs(calls) do
    local tc = s and s.tools[tcid]
    for _, sp in ipairs(tc and H.call_spans(tc, path, cwd, after.lines) or {}) do
      sp.tcid = tcid
      mine[#mine + 1] = sp
    end
  end
  for _, h in ipairs(H.hunks(snap, after)) do
    local covered = false
    for _, sp in ipairs(mine) do
      covered = covered or H.overlap(sp.s, sp.c, h.new_start, h.new_count)
    end
    if not covered then
      spans[#spans + 1] = { s = h.new_start, c = h.new_count, tcid = calls[#calls] }
    end
  end
  vim.list_extend(spans, mine)
  -- Bounded: the most recent ones.
  while #spans > M.max_spans do
    table.remove(spans, 1)
  end
  return spans
end

--- Spans at most per file (H.spans).
M.max_spans = 256

--- The lines of `lines` (the file as the agent left it) that tool call tc
--- changed in path: for each of its diffs of path whose newText is found
--- there, the lines its oldText → newText changed (all of it for a new
--- file); for each of its locations of path with a line, that line
--- (1-based).
function H.call_spans(tc, path, cwd, lines)
  local out = {}
  for _, c in ipairs(type(tc.content) == 'table' and tc.content or {}) do
    if
      type(c) == 'table'
      and c.type == 'diff'
      and compat.str(c.path)
      and type(c.newText) == 'string'
      and H.norm(H.abs(c.path, cwd)) == path
    then
      local new = H.from_text(c.newText)
      local at = H.locate(lines, new.lines)
      if at ~= nil then
        if type(c.oldText) == 'string' then
          for _, h in ipairs(H.hunks(H.from_text(c.oldText), new)) do
            out[#out + 1] = { s = at + h.new_start, c = h.new_count }
          end
        else
          out[#out + 1] = { s = at + 1, c = #new.lines }
        end
      end
    end
  end
  for _, loc in ipairs(type(tc.locations) == 'table' and tc.locations or {}) do
    local line = type(loc) == 'table' and loc.line
    if type(line) == 'number' and line >= 1 and compat.str(loc.path) and H.norm(H.abs(loc.path, cwd)) == path then
      out[#out + 1] = { s = math.floor(line), c = 1 }
    end
  end
  return out
end

--- Line comparisons H.locate makes at most (then it gives up).
M.max_locate = 1000000

--- 0-based offset of the first place where `sub` (non-empty) is a run of
--- lines of `lines`, or nil (not found, or too costly to find).
function H.locate(lines, sub)
  local n, m = #lines, #sub
  if m == 0 or m > n then
    return nil
  end
  local budget, first = M.max_locate, sub[1]
  for k = 0, n - m do
    if lines[k + 1] == first then
      local j = 2
      while j <= m and lines[k + j] == sub[j] do
        j = j + 1
      end
      if j > m then
        return k
      end
      budget = budget - j
    end
    budget = budget - 1
    if budget < 0 then
      return nil
    end
  end
  return nil
end

--- Whether lines s1 .. s1+c1-1 and s2 .. s2+c2-1 meet (a count of 0 is
--- the place after line s: it meets the lines on either side of it).
function H.overlap(s1, c1, s2, c2)
  local a1, b1 = s1 - 1, s1 - 1 + c1
  local a2, b2 = s2 - 1, s2 - 1 + c2
  if c1 == 0 then
    a1, b1 = s1, s1
  end
  if c2 == 0 then
    a2, b2 = s2, s2
  end
  if c1 > 0 and c2 > 0 then
    return a1 < b2 and a2 < b1
  end
  return a1 <= b2 and a2 <= b1
end

--- The tool call of entry e (see H.entries) that made hunk h: the last
--- span of e.after over the hunk's lines whose call is one of e.why's;
--- else the last of e.why. A copy of its e.why item, or nil.
function H.blame(e, h)
  local why = e.why or {}
  if #why == 0 then
    return nil
  end
  local by = {}
  for _, c in ipairs(why) do
    by[c.toolCallId] = c
  end
  local spans = e.after.spans or {}
  for i = #spans, 1, -1 do
    local sp = spans[i]
    if by[sp.tcid] and H.overlap(sp.s, sp.c, h.after_start, h.new_count) then
      return vim.deepcopy(by[sp.tcid])
    end
  end
  return vim.deepcopy(why[#why])
end

--- After `count` lines of after from line `first` became `n` lines (a
--- revert), its spans below them move.
function H.shift_spans(after, first, count, n)
  local edit = { { old_start = first, old_count = count, new_start = first, new_count = n } }
  for _, sp in ipairs(after.spans or {}) do
    sp.s = H.place(edit, sp.s, sp.c)
  end
end

--- The tool calls of a file over the session: those of earlier turns
--- (old), then this turn's (new), each once, the most recent 20.
function H.merge_why(old, new)
  local out, seen = {}, {}
  for _, c in ipairs(new) do
    seen[c.toolCallId] = true
  end
  for _, c in ipairs(old or {}) do
    if not seen[c.toolCallId] then
      out[#out + 1] = c
    end
  end
  vim.list_extend(out, new)
  while #out > 20 do
    table.remove(out, 1)
  end
  return out
end

--- The snapshot a done tool call's diff of path gives, or nil.
function H.old_text(tc, path)
  for _, c in ipairs(type(tc.content) == 'table' and tc.content or {}) do
    if type(c) == 'table' and c.type == 'diff' and c.path == path then
      return H.from_old(c.oldText)
    end
  end
  return nil
end

function H.from_old(old)
  if type(old) == 'string' then
    return H.from_text(old)
  elseif old == nil or old == vim.NIL then
    return { missing = true, lines = {} }
  end
  return nil
end

--- Snapshots path in rec unless it was seen in this turn (`snap` given:
--- that one, else the buffer or the disk now).
function H.see(rec, path, snap)
  if path == nil or rec.seen[path] ~= nil or rec.nseen >= M.max_files then
    return path
  end
  snap = snap or H.snapshot(path)
  local size = snap and H.size(snap) or 0
  if snap ~= nil and rec.bytes + size <= M.max_turn_bytes then
    rec.seen[path] = snap
    rec.nseen = rec.nseen + 1
    rec.bytes = rec.bytes + size
    if rec.live then
      H.watch_path(rec.sid, path)
    end
  end
  return path
end

--- The agent wrote path through fs/*.
function H.wrote(sid, rec, path)
  if rec.seen[path] == nil then
    -- Not named before the write: a diff of a tool call of the session
    -- may still tell what it was.
    local s = state.sessions[sid]
    local snap
    for _, tc in pairs(s and s.tools or {}) do
      snap = snap or H.old_text(tc, path)
    end
    rec.seen[path] = snap or { unknown = true, lines = {} }
    rec.nseen = rec.nseen + 1
  end
  H.mark(rec, path, 'fs')
end

function H.mark(rec, path, how)
  if rec.changed[path] == nil then
    rec.changed[path] = { how = how }
    rec.order[#rec.order + 1] = path
  end
end

--- Queues a check of session sid (and the end of turn `ending`) for when
--- Neovim may block again.
function H.schedule(sid, ending)
  local q = H.queue[sid]
  if q == nil then
    q = {}
    H.queue[sid] = q
  end
  if ending then
    q.ending = ending
  end
  if not H.scheduled then
    H.scheduled = true
    vim.schedule(H.run)
  end
end

H.queue = {}

function H.run()
  H.scheduled = false
  local queue = H.queue
  H.queue = {}
  for sid, q in pairs(queue) do
    local ok, err = pcall(H.check, sid, q.ending or H.current(sid))
    if ok and q.ending then
      ok, err = pcall(H.finish, sid, q.ending)
    end
    if not ok then
      vim.notify('(acp) internal error in the turn ledger: ' .. tostring(err), vim.log.levels.ERROR)
    end
  end
end

--- A checkpoint: loaded buffers whose file changed on disk are reloaded
--- (or the person warned); files without a buffer that differ from their
--- snapshot are changed.
function H.check(sid, rec)
  local cwd = state.sessions[sid] and state.sessions[sid].cwd
  cwd = cwd and H.norm(cwd)
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(buf) and vim.api.nvim_buf_get_option(buf, 'buftype') == '' then
      local name = vim.api.nvim_buf_get_name(buf)
      if name ~= '' then
        H.check_buffer(buf, rec, cwd)
      end
    end
  end
  if rec == nil then
    return
  end
  local loaded = {}
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(buf) then
      loaded[H.norm(vim.api.nvim_buf_get_name(buf))] = true
    end
  end
  for path, snap in pairs(rec.seen) do
    if not loaded[path] then
      H.check_file(rec, path, snap)
    end
  end
end

--- A file without a buffer: marked changed ('disk') when it no longer
--- matches its snapshot (read again only when its size, time or inode moved).
function H.check_file(rec, path, snap)
  if snap ~= nil and snap.unknown and snap.why and rec.changed[path] == nil then
    -- A file the broker did not read: its stat tells that it changed.
    if not H.same_stat(snap, path) then
      H.mark(rec, path, 'disk')
    end
  elseif snap ~= nil and not snap.unknown and rec.changed[path] == nil and not H.same_stat(snap, path) then
    local now = H.snapshot(path)
    if now ~= nil and not H.same(snap, now) then
      H.mark(rec, path, 'disk')
    end
  end
end

--- `:checktime` of buf with a FileChangedShell handler of ours for that
--- call only: an unmodified buffer is reloaded (its windows' views kept),
--- a modified one is kept and the person warned.
function H.check_buffer(buf, rec, cwd)
  local views = {}
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    views[win] = vim.api.nvim_win_call(win, vim.fn.winsaveview)
  end
  local seen
  local id = vim.api.nvim_create_autocmd('FileChangedShell', {
    [compat.buf_key] = buf,
    callback = function(args)
      local reason = vim.v.fcs_reason
      local modified = vim.api.nvim_buf_get_option(args.buf, 'modified')
      seen = { reason = reason, modified = modified }
      if reason == 'changed' and not modified then
        seen.before = H.buf_snapshot(args.buf)
        vim.v.fcs_choice = 'reload'
      else
        if reason == 'conflict' or reason == 'changed' then
          seen.before = H.buf_snapshot(args.buf)
        end
        vim.v.fcs_choice = ''
      end
    end,
  })
  -- 'autoread' would reload without asking the handler (no snapshot, no
  -- message): off for this check, then the global value again.
  local ok, err = pcall(vim.api.nvim_buf_call, buf, function()
    vim.cmd('setlocal noautoread')
    local ok2, err2 = pcall(vim.cmd, 'checktime ' .. buf)
    vim.cmd('set autoread<')
    if not ok2 then
      error(err2, 0)
    end
  end)
  pcall(vim.api.nvim_del_autocmd, id)
  if not ok then
    vim.notify('(acp) checking ' .. H.show(vim.api.nvim_buf_get_name(buf)) .. ': ' .. tostring(err), vim.log.levels.WARN)
    return
  end
  if seen == nil or seen.reason == 'mode' or seen.reason == 'time' then
    return
  end
  local path = H.norm(vim.api.nvim_buf_get_name(buf))
  local inside = cwd ~= nil and (path:sub(1, #cwd + 1) == cwd .. '/')
  if rec ~= nil and inside and seen.before ~= nil then
    H.see(rec, path, seen.before)
    H.mark(rec, path, 'disk')
    if seen.modified then
      rec.changed[path].conflict = true
    end
  end
  local data = { path = path, reason = seen.reason, reloaded = false }
  if seen.reason == 'changed' and not seen.modified then
    data.reloaded = true
    for win, view in pairs(views) do
      if vim.api.nvim_win_is_valid(win) then
        pcall(vim.api.nvim_win_call, win, function()
          vim.fn.winrestview(view)
        end)
      end
    end
    vim.notify(('(acp) %s changed on disk: its buffer was reloaded (u undoes)'):format(H.show(path, cwd)), vim.log.levels.WARN)
  elseif seen.reason == 'deleted' then
    vim.notify(('(acp) %s was deleted on disk: its buffer is kept (:w writes it again)'):format(H.show(path, cwd)), vim.log.levels.WARN)
  else
    vim.notify(
      ('(acp) %s changed on disk while you have unsaved changes in its buffer: nothing was overwritten and your buffer was not reloaded (:e! loads the disk version and drops your changes; :w writes yours over it)'):format(
        H.show(path, cwd)
      ),
      vim.log.levels.WARN
    )
  end
  state.log('disk_changed', data)
end

-- The watch during a turn ------------------------------------------------

--- Directories watched at most, all sessions together.
M.max_watches = 64
--- Milliseconds from a change on disk to its check: a burst of events (a
--- write, a rename) is checked once.
M.watch_delay_ms = 50

--- Session id -> {dirs = {dir -> fs_event handle}, paths = {path -> true},
--- hits = {path -> true}, dirhits = {dir -> true}, timer, agent}.
H.watches = {}
H.nwatches = 0

--- The number of directories watched now.
---@return integer
function M.watching()
  return H.nwatches
end

--- A turn of sid starts: the directories of its loaded buffers' files
--- within the session's cwd are watched (not recursively), and those of
--- the files the turn names later (H.see). A change there is checked at
--- once (H.flush) instead of at the next checkpoint.
function H.watch_start(sid, agent)
  H.watch_stop(sid)
  for other, w in pairs(H.watches) do
    -- Left by an agent that went without an agent_exit (the broker died).
    if w.agent ~= nil and state.agents[w.agent] == nil then
      H.watch_stop(other)
    end
  end
  local timer = compat.uv.new_timer()
  if timer == nil then
    return
  end
  H.watches[sid] = { dirs = {}, paths = {}, npaths = 0, hits = {}, dirhits = {}, timer = timer, agent = agent }
  local cwd = state.sessions[sid] and state.sessions[sid].cwd
  if cwd == nil then
    return
  end
  cwd = H.norm(cwd)
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(buf) and vim.api.nvim_buf_get_option(buf, 'buftype') == '' then
      local name = vim.api.nvim_buf_get_name(buf)
      local path = name ~= '' and H.norm(name)
      if path and path:sub(1, #cwd + 1) == cwd .. '/' then
        H.watch_path(sid, path)
      end
    end
  end
end

--- Watches the directory of path (normalised) for the turn of sid.
function H.watch_path(sid, path)
  local w = H.watches[sid]
  if w == nil or w.paths[path] or w.npaths >= 4 * M.max_files then
    return
  end
  w.paths[path] = true
  w.npaths = w.npaths + 1
  local dir = vim.fn.fnamemodify(path, ':h')
  if w.dirs[dir] ~= nil or H.nwatches >= M.max_watches then
    return
  end
  local handle = compat.uv.new_fs_event()
  if handle == nil then
    return
  end
  local ok = pcall(function()
    assert(handle:start(dir, {}, function(err, name)
      H.on_fs_event(sid, w, dir, err, name)
    end))
  end)
  if not ok then
    handle:close()
    return
  end
  w.dirs[dir] = handle
  H.nwatches = H.nwatches + 1
end

--- A change in dir (a libuv callback: no Neovim API here): noted if it is
--- a watched path, checked after M.watch_delay_ms on the main loop.
function H.on_fs_event(sid, w, dir, err, name)
  if w.stopped then
    return
  end
  if err or type(name) ~= 'string' or name == '' then
    w.dirhits[dir] = true
  else
    local path = (dir == '/' and '' or dir) .. '/' .. name
    if not w.paths[path] then
      return
    end
    w.hits[path] = true
  end
  if not w.armed then
    w.armed = true
    w.timer:start(M.watch_delay_ms, 0, function()
      w.armed = false
      vim.schedule(function()
        local ok, e = pcall(H.flush, sid, w)
        if not ok then
          vim.notify('(acp) internal error in the turn ledger: ' .. tostring(e), vim.log.levels.ERROR)
        end
      end)
    end)
  end
end

--- Checks the watched paths that changed: a loaded buffer as at a
--- checkpoint (reloaded, or the person warned); a file without one that
--- the turn named is marked changed when it differs from its snapshot.
--- Anything else is ignored (no snapshot: nothing to review).
function H.flush(sid, w)
  if H.watches[sid] ~= w then
    return
  end
  if w.agent ~= nil and state.agents[w.agent] == nil then
    -- The agent is gone without an agent_exit (the broker died).
    H.watch_stop(sid)
    return
  end
  local rec = H.current(sid)
  if rec == nil or not rec.live then
    return
  end
  local hits, dirhits = w.hits, w.dirhits
  w.hits, w.dirhits = {}, {}
  if next(dirhits) ~= nil then
    for path in pairs(w.paths) do
      if dirhits[vim.fn.fnamemodify(path, ':h')] then
        hits[path] = true
      end
    end
  end
  local cwd = state.sessions[sid] and state.sessions[sid].cwd
  cwd = cwd and H.norm(cwd)
  for path in pairs(hits) do
    local buf = H.find(path)
    if buf ~= nil then
      if vim.api.nvim_buf_is_loaded(buf) and vim.api.nvim_buf_get_option(buf, 'buftype') == '' then
        H.check_buffer(buf, rec, cwd)
      end
    else
      H.check_file(rec, path, rec.seen[path])
    end
  end
end

--- Stops the watch of sid's turn.
function H.watch_stop(sid)
  local w = H.watches[sid]
  if w == nil then
    return
  end
  H.watches[sid] = nil
  w.stopped = true
  for _, handle in pairs(w.dirs) do
    pcall(handle.stop, handle)
    if not handle:is_closing() then
      handle:close()
    end
    H.nwatches = H.nwatches - 1
  end
  w.dirs = {}
  pcall(w.timer.stop, w.timer)
  if not w.timer:is_closing() then
    w.timer:close()
  end
end

--- The agent `name` is gone: the watches of its sessions stop.
function H.unwatch_agent(name)
  for sid, w in pairs(H.watches) do
    if name == nil or w.agent == nil or w.agent == name then
      H.watch_stop(sid)
    end
  end
end

--- The paths a `permission` or `decided` event d carries (what the policy
--- judged), relative to the session's cwd: snapshotted and named by its call.
--- given: the broker's snapshots of a `decided` event, by path.
function H.name_paths(sid, rec, d, given)
  local cwd = state.sessions[sid] and state.sessions[sid].cwd
  given = type(given) == 'table' and given or {}
  for _, p in ipairs(type(d.paths) == 'table' and d.paths or {}) do
    if compat.str(p) then
      local path = H.norm_named(rec, p, cwd)
      local snap = H.given(given[p], path)
      H.earlier(rec, path, snap)
      H.named(rec, H.see(rec, path, snap), d.toolCallId)
    end
  end
end

--- H.norm of a path an event names, remembered for the turn: an agent can
--- have thousands of calls decided per second, each naming its files, and
--- resolving one costs a readlink per component (at most 4096 remembered).
function H.norm_named(rec, p, cwd)
  rec.normed = rec.normed or { n = 0, map = {} }
  local path = rec.normed.map[p]
  if path == nil then
    path = H.norm(H.abs(p, cwd))
    if rec.normed.n < 4096 then
      rec.normed.map[p], rec.normed.n = path, rec.normed.n + 1
    end
  end
  return path
end

--- The broker's snapshot snap of path replaces the one the turn has when
--- that one was read from the disk here after the broker read its own
--- (an event before the decision, such as the call's announcement, is
--- handled here with it, after the agent has its answer) and nothing has
--- been seen to change the file since.
function H.earlier(rec, path, snap)
  local old = rec.seen[path]
  if snap == nil or snap.at == nil or old == nil or old.at == nil or old.at <= snap.at or rec.changed[path] ~= nil then
    return
  end
  rec.seen[path] = nil
  rec.nseen = rec.nseen - 1
  rec.bytes = rec.bytes - H.size(old)
end

--- The snapshot the broker read of path before it answered a call it
--- allowed by itself (doc/protocol.md `decided`): {text, stat},
--- {missing = true} or {skipped = why, stat}; nil when there is none or
--- path has a loaded buffer (the buffer is what the person has).
function H.given(g, path)
  if type(g) ~= 'table' or path == nil or H.find(path) ~= nil then
    return nil
  end
  local at = type(g.at) == 'number' and g.at or nil
  if type(g.text) == 'string' then
    local snap = H.from_text(g.text)
    snap.stat = compat.str(g.stat)
    snap.at = at
    return snap
  elseif g.missing == true then
    return { missing = true, lines = {}, at = at }
  elseif compat.str(g.skipped) then
    -- Not read (too large): changed when its size, time or inode move.
    return { unknown = true, lines = {}, stat = compat.str(g.stat), why = 'not snapshotted: ' .. g.skipped, at = at }
  end
  return nil
end

--- The end of turn rec of sid: its changes become part of the session's
--- ledger and the summary is emitted ('changes') and told.
function H.finish(sid, rec)
  local l = M.sessions[sid]
  if l == nil then
    return
  end
  l.cwd = state.sessions[sid] and state.sessions[sid].cwd and H.norm(state.sessions[sid].cwd) or l.cwd
  local files = {}
  rec.after = {}
  for _, path in ipairs(rec.order) do
    local snap = rec.seen[path]
    -- The file as the agent left it: what review() compares with.
    -- (A fresh table: revert() edits its lines.)
    local after = H.snapshot(path) or { lines = {}, unknown = true }
    rec.after[path] = after
    local f = l.files[path]
    if f == nil then
      f = { first = snap }
      l.files[path] = f
    end
    local info = rec.changed[path]
    info.why = H.why(sid, rec, path)
    after.spans = H.spans(sid, rec, path, snap, after, f.after)
    f.turn, f.after, f.why = rec.n, after, H.merge_why(f.why, info.why)
    local added, removed = 0, 0
    for _, h in ipairs(H.hunks(snap, after)) do
      added, removed = added + h.new_count, removed + h.old_count
    end
    files[#files + 1] = {
      path = path,
      added = added,
      removed = removed,
      how = info.how,
      conflict = info.conflict == true,
      unknown = snap.unknown == true,
      why = snap.why,
      created = snap.missing == true,
      toolCalls = info.why,
    }
  end
  -- Snapshots of files the turn did not change are not needed any more.
  local kept = {}
  for _, path in ipairs(rec.order) do
    kept[path] = rec.seen[path]
  end
  rec.seen = kept
  if #files == 0 then
    return
  end
  local data = { session = sid, turn = rec.n, files = files, summary = M.summary(files, l.cwd) }
  state.log('changes', data)
  state.emit('changes', data)
  vim.notify(text.truncate('(acp) ' .. data.summary .. ' — :AcpReview', math.max(vim.o.columns - 12, 40)), vim.log.levels.INFO)
end

--- One line: "changed 2 files: a.txt +3 -1, b.c (new) +10".
---@param files table[]
---@param cwd string|nil paths are shown relative to it
---@return string
function M.summary(files, cwd)
  local parts = {}
  for _, f in ipairs(files) do
    local s = H.show(f.path, cwd)
    if f.created then
      s = s .. ' (new)'
    end
    if f.conflict then
      s = s .. ' (on disk only: your buffer has unsaved changes)'
    elseif f.unknown then
      s = s .. ' (' .. (f.why or 'no snapshot') .. ')'
    else
      s = ('%s +%d -%d'):format(s, f.added, f.removed)
    end
    parts[#parts + 1] = s
  end
  return ('this turn changed %d file%s: %s'):format(#files, #files == 1 and '' or 's', table.concat(parts, ', '))
end

--- {path, snap, after} of the review's files (see M.review): after is
--- the file as the agent left it (at the end of the turn).
function H.entries(opts)
  local sid = compat.str(opts.session)
  if sid == nil then
    -- The current agent's session, else the last one that had a turn
    -- (its agent may have stopped).
    local a = state.agent()
    sid = a and a.session and M.sessions[a.session] and a.session or H.last
  end
  local l = sid and M.sessions[sid]
  if not l then
    return {}
  end
  local list = {}
  if opts.scope == 'turn' then
    for i = #l.turns, 1, -1 do
      local rec = l.turns[i]
      if not rec.live and rec.after ~= nil and #rec.order > 0 then
        for _, path in ipairs(rec.order) do
          local snap, after = rec.seen[path], rec.after[path]
          if snap and after and not snap.unknown and not after.unknown then
            list[#list + 1] = { path = path, snap = snap, after = after, why = rec.changed[path].why }
          end
        end
        break
      end
    end
  else
    for path, f in pairs(l.files) do
      if not f.first.unknown and f.after and not f.after.unknown then
        list[#list + 1] = { path = path, snap = f.first, after = f.after, why = f.why }
      end
    end
    table.sort(list, function(a, b)
      return a.path < b.path
    end)
  end
  return list
end

function H.entry(path, opts)
  path = H.norm(path)
  for _, e in ipairs(H.entries(opts or {})) do
    if e.path == path then
      return e
    end
  end
  return nil
end

--- The agent's hunks of entry e (snapshot → after), placed in the file
--- as it is now: new_start moved by the person's edits since (after →
--- now); conflict when those edits touch the hunk. after_start is the
--- hunk's place in e.after.
function H.agent_hunks(e)
  local now = H.snapshot(e.path)
  if now == nil then
    return {}
  end
  local mine = H.hunks(e.after, now)
  local list = {}
  for _, h in ipairs(H.hunks(e.snap, e.after)) do
    local at, conflict = H.place(mine, h.new_start, h.new_count)
    h.after_start, h.new_start, h.conflict = h.new_start, at, conflict
    list[#list + 1] = h
  end
  return list
end

--- Where lines s .. s+c-1 of the file as the agent left it are now (c = 0:
--- the place after line s), given the hunks `edits` from that file to now;
--- and whether an edit touches them.
function H.place(edits, s, c)
  local shift, conflict = 0, false
  for _, d in ipairs(edits) do
    local ds, dc = d.old_start, d.old_count
    local before, overlap
    if c > 0 then
      local last = s + c - 1
      if dc > 0 then
        before = ds + dc - 1 < s
        overlap = not before and ds <= last
      else
        before = ds < s
        overlap = ds >= s and ds < last
      end
    else
      if dc > 0 then
        before = ds + dc - 1 <= s
        overlap = not before and ds <= s
      else
        before = ds <= s
        overlap = false
      end
    end
    if before then
      shift = shift + d.new_count - d.old_count
    end
    conflict = conflict or overlap
  end
  return s + shift, conflict
end

--- Ends the undo block of buf: the revert is one undo step of its own,
--- never merged with the changes around it (setting 'undolevels' syncs
--- undo, even to the value it has).
function H.undo_break(buf)
  pcall(vim.api.nvim_buf_call, buf, function()
    vim.o.undolevels = vim.o.undolevels
  end)
end

--- count lines of `lines` from `first`.
function H.slice(lines, first, count)
  local out = {}
  for l = first, first + count - 1 do
    out[#out + 1] = lines[l]
  end
  return out
end

--- Replaces `count` lines from line `first` of buf (count 0: inserts after
--- line first) with `lines`.
function H.replace_buf(buf, first, count, lines)
  local a, b = first - 1, first - 1 + count
  if count == 0 then
    a, b = first, first
  end
  local total = vim.api.nvim_buf_line_count(buf)
  if total == 1 and vim.api.nvim_buf_get_lines(buf, 0, 1, false)[1] == '' then
    -- An empty buffer holds one empty line, which the file does not have.
    a, b = 0, 1
  end
  vim.api.nvim_buf_set_lines(buf, math.min(a, total), math.min(b, total), false, lines)
end

--- The same on a list of lines.
function H.splice(list, first, count, lines)
  local a = count == 0 and first or first - 1
  for _ = 1, count do
    table.remove(list, a + 1)
  end
  for i, l in ipairs(lines) do
    table.insert(list, a + i, l)
  end
end

--- The hunks between snapshots a (before) and b (after): `new_start` is
--- the first changed line of b, or with `new_count` 0 the line after which
--- lines were removed (old_* likewise).
function H.hunks(a, b)
  if a == nil or b == nil or a.unknown or b.unknown then
    return {}
  end
  local ok, idx = pcall(text.diff, text.diff_text(a.lines), text.diff_text(b.lines), { result_type = 'indices' })
  local list = {}
  for _, h in ipairs(ok and type(idx) == 'table' and idx or {}) do
    list[#list + 1] = { old_start = h[1], old_count = h[2], new_start = h[3], new_count = h[4] }
  end
  return list
end


function H.size(snap)
  local n = 0
  for _, l in ipairs(snap.lines) do
    n = n + #l + 1
  end
  return n
end

function H.same(a, b)
  return (a.missing == true) == (b.missing == true) and text.diff_text(a.lines) == text.diff_text(b.lines)
end

--- What the person has of path now: the loaded buffer, else the disk;
--- {missing = true} when neither; nil when it cannot be read (too big,
--- not a file).
function H.snapshot(path)
  local buf = H.find(path)
  if buf ~= nil then
    return H.buf_snapshot(buf)
  end
  -- When it was read (the broker's snapshots say when theirs were).
  local at = compat.uv.hrtime()
  local data, st = compat.read_file(path, M.max_bytes)
  if st == nil then
    return { missing = true, lines = {}, at = at }
  end
  if data == nil then
    return nil
  end
  local snap = H.from_text(data)
  snap.stat = H.stat_key(st)
  snap.at = at
  return snap
end

function H.stat_key(st)
  return ('%d:%d.%d:%d'):format(st.size, st.mtime.sec, st.mtime.nsec or 0, st.ino or 0)
end

--- Whether path on disk has the size, time and inode it had when snapshot
--- snap was read from it (then it was not read again).
function H.same_stat(snap, path)
  local st = snap.stat and compat.uv.fs_stat(path)
  return st ~= nil and st ~= false and H.stat_key(st) == snap.stat
end

function H.buf_snapshot(buf)
  local lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  if #lines == 1 and lines[1] == '' then
    lines = {}
  end
  return { lines = lines, eol = vim.api.nvim_buf_get_option(buf, 'eol') }
end

function H.from_text(s)
  local lines, eol = text.file_lines(s)
  return { lines = lines, eol = eol }
end

H.find = fs.find

--- path with symlinks resolved (of its directory when it does not exist).
H.norm = compat.realpath

function H.abs(p, cwd)
  if p:sub(1, 1) == '/' or cwd == nil then
    return p
  end
  return compat.join(cwd, p)
end

function H.show(path, cwd)
  if cwd ~= nil and path:sub(1, #cwd + 1) == cwd .. '/' then
    return path:sub(#cwd + 2)
  end
  return vim.fn.fnamemodify(path, ':~:.')
end

M._H = H
--- path with symlinks resolved (of its directory when it does not exist).
M.norm = function(path)
  return H.norm(path)
end

state.on('event', M.on_event)

return M
