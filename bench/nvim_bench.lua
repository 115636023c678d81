--- The Neovim side of `make bench` (bench/run.py drives it over --listen).
---
--- Each `B.<scenario>(args)` starts a scenario and returns at once, so that
--- Neovim sits in its main loop as it does for a person (the input-latency
--- probe measures that loop); `B.poll()` returns the result once it is done.
--- The broker scenarios run the plugin exactly as a user does (setup(),
--- start(), prompt(), the chat, the prompt window); the `_lua` ones run the
--- same agent under the Lua-only client of bench/lua_client.lua.

local B = {}
local uv = vim.uv or vim.loop
local api = vim.api

B.result = nil

--- How late Neovim's own 10 ms timer ran at worst (ms) since the last
--- reset: what stalled the editor, whatever the prober saw.
B.late = { max = 0, last = nil }
B.late_timer = (vim.uv or vim.loop).new_timer()
B.late_timer:start(10, 10, function()
  local now = (vim.uv or vim.loop).hrtime()
  if B.late.last then
    B.late.max = math.max(B.late.max, (now - B.late.last) / 1e6 - 10)
  end
  B.late.last = now
end)

local function finish(r)
  r.done = true
  r.nvim_late_ms = B.late.max
  B.result = r
end

--- The scenario's result (with done = true), or nil while it runs.
function B.poll()
  return B.result
end

-- Calls fn once cond() holds, checking every `every` ms (2 by default).
local function when(cond, fn, every)
  local t = uv.new_timer()
  t:start(
    0,
    every or 2,
    vim.schedule_wrap(function()
      if t:is_closing() then
        return
      end
      local ok, v = pcall(cond)
      if ok and v then
        t:stop()
        t:close()
        fn(v)
      end
    end)
  )
end

local function on_user(pattern, fn)
  api.nvim_create_autocmd('User', { pattern = pattern, callback = fn })
end

-- Starts the bench agent under the broker in args.project and calls fn once
-- its session exists.
local function start_broker(args, fn)
  local acp = require('acp')
  acp.setup({ ui = { arm_ms = 0 } })
  local ok, err = acp.start({ cmd = args.cmd, env = { BENCH_OUT = args.out } }, { cwd = args.project })
  assert(ok, err)
  when(function()
    return acp.status().session
  end, fn)
end

local function broker_pid()
  return require('acp.broker').info and require('acp.broker').info.pid
end

local function hr_ms(t0)
  return (uv.hrtime() - t0) / 1e6
end

-- 1. Auto-decided permission round trips ======================================

--- The broker decides (allow rules in the project's trusted settings).
function B.auto_broker(args)
  start_broker(args, function()
    on_user('AcpTurnEnd', function()
      finish({ broker_pid = broker_pid() })
    end)
    require('acp').prompt('go')
  end)
end

--- The Lua client decides in the editor's loop.
function B.auto_lua(args)
  local client = require('lua_client')
  client.start(args.cmd, {
    cwd = args.project,
    env = { BENCH_OUT = args.out },
    rules = args.rules,
    on_session = function(c)
      client.prompt(c, 'go')
    end,
    on_turn_end = function(c)
      client.stop(c)
      finish({})
    end,
  })
end

-- 3. Asked permission: request → prompt window, answer → agent ================

--- $BENCH_ASK_LOG: a file that gets a line per ask (see measure_asks).
local ask_log = os.getenv('BENCH_ASK_LOG') and io.open(os.getenv('BENCH_ASK_LOG'), 'a')

local function measure_asks(args, fn_current)
  local vis, ans, seen = {}, {}, {}
  -- The first time a floating window shows a request: when nvim_open_win
  -- returns, the window exists (and the autocommands its opening ran, if
  -- any, are done). Measured the same way for every client, whether or
  -- not it opens its window with autocommands.
  local open_win = api.nvim_open_win
  api.nvim_open_win = function(...)
    local win = open_win(...)
    local t = uv.hrtime()
    local cur = fn_current()
    if cur == nil or seen[cur.key] then
      return win
    end
    local cfg = api.nvim_win_get_config(win)
    if cfg.relative == nil or cfg.relative == '' then
      return win
    end
    seen[cur.key] = true
    vis[#vis + 1] = (t - cur.t_ns) / 1e6
    if ask_log ~= nil then
      -- Each ask's time and the Lua heap then (KB): where the collector
      -- ran (the heap drops) beside the slow prompts.
      ask_log:write(('%d %.3f %.0f\n'):format(#vis, vis[#vis], collectgarbage('count')))
      ask_log:flush()
    end
    vim.schedule(function()
      ans[#ans + 1] = uv.hrtime()
      cur.answer()
    end)
    return win
  end
  return vis, ans
end

function B.ask_broker(args)
  local state = require('acp.state')
  local vis, ans = measure_asks(args, function()
    local id = state.order[#state.order]
    local req = id and state.pending[id]
    if req == nil then
      return nil
    end
    local raw = type(req.toolCall) == 'table' and req.toolCall.rawInput or {}
    return {
      key = id,
      t_ns = raw.bench_t_ns,
      answer = function()
        require('acp').respond(id, 'allow')
      end,
    }
  end)
  start_broker(args, function()
    on_user('AcpTurnEnd', function()
      finish({ visible_ms = vis, t_answer = ans })
    end)
    require('acp').prompt('go')
  end)
end

function B.ask_lua(args)
  local client = require('lua_client')
  local current
  local vis, ans = measure_asks(args, function()
    return current
  end)
  client.start(args.cmd, {
    cwd = args.project,
    env = { BENCH_OUT = args.out },
    rules = {},
    on_ask = function(c, msg)
      local tc = msg.params.toolCall
      local buf = api.nvim_create_buf(false, true)
      api.nvim_buf_set_lines(buf, 0, -1, false, { 'Allow ' .. tostring(tc.title) .. '?', '[a]llow  [r]eject' })
      local ask = {
        key = msg.id,
        t_ns = tc.rawInput.bench_t_ns,
        answer = function()
          client.answer(c, msg.id, 'allow')
          api.nvim_win_close(0, true)
        end,
      }
      current = ask
      api.nvim_open_win(buf, true, { relative = 'editor', row = 2, col = 2, width = 60, height = 2, border = 'rounded' })
    end,
    on_session = function(c)
      client.prompt(c, 'go')
    end,
    on_turn_end = function(c)
      client.stop(c)
      finish({ visible_ms = vis, t_answer = ans })
    end,
  })
end

-- 4. Streaming into the chat buffer ===========================================

-- Where the buffer's text ends: 'BENCH-END' in its last lines.
local function landed(buf)
  local n = api.nvim_buf_line_count(buf)
  for _, l in ipairs(api.nvim_buf_get_lines(buf, math.max(0, n - 8), n, false)) do
    if l:find('BENCH-END', 1, true) then
      return true
    end
  end
  return false
end

local function buf_bytes(buf)
  return api.nvim_buf_get_offset(buf, api.nvim_buf_line_count(buf))
end

function B.stream_broker(args)
  start_broker(args, function()
    local acp = require('acp')
    local chat = require('acp.chat')
    local session = acp.status().session
    local ok, err = acp.chat()
    local t0, t_turn
    on_user('AcpTurnEnd', function()
      t_turn = hr_ms(t0)
      if not ok or chat.buffer == nil then
        finish({ ms = t_turn, turn_ms = t_turn, chat = false, chat_error = tostring(err), broker_pid = broker_pid() })
        return
      end
      -- The chat draws on a timer: done once the last chunk is in its
      -- buffer, or (when the chat dropped text it could not keep up with)
      -- once the buffer has not changed for 300 ms.
      local tick, t_change = -1, hr_ms(t0)
      when(function()
        local buf = chat.buffer(session)
        if buf == nil then
          return false
        end
        local now = hr_ms(t0)
        local t = api.nvim_buf_get_changedtick(buf)
        if t ~= tick then
          tick, t_change = t, now
        end
        return (landed(buf) or now - t_change > 300) and buf
      end, function(buf)
        finish({
          ms = t_change,
          turn_ms = t_turn,
          chat = true,
          landed = landed(buf),
          buf_bytes = buf_bytes(buf),
          broker_pid = broker_pid(),
        })
      end, 1)
    end)
    B.result = { started = true, broker_pid = broker_pid() }
    t0 = uv.hrtime()
    acp.prompt('go')
  end)
end

function B.stream_lua(args)
  local client = require('lua_client')
  vim.cmd('botright new')
  local buf = api.nvim_get_current_buf()
  vim.bo[buf].buftype = 'nofile'
  local t0
  client.start(args.cmd, {
    cwd = args.project,
    env = { BENCH_OUT = args.out },
    buf = buf,
    on_session = function(c)
      B.result = { started = true }
      t0 = uv.hrtime()
      client.prompt(c, 'go')
    end,
    on_turn_end = function(c)
      local ms = hr_ms(t0)
      client.stop(c)
      finish({ ms = ms, turn_ms = ms, chat = true, landed = landed(buf), buf_bytes = buf_bytes(buf) })
    end,
  })
end

-- 5. Footprint ===================================================================

--- The broker with one idle session of the bench agent.
function B.idle_broker(args)
  start_broker(args, function()
    finish({ broker_pid = broker_pid() })
  end)
end

--- args.n requests waiting for the person.
function B.pending_broker(args)
  start_broker(args, function()
    local acp = require('acp')
    acp.prompt('go')
    when(function()
      return acp.status().pending >= args.n
    end, function()
      finish({ broker_pid = broker_pid(), pending = acp.status().pending })
    end, 20)
  end)
end

-- 2. The policy: a naive Lua decide() as a baseline =============================

--- Decisions per second of lua_client.allowed over the commands with the
--- rules (both JSON files), for about `seconds`.
function B.policy_lua(args)
  local client = require('lua_client')
  local function read(path)
    local f = assert(io.open(path))
    local s = f:read('*a')
    f:close()
    return vim.json.decode(s)
  end
  local rules = client.compile(read(args.rules))
  local commands = read(args.commands)
  local n, allowed, t0 = 0, 0, uv.hrtime()
  local limit = args.seconds * 1e9
  repeat
    for i = 1, #commands do
      if client.allowed(rules, commands[i]) then
        allowed = allowed + 1
      end
    end
    n = n + #commands
  until uv.hrtime() - t0 >= limit
  return { per_s = n / ((uv.hrtime() - t0) / 1e9), n = n, allowed = allowed }
end

--- Stops the agents; for the driver, before it quits Neovim.
function B.stop()
  pcall(function()
    for name in pairs(require('acp.state').agents) do
      require('acp').stop(name)
    end
  end)
end

return B
