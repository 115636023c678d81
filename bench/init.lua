-- Init for the Neovim that `make bench` drives: this plugin only, no user
-- config, and bench/ on package.path (nvim_bench, lua_client). Used as
-- `nvim --headless --clean -u bench/init.lua --listen SOCK`.

local here = debug.getinfo(1, 'S').source:sub(2):match('(.*)/') or '.'
here = vim.fn.fnamemodify(here, ':p'):gsub('/$', '')
local root = vim.fn.fnamemodify(here .. '/..', ':p'):gsub('/$', '')

vim.opt.rtp:prepend(root)
package.path = here .. '/?.lua;' .. package.path

vim.o.swapfile = false
vim.o.more = false
vim.opt.shortmess:append('I')

vim.cmd('runtime plugin/acp.lua')
