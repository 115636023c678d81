-- acp: pair-program with a coding agent and stay in charge of its tool calls.
-- This file only declares commands and <Plug> mappings; everything loads on
-- first use. setup() is optional (:help acp-config).
--
-- The commands are one block of Vimscript `:command` definitions: at every
-- Neovim startup that costs half of what nvim_create_user_command with Lua
-- callbacks does (bench/README.md). Their bodies run Lua on use; completion
-- goes through autoload/acp.vim, loaded on the first <Tab>. <f-args> and
-- <q-args> expand to double-quoted strings that read the same in Lua.

if vim.g.loaded_acp then
  return
end
vim.g.loaded_acp = true

vim.cmd([[
command! -nargs=? -bang -complete=customlist,acp#complete_agents AcpStart lua require('acp.commands').start(({<f-args>})[1], '<bang>' == '!')
command! -nargs=? -complete=customlist,acp#complete_running AcpStop lua require('acp.commands').stop(({<f-args>})[1])
command! -nargs=+ -range AcpPrompt lua require('acp.commands').prompt(<q-args>, <range> > 0 and { first = <line1>, last = <line2> } or nil)
command! -nargs=* -range -complete=customlist,acp#complete_add AcpAdd lua require('acp.commands').add({<f-args>}, <range> > 0 and { first = <line1>, last = <line2> } or nil)
command! -nargs=? -complete=customlist,acp#complete_running AcpChat lua require('acp').chat({ agent = ({<f-args>})[1] })
command! -nargs=? -complete=customlist,acp#complete_agents AcpNew lua require('acp.commands').new(({<f-args>})[1])
command! -nargs=0 AcpSessions lua require('acp.commands').sessions()
command! -nargs=0 AcpCancel lua require('acp.commands').cancel()
command! -nargs=0 AcpPending lua require('acp.commands').pending()
command! -nargs=* -bang -complete=customlist,acp#complete_rule AcpAllow lua require('acp.commands').allow('<bang>' == '!', <q-args>)
command! -nargs=* -bang -complete=customlist,acp#complete_rule AcpDeny lua require('acp.commands').deny('<bang>' == '!', <q-args>)
command! -nargs=+ -complete=customlist,acp#complete_rule AcpAsk lua require('acp.commands').ask(<q-args>)
command! -nargs=0 AcpRules lua require('acp.commands').rules()
command! -nargs=? -complete=customlist,acp#complete_yolo AcpYolo lua require('acp.commands').yolo(({<f-args>})[1])
command! -nargs=? -complete=customlist,acp#complete_mode AcpMode lua require('acp.commands').mode(({<f-args>})[1])
command! -nargs=0 AcpTrust lua require('acp.commands').trust()
command! -nargs=0 -bang AcpLog lua require('acp.commands').log('<bang>' == '!')
command! -nargs=* -complete=customlist,acp#complete_review AcpReview lua require('acp.commands').review(<q-args>)
nnoremap <silent> <Plug>(acp-allow) <Cmd>lua require('acp.commands').allow(false, '')<CR>
nnoremap <silent> <Plug>(acp-deny) <Cmd>lua require('acp.commands').deny(false, '')<CR>
nnoremap <silent> <Plug>(acp-pending) <Cmd>lua require('acp.commands').pending()<CR>
]])
