--- The broker process: the only caller of `jobstart` and `rpcnotify`.
---
--- Lua never waits on the broker: every call is a notification and the broker
--- answers with events (doc/protocol.md). Events arrive in acp.broker,
--- which hands them to acp.events.

local compat = require('acp.compat')
local config = require('acp.config')
local events = require('acp.events')
local state = require('acp.state')

local M = {}
local H = {}

-- Module definition ==========================================================

--- Channel of the running broker, or nil.
---@type integer|nil
M.chan = nil

--- What the broker said in its `ready` event: {version, pid, log} (set by
--- acp.broker).
---@type table|nil
M.info = nil

--- Last lines the broker wrote to stderr (it logs to a file; this is only for
--- crashes before the log is open).
M.stderr = {}

--- Starts the broker unless it runs. Returns the channel, or nil and an
--- `(acp)` message.
---@return integer|nil chan
---@return string|nil err
function M.ensure()
  if M.chan ~= nil then
    return M.chan
  end
  local bin = config.broker_bin()
  if vim.fn.executable(bin) ~= 1 then
    return nil, ('(acp) broker not built: run `make` in %s (looked for %s)'):format(config.root(), bin)
  end
  H.stopping = false
  M.stderr = {}
  local id
  id = vim.fn.jobstart({ bin }, {
    rpc = true,
    env = { ACP_BROKER_LOG = config.log_level() },
    on_stderr = function(_, lines)
      H.keep_stderr(lines)
    end,
    on_exit = function(_, code)
      H.on_exit(id, code)
    end,
  })
  if id == nil or id <= 0 then
    return nil, ('(acp) could not start the broker %s (jobstart returned %s)'):format(bin, tostring(id))
  end
  M.chan = id
  H.create_autocommands()
  -- The setup() options that take part in decisions go before anything
  -- else, so the first session is governed by them.
  H.send_config(id)
  return id
end

--- Sends the current setup() options to a running broker (after setup()).
function M.configure()
  if M.chan ~= nil then
    H.send_config(M.chan)
  end
end

--- Sends a notification to the broker, starting it when needed.
---@param method string
---@return boolean ok
---@return string|nil err
function M.notify(method, ...)
  local chan, err = M.ensure()
  if chan == nil then
    return false, err
  end
  local ok, e = pcall(vim.rpcnotify, chan, method, ...)
  if not ok then
    return false, ('(acp) could not reach the broker: %s'):format(tostring(e))
  end
  return true
end

--- Sends a notification only if the broker runs (stop/cancel must not start
--- one just to say "stop").
---@param method string
---@return boolean sent
function M.notify_if_running(method, ...)
  if M.chan == nil then
    return false
  end
  return (M.notify(method, ...))
end

---@param name string
---@param spec {cmd: string[], env: table, cwd: string, resume: string|nil, new: boolean|nil}
function M.start_agent(name, spec)
  return M.notify('acp_start', name, {
    cmd = spec.cmd,
    env = H.map(spec.env),
    cwd = spec.cwd,
    resume = spec.resume,
    new = spec.new,
  })
end

--- Logs in with one of the agent's authMethods (answer: `authenticated`,
--- then the session opens; or `error`).
---@param name string
---@param method_id string
function M.authenticate(name, method_id)
  return M.notify_if_running('acp_authenticate', name, method_id)
end

--- session/set_mode (answer: `mode_set` or `error`).
---@param name string
---@param session string|nil nil: the agent's current session
---@param mode_id string
function M.set_mode(name, session, mode_id)
  return M.notify_if_running('acp_set_mode', name, session == nil and vim.NIL or session, mode_id)
end

--- Sends a prompt to the agent's session (nil: its current one), with
--- ACP content blocks after the text (acp.context makes them; nil: none).
---@param name string
---@param text string
---@param session string|nil
---@param blocks table[]|nil
function M.prompt(name, text, session, blocks)
  return M.notify(
    'acp_prompt',
    name,
    text,
    session == nil and vim.NIL or session,
    (blocks == nil or #blocks == 0) and vim.NIL or blocks
  )
end

function M.cancel(name)
  return M.notify_if_running('acp_cancel', name)
end

--- `option_id` nil answers the outcome `cancelled`.
---@param token integer
---@param option_id string|nil
---@param opts table|nil
function M.respond(token, option_id, opts)
  local o = H.map(opts)
  return M.notify_if_running('acp_respond', token, option_id == nil and vim.NIL or option_id, o)
end

--- Answers a write acp.fs held while the person was asked: true (done)
--- or why it is refused.
---@param token integer
---@param result boolean|string
function M.fs_answer(token, result)
  return M.notify_if_running('acp_fs_answer', token, result)
end

function M.stop_agent(name)
  return M.notify_if_running('acp_stop', name)
end

--- Adds a rule (answer: `rule_added` or `error`).
---@param scope 'session'|'project'|'user'
---@param list 'allow'|'ask'|'deny'
---@param rule string
---@param ctx {cwd: string, agent: string|nil}
function M.rule(scope, list, rule, ctx)
  return M.notify('acp_rule', scope, list, rule, H.map(ctx))
end

--- Per-project runtime yolo (answer: `settings`, or `error` when vetoed).
---@param cwd string
---@param action 'on'|'off'|'toggle'|'status'
---@param agent string|nil
function M.yolo(cwd, action, agent)
  return M.notify('acp_yolo', cwd, action, agent == nil and vim.NIL or agent)
end

--- Runtime policy mode of a project; nil only asks (answer: `settings`).
---@param cwd string
---@param mode string|nil
function M.mode(cwd, mode)
  return M.notify('acp_mode', cwd, mode == nil and vim.NIL or mode)
end

--- Asks for the effective rules of a project (answer: `rules`).
---@param cwd string
function M.rules(cwd)
  return M.notify('acp_rules', cwd)
end

--- Trusts a project's current permissive settings (answer: `trusted`).
---@param cwd string
function M.trust(cwd)
  return M.notify('acp_trust', cwd)
end

--- Stops the broker itself (no notification about its exit).
function M.shutdown()
  if M.chan ~= nil then
    H.stopping = true
    pcall(vim.fn.jobstop, M.chan)
  end
end

--- Path of the broker's debug log (as the broker reported it, else the
--- default location).
---@return string
function M.log_path()
  if M.info and type(M.info.log) == 'string' and M.info.log ~= '' then
    return M.info.log
  end
  return config.log_path()
end

-- The controller names the log in its messages.
events.log_path = M.log_path

-- Helper functionality =======================================================

--- An empty Lua table would be sent as an array; the protocol wants maps.
function H.map(t)
  if t == nil or next(t) == nil then
    return vim.empty_dict()
  end
  return t
end

function H.send_config(chan)
  local ok, err = pcall(vim.rpcnotify, chan, 'acp_config', config.policy())
  if not ok then
    vim.notify(('(acp) could not send the settings to the broker: %s'):format(tostring(err)), vim.log.levels.ERROR)
  end
end

function H.keep_stderr(lines)
  for _, l in ipairs(lines or {}) do
    if l ~= '' then
      table.insert(M.stderr, l)
      if #M.stderr > 50 then
        table.remove(M.stderr, 1)
      end
    end
  end
end

function H.on_exit(id, code)
  if M.chan ~= id then
    return
  end
  M.chan = nil
  local expected = H.stopping or H.leaving
  H.stopping = false
  if H.leaving then
    return
  end
  if not expected then
    -- The broker can no longer end the agents' process groups (each agent
    -- leads its own): a command an agent started would outlive it. Each
    -- agent has read EOF and may exit by itself; what is left of its group
    -- is killed shortly after, as the broker would have done.
    local pids = {}
    for _, a in pairs(state.agents) do
      if type(a.pid) == 'number' and a.pid > 1 then
        pids[#pids + 1] = a.pid
      end
    end
    -- The commands the agents ran through terminal/* lead their own groups.
    for _, s in pairs(state.sessions) do
      for _, t in pairs(s.terminals or {}) do
        if type(t.pid) == 'number' and t.pid > 1 and not compat.present(t.exitStatus) then
          pids[#pids + 1] = t.pid
        end
      end
    end
    if #pids > 0 then
      vim.defer_fn(function()
        for _, pid in ipairs(pids) do
          pcall((vim.uv or vim.loop).kill, -pid, 'sigkill')
        end
      end, 300)
    end
  end
  events.broker_exited(code)
  if not expected then
    local msg = ('(acp) broker exited with code %d; see %s; :AcpStart restarts it'):format(code, M.log_path())
    if #M.stderr > 0 then
      msg = msg .. '\n' .. M.stderr[#M.stderr]
    end
    vim.notify(msg, vim.log.levels.ERROR)
  end
end

function H.create_autocommands()
  local group = vim.api.nvim_create_augroup('AcpBroker', { clear = true })
  vim.api.nvim_create_autocmd('VimLeavePre', {
    group = group,
    callback = function()
      H.leaving = true
    end,
  })
end

return M
