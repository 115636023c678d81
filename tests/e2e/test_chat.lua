-- The chat buffer (lua/acp/chat/): one buffer per session, drawn from the
-- broker's events on a timer. Most tests play tests/scenarios/chat.json with
-- the demo agent and read the buffer; the events the broker does not send
-- yet (turn_start's text, terminal, session_loading) are fed to
-- require('acp.broker')._on_event, the entry point the broker calls.
local T = require('helpers')
local api = vim.api
local uv = vim.uv or vim.loop

local function lines(buf)
  return api.nvim_buf_get_lines(buf, 0, -1, false)
end

local function text(buf)
  return table.concat(lines(buf), '\n')
end

--- 1-based index of the first line equal to `line`, or nil.
local function find(ls, line, from)
  for i = from or 1, #ls do
    if ls[i] == line then
      return i
    end
  end
  return nil
end

--- How many lines contain `sub`.
local function count(ls, sub)
  local n = 0
  for _, l in ipairs(ls) do
    if l:find(sub, 1, true) then
      n = n + 1
    end
  end
  return n
end

--- Waits until the chat buffer of `session` shows `needle`; returns it.
local function wait_text(session, needle, timeout)
  return T.wait(function()
    local buf = require('acp.chat').buffer(session)
    return buf and text(buf):find(needle, 1, true) and buf
  end, timeout, 'the chat of ' .. session .. ' to show ' .. vim.inspect(needle))
end

--- Waits until the chat of `session` has drawn everything queued (it
--- draws in slices: a line may show before the rest of its tick).
local function settled(session)
  T.wait(function()
    local chat = require('acp.chat.model').chats[session]
    return chat and #chat.queue == 0 and not chat.header_dirty
  end, nil, 'the chat of ' .. session .. ' to draw all it queued')
end

local function groups(buf, row)
  return T.hl_groups(buf, 'acp-chat', row)
end

--- Starts chat.json, sends a prompt and waits for the edit's permission.
local function chat_turn()
  local ctx = T.start_demo('chat.json')
  T.ok(require('acp').prompt('fix notes.txt'))
  ctx.pending = T.wait_pending('chat_edit_1')
  return ctx
end

--- Starts the demo agent under another name (a symlink), so that two agents
--- run side by side; like T.start_demo otherwise.
local function start_other(name, scenario)
  local dir = T.project()
  local link = dir .. '/' .. name
  assert(uv.fs_symlink(os.getenv('ACP_DEMO_AGENT_BIN'), link))
  local ctx = { project = T.project(), transcript = T.tmpname('transcript', '.jsonl') }
  T.ok(require('acp').start({
    cmd = { link },
    env = { ACP_DEMO_SCENARIO = T.scenario(scenario), ACP_DEMO_TRANSCRIPT = ctx.transcript },
  }, { cwd = ctx.project }))
  ctx.agent = name
  ctx.session = T.wait(function()
    local a = require('acp.state').agents[name]
    return a and a.session
  end, nil, 'the session of ' .. name)
  return ctx
end

local reply = { name = 'reply', steps = { { type = 'message', text = 'Reply number ${turn}.' } } }

T.test('streamed chunks become one message; a thought is shown apart, dimmed', function()
  local ctx = chat_turn()
  local msg = 'Hello from the demo agent! I will read notes.txt, then fix its second line.'
  local buf = wait_text(ctx.session, msg)
  local ls = lines(buf)
  local i = T.ok(find(ls, msg), 'the message on one line of its own:\n' .. text(buf))
  T.eq(ls[i - 1], ctx.agent, 'the line above the message')
  local chunks = 0
  for _, m in ipairs(T.messages(T.transcript(ctx.transcript), 'out', 'session/update')) do
    local u = m.params.update
    local t = u.sessionUpdate == 'agent_message_chunk' and u.content.text
    if type(t) == 'string' and msg:find(t, 1, true) then
      chunks = chunks + 1
    end
  end
  T.ok(chunks >= 3, 'the agent streamed the message in several chunks: ' .. chunks)

  local j = T.ok(find(ls, '│ The person wants notes.txt fixed; read it first.'), 'the thought:\n' .. text(buf))
  T.eq(ls[j - 1], ctx.agent .. ' · thinking', 'the line above the thought')
  T.ok(j < i, 'the thought comes first')
  T.eq(groups(buf, j - 1), { 'AcpChatThought' }, 'highlight of the thought')
  T.eq(groups(buf, i - 1), {}, 'highlight of the message')
end)

T.test('the chat buffer: name, options, header; not modifiable', function()
  local ctx = chat_turn()
  -- The header's count (drawn once the blocks before it are).
  local buf = wait_text(ctx.session, '1 awaiting your answer')
  T.eq(api.nvim_buf_get_name(buf), ('acp://chat/%s/%s'):format(ctx.agent, ctx.session), 'name')
  T.eq(vim.bo[buf].filetype, 'acpchat', 'filetype')
  T.eq(vim.bo[buf].buftype, 'nofile', 'buftype')
  T.eq(vim.bo[buf].bufhidden, 'hide', 'bufhidden')
  T.eq(vim.bo[buf].modifiable, false, 'modifiable')
  T.eq(vim.fn.buflisted(buf), 0, 'listed')
  local ls = lines(buf)
  T.contains(ls[1], ('acp chat · %s · session %s'):format(ctx.agent, ctx.session), 'header')
  T.contains(ls[2], 'working…', 'state in the header')
  T.contains(ls[2], '1 awaiting your answer', 'prompts waiting, in the header')
  local ok = pcall(api.nvim_buf_set_lines, buf, 0, 1, false, { 'typed over' })
  T.eq(ok, false, 'the person cannot change the history')
end)

T.test('a tool call is updated in place: title kept, status changed, one block', function()
  local ctx = chat_turn()
  local buf = wait_text(ctx.session, '[pending] Edit notes.txt · edit')
  local before = lines(buf)
  local row = find(before, '[pending] Edit notes.txt · edit')
  T.eq(count(before, 'Edit notes.txt · edit'), 1, 'blocks for the edit')
  -- The read was created by tool_call and completed by a tool_call_update
  -- without a title.
  local r = T.ok(find(before, '[done] Read notes.txt · read'), 'the completed read:\n' .. text(buf))
  T.eq({ before[r + 1], before[r + 2] }, { '  one', '  two' }, 'its content')
  T.eq(count(before, 'Read notes.txt · read'), 1, 'blocks for the read')

  -- The answer: the agent sends a tool_call_update {status = completed}
  -- without a title.
  T.ok(require('acp').respond(ctx.pending.id, 'allow'))
  T.idle()
  buf = wait_text(ctx.session, 'All done.')
  settled(ctx.session)
  local after = lines(buf)
  T.eq(after[row], '[done] Edit notes.txt · edit', 'the same line, updated')
  T.eq(count(after, 'Edit notes.txt · edit'), 1, 'blocks for the edit after the update')
  T.eq(after[row + 1], '  you chose: Allow', 'the answer replaced the question')
  T.eq(count(after, 'awaiting your answer'), 0, 'questions left')
  T.eq(groups(buf, row - 1)[1], 'AcpChatDone', 'highlight of the status')
  T.ok(find(after, 'Done: Edit notes.txt (wrote ' .. ctx.project .. '/notes.txt)'), "the agent's message after it")
end)

T.test('a permission shows on its tool call with the diff as -/+ lines', function()
  local ctx = chat_turn()
  local buf = wait_text(ctx.session, '[pending] Edit notes.txt · edit')
  local ls = lines(buf)
  local row = find(ls, '[pending] Edit notes.txt · edit')
  T.contains(ls[row + 1], '  ? awaiting your answer (:AcpPending)', 'the line under the title')
  T.eq(groups(buf, row), { 'AcpChatAwaiting' }, 'its highlight')
  local d = T.ok(find(ls, '  @@ -1,2 +1,2 @@', row), 'the hunk:\n' .. text(buf))
  T.eq({ ls[d + 1], ls[d + 2], ls[d + 3] }, { '   one', '  -two', '  +2' }, 'the diff lines')
  T.contains(ls[d - 2], '  --- ', 'old file line')
  T.contains(ls[d - 1], 'notes.txt', 'new file line')
  T.eq(groups(buf, d + 1), { 'AcpChatDiffDelete' }, 'highlight of -')
  T.eq(groups(buf, d + 2), { 'AcpChatDiffAdd' }, 'highlight of +')
end)

T.test('a permission for a tool call never announced creates its block', function()
  local ctx = T.start_demo('unannounced.json')
  T.ok(require('acp').prompt('read my notes'))
  local p = T.wait_pending('resolve-prompt-' .. ctx.project .. '/notes.txt-1')
  local buf = wait_text(ctx.session, '[pending] Read notes.txt · read')
  local ls = lines(buf)
  local row = find(ls, '[pending] Read notes.txt · read')
  T.contains(ls[row + 1], 'awaiting your answer', 'the question')
  T.ok(require('acp').respond(p.id, 'cancel'))
  buf = wait_text(ctx.session, 'All done.')
  ls = lines(buf)
  T.eq(ls[row], '[rejected] Read notes.txt · read', 'the rejected call (the agent sends no update)')
  T.eq(ls[row + 1], '  you chose: Deny', 'the answer')
end)

T.test('the plan is shown, replaced whole within a turn, and a new turn gets its own', function()
  local ctx = chat_turn()
  local buf = wait_text(ctx.session, 'Plan · 0/3 done')
  local ls = lines(buf)
  local row = find(ls, 'Plan · 0/3 done')
  T.eq({ ls[row + 1], ls[row + 2], ls[row + 3] }, {
    '  [~] Read notes.txt (high)',
    '  [ ] Fix the second line (medium)',
    '  [ ] Run the tests (low)',
  }, 'the entries')
  T.ok(require('acp').respond(ctx.pending.id, 'allow'))
  T.idle()
  buf = wait_text(ctx.session, 'All done.')
  ls = lines(buf)
  T.eq(ls[row], 'Plan · 2/3 done', 'the plan block, replaced')
  T.eq({ ls[row + 1], ls[row + 2], ls[row + 3] }, {
    '  [x] Read notes.txt (high)',
    '  [x] Fix the second line (medium)',
    '  [~] Run the tests (low)',
  }, 'the new entries')
  T.eq(count(ls, 'Plan · '), 1, 'plan blocks')

  T.ok(require('acp').prompt('again'))
  local p = T.wait_pending('chat_edit_2')
  T.ok(require('acp').respond(p.id, 'allow'))
  T.idle()
  T.wait(function()
    return count(lines(buf), 'All done.') == 2
  end, nil, 'the second turn drawn')
  ls = lines(buf)
  T.eq(count(ls, 'Plan · '), 2, 'plan blocks after two turns')
  T.eq(ls[row], 'Plan · 2/3 done', 'the first plan stays as it was')
end)

T.test('available commands and the current mode are shown; commands complete in the input', function()
  T.only()
  local ctx = chat_turn()
  local buf = wait_text(ctx.session, 'commands: /demo')
  wait_text(ctx.session, 'mode: architect')
  -- The header is drawn at once, the body on the chat's next tick.
  wait_text(ctx.session, 'mode changed to architect')
  local ls = lines(buf)
  T.contains(ls[2], 'mode: architect', 'the mode in the header')
  T.ok(find(ls, 'mode changed to architect'), 'the change, where it happened:\n' .. text(buf))
  T.eq(count(ls, 'commands: /demo'), 1, 'the commands line')

  T.ok(require('acp').chat(), 'chat()')
  local input = api.nvim_get_current_buf()
  T.eq(vim.bo[input].filetype, 'acpchatinput', 'focus in the input area')
  local chat_win = T.windows(buf)[1]
  if vim.fn.has('nvim-0.8') == 1 then
    T.contains(vim.wo[chat_win].winbar, 'mode: architect', 'the winbar')
  end
  T.contains(vim.wo[api.nvim_get_current_win()].statusline, 'mode: architect', 'the statusline of the input')

  api.nvim_buf_set_lines(input, 0, -1, false, { '/d' })
  T.feed('A<C-x><C-o><Esc>')
  T.eq(lines(input), { '/demo' }, 'completed')
  api.nvim_buf_set_lines(input, 0, -1, false, { 'text /d' })
  T.feed('A<C-x><C-o><Esc>')
  T.eq(lines(input), { 'text /d' }, 'no command completion after text')
end)

T.test('an unknown update variant and unknown fields break nothing', function()
  local ctx = chat_turn()
  -- chat.json sends an unknown variant, then an image chunk with unknown
  -- fields, then a mode change: all drawn in order.
  local buf = wait_text(ctx.session, 'mode changed to architect')
  local ls = lines(buf)
  local img = T.ok(find(ls, '[image image/png]'), 'the placeholder of the image:\n' .. text(buf))
  T.ok(find(ls, 'mode changed to architect', img), 'what follows is drawn')

  -- Malformed events through the entry point (the model, then the chat):
  -- no error, and it still draws.
  local broker = require('acp.broker')
  local function chunk(id, t)
    return { sessionUpdate = 'agent_message_chunk', messageId = id, content = { type = 'text', text = t } }
  end
  local odd = {
    { 'update', vim.NIL },
    { 'update', { sessionUpdate = vim.NIL } },
    { 'update', { sessionUpdate = 'agent_message_chunk', content = vim.NIL } },
    { 'update', { sessionUpdate = 'agent_message_chunk', content = { type = 'text', text = 5 } } },
    { 'update', { sessionUpdate = 'tool_call', toolCallId = vim.NIL } },
    {
      'update',
      {
        sessionUpdate = 'tool_call',
        toolCallId = 'odd',
        title = vim.NIL,
        content = { 'x', { type = 'wat' }, { type = 'diff' } },
        locations = vim.NIL,
      },
    },
    { 'update', { sessionUpdate = 'plan', entries = { 'x', { status = 'weird' } } } },
    { 'update', { sessionUpdate = 'available_commands_update', availableCommands = { 1, { name = vim.NIL } } } },
    { 'update', { sessionUpdate = 'current_mode_update', currentModeId = vim.NIL } },
    { 'turn_end', { agent = vim.NIL, session = vim.NIL } },
    { 'permission_resolved', { id = 99999, toolCallId = 'nope' } },
    { 'terminal', { terminalId = 'tt', output = vim.NIL, exitStatus = 3 } },
    { 'no_such_event', {} },
  }
  for _, e in ipairs(odd) do
    local data = e[1] == 'update' and { update = e[2] } or e[2]
    data.session = data.session or ctx.session
    local ok, err = pcall(broker._on_event, e[1], data)
    T.ok(ok and err, 'on_event(' .. e[1] .. ') raised: ' .. tostring(err))
    T.eq(require('acp.events').view_error, nil, 'the chat raised on ' .. e[1])
  end
  broker._on_event('update', { session = ctx.session, update = chunk('after', 'Still drawing.') })
  buf = wait_text(ctx.session, 'Still drawing.')
  -- The same message, continued after it was drawn: the same line grows.
  broker._on_event('update', { session = ctx.session, update = chunk('after', ' And more.') })
  wait_text(ctx.session, 'Still drawing. And more.')
  T.eq(count(lines(buf), 'Still drawing.'), 1, 'lines of the continued message')
  T.ok(find(lines(buf), '[pending] tool call · other'), 'a tool call with nothing but an id')
  T.ok(find(lines(buf), '  [wat]'), 'an unknown content type as a placeholder')
  T.eq(T.notes_text():find('chat', 1, true), nil, 'error messages: ' .. T.notes_text())
end)

T.test('closing the window keeps the history; :AcpChat opens it again', function()
  T.only()
  local ctx = chat_turn()
  T.ok(require('acp').respond(ctx.pending.id, 'allow'))
  T.idle()
  local buf = wait_text(ctx.session, 'All done.')
  settled(ctx.session)
  local before = lines(buf)
  vim.cmd('AcpChat')
  local input = api.nvim_get_current_buf()
  T.eq(#T.windows(buf), 1, 'chat windows')
  local win = T.windows(buf)[1]
  T.eq(api.nvim_win_get_cursor(win)[1], #before, 'the chat window shows the end')
  api.nvim_set_current_win(win)
  T.feed('q')
  T.wait(function()
    return #T.windows(buf) == 0 and #T.windows(input) == 0
  end, nil, 'the chat and input windows to close')
  T.ok(api.nvim_buf_is_loaded(buf), 'the buffer is kept')

  vim.cmd('AcpChat')
  T.eq(api.nvim_get_current_buf(), input, 'the same input buffer')
  T.eq(#T.windows(buf), 1, 'the chat is shown again')
  T.eq(lines(buf), before, 'the history')
  vim.cmd('AcpChat')
  T.eq(#T.windows(buf), 1, 'a second :AcpChat focuses, it does not split again')
end)

T.test('a window at the end follows new lines, another stays; the bars stay with the chat', function()
  T.only()
  local ctx = T.start_demo(reply)
  T.ok(require('acp').chat(), 'chat()')
  local input_win = api.nvim_get_current_win()
  local buf = require('acp.chat').buffer(ctx.session)
  local win = T.windows(buf)[1]
  api.nvim_set_current_win(win)
  vim.cmd('split')
  local other = api.nvim_get_current_win()
  api.nvim_win_set_cursor(other, { 1, 0 })
  T.ok(require('acp').prompt('one'))
  wait_text(ctx.session, 'Reply number 1.')
  T.idle()
  T.wait(function()
    return text(buf):find('idle', 1, true)
  end, nil, 'the end of the turn in the header')
  local n = api.nvim_buf_line_count(buf)
  T.eq(api.nvim_win_get_cursor(win)[1], n, 'the window that was at the end')
  T.eq(api.nvim_win_get_cursor(other)[1], 1, 'the window that was not')

  T.contains(vim.wo[input_win].statusline, 'idle', 'the statusline of the input')
  local scratch = api.nvim_create_buf(false, true)
  api.nvim_win_set_buf(input_win, scratch)
  T.eq(T.win_local(input_win, 'statusline'), '', 'the statusline once the input buffer left the window')
  T.eq(vim.wo[input_win].statusline, vim.go.statusline, 'the global statusline applies again')
  if vim.fn.has('nvim-0.8') == 1 then
    T.contains(vim.wo[win].winbar, 'idle', 'the winbar of the chat')
    api.nvim_win_set_buf(win, scratch)
    T.eq(vim.wo[win].winbar, '', 'the winbar once the chat left the window')
    api.nvim_win_set_buf(win, buf)
    T.contains(vim.wo[win].winbar, 'idle', 'the winbar when the chat is back')
  end
end)

T.test("<CR> in the input sends it to the chat's agent and clears it; one chat per session, one window per tab", function()
  T.only()
  local a = T.start_demo(reply)
  local b = start_other('other-agent', reply)
  T.eq(require('acp').status().agent, 'other-agent', 'the current agent')

  T.ok(require('acp').chat({ agent = a.agent }), 'chat() of the first agent')
  local input = api.nvim_get_current_buf()
  api.nvim_buf_set_lines(input, 0, -1, false, { 'hello', 'from the chat' })
  vim.cmd('stopinsert')
  T.feed('<CR>')
  T.wait(function()
    return T.prompts(a)[1]
  end, nil, "the prompt in the first agent's transcript")
  T.eq(T.prompts(a), { 'hello\nfrom the chat' }, 'what the first agent received')
  T.eq(lines(input), { '' }, 'the input after sending')
  local abuf = wait_text(a.session, 'Reply number 1.')
  T.idle()
  -- turn_start carries the prompt's text once the broker sends it.
  for _, e in ipairs(require('acp.state').logged()) do
    if e.event == 'turn_start' and e.data.session == a.session and e.data.text ~= nil then
      local ls = lines(abuf)
      local i = T.ok(find(ls, 'You'), 'the person as author:\n' .. text(abuf))
      T.eq({ ls[i + 1], ls[i + 2] }, { 'hello', 'from the chat' }, 'the prompt in the chat')
    end
  end

  local awin = T.windows(abuf)[1]
  local nwins = #api.nvim_tabpage_list_wins(0)
  T.ok(require('acp').chat({ agent = b.agent }), 'chat() of the other agent')
  local bbuf = T.ok(require('acp.chat').buffer(b.session), 'the other chat buffer')
  T.ok(bbuf ~= abuf, 'two buffers')
  T.eq(#T.windows(abuf), 0, 'the first chat is no longer shown')
  T.eq(T.windows(bbuf), { awin }, 'the second chat is shown in the same window')
  T.eq(#api.nvim_tabpage_list_wins(0), nwins, 'no window was opened')
  T.eq(require('acp.chat.model').chats[b.session].input, api.nvim_get_current_buf(), 'its input has focus')
  T.eq(api.nvim_buf_get_name(bbuf), 'acp://chat/other-agent/' .. b.session, 'its name')
  T.eq(T.prompts(b), {}, 'the other agent received nothing')
  T.eq(count(lines(bbuf), 'Reply number'), 0, 'nothing of the first agent in the second chat')

  api.nvim_buf_set_lines(api.nvim_get_current_buf(), 0, -1, false, { 'second' })
  T.feed('<CR>')
  wait_text(b.session, 'Reply number 1.')
  T.eq(T.prompts(b), { 'second' }, 'what the other agent received')
  T.eq(#T.prompts(a), 1, 'the first agent received one prompt')
end)

T.test("the input of an older session's chat prompts that session, not the newest", function()
  T.only()
  local a = T.start_demo(reply)
  local first = a.session
  -- The same agent, a session in another project: it becomes the newest.
  T.ok(require('acp').start({
    cmd = { os.getenv('ACP_DEMO_AGENT_BIN') },
    env = { ACP_DEMO_SCENARIO = a.scenario, ACP_DEMO_TRANSCRIPT = a.transcript },
  }, { cwd = T.project() }), 'start() in another project')
  local second = T.wait(function()
    local s = require('acp').status().session
    return s ~= first and s
  end, nil, 'the second session')
  T.ok(require('acp').chat({ session = first }), 'chat() of the first session')
  api.nvim_buf_set_lines(api.nvim_get_current_buf(), 0, -1, false, { 'to the first' })
  vim.cmd('stopinsert')
  T.feed('<CR>')
  local sent = T.wait(function()
    return T.messages(T.transcript(a.transcript), 'in', 'session/prompt')[1]
  end, nil, 'the prompt')
  T.eq(sent.params.sessionId, first, 'sent to the chat\'s session')
  T.ok(sent.params.sessionId ~= second, 'not to the newest')
  wait_text(first, 'Reply number 1.')
end)

T.test('a turn that fails shows its error in the chat', function()
  local ctx = T.start_demo({
    name = 'rate-limited',
    steps = {
      { type = 'message', text = 'Thinking…' },
      {
        type = 'raw',
        line = '{"jsonrpc":"2.0","id":${prompt_id},"error":{"code":429,"message":"Rate limit exceeded. Try again later."}}',
      },
    },
  })
  T.ok(require('acp').prompt('go'))
  local line = 'error: Rate limit exceeded. Try again later. (code 429)'
  local buf = wait_text(ctx.session, line)
  local row = find(lines(buf), line)
  T.eq(groups(buf, row - 1), { 'AcpChatError' }, 'its highlight')
  T.idle()
  T.contains(lines(buf)[2], 'idle', 'the header after the turn')
end)

T.test('an agent that exits mid-turn: error, unfinished call, header; the input is kept', function()
  T.only()
  local crash = T.start_demo('crash.json')
  T.ok(require('acp').prompt('go'))
  buf = wait_text(crash.session, 'agent exited')
  settled(crash.session)
  local ls = lines(buf)
  local err = T.ok(find(ls, 'error: the agent exited with code 9'), 'the end of the turn:\n' .. text(buf))
  T.eq(ls[err + 2]:match('^[^;]*'), 'the agent exited with code 9', 'the exit, after it')
  T.contains(ls[err + 2], '; its last stderr: ', "with the agent's last stderr lines")
  local tool = T.ok(find(ls, '[interrupted] Write crash.txt · edit'), 'the unfinished call:\n' .. text(buf))
  T.eq(ls[tool + 1], '  not answered: the agent exited', 'its question')
  T.contains(ls[2], 'agent exited', 'the header')

  T.ok(require('acp').chat({ session = crash.session }), 'chat() of the exited session')
  local input = api.nvim_get_current_buf()
  api.nvim_buf_set_lines(input, 0, -1, false, { 'anyone?' })
  T.feed('<CR>')
  T.eq(lines(input), { 'anyone?' }, 'the input is kept')
  T.contains(T.notes_text(), 'is not running', 'the reason')
end)

T.test('the prompt text of turn_start, terminal output and a replayed session', function()
  local broker = require('acp.broker')
  local sid, agent = 'replayed-1', 'ghost'
  local function ev(name, data)
    data.agent, data.session = agent, sid
    broker._on_event(name, data)
  end
  local function update(u)
    ev('update', { update = u })
  end
  T.defer(function()
    broker._on_event('agent_exit', { agent = agent, code = 0 })
  end)
  ev('session_loading', { cwd = '/tmp' })
  update({ sessionUpdate = 'user_message_chunk', content = { type = 'text', text = 'What is in notes.txt?' } })
  update({ sessionUpdate = 'agent_message_chunk', content = { type = 'text', text = 'Two lines.' } })
  update({
    sessionUpdate = 'tool_call',
    toolCallId = 'run_1',
    title = 'List the files',
    kind = 'execute',
    status = 'in_progress',
    rawInput = { command = 'ls -l' },
    content = { { type = 'terminal', terminalId = 'term_1' } },
  })
  ev('terminal', { terminalId = 'term_1', command = 'ls -l', output = 'a\nb\n', truncated = false, exitStatus = vim.NIL })
  local buf = wait_text(sid, '  │ b')
  local ls = lines(buf)
  T.contains(ls[2], 'loading history…', 'the header while loading')
  local u = T.ok(find(ls, 'You'), 'the replayed prompt:\n' .. text(buf))
  T.eq(ls[u + 1], 'What is in notes.txt?', 'its text')
  local row = T.ok(find(ls, '[running] List the files · execute'), 'the tool call')
  T.eq({ ls[row + 1], ls[row + 2], ls[row + 3] }, { '  $ ls -l  (running)', '  │ a', '  │ b' }, 'its terminal')

  ev('session_new', {
    cwd = '/tmp',
    resumed = true,
    modes = { currentModeId = 'code', availableModes = { { id = 'code', name = 'Code' }, { id = 'ask', name = 'Ask' } } },
  })
  ev('turn_start', { text = 'Count them\nplease' })
  local out = {}
  for i = 1, 30 do
    out[i] = 'line ' .. i
  end
  ev('terminal', {
    terminalId = 'term_1',
    command = 'ls -l',
    output = table.concat(out, '\n'),
    exitStatus = { exitCode = 0, signal = vim.NIL },
  })
  update({ sessionUpdate = 'tool_call_update', toolCallId = 'run_1', status = 'completed' })
  buf = wait_text(sid, 'please')
  T.wait(function()
    return find(lines(buf), '  $ ls -l  (exit 0)')
  end, nil, 'the terminal to end')
  ls = lines(buf)
  T.contains(ls[2], 'mode: Code', 'the mode by its name')
  T.contains(ls[2], 'working…', 'a turn runs')
  T.ok(find(ls, 'session resumed: the history above was replayed by the agent'), 'the end of the replay')
  T.eq(ls[row], '[done] List the files · execute', 'the tool call, in place')
  T.eq({ ls[row + 2], ls[row + 3], ls[row + 22] }, { '  │ …', '  │ line 11', '  │ line 30' }, 'the last 20 lines')
  local you = T.ok(find(ls, 'You', u + 1), 'the prompt of the turn')
  T.eq({ ls[you + 1], ls[you + 2] }, { 'Count them', 'please' }, 'its text')
end)

T.test("a session's chat buffer is made when the session starts, not on the draw timer", function()
  -- Making it (its name, 'filetype') holds Neovim for about a millisecond:
  -- at the session's start, not 30 ms later (the draw interval), in the
  -- middle of the turn, before a prompt.
  local broker = require('acp.broker')
  local sid, agent = 'new-1', 'ghost-new'
  T.defer(function()
    broker._on_event('agent_exit', { agent = agent, code = 0 })
  end)
  broker._on_event('session_new', { agent = agent, session = sid, cwd = '/tmp' })
  local made = vim.wait(20, function()
    return require('acp.chat').buffer(sid) ~= nil
  end, 1)
  T.ok(made, 'the chat buffer within 20 ms of session_new')
end)

--- The chat of session `sid` of agent `agent`, fed by hand (no agent
--- runs; it exits when the test ends): returns call(i), which announces
--- tool call c<i> ("call <i>", read, pending).
local function ghost_chat(sid, agent)
  local broker = require('acp.broker')
  T.defer(function()
    broker._on_event('agent_exit', { agent = agent, code = 0 })
  end)
  return function(i)
    broker._on_event('update', {
      agent = agent,
      session = sid,
      update = { sessionUpdate = 'tool_call', toolCallId = 'c' .. i, title = 'call ' .. i, kind = 'read', status = 'pending' },
    })
  end
end

-- A chat with one tool call drawn, then acp.events.asking raised as a
-- `permission` event whose effect (the prompt's window) has not run does,
-- and a second tool call queued; check(buf) runs then and the count is
-- set back. Returns the chat's buffer.
local function while_asking(sid, agent, check)
  local events = require('acp.events')
  local call = ghost_chat(sid, agent)
  call(0)
  local buf = wait_text(sid, 'call 0')
  local before = events.asking
  events.asking = before + 1
  local ok, err = pcall(function()
    call(1)
    check(buf)
  end)
  events.asking = before
  assert(ok, err)
  return buf
end

T.test('the chat does not draw while a permission prompt waits to be shown', function()
  -- The chat's draw, due meanwhile, waits for the prompt's window.
  local sid = 'asking-1'
  while_asking(sid, 'ghost-asking', function(buf)
    -- Twice the draw interval (30 ms): the draw was due.
    vim.wait(60, function()
      return false
    end, 5)
    T.eq(find(lines(buf), '[pending] call 1 · read'), nil, 'drawn while a prompt waits')
  end)
  wait_text(sid, 'call 1')
end)

T.test('a permission count left up does not keep the chat undrawn', function()
  -- acp.events.asking never lowered (a bug): the draw waits for the
  -- prompt at most H.ask_wait_ms (500 ms), then draws and drops the count.
  local events = require('acp.events')
  while_asking('asking-2', 'ghost-asking-2', function(buf)
    local drawn = vim.wait(1000, function()
      return find(lines(buf), '[pending] call 1 · read') ~= nil
    end, 5)
    T.ok(drawn, 'the chat drew within a second although a prompt count stayed up')
    T.eq(events.asking, 0, 'the count left up is dropped')
  end)
end)

--- Counts a request (acp.events.requests) every 10 ms until the returned
--- function is called.
local function requests_coming()
  local events = require('acp.events')
  local timer = uv.new_timer()
  events.requests = events.requests + 1
  timer:start(10, 10, function()
    events.requests = events.requests + 1
  end)
  local stopped = false
  local function stop()
    if not stopped then
      stopped = true
      timer:stop()
      timer:close()
    end
  end
  T.defer(stop)
  return stop
end

T.test('a chat no window shows is not drawn while permission requests come; drawn once they pause', function()
  local sid = 'hidden-hold-1'
  local call = ghost_chat(sid, 'ghost-hidden-hold')
  call(0)
  local buf = wait_text(sid, 'call 0')
  local stop = requests_coming()
  call(1)
  -- Five draw intervals (30 ms): the draw was due.
  vim.wait(150, function()
    return false
  end, 5)
  T.eq(find(lines(buf), '[pending] call 1 · read'), nil, 'drawn while requests come and no window shows it')
  stop()
  local t0 = uv.hrtime()
  wait_text(sid, 'call 1', 1000)
  T.ok((uv.hrtime() - t0) / 1e6 < 500, 'drawn soon after the requests paused')

  -- Shown in a window: drawn while requests come.
  vim.cmd('botright split')
  local win = api.nvim_get_current_win()
  api.nvim_win_set_buf(win, buf)
  T.defer(function()
    pcall(api.nvim_win_close, win, true)
  end)
  requests_coming()
  call(2)
  wait_text(sid, 'call 2', 1000)
end)

T.test('a hidden chat waits for requests to pause at most two seconds', function()
  local sid = 'hidden-hold-2'
  local call = ghost_chat(sid, 'ghost-hidden-hold-2')
  call(0)
  wait_text(sid, 'call 0')
  requests_coming()
  call(1)
  local t0 = uv.hrtime()
  wait_text(sid, 'call 1', 4000)
  local waited = (uv.hrtime() - t0) / 1e6
  T.ok(waited >= 1500 and waited < 3000, ('drawn after %d ms of requests coming'):format(waited))
end)

T.test('a long queue is drawn in slices: what comes meanwhile (a prompt) runs between them', function()
  -- 300 tool calls queued at once (~15 ms of drawing). The chat draws a
  -- few at a time and lets Neovim take in what came meanwhile, as a
  -- permission request that must not wait for the whole tick (up to 4 ms)
  -- to open its window: a callback scheduled while the first of them is
  -- drawn runs after a few buffer changes, not after the tick's budget.
  local sid = 'sliced-1'
  local call = ghost_chat(sid, 'ghost-sliced')
  call(0)
  local buf = wait_text(sid, 'call 0')
  local changes, seen, done = 0, nil, false
  api.nvim_buf_attach(buf, false, {
    on_lines = function()
      if done then
        return true
      end
      changes = changes + 1
      if changes == 1 then
        vim.schedule(function()
          seen = changes
        end)
      end
    end,
  })
  for i = 1, 300 do
    call(i)
  end
  wait_text(sid, 'call 300')
  done = true
  T.ok(seen ~= nil and seen < 40, ('the scheduled callback ran after %s of %d buffer changes'):format(tostring(seen), changes))
  local ls = lines(buf)
  T.ok(find(ls, '[pending] call 1 · read') < find(ls, '[pending] call 300 · read'), 'in order')
end)

T.test('16 MiB streamed in one message: bounded in the buffer, drawn in few updates', function()
  local MiB = 1024 * 1024
  local ctx = T.start_demo({
    name = 'flood',
    steps = {
      { type = 'flood', bytes = 16 * MiB, chunk = 32768 },
      { type = 'message', text = 'After the flood.' },
    },
  })
  -- Once the session exists (the header is drawn), count the changes of the
  -- buffer and how late the main loop runs a 10 ms timer meanwhile.
  local buf = wait_text(ctx.session, 'acp chat')
  local tick0 = api.nvim_buf_get_changedtick(buf)
  local late, last = 0, uv.hrtime()
  local timer = uv.new_timer()
  timer:start(10, 10, vim.schedule_wrap(function()
    local now = uv.hrtime()
    late = math.max(late, (now - last) / 1e6 - 10)
    last = now
  end))
  T.defer(function()
    timer:stop()
    timer:close()
  end)
  T.ok(require('acp').prompt('talk a lot'))
  T.wait(function()
    return not require('acp').status().busy and text(buf):find('After the flood.', 1, true)
  end, 60000, 'the turn to end and its last message')
  local changes = api.nvim_buf_get_changedtick(buf) - tick0
  local ls = lines(buf)
  local bytes = 0
  for _, l in ipairs(ls) do
    bytes = bytes + #l + 1
  end
  local i = T.ok(find(ls, ctx.agent), 'the message:\n' .. text(buf):sub(1, 300))
  T.eq(ls[i + 1]:sub(1, 8), '[0]xxxxx', 'it starts with the first chunk')
  local left_out = require('acp.text').size(16 * MiB - require('acp.chat.model').max_message_bytes)
  T.eq(ls[i + 2], ('… %s more not shown'):format(left_out), 'all that was left out is counted')
  T.ok(bytes < 300 * 1024, ('the buffer holds %d bytes'):format(bytes))
  T.ok(changes < 512, ('%d buffer changes for 512 chunks'):format(changes))
  T.note('16 MiB flood: %d buffer changes for 512 chunks; the main loop ran up to %d ms late', changes, late)
end)

T.test('the chunks of one message that come together reach Lua as one update, whole and in order', function()
  -- 2000 chunks of 100 bytes ("[n]xxx…", no newline): the broker joins
  -- those of one batch; Lua must see the same text, in order, under the
  -- same messageId, and the chat draw it whole (one line, in slices).
  local broker = require('acp.broker')
  local real = broker._on_events
  local got, texts, other = 0, {}, {}
  broker._on_events = function(list)
    for _, e in ipairs(list) do
      local u = e[1] == 'update' and e[2].update
      if u and u.sessionUpdate == 'agent_message_chunk' and tostring(u.messageId):match('^flood_') then
        got = got + 1
        texts[#texts + 1] = u.content.text
        other[tostring(u.messageId) .. '/' .. tostring(e[2].session) .. '/' .. tostring(e[2].agent)] = true
      end
    end
    return real(list)
  end
  T.defer(function()
    broker._on_events = real
  end)
  local ctx = T.start_demo({
    name = 'joined',
    steps = {
      { type = 'flood', bytes = 200000, chunk = 100 },
      { type = 'message', text = 'After the chunks.' },
    },
  })
  local turn_end = T.on('AcpTurnEnd')
  T.ok(require('acp').prompt('stream'))
  T.wait(function()
    return #turn_end == 1
  end, 30000, 'AcpTurnEnd')
  local want = {}
  for n = 0, 1999 do
    local num = ('[%d]'):format(n)
    want[#want + 1] = num .. ('x'):rep(100 - #num)
  end
  T.eq(table.concat(texts) == table.concat(want), true, 'the text Lua got is the text sent, in order')
  local ids = vim.tbl_keys(other)
  T.eq(#ids, 1, 'one message, session and agent: ' .. table.concat(ids, ' '))
  T.contains(ids[1] or '', '/' .. ctx.session .. '/', 'its session')
  T.ok(got < 200, ('%d updates for 2000 chunks'):format(got))
  T.note('2000 chunks of one message reached Lua as %d updates', got)
  local buf = wait_text(ctx.session, 'After the chunks.')
  local ls = lines(buf)
  local line
  for _, l in ipairs(ls) do
    line = line or (l:sub(1, 4) == '[0]x' and l or nil)
  end
  T.eq(line == table.concat(want), true, ('drawn whole, one line (%d bytes)'):format(#(line or '')))
end)

T.test('a joined piece over the bounds keeps what fits, in whole characters', function()
  local cut = require('acp.chat.model').cut
  T.eq({ cut('abc', 2), cut('abc', 3), cut('abc', 9), cut('abc', 0) }, { 'ab', 'abc', 'abc', '' }, 'ASCII')
  T.eq({ cut('aé', 2), cut('aé', 3) }, { 'a', 'aé' }, 'not inside a 2-byte character')
  T.eq({ cut('€€', 4), cut('€€', 5), cut('€€', 6) }, { '€', '€', '€€' }, 'not inside a 3-byte one')
  T.eq({ cut('a😀', 4), cut('a😀', 5) }, { 'a', 'a😀' }, 'not inside a 4-byte one')
end)

T.test('a burst of many messages is drawn over several ticks, complete and in order', function()
  local ctx = chat_turn()
  local chat = require('acp.chat')
  local buf = wait_text(ctx.session, 'acp chat')
  -- 14 messages of 256 lines of 1 KiB: 3.5 MiB queued at once, more than
  -- one tick may draw.
  local pad = ('x'):rep(1000)
  for m = 1, 14 do
    for l = 1, 256 do
      chat.on_event('update', {
        session = ctx.session,
        update = {
          sessionUpdate = 'agent_message_chunk',
          messageId = 'burst-' .. m,
          content = { type = 'text', text = ('m%d l%d %s\n'):format(m, l, pad) },
        },
      })
    end
  end
  local partial = false
  T.wait(function()
    local t = text(buf)
    local first, last = t:find('m1 l256 ', 1, true), t:find('m14 l256 ', 1, true)
    partial = partial or (first ~= nil and last == nil)
    return last ~= nil
  end, 20000, 'the last message drawn')
  T.ok(partial, 'the burst was drawn over several ticks (seen half drawn)')
  local ls, at, order = lines(buf), 0, true
  for m = 1, 14 do
    for l = 1, 256, 51 do
      local prefix = ('m%d l%d '):format(m, l)
      local found
      for i = at + 1, #ls do
        if ls[i]:sub(1, #prefix) == prefix then
          found = i
          break
        end
      end
      if found == nil then
        order = false
      else
        at = found
      end
    end
  end
  T.ok(order, 'every message and line is there, in order')
  T.eq(count(ls, 'more not shown'), 0, 'nothing dropped')
end)

T.test('messages that arrive as one long piece each are drawn over several ticks, whole and in order', function()
  local ctx = chat_turn()
  local chat = require('acp.chat')
  local buf = wait_text(ctx.session, 'acp chat')
  -- 14 messages of one piece each (as the broker joins them) of 2500 lines:
  -- 3.5 MiB, drawn a slice at a time over several ticks.
  local pad = ('y'):rep(90)
  for m = 1, 14 do
    local parts = {}
    for l = 1, 2500 do
      parts[l] = ('m%d l%d %s\n'):format(m, l, pad)
    end
    chat.on_event('update', {
      session = ctx.session,
      update = {
        sessionUpdate = 'agent_message_chunk',
        messageId = 'piece-' .. m,
        content = { type = 'text', text = table.concat(parts) },
      },
    })
  end
  local partial = false
  T.wait(function()
    local t = text(buf)
    local first, last = t:find('m1 l2500 ', 1, true), t:find('m14 l2500 ', 1, true)
    partial = partial or (first ~= nil and last == nil)
    return last ~= nil
  end, 20000, 'the last message drawn')
  T.ok(partial, 'drawn over several ticks (seen half drawn)')
  local ls, at, order = lines(buf), 0, true
  for m = 1, 14 do
    for l = 1, 2500, 99 do
      local want = ('m%d l%d %s'):format(m, l, pad)
      local found
      for i = at + 1, #ls do
        if ls[i] == want then
          found = i
          break
        end
      end
      if found == nil then
        order = false
      else
        at = found
      end
    end
  end
  T.ok(order, 'every message and line is there, whole and in order')
  local n = 0
  for _, l in ipairs(ls) do
    n = n + (l:match('^m%d+ l%d+ y+$') and 1 or 0)
  end
  T.eq(n, 14 * 2500, 'each line once, none cut')
  T.eq(count(ls, 'more not shown'), 0, 'nothing dropped')
end)

--- Starts the demo agent (one message) and asks for its chat before its
--- session exists.
local function start_then_chat(name)
  T.defer(T.stop_all)
  local path = T.scenario({ name = name, steps = { { type = 'message', text = 'hi' } } })
  require('acp').start({
    cmd = { os.getenv('ACP_DEMO_AGENT_BIN') },
    env = { ACP_DEMO_SCENARIO = path, ACP_DEMO_TRANSCRIPT = T.tmpname('transcript', '.jsonl') },
  }, { cwd = T.project() })
  T.ok(require('acp').chat(), ':AcpChat is accepted while the agent starts')
end

--- Waits for the session and for a window showing its chat.
local function wait_chat_shown()
  local session = T.wait(function()
    return require('acp').status().session
  end, nil, 'the session')
  T.wait(function()
    local buf = require('acp.chat').buffer(session)
    return buf and #T.windows(buf) > 0
  end, nil, 'a window showing the chat of the new session')
end

T.test(':AcpChat before the session exists opens the chat once it does', function()
  require('acp').setup({ ui = { arm_ms = 50 } })
  start_then_chat('late')
  T.eq(require('acp').status().session, nil, 'no session yet')
  wait_chat_shown()
end)

T.test('a chat opened once its session exists leaves focus in a float that took it meanwhile', function()
  start_then_chat('late-float')
  -- What the person sees before the session: a focused float, as the
  -- permission prompt is when it comes first.
  local fbuf = vim.api.nvim_create_buf(false, true)
  local float = vim.api.nvim_open_win(fbuf, true, { relative = 'editor', row = 1, col = 1, width = 20, height = 3 })
  T.defer(function()
    pcall(vim.api.nvim_win_close, float, true)
  end)
  T.eq(require('acp').status().session, nil, 'no session yet')
  wait_chat_shown()
  T.eq(vim.api.nvim_get_current_win(), float, 'the float still has focus')
end)

T.test('session title, context usage and config options appear in the header', function()
  local ctx = T.start_demo({
    name = 'header-updates',
    steps = {
      { type = 'update', update = { sessionUpdate = 'session_info_update', title = 'Fix the parser' } },
      {
        type = 'update',
        update = { sessionUpdate = 'usage_update', used = 12345, size = 200000, cost = { amount = 0.25, currency = 'USD' } },
      },
      {
        type = 'update',
        update = {
          sessionUpdate = 'config_option_update',
          configOptions = {
            { id = 'model', name = 'Model', type = 'select', currentValue = 'fast', options = {} },
            { id = 'web', name = 'Web search', type = 'boolean', currentValue = true },
          },
        },
      },
      { type = 'message', text = 'Header done.' },
    },
  })
  require('acp').prompt('Go')
  local buf = wait_text(ctx.session, 'Header done.')
  T.idle()
  T.wait(function()
    local t = text(buf)
    return t:find('Fix the parser', 1, true)
      and t:find('context 12.3k/200k · 0.25 USD', 1, true)
      and t:find('options: Model: fast · Web search: true', 1, true)
  end, nil, 'the title, usage and options in the header:\n' .. text(buf))
end)

T.test('requests decided by rules that the agent never announced: one counting line; a later report gets its block', function()
  local function req(n)
    return {
      toolCall = { toolCallId = 'auto_' .. n .. '_${turn}', title = 'ls ' .. n, kind = 'execute', rawInput = { command = 'ls ' .. n } },
      options = { { optionId = 'ok', name = 'Allow', kind = 'allow_once' } },
    }
  end
  local ctx = T.start_demo({
    name = 'auto-decided',
    steps = {
      { type = 'permissions_parallel', requests = { req(1), req(2), req(3) } },
      {
        type = 'update',
        update = { sessionUpdate = 'tool_call_update', toolCallId = 'auto_2_${turn}', status = 'completed' },
      },
      { type = 'message', text = 'Listed.' },
    },
  }, { setup = { ui = { arm_ms = 50 }, permissions = { allow = { 'Bash(ls *)' } } } })
  require('acp').prompt('List')
  local buf = wait_text(ctx.session, 'Listed.')
  T.idle()
  T.wait(function()
    return text(buf):find('acp decided 3 requests the agent did not announce: 3 allowed', 1, true)
  end, nil, 'the counting line:\n' .. text(buf))
  T.eq(count(lines(buf), 'acp decided'), 1, 'one counting line')
  local t = text(buf)
  local ls = lines(buf)
  local i = find(ls, '[done] ls 2 · execute')
  T.ok(i, 'the reported call has a block with its title:\n' .. t)
  T.eq(ls[i + 1], '  allowed: allowed by Bash(ls *) (setup)', 'with the decision on it')
  -- The last one, read from the `decided` array by name (its title, sent as
  -- `true`: the command).
  T.ok(t:find('  last: ls %d allowed: allowed by Bash%(ls %*%) %(setup%)'), 'the last decision on the counting line:\n' .. t)
end)

T.done()
