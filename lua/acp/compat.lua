--- Small compatibility layer: Neovim 0.7.2 (Debian 12) up to 0.12.
---
--- Everything that differs between versions goes through here, so the other
--- modules can be written against one API.

local M = {}
local H = {}

-- Module definition ==========================================================

--- libuv bindings (`vim.uv` from 0.10, `vim.loop` before).
M.uv = vim.uv or vim.loop

--- The whole content of the regular file at path when it holds at most max
--- bytes, and its fs_stat. nil (with the stat when there is one) when it is
--- missing, not a regular file, larger than max, or unreadable.
---@param path string
---@param max integer
---@return string|nil data
---@return table|nil stat
function M.read_file(path, max)
  local st = M.uv.fs_stat(path)
  if st == nil or st.type ~= 'file' or st.size > max then
    return nil, st
  end
  local fd = M.uv.fs_open(path, 'r', 0)
  if fd == nil then
    return nil, st
  end
  -- One byte more than it had: a file that grew past max since is refused.
  local data = M.uv.fs_read(fd, st.size + 1, 0)
  M.uv.fs_close(fd)
  if type(data) ~= 'string' or #data > max then
    return nil, st
  end
  return data, st
end

--- path with its symlinks resolved (fs_realpath); for a file that does
--- not exist (any more), its resolved directory joined with its name.
---@param path string
---@return string
function M.realpath(path)
  local real = M.uv.fs_realpath(path)
  if real then
    return real
  end
  local dir = M.uv.fs_realpath(vim.fn.fnamemodify(path, ':h'))
  return dir and H.join(dir, vim.fn.fnamemodify(path, ':t')) or path
end

--- True when Neovim is at least 0.`minor`.
---@param minor integer
---@return boolean
function M.has(minor)
  return vim.fn.has('nvim-0.' .. minor) == 1
end

--- Monotonic clock in milliseconds.
---@return number
function M.now_ms()
  return M.uv.hrtime() / 1e6
end

---@param t any
---@return boolean
M.islist = vim.islist or vim.tbl_islist

--- `vim.text.diff` where it exists: Neovim 0.12 renames `vim.diff` to it and
--- deprecates the old name.
M.diff = (vim.text and vim.text.diff) or vim.diff

--- The key that names a buffer in the options of `nvim_create_autocmd`
--- (and the other autocmd functions) and of `vim.keymap.set`: `buf` from
--- Neovim 0.12, which deprecates `buffer`; `buffer` before, where `buf` is
--- an invalid key. Use as `{ [compat.buf_key] = buf, ... }`.
---@type string
M.buf_key = pcall(vim.api.nvim_get_autocmds, { buf = 0, event = 'BufEnter' }) and 'buf' or 'buffer'

--- True when `v` is neither nil nor `vim.NIL` (JSON null).
---@param v any
---@return boolean
function M.present(v)
  return v ~= nil and v ~= vim.NIL
end

--- `v` as a non-empty string, or nil (for `vim.NIL`, numbers stay numbers).
---@param v any
---@return string|nil
function M.str(v)
  if type(v) == 'string' and v ~= '' then
    return v
  elseif type(v) == 'number' then
    return tostring(v)
  end
  return nil
end

--- Whether a User autocommand for pattern is defined.
---@param pattern string
---@return boolean
function M.has_user(pattern)
  local cache = M.user_cache
  local v = cache and cache[pattern]
  if v == nil then
    v = vim.fn.exists('#User#' .. pattern) == 1
    if cache then
      cache[pattern] = v
    end
  end
  return v
end

--- While a batch of broker events is handled: has_user's answers (no
--- autocommand can be defined meanwhile). nil otherwise.
---@type table|nil
M.user_cache = nil

--- Fires `User <pattern>` with `data`.
---
--- `vim.g.acp_last_event` is set first, because Neovim 0.7 cannot pass `data`
--- to autocmds and scripts there read it from the global instead.
---@param pattern string
---@param data table
function M.fire_user(pattern, data)
  -- Nothing listens: skip the conversion of data to a Vim dictionary (an
  -- agent can have thousands of requests decided per second).
  if not M.has_user(pattern) then
    return
  end
  vim.g.acp_last_event = { event = pattern, data = data }
  local opts = { pattern = pattern, modeline = false }
  if M.has(8) then
    opts.data = data
  end
  -- A failing user autocmd must not break the plugin's own bookkeeping.
  local ok, err = pcall(vim.api.nvim_exec_autocmds, 'User', opts)
  if not ok then
    vim.notify('(acp) error in a User ' .. pattern .. ' autocmd: ' .. tostring(err), vim.log.levels.ERROR)
  end
end

--- The `:checkhealth` reporter: `vim.health` from 0.9 (0.8 has only the
--- `report_*` names), `require('health')` on 0.7.
---@return table {start, ok, warn, error, info}
function M.health()
  local h = vim.health
  if h == nil or (h.start == nil and h.report_start == nil) then
    h = require('health')
  end
  return {
    start = h.start or h.report_start,
    ok = h.ok or h.report_ok,
    warn = h.warn or h.report_warn,
    error = h.error or h.report_error,
    info = h.info or h.report_info,
  }
end

--- Nearest directory at or above `dir` that holds one of `markers`
--- (no `vim.fs` on 0.7).
---@param dir string absolute directory
---@param markers string[]
---@return string|nil
function M.find_up(dir, markers)
  dir = H.strip_slash(dir)
  while true do
    for _, m in ipairs(markers) do
      if M.uv.fs_stat(H.join(dir, m)) then
        return dir
      end
    end
    local parent = vim.fn.fnamemodify(dir, ':h')
    if parent == dir then
      return nil
    end
    dir = parent
  end
end

--- Path of `$XDG_STATE_HOME/acp-broker/<name>` (default `~/.local/state`).
---@param name string
---@return string
function M.state_path(name)
  local base = vim.env.XDG_STATE_HOME
  if base == nil or base == '' then
    base = H.join(vim.env.HOME or vim.fn.expand('~'), '.local/state')
  end
  return H.join(base, 'acp-broker/' .. name)
end

--- Sets buffer option `name` of `buf` (nvim_buf_set_option is deprecated
--- from 0.10; nvim_set_option_value takes `buf` only from 0.8).
function M.set_buf(buf, name, value)
  if M.has(10) then
    vim.api.nvim_set_option_value(name, value, { buf = buf })
  else
    vim.api.nvim_buf_set_option(buf, name, value)
  end
end

--- Sets window-local option `name` of `win`.
function M.set_win(win, name, value)
  if M.has(10) then
    vim.api.nvim_set_option_value(name, value, { win = win, scope = 'local' })
  else
    vim.api.nvim_win_set_option(win, name, value)
  end
end

--- Whether the current window is floating.
---@param win integer
---@return boolean
function M.is_float(win)
  return vim.api.nvim_win_get_config(win).relative ~= ''
end

-- Helper functionality =======================================================

function H.join(a, b)
  if a:sub(-1) == '/' then
    return a .. b
  end
  return a .. '/' .. b
end

function H.strip_slash(p)
  if #p > 1 and p:sub(-1) == '/' then
    return p:sub(1, -2)
  end
  return p
end

M.join = H.join
M.strip_slash = H.strip_slash

return M
