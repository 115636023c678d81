-- fs/* through Neovim's buffers (design §9): the agent reads what the
-- person sees, unsaved edits included; its writes land in the loaded buffer
-- as one undoable change and are written; files no buffer holds are read
-- and written on disk (atomically); a missing file inside the project
-- reads as empty. The agents here write without asking first: acceptEdits
-- lets the policy allow those edits (test_fs_unasked.lua covers the other
-- modes, where the broker asks the person).
local T = require('helpers')
local api = vim.api

local ACCEPT_EDITS = { ui = { arm_ms = 50 }, permissions = { defaultMode = 'acceptEdits' } }

local function open_file(path)
  vim.cmd('edit ' .. vim.fn.fnameescape(path))
  return api.nvim_get_current_buf()
end

T.test('fs/read_text_file returns the unsaved buffer, with line and limit', function()
  local project = T.project()
  T.write(project .. '/notes.txt', 'disk one\ndisk two\ndisk three\n')
  local buf = open_file(project .. '/notes.txt')
  api.nvim_buf_set_lines(buf, 0, 1, false, { 'unsaved one' })
  T.ok(vim.bo[buf].modified, 'the buffer has an unsaved edit')
  local ctx = T.start_demo({
    name = 'fs-read',
    steps = {
      T.raw_request('all', 'fs/read_text_file', { sessionId = '${session}', path = '${cwd}/notes.txt' }),
      T.raw_request('part', 'fs/read_text_file', { sessionId = '${session}', path = '${cwd}/notes.txt', line = 2, limit = 1 }),
      T.raw_request('missing', 'fs/read_text_file', { sessionId = '${session}', path = '${cwd}/sub/new.txt' }),
    },
  }, { project = project })
  require('acp').prompt('Read notes.txt')
  T.eq(T.response_to(ctx, 'all').result, { content = 'unsaved one\ndisk two\ndisk three\n' }, 'the whole buffer')
  T.eq(T.response_to(ctx, 'part').result, { content = 'disk two\n' }, 'line 2, limit 1')
  T.eq(T.response_to(ctx, 'missing').result, { content = '' }, 'a missing file inside the project')
  T.ok(vim.bo[buf].modified, 'the person keeps the unsaved edit')
  T.eq(T.read(project .. '/notes.txt'), 'disk one\ndisk two\ndisk three\n', 'the disk is untouched')
end)

T.test('fs/write_text_file lands in the loaded buffer: written, undoable', function()
  local project = T.project()
  T.write(project .. '/code.lua', 'local a = 1\nlocal b = 2\nreturn a + b\n')
  local buf = open_file(project .. '/code.lua')
  api.nvim_win_set_cursor(0, { 3, 0 })
  local ctx = T.start_demo({
    name = 'fs-write',
    steps = {
      T.raw_request('w', 'fs/write_text_file', {
        sessionId = '${session}',
        path = '${cwd}/code.lua',
        content = 'local a = 1\nlocal b = 20\nreturn a + b\n',
      }),
    },
  }, { project = project, setup = ACCEPT_EDITS })
  require('acp').prompt('Change b')
  T.eq(T.response_to(ctx, 'w').result, vim.empty_dict(), 'the answer to the write')
  T.eq(api.nvim_buf_get_lines(buf, 0, -1, false), { 'local a = 1', 'local b = 20', 'return a + b' }, 'the buffer')
  T.eq(T.read(project .. '/code.lua'), 'local a = 1\nlocal b = 20\nreturn a + b\n', 'the file on disk')
  T.ok(not vim.bo[buf].modified, 'the buffer is written')
  T.eq(api.nvim_win_get_cursor(0)[1], 3, 'the cursor stays where it was')
  api.nvim_buf_call(buf, function()
    vim.cmd('silent undo')
  end)
  T.eq(api.nvim_buf_get_lines(buf, 0, -1, false), { 'local a = 1', 'local b = 2', 'return a + b' }, 'one undo restores it')
  local fs = T.wait(function()
    local vias = {}
    for _, e in ipairs(require('acp.state').logged()) do
      if e.event == 'fs' and e.data.session == ctx.session then
        vias[#vias + 1] = e.data.op .. ':' .. e.data.via
      end
    end
    return #vias > 0 and vias
  end, nil, 'the fs event')
  T.eq(fs, { 'write:buffer' }, 'the fs event says it went through the buffer')
end)

T.test('fs/write_text_file without a buffer: atomic on disk, new directories made', function()
  local project = T.project()
  T.write(project .. '/old.txt', 'old\n')
  vim.loop.fs_chmod(project .. '/old.txt', tonumber('600', 8))
  local ctx = T.start_demo({
    name = 'fs-disk',
    steps = {
      T.raw_request('old', 'fs/write_text_file', { sessionId = '${session}', path = '${cwd}/old.txt', content = 'new\n' }),
      T.raw_request('deep', 'fs/write_text_file', { sessionId = '${session}', path = '${cwd}/a/b/c.txt', content = 'c' }),
    },
  }, { project = project, setup = ACCEPT_EDITS })
  require('acp').prompt('Write files')
  T.eq(T.response_to(ctx, 'old').result, vim.empty_dict(), 'old.txt answer')
  T.eq(T.response_to(ctx, 'deep').result, vim.empty_dict(), 'a/b/c.txt answer')
  T.eq(T.read(project .. '/old.txt'), 'new\n', 'old.txt replaced')
  T.eq(vim.loop.fs_stat(project .. '/old.txt').mode % 512, tonumber('600', 8), 'old.txt keeps its mode')
  T.eq(T.read(project .. '/a/b/c.txt'), 'c', 'a/b/c.txt created')
  for _, name in ipairs(vim.fn.readdir(project)) do
    T.ok(not name:match('%.tmp$'), 'no temporary file left: ' .. name)
  end
end)

T.test('a buffer that cannot be modified refuses the write; nothing changes', function()
  local project = T.project()
  T.write(project .. '/ro.txt', 'keep\n')
  local buf = open_file(project .. '/ro.txt')
  vim.bo[buf].modifiable = false
  local ctx = T.start_demo({
    name = 'fs-ro',
    steps = {
      T.raw_request('w', 'fs/write_text_file', { sessionId = '${session}', path = '${cwd}/ro.txt', content = 'changed\n' }),
    },
  }, { project = project, setup = ACCEPT_EDITS })
  require('acp').prompt('Write ro.txt')
  local r = T.response_to(ctx, 'w')
  T.eq(r.result, nil, 'no result')
  T.ok(type(r.error) == 'table' and tostring(r.error.message):find('not modifiable', 1, true), 'the reason')
  T.eq(T.read(project .. '/ro.txt'), 'keep\n', 'the file')
  T.eq(api.nvim_buf_get_lines(buf, 0, -1, false), { 'keep' }, 'the buffer')
end)

T.done()
