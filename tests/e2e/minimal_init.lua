-- Minimal init for the end-to-end tests: this plugin only, no user config.
-- Used as `nvim --headless --clean -u tests/e2e/minimal_init.lua`; the repo
-- root is found from this file's own location, so it works from any cwd.

local here = debug.getinfo(1, 'S').source:sub(2):match('(.*)/') or '.'
here = vim.fn.fnamemodify(here, ':p'):gsub('/$', '')
local root = vim.fn.fnamemodify(here .. '/../..', ':p'):gsub('/$', '')

vim.opt.rtp:prepend(root)
package.path = here .. '/?.lua;' .. package.path

vim.o.swapfile = false
vim.opt.shortmess:append('I')
vim.o.more = false

vim.cmd('runtime plugin/acp.lua')
