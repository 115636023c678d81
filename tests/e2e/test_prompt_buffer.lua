-- The prompt's one buffer: every prompt is drawn in the same scratch buffer
-- (its 'filetype' and keys are set once, not per prompt), the digit keys
-- follow the options of the prompt shown, keys changed in setup() apply to
-- the next prompt, a redraw that changes nothing writes nothing, and a
-- window closed with :q hides its prompt as before; opening, entering and
-- closing the window runs none of the person's autocommands.
local T = require('helpers')
local api = vim.api

local function request(tcid, options)
  return {
    type = 'permission',
    announce = true,
    toolCall = { toolCallId = tcid, title = 'Run ' .. tcid, kind = 'execute', rawInput = { command = 'touch ' .. tcid } },
    options = options,
  }
end

local FOUR = {
  { kind = 'allow_once', name = 'Allow', optionId = 'allow' },
  { kind = 'allow_always', name = 'Always', optionId = 'always' },
  { kind = 'reject_once', name = 'Reject', optionId = 'reject' },
  { kind = 'reject_always', name = 'Never', optionId = 'never' },
}
local TWO = {
  { kind = 'allow_once', name = 'Allow', optionId = 'allow' },
  { kind = 'reject_once', name = 'Reject', optionId = 'reject' },
}

-- The buffer-local normal-mode mapping of lhs in buf, or nil.
local function buf_map(buf, lhs)
  for _, m in ipairs(api.nvim_buf_get_keymap(buf, 'n')) do
    if m.lhs == lhs then
      return m
    end
  end
  return nil
end

T.test('one buffer for every prompt, with the filetype; the digits follow the options shown', function()
  local ctx = T.start_demo({
    name = 'prompt-buffer',
    steps = { request('four_${turn}', FOUR), request('two_${turn}', TWO), request('four_again_${turn}', FOUR) },
  })
  require('acp').prompt('Go')
  local win = T.wait_prompt('four_1')
  local buf = api.nvim_win_get_buf(win)
  T.eq(vim.bo[buf].filetype, 'acp-prompt', 'filetype')
  -- A redraw with nothing changed writes nothing.
  local tick = api.nvim_buf_get_changedtick(buf)
  require('acp.prompt').refresh()
  T.eq(api.nvim_buf_get_changedtick(buf), tick, 'refresh() with nothing changed leaves the buffer')
  T.eq(vim.bo[buf].modifiable, false, 'not modifiable')
  T.ok(buf_map(buf, '4') ~= nil, '4 is mapped with four options')
  T.answer_with_keys('four_1', '3')
  T.eq(T.answer(ctx, 'four_1').result, T.selected('reject'), '3: the third option')

  win = T.wait_prompt('two_1')
  T.eq(api.nvim_win_get_buf(win), buf, 'the second prompt in the same buffer')
  T.eq(buf_map(buf, '3'), nil, '3 is not mapped with two options')
  T.eq(buf_map(buf, '4'), nil, '4 is not mapped with two options')
  T.ok(buf_map(buf, '2') ~= nil, '2 is mapped')
  T.contains(T.win_text(win), 'touch two_1', 'its own text')
  T.ok(not T.win_text(win):find('four_1', 1, true), 'nothing left of the first prompt')
  -- R: no reject_always option here; the key says so and answers nothing.
  local echoed = {}
  local real = api.nvim_echo
  api.nvim_echo = function(chunks, history, opts)
    echoed[#echoed + 1] = chunks[1] and chunks[1][1]
    return real(chunks, history, opts)
  end
  T.defer(function()
    api.nvim_echo = real
  end)
  T.answer_with_keys('two_1', 'R')
  api.nvim_echo = real
  T.eq(echoed[#echoed], 'acp: no reject-always option offered', 'R says so')
  T.eq(T.requests(ctx, 'two_1')[1].response, nil, 'R answered nothing')
  T.feed('2')
  T.eq(T.answer(ctx, 'two_1').result, T.selected('reject'), '2: the second option')

  win = T.wait_prompt('four_again_1')
  T.eq(api.nvim_win_get_buf(win), buf, 'the third prompt in the same buffer')
  T.ok(buf_map(buf, '4') ~= nil, '4 mapped again')
  T.answer_with_keys('four_again_1', 'R')
  T.eq(T.answer(ctx, 'four_again_1').result, T.selected('never'), 'R: reject_always')
  T.wait(function()
    return require('acp.prompt').current() == nil
  end, nil, 'the window closed')
  T.ok(api.nvim_buf_is_valid(buf), 'the buffer is kept for the next prompt')
  local prompts = 0
  for _, b in ipairs(api.nvim_list_bufs()) do
    if vim.bo[b].filetype == 'acp-prompt' then
      prompts = prompts + 1
    end
  end
  T.eq(prompts, 1, 'one prompt buffer for three prompts')
end)

T.test('keys changed in setup() apply to the next prompt; :q hides the prompt, :AcpPending brings it back', function()
  local ctx = T.start_demo({
    name = 'prompt-buffer-keys',
    steps = { request('first_${turn}', TWO), request('second_${turn}', TWO) },
  })
  require('acp').prompt('Go')
  local win = T.wait_prompt('first_1')
  local buf = api.nvim_win_get_buf(win)
  T.ok(buf_map(buf, 'a') ~= nil, 'a is mapped')
  -- :q closes the window: the prompt is hidden, still pending.
  T.wait_ms(require('acp.config').get().ui.arm_ms + 30)
  vim.cmd('quit')
  T.wait(function()
    return require('acp.prompt').current() == nil
  end, nil, 'the prompt hidden by :q')
  T.eq(#require('acp').pending(), 1, 'still pending')
  vim.cmd('AcpPending')
  win = T.wait_prompt('first_1')
  T.answer_with_keys('first_1', 'a')
  T.eq(T.answer(ctx, 'first_1').result, T.selected('allow'), 'a after :AcpPending')

  require('acp').setup({ ui = { arm_ms = 50, keys = { allow_once = 'y' } } })
  win = T.wait_prompt('second_1')
  T.eq(api.nvim_win_get_buf(win), buf, 'the same buffer')
  T.eq(buf_map(buf, 'a'), nil, 'a is not mapped any more')
  T.ok(buf_map(buf, 'y') ~= nil, 'y is mapped')
  T.answer_with_keys('second_1', 'y')
  T.eq(T.answer(ctx, 'second_1').result, T.selected('allow'), 'y answers allow once')
end)

T.test('a redraw lays the prompt out again only when something it shows changed; an answered request is freed', function()
  local ctx = T.start_demo({
    name = 'prompt-buffer-memo',
    steps = { request('memo_${turn}', TWO) },
  })
  require('acp').prompt('Go')
  local win = T.wait_prompt('memo_1')
  -- Lines added by the layout (Block methods are looked up when called).
  local layout = require('acp.prompt.layout')
  local real_add, adds = layout.Block.add, 0
  layout.Block.add = function(...)
    adds = adds + 1
    return real_add(...)
  end
  T.defer(function()
    layout.Block.add = real_add
  end)
  require('acp.prompt').refresh()
  require('acp.prompt').refresh()
  T.eq(adds, 0, 'refresh() with nothing changed lays nothing out')
  local columns = vim.o.columns
  vim.o.columns = columns - 20
  require('acp.prompt').refresh()
  layout.Block.add = real_add
  vim.o.columns = columns
  T.ok(adds > 0, 'a narrower screen: laid out again')
  -- The pending record goes once answered (nothing keeps it: layout, memo).
  local weak = setmetatable({}, { __mode = 'v' })
  weak[1] = require('acp.state').pending[require('acp').pending()[1].id]
  T.ok(weak[1] ~= nil, 'the pending record')
  T.answer_with_keys('memo_1', 'a')
  T.eq(T.answer(ctx, 'memo_1').result, T.selected('allow'), 'answered')
  T.wait(function()
    return #require('acp').pending() == 0 and require('acp.prompt').current() == nil
  end, nil, 'resolved and closed')
  T.wait(function()
    collectgarbage('collect')
    return weak[1] == nil
  end, nil, 'the answered request is garbage')
end)

T.test("the prompt's window opens, takes focus and closes without the person's window and buffer autocommands", function()
  local ctx = T.start_demo({
    name = 'prompt-buffer-quiet',
    steps = { request('quiet_${turn}', TWO) },
  })
  -- The person's own 'eventignore' and window/buffer autocommands.
  local events =
    { 'WinNew', 'WinEnter', 'WinLeave', 'WinClosed', 'BufEnter', 'BufLeave', 'BufWinEnter', 'BufWinLeave', 'BufHidden' }
  local ran = {}
  local group = api.nvim_create_augroup('PersonsOwn', { clear = true })
  for _, ev in ipairs(events) do
    api.nvim_create_autocmd(ev, {
      group = group,
      callback = function()
        ran[#ran + 1] = ev
      end,
    })
  end
  T.defer(function()
    pcall(api.nvim_del_augroup_by_name, 'PersonsOwn')
    vim.o.eventignore = ''
  end)
  vim.o.eventignore = 'FileType'
  local code_win = api.nvim_get_current_win()
  require('acp').prompt('Go')
  local win = T.wait_prompt('quiet_1')
  T.eq(api.nvim_get_current_win(), win, 'the prompt has the focus')
  T.eq(vim.o.eventignore, 'FileType', "the person's 'eventignore' as it was")
  T.eq(ran, {}, 'no autocommand ran to open and enter it')
  T.answer_with_keys('quiet_1', 'a')
  T.eq(T.answer(ctx, 'quiet_1').result, T.selected('allow'), 'answered')
  T.wait(function()
    return require('acp.prompt').current() == nil
  end, nil, 'the window closed')
  T.ok(not api.nvim_win_is_valid(win), 'its window is gone')
  T.eq(api.nvim_get_current_win(), code_win, 'the focus back where it was')
  T.eq(vim.o.eventignore, 'FileType', "'eventignore' as it was")
  T.eq(ran, {}, 'no autocommand ran to leave and close it')
  -- The person's own window commands still run them.
  vim.cmd('split')
  vim.cmd('close')
  T.ok(#ran > 0, "the person's autocommands still run for their own windows")
end)
