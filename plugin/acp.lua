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
  cmds().start(o.fargs[1], o.bang)
end, {
  nargs = '?',
  bang = true,
  desc = 'Start (or reuse) an agent and a session in this project (! resumes the last session)',
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

local function range(o)
  if o.range > 0 then
    return { first = o.line1, last = o.line2 }
  end
  return nil
end

command('AcpPrompt', function(o)
  cmds().prompt(o.args, range(o))
end, { nargs = '+', range = true, desc = 'Send a prompt to the current session (a range: with those lines)' })

command('AcpAdd', function(o)
  cmds().add(o.fargs, range(o))
end, {
  nargs = '*',
  range = true,
  desc = 'Stage context for the next prompt: buffer, file {path}, selection, diagnostics, quickfix',
  complete = function(arglead, cmdline)
    return require('acp.commands').complete_add(arglead, cmdline)
  end,
})

command('AcpChat', function(o)
  require('acp').chat({ agent = o.fargs[1] })
end, {
  nargs = '?',
  desc = 'Open the chat buffer of the current session (or of an agent)',
  complete = function(arglead)
    return require('acp.commands').complete_running(arglead)
  end,
})

command('AcpNew', function(o)
  cmds().new(o.fargs[1])
end, {
  nargs = '?',
  desc = 'Start a new conversation (a new session) with an agent',
  complete = function(arglead)
    return require('acp.commands').complete_agents(arglead)
  end,
})

command('AcpSessions', function()
  cmds().sessions()
end, { nargs = 0, desc = 'Pick a session of any agent (open or resumable) for the chat window' })

command('AcpCancel', function()
  cmds().cancel()
end, { nargs = 0, desc = 'Cancel the running turn' })

command('AcpPending', function()
  cmds().pending()
end, { nargs = 0, desc = 'List pending permission prompts and open the oldest' })

local function complete_rule(arglead, cmdline, cursorpos)
  return require('acp.commands').complete_rule(arglead, cmdline, cursorpos)
end

command('AcpAllow', function(o)
  cmds().allow(o.bang, o.args)
end, {
  nargs = '*',
  bang = true,
  desc = 'Allow once the oldest pending prompt (! = all), or add an allow rule',
  complete = complete_rule,
})

command('AcpDeny', function(o)
  cmds().deny(o.bang, o.args)
end, {
  nargs = '*',
  bang = true,
  desc = 'Reject once the oldest pending prompt (! = all), or add a deny rule',
  complete = complete_rule,
})

command('AcpAsk', function(o)
  cmds().ask(o.args)
end, { nargs = '+', desc = 'Add an ask rule', complete = complete_rule })

command('AcpRules', function()
  cmds().rules()
end, { nargs = 0, desc = 'Show the effective permission rules, mode, yolo and trust' })

command('AcpYolo', function(o)
  cmds().yolo(o.fargs[1])
end, {
  nargs = '?',
  desc = "Turn this project's yolo mode on, off or toggle it (no argument: show it)",
  complete = function(arglead)
    return require('acp.commands').complete_yolo(arglead)
  end,
})

command('AcpMode', function(o)
  cmds().mode(o.fargs[1])
end, {
  nargs = '?',
  desc = "Set this project's permission mode or the agent's mode (no argument: show them)",
  complete = function(arglead)
    return require('acp.commands').complete_mode(arglead)
  end,
})

command('AcpTrust', function()
  cmds().trust()
end, { nargs = 0, desc = "Review and trust this project's permissive settings" })

command('AcpLog', function()
  cmds().log()
end, { nargs = 0, desc = 'Open the decision audit log' })

command('AcpReview', function(o)
  cmds().review(o.args)
end, {
  nargs = '*',
  desc = 'Review what the agent changed: quickfix of hunks (turn|session), diff [file], revert [file|all]',
  complete = function(arglead, cmdline)
    return require('acp.commands').complete_review(arglead, cmdline)
  end,
})

-- nvim_set_keymap, not vim.keymap.set: that would load a Lua module at
-- every startup.
local function plug(lhs, fn, desc)
  vim.api.nvim_set_keymap('n', lhs, '', { callback = fn, desc = desc, noremap = true })
end

plug('<Plug>(acp-allow)', function()
  cmds().allow(false, '')
end, 'acp: allow once the oldest pending prompt')

plug('<Plug>(acp-deny)', function()
  cmds().deny(false, '')
end, 'acp: reject once the oldest pending prompt')

plug('<Plug>(acp-pending)', function()
  cmds().pending()
end, 'acp: open the oldest pending prompt')
