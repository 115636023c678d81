" Completion of the :Acp commands plugin/acp.lua defines: this file loads on
" the first <Tab> after one of them, and each function asks the Lua of
" acp.commands (which loads then too).

function! acp#complete(name, arglead, cmdline, cursorpos) abort
  return luaeval('require("acp.commands")[_A[1]](_A[2], _A[3], _A[4]) or {}',
        \ [a:name, a:arglead, a:cmdline, a:cursorpos])
endfunction

function! acp#complete_agents(arglead, cmdline, cursorpos) abort
  return acp#complete('complete_agents', a:arglead, a:cmdline, a:cursorpos)
endfunction

function! acp#complete_running(arglead, cmdline, cursorpos) abort
  return acp#complete('complete_running', a:arglead, a:cmdline, a:cursorpos)
endfunction

function! acp#complete_add(arglead, cmdline, cursorpos) abort
  return acp#complete('complete_add', a:arglead, a:cmdline, a:cursorpos)
endfunction

function! acp#complete_rule(arglead, cmdline, cursorpos) abort
  return acp#complete('complete_rule', a:arglead, a:cmdline, a:cursorpos)
endfunction

function! acp#complete_yolo(arglead, cmdline, cursorpos) abort
  return acp#complete('complete_yolo', a:arglead, a:cmdline, a:cursorpos)
endfunction

function! acp#complete_mode(arglead, cmdline, cursorpos) abort
  return acp#complete('complete_mode', a:arglead, a:cmdline, a:cursorpos)
endfunction

function! acp#complete_review(arglead, cmdline, cursorpos) abort
  return acp#complete('complete_review', a:arglead, a:cmdline, a:cursorpos)
endfunction
