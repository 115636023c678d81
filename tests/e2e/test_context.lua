-- Context into prompts (lua/acp/context.lua): `:[range]AcpPrompt`, `:AcpAdd`,
-- `@path` and `#words` in the chat input, and the ACP content blocks they
-- become for the agent's promptCapabilities. Every assertion reads the
-- session/prompt the demo agent received (its transcript).
local T = require('helpers')
local api = vim.api

--- A scenario that answers every prompt with one message; `caps` becomes
--- the agent's promptCapabilities (nil: the demo's default, none offered).
local function scenario(caps)
  local s = { name = 'reply', steps = { { type = 'message', text = 'Reply number ${turn}.' } } }
  if caps ~= nil then
    s.agent_capabilities = { promptCapabilities = caps }
  end
  return s
end

--- The `prompt` array of the n-th session/prompt the agent received.
local function prompt_n(ctx, n)
  local list = T.wait(function()
    local m = T.messages(T.transcript(ctx.transcript), 'in', 'session/prompt')
    return #m >= n and m
  end, nil, n .. ' session/prompt in the transcript')
  return list[n].params.prompt
end

local function uri(path)
  return 'file://' .. path
end

--- Writes the project's files and opens src/main.c with an unsaved change
--- on line 3; returns its path and buffer.
local function code(ctx)
  local main = ctx.project .. '/src/main.c'
  T.write(main, 'int a;\nint b;\nint c;\nint d;\n')
  T.write(ctx.project .. '/notes.txt', 'hello notes\n')
  vim.cmd('silent! only!')
  vim.cmd('edit ' .. vim.fn.fnameescape(main))
  local buf = api.nvim_get_current_buf()
  vim.bo[buf].filetype = 'c'
  api.nvim_buf_set_lines(buf, 2, 3, false, { 'int changed;' })
  T.defer(function()
    vim.cmd('silent! only!')
    pcall(api.nvim_buf_delete, buf, { force = true })
    require('acp.context').clear()
  end)
  return main, buf
end

--- The line above the chat input: the input window's winbar (0.8+), else
--- the chat window's statusline.
local function context_bar(ctx)
  local chat_buf = require('acp.chat').buffer(ctx.session)
  for _, w in ipairs(api.nvim_tabpage_list_wins(0)) do
    local b = api.nvim_win_get_buf(w)
    if vim.fn.has('nvim-0.8') == 1 then
      if api.nvim_buf_get_name(b):match('/input$') then
        return vim.wo[w].winbar
      end
    elseif b == chat_buf then
      return vim.wo[w].statusline
    end
  end
  return nil
end

--- Opens the chat and waits until its input window has focus.
local function open_chat(ctx)
  T.ok(require('acp').chat())
  T.wait(function()
    return api.nvim_buf_get_name(0):match('/input$') and require('acp.chat').buffer(ctx.session)
  end, nil, 'the chat input to have focus')
end

--- Types `line` into the chat input and sends it with <CR>.
local function send_input(line)
  api.nvim_buf_set_lines(0, 0, -1, false, { line })
  T.feed('<CR>')
end

T.test(":'<,'>AcpPrompt sends the selection with its path and range (baseline: a link and the text)", function()
  local ctx = T.start_demo(scenario(nil))
  local main = code(ctx)
  vim.cmd('normal! 2GVj\27')
  vim.cmd("'<,'>AcpPrompt explain this")
  local p = prompt_n(ctx, 1)
  T.eq(#p, 3, 'blocks: ' .. vim.inspect(p))
  T.eq(p[1], { type = 'text', text = 'explain this' }, 'the text first')
  T.eq(p[2], { type = 'resource_link', uri = uri(main) .. '#L2-3', name = 'src/main.c:2-3' }, 'a link with the range')
  T.eq(p[3].type, 'text', 'the selected text as text')
  T.contains(p[3].text, 'src/main.c (lines 2-3):\n```c\nint b;\nint changed;\n```', 'the selection (unsaved line included)')
  T.idle()
end)

T.test(':[range]AcpPrompt with embeddedContext: one embedded resource; no range: the text alone', function()
  local ctx = T.start_demo(scenario({ embeddedContext = true }))
  local main = code(ctx)
  vim.cmd('2,3AcpPrompt explain this')
  local p = prompt_n(ctx, 1)
  T.eq(p, {
    { type = 'text', text = 'explain this' },
    {
      type = 'resource',
      resource = { uri = uri(main) .. '#L2-3', text = 'int b;\nint changed;', mimeType = 'text/plain' },
    },
  }, 'the prompt')
  T.idle()
  vim.cmd('AcpPrompt just text')
  T.eq(prompt_n(ctx, 2), { { type = 'text', text = 'just text' } }, 'no range: no context')
  T.idle()
end)

T.test(':AcpAdd stages buffer, file, diagnostics, quickfix: shown above the chat input, sent once, then cleared', function()
  local ctx = T.start_demo(scenario({ embeddedContext = true }))
  local main, buf = code(ctx)
  local ns = api.nvim_create_namespace('acp-e2e-context')
  vim.diagnostic.set(ns, buf, {
    { lnum = 1, col = 4, message = 'unused b', severity = vim.diagnostic.severity.WARN, source = 'cc' },
  })
  vim.fn.setqflist({ { filename = main, lnum = 2, col = 1, text = 'look here' } })
  vim.cmd('AcpAdd buffer')
  vim.cmd('AcpAdd file notes.txt')
  vim.cmd('AcpAdd diagnostics')
  vim.cmd('AcpAdd quickfix')
  vim.cmd('AcpAdd buffer') -- again: staged once, now last
  local context = require('acp.context')
  T.eq(#context.staged, 4, 'four items staged')
  -- The file changes after staging: what is sent is read when sending.
  api.nvim_buf_set_lines(buf, 3, 4, false, { 'int later;' })

  open_chat(ctx)
  local want = 'context: file notes.txt · diagnostics src/main.c · quickfix (1) · buffer src/main.c'
  T.contains(context_bar(ctx), want, 'the staged items above the input')
  send_input('please review')
  local p = prompt_n(ctx, 1)
  T.eq(p[1], { type = 'text', text = 'please review' }, 'the text first')
  T.eq(p[2], {
    type = 'resource',
    resource = { uri = uri(ctx.project .. '/notes.txt'), text = 'hello notes\n', mimeType = 'text/plain' },
  }, 'the file, embedded')
  T.eq(p[3], { type = 'text', text = 'Diagnostics of src/main.c:\nsrc/main.c:2:5: warn: unused b [cc]' }, 'diagnostics')
  T.eq(p[4], { type = 'text', text = 'Quickfix list:\nsrc/main.c:2:1: look here' }, 'the quickfix list')
  T.eq(p[5], {
    type = 'resource',
    resource = { uri = uri(main), text = 'int a;\nint b;\nint changed;\nint later;\n', mimeType = 'text/plain' },
  }, 'the buffer with its unsaved lines')
  T.eq(#p, 5, 'nothing else')
  T.eq(#context.staged, 0, 'the staged items are cleared once sent')
  T.eq(context_bar(ctx), '', 'the line above the input is gone')
  T.eq(api.nvim_buf_get_lines(0, 0, -1, false), { '' }, 'the input is cleared')
  T.idle()
  send_input('again')
  T.eq(#prompt_n(ctx, 2), 1, 'the next prompt goes without them')
  T.idle()
end)

T.test('the chat input: @path links a project file, #selection and #buffer mean the code window', function()
  local ctx = T.start_demo(scenario(nil))
  local main = code(ctx)
  vim.cmd('normal! 1GVj\27')
  open_chat(ctx)
  send_input('see @notes.txt, @nothere.txt and #selection.')
  local p = prompt_n(ctx, 1)
  T.eq(p[1], { type = 'text', text = 'see @notes.txt, @nothere.txt and #selection.' }, 'the text as typed')
  T.eq(p[2], { type = 'resource_link', uri = uri(ctx.project .. '/notes.txt'), name = 'notes.txt', size = 12 }, '@notes.txt')
  T.eq(p[3], { type = 'resource_link', uri = uri(main) .. '#L1-2', name = 'src/main.c:1-2' }, '#selection: its link')
  T.contains(p[4].text, 'int a;\nint b;', '#selection: its text')
  T.eq(#p, 4, 'a missing file is only text: ' .. vim.inspect(p))
  T.idle()
  send_input('and #buffer')
  p = prompt_n(ctx, 2)
  T.eq(p[2], { type = 'resource_link', uri = uri(main), name = 'src/main.c', size = 28 }, '#buffer without embeddedContext')
  T.idle()
end)

T.test('an image file: an image block when the agent offers image, else a link', function()
  local ctx = T.start_demo(scenario({ image = true }))
  local png = ctx.project .. '/pic.png'
  T.write(png, '\137PNG\r\n\26\n\0\0\0\rIHDR-some-bytes')
  local b64 = vim.fn.system({ 'base64', '-w0', png })
  require('acp').add_context({ kind = 'file', path = 'pic.png' })
  T.ok(require('acp').prompt('what is this'))
  T.eq(prompt_n(ctx, 1)[2], { type = 'image', data = b64, mimeType = 'image/png', uri = uri(png) }, 'image')
  T.eq(require('acp.context').base64('\255\0ab'), '/wBhYg==', 'base64 of bytes')
  T.eq(require('acp.context').base64('ab'), vim.fn.system({ 'base64', '-w0' }, 'ab'), 'base64 with padding')
  T.idle()
  T.stop_all()

  ctx = T.start_demo(scenario(nil), { project = ctx.project })
  T.ok(require('acp').prompt('what is this', { context = { { kind = 'file', path = png } } }))
  T.eq(
    prompt_n(ctx, 1)[2],
    { type = 'resource_link', uri = uri(png), name = 'pic.png', mimeType = 'image/png', size = 27 },
    'no image capability: a link'
  )
  T.idle()
end)

T.test('@ completes the project files: git ls-files respects .gitignore; elsewhere a walk', function()
  local ctx = T.start_demo(scenario(nil))
  T.write(ctx.project .. '/a.txt', 'a\n')
  T.write(ctx.project .. '/sub/b.lua', 'b\n')
  T.write(ctx.project .. '/secret.env', 's\n')
  T.write(ctx.project .. '/.gitignore', 'secret.env\n')
  vim.fn.system({ 'git', '-C', ctx.project, 'init', '-q' })
  T.eq(vim.v.shell_error, 0, 'git init')
  local context = require('acp.context')
  local all = context.complete_files('')
  table.sort(all)
  T.eq(all, { '@.gitignore', '@a.txt', '@sub/b.lua' }, 'git: the ignored file is left out')
  T.eq(context.complete_files('sub/'), { '@sub/b.lua' }, 'a prefix')
  T.eq(context.complete_files('B.L'), { '@sub/b.lua' }, 'no prefix match: a part of the path')

  -- The omnifunc of the chat input.
  open_chat(ctx)
  api.nvim_buf_set_lines(0, 0, -1, false, { 'look at @su' })
  api.nvim_win_set_cursor(0, { 1, 11 })
  local window = require('acp.chat.window')
  T.eq(window.complete(1, ''), 8, 'the completion starts at the @')
  T.eq(window.complete(0, '@su'), { '@sub/b.lua' }, 'files')
  api.nvim_buf_set_lines(0, 0, -1, false, { 'explain #se' })
  api.nvim_win_set_cursor(0, { 1, 11 })
  T.eq(window.complete(1, ''), 8, 'the completion starts at the #')
  T.eq(window.complete(0, '#se'), { { word = '#selection', menu = 'context' } }, '# words')
  -- Typing `@` at the start of a word opens the completion by itself.
  api.nvim_buf_set_lines(0, 0, -1, false, { '' })
  _G.acp_test_ci = nil
  T.feed('Asee @<Cmd>lua _G.acp_test_ci = vim.fn.complete_info({"items"})<CR><Esc>')
  local words = {}
  for _, it in ipairs((_G.acp_test_ci or {}).items or {}) do
    words[#words + 1] = it.word
  end
  table.sort(words)
  T.eq(words, { '@.gitignore', '@a.txt', '@sub/b.lua' }, 'the files offered after typing @')
  T.feed('Sa@<Cmd>lua _G.acp_test_ci = vim.fn.complete_info({"items"})<CR><Esc>')
  T.eq(#_G.acp_test_ci.items, 0, 'not inside a word (a@b)')
  T.stop_all()

  local plain = T.project()
  T.write(plain .. '/x/y.txt', 'y\n')
  T.write(plain .. '/.hidden/z.txt', 'z\n')
  T.start_demo(scenario(nil), { project = plain })
  T.eq(context.complete_files(''), { '@x/y.txt' }, 'no git: a walk without hidden directories')
end)

T.test('the broker refuses blocks the agent did not offer, and malformed ones; nothing is sent', function()
  local ctx = T.start_demo(scenario(nil))
  local ends = T.on('AcpTurnEnd')
  local rpc, state = require('acp.rpc'), require('acp.state')
  T.ok(rpc.prompt(ctx.agent, 'x', nil, { { type = 'resource', resource = { uri = 'file:///a', text = 't' } } }))
  state.prompt_sent(ctx.agent)
  T.wait(function()
    return #ends >= 1
  end, nil, 'the turn to end')
  T.eq(ends[1].stopReason, 'error', 'stopReason')
  T.contains(ends[1].message, 'do not offer embeddedContext', 'the reason')
  T.ok(rpc.prompt(ctx.agent, 'x', nil, { { type = 'resource_link', uri = 'file:///a' } }))
  state.prompt_sent(ctx.agent)
  T.wait(function()
    return #ends >= 2
  end, nil, 'the second turn to end')
  T.contains(ends[2].message, "content block 1: 'name' is missing", 'a malformed block')
  T.ok(rpc.prompt(ctx.agent, 'x', nil, { { type = 'text', text = 'ok' } }))
  state.prompt_sent(ctx.agent)
  local p = prompt_n(ctx, 1)
  T.eq(p, { { type = 'text', text = 'x' }, { type = 'text', text = 'ok' } }, 'only the valid prompt reached the agent')
  T.idle()
  T.eq(#T.messages(T.transcript(ctx.transcript), 'in', 'session/prompt'), 1, 'one session/prompt in all')
end)

T.test(':AcpAdd: errors, selection copied when staged, listing and clear', function()
  local ctx = T.start_demo(scenario({ embeddedContext = true }))
  local main, buf = code(ctx)
  pcall(vim.cmd, 'AcpAdd nonsense')
  T.contains(T.notes_text(), ':AcpAdd: unknown kind nonsense', 'an unknown kind')
  pcall(vim.cmd, 'AcpAdd file nothere.txt')
  T.contains(T.notes_text(), 'nothere.txt is not a readable file', 'a missing file')
  T.eq(require('acp').add_context({ kind = 'selection', buf = buf, first = 3, last = 9 }), false, 'lines outside')
  vim.cmd('1,2AcpAdd selection')
  api.nvim_buf_set_lines(buf, 0, 2, false, { 'gone', 'gone' })
  T.eq(#require('acp.context').staged, 1, 'staged')
  T.ok(require('acp').prompt('look'))
  T.eq(prompt_n(ctx, 1)[2].resource, {
    uri = uri(main) .. '#L1-2',
    text = 'int a;\nint b;',
    mimeType = 'text/plain',
  }, 'the selection as it was when staged')
  T.idle()
  vim.fn.setqflist({})
  pcall(vim.cmd, 'AcpAdd quickfix')
  T.contains(T.notes_text(), 'quickfix list is empty', 'an empty quickfix list')
  vim.cmd('AcpAdd buffer')
  vim.cmd('AcpAdd clear')
  T.eq(#require('acp.context').staged, 0, 'cleared')
  T.eq(vim.fn.getcompletion('AcpAdd ', 'cmdline'), { 'buffer', 'file', 'selection', 'diagnostics', 'quickfix', 'clear' }, 'completion')
end)

T.done()
