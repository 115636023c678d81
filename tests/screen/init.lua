-- Neovim's side of a screen test (tests/screen/screen.py): loads the plugin,
-- starts the demo agent on $ACP_DEMO_SCENARIO in the current directory and
-- sends a prompt.
vim.opt.rtp:prepend(vim.env.ACP_SCREEN_ROOT)
vim.cmd('runtime plugin/acp.lua')
require('acp').setup({ ui = { arm_ms = 100 }, notify = { osc = vim.env.ACP_SCREEN_OSC or 'auto' } })
require('acp').start({
  cmd = { vim.env.ACP_DEMO_AGENT_BIN },
  env = { ACP_DEMO_SCENARIO = vim.env.ACP_DEMO_SCENARIO },
}, { cwd = vim.fn.getcwd() })
require('acp').prompt('Go')
