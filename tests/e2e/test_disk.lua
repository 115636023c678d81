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

T.done()
