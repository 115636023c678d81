-- plugin/acp.lua defines the :Acp commands as Vimscript `:command`s (cheaper
-- at startup than nvim_create_user_command with Lua callbacks): each hands
-- its arguments, bang and range to acp.commands as the Lua API expects, and
-- completion reaches the Lua completers through autoload/acp.vim.
local T = require('helpers')

-- Runs the Ex commands with acp.commands (and acp.chat) replaced by
-- recorders; returns the calls, each {name, args...}.
local function calls_of(cmds)
  local log = {}
  local real_cmds, real_acp = package.loaded['acp.commands'], package.loaded['acp']
  package.loaded['acp.commands'] = setmetatable({}, {
    __index = function(_, k)
      return function(...)
        log[#log + 1] = { k, ... }
      end
    end,
  })
  package.loaded['acp'] = {
    chat = function(o)
      log[#log + 1] = { 'chat', o }
    end,
  }
  local ok, err = pcall(function()
    for _, c in ipairs(cmds) do
      vim.cmd(c)
    end
  end)
  package.loaded['acp.commands'], package.loaded['acp'] = real_cmds, real_acp
  assert(ok, err)
  return log
end

T.test('the commands hand their arguments, bang and range to acp.commands', function()
  local buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_set_current_buf(buf)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, { 'a', 'b', 'c' })
  local got = calls_of({
    'AcpStart',
    'AcpStart! claude',
    'AcpStop x',
    [[AcpPrompt say "hi" \n and a\b]],
    '2,3AcpPrompt fix it',
    [[AcpAdd file a\ b.txt]],
    '%AcpAdd selection',
    'AcpChat foo',
    'AcpNew',
    'AcpNew claude',
    'AcpSessions',
    'AcpCancel',
    'AcpPending',
    'AcpAllow',
    'AcpAllow! ',
    'AcpAllow Bash(ls *)',
    'AcpDeny! x | y',
    'AcpAsk Read(./x)',
    'AcpRules',
    'AcpYolo on',
    'AcpMode',
    'AcpTrust',
    'AcpLog',
    'AcpLog!',
    'AcpReview diff a.txt',
  })
  T.eq(got, {
    { 'start', nil, false },
    { 'start', 'claude', true },
    { 'stop', 'x' },
    { 'prompt', [[say "hi" \n and a\b]] },
    { 'prompt', 'fix it', { first = 2, last = 3 } },
    { 'add', { 'file', 'a b.txt' } },
    { 'add', { 'selection' }, { first = 1, last = 3 } },
    { 'chat', { agent = 'foo' } },
    { 'new', nil },
    { 'new', 'claude' },
    { 'sessions' },
    { 'cancel' },
    { 'pending' },
    { 'allow', false, '' },
    { 'allow', true, '' },
    { 'allow', false, 'Bash(ls *)' },
    { 'deny', true, 'x | y' },
    { 'ask', 'Read(./x)' },
    { 'rules' },
    { 'yolo', 'on' },
    { 'mode' },
    { 'trust' },
    { 'log', false },
    { 'log', true },
    { 'review', 'diff a.txt' },
  }, 'the calls')
  vim.api.nvim_buf_delete(buf, { force = true })
end)

T.test('the <Plug> mappings call acp.commands', function()
  local got = calls_of({
    [[execute "normal \<Plug>(acp-allow)"]],
    [[execute "normal \<Plug>(acp-deny)"]],
    [[execute "normal \<Plug>(acp-pending)"]],
  })
  T.eq(got, { { 'allow', false, '' }, { 'deny', false, '' }, { 'pending' } }, 'the calls')
end)

T.test('completion reaches the Lua completers', function()
  T.eq(vim.fn.getcompletion('AcpYolo ', 'cmdline'), { 'on', 'off', 'toggle' }, ':AcpYolo')
  T.eq(vim.fn.getcompletion('AcpReview ', 'cmdline'), { 'turn', 'session', 'diff', 'revert' }, ':AcpReview')
  T.eq(vim.fn.getcompletion('AcpAllow Ba', 'cmdline'), { 'Bash(' }, ':AcpAllow')
end)

T.done()
