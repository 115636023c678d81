-- The permission prompt at any size (80x24, 200x50, tiny): the command or
-- the diff stat stays above the options, decorations go first, lines wrap
-- at spaces; `d` opens the diff in a tab; the queue (`]`/`[`, `q` hides one,
-- "+N hidden", the float follows the tab page); the extras' wording; the
-- notification of a prompt waiting unseen.
local T = require('helpers')
local api = vim.api

-- A 400-character command with quotes, pipes and long tokens.
local LONG = table.concat({
  'find . -name "*.log" -mtime +7 -print0',
  "xargs -0 grep -E 'error|fatal|panic' --with-filename --line-number",
  'sort -t: -k1,1 -k2,2n',
  "awk -F: '{count[$1]++} END {for (f in count) print count[f], f}'",
  'sort -rn',
  'head -n 50',
  'tee build/reports/errors-by-file-with-a-rather-long-name.txt',
  'sed -e "s/^ *//" -e "s/ \\+/\\t/"',
  'column -t -s "$(printf \'\\t\')"',
  'less -R',
}, ' | ')
while #LONG < 400 do
  LONG = LONG .. ' | cat'
end

local function long_request(tcid)
  return {
    type = 'permission',
    announce = true,
    toolCall = { toolCallId = tcid, title = 'Run a long pipeline', kind = 'execute', rawInput = { command = LONG } },
    options = {
      { kind = 'allow_always', name = 'Always Allow', optionId = 'allow_always' },
      { kind = 'allow_once', name = 'Allow', optionId = 'allow' },
      { kind = 'reject_once', name = 'Reject', optionId = 'reject' },
    },
  }
end

local function huge_lines()
  local l = {}
  for i = 1, 537 do
    l[i] = ('line %d of the generated file'):format(i)
  end
  return l
end

local function huge_request(tcid)
  return {
    type = 'permission',
    announce = true,
    toolCall = {
      toolCallId = tcid,
      title = 'Write huge.txt',
      kind = 'edit',
      content = {
        { type = 'diff', path = '${cwd}/huge.txt', oldText = 'old\n', newText = table.concat(huge_lines(), '\n') .. '\n' },
      },
    },
    options = {
      { kind = 'allow_once', name = 'Allow', optionId = 'allow' },
      { kind = 'reject_once', name = 'Reject', optionId = 'reject' },
    },
  }
end

local function resize(cols, lines)
  vim.o.columns, vim.o.lines = cols, lines
  T.defer(function()
    vim.o.columns, vim.o.lines = 80, 24
  end)
end

--- The rows of the prompt's buffer (without the left padding), the row of
--- the first and the last option line, and whether all of those are in view.
local function layout(win)
  local lines = api.nvim_buf_get_lines(api.nvim_win_get_buf(win), 0, -1, false)
  local first, last
  for i, l in ipairs(lines) do
    if l:match('^ %[[%d ast]%] ') then
      first = first or i
      last = i
    end
  end
  local top = vim.fn.line('w0', win)
  local height = api.nvim_win_get_height(win)
  return {
    lines = lines,
    first = first,
    last = last,
    top = top,
    height = height,
    visible = function(row)
      return row ~= nil and row >= top and row < top + height
    end,
  }
end

--- The window's rows as one string, the wrapped rows joined again.
local function joined(rows, from, to)
  local t = {}
  for i = from, to do
    t[#t + 1] = vim.trim(rows[i])
  end
  return table.concat(t, ' ')
end

local function check_long_command(win, what)
  local L = layout(win)
  T.ok(L.first ~= nil, what .. ': option rows found:\n' .. table.concat(L.lines, '\n'))
  T.ok(L.visible(L.first) and L.visible(L.last), what .. ': every option is in view (top ' .. L.top .. ', height ' .. L.height .. ', options ' .. L.first .. '-' .. L.last .. ')')
  local cmd_row
  for i, l in ipairs(L.lines) do
    if l:match('^ %$ ') then
      cmd_row = cmd_row or i
    end
  end
  T.ok(cmd_row ~= nil and cmd_row < L.first, what .. ': the command is above the options')
  T.ok(L.visible(cmd_row), what .. ': the command starts in view')
  -- Wrapped at spaces: every word of the command is whole on one row.
  local above = joined(L.lines, cmd_row, L.first - 1)
  for word in LONG:gmatch('%S+') do
    if #word < 70 then
      T.ok(above:find(word, 1, true) ~= nil, what .. ': the word ' .. word .. ' is whole above the options:\n' .. above)
    end
  end
  for i, l in ipairs(L.lines) do
    T.ok(vim.fn.strdisplaywidth(l) <= api.nvim_win_get_width(win), what .. ': row ' .. i .. ' fits the window')
  end
  return L
end

T.test('80x24, "Run a long pipeline" (400 characters): the whole command above the options, all in view, wrapped at spaces', function()
  resize(80, 24)
  T.start_demo({ name = 'long', steps = { long_request('long_${turn}') } })
  require('acp').prompt('Go')
  local win = T.wait_prompt('long_1')
  local L = check_long_command(win, '80x24')
  -- The window fits the screen.
  T.ok(L.height + 2 <= vim.o.lines - vim.o.cmdheight, 'the window fits the screen')
  -- Quotes kept in the command.
  T.contains(table.concat(L.lines, '\n'), "'error|fatal|panic'", 'the quotes are kept')
  vim.cmd('AcpDeny')
end)

T.test('tiny (50x12): the command starts and the options show; decorations left out', function()
  resize(50, 12)
  T.start_demo({ name = 'tiny', steps = { long_request('tiny_${turn}') } })
  require('acp').prompt('Go')
  local win = T.wait_prompt('tiny_1')
  local L = layout(win)
  local text = table.concat(L.lines, '\n')
  T.ok(L.visible(L.first) and L.visible(L.last), 'every option is in view:\n' .. text)
  T.ok(L.lines[L.top + 2] and L.lines[L.top + 2]:find('$ find', 1, true), 'the command right under the title:\n' .. text)
  T.ok(not table.concat(L.lines, '\n', 1, L.first):find('Kind:', 1, true), 'Kind: left out above the options')
  local above = table.concat(L.lines, '\n', 1, L.first)
  T.ok(above:find(' …\n', 1, true) ~= nil, 'the cut command row ends in …:\n' .. text)
  T.contains(text, '── details', 'the whole command below the options')
  vim.cmd('AcpDeny')
end)

T.test('wide characters and tabs: every row fits its width, words whole', function()
  local cmd = 'echo "日本語のテキスト" "émoji 🎉🎉" "\tindented" && printf "%s\\n" 中文字符串测试 ' .. ('ｗｉｄｅ '):rep(6)
  T.start_demo({ name = 'wide', steps = { T.shell_request('wide_${turn}', cmd) } })
  require('acp').prompt('Go')
  local p = T.wait_pending('wide_1')
  local req = require('acp.state').pending[p.id]
  for _, width in ipairs({ 24, 31, 50 }) do
    local rows = require('acp.prompt').lines(req, { width = width })
    for i, l in ipairs(rows) do
      T.ok(vim.fn.strdisplaywidth(l) <= width, ('width %d: row %d fits: %q'):format(width, i, l))
    end
    local text = table.concat(rows, '\n')
    T.contains(text, '中文字符串测试', 'width ' .. width .. ': a wide word whole')
    T.contains(text, '🎉🎉"', 'width ' .. width .. ': emoji whole')
  end
  vim.cmd('AcpDeny')
end)

T.test('200x50: the window is exactly as tall as its text', function()
  resize(200, 50)
  local ctx = T.start_demo({
    name = 'big',
    steps = {
      T.shell_request('cmd_${turn}', 'git status'),
      {
        type = 'permission',
        announce = true,
        toolCall = {
          toolCallId = 'one_${turn}',
          title = 'Write one.txt',
          kind = 'edit',
          content = { { type = 'diff', path = '${cwd}/one.txt', oldText = nil, newText = 'x\n' } },
        },
        options = { { kind = 'allow_once', name = 'Allow', optionId = 'allow' }, { kind = 'reject_once', name = 'Reject', optionId = 'reject' } },
      },
    },
  })
  require('acp').prompt('Go')
  local win = T.wait_prompt('cmd_1')
  local L = layout(win)
  T.eq(L.height, #L.lines, 'window height = rows of text:\n' .. table.concat(L.lines, '\n'))
  T.eq(L.top, 1, 'nothing scrolled')
  local text = table.concat(L.lines, '\n')
  T.ok(text:find('$ git status', 1, true) < text:find('[1]', 1, true), '$ git status above the options')
  vim.cmd('AcpDeny')
  win = T.wait_prompt('one_1')
  L = layout(win)
  T.eq(L.height, #L.lines, 'the edit: window height = rows of text')
  T.ok(T.answer(ctx, 'cmd_1') ~= nil, 'answered')
  vim.cmd('AcpDeny')
end)

T.test('80x24, a 537-line diff: stat and first lines above the options, options in view; d opens a diff tab, closing it brings the prompt back', function()
  resize(80, 24)
  local ctx = T.start_demo({ name = 'huge', steps = { huge_request('huge_${turn}') } })
  T.write(ctx.project .. '/huge.txt', 'old\n')
  require('acp').prompt('Go')
  local win = T.wait_prompt('huge_1')
  local L = layout(win)
  local text = table.concat(L.lines, '\n')
  T.ok(L.visible(L.first) and L.visible(L.last), 'the options are in view:\n' .. text)
  local stat = text:find('huge.txt: +537 -1', 1, true)
  T.ok(stat ~= nil and stat < text:find('[1]', 1, true), 'the diff stat above the options:\n' .. text)
  T.ok(text:find('+line 1 of the generated file', 1, true) < text:find('[1]', 1, true), 'the first lines above the options')
  T.contains(text, '+line 537 of the generated file', 'the whole diff below')
  T.ok(L.height + 2 <= vim.o.lines - vim.o.cmdheight, 'the window fits the screen')

  local tabs = #api.nvim_list_tabpages()
  T.answer_with_keys('huge_1', 'd')
  T.eq(#api.nvim_list_tabpages(), tabs + 1, 'a new tab page')
  T.eq(require('acp.prompt').current(), nil, 'the prompt stepped aside')
  local wins = api.nvim_tabpage_list_wins(0)
  T.eq(#wins, 2, 'two windows')
  local left, right = api.nvim_win_get_buf(wins[1]), api.nvim_win_get_buf(wins[2])
  T.eq(api.nvim_buf_get_lines(left, 0, -1, false), { 'old' }, 'left: the file as it is')
  T.eq(api.nvim_buf_get_lines(right, 0, -1, false), huge_lines(), "right: the agent's text")
  for _, w in ipairs(wins) do
    T.eq(api.nvim_win_get_option(w, 'diff'), true, 'diff mode in both windows')
  end
  T.feed('q')
  T.eq(#api.nvim_list_tabpages(), tabs, 'q closed the diff tab')
  win = T.wait_prompt('huge_1')
  T.eq(api.nvim_get_current_win(), win, 'the prompt is back, focused')
  vim.cmd('AcpDeny')
  T.eq(T.answer(ctx, 'huge_1').result, T.selected('reject'), 'answered')
end)

T.test('d with the file loaded and changed in a buffer: the left side is the buffer, unsaved lines included', function()
  local ctx = T.start_demo({ name = 'buffer-diff', steps = { huge_request('buf_${turn}') } })
  T.write(ctx.project .. '/huge.txt', 'old\n')
  vim.cmd('edit ' .. vim.fn.fnameescape(ctx.project .. '/huge.txt'))
  local buf = api.nvim_get_current_buf()
  T.defer(function()
    pcall(vim.cmd, 'bwipeout! ' .. buf)
  end)
  api.nvim_buf_set_lines(buf, 0, -1, false, { 'old', 'typed, not saved' })
  require('acp').prompt('Go')
  T.answer_with_keys('buf_1', 'd')
  local wins = api.nvim_tabpage_list_wins(0)
  T.eq(api.nvim_buf_get_lines(api.nvim_win_get_buf(wins[1]), 0, -1, false), { 'old', 'typed, not saved' }, 'left: the buffer')
  T.contains(api.nvim_buf_get_name(api.nvim_win_get_buf(wins[1])), '(your buffer)', 'named so')
  vim.cmd('tabclose')
  T.wait_prompt('buf_1')
  vim.cmd('AcpDeny')
  T.answer(ctx, 'buf_1')
end)

T.test('the queue: "1 of 2", ] and [ step, q hides only this one ("+1 hidden"), an answer elsewhere shows the next, the float follows the tab', function()
  local ctx = T.start_demo('two-pending.json')
  require('acp').prompt('Go')
  T.wait_pending('toolu_par_bash_1')
  local win = T.wait_prompt('toolu_par_write_1')
  T.contains(T.win_text(win), 'Permission 1 of 2', 'the header counts')
  T.contains(T.win_text(win), ']/[: next/previous', 'the footer names the keys')
  T.answer_with_keys('toolu_par_write_1', ']')
  win = T.wait_prompt('toolu_par_bash_1')
  T.contains(T.win_text(win), 'Permission 2 of 2', 'the second one')
  T.answer_with_keys('toolu_par_bash_1', '[')
  T.wait_prompt('toolu_par_write_1')
  -- q hides only this one: the other shows.
  T.answer_with_keys('toolu_par_write_1', 'q')
  win = T.wait_prompt('toolu_par_bash_1')
  T.contains(T.win_text(win), '+1 hidden', 'the header says one is hidden')
  T.eq(#require('acp').pending(), 2, 'both still pending')
  -- The float follows the tab page.
  vim.cmd('tabnew')
  T.defer(function()
    pcall(vim.cmd, 'tabonly!')
  end)
  win = T.wait(function()
    local cur = require('acp.prompt').current()
    return cur and api.nvim_win_get_tabpage(cur.win) == api.nvim_get_current_tabpage() and cur.win
  end, nil, 'the float on the new tab page')
  T.contains(T.win_text(win), 'touch second.txt', 'the same prompt')
  T.eq(#T.floats(), 1, 'one float')
  -- Its tab page closed under it: it comes back on the one entered.
  vim.cmd('tabnew')
  T.wait(function()
    local cur = require('acp.prompt').current()
    return cur and api.nvim_win_get_tabpage(cur.win) == api.nvim_get_current_tabpage()
  end, nil, 'the float on the third tab page')
  vim.cmd('tabclose')
  win = T.wait(function()
    local cur = require('acp.prompt').current()
    return cur and api.nvim_win_get_tabpage(cur.win) == api.nvim_get_current_tabpage() and cur.win
  end, nil, 'the float back after :tabclose')
  T.contains(T.win_text(win), 'touch second.txt', 'the same prompt after :tabclose')
  T.eq(#T.floats(), 1, 'one float')
  -- Answering the hidden one elsewhere leaves the shown one.
  vim.cmd('AcpDeny')
  T.eq(T.answer(ctx, 'toolu_par_write_1').result, T.selected('reject'), 'the oldest (hidden) one answered')
  win = T.wait(function()
    local cur = require('acp.prompt').current()
    return cur and T.win_text(cur.win):find('Permission 1 of 1', 1, true) and cur.win
  end, nil, 'the counter: 1 of 1')
  T.ok(not T.win_text(win):find('+1 hidden', 1, true), 'nothing hidden any more')
  -- Hidden, then the other one answered elsewhere: the next shows.
  T.answer_with_keys('toolu_par_bash_1', 'q')
  T.eq(require('acp.prompt').current(), nil, 'hidden')
  vim.cmd('AcpDeny')
  T.eq(T.answer(ctx, 'toolu_par_bash_1').result, T.selected('reject'), 'answered')
end)

T.test('an answer elsewhere shows the next prompt after q', function()
  local ctx = T.start_demo('two-pending.json')
  require('acp').prompt('Go')
  T.wait_pending('toolu_par_bash_1')
  T.answer_with_keys('toolu_par_write_1', ']')
  T.answer_with_keys('toolu_par_bash_1', 'q')
  local win = T.wait_prompt('toolu_par_write_1')
  T.contains(T.win_text(win), '+1 hidden', 'the other is hidden')
  vim.cmd('AcpDeny') -- the oldest: the one on screen
  T.eq(T.answer(ctx, 'toolu_par_write_1').result, T.selected('reject'), 'answered')
  T.never(function()
    return require('acp.prompt').current() ~= nil
  end, 200, 'the hidden prompt shown again by itself')
  vim.cmd('AcpPending')
  T.wait_prompt('toolu_par_bash_1')
  vim.cmd('AcpDeny')
  T.answer(ctx, 'toolu_par_bash_1')
end)

T.test('extras: acp words unlike the agent\'s; why s/p are absent; p says what it wrote and where; no t in yolo', function()
  local ctx = T.start_demo({
    name = 'extras',
    steps = {
      T.shell_request('plain_${turn}', 'npm test', {
        { kind = 'allow_always', name = 'Allow for this session', optionId = 'allow_always' },
        { kind = 'allow_once', name = 'Allow', optionId = 'allow' },
        { kind = 'reject_once', name = 'Reject', optionId = 'reject' },
      }),
      T.shell_request('opaque_${turn}', 'eval "$X"'),
    },
  })
  vim.cmd('cd ' .. vim.fn.fnameescape(ctx.project))
  T.defer(function()
    vim.cmd('cd -')
  end)
  require('acp').prompt('Go')
  local win = T.wait_prompt('plain_1')
  local text = T.win_text(win):gsub('\n     ', ' ')
  T.contains(text, '[1] Allow for this session', "the agent's own option")
  T.contains(text, '[s] allow like this for the rest of this conversation: Bash(npm test)', "acp's s")
  T.contains(text, '[p] allow like this in this project (.acp/settings.json): Bash(npm test)', "acp's p")
  T.ok(not text:find('[s] allow for this session', 1, true), 'not the old words')
  T.answer_with_keys('plain_1', 'p')
  T.eq(T.answer(ctx, 'plain_1').result, T.selected('allow'), 'p answers allow once')
  local msgs = T.wait(function()
    local m = vim.fn.execute('messages')
    return m:find('wrote the allow rule', 1, true) and m
  end, nil, 'the message of p')
  T.contains(msgs, 'acp: wrote the allow rule Bash(npm test) to .acp/settings.json', 'names the rule and the file')
  T.ok(T.exists(ctx.project .. '/.acp/settings.json'), 'the file is there')
  win = T.wait_prompt('opaque_1')
  text = T.win_text(win)
  T.ok(not text:find('[s]', 1, true) and not text:find('[p]', 1, true), 'no s/p for an opaque command')
  T.contains(text, 'No s/p: no exact rule describes this request', 'one line says why')
  T.contains(text, '[t] trust this agent', 't is offered outside yolo')
  vim.cmd('AcpDeny')
  T.answer(ctx, 'opaque_1')

  -- In yolo (an ask rule still asks), t is not offered.
  T.stop_all()
  local ctx2 = T.start_demo({ name = 'yolo', steps = { T.shell_request('yolo_${turn}', 'git push') } }, {
    setup = { ui = { arm_ms = 50 }, yolo = true, permissions = { ask = { 'Bash(git push)' } } },
  })
  require('acp').prompt('Go')
  win = T.wait_prompt('yolo_1')
  T.wait(function()
    return require('acp.state').settings_for(ctx2.project) ~= nil
  end, nil, 'the settings of the project')
  vim.cmd('AcpPending')
  text = T.win_text(T.wait_prompt('yolo_1'))
  T.ok(require('acp').status().yolo, 'yolo is on')
  T.ok(not text:find('trust this agent', 1, true), 'no t in yolo:\n' .. text)
  vim.cmd('AcpDeny')
  T.answer(ctx2, 'yolo_1')
end)

--- The row of the prompt's buffer holding `s` (nil when none).
local function row_with(lines, s)
  for i, l in ipairs(lines) do
    if l:find(s, 1, true) then
      return i
    end
  end
end

T.test('80x24, git status: the broader rule under s/p, with its keys; the command and every option in view', function()
  resize(80, 24)
  T.start_demo({ name = 'broad-80', steps = { T.shell_request('git_${turn}', 'git status') } })
  require('acp').prompt('Go')
  local win = T.wait_prompt('git_1')
  local L = layout(win)
  local text = table.concat(L.lines, '\n')
  T.eq(L.height, #L.lines, 'all of it in the window:\n' .. text)
  T.ok(L.visible(L.first) and L.visible(L.last), 'every option in view')
  local broad = row_with(L.lines, '[S]/[P] like s/p, broader: Bash(git status *)')
  T.ok(row_with(L.lines, '$ git status') < L.first, 'the command above the options')
  T.ok(broad ~= nil and row_with(L.lines, '[p] allow like this') < broad and broad < row_with(L.lines, '[t] trust'), 'the broad line under p:\n' .. text)
  T.contains(text, 's p S P t: answer', 'the footer names S and P')
  vim.cmd('AcpDeny')
end)

T.test('80x24, too little room: the broad line is the first decoration to go, a short line says where it is, the details show it', function()
  resize(80, 24)
  local ctx = T.start_demo({
    name = 'broad-room',
    steps = {
      T.shell_request('note_${turn}', 'git status -s && npm run test && ls -la src'),
      T.shell_request('none_${turn}', 'git status -s && npm run test -- --watch=false && ls -la src && git diff --stat HEAD~3'),
    },
  })
  require('acp').prompt('Go')
  local rule = 'broader: Bash(git status *), Bash(npm run *), Bash(ls *)'
  local win = T.wait_prompt('note_1')
  local L = layout(win)
  local text = table.concat(L.lines, '\n')
  T.ok(L.visible(L.first) and L.visible(L.last), 'every option in view:\n' .. text)
  T.ok(row_with(L.lines, 'Kind: execute') ~= nil, 'the other decorations stay')
  local note = row_with(L.lines, '[S]/[P] like s/p, broader: see the details below')
  T.ok(note ~= nil and L.visible(note) and note < row_with(L.lines, '[t] trust'), 'one short line says where:\n' .. text)
  local sep = row_with(L.lines, '── details: scroll down (S/P rule first) ──')
  T.ok(sep ~= nil and sep > L.last, 'the details')
  T.ok(joined(L.lines, sep + 1, #L.lines):find('[S]/[P] like s/p, ' .. rule, 1, true), 'the broad line heads them:\n' .. text)
  vim.cmd('AcpDeny')

  win = T.wait_prompt('none_1')
  L = layout(win)
  text = table.concat(L.lines, '\n')
  T.ok(L.visible(L.first) and L.visible(L.last), 'no room: every option in view:\n' .. text)
  T.ok(row_with(L.lines, '$ git status -s') < L.first, 'no room: the command above the options')
  sep = row_with(L.lines, '── details: scroll down (S/P rule first) ──')
  T.ok(sep ~= nil and row_with(L.lines, '[S]/[P]') == sep + 1, 'no room: the broad line only in the details:\n' .. text)
  T.contains(text, 's p S P t: answer', 'its keys still named')
  T.answer_with_keys('none_1', 'S')
  T.eq(T.answer(ctx, 'none_1').result, T.selected('allow'), 'S works without the line in view')
end)

T.test('vim.ui.select backend: the header and acp\'s extras in the same words; s remembers and says so', function()
  local asked, labels = {}, {}
  local real = vim.ui.select
  vim.ui.select = function(items, opts, on_choice)
    asked[#asked + 1] = opts.prompt
    local pick
    for _, item in ipairs(items) do
      local label = opts.format_item(item)
      labels[#labels + 1] = label
      if label:find('rest of this conversation', 1, true) then
        pick = pick or item
      end
    end
    on_choice(pick)
  end
  T.defer(function()
    vim.ui.select = real
  end)
  local ctx = T.start_demo({ name = 'select', steps = { T.shell_request('sel_${turn}', 'npm test') } }, {
    setup = { ui = { arm_ms = 50, backend = 'select' } },
  })
  require('acp').prompt('Go')
  T.eq(T.answer(ctx, 'sel_1').result, T.selected('allow'), 'the extra answers allow once')
  T.contains(asked[1], 'Permission 1 of 1 · ', 'the header')
  T.contains(table.concat(labels, '\n'), 'acp: allow like this for the rest of this conversation: Bash(npm test)', 'the extra')
  T.contains(table.concat(labels, '\n'), 'acp: allow like this for the rest of this conversation, with the broader rule: Bash(npm test *)', 'S')
  T.contains(table.concat(labels, '\n'), 'acp: allow like this in this project (.acp/settings.json), with the broader rule: Bash(npm test *)', 'P')
  T.contains(vim.fn.execute('messages'), 'acp: remembered Bash(npm test) for the rest of this conversation', 'the message')
end)

T.test('a prompt waiting unseen (Neovim not focused): one vim.notify and the OSC sequence; none when focused', function()
  local writes = {}
  local notify = require('acp.prompt.notify')
  local real = notify.term_write
  notify.term_write = function(s)
    writes[#writes + 1] = s
  end
  T.defer(function()
    notify.term_write = real
    vim.cmd('doautocmd <nomodeline> FocusGained')
  end)
  local ctx = T.start_demo('two-pending.json', { setup = { ui = { arm_ms = 50 }, notify = { osc = '9' } } })
  vim.cmd('doautocmd <nomodeline> FocusLost')
  require('acp').prompt('Go')
  T.wait_pending('toolu_par_bash_1')
  local notes = T.wait(function()
    local n = T.notes_with('asks for permission')
    return #n > 0 and n
  end, nil, 'the notification')
  T.wait_ms(100)
  T.eq(#T.notes_with('asks for permission'), 1, 'one notification for the burst')
  T.contains(notes[1], 'Write first.txt', 'names the request')
  T.eq(#writes, 1, 'one OSC sequence')
  T.contains(writes[1], '\027]9;acp: ', 'OSC 9')
  T.ok(writes[1]:sub(-1) == '\007', 'ends with BEL')
  vim.cmd('AcpDeny!')
  T.answer(ctx, 'toolu_par_bash_1')
  T.idle()
  -- Focused again: a new prompt is seen, no notification.
  vim.cmd('doautocmd <nomodeline> FocusGained')
  require('acp').prompt('Again')
  T.wait_pending('toolu_par_bash_2')
  T.wait_ms(100)
  T.eq(#T.notes_with('asks for permission'), 1, 'no new notification while focused')
  T.eq(#writes, 1, 'no new OSC sequence')
  vim.cmd('AcpDeny!')
end)

T.done()
