--- The permission prompt: a centred floating window (or `vim.ui.select`).
---
--- One prompt is shown at a time, the oldest pending first; the others wait
--- in the queue and the header shows the position ("Permission 1 of 3 ·
--- agent · +1 hidden"); `]`/`[` step through them. Keys are ignored for
--- `ui.arm_ms` after the window appears or takes focus, so keys typed before
--- it appeared can never answer it. `q`/`<Esc>` hide the prompt shown without
--- answering; `:AcpPending` brings it back. `d` opens its diff in a tab. The
--- window follows the current tab page; a prompt arriving unseen (Neovim not
--- focused) is notified once (`notify` in acp.config).
---
--- Rendering: every row is wrapped here, so the window's height is exact and
--- the layout (H.render_body) decides what fits: the command or diff stat
--- and the options always, the decorations while there is room.

-- This code runs once per prompt, not in loops: LuaJIT found it hot only
-- after some fifty prompts, then recorded and compiled traces (and aborted
-- many, on closures) in the middle of showing one, which made those
-- prompts the slowest (bench/README.md, the prompt). Interpreted, every
-- prompt costs the same. The functions defined in this file only.
if jit ~= nil then
  jit.off(true, true)
end

local compat = require('acp.compat')
local events = require('acp.events')
local format = require('acp.format')
-- Loaded with the prompt: acp.merge records the old text of each request
-- as what the agent saw (acp-unsaved).
local fs = require('acp.fs')
local layout = require('acp.prompt.layout')
local notify = require('acp.prompt.notify')
local state = require('acp.state')
local text = require('acp.text')

local M = {}
local H = {}

-- Module definition ==========================================================

--- The window on screen: {id, win, buf, prev_win, focused, armed_at,
--- option_rows = {row -> option index}}, or nil.
H.view = nil
--- Prompts the person hid (not shown again until :AcpPending or a new one).
H.hidden = {}
--- Prompts answered here, waiting for the broker's permission_resolved.
H.answered = {}
--- Token of the prompt in vim.ui.select, or nil.
H.selecting = nil

--- Brings the screen in line with the queue: closes a window whose prompt
--- is gone, updates the counter, shows the next prompt when none is shown.
function M.refresh()
  if H.suspended ~= nil then
    return -- the diff tab of `d` is open
  end
  local v = H.view
  if v ~= nil then
    if not H.valid(v) then
      H.view = nil
    elseif not H.wanted(v.id) then
      H.close(true)
    else
      H.draw(v)
      return
    end
  end
  if H.selecting ~= nil then
    return
  end
  local req = H.next_candidate()
  if req ~= nil then
    H.present(req, {})
  end
end

--- `:AcpPending`: reopen the oldest prompt (hidden ones included) and focus it.
---@return boolean shown
function M.open()
  H.hidden = {}
  if H.suspended ~= nil then
    H.resume()
    return true
  end
  if H.selecting ~= nil then
    return true
  end
  local req = H.next_candidate()
  if req == nil then
    return false
  end
  local v = H.view
  if v ~= nil and H.valid(v) and v.id == req.id then
    H.focus(v)
    return true
  end
  if v ~= nil then
    H.close(true)
  end
  H.present(req, { force_focus = true })
  return true
end

--- The person (or a script) answered `id`: close its window, show the next.
---@param id integer
function M.on_answered(id)
  H.answered[id] = true
  if H.view ~= nil and H.view.id == id then
    H.close(true)
  end
  vim.schedule(M.refresh)
end

--- The broker resolved `id` (answered, cancelled, agent gone).
---@param id integer
function M.on_resolved(id)
  H.answered[id] = nil
  H.hidden[id] = nil
  notify.forget(id)
  if H.view ~= nil and H.view.id == id then
    H.close(true)
  end
  M.refresh()
end

--- The broker reported an error; a refused answer leaves its prompt pending,
--- so forget what was answered here and show the queue again.
function M.on_error()
  if next(H.answered) == nil then
    return
  end
  H.answered = {}
  M.refresh()
end

--- Hides the prompt on screen (only that one: it stays pending); the next
--- prompt not hidden, if any, is shown.
function M.hide()
  local v = H.view
  if v == nil then
    return
  end
  H.hidden[v.id] = true
  H.close(true)
  local waiting = 0
  for _, req in ipairs(state.pending_list()) do
    if not H.answered[req.id] and not H.hidden[req.id] then
      waiting = waiting + 1
    end
  end
  H.echo(
    ('acp: prompt hidden, still pending (:AcpPending brings it back)%s'):format(
      waiting > 0 and ('; %d other%s waiting'):format(waiting, waiting == 1 and '' or 's') or ''
    ),
    'WarningMsg'
  )
  M.refresh()
end

--- Shows the next (`step` = 1) or previous (-1) pending prompt in the
--- window, hidden ones included (showing one unhides it).
---@param step integer
function M.step(step)
  local list = {}
  for _, req in ipairs(state.pending_list()) do
    if not H.answered[req.id] then
      list[#list + 1] = req
    end
  end
  local v = H.view
  if #list == 0 or v == nil then
    return
  end
  local at = 1
  for i, req in ipairs(list) do
    if req.id == v.id then
      at = i
    end
  end
  local target = list[(at - 1 + step) % #list + 1]
  if target.id == v.id then
    H.echo('acp: no other pending prompt', 'WarningMsg')
    return
  end
  H.hidden[target.id] = nil
  local focused = v.focused
  H.close(false)
  H.present(target, { force_focus = focused, keep_prev = v.prev_win })
end

--- Whether an answer to `id` was sent and the broker has not confirmed it.
---@param id integer
---@return boolean
function M.awaiting(id)
  return H.answered[id] == true
end

--- Info about the window on screen (tests, statuslines): {id, win, buf,
--- focused} or nil.
function M.current()
  local v = H.view
  if v == nil or not H.valid(v) then
    return nil
  end
  return { id = v.id, win = v.win, buf = v.buf, focused = v.focused }
end

--- The lines the prompt shows for pending prompt `req` (for tests).
---@param req table internal pending record (acp.state)
---@param opts {width: integer|nil}|nil the window's width (default: as shown)
---@return string[]
function M.lines(req, opts)
  local width = opts and opts.width or H.width()
  return H.render(req, { focused = true, width = width, max_height = math.huge }).lines
end

-- Helper data ================================================================

H.ns = vim.api.nvim_create_namespace('acp-prompt')

H.kind_order = { 'allow_once', 'allow_always', 'reject_once', 'reject_always' }

--- The broker's extras (design §5): each answers the first allow_once
--- option and records something (`respond(id, optionId, {remember = ...,
--- broad = ...})`): the request's exact rules, or (`broad`) the broader
--- alternative the broker suggested. The words are acp's own, unlike any
--- agent's ("Allow for this session" is an agent's option, which means
--- what that agent decides). In display order.
H.extra_kinds = {
  { id = 'session', remember = 'session', key = 'remember_session', desc = 'allow like this for the rest of this conversation' },
  { id = 'project', remember = 'project', key = 'remember_project', desc = 'allow like this in this project' },
  {
    id = 'session_broad',
    remember = 'session',
    broad = true,
    key = 'remember_session_broad',
    desc = 'allow the broader rule for the rest of this conversation',
  },
  { id = 'project_broad', remember = 'project', broad = true, key = 'remember_project_broad', desc = 'allow the broader rule in this project' },
  { id = 'agent', remember = 'agent', key = 'trust_agent', desc = 'trust this agent' },
}
H.extra_by_id = {}
for _, e in ipairs(H.extra_kinds) do
  H.extra_by_id[e.id] = e
end

-- Helper functionality =======================================================

function H.ui()
  return require('acp.config').get().ui
end

function H.wanted(id)
  return state.pending[id] ~= nil and not H.answered[id]
end

function H.next_candidate()
  for _, req in ipairs(state.pending_list()) do
    if not H.hidden[req.id] and not H.answered[req.id] then
      return req
    end
  end
  return nil
end

function H.valid(v)
  return vim.api.nvim_win_is_valid(v.win) and vim.api.nvim_buf_is_valid(v.buf)
end

function H.echo(msg, hl, history)
  vim.api.nvim_echo({ { msg, hl or 'None' } }, history == true, {})
end

--- Normal mode, nothing pending: safe to move focus without stealing keys.
function H.normal_mode()
  local m = vim.api.nvim_get_mode()
  return not m.blocking and (m.mode == 'n' or m.mode == 'nt')
end

function H.present(req, opts)
  require('acp.highlight').setup()
  if H.ui().backend == 'select' then
    return H.select(req, opts)
  end
  local ok, err = pcall(H.open_float, req, opts)
  if not ok then
    if H.view ~= nil and H.view.id == req.id then
      H.close(false)
    end
    vim.notify(('(acp) could not open the prompt window (%s); using vim.ui.select'):format(tostring(err)), vim.log.levels.WARN)
    H.select(req, opts)
  end
end

-- The float ------------------------------------------------------------------

function H.open_float(req, opts)
  local ui = H.ui()
  local focus = opts.force_focus or (ui.focus and H.normal_mode())
  local buf = H.scratch()

  local v = {
    id = req.id,
    buf = buf,
    prev_win = opts.keep_prev or vim.api.nvim_get_current_win(),
    focused = focus,
    armed_at = compat.now_ms() + ui.arm_ms,
  }
  local cfg = H.fill(v, req)
  cfg.style = 'minimal'
  cfg.zindex = 50
  local ok, win = H.quietly(vim.api.nvim_open_win, buf, focus, cfg)
  if not ok and focus then
    -- E.g. the command-line window cannot be left: show it unfocused.
    v.focused, focus = false, false
    H.fill(v, req)
    ok, win = H.quietly(vim.api.nvim_open_win, buf, false, cfg)
  end
  if not ok then
    error(win, 0)
  end
  v.win, v.cfg = win, cfg
  v.tab = vim.api.nvim_get_current_tabpage()
  H.view = v
  H.set_win_options(win)
  H.place_cursor(v, 1)
  H.set_keymaps(buf, req)
  if not focus and ui.focus then
    H.focus_later()
  end
end

--- Calls fn(...) with autocommands off ('eventignore' "all"), as pcall
--- does. Opening, entering, leaving and closing the prompt's float runs
--- none of the editor's window and buffer autocommands (WinNew, WinEnter,
--- BufEnter, BufWinEnter, WinLeave, WinClosed...), as pickers do with their
--- floats: they are not meant for a prompt that comes and goes, and they
--- were a good part of its cost (the default matchparen plugin alone took
--- 0.15 ms at each enter and leave, of a prompt's 1 ms). The prompt's own bookkeeping needs none
--- of them; its BufWinLeave (below) is for the person's own `:q`.
function H.quietly(fn, ...)
  local ei = vim.o.eventignore
  vim.o.eventignore = 'all'
  local ok, r = pcall(fn, ...)
  vim.o.eventignore = ei
  return ok, r
end

--- The buffer every prompt is drawn in: one scratch buffer, made once
--- (creating a buffer and setting its 'filetype', which runs the FileType
--- autocommands and looks for ftplugin files along 'runtimepath', took
--- 0.7-2 ms of every prompt) and kept hidden between prompts, with its
--- keys. A new one is made when it was wiped, or when it is still shown in
--- a window (then the old one goes with that window).
function H.scratch()
  local buf = H.buf
  if buf ~= nil and vim.api.nvim_buf_is_valid(buf) then
    if #vim.fn.win_findbuf(buf) == 0 then
      return buf
    end
    compat.set_buf(buf, 'bufhidden', 'wipe')
  end
  buf = vim.api.nvim_create_buf(false, true)
  compat.set_buf(buf, 'bufhidden', 'hide')
  compat.set_buf(buf, 'swapfile', false)
  -- Every prompt replaces its text: no undo history to keep.
  compat.set_buf(buf, 'undolevels', -1)
  compat.set_buf(buf, 'filetype', 'acp-prompt')
  -- Its window closed some other way (:q, <C-w>c, its tab page closed).
  vim.api.nvim_create_autocmd('BufWinLeave', {
    [compat.buf_key] = buf,
    callback = function()
      H.on_wiped(buf)
    end,
  })
  H.buf, H.keys_set = buf, nil
  return buf
end

function H.set_win_options(win)
  local wo = {
    winhighlight = 'Normal:AcpPromptNormal,NormalFloat:AcpPromptNormal,FloatBorder:AcpPromptBorder',
    wrap = true,
    linebreak = true,
    breakindent = true,
    cursorline = true,
    number = false,
    relativenumber = false,
    signcolumn = 'no',
    foldenable = false,
    spell = false,
    list = false,
  }
  for k, val in pairs(wo) do
    compat.set_win(win, k, val)
  end
end

--- Redraws the window of `v` (counter, footer, size).
function H.draw(v)
  local req = state.pending[v.id]
  if req == nil then
    return
  end
  local cursor_opt = v.option_rows[vim.api.nvim_win_get_cursor(v.win)[1]] or 1
  local cfg = H.fill(v, req)
  local o = v.cfg
  if o == nil or o.width ~= cfg.width or o.height ~= cfg.height or o.row ~= cfg.row or o.col ~= cfg.col or o.border ~= cfg.border then
    pcall(vim.api.nvim_win_set_config, v.win, cfg)
    v.cfg = cfg
  end
  H.place_cursor(v, cursor_opt)
end

--- Whether two renderings are the same: lines, and highlights.
function H.same(a, b)
  if a == nil or #a.lines ~= #b.lines or #a.hls ~= #b.hls then
    return false
  end
  for i, l in ipairs(b.lines) do
    if a.lines[i] ~= l then
      return false
    end
  end
  local ah = a.hls
  for i, h in ipairs(b.hls) do
    if ah[i] ~= h then
      return false
    end
  end
  return true
end

--- Writes the body of `req` into v.buf; returns the window config that fits it.
function H.fill(v, req)
  local width = H.width()
  local max_height = H.max_height()
  local r = H.render(req, { focused = v.focused, width = width, max_height = max_height })
  local buf = v.buf
  -- A redraw that changes nothing (the `pending` event that follows the
  -- window opening, a prompt queued behind it) writes nothing.
  if not (H.same(v.drawn, r) and v.tick == vim.api.nvim_buf_get_changedtick(buf)) then
    compat.set_buf(buf, 'modifiable', true)
    vim.api.nvim_buf_set_lines(buf, 0, -1, false, r.lines)
    compat.set_buf(buf, 'modifiable', false)
    compat.set_buf(buf, 'modified', false)
    vim.api.nvim_buf_clear_namespace(buf, H.ns, 0, -1)
    local hls, mark = r.hls, H.mark_opts
    for i = 1, #hls, 4 do
      local row = hls[i]
      mark.end_row, mark.end_col, mark.hl_group = row, hls[i + 2], hls[i + 3]
      pcall(vim.api.nvim_buf_set_extmark, buf, H.ns, row, hls[i + 1], mark)
    end
    v.drawn, v.tick = r, vim.api.nvim_buf_get_changedtick(buf)
  end
  v.option_rows = r.option_rows
  local height = math.min(r.height, max_height)
  local border = H.ui().border ~= 'none' and 2 or 0
  return {
    relative = 'editor',
    width = width,
    height = height,
    row = math.max(0, math.floor((vim.o.lines - vim.o.cmdheight - height - border) / 2)),
    col = math.max(0, math.floor((vim.o.columns - width - border) / 2)),
    border = H.ui().border,
    focusable = true,
  }
end

--- The options of every highlight's extmark, one table filled for each
--- (Neovim reads it during the call): a table per highlight was a fifth of
--- a prompt's garbage.
H.mark_opts = { end_row = 0, end_col = 0, hl_group = '' }

--- Rows the window may take: nearly all of a small screen, 80% of a tall one.
function H.max_height()
  local border = H.ui().border ~= 'none' and 2 or 0
  local avail = vim.o.lines - vim.o.cmdheight - border
  if avail <= 16 then
    return math.max(3, avail) -- a tiny screen: all of it
  end
  return avail <= 30 and avail - 2 or math.floor(avail * 0.8)
end

function H.width()
  local cols = vim.o.columns
  local w = math.min(H.ui().width, math.floor(cols * 0.9))
  return math.max(math.min(20, cols - 2), w)
end

function H.place_cursor(v, index)
  local row
  for r, i in pairs(v.option_rows) do
    if i == index and (row == nil or r < row) then
      row = r
    end
  end
  if row == nil then
    return
  end
  -- Already there (a redraw): setting it makes Neovim work out the
  -- window's view again (~90,000 instructions with wrapped rows).
  local ok, cur = pcall(vim.api.nvim_win_get_cursor, v.win)
  if not (ok and cur[1] == row and cur[2] == 0) then
    pcall(vim.api.nvim_win_set_cursor, v.win, { row, 0 })
  end
end

function H.focus(v)
  if not H.valid(v) then
    return
  end
  local cur = vim.api.nvim_get_current_win()
  if cur ~= v.win then
    if not H.quietly(vim.api.nvim_set_current_win, v.win) then
      return
    end
    v.prev_win = cur
  end
  pcall(vim.api.nvim_del_augroup_by_name, 'AcpPromptFocus')
  v.armed_at = compat.now_ms() + H.ui().arm_ms
  if not v.focused then
    v.focused = true
    H.draw(v)
  end
end

--- Focus the (unfocused) prompt once Neovim is back in normal mode: never
--- move focus while the person types.
function H.focus_later()
  H.on_mode_change('AcpPromptFocus', function()
    local v = H.view
    if v == nil or not H.valid(v) or v.focused then
      pcall(vim.api.nvim_del_augroup_by_name, 'AcpPromptFocus')
      return
    end
    if H.normal_mode() then
      H.focus(v)
    end
  end)
end

--- Calls fn (scheduled) after every change of mode, until the augroup
--- `group` is deleted (ModeChanged; InsertLeave where it does not exist).
function H.on_mode_change(group, fn)
  local id = vim.api.nvim_create_augroup(group, { clear = true })
  local event = vim.fn.exists('##ModeChanged') == 1 and 'ModeChanged' or 'InsertLeave'
  vim.api.nvim_create_autocmd(event, {
    group = id,
    callback = function()
      vim.schedule(fn)
    end,
  })
end

--- Closes the window on screen; `restore` moves focus back to where it was.
function H.close(restore)
  local v = H.view
  H.view = nil
  H.memo = nil -- it holds the request
  pcall(vim.api.nvim_del_augroup_by_name, 'AcpPromptFocus')
  if v == nil then
    return
  end
  if vim.api.nvim_win_is_valid(v.win) then
    if restore and vim.api.nvim_get_current_win() == v.win and vim.api.nvim_win_is_valid(v.prev_win) then
      H.quietly(vim.api.nvim_set_current_win, v.prev_win)
    end
    H.quietly(vim.api.nvim_win_close, v.win, true)
  end
  -- The buffer stays for the next prompt (H.scratch); one that is not
  -- the shared one any more is wiped with its window ('bufhidden').
end

--- The window was closed some other way (:q, <C-w>c; BufWinLeave of the
--- prompt buffer, after H.close has forgotten the view): same as hiding;
--- but when its tab page was closed under it, it comes back where the
--- person is.
function H.on_wiped(buf)
  local v = H.view
  if v ~= nil and v.buf == buf then
    H.view = nil
    H.hidden[v.id] = true
    pcall(vim.api.nvim_del_augroup_by_name, 'AcpPromptFocus')
    vim.schedule(function()
      if v.tab ~= nil and not vim.api.nvim_tabpage_is_valid(v.tab) then
        H.hidden[v.id] = nil
      end
      M.refresh()
    end)
  end
end

-- Keys -----------------------------------------------------------------------

--- The keys of the prompt buffer. They are set once per buffer (and again
--- when `ui.keys` changes) and look at the request shown when pressed;
--- only the digits follow the request (one per option, up to 9), so a
--- prompt costs a few keymap calls instead of some twenty.
function H.set_keymaps(buf, req)
  local keys = H.ui().keys
  local sig = H.keys_signature(keys)
  local ks = H.keys_set
  if ks == nil or ks.buf ~= buf or ks.sig ~= sig then
    if ks ~= nil and ks.buf == buf then
      for _, lhs in ipairs(ks.lhs) do
        pcall(vim.api.nvim_buf_del_keymap, buf, 'n', lhs)
      end
    end
    ks = { buf = buf, sig = sig, lhs = {}, digits = 0 }
    H.keys_set = ks
    H.map_fixed(buf, keys, ks.lhs)
  end
  local n = math.min(9, #req.options)
  for i = ks.digits + 1, n do
    H.map(buf, tostring(i), function(view)
      H.choose(view, i)
    end, 'acp: choose option ' .. i)
  end
  for i = n + 1, ks.digits do
    pcall(vim.api.nvim_buf_del_keymap, buf, 'n', tostring(i))
  end
  ks.digits = n
end

function H.keys_signature(keys)
  local parts = {}
  for _, kind in ipairs(H.kind_order) do
    parts[#parts + 1] = keys[kind] or ''
  end
  for _, e in ipairs(H.extra_kinds) do
    parts[#parts + 1] = keys[e.key] or ''
  end
  parts[#parts + 1] = keys.hide or ''
  return table.concat(parts, '\0')
end

-- (nvim_buf_set_keymap: vim.keymap.set costs several times more.)
function H.map(buf, lhs, fn, desc)
  vim.api.nvim_buf_set_keymap(buf, 'n', lhs, '', {
    nowait = true,
    silent = true,
    noremap = true,
    desc = desc,
    callback = function()
      H.on_key(buf, fn)
    end,
  })
end

--- The keys that do not depend on the number of options; `lhs` collects
--- them (to unset them when `ui.keys` changes).
function H.map_fixed(buf, keys, lhs_set)
  local function map(lhs, fn, desc)
    H.map(buf, lhs, fn, desc)
    lhs_set[#lhs_set + 1] = lhs
  end
  for _, kind in ipairs(H.kind_order) do
    local lhs = keys[kind]
    if lhs ~= nil and lhs ~= '' then
      map(lhs, function(view, req)
        if req == nil then
          return
        end
        local index = H.first_of_kind(req, kind)
        if index ~= nil then
          H.choose(view, index)
        else
          -- Not offered: say so instead of letting the key do something else.
          H.echo(('acp: no %s option offered'):format((kind:gsub('_', '-'))), 'WarningMsg')
        end
      end, 'acp: ' .. kind)
    end
  end
  for _, e in ipairs(H.extra_kinds) do
    local lhs = keys[e.key]
    if lhs ~= nil and lhs ~= '' then
      map(lhs, function(view, req)
        if req == nil then
          return
        end
        if H.extra(req, e.id) ~= nil then
          H.choose(view, e.id)
          return
        end
        local msg = ('acp: "%s" is not offered for this request'):format(e.desc)
        if e.broad and H.extra(req, e.remember) ~= nil then
          local exact = H.ui().keys[H.extra_by_id[e.remember].key]
          msg = ('acp: no broader rule is suggested for this request; %s remembers the exact one'):format(exact ~= '' and exact or 'the line above')
        end
        H.echo(msg, 'WarningMsg')
      end, 'acp: ' .. e.desc)
    end
  end
  map('<CR>', function(view)
    local row = vim.api.nvim_win_get_cursor(view.win)[1]
    local index = view.option_rows[row]
    if index == nil then
      H.echo('acp: move to an option line, or press its number', 'WarningMsg')
      return
    elseif index == 'broad' then
      H.echo(('acp: press %s'):format(H.broad_keys(true)), 'WarningMsg')
      return
    end
    H.choose(view, index)
  end, 'acp: choose the option under the cursor')
  map(']', function()
    M.step(1)
  end, 'acp: show the next pending prompt')
  map('[', function()
    M.step(-1)
  end, 'acp: show the previous pending prompt')
  map('d', function(view)
    H.open_diff(view)
  end, 'acp: open the diff in a tab')
  local hide = function()
    M.hide()
  end
  if keys.hide ~= nil and keys.hide ~= '' then
    map(keys.hide, hide, 'acp: hide the prompt (stays pending)')
  end
  map('<Esc>', hide, 'acp: hide the prompt (stays pending)')
end

function H.on_key(buf, fn)
  local v = H.view
  if v == nil or v.buf ~= buf then
    return
  end
  if compat.now_ms() < v.armed_at then
    H.echo('acp: prompt just opened, key ignored', 'WarningMsg')
    return
  end
  fn(v, state.pending[v.id])
end

--- Answers with option `index`, or (a string) with the extra of that id
--- (H.extra_kinds: 'session', 'project', 'session_broad', ...).
function H.choose(v, index)
  local req = state.pending[v.id]
  if req == nil then
    return
  end
  if type(index) == 'string' then
    local e = H.extra(req, index)
    if e ~= nil and H.confirm_extra(req, e) then
      H.respond_extra(req, e)
    end
    return
  end
  local o = req.options[index]
  if o == nil then
    return
  end
  require('acp').respond(v.id, o.optionId)
end

--- Answers with extra `e` and says what acp records, and where (a failure
--- to write is the broker's error message), in one line short enough for
--- an 80-column screen with the usual rules (no hit-enter prompt).
function H.respond_extra(req, e)
  local ok = require('acp').respond(req.id, e.optionId, { remember = e.remember, broad = e.broad })
  if ok == false then
    return
  end
  local rules = table.concat((e.broad and req.broad or req.narrow) or {}, ', ')
  local msg
  if e.remember == 'project' then
    msg = ('acp: wrote the allow rule %s to %s'):format(rules, H.rule_file(req))
  elseif e.remember == 'session' then
    msg = ('acp: remembered %s for the rest of this conversation'):format(rules)
  end
  if msg ~= nil then
    if vim.fn.has('nvim-0.12') == 1 then
      -- After the float closes, Neovim 0.12 cuts the next message at the
      -- column where the float's ruler was (62 of 80) until the screen is
      -- redrawn whole.
      vim.cmd('redraw!')
    end
    H.echo(msg, nil, true)
  end
end

--- Trusting an agent lasts beyond this request, this session and this
--- project, so one key is not enough: the person confirms it (default No).
--- The other extras record only the exact command or path shown.
function H.confirm_extra(req, e)
  if e.remember ~= 'agent' then
    return true
  end
  local agent = compat.str(req.agent) or 'this agent'
  local msg = ("Trust %s from now on?\n\nIt will be allowed everything that no deny or ask rule, protected path "
    .. 'or the circuit breaker stops, in every project, until :AcpYolo off.'):format(agent)
  return vim.fn.confirm(msg, '&Trust\n&No', 2) == 1
end

--- The broker's extra `id` (H.extra_kinds) for `req`: {id, remember,
--- broad, optionId (the first allow_once), label}, or nil when it is not
--- offered (no allow_once option; for session/project, no narrow rule; for
--- their broad forms, no broader rule).
function H.extra(req, id)
  local kind = H.extra_by_id[id]
  if kind == nil then
    return nil
  end
  local _, o = state.picked_option(req, 'allow')
  if o == nil or compat.str(o.optionId) == nil then
    return nil
  end
  local rules = table.concat((kind.broad and req.broad or req.narrow) or {}, ', ')
  local how = kind.broad and ', with the broader rule: ' or ': '
  local label
  if kind.remember == 'session' then
    label = 'allow like this for the rest of this conversation' .. how .. rules
  elseif kind.remember == 'project' then
    label = 'allow like this in this project (.acp/settings.json)' .. how .. rules
  else
    if H.yolo(req) then
      return nil -- already in yolo: nothing to trust it with
    end
    label = 'trust this agent (yolo from now on)'
  end
  if kind.remember ~= 'agent' and rules == '' then
    return nil
  end
  return { id = id, remember = kind.remember, broad = kind.broad, optionId = o.optionId, label = label }
end

--- The project directory of the request's session (the broker's root for
--- it when known, else the session's directory).
function H.root(req)
  local s = state.sessions[req.session]
  local cwd = s and s.cwd or (state.agents[req.agent] or {}).cwd
  local st = state.settings_for(cwd)
  return st and st.root or cwd
end

--- The file `p` writes, for a person: relative to the project when it is
--- the current directory, else to ~.
function H.rule_file(req)
  local root = H.root(req)
  if root == nil or root == vim.fn.getcwd() then
    return '.acp/settings.json'
  end
  return text.home_path(root .. '/.acp/settings.json')
end

--- Whether the request's project (or its agent) is in yolo.
function H.yolo(req)
  local root = H.root(req)
  local st = root and state.settings_for(root)
  return st ~= nil and st.yolo == true
end

--- The extras offered for `req`, in display order, each with its key.
function H.extras(req)
  local list, keys = {}, H.ui().keys
  for _, e in ipairs(H.extra_kinds) do
    local x = H.extra(req, e.id)
    if x ~= nil then
      x.key = keys[e.key] ~= '' and keys[e.key] or nil
      list[#list + 1] = x
    end
  end
  return list
end

--- The option a kind's key answers: allow-once and reject-once keys answer
--- with the broker's own choice (the option :AcpAllow / :AcpDeny send: the
--- first allow_once; the first reject_once, else reject_always), the other
--- kinds with the first option of that kind.
function H.first_of_kind(req, kind)
  if kind == 'allow_once' then
    return (state.picked_option(req, 'allow'))
  elseif kind == 'reject_once' then
    return (state.picked_option(req, 'reject'))
  end
  return (state.first_option(req, kind))
end

-- The diff tab ---------------------------------------------------------------

--- `d`: each file of the request in a diff tab, what the person has (the
--- loaded buffer, else the disk) against what the agent proposes. The
--- prompt steps aside until every such tab is closed (`q` in it, or
--- :tabclose), then comes back.
function H.open_diff(v)
  local req = state.pending[v.id]
  local diffs = req and H.data(req).diffs or {}
  if #diffs == 0 then
    H.echo('acp: this request has no diff', 'WarningMsg')
    return
  end
  H.suspended = v.id
  H.diff_tabs = {}
  H.close(true)
  for _, d in ipairs(diffs) do
    local ok, tab = pcall(require('acp.prompt.difftab').open, d)
    if ok then
      H.diff_tabs[#H.diff_tabs + 1] = tab
    else
      H.echo('acp: could not open the diff: ' .. tostring(tab), 'ErrorMsg')
    end
  end
  if #H.diff_tabs == 0 then
    H.resume()
  end
end

--- After a diff tab closed: the prompt comes back when none is left.
function H.on_tab_closed()
  if H.suspended == nil then
    return
  end
  local left = {}
  for _, t in ipairs(H.diff_tabs or {}) do
    if vim.api.nvim_tabpage_is_valid(t) then
      left[#left + 1] = t
    end
  end
  H.diff_tabs = left
  if #left == 0 then
    H.resume()
  end
end

function H.resume()
  local id = H.suspended
  H.suspended, H.diff_tabs = nil, {}
  local req = id and state.pending[id]
  if req ~= nil and not H.answered[id] and (H.view == nil or not H.valid(H.view)) then
    H.hidden[id] = nil
    H.present(req, { force_focus = H.normal_mode() })
  else
    M.refresh()
  end
end

-- Following the tab page -----------------------------------------------------

--- Whether the prompt window is on another tab page than the current one.
function H.off_tab()
  local v = H.view
  return v ~= nil and H.valid(v) and vim.api.nvim_win_get_tabpage(v.win) ~= vim.api.nvim_get_current_tabpage()
end

--- The float belongs to one tab page: on entering another, it moves there.
function H.on_tab_enter()
  local v = H.view
  if v == nil or H.suspended ~= nil or not H.valid(v) then
    return
  end
  if vim.api.nvim_win_get_tabpage(v.win) == vim.api.nvim_get_current_tabpage() then
    return
  end
  local req = state.pending[v.id]
  H.close(false)
  notify.reset()
  if req ~= nil then
    H.present(req, {})
  end
end

do
  local group = vim.api.nvim_create_augroup('AcpPromptGlobal', { clear = true })
  vim.api.nvim_create_autocmd('TabEnter', {
    group = group,
    callback = function()
      vim.schedule(H.on_tab_enter)
    end,
  })
  vim.api.nvim_create_autocmd('TabClosed', {
    group = group,
    callback = function()
      vim.schedule(H.on_tab_closed)
    end,
  })
end

-- vim.ui.select --------------------------------------------------------------

function H.select(req, opts)
  if not opts.force_focus and not H.normal_mode() then
    -- vim.ui.select would take the keys being typed: wait for normal mode.
    H.on_mode_change('AcpPromptSelect', function()
      if H.normal_mode() then
        pcall(vim.api.nvim_del_augroup_by_name, 'AcpPromptSelect')
        M.refresh()
      end
    end)
    return
  end
  local pos, total = state.position(req.id)
  local tc = state.tool_call(req)
  local prompt = ('Permission %d of %d · %s: %s'):format(pos or 1, total, req.agent, state.title(req))
  local cmd = req.command
  if cmd ~= nil and cmd ~= state.title(req) then
    prompt = prompt .. ' — ' .. cmd:gsub('\n', ' ')
  end
  if req.reason or req.rule then
    prompt = prompt .. ' (why: ' .. format.why(req) .. ')'
  end
  -- The agent's options, then the broker's extras.
  local items = {}
  for _, o in ipairs(req.options) do
    items[#items + 1] = o
  end
  for _, e in ipairs(H.extras(req)) do
    items[#items + 1] = { extra = e }
  end
  H.selecting = req.id
  vim.ui.select(items, {
    prompt = prompt,
    kind = 'acp-permission',
    format_item = function(o)
      if o.extra then
        return 'acp: ' .. o.extra.label
      end
      return compat.str(o.name) or compat.str(o.optionId) or '?'
    end,
  }, function(choice)
    H.selecting = nil
    if choice == nil then
      H.hidden[req.id] = true
      H.echo('acp: prompt left pending: :AcpPending reopens it', 'WarningMsg')
    elseif state.pending[req.id] ~= nil and choice.extra then
      if H.confirm_extra(req, choice.extra) then
        H.respond_extra(req, choice.extra)
      else
        H.hidden[req.id] = true
      end
    elseif state.pending[req.id] ~= nil then
      require('acp').respond(req.id, choice.optionId)
    end
    vim.schedule(M.refresh)
  end)
end

-- Rendering ------------------------------------------------------------------
--
-- Every line is wrapped here, at spaces (a token longer than the line is
-- cut), so that one buffer line is one screen row: the height is exact and
-- the layout can decide what fits.

H.wrap = layout.wrap
H.block = layout.block
H.append = layout.append
H.append_rows = layout.append_rows

--- Body of the prompt, `o.width` cells wide, with one column of padding on
--- the left. Made again only when what it is made of changed (H.memo).
function H.render(req, o)
  local key = H.render_key(req, o)
  local m = H.memo
  if m ~= nil and H.same_key(m.key, key) then
    return m.r
  end
  local r = H.render_body(req, { focused = o.focused, width = o.width - 1, max_height = o.max_height })
  for i, l in ipairs(r.lines) do
    r.lines[i] = ' ' .. l
  end
  local hls = r.hls
  for i = 1, #hls, 4 do
    hls[i + 1], hls[i + 2] = hls[i + 1] + 1, hls[i + 2] + 1
  end
  local c = H.cache[req]
  H.memo = (c ~= nil and #c.diffs == 0) and { key = key, r = r } or nil
  return r
end

--- The last rendering and what it was made from. Each prompt used to be
--- laid out two or three times in the tick that showed it (the window
--- opened by one event's effect, then the `pending` and `resolved` effects
--- of the same batch redraw it): ~0.13 ms and ~22 KB of Lua garbage each,
--- which made the garbage collector run in the next prompt's layout. A
--- rendering is reused while the broker sent no event (events.seq: the
--- queue, the settings, the tool call's updates all come as events) and
--- the window's own inputs are the same. A request with diffs is always
--- laid out again (they depend on files and buffers). The result is not
--- changed by its users.
---@type {key: any[], r: table}|nil
H.memo = nil

function H.render_key(req, o)
  -- The footer of an unfocused prompt depends on the mode; the rule file's
  -- name on the current directory.
  local mode = o.focused or vim.api.nvim_get_mode().mode:sub(1, 1)
  return { req, events.seq, o.focused, o.width, o.max_height, H.hidden_count(req.id), H.ui(), mode, vim.fn.getcwd() }
end

function H.same_key(a, b)
  for i = 1, 9 do
    if a[i] ~= b[i] then
      return false
    end
  end
  return true
end

--- What a request shows, computed once per request (a diff reads the file
--- and runs the diff): the records are kept with the request.
H.cache = setmetatable({}, { __mode = 'k' })

--- What the diffs were computed against: the buffer's changedtick, else
--- the file's mtime and size (a diff is redone when it changes).
function H.signature(req)
  local tc = state.tool_call(req)
  local parts = {}
  local uv = vim.uv or vim.loop
  for _, item in ipairs(type(tc.content) == 'table' and tc.content or {}) do
    local path = type(item) == 'table' and item.type == 'diff' and compat.str(item.path)
    if path and path:sub(1, 1) == '/' then
      local buf = fs.find(uv.fs_realpath(path) or path)
      if buf ~= nil then
        parts[#parts + 1] = 'b' .. buf .. ':' .. vim.api.nvim_buf_get_changedtick(buf)
      else
        local st = uv.fs_stat(path)
        parts[#parts + 1] = st and ('d%d.%d:%d'):format(st.mtime.sec, st.mtime.nsec or 0, st.size) or '-'
      end
    end
  end
  return table.concat(parts, ',')
end

function H.data(req)
  local c = H.cache[req]
  local sig = c and #c.diffs > 0 and H.signature(req)
  if c ~= nil and sig and sig ~= c.sig then
    c = nil
  end
  if c == nil then
    c = { diffs = {} }
    local tc = state.tool_call(req)
    local input = type(tc.rawInput) == 'table' and tc.rawInput or {}
    for _, item in ipairs(type(tc.content) == 'table' and tc.content or {}) do
      if type(item) == 'table' and item.type == 'diff' then
        local ok, have = pcall(H.have, item, input)
        local d = format.diff(item, ok and have or nil)
        d.item, d.have = item, ok and have or nil
        d.added, d.removed = 0, 0
        for _, l in ipairs(d.lines or {}) do
          local ch = l:sub(1, 1)
          if ch == '+' then
            d.added = d.added + 1
          elseif ch == '-' then
            d.removed = d.removed + 1
          end
        end
        c.diffs[#c.diffs + 1] = d
        c.diffs[item] = d
      end
    end
    c.sig = #c.diffs > 0 and H.signature(req) or nil
    H.cache[req] = c
  end
  return c
end

--- The layout: with room, everything in reading order, the details above
--- the options. Without, the header and the title, the command (or, for an
--- edit, its diff stat and first lines), then the options and the keys;
--- the decorations (Why:, Judged:, Kind:, the notes about the extras) are
--- added while they fit, and the details follow below the options (scroll
--- down, or `d` for a diff tab).
---
--- Everything is first written into one block, in reading order, and the
--- row where each part starts is kept (p_*): that block is the layout when
--- it fits, and the layout that does not fit is made of its row ranges.
function H.render_body(req, o)
  local w = math.max(10, o.width)
  local tc = state.tool_call(req)
  local data = H.data(req)
  data.extras = H.extras(req)

  local full = H.block(w, 24)
  full:line(H.header(req), 'AcpPromptHeader')
  full:text(H.title_of(req, tc), 'AcpPromptTitle')
  local p_why = #full.lines
  if req.reason or req.rule then
    full:text(format.why(req), nil, 'Why: ', '     ')
  end
  local p_judged = #full.lines
  local j = H.judged(req)
  if j ~= nil then
    full:text(j, 'AcpPromptLabel', 'Judged: ', '  ')
  end
  local p_kind = #full.lines
  full:add({ { 'Kind: ', 'AcpPromptLabel' }, { H.kind_of(req, tc), nil } })
  local p_command = #full.lines
  H.command(full, req, tc)
  local p_details = #full.lines
  H.details(full, req, tc, data)
  local p_blank = #full.lines
  full:line('')
  local p_choices = #full.lines
  local p_xhead, p_extras, p_broad, p_trust = H.options(full, req, data.extras)
  local p_absent = #full.lines
  H.absent(full, req)
  local p_keys1 = #full.lines + 1
  full:line('')
  local p_keys2 = H.footer(full, req, o.focused, data)
  local p_end = #full.lines
  if p_end <= o.max_height then
    full.height = p_end
    return full
  end

  -- What must be seen: the header, the title, the command or the diff
  -- stat, the options, the keys.
  local stat, diff_preview = H.diff_stat(w, data)
  local n_choices, n_extras, n_trust = p_xhead - p_choices, p_broad - p_extras, p_absent - p_trust
  local n_keys1, n_broad = p_keys2 - p_keys1, p_trust - p_broad
  local budget = o.max_height
  local title_max = math.max(1, p_why)
  local fixed = n_choices + n_extras + n_trust + n_keys1 + (stat and #stat.lines or 0)
  if fixed + title_max + 1 > budget then
    title_max = 2 -- the header and one row of the title
  end
  local room = budget - fixed - title_max
  -- The command: all of it when it fits, else its first rows.
  local cmd_rows = p_details - p_command
  local cmd_max = math.min(cmd_rows, math.max(1, room))
  room = room - cmd_max
  local preview_n = diff_preview and #diff_preview.lines or 0
  local preview = math.min(preview_n, math.max(0, math.min(3, room)))
  room = room - preview
  -- The decorations, by importance, while they fit.
  local take = {}
  local sizes = {
    blank = 1,
    more = cmd_max < cmd_rows and 1 or 0,
    extras_head = p_extras - p_xhead,
    why = p_judged - p_why,
    keys2 = p_end - p_keys2,
    absent = p_keys1 - 1 - p_absent,
    judged = p_kind - p_judged,
    kind = 1,
    broad = n_broad,
  }
  -- The broad line is the first to go: its keys work without it, and it
  -- then heads the details below.
  for _, name in ipairs({ 'blank', 'more', 'why', 'absent', 'extras_head', 'keys2', 'judged', 'kind', 'broad' }) do
    local n = sizes[name]
    if n > 0 and n <= room then
      take[name] = true
      room = room - n
    end
  end
  -- Too long for the room left: one short line says where it is.
  local broad_note = H.block(w)
  if n_broad > 0 and not take.broad then
    broad_note:line(H.broad_prefix(data.extras) .. 'see the details below', 'AcpPromptExtra', '    ')
    broad_note:mark(0, 'broad')
    if #broad_note.lines <= room then
      room = room - #broad_note.lines
    else
      broad_note = H.block(w)
    end
  end
  -- More of the diffs, in what is left (at most 12 lines).
  preview = math.min(preview_n, math.max(preview, math.min(12, preview + room)))

  local split = H.block(w)
  local function rows(first, last)
    H.append_rows(split, full, first, last)
  end
  rows(0, math.min(p_why, title_max))
  if take.why then
    rows(p_why, p_judged)
  end
  if take.judged then
    rows(p_judged, p_kind)
  end
  if take.kind then
    rows(p_kind, p_command)
  end
  rows(p_command, p_command + cmd_max)
  if cmd_max < cmd_rows then
    -- The last row shown says it goes on.
    local last = split.lines[#split.lines]
    split.lines[#split.lines] = (#last + 2 > w and last:sub(1, w - 2) or last) .. ' …'
    if take.more then
      local n = cmd_rows - cmd_max
      split:line(('(%d more row%s of the command below the options)'):format(n, n == 1 and '' or 's'), 'AcpPromptFooter', '  ')
    end
  end
  if stat then
    H.append(split, stat)
  end
  if preview > 0 then
    H.append(split, diff_preview, preview)
  end
  if take.blank then
    split:line('')
  end
  rows(p_choices, p_xhead)
  if take.extras_head then
    rows(p_xhead, p_extras)
  end
  rows(p_extras, p_broad)
  if take.broad then
    rows(p_broad, p_trust)
  end
  H.append(split, broad_note)
  rows(p_trust, p_absent)
  if take.absent then
    rows(p_absent, p_keys1 - 1)
  end
  rows(p_keys1, p_keys2)
  if take.keys2 then
    rows(p_keys2, p_end)
  end
  local broad_below = n_broad > 0 and not take.broad
  local rest = p_blank > p_details or cmd_max < cmd_rows or broad_below
  if rest then
    local first = broad_below and (' (%s rule first)'):format(H.broad_keys()) or ''
    split:line(('── details: scroll down%s%s ──'):format(first, #data.diffs > 0 and ', or d for a diff tab' or ''), 'AcpPromptFooter')
    if broad_below then
      rows(p_broad, p_trust)
    end
    if cmd_max < cmd_rows then
      rows(p_command, p_details)
    end
    rows(p_details, p_blank)
  end
  split.height = #split.lines
  return split
end

--- state.title and state.kind of `req` with its merged tool call `tc`
--- (state.tool_call copies the tool call each time: the layout asks once).
function H.title_of(req, tc)
  return compat.str(req.title) or compat.str(tc.title) or H.kind_of(req, tc)
end

function H.kind_of(req, tc)
  return compat.str(req.kind) or compat.str(tc.kind) or 'other'
end

--- "Permission 1 of 3 · demo · +1 hidden".
function H.header(req)
  local pos, total = state.position(req.id)
  local s = ('Permission %d of %d · %s'):format(pos or 1, math.max(total, 1), req.agent)
  local hidden = H.hidden_count(req.id)
  if hidden > 0 then
    s = s .. (' · +%d hidden'):format(hidden)
  end
  return s
end

--- Prompts hidden with `q`, still pending, other than `except`.
function H.hidden_count(except)
  local n = 0
  for id in pairs(H.hidden) do
    if id ~= except and state.pending[id] ~= nil and not H.answered[id] then
      n = n + 1
    end
  end
  return n
end

--- The part of the details that is never left out, for a command: the
--- command and its directory, written into block `b`. For an edit it is
--- the diff stat (H.diff_stat).
function H.command(b, req, tc)
  local kind = H.kind_of(req, tc)
  if kind == 'execute' or req.command ~= nil then
    b:text(req.command or H.title_of(req, tc), 'AcpPromptCommand', '$ ', '  ')
    local input = tc.rawInput
    if type(input) == 'table' and type(input.cwd) == 'string' then
      b:add({ { 'in ', 'AcpPromptLabel' }, { input.cwd, nil } }, '   ')
    end
  end
end

--- For an edit, what is never left out: a stat line per file (`stat`)
--- and the first lines of its diff (`preview`); nil without diffs.
function H.diff_stat(w, data)
  local diffs = data.diffs
  if #diffs == 0 then
    return nil, nil
  end
  local stat, preview = H.block(w), H.block(w)
  for _, d in ipairs(diffs) do
    if d.notice then
      stat:line('! ' .. d.notice, 'AcpPromptWarning', '  ')
    end
    local path = H.path(compat.str(d.item.path) or '?')
    local n = d.lines and #d.lines or 0
    stat:add({
      { path, 'AcpPromptLabel' },
      { (': +%d -%d%s (%d line%s of diff)'):format(d.added, d.removed, d.item.oldText == nil and ', new file' or '', n, n == 1 and '' or 's'), nil },
    }, '  ')
    for _, l in ipairs(d.lines or {}) do
      H.diff_line(preview, l)
    end
  end
  return stat, preview
end

function H.diff_line(b, l)
  local c = l:sub(1, 1)
  local group = (c == '+' and 'AcpPromptDiffAdd') or (c == '-' and 'AcpPromptDiffDelete') or (l:sub(1, 2) == '@@' and 'AcpPromptDiffHunk') or nil
  b:line(l, group)
end

--- Everything else the request carries: the diffs whole, text the agent
--- attached, locations, the raw input when nothing else describes it;
--- written into block `b`.
function H.details(b, req, tc, data)
  local kind = H.kind_of(req, tc)
  local input = type(tc.rawInput) == 'table' and tc.rawInput or {}
  local shown = kind == 'execute' or req.command ~= nil
  for _, item in ipairs(type(tc.content) == 'table' and tc.content or {}) do
    if type(item) == 'table' then
      shown = H.content_item(b, item, data) or shown
    end
  end
  for _, loc in ipairs(type(tc.locations) == 'table' and tc.locations or {}) do
    if type(loc) == 'table' and compat.str(loc.path) then
      local where = H.path(loc.path)
      if type(loc.line) == 'number' then
        where = where .. ':' .. loc.line
      end
      b:add({ { 'Location: ', 'AcpPromptLabel' }, { where, nil } }, '  ')
      shown = true
    end
  end
  if not shown and next(input) ~= nil then
    local ok, json = pcall(vim.fn.json_encode, input)
    if ok then
      if #json > 400 then
        json = json:sub(1, 400) .. '…'
      end
      b:text(json, nil, 'Input: ', '  ')
    end
  end
end

--- What the broker's policy judged, one line ("git status · edit src/a.c;
--- also checked: rm -rf build"), or nil when it is just the command shown.
---@param req acp.Pending
---@return string|nil
function H.judged(req)
  local main, inner = {}, {}
  for _, a in ipairs(req.atoms or {}) do
    local list = a.inner and inner or main
    list[#list + 1] = a.text
  end
  if #inner == 0 and (#main == 0 or (#main == 1 and main[1] == req.command)) then
    return nil
  end
  local line = table.concat(main, ' · ')
  if #inner > 0 then
    line = line .. (line ~= '' and '; ' or '') .. 'also checked: ' .. table.concat(inner, ' · ')
  end
  return line
end

--- Renders one ToolCallContent item; returns true when it showed something.
function H.content_item(b, item, data)
  if item.type == 'diff' then
    local d = data.diffs[item]
    if d.notice then
      b:line('! ' .. d.notice, 'AcpPromptWarning', '  ')
    end
    b:line(d.from, 'AcpPromptLabel')
    b:line(d.to, 'AcpPromptLabel')
    if d.note then
      b:line(d.note, 'AcpPromptFooter')
    else
      for _, l in ipairs(d.lines) do
        H.diff_line(b, l)
      end
    end
    return true
  elseif item.type == 'content' then
    local c = item.content
    if type(c) == 'table' and c.type == 'text' and type(c.text) == 'string' then
      b:text(c.text, nil)
    elseif type(c) == 'table' then
      b:line(('[%s]'):format(compat.str(c.type) or 'content'), 'AcpPromptFooter')
    end
    return true
  elseif item.type == 'terminal' then
    b:line(('[terminal %s]'):format(compat.str(item.terminalId) or ''), 'AcpPromptFooter')
    return true
  end
  b:line(('[%s]'):format(compat.str(item.type) or 'unknown content'), 'AcpPromptFooter')
  return true
end

H.path = text.short_path

--- What the person has of the file of a diff item (the loaded buffer,
--- unsaved changes included, else the disk), for format.diff; nil when the
--- file is neither loaded nor readable, or too large to show.
function H.have(item, input)
  local path = compat.str(item.path)
  if path == nil or path:sub(1, 1) ~= '/' then
    return nil
  end
  local uv = vim.uv or vim.loop
  local resolved = uv.fs_realpath(path) or path
  local cur, from, modified = fs.current(resolved, H.diff_max)
  if cur == nil then
    return nil
  end
  local seen = require('acp.merge').seen(resolved)
  return { text = cur, from = from, modified = modified, snippet = input.old_string ~= nil, seen = seen }
end

--- Largest text a prompt diffs against (as the broker's CLIENT_DIFF_MAX).
H.diff_max = 1024 * 1024

--- The agent's options, then acp's own answers, written into block `b`:
--- returns the rows where the parts after the options start (the heading
--- of acp's answers, those answers, the broad line, the trust line).
function H.options(b, req, extras)
  local keys = H.ui().keys
  local key_of = {}
  for _, kind in ipairs(H.kind_order) do
    local i = H.first_of_kind(req, kind)
    if i ~= nil and keys[kind] ~= nil and keys[kind] ~= '' then
      key_of[i] = keys[kind]
    end
  end
  if #req.options == 0 then
    b:line('The agent offered no options: :AcpDeny answers "cancelled".', 'AcpPromptFooter')
  end
  for i, o in ipairs(req.options) do
    local kind = compat.str(o.kind) or ''
    local group = (kind:match('^allow') and 'AcpPromptAllow') or (kind:match('^reject') and 'AcpPromptReject') or 'AcpPromptOption'
    local label = ('[%s] %s'):format(i <= 9 and tostring(i) or ' ', compat.str(o.name) or compat.str(o.optionId) or '?')
    local from = #b.lines
    if key_of[i] then
      b:add({ { label, group }, { '  ' }, { '(' .. key_of[i] .. ')', 'AcpPromptKey' } }, '    ')
    else
      b:line(label, group, '    ')
    end
    b:mark(from, i)
  end
  local p_head = #b.lines
  if #extras == 0 then
    return p_head, p_head, p_head, p_head
  end
  b:line("acp's own answers (each allows once, then remembers):", 'AcpPromptLabel', '  ')
  local p_extras = #b.lines
  H.extra_lines(b, extras, false)
  local p_broad = #b.lines
  H.broad_line(b, req, extras)
  local p_trust = #b.lines
  H.extra_lines(b, extras, true)
  return p_head, p_extras, p_broad, p_trust
end

--- The lines of the extras that are not broad: those that trust the agent
--- (`agent`) or the others.
function H.extra_lines(b, extras, agent)
  for _, e in ipairs(extras) do
    if not e.broad and (e.remember == 'agent') == agent then
      local from = #b.lines
      b:line('[' .. (e.key or ' ') .. '] ' .. e.label, 'AcpPromptExtra', '    ')
      b:mark(from, e.id)
    end
  end
end

--- The broad forms of s and p on one line, under them: "[S]/[P] like s/p,
--- broader: Bash(git status *)"; nothing when the broker suggested no
--- broader rule, or their keys are unset.
function H.broad_line(b, req, extras)
  local prefix = H.broad_prefix(extras)
  if prefix ~= nil then
    local from = #b.lines
    b:line(prefix .. table.concat(req.broad, ', '), 'AcpPromptExtra', '    ')
    b:mark(from, 'broad')
  end
end

--- "[S]/[P] like s/p, broader: " (the keys as set), or nil when no broad
--- extra is offered with a key.
function H.broad_prefix(extras)
  local keys, exact = {}, {}
  for _, e in ipairs(extras) do
    if e.broad and e.key then
      keys[#keys + 1] = '[' .. e.key .. ']'
      local n = H.ui().keys[H.extra_by_id[e.remember].key]
      exact[#exact + 1] = (n ~= nil and n ~= '') and n or nil
    end
  end
  if #keys == 0 then
    return nil
  end
  local like = #exact == #keys and ('like ' .. table.concat(exact, '/') .. ', ') or ''
  return table.concat(keys, '/') .. ' ' .. like .. 'broader: '
end

--- The broad keys as set: "S/P", or (`long`, for the message of <CR> on
--- their line) "S (conversation) or P (project)".
function H.broad_keys(long)
  local keys, parts = H.ui().keys, {}
  for _, id in ipairs({ 'session_broad', 'project_broad' }) do
    local k = keys[H.extra_by_id[id].key]
    if k ~= nil and k ~= '' then
      parts[#parts + 1] = long and ('%s (%s)'):format(k, id == 'session_broad' and 'conversation' or 'project') or k
    end
  end
  return table.concat(parts, long and ' or ' or '/')
end

--- One short line saying why `s` and `p` are not offered (empty when they
--- are, or when nothing is to be said), written into block `b`.
function H.absent(b, req)
  local why = H.absent_reason(req)
  if why ~= nil then
    b:line(why, 'AcpPromptFooter', '  ')
  end
end

function H.absent_reason(req)
  local _, o = state.picked_option(req, 'allow')
  if o == nil or compat.str(o.optionId) == nil then
    return "No s/p/t: acp's answers need an allow-once option, and the agent offered none."
  end
  if #(req.narrow or {}) == 0 then
    return 'No s/p: no exact rule describes this request, so acp cannot remember it.'
  end
  return nil
end

--- The key reminder, written into block `b`: the first line is always
--- shown, the second when it fits. Returns the row where the second starts.
function H.footer(b, req, focused, data)
  if not focused then
    if not H.ui().focus then
      b:line('Answer with :AcpPending (or :AcpAllow / :AcpDeny).', 'AcpPromptFooter', '  ')
    elseif vim.api.nvim_get_mode().mode:match('^[iR]') then
      b:line('Finish typing: the prompt takes focus when you leave insert mode.', 'AcpPromptFooter', '  ')
    else
      b:line('The prompt takes focus when you are back in normal mode.', 'AcpPromptFooter', '  ')
    end
    return #b.lines
  end
  local keys = H.ui().keys
  local letters = {}
  for _, kind in ipairs(H.kind_order) do
    if H.first_of_kind(req, kind) and keys[kind] ~= nil and keys[kind] ~= '' then
      letters[#letters + 1] = keys[kind]
    end
  end
  for _, e in ipairs(data.extras) do
    if e.key then
      letters[#letters + 1] = e.key
    end
  end
  local n = math.min(9, #req.options)
  local choose = n > 0 and (n == 1 and '1' or ('1-' .. n)) or ''
  if #letters > 0 then
    choose = choose .. (choose ~= '' and ' ' or '') .. table.concat(letters, ' ')
  end
  local hide = (keys.hide ~= nil and keys.hide ~= '') and keys.hide or '<Esc>'
  local parts = { choose ~= '' and (choose .. ': answer') or nil, hide .. ': hide' }
  if #data.diffs > 0 then
    parts[#parts + 1] = 'd: diff'
  end
  if #state.order > 1 then
    parts[#parts + 1] = ']/[: next/previous'
  end
  b:line(table.concat(parts, ' · '), 'AcpPromptFooter', '  ')
  local p_keys2 = #b.lines
  b:line('<CR>: the option under the cursor · :AcpPending shows hidden ones', 'AcpPromptFooter', '  ')
  return p_keys2
end

state.on('pending', M.refresh)
state.on('pending', function()
  notify.on_pending(H.off_tab)
end)
state.on('answered', M.on_answered)
state.on('resolved', M.on_resolved)
state.on('error', M.on_error)

return M
