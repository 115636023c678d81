-- The `decided` events of requests the broker answered itself, as they come:
-- thousands a second in batches (require('acp.broker')._on_events, the entry
-- point the broker calls). What Lua does per event is kept small; what a
-- person and an autocommand see stays the same.
local T = require('helpers')

local broker = require('acp.broker')
local decided_ev = require('acp.decided')
local state = require('acp.state')
local sid, agent = 'decided-1', 'ghost'

--- The session of the events goes away after the test.
local function cleanup()
  T.defer(function()
    broker._on_event('agent_exit', { agent = agent, code = 0 })
  end)
end

--- The event as the broker sends it: an array (acp.decided), the items
--- after the last one present left out.
local function pack(d)
  local a = decided_ev.from_map(d)
  while #a > 0 and a[#a] == vim.NIL do
    a[#a] = nil
  end
  return a
end

local function decided(n, extra)
  local d = {
    agent = agent,
    session = sid,
    toolCallId = 'auto_' .. n,
    title = 'ls ' .. n,
    kind = 'execute',
    decision = 'allow',
    optionId = 'ok',
    reason = 'allowed by Bash(ls *) (setup)',
    rule = 'Bash(ls *)',
    source = 'setup',
    by = 'rule',
    command = 'ls ' .. n,
    atoms = { { kind = 'command', text = 'ls ' .. n } },
    paths = {},
  }
  for k, v in pairs(extra or {}) do
    d[k] = v
  end
  return { 'decided', pack(d) }, d
end

--- The last event logged.
local function last()
  local ev = state.logged()
  return ev[#ev]
end

--- Counts the calls of vim.fn.exists while fn runs and its effects are done.
local function count_exists(fn)
  local orig, n = vim.fn.exists, 0
  vim.fn.exists = function(...)
    n = n + 1
    return orig(...)
  end
  local ok, err = pcall(fn)
  vim.fn.exists = orig
  assert(ok, err)
  return n
end

T.test('a burst with no AcpPermissionDecided autocommand: one lookup, no copy in the log, one folded echo', function()
  cleanup()
  local list = {}
  for i = 1, 300 do
    list[i] = decided(i)
  end
  local logged = state.nlogged
  local requests = require('acp.events').requests
  local n = count_exists(function()
    broker._on_events(list)
    -- Each counts as a request of the agent (a hidden chat waits while
    -- they come: lua/acp/chat/window.lua).
    T.eq(require('acp.events').requests - requests, 300, 'requests counted')
    -- The effects run once Neovim may block again.
    vim.wait(200, function()
      return false
    end)
  end)
  T.ok(n <= 2, ('vim.fn.exists called %d times for 300 decided events'):format(n))
  local users = 0
  for _, e in ipairs(state.logged(logged)) do
    if e.event == 'AcpPermissionDecided' then
      users = users + 1
    end
  end
  T.eq(users, 0, 'no AcpPermissionDecided data was built or logged')
  T.wait(function()
    return vim.fn.execute('messages'):find('acp: 300 requests allowed; last: ls 300: allowed by Bash(ls *)', 1, true)
  end, nil, 'the folded echo:\n' .. vim.fn.execute('messages'))
end)

T.test('with an autocommand: every decision, in order, with its data', function()
  cleanup()
  local seen = T.on('AcpPermissionDecided')
  broker._on_events({
    decided(1, { title = vim.NIL }),
    decided(2, { decision = 'deny', optionId = vim.NIL, reason = 'denied by Bash(rm *) (setup)' }),
    decided(3),
  })
  T.wait(function()
    return #seen == 3
  end, nil, 'three AcpPermissionDecided')
  T.eq({ seen[1].toolCallId, seen[2].toolCallId, seen[3].toolCallId }, { 'auto_1', 'auto_2', 'auto_3' }, 'in order')
  T.eq(seen[1].title, 'execute', 'a missing title: the kind')
  T.eq(seen[1].atoms, { { kind = 'command', text = 'ls 1', inner = false } }, 'the atoms')
  T.eq(seen[2].decision, 'deny', 'the denial')
  T.eq(seen[3].rule, 'Bash(ls *)', 'the rule')
  T.contains(T.notes_text(), '(acp) denied ls 2: denied by Bash(rm *) (setup)', 'the denial is told')
end)

T.test('the short event: atoms that are the command, an empty rule and a null optionId left out', function()
  cleanup()
  local seen = T.on('AcpPermissionDecided')
  local _, plain = decided(6)
  plain.atoms = nil
  local _, bare = decided(7, { kind = 'read', title = 'Read a.txt', by = 'mode', reason = 'reads inside the project' })
  bare.atoms, bare.command, bare.rule, bare.source = nil, nil, nil, nil
  local _, denied = decided(8, { decision = 'deny', reason = 'denied by Bash(rm *) (setup)', rule = 'Bash(rm *)' })
  denied.optionId = nil
  broker._on_events({ { 'decided', pack(plain) }, { 'decided', pack(bare) }, { 'decided', pack(denied) } })
  T.wait(function()
    return #seen == 3
  end, nil, 'three AcpPermissionDecided')
  T.eq(seen[1].atoms, { { kind = 'command', text = 'ls 6', inner = false } }, 'the command is its atom')
  T.eq(seen[1].rule, 'Bash(ls *)', 'the rule')
  T.eq(seen[2].atoms, {}, 'no command: no atoms')
  T.eq({ seen[2].rule, seen[2].source, seen[2].by, seen[2].kind }, { nil, nil, 'mode', 'read' }, 'no rule, by the mode')
  T.eq(seen[3].atoms, { { kind = 'command', text = 'ls 8', inner = false } }, 'sent atoms are kept')
  T.eq({ seen[3].decision, seen[3].optionId }, { 'deny', nil }, 'denied, cancelled')
end)

T.test('an autocommand an earlier effect defines sees the decisions after it', function()
  cleanup()
  local late = {}
  local group = vim.api.nvim_create_augroup('acp_e2e_late', { clear = true })
  T.defer(function()
    pcall(vim.api.nvim_del_augroup_by_id, group)
  end)
  vim.api.nvim_create_autocmd('User', {
    group = group,
    pattern = 'AcpTurnEnd',
    once = true,
    callback = function()
      vim.api.nvim_create_autocmd('User', {
        group = group,
        pattern = 'AcpPermissionDecided',
        callback = function()
          local last = vim.g.acp_last_event
          late[#late + 1] = last and last.data and last.data.toolCallId
        end,
      })
    end,
  })
  -- None at first: the first decision finds none, the turn's end defines one.
  broker._on_events({
    decided(4),
    { 'turn_end', { agent = agent, session = sid, stopReason = 'end_turn' } },
    decided(5),
  })
  T.wait(function()
    return #late == 1
  end, nil, 'the later decision')
  T.eq(late, { 'auto_5' }, 'only the decision after it')
end)

T.test('the User data, field for field, from the array the broker sends', function()
  cleanup()
  local seen = T.on('AcpPermissionDecided')
  -- Every item present: two atoms, one inner; the paths and snapshots of an
  -- allowed edit (which the User data never had).
  local full = {
    'ghost',
    sid,
    'auto_9',
    'execute',
    'Run it',
    'ls $(pwd) && rm -rf x',
    'allow',
    'rule',
    'ok',
    'allowed by Bash(ls *) (setup)',
    'Bash(ls *)',
    'setup',
    { 'command', 'ls $(pwd)', false, 'command', 'pwd', true, 'command', 'rm -rf x', false },
    { '/tmp/x' },
    vim.NIL,
  }
  -- The least: no agent, the rest left out after `by`.
  local least = { vim.NIL, sid, 'auto_10', vim.NIL, vim.NIL, vim.NIL, 'deny', 'yolo' }
  -- A title that is the command: true.
  local same = { 'ghost', sid, 'auto_13', 'execute', true, 'ls 13', 'allow', 'mode' }
  broker._on_events({ { 'decided', full }, { 'decided', least }, { 'decided', same } })
  T.wait(function()
    return #seen == 3
  end, nil, 'three AcpPermissionDecided')
  T.eq(seen[1], {
    agent = 'ghost',
    session = sid,
    toolCallId = 'auto_9',
    title = 'Run it',
    kind = 'execute',
    decision = 'allow',
    optionId = 'ok',
    reason = 'allowed by Bash(ls *) (setup)',
    rule = 'Bash(ls *)',
    source = 'setup',
    by = 'rule',
    command = 'ls $(pwd) && rm -rf x',
    atoms = {
      { kind = 'command', text = 'ls $(pwd)', inner = false },
      { kind = 'command', text = 'pwd', inner = true },
      { kind = 'command', text = 'rm -rf x', inner = false },
    },
  }, 'every field')
  T.eq(seen[2], {
    session = sid,
    toolCallId = 'auto_10',
    title = 'a tool call',
    kind = 'other',
    decision = 'deny',
    by = 'yolo',
    atoms = {},
  }, 'the least')
  T.eq(seen[3], {
    agent = 'ghost',
    session = sid,
    toolCallId = 'auto_13',
    title = 'ls 13',
    kind = 'execute',
    decision = 'allow',
    by = 'mode',
    command = 'ls 13',
    atoms = { { kind = 'command', text = 'ls 13', inner = false } },
  }, 'the title that is the command')
end)

T.test('the event log and the views read the array by name', function()
  cleanup()
  local logged = state.nlogged
  broker._on_events({ decided(11) })
  local e = state.logged(logged)[1]
  T.eq(e.event, 'decided', 'logged')
  T.eq({ e.data.session, e.data.toolCallId, e.data.decision, e.data.rule, e.data.optionId }, { sid, 'auto_11', 'allow', 'Bash(ls *)', 'ok' }, 'by name')
  T.eq(e.data[decided_ev.TOOL_CALL_ID], 'auto_11', 'by position')
  T.eq(e.data.snapshots, nil, 'an item left out reads as nil')
  broker._on_events({ { 'decided', { 'ghost', sid, 'auto_14', 'execute', true, 'ls 14', 'allow', 'mode' } } })
  T.eq(last().data.title, 'ls 14', 'a title that is the command, by name')
  T.eq(e.data.nosuch, nil, 'a name that is no item reads as nil')
  -- A map (the form before) is still read.
  local _, map = decided(12)
  broker._on_events({ { 'decided', map } })
  T.eq(last().data.toolCallId, 'auto_12', 'a map, by name')
  T.eq(last().data[decided_ev.RULE], 'Bash(ls *)', 'a map, by position')
end)

--- The toolCallIds of the `decided` events logged after position `from`.
local function logged_ids(from)
  local ids = {}
  for _, e in ipairs(state.logged(from)) do
    if e.event == 'decided' then
      ids[#ids + 1] = e.data.toolCallId
    end
  end
  return ids
end

T.test('one failing event of a batch does not lose the others (one pcall per batch)', function()
  cleanup()
  local events = require('acp.events')
  local orig = events.handle
  T.defer(function()
    events.handle = orig
  end)
  -- The 2nd, the 5th and the last event fail before they are logged.
  local fail = { auto_2 = true, auto_5 = true, auto_7 = true }
  events.handle = function(name, data)
    if name == 'decided' and fail[data[decided_ev.TOOL_CALL_ID]] then
      error('boom ' .. data[decided_ev.TOOL_CALL_ID])
    end
    return orig(name, data)
  end
  local list = {}
  for i = 1, 7 do
    list[i] = decided(i)
  end
  local logged = state.nlogged
  broker._on_events(list)
  T.eq(logged_ids(logged), { 'auto_1', 'auto_3', 'auto_4', 'auto_6' }, 'the others are handled, in order')
  T.wait(function()
    return #T.notes_with('internal error handling broker event decided') == 3
  end, nil, 'each failure reported once:\n' .. T.notes_text())
  for _, id in ipairs({ 'auto_2', 'auto_5', 'auto_7' }) do
    T.eq(#T.notes_with('boom ' .. id), 1, 'reported: ' .. id)
  end
end)

T.test('a failing view does not keep the views after it from seeing the event', function()
  cleanup()
  local failing, seen, nested = false, {}, 0
  state.on('event', function(name)
    if failing and name == 'decided' then
      -- A view that emits in turn before it fails.
      state.try_emit('test_nested')
      error('view boom')
    end
  end)
  state.on('test_nested', function()
    nested = nested + 1
  end)
  state.on('event', function(name, d)
    if failing and name == 'decided' then
      seen[#seen + 1] = d.toolCallId
    end
  end)
  T.defer(function()
    failing = false
  end)
  failing = true
  local events = require('acp.events')
  events.view_error = nil
  broker._on_events({ decided(21), decided(22) })
  failing = false
  T.eq(seen, { 'auto_21', 'auto_22' }, 'the later view saw both events')
  T.eq(nested, 2, 'the nested emit ran')
  T.ok(tostring(events.view_error):find('view boom', 1, true), 'the error is kept: ' .. tostring(events.view_error))
end)

T.test('a failing deferred effect does not lose the ones after it', function()
  local events = require('acp.events')
  local ran = {}
  events.defer(function()
    ran[#ran + 1] = 1
  end)
  events.defer(function()
    error('effect boom')
  end)
  events.defer(function()
    ran[#ran + 1] = 3
  end)
  events.defer(function()
    error('effect boom 2')
  end)
  T.wait(function()
    return #ran == 2 and #T.notes_with('effect boom') == 2
  end, nil, 'ran: ' .. vim.inspect(ran) .. ' notes:\n' .. T.notes_text())
  T.eq(ran, { 1, 3 }, 'in order')
end)

T.test('a listener of some events is called for those only', function()
  cleanup()
  local got = {}
  state.subscribe(function(name, d)
    got[#got + 1] = name .. ':' .. tostring(d.agent)
  end, { 'turn_end' })
  broker._on_events({ decided(31), { 'turn_start', { agent = agent, session = sid } }, { 'turn_end', { agent = agent, session = sid } } })
  T.wait(function()
    return #got > 0
  end, nil, 'the listener was called')
  T.wait_ms(50)
  T.eq(got, { 'turn_end:' .. agent }, 'once, for turn_end')
end)

T.test('the event log is a ring of the last events, read oldest first', function()
  local from = state.nlogged
  for i = 1, 1000 do
    state.log('test_ring', { i = i })
  end
  T.eq(state.nlogged, from + 1000, 'every event counted')
  local all = state.logged()
  T.eq(#all, 2 * state.max_events, 'twice max_events kept')
  T.eq({ all[1].event, all[1].data.i, all[#all].data.i }, { 'test_ring', 1001 - 2 * state.max_events, 1000 }, 'the last ones, in order')
  local tail = state.logged(state.nlogged - 3)
  T.eq({ #tail, tail[1].data.i, tail[3].data.i }, { 3, 998, 1000 }, 'those after a position')
  T.eq(#state.logged(state.nlogged), 0, 'none after the last')
end)

T.test('the kind, the decision and by sent as numbers read as their words', function()
  cleanup()
  local seen = T.on('AcpPermissionDecided')
  --- The event e again with other toolCallId, the words as the broker sends
  --- them (src/broker/verdict.c: the n-th word of acp.decided's lists).
  local function as_numbers(e, tcid, kind, decision, by)
    local n = { e[1], {} }
    for i, v in pairs(e[2]) do
      n[2][i] = v
    end
    n[2][decided_ev.TOOL_CALL_ID], n[2][decided_ev.KIND], n[2][decided_ev.DECISION], n[2][decided_ev.BY] = tcid, kind, decision, by
    return n
  end
  local a = decided(21)
  local b = decided(22, { kind = 'edit', decision = 'deny', by = 'mode', optionId = vim.NIL, reason = 'denied by the mode' })
  local c = decided(23, { kind = 'switch_mode', by = 'yolo' })
  broker._on_events({
    a,
    as_numbers(a, 'auto_21', 6, 1, 1),
    b,
    as_numbers(b, 'auto_22', 2, 2, 3),
    c,
    as_numbers(c, 'auto_23', 10, 1, 4),
    -- Numbers of no word: no kind (the tool call's, else `other`), no
    -- decision (`?`), no by.
    as_numbers(a, 'auto_24', 99, 7, 0),
  })
  T.wait(function()
    return #seen == 7
  end, nil, 'seven AcpPermissionDecided')
  for i = 1, 5, 2 do
    T.eq(seen[i + 1], seen[i], 'event ' .. i .. ' with numbers')
  end
  T.eq({ seen[3].kind, seen[3].decision, seen[3].by }, { 'edit', 'deny', 'mode' }, 'the words')
  T.eq({ seen[5].kind, seen[5].by }, { 'switch_mode', 'yolo' }, 'the last words of the lists')
  T.eq({ seen[7].kind, seen[7].decision, seen[7].by }, { 'other', '?', nil }, 'numbers of no word')
  local ev = last()
  T.eq({ ev.event, ev.data.decision }, { 'AcpPermissionDecided', '?' }, 'the log')
  T.contains(T.notes_text(), '(acp) denied ls 22: denied by the mode', 'the denial with numbers is told')
end)

T.test('a burst of decided events is compiled by LuaJIT: no trace of the plugin aborts on a bytecode it cannot compile', function()
  -- A closure made in a function on the path of every event (bytecodes FNEW,
  -- UCLO) or a vararg (VARG) sends every trace through it back to the
  -- interpreter: several times the instructions per event.
  if type(jit) ~= 'table' or type(jit.attach) ~= 'function' or not jit.status() then
    T.ok(true, 'no JIT here')
    return
  end
  local util = require('jit.util')
  local NYIBC = 7 -- lj_traceerr.h: "NYI: bytecode %d"
  -- Inside the RPC call (`inside`) anywhere in the plugin; after it, in the
  -- deferred effects of acp.events (the chat's drawing on its timer is
  -- not on the path of every event).
  local inside, bad = false, {}
  local function on_trace(what, _, func, pc, err, info)
    if what == 'abort' and err == NYIBC then
      local fi = util.funcinfo(func, pc)
      local where = ('%s:%s'):format(tostring(fi.source), tostring(fi.currentline))
      if where:find('/lua/acp/', 1, true) and (inside or where:find('/lua/acp/events.lua:', 1, true)) then
        bad[#bad + 1] = ('%s (bytecode %s)'):format(where:match('lua/acp/.*'), tostring(info))
      end
    end
  end
  cleanup()
  broker._on_events({ { 'turn_start', { agent = agent, session = sid } } })
  jit.attach(on_trace, 'trace')
  local ok, err = pcall(function()
    for b = 0, 39 do
      local list = {}
      for i = 1, 50 do
        list[i] = decided(b * 50 + i)
      end
      inside = true
      broker._on_events(list)
      inside = false
      -- The deferred effects run (the folded echo's timer too).
      vim.wait(5, function()
        return false
      end)
    end
  end)
  inside = false
  jit.attach(on_trace)
  assert(ok, err)
  T.eq(bad, {}, 'trace aborts in the plugin')
end)

T.done()

T.test('state.emit refuses a third argument rather than dropping it', function()
  local got
  state.on('test_three', function(a, b)
    got = { a, b }
  end)
  T.eq(state.try_emit('test_three', 1, 2), nil, 'two arguments go through')
  T.eq(got, { 1, 2 }, 'the subscriber had both')
  got = nil
  local err = state.try_emit('test_three', 1, 2, 3)
  T.ok(type(err) == 'string' and err:find('at most two arguments', 1, true), 'an error: ' .. tostring(err))
  T.eq(got, nil, 'nothing was called')
  T.ok(not pcall(state.emit, 'test_three', 1, 2, 3), 'emit raises it')
end)
