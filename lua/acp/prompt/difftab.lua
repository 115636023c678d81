--- The diff tab of the prompt's `d`: what the person has of a file (the
--- loaded buffer, else the disk) against the text the agent proposes, in
--- two scratch buffers in diff mode. :help acp-prompt-diff

local compat = require('acp.compat')
local text = require('acp.text')

local M = {}
local H = {}

function H.scratch(name, s, ft)
  local buf = vim.api.nvim_create_buf(false, true)
  compat.set_buf(buf, 'bufhidden', 'wipe')
  local lines = text.file_lines(s)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  compat.set_buf(buf, 'modifiable', false)
  pcall(vim.api.nvim_buf_set_name, buf, name)
  if ft ~= nil then
    compat.set_buf(buf, 'filetype', ft)
  end
  vim.keymap.set('n', 'q', '<Cmd>tabclose<CR>', { [compat.buf_key] = buf, nowait = true, silent = true, desc = 'acp: close the diff tab' })
  return buf
end

--- Opens diff `d` (a record of the prompt's diffs: {item, have}) in a new
--- tab page; returns the tab page.
function M.open(d)
  local path = compat.str(d.item.path) or '?'
  local new = type(d.item.newText) == 'string' and d.item.newText or ''
  local old = type(d.item.oldText) == 'string' and d.item.oldText or nil
  local have = d.have
  local cur = have and have.text or old or ''
  if have and have.snippet and old ~= nil and old ~= '' then
    local s, e = cur:find(old, 1, true)
    new = s and (cur:sub(1, s - 1) .. new .. cur:sub(e + 1)) or new
  end
  local ft
  if vim.filetype and vim.filetype.match then
    local ok, r = pcall(vim.filetype.match, { filename = path })
    ft = ok and type(r) == 'string' and r or nil
  end
  local short = text.short_path(path)
  local where = have and (have.from == 'buffer' and 'your buffer' or 'disk') or 'none'
  local lb = H.scratch(('acp://%s (%s)'):format(short, where), cur, ft)
  local rb = H.scratch(("acp://%s (the agent's)"):format(short), new, ft)
  vim.cmd('tab split')
  local tab = vim.api.nvim_get_current_tabpage()
  local lw = vim.api.nvim_get_current_win()
  vim.api.nvim_win_set_buf(lw, lb)
  vim.cmd('rightbelow vsplit')
  local rw = vim.api.nvim_get_current_win()
  vim.api.nvim_win_set_buf(rw, rb)
  for _, w in ipairs({ lw, rw }) do
    vim.api.nvim_win_call(w, function()
      vim.cmd('diffthis')
    end)
  end
  return tab
end

return M
