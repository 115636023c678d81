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
  local logged = #state.events
  local n = count_exists(function()
    broker._on_events(list)
    -- The effects run once Neovim may block again.
    vim.wait(200, function()
      return false
    end)
  end)
  T.ok(n <= 2, ('vim.fn.exists called %d times for 300 decided events'):format(n))
  local users = 0
  for i = logged + 1, #state.events do
    if state.events[i].event == 'AcpPermissionDecided' then
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
  local logged = #state.events
  broker._on_events({ decided(11) })
  local e = state.events[logged + 1]
  T.eq(e.event, 'decided', 'logged')
  T.eq({ e.data.session, e.data.toolCallId, e.data.decision, e.data.rule, e.data.optionId }, { sid, 'auto_11', 'allow', 'Bash(ls *)', 'ok' }, 'by name')
  T.eq(e.data[decided_ev.TOOL_CALL_ID], 'auto_11', 'by position')
  T.eq(e.data.snapshots, nil, 'an item left out reads as nil')
  broker._on_events({ { 'decided', { 'ghost', sid, 'auto_14', 'execute', true, 'ls 14', 'allow', 'mode' } } })
  T.eq(state.events[#state.events].data.title, 'ls 14', 'a title that is the command, by name')
  T.eq(e.data.nosuch, nil, 'a name that is no item reads as nil')
  -- A map (the form before) is still read.
  local _, map = decided(12)
  broker._on_events({ { 'decided', map } })
  T.eq(state.events[#state.events].data.toolCallId, 'auto_12', 'a map, by name')
  T.eq(state.events[#state.events].data[decided_ev.RULE], 'Bash(ls *)', 'a map, by position')
end)

T.done()
