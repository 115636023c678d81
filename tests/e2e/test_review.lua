-- The turn ledger and :AcpReview: each file the agent changes in a turn is
-- snapshotted before its first change; the turn ends with a summary (files,
-- +/- lines) in the chat and a notice; :AcpReview lists the agent's hunks
-- in the quickfix list, shows a file against its snapshot, and reverts a
-- hunk, a file or everything (undoable, never touching the person's own
-- later edits). Reverting tells the agent nothing.
local T = require('helpers')
local api = vim.api

local OPTIONS = {
  { kind = 'allow_once', name = 'Allow', optionId = 'allow' },
  { kind = 'reject_once', name = 'Reject', optionId = 'reject' },
}

-- A Claude-shaped edit of `name` (announced with its location and diff)
-- whose allow writes `new` through fs/write_text_file.
local function edit(id, name, old, new)
  return {
    type = 'permission',
    announce = true,
    toolCall = {
      toolCallId = id .. '_${turn}',
      title = 'Write ' .. name,
      kind = 'edit',
      locations = { { path = '${cwd}/' .. name } },
      content = { { type = 'diff', path = '${cwd}/' .. name, oldText = old or vim.NIL, newText = new } },
      rawInput = { file_path = '${cwd}/' .. name },
    },
    options = OPTIONS,
    on_allow = { type = 'write', path = name, content = new },
  }
end

local function allow(tcid)
  local p = T.wait_pending(tcid)
  T.ok(require('acp').respond(p.id, 'allow'), 'allowed ' .. tcid)
end

local function lines(buf)
  return api.nvim_buf_get_lines(buf, 0, -1, false)
end

-- Waits for the summary of the turn of ctx's session (the 'changes' event).
local function changes(ctx)
  return T.wait(function()
    local ev = require('acp.state').logged()
    for i = #ev, 1, -1 do
      if ev[i].event == 'changes' and ev[i].data.session == ctx.session then
        return ev[i].data
      end
    end
  end, nil, 'the changes of the turn')
end

local function buf_text(buf)
  return buf and table.concat(api.nvim_buf_get_lines(buf, 0, -1, false), '\n') or ''
end

T.test('the end of a turn shows which files it changed, with +/- lines', function()
  local project = T.project()
  T.write(project .. '/a.txt', 'one\ntwo\nthree\n')
  vim.cmd('edit ' .. vim.fn.fnameescape(project .. '/a.txt'))
  local ctx = T.start_demo({
    name = 'ledger',
    steps = {
      edit('wa', 'a.txt', 'one\ntwo\nthree\n', 'one\nTWO\nthree\nfour\n'),
      edit('wn', 'new.txt', nil, 'x\ny\n'),
      { type = 'message', text = 'Wrote two files.' },
    },
  }, { project = project })
  require('acp').chat()
  require('acp').prompt('Change a.txt, add new.txt')
  allow('wa_1')
  allow('wn_1')
  T.idle()
  local data = changes(ctx)
  T.eq(data.session, ctx.session, 'session')
  local got = {}
  for _, f in ipairs(data.files) do
    got[#got + 1] = { vim.fn.fnamemodify(f.path, ':t'), f.added, f.removed, f.created }
  end
  T.eq(got, { { 'a.txt', 2, 1, false }, { 'new.txt', 2, 0, true } }, 'files, lines added and removed')
  T.eq(data.files[1].toolCalls, { { toolCallId = 'wa_1', title = 'Write a.txt', decision = 'allowed by you' } }, 'the tool call that changed a.txt')
  T.contains(data.summary, 'this turn changed 2 files', 'summary')
  T.contains(data.summary, 'a.txt +2 -1', 'summary of a.txt')
  T.wait(function()
    return T.notes_text():find('this turn changed 2 files', 1, true)
  end, nil, 'the notice')
  T.wait(function()
    return buf_text(require('acp.chat').buffer(ctx.session)):find('this turn changed 2 files', 1, true)
  end, nil, 'the summary in the chat')
end)

T.test(':AcpReview lists the hunks; revert one, then the file; the person keeps their own edit; undoable', function()
  local project = T.project()
  local old = 'l1\nl2\nl3\nl4\nl5\nl6\nl7\nl8\nl9\nl10\n'
  T.write(project .. '/code.txt', old)
  vim.cmd('edit ' .. vim.fn.fnameescape(project .. '/code.txt'))
  local buf, win = api.nvim_get_current_buf(), api.nvim_get_current_win()
  local ctx = T.start_demo({
    name = 'review',
    steps = { edit('wc', 'code.txt', old, 'l1\nL2\nl3\nl4\nl5\nl6\nl7\nl8\nL9\nl10\n') },
  }, { project = project })
  require('acp').prompt('Capitalise two lines')
  allow('wc_1')
  T.idle()
  changes(ctx)
  T.eq(lines(buf)[2], 'L2', "the agent's write reached the buffer")
  -- The person edits another line afterwards, without saving.
  api.nvim_buf_set_lines(buf, 4, 5, false, { 'mine' })

  local review = require('acp').review()
  T.eq(#review, 1, 'one file in review()')
  T.eq(review[1].path, vim.loop.fs_realpath(project .. '/code.txt'), 'its path')
  T.eq(#review[1].hunks, 2, "the agent's two hunks, not the person's edit")
  T.eq(review[1].hunks[1].new_start, 2, 'first hunk at line 2')

  api.nvim_set_current_win(win)
  vim.cmd('AcpReview')
  local qf = vim.fn.getqflist()
  T.eq(#qf, 2, 'two quickfix entries')
  T.eq({ qf[1].lnum, qf[2].lnum }, { 2, 9 }, 'their lines')
  T.contains(qf[1].text, 'L2', 'the text of the first')
  T.contains(qf[1].text, '[Write code.txt: allowed by you]', 'the tool call and its decision')
  T.eq(vim.fn.getqflist({ title = 0 }).title:match('^acp review') ~= nil, true, 'the title')

  -- The diff view: the file beside its snapshot.
  vim.cmd('AcpReview diff ' .. vim.fn.fnameescape(project .. '/code.txt'))
  local snap_buf
  for _, w in ipairs(api.nvim_tabpage_list_wins(0)) do
    if api.nvim_win_get_buf(w) ~= buf then
      snap_buf = api.nvim_win_get_buf(w)
    end
    T.ok(vim.wo[w].diff, 'both windows in diff mode')
  end
  T.eq(lines(snap_buf), { 'l1', 'l2', 'l3', 'l4', 'l5', 'l6', 'l7', 'l8', 'l9', 'l10' }, 'the snapshot')
  vim.cmd('tabclose')

  -- Revert the hunk under the cursor.
  api.nvim_set_current_win(win)
  api.nvim_win_set_cursor(win, { 2, 0 })
  vim.cmd('AcpReview revert')
  T.eq(lines(buf), { 'l1', 'l2', 'l3', 'l4', 'mine', 'l6', 'l7', 'l8', 'L9', 'l10' }, 'hunk 1 reverted, the rest kept')
  T.ok(vim.bo[buf].modified, 'not written: the person has unsaved changes')
  T.eq(#require('acp').review()[1].hunks, 1, 'one hunk left in review()')
  T.eq(#vim.fn.getqflist(), 1, 'the quickfix list follows')

  -- Revert the rest of the file.
  vim.cmd('AcpReview revert file')
  T.eq(lines(buf), { 'l1', 'l2', 'l3', 'l4', 'mine', 'l6', 'l7', 'l8', 'l9', 'l10' }, 'all reverted; the edit kept')
  T.eq(#require('acp').review(), 0, 'nothing left to review')

  api.nvim_buf_call(buf, function()
    vim.cmd('silent undo')
  end)
  T.eq(lines(buf)[9], 'L9', 'undo brings back the last reverted hunk')

  T.eq(vim.fn.getcompletion('AcpReview re', 'cmdline'), { 'revert' }, 'completion of the subcommand')
  T.eq(vim.fn.getcompletion('AcpReview revert ', 'cmdline'), { 'file', 'all' }, 'completion of revert')

  -- Nothing was sent to the agent.
  local prompts = T.messages(T.transcript(ctx.transcript), 'in', 'session/prompt')
  T.eq(#prompts, 1, 'the agent got one prompt, nothing about the revert')
end)

T.test('a hunk the person edited since is not reverted', function()
  local project = T.project()
  local old = 'a\nb\nc\n'
  T.write(project .. '/x.txt', old)
  vim.cmd('edit ' .. vim.fn.fnameescape(project .. '/x.txt'))
  local buf = api.nvim_get_current_buf()
  local ctx = T.start_demo({ name = 'conflict', steps = { edit('wx', 'x.txt', old, 'a\nB\nc\n') } }, { project = project })
  require('acp').prompt('Change b')
  allow('wx_1')
  T.idle()
  changes(ctx)
  api.nvim_buf_set_lines(buf, 1, 2, false, { 'B and mine' })
  local review = require('acp').review()
  T.eq(review[1].hunks[1].conflict, true, 'the hunk is marked')
  local ok = require('acp').revert(project .. '/x.txt', 1)
  T.eq(ok, false, 'revert refused')
  T.eq(lines(buf), { 'a', 'B and mine', 'c' }, "the person's line is kept")
end)

T.test('a file the agent wrote directly on disk, no buffer: reviewed and reverted on disk', function()
  local project = T.project()
  local path = project .. '/d.txt'
  T.write(path, 'keep\nold\n')
  local step = edit('wd', 'd.txt', 'keep\nold\n', 'keep\nnew\nmore\n')
  step.on_allow = nil -- the test writes it, as an agent that writes itself
  local ctx = T.start_demo({ name = 'direct', steps = { step } }, { project = project })
  require('acp').prompt('Edit d.txt')
  local p = T.wait_pending('wd_1')
  T.write(path, 'keep\nnew\nmore\n')
  T.ok(require('acp').respond(p.id, 'allow'), 'allowed')
  T.idle()
  local data = changes(ctx)
  T.eq({ data.files[1].added, data.files[1].removed }, { 2, 1 }, '+2 -1')
  T.eq(data.files[1].how, 'disk', 'seen on disk')
  vim.cmd('AcpReview revert all')
  T.eq(T.read(path), 'keep\nold\n', 'the file is as before the turn')
end)

T.test('an edit the mode allows (no prompt, no announcement, as Gemini): snapshotted from the decision', function()
  local project = T.project()
  local path = project .. '/g.txt'
  T.write(path, 'one\ntwo\n')
  local step = edit('wg', 'g.txt', 'one\ntwo\n', 'one\n2\n')
  step.announce = nil
  local ctx = T.start_demo({ name = 'gemini-edit', steps = { step } }, {
    project = project,
    setup = { ui = { arm_ms = 50 }, permissions = { defaultMode = 'acceptEdits' } },
  })
  require('acp').prompt('Edit g.txt')
  T.idle()
  local data = changes(ctx)
  T.eq({ data.files[1].added, data.files[1].removed, data.files[1].unknown }, { 1, 1, false }, '+1 -1 against its snapshot')
  T.contains(data.files[1].toolCalls[1].decision, 'allowed by mode', 'how it was decided')
  T.ok(require('acp').revert(path), 'reverted')
  T.eq(T.read(path), 'one\ntwo\n', 'the file on disk')
end)

T.test('a file a command changed (sed -i in a terminal), not loaded: snapshotted from the request, summed up, reverted', function()
  local project = T.project()
  local path = project .. '/s.txt'
  T.write(path, 'alpha\nbeta\n')
  local sed = "sed -i 's/^beta$/BETA/' s.txt"
  local step = T.shell_request('sed_${turn}', sed, OPTIONS)
  step.on_allow = { type = 'run', command = sed }
  local ctx = T.start_demo({ name = 'sed', steps = { step } }, { project = project })
  require('acp').prompt('Capitalise beta')
  allow('sed_1')
  T.idle()
  local data = changes(ctx)
  T.eq({ vim.fn.fnamemodify(data.files[1].path, ':t'), data.files[1].added, data.files[1].removed }, { 's.txt', 1, 1 }, 's.txt +1 -1')
  T.eq(T.read(path), 'alpha\nBETA\n', 'the command ran')
  vim.cmd('AcpReview revert all')
  T.eq(T.read(path), 'alpha\nbeta\n', 'reverted on disk')
end)

T.test('each hunk names the tool call that made it and how that call was allowed', function()
  local project = T.project()
  local path = project .. '/code.txt'
  T.write(path, 'l1\nl2\nl3\nl4\nl5\nl6\nl7\nl8\nl9\nl10\n')
  -- A command a rule allows changes lines 5 and 9; it names line 9 only.
  -- Neovim hears of it only once the agent has its answer, and the command
  -- may have run by then: the broker read the file before answering.
  local sed = "sed -i -e 's/^l9$/L9/' -e 's/^l5$/L5/' code.txt"
  local step1 = T.shell_request('sed_${turn}', sed, OPTIONS)
  step1.toolCall.locations = { { path = '${cwd}/code.txt', line = 9 } }
  step1.on_allow = { type = 'run', command = sed }
  -- Then an edit the person allows changes line 2; its diff is a snippet
  -- (as Claude's Edit), its write the whole file.
  local step2 = edit('wc', 'code.txt', 'l2', 'L2')
  step2.on_allow = { type = 'write', path = 'code.txt', content = 'l1\nL2\nl3\nl4\nL5\nl6\nl7\nl8\nL9\nl10\n' }
  local ctx = T.start_demo({ name = 'two-calls', steps = { step1, step2 } }, {
    project = project,
    setup = { ui = { arm_ms = 50 }, permissions = { allow = { 'Bash(sed *)' } } },
  })
  require('acp').prompt('Capitalise three lines')
  allow('wc_1')
  T.idle()
  changes(ctx)
  local hunks = require('acp').review()[1].hunks
  local got = {}
  for _, h in ipairs(hunks) do
    got[#got + 1] = { h.new_start, h.toolCall.toolCallId, h.toolCall.decision }
  end
  T.eq(got, {
    { 2, 'wc_1', 'allowed by you' }, -- its diff covers line 2
    { 5, 'wc_1', 'allowed by you' }, -- covered by no call: the last one
    { 9, 'sed_1', 'allowed by rule Bash(sed *)' }, -- its location is line 9
  }, 'each hunk with its tool call')
  vim.cmd('AcpReview')
  local qf = vim.fn.getqflist()
  T.eq(#qf, 3, 'three entries')
  T.contains(qf[1].text, '[Write code.txt: allowed by you]', 'the first entry')
  T.eq(qf[1].text:find('sed', 1, true), nil, 'the first entry names only its own call')
  T.contains(qf[3].text, ': allowed by rule Bash(sed *)]', 'the third entry')
  T.eq(qf[3].text:find('by you', 1, true), nil, 'the third entry names only its own call')
  -- Reverting the first hunk leaves the others with their calls.
  T.ok(require('acp').revert(path, 1), 'reverted hunk 1')
  hunks = require('acp').review()[1].hunks
  T.eq({ hunks[1].toolCall.toolCallId, hunks[2].toolCall.toolCallId }, { 'wc_1', 'sed_1' }, 'after a revert')
  -- The command's hunk is reverted like any other.
  T.ok(require('acp').revert(path, 2), "reverted the command's hunk")
  T.eq(T.read(path), 'l1\nl2\nl3\nl4\nL5\nl6\nl7\nl8\nl9\nl10\n', 'line 9 as before the turn')
end)

T.test("the session's review keeps each hunk's tool call across turns", function()
  local project = T.project()
  local path = project .. '/t.txt'
  T.write(path, 'a\nx1\nb\nx2\nc\n')
  -- Turn n capitalises xn, with a command whose diff is a snippet.
  local cmd = "sed -i 's/^x${turn}$/X${turn}/' t.txt"
  local step = T.shell_request('up_${turn}', cmd, OPTIONS)
  step.toolCall.locations = { { path = '${cwd}/t.txt' } }
  step.toolCall.content = { { type = 'diff', path = '${cwd}/t.txt', oldText = 'x${turn}', newText = 'X${turn}' } }
  step.on_allow = { type = 'run', command = cmd }
  local ctx = T.start_demo({ name = 'turns', steps = { step } }, { project = project })
  for turn = 1, 2 do
    require('acp').prompt('Capitalise x' .. turn)
    allow('up_' .. turn)
    T.idle()
    T.wait(function()
      local l = require('acp.ledger').ledger(ctx.session)
      return l and l.turns[turn] and l.turns[turn].after
    end, nil, 'the end of turn ' .. turn)
  end
  T.eq(T.read(path), 'a\nX1\nb\nX2\nc\n', 'both commands ran')
  local got = {}
  for _, h in ipairs(require('acp').review({ scope = 'session' })[1].hunks) do
    got[#got + 1] = { h.new_start, h.toolCall.toolCallId }
  end
  T.eq(got, { { 2, 'up_1' }, { 4, 'up_2' } }, "each hunk with its turn's call")
  local turn = require('acp').review({ scope = 'turn' })[1].hunks
  T.eq({ #turn, turn[1].new_start, turn[1].toolCall.toolCallId }, { 1, 4, 'up_2' }, 'the last turn alone')
end)

-- A request as Codex or a plain agent sends it: no announcement, the path
-- in rawInput only; the agent writes the file itself as soon as it has its
-- answer (direct), before Neovim hears of the decision.
local function direct_write(id, name, content)
  return {
    type = 'permission',
    toolCall = {
      toolCallId = id .. '_${turn}',
      title = 'Write ' .. name,
      kind = 'edit',
      rawInput = { file_path = '${cwd}/' .. name, content = content },
    },
    options = OPTIONS,
    on_allow = { type = 'write', path = name, content = content, direct = true },
  }
end

T.test('yolo: a file the agent writes itself at once is in the review, against the file before it', function()
  local project = T.project()
  local path = project .. '/y.txt'
  T.write(path, 'one\ntwo\nthree\n')
  local ctx = T.start_demo({
    name = 'yolo-direct',
    steps = { direct_write('wy', 'y.txt', 'one\nTWO\nthree\n'), direct_write('wn', 'n.txt', 'new\n') },
  }, { project = project, setup = { ui = { arm_ms = 50 }, yolo = true } })
  require('acp').prompt('Write y.txt and n.txt')
  T.idle()
  local data = changes(ctx)
  T.eq(#require('acp').pending(), 0, 'nothing asked')
  local got = {}
  for _, f in ipairs(data.files) do
    got[#got + 1] = { vim.fn.fnamemodify(f.path, ':t'), f.added, f.removed, f.created, f.how }
  end
  table.sort(got, function(a, b)
    return a[1] < b[1]
  end)
  T.eq(got, { { 'n.txt', 1, 0, true, 'disk' }, { 'y.txt', 1, 1, false, 'disk' } }, 'both files, against the disk before the writes')
  local review = require('acp').review()
  T.eq(#review, 2, 'both in review()')
  T.eq(require('acp.ledger').snapshot_of(path).lines, { 'one', 'two', 'three' }, 'the snapshot is the file before the write')
  T.contains(review[2].hunks[1].toolCall.decision, 'allowed by yolo', 'how it was allowed')
  for _, e in ipairs(require('acp.state').logged()) do
    T.eq(e.event == 'decided' and e.data.snapshots or nil, nil, 'the event log keeps no file contents')
  end
  vim.cmd('AcpReview revert all')
  T.eq(T.read(path), 'one\ntwo\nthree\n', 'y.txt as before the turn')
  T.eq(T.read(project .. '/n.txt'), '', 'n.txt, new in the turn, is emptied (:help acp-review)')
end)

T.test("the broker's snapshot replaces a read of the ledger's own made after it, never one made before", function()
  local ledger = require('acp.ledger')
  local uv = vim.uv or vim.loop
  local project = vim.loop.fs_realpath(T.project())
  local a, b = project .. '/a.txt', project .. '/b.txt'
  T.write(a, 'new\n')
  T.write(b, 'new\n')
  local sid = 'snapshot-order'
  local before = uv.hrtime()
  ledger.on_event('turn_start', { session = sid })
  -- The announcement of a call (handled with the decision, after the
  -- agent had its answer and changed a.txt): the ledger reads the disk.
  ledger.on_event('update', {
    session = sid,
    update = { sessionUpdate = 'tool_call', toolCallId = 'c1', kind = 'execute', status = 'pending', locations = { { path = a }, { path = b } } },
  })
  local after = uv.hrtime() + 1
  ledger.on_event('decided', {
    session = sid,
    toolCallId = 'c1',
    decision = 'allow',
    by = 'rule',
    paths = { a, b },
    snapshots = {
      [a] = { text = 'old\n', at = before }, -- read by the broker first
      [b] = { text = 'older\n', at = after }, -- read after the ledger's own
    },
  })
  local rec = ledger.ledger(sid).turns[1]
  T.eq(rec.seen[a].lines, { 'old' }, "a.txt: the broker's earlier read")
  T.eq(rec.seen[b].lines, { 'new' }, "b.txt: the ledger's earlier read")
  ledger.on_event('turn_end', { session = sid })
end)

T.test('a rule-allowed command on a file too large to snapshot: the summary says so', function()
  local project = T.project()
  local path = project .. '/big.txt'
  -- Over the 4 MiB a file is snapshotted up to.
  T.write(path, ('0123456789abcde\n'):rep(5 * 65536))
  local sed = "sed -i '1s/^0/X/' big.txt"
  local step = T.shell_request('big_${turn}', sed, OPTIONS)
  step.on_allow = { type = 'run', command = sed }
  local ctx = T.start_demo({ name = 'too-large', steps = { step } }, {
    project = project,
    setup = { ui = { arm_ms = 50 }, permissions = { allow = { 'Bash(sed *)' } } },
  })
  require('acp').prompt('Change big.txt')
  T.idle()
  local data = changes(ctx)
  T.eq({ vim.fn.fnamemodify(data.files[1].path, ':t'), data.files[1].unknown }, { 'big.txt', true }, 'big.txt changed, with no snapshot')
  T.contains(data.summary, 'big.txt (not snapshotted: too large)', 'the summary says why')
  T.eq(#require('acp').review(), 0, 'nothing to review or revert')
end)

T.done()
