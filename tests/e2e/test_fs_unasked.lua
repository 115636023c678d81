-- fs/write_text_file and terminal/create the agent did not ask about (design
-- §9, issue 11 item 4): done only where the policy allows that edit or
-- command by itself (acceptEdits inside the project, yolo, a rule) or an
-- allowed request of this turn names it; otherwise the broker asks the
-- person itself, with a prompt naming the path and showing the diff (or the
-- command). The answer completes or refuses (-32001) the agent's call; a
-- cancelled turn refuses it. Every such decision is one audit line.
local T = require('helpers')
local api = vim.api

local audit_lines = T.audit_lines

-- The audit lines of ctx's session whose title starts with prefix.
local function audited(ctx, prefix)
  local r = {}
  for _, l in ipairs(audit_lines()) do
    if l.sessionId == ctx.session and type(l.title) == 'string' and l.title:sub(1, #prefix) == prefix then
      r[#r + 1] = l
    end
  end
  return r
end

-- Waits for the broker's own prompt titled title; returns the pending entry.
local function own_prompt(title)
  return T.wait(function()
    for _, p in ipairs(require('acp').pending()) do
      if p.title == title then
        return p
      end
    end
  end, nil, 'a prompt titled ' .. title)
end

-- The status of tool call tcid as Lua knows it (the broker reports on its
-- own prompts' calls like an agent does).
local function tool_status(ctx, tcid)
  local s = require('acp.state').sessions[ctx.session]
  local t = s and s.tools[tcid]
  return t and t.status
end

local function write_step(path, content)
  return { type = 'write', path = path, content = content }
end

-- A Gemini-shaped edit request for path (no tool_call first).
local function edit_request(tcid, path, content)
  return {
    type = 'permission',
    toolCall = {
      toolCallId = tcid,
      title = 'Edit ' .. path,
      kind = 'edit',
      locations = { { path = '${cwd}/' .. path } },
      content = { { type = 'diff', path = '${cwd}/' .. path, oldText = vim.NIL, newText = content } },
    },
    options = {
      { optionId = 'proceed_once', name = 'Allow', kind = 'allow_once' },
      { optionId = 'cancel', name = 'Reject', kind = 'reject_once' },
    },
  }
end

-- The demo agent's messages (agent_message_chunk texts joined per message).
local function said(ctx, text)
  local all = {}
  for _, m in ipairs(T.messages(T.transcript(ctx.transcript), 'out', 'session/update')) do
    local u = m.params.update
    if u.sessionUpdate == 'agent_message_chunk' then
      all[#all + 1] = u.content.text
    end
  end
  return table.concat(all):find(text, 1, true) ~= nil
end

-- The client's answer to the agent's fs/write_text_file of path (absolute).
local function write_answers(ctx, path)
  local tr = T.transcript(ctx.transcript)
  local ids = {}
  for _, m in ipairs(T.messages(tr, 'out', 'fs/write_text_file')) do
    if m.params.path == path then
      ids[#ids + 1] = m.id
    end
  end
  local r = {}
  for _, id in ipairs(ids) do
    for _, m in ipairs(T.messages(tr, 'in')) do
      if m.method == nil and m.id == id then
        r[#r + 1] = m
      end
    end
  end
  return r
end

T.test('default mode: an unasked write is asked; reject leaves no file, allow writes it', function()
  local project = T.project()
  T.write(project .. '/src/old.c', 'int a;\n')
  -- What the person has is the unsaved buffer: the diff is against it.
  vim.cmd('edit ' .. vim.fn.fnameescape(project .. '/src/old.c'))
  local buf = api.nvim_get_current_buf()
  api.nvim_buf_set_lines(buf, 0, -1, false, { 'int unsaved;' })
  local ctx = T.start_demo({
    name = 'unasked-default',
    steps = {
      write_step('src/new.c', 'int fresh;\n'),
      write_step('src/old.c', 'int unsaved;\nint added;\n'),
      { type = 'message', text = 'Done.' },
    },
  }, { project = project })
  require('acp').prompt('Write two files')

  local p = own_prompt('Write src/new.c (not asked by the agent)')
  T.eq(p.kind, 'edit', 'kind')
  T.eq(#p.options, 2, 'two options')
  T.eq(p.options[1].kind, 'allow_once', 'first option')
  T.eq(p.options[2].kind, 'reject_once', 'second option')
  local win = T.wait_prompt(p.toolCallId)
  local text = T.win_text(win)
  T.contains(text, 'Write src/new.c (not asked by the agent)', 'the prompt names the path')
  T.contains(text, '(new file)', 'the prompt shows a new file')
  T.contains(text, '+int fresh;', 'the prompt shows the content')
  T.contains(text, 'without asking', 'the prompt says why')
  T.ok(not T.exists(project .. '/src/new.c'), 'nothing written while the person decides')
  T.answer_with_keys(p.toolCallId, 'r')
  T.wait(function()
    return said(ctx, 'Failed: write ' .. project .. '/src/new.c')
  end, nil, 'the agent to learn the write failed')
  local r = write_answers(ctx, project .. '/src/new.c')
  T.eq(#r, 1, 'one answer to the write')
  T.eq(r[1].error.code, -32001, 'refused')
  T.ok(not T.exists(project .. '/src/new.c'), 'reject leaves no file')

  local q = own_prompt('Write src/old.c (not asked by the agent)')
  text = T.win_text(T.wait_prompt(q.toolCallId))
  T.contains(text, ' int unsaved;', 'the diff is against the unsaved buffer')
  T.contains(text, '+int added;', 'the added line')
  T.answer_with_keys(q.toolCallId, 'a')
  T.idle()
  T.eq(write_answers(ctx, project .. '/src/old.c')[1].result, vim.empty_dict(), 'the allowed write succeeded')
  T.eq(T.read(project .. '/src/old.c'), 'int unsaved;\nint added;\n', 'allow writes it')
  T.eq(api.nvim_buf_get_lines(buf, 0, -1, false), { 'int unsaved;', 'int added;' }, 'through the buffer')
  T.wait(function()
    return tool_status(ctx, q.toolCallId) == 'completed'
  end, nil, 'the allowed write reported completed')
  T.eq(tool_status(ctx, p.toolCallId), 'pending', 'the rejected one was never run')

  local lines = audited(ctx, 'Write src/')
  T.eq(#lines, 2, 'two audit lines')
  T.eq({ lines[1].decision, lines[1].by, lines[1].outcome, lines[1].optionId }, { 'ask', 'person', 'selected', 'reject_once' }, 'the reject')
  T.eq({ lines[2].decision, lines[2].by, lines[2].outcome, lines[2].optionId }, { 'ask', 'person', 'selected', 'allow_once' }, 'the allow')
  T.eq(lines[1].paths[1], project .. '/src/new.c', 'the audited path')
  T.eq(lines[1].sessionId, ctx.session, 'the session')
end)

T.test('acceptEdits: an unasked write inside the project is done, audited by mode', function()
  local ctx = T.start_demo({
    name = 'unasked-accept',
    steps = { write_step('src/new.c', 'int a;\n'), { type = 'message', text = 'Done.' } },
  }, { setup = { ui = { arm_ms = 50 }, permissions = { defaultMode = 'acceptEdits' } } })
  require('acp').prompt('Write')
  T.idle()
  T.eq(T.read(ctx.project .. '/src/new.c'), 'int a;\n', 'written')
  T.eq(#require('acp').pending(), 0, 'nothing asked')
  local lines = audited(ctx, 'Write src/new.c')
  T.eq(#lines, 1, 'one audit line')
  T.eq({ lines[1].decision, lines[1].by, lines[1].outcome }, { 'allow', 'mode', 'selected' }, 'audited by mode')
end)

T.test('yolo: an unasked write is done, audited by yolo; a deny rule still refuses', function()
  local project = T.project()
  T.write(project .. '/.acp/settings.json', '{"permissions":{"deny":["Edit(/secret/**)"]}}')
  local ctx = T.start_demo({
    name = 'unasked-yolo',
    steps = {
      write_step('src/new.c', 'int y;\n'),
      write_step('secret/key.txt', 'x\n'),
      { type = 'message', text = 'Done.' },
    },
  }, { project = project, setup = { ui = { arm_ms = 50 }, yolo = true } })
  require('acp').prompt('Write')
  T.idle()
  T.eq(T.read(project .. '/src/new.c'), 'int y;\n', 'written')
  T.ok(not T.exists(project .. '/secret/key.txt'), 'the denied one is not')
  T.eq(write_answers(ctx, project .. '/secret/key.txt')[1].error.code, -32001, 'refused')
  T.eq(#require('acp').pending(), 0, 'nothing asked')
  local y = audited(ctx, 'Write src/new.c')
  T.eq({ #y, y[1].decision, y[1].by }, { 1, 'allow', 'yolo' }, 'audited by yolo')
  local d = audited(ctx, 'Write secret/key.txt')
  T.eq({ #d, d[1].decision, d[1].by, d[1].rule }, { 1, 'deny', 'rule', 'Edit(/secret/**)' }, 'audited by rule')
end)

T.test('an allowed request links its own write (no second prompt), never another path', function()
  local ctx = T.start_demo({
    name = 'unasked-other',
    steps = {
      -- Gemini's order: ask, then write through fs/*.
      edit_request('edit_a_${turn}', 'a.txt', 'A\n'),
      write_step('a.txt', 'A\n'),
      -- The same path again: the answer was used up by the first write.
      write_step('a.txt', 'A again\n'),
      -- A path the request did not name.
      write_step('b.txt', 'B\n'),
      { type = 'message', text = 'Done.' },
    },
  })
  require('acp').prompt('Write a and b')
  T.answer_with_keys('edit_a_1', 'a')
  local again = own_prompt('Write a.txt (not asked by the agent)')
  T.eq(T.read(ctx.project .. '/a.txt'), 'A\n', 'the asked-for write was done without a second prompt')
  T.answer_with_keys(again.toolCallId, 'r')
  local b = own_prompt('Write b.txt (not asked by the agent)')
  T.answer_with_keys(b.toolCallId, 'r')
  T.idle()
  T.eq(T.read(ctx.project .. '/a.txt'), 'A\n', 'the second write of a.txt was refused')
  T.ok(not T.exists(ctx.project .. '/b.txt'), 'b.txt not written')
  local n = 0
  for _, e in ipairs(require('acp.state').logged()) do
    if e.event == 'permission' and e.data.session == ctx.session then
      n = n + 1
    end
  end
  T.eq(n, 3, 'prompts: the request, the second a.txt write, b.txt')
end)

T.test('an allowed read of a path does not cover writing it', function()
  local ctx = T.start_demo({
    name = 'unasked-read-kind',
    steps = {
      {
        type = 'permission',
        toolCall = { toolCallId = 'read_r_${turn}', title = 'Read r.txt', kind = 'read', locations = { { path = '${cwd}/r.txt' } } },
        options = { { optionId = 'ok', name = 'Allow', kind = 'allow_once' } },
      },
      write_step('r.txt', 'r\n'),
      { type = 'message', text = 'Done.' },
    },
  })
  require('acp').prompt('Read, then write')
  local p = own_prompt('Write r.txt (not asked by the agent)')
  T.answer_with_keys(p.toolCallId, 'r')
  T.idle()
  T.ok(not T.exists(ctx.project .. '/r.txt'), 'not written')
end)

T.test("an answer covers its own turn only", function()
  local ctx = T.start_demo({
    name = 'unasked-turns',
    steps = {
      write_step('t.txt', 'turn ${turn}\n'),
      edit_request('edit_t_${turn}', 't.txt', 'x\n'),
      { type = 'message', text = 'Done.' },
    },
  })
  -- Turn 1: the unasked write is asked (rejected); then the request for
  -- t.txt is allowed, and nothing uses that answer in turn 1.
  require('acp').prompt('Turn 1')
  local p1 = own_prompt('Write t.txt (not asked by the agent)')
  T.answer_with_keys(p1.toolCallId, 'r')
  T.answer_with_keys('edit_t_1', 'a')
  T.idle()
  -- Turn 2: the same unasked write is asked again.
  require('acp').prompt('Turn 2')
  local p2 = own_prompt('Write t.txt (not asked by the agent)')
  T.ok(p2.id ~= p1.id, 'a new prompt')
  T.ok(not T.exists(ctx.project .. '/t.txt'), 'not written before the answer')
  T.answer_with_keys(p2.toolCallId, 'a')
  T.answer_with_keys('edit_t_2', 'r')
  T.idle()
  T.eq(T.read(ctx.project .. '/t.txt'), 'turn 2\n', 'written once allowed')
end)

T.test('cancelling the turn refuses the waiting write; the prompt closes', function()
  local ctx = T.start_demo({
    name = 'unasked-cancel',
    steps = { write_step('c.txt', 'c\n'), { type = 'message', text = 'Done.' } },
  })
  require('acp').prompt('Write')
  local p = own_prompt('Write c.txt (not asked by the agent)')
  T.wait_prompt(p.toolCallId)
  local resolved = T.on('AcpPermissionResolved')
  require('acp').cancel()
  T.wait(function()
    return #write_answers(ctx, ctx.project .. '/c.txt') == 1
  end, nil, 'the answer to the write')
  T.eq(write_answers(ctx, ctx.project .. '/c.txt')[1].error.code, -32001, 'refused')
  T.wait(function()
    return #resolved == 1
  end, nil, 'AcpPermissionResolved')
  T.eq({ resolved[1].outcome, resolved[1].by }, { 'cancelled', 'cancel' }, 'resolved as cancelled')
  T.eq(#require('acp').pending(), 0, 'nothing pending')
  T.wait(function()
    return require('acp.prompt').current() == nil
  end, nil, 'the prompt to close')
  T.ok(not T.exists(ctx.project .. '/c.txt'), 'no file')
  local l = audited(ctx, 'Write c.txt')
  T.eq({ #l, l[1].by, l[1].outcome }, { 1, 'cancel', 'cancelled' }, 'audited as cancelled')
end)

T.test('a turn cancelled while the broker reads the old text refuses the write; no prompt appears', function()
  local ctx = T.start_demo({
    name = 'unasked-cancel-early',
    steps = { write_step('early.txt', 'e\n'), { type = 'message', text = 'Done.' } },
  })
  -- The person cancels just as the broker asks Neovim for the file's
  -- current text (before the prompt exists): the cancel reaches the broker
  -- before the answer to that call.
  local fs = require('acp.fs')
  local handle = fs.handle
  T.defer(function()
    fs.handle = handle
  end)
  fs.handle = function(op, path, ...)
    if op == 'read' and path:sub(-#'/early.txt') == '/early.txt' then
      require('acp').cancel()
    end
    return handle(op, path, ...)
  end
  require('acp').prompt('Write')
  T.wait(function()
    return #write_answers(ctx, ctx.project .. '/early.txt') == 1
  end, nil, 'the answer to the write')
  T.eq(write_answers(ctx, ctx.project .. '/early.txt')[1].error.code, -32001, 'refused')
  T.idle()
  T.eq(#require('acp').pending(), 0, 'no prompt')
  T.ok(not T.exists(ctx.project .. '/early.txt'), 'no file')
  local l = audited(ctx, 'Write early.txt')
  T.eq({ #l, l[1].by, l[1].outcome }, { 1, 'cancel', 'cancelled' }, 'audited as cancelled')
end)

T.test('stopping the agent cancels the waiting write and command prompts', function()
  local ctx = T.start_demo({
    name = 'unasked-stop',
    steps = {
      T.raw_request('w', 'fs/write_text_file', { sessionId = '${session}', path = '${cwd}/s.txt', content = 's\n' }),
      T.raw_request('t', 'terminal/create', { sessionId = '${session}', command = 'touch stopped.txt' }),
      { type = 'sleep', ms = 60000 },
    },
  })
  local resolved = T.on('AcpPermissionResolved')
  require('acp').prompt('Write and run, then wait')
  own_prompt('Write s.txt (not asked by the agent)')
  own_prompt('Run touch stopped.txt (not asked by the agent)')
  require('acp').stop()
  T.wait(function()
    return #resolved == 2
  end, nil, 'both prompts resolved')
  for _, r in ipairs(resolved) do
    T.eq(r.outcome, 'cancelled', 'outcome')
  end
  T.eq(#require('acp').pending(), 0, 'nothing pending')
  T.ok(not T.exists(ctx.project .. '/s.txt'), 'no file')
  T.ok(not T.exists(ctx.project .. '/stopped.txt'), 'no command ran')
  local l = audited(ctx, '')
  T.eq(#l, 2, 'two audit lines')
  T.eq({ l[1].by, l[1].outcome, l[2].by, l[2].outcome }, { 'cancel', 'cancelled', 'cancel', 'cancelled' }, 'audited as cancelled')
end)

T.test('an unasked terminal/create is asked, showing the command; allow runs it; rules decide alone', function()
  local ctx = T.start_demo({
    name = 'unasked-terminal',
    steps = {
      { type = 'run', command = 'echo one > one.txt' },
      { type = 'run', command = 'echo two > two.txt' },
      { type = 'run', command = 'touch three.txt' },
      { type = 'run', command = 'rm -f two.txt' },
      { type = 'message', text = 'Done.' },
    },
  }, {
    setup = { ui = { arm_ms = 50 }, permissions = { allow = { 'Bash(touch three.txt)' }, deny = { 'Bash(rm *)' } } },
  })
  require('acp').prompt('Run')
  local one = own_prompt('Run echo one > one.txt (not asked by the agent)')
  T.eq(one.kind, 'execute', 'kind')
  local text = T.win_text(T.wait_prompt(one.toolCallId))
  T.contains(text, '$ echo one > one.txt', 'the prompt shows the command')
  T.answer_with_keys(one.toolCallId, 'r')
  local two = own_prompt('Run echo two > two.txt (not asked by the agent)')
  T.answer_with_keys(two.toolCallId, 'a')
  T.idle()
  T.ok(not T.exists(ctx.project .. '/one.txt'), 'the rejected command did not run')
  T.eq(T.read(ctx.project .. '/two.txt'), 'two\n', 'the allowed command ran; the denied rm did not')
  T.ok(T.exists(ctx.project .. '/three.txt'), 'the command an allow rule covers ran without a prompt')
  T.wait(function()
    return tool_status(ctx, two.toolCallId) == 'completed'
  end, nil, 'the allowed command reported completed')
  local tr = T.transcript(ctx.transcript)
  local refused
  for _, m in ipairs(T.messages(tr, 'in')) do
    if m.method == nil and type(m.error) == 'table' and tostring(m.error.message):find('terminal/create', 1, true) then
      refused = m.error.code
    end
  end
  T.eq(refused, -32001, 'the rejected terminal/create got -32001')
  local l = audited(ctx, 'Run ')
  T.eq(#l, 4, 'four audit lines')
  T.eq({ l[1].by, l[1].optionId, l[1].command }, { 'person', 'reject_once', 'echo one > one.txt' }, 'the reject')
  T.eq({ l[2].by, l[2].optionId }, { 'person', 'allow_once' }, 'the allow')
  T.eq({ l[3].decision, l[3].by, l[3].rule }, { 'allow', 'rule', 'Bash(touch three.txt)' }, 'allowed by a rule')
  T.eq({ l[4].decision, l[4].by, l[4].rule }, { 'deny', 'rule', 'Bash(rm *)' }, 'denied by a rule')
  T.eq(#audited(ctx, ''), 4, 'and no other line')
end)

T.done()
