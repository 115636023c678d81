-- require('acp').statusline(): the current agent and what it does, for a
-- statusline (lualine or 'statusline'). The test sets its own 'statusline'
-- and evaluates it, so it holds whatever a Neovim's default is.
local T = require('helpers')
local api = vim.api

local function shown()
  return api.nvim_eval_statusline(vim.o.statusline, { maxwidth = 200, fillchar = ' ' }).str
end

T.test("statusline(): '' with no agent, then idle, waiting N, working; usable in 'statusline'", function()
  local saved = vim.o.statusline
  T.defer(function()
    vim.o.statusline = saved
  end)
  vim.cmd([=[set statusline=[%{v:lua.require'acp'.statusline()}]]=])
  T.eq(require('acp').statusline(), '', 'no agent: empty')
  T.eq(shown(), '[]', 'in the statusline: empty')

  local ctx = T.start_demo({
    name = 'statusline',
    steps = {
      T.shell_request('one_${turn}', 'npm test'),
      T.shell_request('two_${turn}', 'npm run lint'),
      { type = 'sleep', ms = 400 },
      { type = 'message', text = 'Done.' },
    },
  })
  local name = ctx.agent
  T.eq(require('acp').statusline(), name .. ': idle', 'a session, no turn')
  T.eq(shown(), '[' .. name .. ': idle]', 'in the statusline')
  require('acp').prompt('Go')
  T.wait_pending('one_1')
  T.eq(require('acp').statusline(), name .. ': waiting 1', 'one prompt waits')
  vim.cmd('AcpAllow')
  T.wait_pending('two_1')
  T.eq(require('acp').statusline(), name .. ': waiting 1', 'the next prompt waits')
  vim.cmd('AcpAllow')
  T.wait(function()
    return #require('acp').pending() == 0
  end, nil, 'no prompt left')
  T.eq(require('acp').statusline(), name .. ': working', 'the turn goes on')
  T.idle()
  T.eq(require('acp').statusline(), name .. ': idle', 'the turn ended')
  T.eq(shown(), '[' .. name .. ': idle]', 'in the statusline, after the turn')

  -- yolo, and an agent that is not known to ask.
  vim.cmd('AcpYolo on')
  T.wait(function()
    return require('acp').status().yolo
  end, nil, 'yolo on')
  T.eq(require('acp').statusline(), name .. ': idle yolo', 'yolo is shown')
  vim.cmd('AcpYolo off')
  T.wait(function()
    return not require('acp').status().yolo
  end, nil, 'yolo off')
  local sess = require('acp.state').sessions[ctx.session]
  sess.posture, sess.posture_reason = 'unverified', 'the agent is in its own mode'
  T.eq(require('acp').statusline(), name .. ': idle !unverified', 'the posture warning')
end)

T.done()
