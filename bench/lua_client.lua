--- The Lua baseline of `make bench`: an ACP client written the way Lua-only
--- Neovim plugins write one. The agent runs under jobstart(); every line of
--- its stdout is decoded with vim.json in the editor's loop, permission
--- requests are decided there by a list of allow rules, and the answer is
--- encoded and sent back with chansend(). Streamed text is appended to a
--- buffer once per on_stdout callback (a fair baseline batches that much).
---
---   local client = require('lua_client')
---   local c = client.start(cmd, {
---     env = {...}, cwd = dir, rules = {'Bash(git status*)', ...},
---     on_ask = function(c, msg) ... end,   -- requests no rule allows
---     on_session = function(c) ... end,    -- session/new answered
---     on_turn_end = function(c, result) ... end,
---     buf = bufnr,                         -- where streamed text goes
---   })
---   client.prompt(c, 'text'); client.answer(c, id, optionId); client.stop(c)

local M = {}

--- Compiles Claude-style `Bash(...)` allow rules into prefixes (`*` at the
--- end, or `:*`) and exact commands.
---@param rules string[]
---@return {prefix: string[], exact: table<string, boolean>}
function M.compile(rules)
  local c = { prefix = {}, exact = {} }
  for _, r in ipairs(rules) do
    local spec = r:match('^Bash%((.*)%)$')
    if spec then
      local p = spec:match('^(.-):?%*$')
      if p then
        c.prefix[#c.prefix + 1] = p
      else
        c.exact[spec] = true
      end
    end
  end
  return c
end

--- Allowed when every part of the command line (split at `&&`, `||`, `;`
--- and `|`) is an exact rule or starts with a rule's prefix.
---@param c table compiled rules
---@param command string
---@return boolean
function M.allowed(c, command)
  if type(command) ~= 'string' or command == '' then
    return false
  end
  local line = command:gsub('&&', ';'):gsub('||', ';'):gsub('|', ';')
  for part in line:gmatch('[^;]+') do
    part = part:match('^%s*(.-)%s*$')
    if part ~= '' and not c.exact[part] then
      local ok = false
      for i = 1, #c.prefix do
        local p = c.prefix[i]
        if part:sub(1, #p) == p then
          ok = true
          break
        end
      end
      if not ok then
        return false
      end
    end
  end
  return true
end

local function send(c, msg)
  vim.fn.chansend(c.job, vim.json.encode(msg) .. '\n')
end

local function request(c, method, params, on_result)
  c.next_id = c.next_id + 1
  c.calls[c.next_id] = on_result
  send(c, { jsonrpc = '2.0', id = c.next_id, method = method, params = params })
end

--- Answers a permission request with optionId (nil: cancelled).
function M.answer(c, id, option_id)
  local outcome = option_id and { outcome = 'selected', optionId = option_id } or { outcome = 'cancelled' }
  send(c, { jsonrpc = '2.0', id = id, result = { outcome = outcome } })
end

local function first_of_kind(options, kind)
  for _, o in ipairs(options or {}) do
    if o.kind == kind then
      return o.optionId
    end
  end
end

local function on_permission(c, msg)
  local p = msg.params or {}
  local tc = type(p.toolCall) == 'table' and p.toolCall or {}
  local raw = type(tc.rawInput) == 'table' and tc.rawInput or {}
  local option = first_of_kind(p.options, 'allow_once')
  if option and M.allowed(c.rules, raw.command) then
    M.answer(c, msg.id, option)
  elseif c.opts.on_ask then
    c.opts.on_ask(c, msg)
  else
    M.answer(c, msg.id, nil)
  end
end

-- Appends streamed text at the end of the buffer (its last line continues).
local function append(buf, text)
  local n = vim.api.nvim_buf_line_count(buf)
  local last = vim.api.nvim_buf_get_lines(buf, n - 1, n, false)[1] or ''
  local lines = vim.split(last .. text, '\n', { plain = true })
  vim.api.nvim_buf_set_lines(buf, n - 1, n, false, lines)
end

-- Draws the text received so far (once per on_stdout callback, and before
-- anything else is handled, so that it is in the buffer first).
local function flush(c)
  if #c.texts > 0 and c.opts.buf then
    append(c.opts.buf, table.concat(c.texts))
  end
  c.texts = {}
end

local function on_message(c, msg)
  if msg.method == 'session/update' then
    local u = type(msg.params) == 'table' and msg.params.update or nil
    if type(u) == 'table' and u.sessionUpdate == 'agent_message_chunk' and type(u.content) == 'table' then
      c.texts[#c.texts + 1] = u.content.text
    end
    return
  end
  flush(c)
  if msg.method == 'session/request_permission' then
    on_permission(c, msg)
  elseif msg.method ~= nil then
    if msg.id ~= nil then
      send(c, { jsonrpc = '2.0', id = msg.id, error = { code = -32601, message = 'Method not found' } })
    end
  else
    local cb = c.calls[msg.id]
    c.calls[msg.id] = nil
    if cb then
      cb(msg.result, msg.error)
    end
  end
end

local function on_stdout(c, data)
  -- data[1] continues the previous partial line; data[#data] is partial.
  data[1] = c.partial .. data[1]
  c.partial = data[#data]
  for i = 1, #data - 1 do
    local line = data[i]
    if line ~= '' then
      local ok, msg = pcall(vim.json.decode, line)
      if ok and type(msg) == 'table' then
        on_message(c, msg)
      end
    end
  end
  flush(c)
end

--- Starts the agent, initializes and opens a session in opts.cwd.
function M.start(cmd, opts)
  local c = { opts = opts, rules = M.compile(opts.rules or {}), next_id = 0, calls = {}, partial = '', texts = {} }
  c.job = vim.fn.jobstart(cmd, {
    cwd = opts.cwd,
    env = opts.env,
    on_stdout = function(_, data)
      on_stdout(c, data)
    end,
    on_exit = function()
      c.exited = true
    end,
  })
  assert(c.job > 0, 'jobstart failed')
  c.pid = vim.fn.jobpid(c.job)
  request(c, 'initialize', { protocolVersion = 1, clientCapabilities = vim.empty_dict() }, function()
    request(c, 'session/new', { cwd = opts.cwd, mcpServers = {} }, function(result)
      c.session = result and result.sessionId
      if opts.on_session then
        opts.on_session(c)
      end
    end)
  end)
  return c
end

--- Sends a prompt; opts.on_turn_end gets the answer.
function M.prompt(c, text)
  request(c, 'session/prompt', { sessionId = c.session, prompt = { { type = 'text', text = text } } }, function(r, e)
    if c.opts.on_turn_end then
      c.opts.on_turn_end(c, r, e)
    end
  end)
end

function M.stop(c)
  pcall(vim.fn.jobstop, c.job)
end

return M
