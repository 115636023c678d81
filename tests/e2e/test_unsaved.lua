-- Never lose the person's work (issue 14 item 2, doc/acp.txt acp-unsaved):
-- the prompt's diff is computed against the loaded buffer (unsaved changes
-- included) and says so when the agent saw other text; a write into a
-- buffer the person changed since the agent saw it is merged with their
-- changes, or, where both changed the same lines, the person is asked
-- (vim.ui.select, stubbed here): keep mine (the write is refused), take the
-- agent's (applied, undoable, saved) or open both in a diff (refused). A
-- buffer with unsaved changes is not written to disk behind the person's
-- back.
local T = require('helpers')
local api = vim.api

-- Neovim 0.7 does not default to 'hidden': a modified buffer must be able
-- to leave its window when the next test opens a file.
vim.o.hidden = true

local DISK = 'int a;\nint b;\nint c;\nint d;\nint e;\n'
local AGENT = 'int a;\nint b;\nint c;\nint d;\nint e = 5;\n'

local function open_file(path)
  vim.cmd('edit ' .. vim.fn.fnameescape(path))
  local buf = api.nvim_get_current_buf()
  T.defer(function()
    pcall(vim.cmd, 'silent! bwipeout! ' .. buf)
  end)
  return buf
end

local function lines(buf)
  return api.nvim_buf_get_lines(buf, 0, -1, false)
end

-- A Gemini-shaped edit request for main.c (its whole old and new text),
-- which writes the new text through fs/write_text_file when allowed.
local function edit_step(tcid, old, new)
  return {
    type = 'permission',
    toolCall = {
      toolCallId = tcid,
      title = 'Edit main.c',
      kind = 'edit',
      locations = { { path = '${cwd}/main.c' } },
      content = { { type = 'diff', path = '${cwd}/main.c', oldText = old == nil and vim.NIL or old, newText = new } },
    },
    options = {
      { optionId = 'proceed_once', name = 'Allow', kind = 'allow_once' },
      { optionId = 'cancel', name = 'Reject', kind = 'reject_once' },
    },
    on_allow = { type = 'write', path = 'main.c', content = new },
  }
end

-- The client's answers to the agent's fs/write_text_file calls of path.
local function write_answers(ctx, path)
  local tr = T.transcript(ctx.transcript)
  local r = {}
  for _, m in ipairs(T.messages(tr, 'out', 'fs/write_text_file')) do
    if m.params.path == path then
      for _, a in ipairs(T.messages(tr, 'in')) do
        if a.method == nil and a.id == m.id and type(a.id) == type(m.id) then
          r[#r + 1] = a
        end
      end
    end
  end
  return r
end

local function write_answer(ctx, path)
  return T.wait(function()
    return write_answers(ctx, path)[1]
  end, nil, 'the answer to the write of ' .. path)
end

-- The prompt's text for the pending request of tcid.
local function prompt_text(tcid)
  local p = T.wait_pending(tcid)
  local req = require('acp.state').pending[p.id]
  -- Wide enough that no line is wrapped.
  return table.concat(require('acp.prompt').lines(req, { width = 300 }), '\n'), p
end

-- vim.ui.select answers with the item whose key is `key` (nil: dismissed);
-- returns the list of prompts it was asked.
local function select_answers(key)
  local asked = {}
  local real = vim.ui.select
  vim.ui.select = function(items, opts, on_choice)
    asked[#asked + 1] = opts.prompt
    for i, item in ipairs(items) do
      if item.key == key then
        return on_choice(item, i)
      end
    end
    return on_choice(nil, nil)
  end
  T.defer(function()
    vim.ui.select = real
  end)
  return asked
end

T.test('merge3: disjoint changes merge, overlapping or touching ones conflict, same ones are taken once', function()
  local m = require('acp.merge').merge3
  T.eq(m('a\nb\nc\nd\ne\n', 'X\na\nb\nc\nd\ne\n', 'a\nb\nc\nd\nE\n').text, 'X\na\nb\nc\nd\nE\n', 'an insertion and a change')
  T.eq(m('a\nb\nc\nd\ne\n', 'a\nc\nd\ne\n', 'a\nb\nc\nd\n').text, 'a\nc\nd\n', 'two deletions')
  local r = m('a\nb\nc\n', 'a\nB1\nc\n', 'a\nB2\nc\n')
  T.eq({ r.text, r.conflicts }, { nil, 1 }, 'the same line changed two ways')
  T.eq(m('a\nb\nc\n', 'a\nB\nc\n', 'a\nB\nc\n').text, 'a\nB\nc\n', 'the same change on both sides')
  T.eq(m('a\nb\nc\n', 'A\nb\nc\n', 'a\nB\nc\n').conflicts, 1, 'adjacent changes conflict')
  T.eq(m('a\n', 'a\nx\n', 'a\ny\n').conflicts, 1, 'two insertions at one place')
  T.eq(m('', 'x\n', 'x\n').text, 'x\n', 'the same new file')
  T.eq(m('a\nb\nc\nd\n', 'A\nb\nc\nd\n', 'a\nb\nc\nd').text, 'A\nb\nc\nd', "the agent's final newline removal")
  T.eq(m('a\nb\nc\nd\n', 'a\nb\nc\nd', 'A\nb\nc\nd\n').text, 'A\nb\nc\nd', "the person's missing final newline")
end)

T.test('the unsaved-line case: the prompt diffs the buffer, says so; allowing merges, keeps the line, does not save', function()
  local project = T.project()
  T.write(project .. '/main.c', DISK)
  local buf = open_file(project .. '/main.c')
  api.nvim_buf_set_lines(buf, 0, 0, false, { '// mine' })
  local ctx = T.start_demo({ name = 'unsaved-line', steps = { edit_step('edit_1', DISK, AGENT), { type = 'message', text = 'Done.' } } }, { project = project })
  require('acp').prompt('Change e')

  local text, p = prompt_text('edit_1')
  T.contains(text, 'Your buffer has unsaved changes the agent has not seen', 'the prompt says so')
  T.contains(text, '-// mine', 'the diff is from the buffer (the unsaved line shows)')
  T.contains(text, '+int e = 5;', "the agent's change")

  require('acp').respond(p.id, 'proceed_once')
  T.eq(write_answer(ctx, project .. '/main.c').result, vim.empty_dict(), 'the write succeeded')
  T.idle()
  T.eq(lines(buf), { '// mine', 'int a;', 'int b;', 'int c;', 'int d;', 'int e = 5;' }, "the buffer: the person's line and the agent's change")
  T.ok(vim.bo[buf].modified, 'the buffer is still unsaved')
  T.eq(T.read(project .. '/main.c'), DISK, "the person's unsaved line was not saved to disk")
  T.wait(function()
    return T.notes_text():find('merged', 1, true)
  end, nil, 'the person is told of the merge')
  api.nvim_buf_call(buf, function()
    vim.cmd('silent undo')
  end)
  T.eq(lines(buf), { '// mine', 'int a;', 'int b;', 'int c;', 'int d;', 'int e;' }, "one undo takes back the agent's change only")
end)

T.test('a write after the agent read the buffer: the line typed since is merged in', function()
  local project = T.project()
  T.write(project .. '/main.c', DISK)
  local buf = open_file(project .. '/main.c')
  local ctx = T.start_demo({
    name = 'unsaved-read',
    steps = {
      { type = 'read', path = 'main.c' },
      -- Claude's Write shape: no oldText, the whole new text.
      edit_step('edit_2', nil, 'int a;\nint b;\nint c;\nint d;\nint e;\nint f;\n'),
      { type = 'message', text = 'Done.' },
    },
  }, { project = project })
  require('acp').prompt('Add f')
  local p = T.wait_pending('edit_2')
  -- The person types a line after the agent read the file.
  api.nvim_buf_set_lines(buf, 1, 1, false, { 'int typed;' })
  local text = prompt_text('edit_2')
  T.contains(text, 'Your buffer has unsaved changes the agent has not seen', 'the prompt says so')
  require('acp').respond(p.id, 'proceed_once')
  T.eq(write_answer(ctx, project .. '/main.c').result, vim.empty_dict(), 'the write succeeded')
  T.eq(lines(buf), { 'int a;', 'int typed;', 'int b;', 'int c;', 'int d;', 'int e;', 'int f;' }, 'both changes')
  T.eq(T.read(project .. '/main.c'), DISK, 'not saved')
end)

-- The conflict form: the person changed the line the agent changes.
local function conflict(key)
  local project = T.project()
  T.write(project .. '/main.c', DISK)
  local buf = open_file(project .. '/main.c')
  api.nvim_buf_set_lines(buf, 4, 5, false, { 'int e = 1;' })
  local asked = select_answers(key)
  local ctx = T.start_demo({ name = 'unsaved-conflict', steps = { edit_step('edit_3', DISK, AGENT), { type = 'message', text = 'Done.' } } }, { project = project })
  require('acp').prompt('Change e')
  local p = T.wait_pending('edit_3')
  require('acp').respond(p.id, 'proceed_once')
  local answer = write_answer(ctx, project .. '/main.c')
  T.eq(#asked, 1, 'the person was asked once')
  T.contains(asked[1], 'main.c', 'the question names the file')
  T.idle()
  return { project = project, buf = buf, answer = answer, ctx = ctx }
end

T.test('conflict, keep mine: the write is refused with the reason, the buffer untouched', function()
  local c = conflict('mine')
  T.eq(c.answer.error and c.answer.error.code, -32001, 'refused')
  T.contains(c.answer.error.message, 'kept their own version', 'the agent reads why')
  T.eq(lines(c.buf), { 'int a;', 'int b;', 'int c;', 'int d;', 'int e = 1;' }, 'the buffer is untouched')
  T.ok(vim.bo[c.buf].modified, 'still unsaved')
  T.eq(T.read(c.project .. '/main.c'), DISK, 'the disk is untouched')
end)

T.test("conflict, take the agent's: applied as one undoable change and saved", function()
  local c = conflict('theirs')
  T.eq(c.answer.result, vim.empty_dict(), 'the write succeeded')
  T.eq(lines(c.buf), { 'int a;', 'int b;', 'int c;', 'int d;', 'int e = 5;' }, "the agent's text")
  T.eq(T.read(c.project .. '/main.c'), AGENT, 'saved, as the person chose')
  api.nvim_buf_call(c.buf, function()
    vim.cmd('silent undo')
  end)
  T.eq(lines(c.buf), { 'int a;', 'int b;', 'int c;', 'int d;', 'int e = 1;' }, "one undo brings the person's line back")
end)

T.test('conflict, open both in a diff: a new tab, the write refused', function()
  local tabs = vim.fn.tabpagenr('$')
  local c = conflict('diff')
  T.defer(function()
    if vim.fn.tabpagenr('$') > tabs then
      pcall(vim.cmd, 'silent! tabclose!')
    end
  end)
  T.eq(c.answer.error and c.answer.error.code, -32001, 'refused')
  T.contains(c.answer.error.message, 'comparing', 'the agent reads why')
  T.eq(vim.fn.tabpagenr('$'), tabs + 1, 'a new tab')
  local wins = api.nvim_tabpage_list_wins(0)
  T.eq(#wins, 2, 'two windows')
  local seen = {}
  for _, w in ipairs(wins) do
    T.ok(api.nvim_win_get_option(w, 'diff'), 'in diff mode')
    seen[#seen + 1] = lines(api.nvim_win_get_buf(w))
  end
  T.eq(seen[1], { 'int a;', 'int b;', 'int c;', 'int d;', 'int e = 1;' }, "the person's buffer")
  T.eq(api.nvim_win_get_buf(wins[1]), c.buf, 'is the buffer itself')
  T.eq(seen[2], { 'int a;', 'int b;', 'int c;', 'int d;', 'int e = 5;' }, "the agent's text")
  T.eq(T.read(c.project .. '/main.c'), DISK, 'the disk is untouched')
end)

T.test("conflict, the turn cancelled before the answer: the write is refused, a late \"take the agent's\" applies nothing", function()
  local project = T.project()
  T.write(project .. '/main.c', DISK)
  local buf = open_file(project .. '/main.c')
  api.nvim_buf_set_lines(buf, 4, 5, false, { 'int e = 1;' })
  local pending_choice
  local real = vim.ui.select
  vim.ui.select = function(items, _, on_choice)
    pending_choice = function(key)
      for i, item in ipairs(items) do
        if item.key == key then
          return on_choice(item, i)
        end
      end
    end
  end
  T.defer(function()
    vim.ui.select = real
  end)
  local ctx = T.start_demo({ name = 'unsaved-cancel', steps = { edit_step('edit_5', DISK, AGENT) } }, { project = project })
  require('acp').prompt('Change e')
  require('acp').respond(T.wait_pending('edit_5').id, 'proceed_once')
  T.wait(function()
    return pending_choice
  end, nil, 'the question')
  T.eq(write_answers(ctx, project .. '/main.c'), {}, 'the write waits for the person')
  require('acp').cancel()
  local answer = write_answer(ctx, project .. '/main.c')
  T.eq(answer.error and answer.error.code, -32001, 'refused')
  T.contains(answer.error.message, 'cancelled', 'the agent reads why')
  T.idle()
  pending_choice('theirs')
  T.eq(lines(buf), { 'int a;', 'int b;', 'int c;', 'int d;', 'int e = 1;' }, 'the buffer is untouched')
  T.eq(T.read(project .. '/main.c'), DISK, 'the disk is untouched')
  T.wait(function()
    return T.notes_text():find('was not applied', 1, true)
  end, nil, 'the person is told')
end)

T.test("Claude's Edit (only the replaced part): shown in place in the buffer, or said missing", function()
  local project = T.project()
  T.write(project .. '/main.c', DISK)
  local buf = open_file(project .. '/main.c')
  api.nvim_buf_set_lines(buf, 0, 0, false, { '// mine' })
  local function claude_edit(tcid, old, new)
    return {
      type = 'permission',
      announce = true,
      toolCall = {
        toolCallId = tcid,
        title = 'Edit main.c',
        kind = 'edit',
        rawInput = { file_path = '${cwd}/main.c', old_string = old, new_string = new },
        locations = { { path = '${cwd}/main.c' } },
        content = { { type = 'diff', path = '${cwd}/main.c', oldText = old, newText = new } },
      },
      options = {
        { kind = 'allow_once', name = 'Allow', optionId = 'allow' },
        { kind = 'reject_once', name = 'Reject', optionId = 'reject' },
      },
    }
  end
  T.start_demo({
    name = 'unsaved-snippet',
    steps = { claude_edit('snip_1', 'int c;\n', 'int c = 3;\n'), claude_edit('snip_2', 'int z;\n', 'int z = 0;\n') },
  }, { project = project })
  require('acp').prompt('Edit')
  local text, p = prompt_text('snip_1')
  T.ok(not text:find('unsaved changes', 1, true), 'the part is there: no notice: ' .. text)
  T.contains(text, '@@ -1,6 +1,6 @@', 'shown at its place in the buffer (line 4 of 6)')
  T.contains(text, ' // mine', 'with the unsaved line as context')
  T.contains(text, '+int c = 3;', 'the change')
  require('acp').respond(p.id, 'reject')
  text = prompt_text('snip_2')
  T.contains(text, 'Your buffer has unsaved changes the agent has not seen: the text it replaces is not there', 'said missing')
  T.contains(text, '-int z;', "the agent's own diff")
end)

T.test('an unmodified buffer the agent saw: written as before, no question', function()
  local project = T.project()
  T.write(project .. '/main.c', DISK)
  local buf = open_file(project .. '/main.c')
  local asked = select_answers('mine')
  local ctx = T.start_demo({ name = 'unsaved-clean', steps = { edit_step('edit_4', DISK, AGENT) } }, { project = project })
  require('acp').prompt('Change e')
  local text, p = prompt_text('edit_4')
  T.ok(not text:find('unsaved changes', 1, true), 'no notice: ' .. text)
  require('acp').respond(p.id, 'proceed_once')
  T.eq(write_answer(ctx, project .. '/main.c').result, vim.empty_dict(), 'the write succeeded')
  T.eq(T.read(project .. '/main.c'), AGENT, 'saved')
  T.ok(not vim.bo[buf].modified, 'not modified')
  T.eq(#asked, 0, 'nobody asked')
end)

T.done()
