-- Files that change on disk under a loaded buffer: an agent that writes
-- them itself (as claude-agent-acp does) or a command in a terminal. An
-- unmodified buffer is reloaded, its view kept, and the person is told; a
-- buffer with unsaved changes is never reloaded or overwritten, and the
-- person is warned. Here the demo agent runs `sed -i` in a terminal.
local T = require('helpers')
local api = vim.api

local SED = "sed -i 's/^line 5$/LINE FIVE/' notes.txt"

local function numbered(n)
  local t = {}
  for i = 1, n do
    t[i] = 'line ' .. i
  end
  return t
end

-- A Bash call (no locations, as Claude's) that edits notes.txt on disk.
local function scenario()
  local step = T.shell_request('sed_${turn}', SED, {
    { kind = 'allow_once', name = 'Allow', optionId = 'allow' },
    { kind = 'reject_once', name = 'Reject', optionId = 'reject' },
  })
  step.on_allow = { type = 'run', command = SED }
  return { name = 'direct-write', steps = { step, { type = 'message', text = 'Edited notes.txt.' } } }
end

-- notes.txt (60 lines) in a fresh project, open in the current window.
local function open_notes()
  local project = T.project()
  local path = project .. '/notes.txt'
  T.write(path, table.concat(numbered(60), '\n') .. '\n')
  vim.cmd('edit ' .. vim.fn.fnameescape(path))
  return project, path, api.nvim_get_current_buf(), api.nvim_get_current_win()
end

local function run_turn(project)
  T.start_demo(scenario(), { project = project })
  require('acp').prompt('Edit line 5 of notes.txt')
  local p = T.wait_pending('sed_1')
  T.ok(require('acp').respond(p.id, 'allow'), 'allowed')
  T.idle()
end

T.test('a file changed on disk under an unmodified buffer is reloaded, its view kept, and the person told', function()
  local project, path, buf, win = open_notes()
  api.nvim_win_set_cursor(win, { 40, 3 })
  local view = api.nvim_win_call(win, vim.fn.winsaveview)
  run_turn(project)
  T.eq(T.read(path):match('LINE FIVE') ~= nil, true, 'the command changed the file on disk')
  T.wait(function()
    return api.nvim_buf_get_lines(buf, 4, 5, false)[1] == 'LINE FIVE'
  end, nil, 'the buffer to be reloaded')
  T.ok(not vim.bo[buf].modified, 'the reloaded buffer is unmodified')
  T.eq(api.nvim_win_get_cursor(win), { 40, 3 }, 'the cursor stays')
  T.eq(api.nvim_win_call(win, vim.fn.winsaveview).topline, view.topline, 'the view stays')
  T.wait(function()
    return T.notes_text():find('notes.txt changed on disk: its buffer was reloaded', 1, true)
  end, nil, 'the person to be told')
  api.nvim_buf_call(buf, function()
    vim.cmd('silent undo')
  end)
  T.eq(api.nvim_buf_get_lines(buf, 4, 5, false)[1], 'line 5', 'the reload can be undone')
end)

T.test('a file changed on disk under a buffer with unsaved changes: nothing overwritten, the person warned', function()
  local project, path, buf = open_notes()
  api.nvim_buf_set_lines(buf, 0, 1, false, { 'my unsaved line' })
  run_turn(project)
  T.wait(function()
    return T.notes_text():find('notes.txt changed on disk while you have unsaved changes', 1, true)
  end, nil, 'the warning')
  T.eq(api.nvim_buf_get_lines(buf, 0, 5, false), { 'my unsaved line', 'line 2', 'line 3', 'line 4', 'line 5' }, 'the buffer')
  T.ok(vim.bo[buf].modified, 'the unsaved change is still there')
  local disk = T.read(path)
  T.ok(disk:find('\nLINE FIVE\n', 1, true) and disk:sub(1, 7) == 'line 1\n', "the disk holds the agent's change only")
  -- The warning comes once, not at every later check.
  local n = select(2, T.notes_text():gsub('changed on disk while', ''))
  T.eq(n, 1, 'one warning')
end)

-- A turn that pauses (a sleep step) after a message, so that the test can
-- change files on disk while it runs, as an agent that writes itself does.
local function start_paused(project, extra)
  local steps = { { type = 'message', text = 'Working.' }, { type = 'sleep', ms = 20000 } }
  local ctx = T.start_demo({ name = 'paused', steps = steps }, vim.tbl_extend('force', { project = project }, extra or {}))
  require('acp').prompt('Edit notes.txt')
  T.wait(function()
    for _, m in ipairs(T.messages(T.transcript(ctx.transcript), 'out')) do
      if m.params and m.params.update and m.params.update.sessionUpdate == 'agent_message_chunk' then
        return true
      end
    end
  end, nil, 'the agent to be in its turn')
  -- (The transcript can be ahead of the events Neovim has handled.)
  T.wait(function()
    local l = require('acp.ledger').ledger(ctx.session)
    return l and l.turns[1] and l.turns[1].live
  end, nil, 'the turn to start in Neovim')
  return ctx
end

-- Writes text to path as editors and agents often do: a temporary file
-- renamed over it.
local function replace(path, text)
  T.write(path .. '.tmp', text)
  assert(vim.loop.fs_rename(path .. '.tmp', path))
end

local function turn_record(ctx)
  local l = require('acp.ledger').ledger(ctx.session)
  return l and l.turns[#l.turns]
end

T.test('mid-turn: a file changed on disk under an unmodified buffer is reloaded before the turn ends', function()
  local project, path, buf, win = open_notes()
  api.nvim_win_set_cursor(win, { 40, 3 })
  local ctx = start_paused(project)
  T.ok(require('acp.ledger').watching() > 0, 'the directory of the buffer is watched during the turn')
  local lines = numbered(60)
  lines[5] = 'LINE FIVE'
  T.write(path, table.concat(lines, '\n') .. '\n')
  T.wait(function()
    return api.nvim_buf_get_lines(buf, 4, 5, false)[1] == 'LINE FIVE'
  end, nil, 'the buffer to be reloaded during the turn')
  T.ok(require('acp').status().busy, 'the turn is still running')
  T.eq(api.nvim_win_get_cursor(win), { 40, 3 }, 'the cursor stays')
  T.ok(T.notes_text():find('notes.txt changed on disk: its buffer was reloaded', 1, true), 'the person is told')
  local rec = turn_record(ctx)
  T.ok(rec and rec.live and rec.changed[path], 'the file is marked changed by the turn at once')
  -- A second change, written through a rename: reloaded again.
  lines[6] = 'LINE SIX'
  replace(path, table.concat(lines, '\n') .. '\n')
  T.wait(function()
    return api.nvim_buf_get_lines(buf, 5, 6, false)[1] == 'LINE SIX'
  end, nil, 'the buffer to be reloaded after a rename over its file')
  T.ok(require('acp').status().busy, 'the turn is still running')
  require('acp').cancel()
  T.idle()
  T.eq(require('acp.ledger').watching(), 0, 'every watch is stopped at the turn end')
  local data = T.wait(function()
    for _, e in ipairs(require('acp.state').logged()) do
      if e.event == 'changes' and e.data.session == ctx.session then
        return e.data
      end
    end
  end, nil, 'the summary')
  T.eq({ data.files[1].path, data.files[1].added, data.files[1].removed }, { path, 2, 2 }, 'against the buffer before the first change')
end)

T.test('mid-turn: a buffer with unsaved changes is never reloaded; the person is warned at once', function()
  local project, path, buf = open_notes()
  api.nvim_buf_set_lines(buf, 0, 1, false, { 'my unsaved line' })
  start_paused(project)
  local lines = numbered(60)
  lines[5] = 'LINE FIVE'
  T.write(path, table.concat(lines, '\n') .. '\n')
  T.wait(function()
    return T.notes_text():find('notes.txt changed on disk while you have unsaved changes', 1, true)
  end, nil, 'the warning during the turn')
  T.ok(require('acp').status().busy, 'the turn is still running')
  T.eq(api.nvim_buf_get_lines(buf, 0, 5, false), { 'my unsaved line', 'line 2', 'line 3', 'line 4', 'line 5' }, 'the buffer')
  T.ok(vim.bo[buf].modified, 'the unsaved change is still there')
  require('acp').cancel()
  T.idle()
  local n = select(2, T.notes_text():gsub('changed on disk while', ''))
  T.eq(n, 1, 'one warning, not another at the turn end')
end)

T.test('mid-turn: a file the turn named, without a buffer, is marked changed when it changes; others are ignored', function()
  local project = T.project()
  T.write(project .. '/named.txt', 'a\nb\n')
  T.write(project .. '/other.txt', 'x\n')
  local steps = {
    { type = 'update', update = { sessionUpdate = 'tool_call', toolCallId = 'w_${turn}', title = 'Write named.txt', kind = 'edit', status = 'in_progress', locations = { { path = '${cwd}/named.txt' } } } },
    { type = 'sleep', ms = 20000 },
  }
  local ctx = T.start_demo({ name = 'named', steps = steps }, { project = project })
  require('acp').prompt('Edit named.txt')
  T.wait(function()
    local rec = turn_record(ctx)
    return rec and rec.seen[project .. '/named.txt']
  end, nil, 'the file to be named')
  T.ok(require('acp.ledger').watching() > 0, 'its directory is watched')
  T.write(project .. '/other.txt', 'y\n')
  T.write(project .. '/named.txt', 'a\nB\n')
  T.wait(function()
    return turn_record(ctx).changed[project .. '/named.txt']
  end, nil, 'the named file to be marked changed during the turn')
  T.ok(require('acp').status().busy, 'the turn is still running')
  T.eq(turn_record(ctx).changed[project .. '/other.txt'], nil, 'a file the turn never named and without a buffer is not')
  require('acp').stop()
  T.wait(function()
    return require('acp.ledger').watching() == 0
  end, nil, 'every watch to stop when the agent goes')
end)

T.test('the watch is bounded: at most max_watches directories, none recursive', function()
  local project = T.project()
  local ledger = require('acp.ledger')
  for i = 1, ledger.max_watches + 6 do
    local p = ('%s/d%02d/f.txt'):format(project, i)
    T.write(p, 'x\n')
    vim.cmd('badd ' .. vim.fn.fnameescape(p))
    vim.fn.bufload(vim.fn.bufnr(p))
  end
  start_paused(project)
  T.eq(ledger.watching(), ledger.max_watches, 'the number of watched directories')
  require('acp').cancel()
  T.idle()
  T.eq(ledger.watching(), 0, 'all stopped at the turn end')
  vim.cmd('silent! %bwipeout!')
end)

T.done()
