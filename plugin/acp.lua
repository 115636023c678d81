-- acp: pair-program with a coding agent and stay in charge of its tool calls.
-- This file only declares commands and <Plug> mappings; everything loads on
-- first use. setup() is optional (:help acp-config).

if vim.g.loaded_acp then
  return
end
vim.g.loaded_acp = true

local function cmds()
  return require('acp.commands')
end

local function command(name, fn, opts)
  vim.api.nvim_create_user_command(name, fn, opts)
end

command('AcpStart', function(o)
  cmds().start(o.fargs[1])
end, {
  nargs = '?',
  desc = 'Start (or reuse) an agent and a session in this project',
  complete = function(arglead)
    return require('acp.commands').complete_agents(arglead)
  end,
})

command('AcpStop', function(o)
  cmds().stop(o.fargs[1])
end, {
  nargs = '?',
  desc = 'Stop an agent (its pending prompts are cancelled)',
  complete = function(arglead)
    return require('acp.commands').complete_running(arglead)
  end,
})

command('AcpPrompt', function(o)
  cmds().prompt(o.args)
end, { nargs = '+', desc = 'Send a prompt to the current session' })

command('AcpCancel', function()
  cmds().cancel()
end, { nargs = 0, desc = 'Cancel the running turn' })

command('AcpPending', function()
  cmds().pending()
end, { nargs = 0, desc = 'List pending permission prompts and open the oldest' })

command('AcpAllow', function(o)
  cmds().allow(o.bang, o.args)
end, { nargs = '*', bang = true, desc = 'Allow once the oldest pending prompt (! = all)' })

command('AcpDeny', function(o)
  cmds().deny(o.bang, o.args)
end, { nargs = '*', bang = true, desc = 'Reject once the oldest pending prompt (! = all)' })

vim.keymap.set('n', '<Plug>(acp-allow)', function()
  cmds().allow(false, '')
end, { desc = 'acp: allow once the oldest pending prompt' })

vim.keymap.set('n', '<Plug>(acp-deny)', function()
  cmds().deny(false, '')
end, { desc = 'acp: reject once the oldest pending prompt' })

vim.keymap.set('n', '<Plug>(acp-pending)', function()
  cmds().pending()
end, { desc = 'acp: open the oldest pending prompt' })
