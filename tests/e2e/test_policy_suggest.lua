-- The rules a prompt suggests are the project's own: a path in the project
-- is written `Edit(/src/main.c)` (relative to the project root, as a rule in
-- .acp/settings.json reads it), never the absolute path; a broader
-- alternative (`Bash(git status *)`, `Edit(/src/**)`) is offered beside
-- it. Written to the project's settings, each allows the request that
-- suggested it.
local T = require('helpers')
local selected = T.selected

local function edit(tcid, file)
  return {
    type = 'permission',
    announce = true,
    toolCall = {
      toolCallId = tcid,
      title = 'Edit ' .. file,
      kind = 'edit',
      rawInput = { file_path = '${cwd}/' .. file, old_string = 'a', new_string = 'b' },
      locations = { { path = '${cwd}/' .. file } },
    },
    options = {
      { kind = 'allow_once', name = 'Allow', optionId = 'allow' },
      { kind = 'reject_once', name = 'Reject', optionId = 'reject' },
    },
  }
end

local SCENARIO = {
  name = 'suggest',
  steps = {
    edit('edit_${turn}', 'src/main.c'),
    T.shell_request('git_${turn}', 'git status'),
    { type = 'message', text = 'Done.' },
  },
}

local SCENARIO2 = {
  name = 'suggest-again',
  steps = {
    edit('edit_${turn}', 'src/main.c'),
    edit('other_${turn}', 'src/util.c'),
    T.shell_request('git_${turn}', 'git status --short'),
    { type = 'message', text = 'Done.' },
  },
}

local function settings(project)
  return vim.fn.json_decode(T.read(project .. '/.acp/settings.json'))
end

T.test('suggested rules are project-relative with a broader one; written to the project they allow the request again', function()
  local ctx = T.start_demo(SCENARIO)
  local state = require('acp.state')
  require('acp').prompt('Edit and look')
  local p = T.wait_pending('edit_1')
  local req = state.pending[p.id]
  T.eq(req.narrow, { 'Edit(/src/main.c)' }, 'the narrow rule names the file from the project root')
  T.eq(req.broad, { 'Edit(/src/**)' }, 'the broader rule names its directory')
  T.ok(require('acp').respond(p.id, req.allowOption, { remember = 'project' }), 'respond')
  T.eq(T.answer(ctx, 'edit_1').result, selected('allow'), 'the edit is allowed once')

  p = T.wait_pending('git_1')
  req = state.pending[p.id]
  T.eq(req.narrow, { 'Bash(git status)' }, 'the narrow rule of git status')
  T.eq(req.broad, { 'Bash(git status *)' }, 'its broader rule')
  T.ok(require('acp').respond(p.id, req.allowOption, { remember = 'project', broad = true }), 'respond broad')
  T.eq(T.answer(ctx, 'git_1').result, selected('allow'), 'git status is allowed once')
  T.idle()

  local file = T.read(ctx.project .. '/.acp/settings.json')
  T.ok(not file:find(ctx.project, 1, true), 'no absolute path of the project in its settings:\n' .. file)
  T.eq(settings(ctx.project).permissions.allow, { 'Edit(/src/main.c)', 'Bash(git status *)' }, 'the rules written')
  T.stop_all()

  -- A new session in the same project: the written rules allow what
  -- suggested them (and the broader one a longer git status), not another
  -- file in the same directory.
  local decided = T.on('AcpPermissionDecided')
  local ctx2 = T.start_demo(SCENARIO2, { project = ctx.project })
  require('acp').prompt('Again')
  T.eq(T.answer(ctx2, 'edit_1').result, selected('allow'), 'the edit, allowed by its rule')
  p = T.wait_pending('other_1')
  T.eq(state.pending[p.id].narrow, { 'Edit(/src/util.c)' }, 'another file still asks')
  vim.cmd('AcpDeny')
  T.eq(T.answer(ctx2, 'git_1').result, selected('allow'), 'git status --short, allowed by the broader rule')
  T.wait(function()
    return #decided >= 2
  end, nil, 'two AcpPermissionDecided')
  local by = {}
  for _, d in ipairs(decided) do
    by[d.toolCallId] = d.by .. ' ' .. tostring(d.rule)
  end
  T.eq(by, { edit_1 = 'rule Edit(/src/main.c)', git_1 = 'rule Bash(git status *)' }, 'decided by the written rules')
end)

T.test('remembered for the session, a project-relative rule allows the same file again, its broader one the directory', function()
  local ctx = T.start_demo({
    name = 'suggest-session',
    steps = {
      edit('one_${turn}', 'src/a.c'),
      edit('two_${turn}', 'src/a.c'),
      edit('three_${turn}', 'lib/b.c'),
      edit('four_${turn}', 'lib/c.c'),
      edit('five_${turn}', 'd.c'),
      { type = 'message', text = 'Done.' },
    },
  })
  local state = require('acp.state')
  local decided = T.on('AcpPermissionDecided')
  require('acp').prompt('Edit')
  local p = T.wait_pending('one_1')
  T.ok(require('acp').respond(p.id, state.pending[p.id].allowOption, { remember = 'session' }), 'respond')
  T.eq(T.answer(ctx, 'two_1').result, selected('allow'), 'the same file, allowed from memory')
  p = T.wait_pending('three_1')
  T.eq(state.pending[p.id].broad, { 'Edit(/lib/**)' }, 'the broader rule')
  T.ok(require('acp').respond(p.id, state.pending[p.id].allowOption, { remember = 'session', broad = true }), 'respond broad')
  T.eq(T.answer(ctx, 'four_1').result, selected('allow'), 'another file of lib/, allowed from memory')
  p = T.wait_pending('five_1')
  T.eq(state.pending[p.id].broad, {}, 'a file at the project root has no broader rule')
  vim.cmd('AcpDeny')
  T.idle()
  local by = {}
  for _, d in ipairs(decided) do
    by[d.toolCallId] = d.by .. ' ' .. tostring(d.rule)
  end
  T.eq(by, { two_1 = 'memory Edit(/src/a.c)', four_1 = 'memory Edit(/lib/**)' }, 'decided by the remembered rules')
end)

T.test('respond() refuses a broad that is not a boolean; a request with no broader rule has none', function()
  local ctx = T.start_demo({ name = 'no-broad', steps = { T.shell_request('rm_${turn}', 'rm -rf build') } })
  require('acp').prompt('Remove')
  local p = T.wait_pending('rm_1')
  local req = require('acp.state').pending[p.id]
  T.eq(req.narrow, { 'Bash(rm -rf build)' }, 'the narrow rule')
  T.eq(req.broad, {}, 'no broader rule for rm')
  local ok, err = pcall(require('acp').respond, p.id, req.allowOption, { remember = 'project', broad = 'yes' })
  T.ok(not ok or err ~= nil, 'a string broad is refused')
  vim.cmd('AcpDeny')
  T.eq(T.answer(ctx, 'rm_1').result, selected('reject'), 'rejected')
end)
T.test('the prompt offers the broader rule: P writes it (and says so), then git status -s is allowed by it', function()
  local ctx = T.start_demo({
    name = 'broad-keys',
    steps = {
      T.shell_request('git_${turn}', 'git status'),
      T.shell_request('short_${turn}', 'git status -s'),
      { type = 'message', text = 'Done.' },
    },
  })
  vim.cmd('cd ' .. vim.fn.fnameescape(ctx.project))
  T.defer(function()
    vim.cmd('cd -')
  end)
  local decided = T.on('AcpPermissionDecided')
  require('acp').prompt('Look')
  local win = T.wait_prompt('git_1')
  local text = T.win_text(win)
  T.contains(text, '[S]/[P] like s/p, broader: Bash(git status *)', 'the broad line, with its keys and its rule')
  T.ok(text:find('[p] allow like this', 1, true) < text:find('[S]/[P]', 1, true), 'under the exact rule')
  T.contains(text, 's p S P t: answer', 'the footer names the keys')
  T.answer_with_keys('git_1', 'P')
  T.eq(T.answer(ctx, 'git_1').result, selected('allow'), 'P answers allow once')
  local msgs = T.wait(function()
    local m = vim.fn.execute('messages')
    return m:find('wrote the allow rule', 1, true) and m
  end, nil, 'the message of P')
  T.contains(msgs, 'acp: wrote the allow rule Bash(git status *) to .acp/settings.json', 'names the rule and the file')
  T.eq(settings(ctx.project).permissions.allow, { 'Bash(git status *)' }, 'the broader rule written, not the exact one')
  T.eq(T.answer(ctx, 'short_1').result, selected('allow'), 'git status -s is allowed without a prompt')
  T.wait(function()
    return #decided >= 1
  end, nil, 'AcpPermissionDecided')
  T.eq(decided[1].toolCallId, 'short_1', 'decided by itself')
  T.eq(decided[1].by .. ' ' .. tostring(decided[1].rule), 'rule Bash(git status *)', 'by the rule P wrote')
end)

T.test('S remembers the broader rule for the conversation; <CR> on its line names the keys; S with none says so', function()
  local ctx = T.start_demo({
    name = 'broad-session',
    steps = {
      T.shell_request('git_${turn}', 'git status'),
      T.shell_request('short_${turn}', 'git status --short'),
      T.shell_request('rm_${turn}', 'rm -rf build'),
      { type = 'message', text = 'Done.' },
    },
  })
  -- The prompt's warnings are not kept in :messages: catch them.
  local echoed = {}
  local real = vim.api.nvim_echo
  vim.api.nvim_echo = function(chunks, history, opts)
    echoed[#echoed + 1] = chunks[1] and chunks[1][1]
    return real(chunks, history, opts)
  end
  T.defer(function()
    vim.api.nvim_echo = real
  end)
  local decided = T.on('AcpPermissionDecided')
  require('acp').prompt('Look')
  local win = T.answer_with_keys('git_1', '')
  local rows = vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(win), 0, -1, false)
  local row
  for i, l in ipairs(rows) do
    row = row or (l:find('[S]/[P]', 1, true) and i)
  end
  T.ok(row ~= nil, 'the broad line:\n' .. table.concat(rows, '\n'))
  vim.api.nvim_win_set_cursor(win, { row, 0 })
  T.feed('<CR>')
  T.eq(echoed[#echoed], 'acp: press S (conversation) or P (project)', '<CR> on it names its keys')
  T.ok(require('acp.state').pending[T.wait_pending('git_1').id] ~= nil, 'and answers nothing')
  T.feed('S')
  T.eq(T.answer(ctx, 'git_1').result, selected('allow'), 'S answers allow once')
  T.contains(vim.fn.execute('messages'), 'acp: remembered Bash(git status *) for the rest of this conversation', 'the message of S')
  T.eq(T.answer(ctx, 'short_1').result, selected('allow'), 'git status --short, allowed from memory')
  T.wait(function()
    return #decided >= 1
  end, nil, 'AcpPermissionDecided')
  T.eq(decided[1].by .. ' ' .. tostring(decided[1].rule), 'memory Bash(git status *)', 'by the broader rule')
  T.ok(not T.exists(ctx.project .. '/.acp/settings.json'), 'nothing written')

  win = T.wait_prompt('rm_1')
  T.ok(not T.win_text(win):find('[S]', 1, true), 'no broad line for rm')
  T.answer_with_keys('rm_1', 'S')
  T.eq(echoed[#echoed], 'acp: no broader rule is suggested for this request; s remembers the exact one', 'S says why')
  T.eq(T.wait_prompt('rm_1'), win, 'still asking')
  vim.cmd('AcpDeny')
  T.eq(T.answer(ctx, 'rm_1').result, selected('reject'), 'rejected')
end)
T.done()
