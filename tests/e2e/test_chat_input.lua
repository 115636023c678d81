-- The chat input and the chat window (lua/acp/chat/window.lua, the chat
-- commands of commands.lua): the Insert-mode send key, prompts queued
-- while the agent works, one chat window per tab page (:AcpChat,
-- :AcpSessions, :AcpNew), a dead agent's chat, markdown highlighting of
-- finished messages.
local T = require('helpers')
local api = vim.api

local function lines(buf)
  return api.nvim_buf_get_lines(buf, 0, -1, false)
end

local function text(buf)
  return table.concat(lines(buf), '\n')
end

local function wait_text(session, needle)
  return T.wait(function()
    local buf = require('acp.chat').buffer(session)
    return buf and text(buf):find(needle, 1, true) and buf
  end, nil, 'the chat of ' .. session .. ' to show ' .. vim.inspect(needle))
end

--- The virtual lines under the input (the outbox), as text.
local function outbox_text(input)
  local ns = api.nvim_get_namespaces()['acp-chat-outbox']
  local out = {}
  for _, m in ipairs(api.nvim_buf_get_extmarks(input, ns, 0, -1, { details = true })) do
    for _, vl in ipairs(m[4].virt_lines or {}) do
      local s = ''
      for _, chunk in ipairs(vl) do
        s = s .. chunk[1]
      end
      out[#out + 1] = s
    end
  end
  return table.concat(out, '\n')
end

--- Types `s` into the input in Insert mode and presses the send key.
local function type_and_send(s)
  T.feed('i' .. s .. '<C-s><Esc>')
end

--- Index of the first label naming `session`.
local function label_index(labels, session)
  for i, l in ipairs(labels) do
    if l:find(session, 1, true) then
      return i
    end
  end
  return nil
end

local function model_chat(session)
  return require('acp.chat.model').chats[session]
end

-- A turn that takes a while (until the person cancels it or 600 ms pass).
local slow = {
  name = 'slow',
  steps = { { type = 'sleep', ms = 600 }, { type = 'message', text = 'Reply number ${turn}.' } },
}

T.test('<C-s> sends from Insert mode; <CR> still sends from Normal mode', function()
  T.only()
  local ctx = T.start_demo({ name = 'reply', steps = { { type = 'message', text = 'Reply number ${turn}.' } } })
  T.ok(require('acp').chat())
  local input = api.nvim_get_current_buf()
  T.eq(input, model_chat(ctx.session).input, 'the input has focus')
  T.feed('ihello from insert<C-s><Cmd>lua _G.acp_test_mode = vim.api.nvim_get_mode().mode<CR><Esc>')
  T.eq(_G.acp_test_mode, 'i', 'still in Insert mode after sending')
  T.wait(function()
    return T.prompts(ctx)[1]
  end, nil, 'the prompt sent with <C-s>')
  T.eq(T.prompts(ctx), { 'hello from insert' }, 'what the agent received')
  T.eq(lines(input), { '' }, 'the input is cleared')
  wait_text(ctx.session, 'Reply number 1.')
  T.idle()
  api.nvim_buf_set_lines(input, 0, -1, false, { 'from normal' })
  T.feed('<CR>')
  wait_text(ctx.session, 'Reply number 2.')
  T.eq(T.prompts(ctx), { 'hello from insert', 'from normal' }, 'both prompts')
  T.contains(vim.wo[T.windows(input)[1]].statusline, '<C-s>/<CR> send', 'the keys named under the input')
  T.eq(vim.fn.maparg('<C-e>', 'i'), '', 'Insert-mode <C-e> still closes the completion menu')
  T.ok(vim.fn.maparg('<C-s>', 'i') ~= '', 'Insert-mode <C-s> is mapped')
end)

T.test('the send key is configurable', function()
  T.only()
  local ctx = T.start_demo(
    { name = 'reply', steps = { { type = 'message', text = 'ok ${turn}' } } },
    { setup = { ui = { arm_ms = 50 }, chat = { keys = { send = '<C-g>' } } } }
  )
  T.defer(function()
    require('acp').setup({ ui = { arm_ms = 50 } })
  end)
  T.ok(require('acp').chat())
  T.feed('iby C-g<C-g><Esc>')
  T.wait(function()
    return T.prompts(ctx)[1]
  end, nil, 'the prompt sent with <C-g>')
  T.eq(T.prompts(ctx), { 'by C-g' }, 'what the agent received')
  -- (Neovim 0.11+ maps Insert-mode <C-s> globally to LSP signature help:
  -- only a mapping of the input's own is ours.)
  T.ok(vim.fn.maparg('<C-s>', 'i', false, true).buffer ~= 1, 'no <C-s> mapping of the input then')
end)

T.test('prompts typed while the agent works are queued visibly, editable, droppable, sent in order', function()
  T.only()
  local ctx = T.start_demo(slow)
  T.ok(require('acp').chat())
  local input = api.nvim_get_current_buf()
  local chat = model_chat(ctx.session)
  type_and_send('first')
  T.wait(function()
    return chat.busy and #T.prompts(ctx) == 1
  end, nil, 'the first turn to run')
  type_and_send('second')
  type_and_send('third')
  type_and_send('fourth')
  T.eq(chat.outbox, { 'second', 'third', 'fourth' }, 'the outbox')
  T.eq(T.prompts(ctx), { 'first' }, 'nothing else sent while the agent works')
  T.eq(lines(input), { '' }, 'the input is free again')
  local shown = outbox_text(input)
  T.contains(shown, 'queued 1: second', 'shown under the input')
  T.contains(shown, 'queued 3: fourth', 'the last one too')
  T.contains(shown, 'sent when the turn ends', 'what will become of them')
  T.contains(vim.wo[T.windows(input)[1]].statusline, '3 queued', 'the count in the statusline')
  T.eq(api.nvim_win_get_height(T.windows(input)[1]), 5, 'the input window grew to show them (1 line, 3 queued, 1 help)')

  -- <C-x> drops the newest (kept in the unnamed register); 2<C-e> takes the
  -- second back into the input to edit it.
  T.feed('<C-x>')
  T.eq(chat.outbox, { 'second', 'third' }, 'fourth dropped')
  T.eq(vim.fn.getreg('"'), 'fourth', 'the dropped prompt is in register "')
  T.feed('2<C-e>')
  T.eq(chat.outbox, { 'second' }, 'third taken back')
  T.eq(lines(input), { 'third' }, 'in the input')
  T.eq(outbox_text(input):find('third', 1, true), nil, 'no longer shown as queued')
  T.feed('A, edited<C-s><Esc>')
  T.eq(chat.outbox, { 'second', 'third, edited' }, 'queued again, last')

  T.wait(function()
    return #T.prompts(ctx) == 3
  end, 5000, 'the queued prompts to be sent')
  T.eq(T.prompts(ctx), { 'first', 'second', 'third, edited' }, 'in order, one turn each')
  wait_text(ctx.session, 'Reply number 3.')
  T.eq(chat.outbox, {}, 'the outbox is empty')
  T.eq(outbox_text(input), '', 'nothing shown under the input')
  T.eq(api.nvim_win_get_height(T.windows(input)[1]), 4, 'the input window is back to its height')
  local buf = require('acp.chat').buffer(ctx.session)
  local all = text(buf)
  local i1, i2, i3 = all:find('Reply number 1.', 1, true), all:find('Reply number 2.', 1, true), all:find('Reply number 3.', 1, true)
  T.ok(i1 and i2 and i3 and i1 < i2 and i2 < i3, 'one answer per prompt, in order:\n' .. all)
end)

T.test('a cancelled turn holds the queue; the send key on an empty input sends it', function()
  T.only()
  local ctx = T.start_demo(slow)
  T.ok(require('acp').chat())
  local input = api.nvim_get_current_buf()
  local chat = model_chat(ctx.session)
  type_and_send('first')
  T.wait(function()
    return chat.busy
  end, nil, 'the first turn to run')
  type_and_send('queued')
  T.feed('<C-c>')
  T.wait(function()
    return not chat.busy
  end, nil, 'the cancelled turn to end')
  T.idle()
  T.eq(chat.held, true, 'held')
  T.eq(chat.outbox, { 'queued' }, 'kept')
  T.eq(T.prompts(ctx), { 'first' }, 'not sent after the cancel')
  T.contains(outbox_text(input), 'held: <C-s> on an empty input sends them', 'the person is told')
  T.feed('i<C-s><Esc>')
  T.wait(function()
    return #T.prompts(ctx) == 2
  end, nil, 'the held prompt to be sent')
  T.eq(T.prompts(ctx), { 'first', 'queued' }, 'sent')
end)

T.test("a dead agent's chat says so, stays readable, and keeps what was queued", function()
  T.only()
  local ctx = T.start_demo(slow)
  T.ok(require('acp').chat())
  local input = api.nvim_get_current_buf()
  local chat = model_chat(ctx.session)
  type_and_send('first')
  T.wait(function()
    return chat.busy
  end, nil, 'the turn to run')
  type_and_send('never lost')
  T.ok(require('acp').stop())
  local buf = wait_text(ctx.session, 'the agent exited: this chat is history only')
  T.contains(text(buf), ':AcpStart ' .. ctx.agent, 'how to go on')
  T.wait(function()
    return outbox_text(input):find('kept: the agent exited', 1, true)
  end, nil, 'the outbox to say it waits')
  T.eq(chat.outbox, { 'never lost' }, 'the queued prompt is kept')
  T.eq(chat.held, true, 'and held: not sent by itself if the session comes back')
  local sl = vim.wo[T.windows(input)[1]].statusline
  T.contains(sl, 'agent exited: :AcpStart ' .. ctx.agent, 'the input names the way on')
  T.eq(sl:find('send', 1, true), nil, 'and does not offer to send')
  T.eq(#T.windows(buf), 1, 'the chat stays open')
  -- Its queued prompt is not sent anywhere, and can be taken back.
  T.feed('<C-e>')
  T.eq(lines(input), { 'never lost' }, 'taken back into the input')
end)

T.test(':AcpChat switches the chat window of the tab; :AcpNew starts a new conversation there; :AcpStart says reused', function()
  T.only()
  local ctx = T.start_demo({ name = 'reply', steps = { { type = 'message', text = 'Reply in ${session}.' } } })
  T.ok(require('acp').chat())
  local first = ctx.session
  local cwin = T.windows(require('acp.chat').buffer(first))[1]
  local nwins = #api.nvim_tabpage_list_wins(0)

  vim.cmd('AcpNew')
  local second = T.wait(function()
    local s = require('acp').status().session
    return s ~= first and s
  end, nil, 'a new session')
  T.wait(function()
    local buf = require('acp.chat').buffer(second)
    return buf and api.nvim_win_get_buf(cwin) == buf
  end, nil, 'the chat window to show the new session')
  T.eq(#api.nvim_tabpage_list_wins(0), nwins, 'no window opened')
  T.eq(#T.messages(T.transcript(ctx.transcript), 'in', 'session/new'), 2, 'two session/new')
  T.eq(api.nvim_get_current_buf(), model_chat(second).input, 'its input has focus')
  T.eq(#T.windows(model_chat(first).input), 0, "the first chat's input is not shown")

  T.ok(require('acp').chat({ session = first }))
  T.eq(api.nvim_win_get_buf(cwin), require('acp.chat').buffer(first), ':AcpChat of the first: same window')
  T.eq(#api.nvim_tabpage_list_wins(0), nwins, 'still no window opened')

  -- Another tab page gets a chat window of its own.
  vim.cmd('tabnew')
  T.defer(function()
    vim.cmd('silent! tabonly!')
  end)
  T.ok(require('acp').chat({ session = second }))
  T.eq(#T.windows(require('acp.chat').buffer(second)), 1, 'shown in the new tab')
  vim.cmd('tabprevious')
  T.eq(api.nvim_win_get_buf(cwin), require('acp.chat').buffer(first), 'the first tab still shows the first chat')

  -- :AcpStart again reuses the (current) session and says so.
  vim.cmd('AcpStart ' .. ctx.agent)
  T.wait(function()
    return T.notes_text():find('session ' .. second .. ' reused', 1, true)
  end, nil, 'the message that the session was reused')
  T.eq(#T.messages(T.transcript(ctx.transcript), 'in', 'session/new'), 2, 'no third session')
end)

T.test(':AcpSessions lists the sessions of every agent, switches to one, and resumes one no longer open', function()
  T.only()
  local ctx = T.start_demo('resume.json')
  local spec = {
    cmd = { os.getenv('ACP_DEMO_AGENT_BIN') },
    env = { ACP_DEMO_SCENARIO = ctx.scenario, ACP_DEMO_TRANSCRIPT = ctx.transcript },
  }
  local first = ctx.session
  T.ok(require('acp').chat())
  local cwin = T.windows(require('acp.chat').buffer(first))[1]
  require('acp').start(spec, { cwd = ctx.project, new = true })
  local second = T.wait(function()
    local s = require('acp').status().session
    return s ~= first and s
  end, nil, 'a second session')

  local orig = vim.ui.select
  T.defer(function()
    vim.ui.select = orig
  end)
  local offered, pick
  vim.ui.select = function(items, opts, on_choice)
    offered = {}
    for _, it in ipairs(items) do
      offered[#offered + 1] = opts.format_item(it)
    end
    on_choice(pick and pick(items) or nil)
  end
  pick = function(items)
    for _, it in ipairs(items) do
      if it.session == first then
        return it
      end
    end
  end
  vim.cmd('AcpSessions')
  local a, b = label_index(offered, second), label_index(offered, first)
  T.ok(a and b and a < b, 'both sessions offered, the newest first:\n' .. table.concat(offered, '\n'))
  T.contains(offered[a], '[current] ' .. ctx.agent .. ' · ' .. second, 'the current one')
  T.contains(offered[b], '[open] ' .. ctx.agent .. ' · ' .. first, 'the other open one')
  T.eq(api.nvim_win_get_buf(cwin), require('acp.chat').buffer(first), 'the chosen one is shown in the chat window')

  -- Once the agent is gone, its sessions can be resumed from the list.
  T.stop_all()
  pick = nil
  vim.cmd('AcpSessions')
  b = label_index(offered, first)
  T.ok(b, 'still offered:\n' .. table.concat(offered, '\n'))
  T.contains(offered[b], '[resume] ' .. ctx.agent .. ' · ' .. first, 'resumable')
  pick = function(items)
    return items[b]
  end
  T.eq(#T.prompts(ctx), 0, 'no prompt sent')
  vim.cmd('AcpSessions')
  local loaded = T.wait(function()
    return T.messages(T.transcript(ctx.transcript), 'in', 'session/load')[1]
  end, nil, 'session/load')
  T.eq(loaded.params.sessionId, first, 'the chosen session is resumed')
  T.wait(function()
    local buf = require('acp.chat').buffer(first)
    return buf and api.nvim_win_get_buf(cwin) == buf and text(buf):find('session resumed', 1, true)
  end, nil, 'the resumed chat in the chat window')
end)

local function md_groups(buf, row)
  return T.hl_groups(buf, 'acp-chat-markdown', row)
end

local function has_group(list, pattern)
  for _, g in ipairs(list) do
    if g:match(pattern) then
      return true
    end
  end
  return false
end

T.test('a finished message is highlighted as markdown, fenced code in its language; wrapped lines are indented', function()
  T.only()
  local ctx = T.start_demo({
    name = 'markdown',
    steps = {
      { type = 'message', text = '# Title\n\nSome **bold** and `code` text.\n\n```lua\nlocal answer = 42\n```\n\nend of reply' },
    },
  })
  T.ok(require('acp').prompt('show me markdown'))
  local buf = wait_text(ctx.session, 'end of reply')
  T.ok(require('acp').chat())
  local win = T.windows(buf)[1]
  T.eq(vim.wo[win].breakindent, true, 'breakindent')
  T.eq(vim.wo[win].linebreak, true, 'linebreak')
  local rows = {}
  for i, l in ipairs(lines(buf)) do
    rows[l] = i - 1
  end
  local code, title, bold = rows['local answer = 42'], rows['# Title'], rows['Some **bold** and `code` text.']
  T.ok(code and title and bold, 'the message lines:\n' .. text(buf))
  T.wait(function()
    return #md_groups(buf, code) > 0
  end, nil, 'the markdown highlights once the turn ended')
  if vim.fn.has('nvim-0.10') == 1 then
    T.ok(has_group(md_groups(buf, title), '^@markup%.heading'), 'the heading: ' .. vim.inspect(md_groups(buf, title)))
    T.ok(has_group(md_groups(buf, code), '%.lua$'), 'the fenced code in lua: ' .. vim.inspect(md_groups(buf, code)))
  else
    T.eq(md_groups(buf, title), { 'AcpChatHeading' }, 'the heading')
    T.eq(md_groups(buf, code), { 'AcpChatCode' }, 'the fenced code')
  end
  -- Inline markup is read by line on every version.
  T.ok(has_group(md_groups(buf, bold), '^AcpChatBold$') and has_group(md_groups(buf, bold), '^AcpChatCode$'), 'bold and code: ' .. vim.inspect(md_groups(buf, bold)))
  -- No whole-buffer highlighter (it re-parses the buffer as it streams).
  T.ok(vim.bo[buf].syntax ~= 'markdown', 'no markdown syntax')
  local active = vim.treesitter and vim.treesitter.highlighter and vim.treesitter.highlighter.active or {}
  T.eq(active[buf], nil, 'no treesitter highlighter on the buffer')
  T.eq(vim.bo[buf].filetype, 'acpchat', 'the filetype stays acpchat')
end)

T.test('markdown of a large message is read by line; fenced code keeps its language; a huge one stays plain', function()
  local md = require('acp.chat.markdown')
  local ls = { '# Big' }
  while #table.concat(ls, '\n') < md.max_ts_bytes + 1024 do
    ls[#ls + 1] = 'a line of **text** to make the message larger than the treesitter limit'
  end
  ls[#ls + 1] = '```lua'
  ls[#ls + 1] = 'local answer = 42'
  ls[#ls + 1] = '```'
  local row = #ls - 2
  local by_row = {}
  for _, hl in ipairs(md.highlights(ls)) do
    by_row[hl[1]] = by_row[hl[1]] or {}
    table.insert(by_row[hl[1]], hl[4])
  end
  T.eq(by_row[0], { 'AcpChatHeading' }, 'the heading')
  T.ok(has_group(by_row[1], '^AcpChatBold$'), 'bold')
  if vim.fn.has('nvim-0.10') == 1 then
    T.ok(has_group(by_row[row], '%.lua$'), 'the code in lua: ' .. vim.inspect(by_row[row]))
  else
    T.eq(by_row[row], { 'AcpChatCode' }, 'the code')
  end
  local huge = {}
  for i = 1, md.max_bytes / 16 do
    huge[i] = '# **heading** 123'
  end
  T.eq(md.highlights(huge), {}, 'over max_bytes: plain')
end)

T.test('markdown is drawn once the turn has ended, not while it runs', function()
  T.only()
  local ctx = T.start_demo({
    name = 'md-stream',
    steps = {
      { type = 'message', text = '# First\n\ndone one' },
      { type = 'sleep', ms = 100 },
      { type = 'update', update = { sessionUpdate = 'agent_message_chunk', messageId = 'm2', content = { type = 'text', text = '# Second\n\nstill going' } } },
      { type = 'sleep', ms = 600 },
    },
  })
  T.ok(require('acp').prompt('go'))
  local buf = wait_text(ctx.session, 'still going')
  local rows = {}
  for i, l in ipairs(lines(buf)) do
    rows[l] = i - 1
  end
  T.ok(require('acp.chat.model').chats[ctx.session].busy, 'the turn still runs')
  T.eq(md_groups(buf, rows['# First']), {}, 'the first message is plain while the turn runs')
  T.eq(md_groups(buf, rows['# Second']), {}, 'the one still streaming too')
  T.wait(function()
    return #md_groups(buf, rows['# First']) > 0 and #md_groups(buf, rows['# Second']) > 0
  end, nil, 'both messages highlighted once the turn ended')
end)

T.done()
