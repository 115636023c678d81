--- The notice of a permission prompt that waits unseen: one vim.notify,
--- and the terminal's own notification (OSC 9 or 777) where it is known.
--- :help acp-prompt-notify

local state = require('acp.state')
local text = require('acp.text')

local M = {}
local H = {}

--- Whether Neovim has the terminal's focus (FocusLost / FocusGained, when
--- the terminal reports them).
H.focused = true
--- Prompts already seen (id -> true).
H.known = {}
--- Told already, until the person is back.
H.notified = false

--- The person is back where prompts are seen (FocusGained, or the prompt
--- window moved to the current tab page): the next unseen prompt is told.
function M.reset()
  H.notified = false
end

--- Prompt `id` is no longer pending.
---@param id integer
function M.forget(id)
  H.known[id] = nil
end

--- After a `pending` event: tells once about a new prompt when it waits
--- unseen — Neovim is not focused, or `off_tab()` (the prompt window is on
--- another tab page).
---@param off_tab fun(): boolean
function M.on_pending(off_tab)
  local new
  for i = #state.order, 1, -1 do
    local id = state.order[i]
    if H.known[id] then
      break
    end
    H.known[id] = true
    new = id -- the oldest of the new ones
  end
  local cfg = require('acp.config').get().notify or {}
  if new == nil or not cfg.unseen or H.notified or (H.focused and not off_tab()) then
    return
  end
  -- One notice while the person is away (until FocusGained or a prompt is
  -- shown on the current tab page).
  H.notified = true
  vim.schedule(function()
    local req = state.pending[new]
    if req == nil then
      return
    end
    local n = #state.order
    local msg = ('%s asks for permission: %s%s'):format(
      req.agent,
      text.truncate(text.one_line(state.title(req)), 80),
      n > 1 and (' (%d waiting)'):format(n) or ''
    )
    vim.notify('(acp) ' .. msg, vim.log.levels.WARN)
    M.osc(cfg.osc, 'acp', msg)
  end)
end

--- The terminal's own notification: OSC 9 (iTerm2, kitty, WezTerm,
--- ghostty, Windows Terminal) or OSC 777 (foot, VTE, urxvt); 'auto' picks
--- from $TERM_PROGRAM / $TERM / $VTE_VERSION, and sends nothing when no UI
--- is attached or the terminal is not known. Inside tmux the sequence is
--- wrapped for tmux to pass through (`set -g allow-passthrough on`).
---@param mode string|false
---@return string|nil the sequence written
function M.osc(mode, title, body)
  local kind = H.osc_kind(mode)
  if kind == nil then
    return nil
  end
  local clean = function(s)
    return (s:gsub('[%c;]', ' '))
  end
  local seq
  if kind == '9' then
    seq = '\027]9;' .. clean(title .. ': ' .. body) .. '\007'
  else
    seq = '\027]777;notify;' .. clean(title) .. ';' .. clean(body) .. '\007'
  end
  if (vim.env.TMUX or '') ~= '' then
    seq = '\027Ptmux;' .. seq:gsub('\027', '\027\027') .. '\027\\'
  end
  M.term_write(seq)
  return seq
end

function H.osc_kind(mode)
  if mode == '9' or mode == '777' then
    return mode
  elseif mode ~= 'auto' or #vim.api.nvim_list_uis() == 0 then
    return nil
  end
  local prog, term = vim.env.TERM_PROGRAM or '', vim.env.TERM or ''
  if prog:match('iTerm') or prog == 'WezTerm' or prog == 'ghostty' or term:match('kitty') or term:match('ghostty') or (vim.env.WT_SESSION or '') ~= '' then
    return '9'
  elseif term:match('^foot') or term:match('rxvt') or (vim.env.VTE_VERSION or '') ~= '' then
    return '777'
  end
  return nil
end

--- Writes an escape sequence to the terminal Neovim's UI runs in (its
--- stderr: the terminal for the TUI of 0.7 and of 0.9+). Tests replace it.
---@param seq string
function M.term_write(seq)
  if not pcall(vim.api.nvim_chan_send, vim.v.stderr, seq) then
    pcall(function()
      io.stderr:write(seq)
      io.stderr:flush()
    end)
  end
end

do
  local group = vim.api.nvim_create_augroup('AcpPromptNotify', { clear = true })
  vim.api.nvim_create_autocmd('FocusLost', {
    group = group,
    callback = function()
      H.focused = false
    end,
  })
  vim.api.nvim_create_autocmd('FocusGained', {
    group = group,
    callback = function()
      H.focused = true
      H.notified = false
    end,
  })
end

return M
