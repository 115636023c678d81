--- The permission prompt: a centred floating window (or `vim.ui.select`).
---
--- One prompt is shown at a time, the oldest pending first; the others wait
--- in the queue and the header shows the position ("Permission 1/3").
--- Keys are ignored for `ui.arm_ms` after the window appears or takes focus,
--- so keys typed before it appeared can never answer it. `q`/`<Esc>` hide the
--- prompt without answering; `:AcpPending` brings it back.

local compat = require('acp.compat')
local format = require('acp.format')
-- Loaded with the prompt: acp.merge records the old text of each request
-- as what the agent saw (acp-unsaved).
local fs = require('acp.fs')
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

--- Hides the prompt window; every prompt pending now stays pending.
function M.hide()
  local n = 0
  for _, req in ipairs(state.pending_list()) do
    if not H.answered[req.id] then
      H.hidden[req.id] = true
      n = n + 1
    end
  end
  H.close(true)
  if n > 0 then
    H.echo(
      ('acp: %d permission prompt%s hidden, still pending: :AcpPending reopens'):format(n, n == 1 and '' or 's'),
      'WarningMsg'
    )
  end
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
---@return string[]
function M.lines(req)
  local width = H.width()
  return H.render(req, { focused = true, width = width, max_height = math.huge }).lines
end

-- Helper data ================================================================

H.ns = vim.api.nvim_create_namespace('acp-prompt')

H.kind_order = { 'allow_once', 'allow_always', 'reject_once', 'reject_always' }

--- The broker's extras (design §5): each answers the first allow_once
--- option and records something (`respond(id, optionId, {remember = ...})`).
H.extra_kinds = {
  { remember = 'session', key = 'remember_session', desc = 'allow for this session' },
  { remember = 'project', key = 'remember_project', desc = "add to the project's rules" },
  { remember = 'agent', key = 'trust_agent', desc = 'trust this agent' },
}

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

function H.echo(msg, hl)
  vim.api.nvim_echo({ { msg, hl or 'None' } }, false, {})
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
  local buf = vim.api.nvim_create_buf(false, true)
  compat.set_buf(buf, 'bufhidden', 'wipe')
  compat.set_buf(buf, 'swapfile', false)
  compat.set_buf(buf, 'filetype', 'acp-prompt')

  local v = {
    id = req.id,
    buf = buf,
    prev_win = vim.api.nvim_get_current_win(),
    focused = focus,
    armed_at = compat.now_ms() + ui.arm_ms,
  }
  local cfg = H.fill(v, req)
  cfg.style = 'minimal'
  cfg.zindex = 50
  local ok, win = pcall(vim.api.nvim_open_win, buf, focus, cfg)
  if not ok and focus then
    -- E.g. the command-line window cannot be left: show it unfocused.
    v.focused, focus = false, false
    H.fill(v, req)
    win = vim.api.nvim_open_win(buf, false, cfg)
  elseif not ok then
    error(win, 0)
  end
  v.win = win
  H.view = v
  H.set_win_options(win)
  H.place_cursor(v, 1)
  H.set_keymaps(v, req)
  vim.api.nvim_create_autocmd('BufWipeout', {
    [compat.buf_key] = buf,
    once = true,
    callback = function()
      H.on_wiped(buf)
    end,
  })
  if not focus and ui.focus then
    H.focus_later()
  end
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
  pcall(vim.api.nvim_win_set_config, v.win, cfg)
  H.place_cursor(v, cursor_opt)
end

--- Writes the body of `req` into v.buf; returns the window config that fits it.
function H.fill(v, req)
  local width = H.width()
  local max_height = math.max(3, math.floor((vim.o.lines - vim.o.cmdheight - 2) * 0.7))
  local r = H.render(req, { focused = v.focused, width = width, max_height = max_height })
  local buf = v.buf
  compat.set_buf(buf, 'modifiable', true)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, r.lines)
  compat.set_buf(buf, 'modifiable', false)
  compat.set_buf(buf, 'modified', false)
  vim.api.nvim_buf_clear_namespace(buf, H.ns, 0, -1)
  for _, hl in ipairs(r.hls) do
    local row, s, e, group = hl[1], hl[2], hl[3], hl[4]
    pcall(vim.api.nvim_buf_set_extmark, buf, H.ns, row, s, { end_row = row, end_col = e, hl_group = group })
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

function H.width()
  local cols = vim.o.columns
  local w = math.min(H.ui().width, math.floor(cols * 0.9))
  return math.max(math.min(20, cols - 2), w)
end

function H.place_cursor(v, index)
  local row
  for r, i in pairs(v.option_rows) do
    if i == index then
      row = r
    end
  end
  if row ~= nil then
    pcall(vim.api.nvim_win_set_cursor, v.win, { row, 0 })
  end
end

function H.focus(v)
  if not H.valid(v) then
    return
  end
  local cur = vim.api.nvim_get_current_win()
  if cur ~= v.win then
    if not pcall(vim.api.nvim_set_current_win, v.win) then
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
  pcall(vim.api.nvim_del_augroup_by_name, 'AcpPromptFocus')
  if v == nil then
    return
  end
  if vim.api.nvim_win_is_valid(v.win) then
    if restore and vim.api.nvim_get_current_win() == v.win and vim.api.nvim_win_is_valid(v.prev_win) then
      pcall(vim.api.nvim_set_current_win, v.prev_win)
    end
    pcall(vim.api.nvim_win_close, v.win, true)
  end
  if vim.api.nvim_buf_is_valid(v.buf) then
    pcall(vim.api.nvim_buf_delete, v.buf, { force = true })
  end
end

--- The window was closed some other way (:q, <C-w>c): same as hiding.
function H.on_wiped(buf)
  local v = H.view
  if v ~= nil and v.buf == buf then
    H.view = nil
    H.hidden[v.id] = true
    pcall(vim.api.nvim_del_augroup_by_name, 'AcpPromptFocus')
  end
end

-- Keys -----------------------------------------------------------------------

function H.set_keymaps(v, req)
  local buf = v.buf
  local function map(lhs, fn, desc)
    vim.keymap.set('n', lhs, function()
      H.on_key(buf, fn)
    end, { [compat.buf_key] = buf, nowait = true, silent = true, desc = desc })
  end
  for i = 1, math.min(9, #req.options) do
    map(tostring(i), function(view)
      H.choose(view, i)
    end, 'acp: choose option ' .. i)
  end
  local keys = H.ui().keys
  for _, kind in ipairs(H.kind_order) do
    local lhs = keys[kind]
    if lhs ~= nil and lhs ~= '' then
      local index = H.first_of_kind(req, kind)
      if index ~= nil then
        map(lhs, function(view)
          H.choose(view, index)
        end, 'acp: ' .. kind)
      else
        -- Not offered: say so instead of letting the key do something else.
        map(lhs, function()
          H.echo(('acp: no %s option offered'):format((kind:gsub('_', '-'))), 'WarningMsg')
        end, 'acp: ' .. kind .. ' (not offered)')
      end
    end
  end
  for _, e in ipairs(H.extra_kinds) do
    local lhs = keys[e.key]
    if lhs ~= nil and lhs ~= '' then
      if H.extra(req, e.remember) ~= nil then
        map(lhs, function(view)
          H.choose(view, e.remember)
        end, 'acp: ' .. e.desc)
      else
        map(lhs, function()
          H.echo(('acp: "%s" is not offered for this request'):format(e.desc), 'WarningMsg')
        end, 'acp: ' .. e.desc .. ' (not offered)')
      end
    end
  end
  map('<CR>', function(view)
    local row = vim.api.nvim_win_get_cursor(view.win)[1]
    local index = view.option_rows[row]
    if index == nil then
      H.echo('acp: move to an option line, or press its number', 'WarningMsg')
      return
    end
    H.choose(view, index)
  end, 'acp: choose the option under the cursor')
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
  fn(v)
end

--- Answers with option `index`, or (a string) with the extra that
--- remembers for 'session', 'project' or 'agent'.
function H.choose(v, index)
  local req = state.pending[v.id]
  if req == nil then
    return
  end
  if type(index) == 'string' then
    local e = H.extra(req, index)
    if e ~= nil and H.confirm_extra(req, e) then
      require('acp').respond(v.id, e.optionId, { remember = index })
    end
    return
  end
  local o = req.options[index]
  if o == nil then
    return
  end
  require('acp').respond(v.id, o.optionId)
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

--- The broker's extra `remember` ('session'|'project'|'agent') for `req`:
--- {remember, optionId (the first allow_once), label}, or nil when it is not
--- offered (no allow_once option; for session/project, no narrow rule).
function H.extra(req, remember)
  local _, o = state.picked_option(req, 'allow')
  if o == nil or compat.str(o.optionId) == nil then
    return nil
  end
  local narrow = table.concat(req.narrow or {}, ', ')
  local label
  if remember == 'session' then
    label = 'allow for this session: ' .. narrow
  elseif remember == 'project' then
    label = "add to the project's rules: " .. narrow
  elseif remember == 'agent' then
    label = ('trust this agent: yolo for %s from now on'):format(req.agent)
  else
    return nil
  end
  if remember ~= 'agent' and narrow == '' then
    return nil
  end
  return { remember = remember, optionId = o.optionId, label = label }
end

--- The extras offered for `req`, in display order, each with its key.
function H.extras(req)
  local list, keys = {}, H.ui().keys
  for _, e in ipairs(H.extra_kinds) do
    local x = H.extra(req, e.remember)
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
  local prompt = ('Permission %d/%d · %s: %s'):format(pos or 1, total, req.agent, state.title(req))
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
        require('acp').respond(req.id, choice.extra.optionId, { remember = choice.extra.remember })
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

--- A list of lines with highlights: {lines, hls = {{row, scol, ecol, group}}}.
function H.block()
  local b = { lines = {}, hls = {}, option_rows = {} }
  --- Adds one line made of {text, group} chunks.
  function b.add(chunks)
    local text, col = '', 0
    for _, c in ipairs(chunks) do
      local t = c[1]
      if c[2] ~= nil and #t > 0 then
        table.insert(b.hls, { #b.lines, col, col + #t, c[2] })
      end
      text = text .. t
      col = col + #t
    end
    table.insert(b.lines, text)
  end
  --- Adds possibly multi-line text, every line in `group`, the first one
  --- after `prefix`.
  function b.text(text, group, prefix, indent)
    for i, l in ipairs(H.split(text)) do
      if i == 1 and prefix then
        b.add({ { prefix, 'AcpPromptLabel' }, { l, group } })
      else
        b.add({ { (indent or ''), nil }, { l, group } })
      end
    end
  end
  return b
end

--- Appends block `src` to block `dst`.
function H.append(dst, src)
  local off = #dst.lines
  for _, l in ipairs(src.lines) do
    table.insert(dst.lines, l)
  end
  for _, hl in ipairs(src.hls) do
    table.insert(dst.hls, { hl[1] + off, hl[2], hl[3], hl[4] })
  end
  for row, i in pairs(src.option_rows) do
    dst.option_rows[row + off] = i
  end
end

H.split = text.split_lines

--- Body of the prompt. With more lines than fit, the options move above the
--- details so they are always visible.
function H.render(req, o)
  -- One column of padding inside the border on the left.
  local r = H.render_body(req, { focused = o.focused, width = o.width - 1, max_height = o.max_height })
  for i, l in ipairs(r.lines) do
    r.lines[i] = ' ' .. l
  end
  for _, hl in ipairs(r.hls) do
    hl[2], hl[3] = hl[2] + 1, hl[3] + 1
  end
  return r
end

function H.render_body(req, o)
  local tc = state.tool_call(req)
  local pos, total = state.position(req.id)

  local head = H.block()
  head.add({ { ('Permission %d/%d · %s'):format(pos or 1, math.max(total, 1), req.agent), 'AcpPromptHeader' } })
  head.text(state.title(req), 'AcpPromptTitle')
  if req.reason or req.rule then
    head.text(format.why(req), nil, 'Why: ', '     ')
  end
  head.add({ { 'Kind: ', 'AcpPromptLabel' }, { state.kind(req), nil } })

  local details = H.details(req, tc)
  local choices = H.options(req)
  local footer = H.footer(req, o.focused)

  local full = H.block()
  H.append(full, head)
  H.append(full, details)
  full.add({ { '' } })
  H.append(full, choices)
  full.add({ { '' } })
  H.append(full, footer)
  local height = text.rows(full.lines, o.width)
  if height <= o.max_height or #details.lines == 0 then
    full.height = height
    return full
  end

  local split = H.block()
  H.append(split, head)
  split.add({ { ('Details below the options (%d lines): scroll down'):format(#details.lines), 'AcpPromptFooter' } })
  split.add({ { '' } })
  H.append(split, choices)
  split.add({ { '' } })
  H.append(split, footer)
  split.add({ { ('─'):rep(math.min(o.width, 40)), 'AcpPromptFooter' } })
  H.append(split, details)
  split.height = text.rows(split.lines, o.width)
  return split
end

function H.details(req, tc)
  local b = H.block()
  local kind = state.kind(req)
  local input = type(tc.rawInput) == 'table' and tc.rawInput or {}

  if kind == 'execute' or req.command ~= nil then
    b.text(req.command or state.title(req), 'AcpPromptCommand', '$ ', '  ')
    if type(input.cwd) == 'string' then
      b.add({ { 'in ', 'AcpPromptLabel' }, { input.cwd, nil } })
    end
  end
  local judged = H.judged(req)
  if judged ~= nil then
    b.text(judged, 'AcpPromptLabel', 'Judged: ', '  ')
  end

  local shown = kind == 'execute'
  for _, item in ipairs(type(tc.content) == 'table' and tc.content or {}) do
    if type(item) == 'table' then
      shown = H.content_item(b, item, input) or shown
    end
  end

  for _, loc in ipairs(type(tc.locations) == 'table' and tc.locations or {}) do
    if type(loc) == 'table' and compat.str(loc.path) then
      local where = H.path(loc.path)
      if type(loc.line) == 'number' then
        where = where .. ':' .. loc.line
      end
      b.add({ { 'Location: ', 'AcpPromptLabel' }, { where, nil } })
      shown = true
    end
  end

  if not shown and next(input) ~= nil then
    local ok, json = pcall(vim.fn.json_encode, input)
    if ok then
      if #json > 400 then
        json = json:sub(1, 400) .. '…'
      end
      b.text(json, nil, 'Input: ', '  ')
    end
  end
  return b
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
function H.content_item(b, item, input)
  if item.type == 'diff' then
    local ok, have = pcall(H.have, item, input)
    local d = format.diff(item, ok and have or nil)
    if d.notice then
      b.add({ { '! ' .. d.notice, 'AcpPromptWarning' } })
    end
    b.add({ { d.from, 'AcpPromptLabel' } })
    b.add({ { d.to, 'AcpPromptLabel' } })
    if d.note then
      b.add({ { d.note, 'AcpPromptFooter' } })
    else
      for _, l in ipairs(d.lines) do
        local c = l:sub(1, 1)
        local group = (c == '+' and 'AcpPromptDiffAdd') or (c == '-' and 'AcpPromptDiffDelete') or (l:sub(1, 2) == '@@' and 'AcpPromptDiffHunk') or nil
        b.add({ { l, group } })
      end
    end
    return true
  elseif item.type == 'content' then
    local c = item.content
    if type(c) == 'table' and c.type == 'text' and type(c.text) == 'string' then
      b.text(c.text, nil)
    elseif type(c) == 'table' then
      b.add({ { ('[%s]'):format(compat.str(c.type) or 'content'), 'AcpPromptFooter' } })
    end
    return true
  elseif item.type == 'terminal' then
    b.add({ { ('[terminal %s]'):format(compat.str(item.terminalId) or ''), 'AcpPromptFooter' } })
    return true
  end
  b.add({ { ('[%s]'):format(compat.str(item.type) or 'unknown content'), 'AcpPromptFooter' } })
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

function H.options(req)
  local b = H.block()
  local keys = H.ui().keys
  local key_of = {}
  for _, kind in ipairs(H.kind_order) do
    local i = H.first_of_kind(req, kind)
    if i ~= nil and keys[kind] ~= nil and keys[kind] ~= '' then
      key_of[i] = keys[kind]
    end
  end
  if #req.options == 0 then
    b.add({ { 'The agent offered no options: :AcpDeny answers "cancelled".', 'AcpPromptFooter' } })
  end
  for i, o in ipairs(req.options) do
    local kind = compat.str(o.kind) or ''
    local group = (kind:match('^allow') and 'AcpPromptAllow') or (kind:match('^reject') and 'AcpPromptReject') or 'AcpPromptOption'
    local label = ('[%s] %s'):format(i <= 9 and tostring(i) or ' ', compat.str(o.name) or compat.str(o.optionId) or '?')
    local chunks = { { label, group } }
    if key_of[i] then
      table.insert(chunks, { '  ' })
      table.insert(chunks, { '(' .. key_of[i] .. ')', 'AcpPromptKey' })
    end
    b.add(chunks)
    b.option_rows[#b.lines] = i
  end
  local extras = H.extras(req)
  if #extras > 0 then
    b.add({ { 'acp can also remember:', 'AcpPromptLabel' } })
    for _, e in ipairs(extras) do
      local chunks = { { '[' .. (e.key or ' ') .. '] ' .. e.label, 'AcpPromptExtra' } }
      b.add(chunks)
      b.option_rows[#b.lines] = e.remember
    end
  end
  return b
end

function H.footer(req, focused)
  local b = H.block()
  if not focused then
    if not H.ui().focus then
      b.add({ { 'Answer with :AcpPending (or :AcpAllow / :AcpDeny).', 'AcpPromptFooter' } })
    elseif vim.api.nvim_get_mode().mode:match('^[iR]') then
      b.add({ { 'Finish typing: the prompt takes focus when you leave insert mode.', 'AcpPromptFooter' } })
    else
      b.add({ { 'The prompt takes focus when you are back in normal mode.', 'AcpPromptFooter' } })
    end
    return b
  end
  local keys = H.ui().keys
  local letters = {}
  for _, kind in ipairs(H.kind_order) do
    if H.first_of_kind(req, kind) and keys[kind] ~= nil and keys[kind] ~= '' then
      letters[#letters + 1] = keys[kind]
    end
  end
  for _, e in ipairs(H.extras(req)) do
    if e.key then
      letters[#letters + 1] = e.key
    end
  end
  local n = math.min(9, #req.options)
  local choose = n > 0 and (n == 1 and '1' or ('1-' .. n)) or ''
  if #letters > 0 then
    choose = choose .. (choose ~= '' and ' or ' or '') .. table.concat(letters, ' ')
  end
  local hide = (keys.hide ~= nil and keys.hide ~= '') and (keys.hide .. '/<Esc>') or '<Esc>'
  b.add({ { ('%s: choose · <CR>: option under cursor'):format(choose), 'AcpPromptFooter' } })
  b.add({ { ('%s: hide (stays pending; :AcpPending reopens)'):format(hide), 'AcpPromptFooter' } })
  return b
end

state.on('pending', M.refresh)
state.on('answered', M.on_answered)
state.on('resolved', M.on_resolved)
state.on('error', M.on_error)

return M
