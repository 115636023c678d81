--- The Lua mirror of the broker's state: agents, sessions, tool calls and
--- pending permission prompts, updated from broker events.
---
--- The broker is the authority; this mirror only lets the UI and the API
--- answer at once (status(), pending()). Each event updates the mirror
--- synchronously and schedules its effects (User autocmds, notifications,
--- the prompt window) so they run in event order, outside the RPC call.

local compat = require('acp.compat')

local M = {}
local H = {}

-- Module definition ==========================================================

---@class acp.Agent
---@field name string
---@field session string|nil
---@field cwd string
---@field pid integer|nil
---@field prompts integer prompts sent and not yet ended (busy while > 0)
---@field stopping boolean
---@field info table|nil agent_ready data

---@type table<string, acp.Agent>
M.agents = {}

--- Name of the most recently started agent.
---@type string|nil
M.current = nil

---@class acp.Pending
---@field id integer broker token
---@field agent string
---@field session string
---@field toolCallId string
---@field title any
---@field kind any
---@field options table[]
---@field toolCall table
---@field t number arrival (ms, monotonic)

---@type table<integer, acp.Pending>
M.pending = {}

--- Tokens of pending prompts, oldest first.
---@type integer[]
M.order = {}

--- session id -> {agent, cwd, modes, tools = {toolCallId -> merged tool call}, tool_order}
M.sessions = {}

--- The last events seen, oldest first (bounded): broker events by their
--- protocol name (streamed message chunks left out), autocmds by their
--- pattern. For tests and debugging.
---@type {event: string, data: table}[]
M.events = {}
M.max_events = 200

--- Most tool calls remembered per session (for titles and prompt bodies).
M.max_tools = 500

--- Functions called as fn(name, data) after each broker event (after the
--- mirror is updated, from the scheduled effects). For other modules.
M.listeners = {}

---@param fn fun(name: string, data: table)
function M.subscribe(fn)
  table.insert(M.listeners, fn)
end

--- Updates the mirror for one broker event and schedules its effects.
---@param name string
---@param data table
---@return boolean
function M.handle(name, data)
  if not H.is_chunk(name, data) then
    M.log(name, data)
  end
  local handler = H.handlers[name]
  local effect
  if handler ~= nil then
    effect = handler(data)
  end
  if effect == nil and #M.listeners == 0 then
    return true
  end
  vim.schedule(function()
    if effect ~= nil then
      effect()
    end
    for _, fn in ipairs(M.listeners) do
      local ok, err = pcall(fn, name, data)
      if not ok then
        vim.notify('(acp) listener error: ' .. tostring(err), vim.log.levels.ERROR)
      end
    end
  end)
  return true
end

---@param event string
---@param data table
function M.log(event, data)
  table.insert(M.events, { event = event, data = data })
  if #M.events > M.max_events then
    table.remove(M.events, 1)
  end
end

--- Records that `name` is being started in `cwd` and makes it current.
function M.agent_starting(name, cwd)
  M.agents[name] = M.agents[name] or { name = name, prompts = 0, stopping = false }
  M.agents[name].cwd = cwd
  H.seq = H.seq + 1
  M.agents[name].seq = H.seq
  M.current = name
end

---@param name string|nil
---@return acp.Agent|nil
function M.agent(name)
  return M.agents[name or M.current or '']
end

--- Records a prompt sent to `name` (busy until its turn ends).
function M.prompt_sent(name)
  local a = M.agents[name]
  if a then
    a.prompts = a.prompts + 1
  end
end

function M.agent_stopping(name)
  local a = M.agents[name]
  if a then
    a.stopping = true
  end
end

---@param name string|nil
---@return boolean
function M.busy(name)
  local a = M.agent(name)
  return a ~= nil and a.prompts > 0
end

--- Pending prompts, oldest first (internal records).
---@return acp.Pending[]
function M.pending_list()
  local list = {}
  for _, id in ipairs(M.order) do
    list[#list + 1] = M.pending[id]
  end
  return list
end

--- 1-based position of `id` in the queue, and the queue length.
---@return integer|nil pos
---@return integer total
function M.position(id)
  for i, v in ipairs(M.order) do
    if v == id then
      return i, #M.order
    end
  end
  return nil, #M.order
end

--- The tool call as known from `update` events merged with the request's
--- `toolCall` (the request wins where it has a value).
---@param req acp.Pending
---@return table
function M.tool_call(req)
  local merged = {}
  local s = M.sessions[req.session]
  local known = s and s.tools[req.toolCallId]
  for k, v in pairs(known or {}) do
    merged[k] = v
  end
  for k, v in pairs(type(req.toolCall) == 'table' and req.toolCall or {}) do
    if compat.present(v) then
      merged[k] = v
    end
  end
  return merged
end

--- Title of a pending prompt: the request's, else the last title seen for its
--- tool call, else its kind.
---@param req acp.Pending
---@return string
function M.title(req)
  local tc = M.tool_call(req)
  return compat.str(req.title) or compat.str(tc.title) or M.kind(req)
end

---@param req acp.Pending
---@return string
function M.kind(req)
  local tc = M.tool_call(req)
  return compat.str(req.kind) or compat.str(tc.kind) or 'other'
end

--- The public shape of a pending prompt (:help acp-api).
---@param req acp.Pending
function M.public(req)
  local options = {}
  for _, o in ipairs(req.options) do
    options[#options + 1] = { optionId = o.optionId, name = o.name, kind = o.kind }
  end
  return {
    id = req.id,
    session = req.session,
    toolCallId = req.toolCallId,
    title = M.title(req),
    kind = M.kind(req),
    options = options,
  }
end

--- The broker died: clean up as if every agent exited.
---@param code integer
function M.broker_exited(code)
  local names = vim.tbl_keys(M.agents)
  table.sort(names)
  for _, name in ipairs(names) do
    local effect = H.agent_gone(name, {
      agent = name,
      by = 'broker_exit',
      message = ('the broker exited (code %d)'):format(code),
      quiet = true,
    })
    vim.schedule(effect)
  end
  -- Prompts of agents the mirror did not know (should not happen).
  local leftover = H.resolve_all(function()
    return true
  end, 'broker_exit')
  vim.schedule(leftover)
end

-- Helper functionality =======================================================

H.handlers = {}
H.seq = 0

--- Streamed text would push everything else out of the bounded event log.
function H.is_chunk(name, data)
  if name ~= 'update' or type(data.update) ~= 'table' then
    return false
  end
  local kind = data.update.sessionUpdate
  return kind == 'agent_message_chunk' or kind == 'agent_thought_chunk' or kind == 'user_message_chunk'
end

function H.handlers.agent_started(d)
  local name = compat.str(d.agent)
  if name == nil then
    return
  end
  M.agents[name] = M.agents[name] or { name = name, prompts = 0, stopping = false, cwd = vim.fn.getcwd() }
  M.agents[name].pid = d.pid
end

function H.handlers.agent_ready(d)
  local a = M.agents[d.agent or '']
  if a then
    a.info = d
  end
end

function H.handlers.session_new(d)
  local name, session = compat.str(d.agent), compat.str(d.session)
  if name == nil or session == nil then
    return
  end
  local a = M.agents[name]
  if a == nil then
    a = { name = name, prompts = 0, stopping = false }
    M.agents[name] = a
  end
  a.session = session
  a.cwd = compat.str(d.cwd) or a.cwd
  local s = H.session(session, name)
  s.cwd = a.cwd
  s.modes = d.modes
  return function()
    vim.notify(('(acp) %s: session ready'):format(name), vim.log.levels.INFO)
  end
end

function H.handlers.update(d)
  local u = d.update
  local session = compat.str(d.session)
  if type(u) ~= 'table' or session == nil then
    return
  end
  local s = H.session(session, d.agent)
  if u.sessionUpdate == 'agent_message_chunk' and type(u.content) == 'table' and type(u.content.text) == 'string' then
    -- The agent's last message of the turn is what the turn-end note shows
    -- (until the chat buffer exists). A new messageId, or a tool call in
    -- between, starts a new message; only a bounded tail is kept.
    local id = compat.str(u.messageId)
    if s.reply_done or (id ~= nil and id ~= s.reply_id) then
      s.reply, s.reply_done = nil, false
    end
    s.reply_id = id
    s.reply = ((s.reply or '') .. u.content.text):sub(-600)
  elseif u.sessionUpdate == 'tool_call' or u.sessionUpdate == 'tool_call_update' then
    s.reply_done = true
    H.upsert_tool(s, u)
  elseif u.sessionUpdate == 'current_mode_update' then
    s.current_mode = u.currentModeId
  end
end

function H.handlers.turn_start(d)
  local session = compat.str(d.session)
  if session ~= nil then
    H.session(session, d.agent).reply = nil
  end
  local a = M.agents[d.agent or '']
  if a and a.prompts == 0 then
    -- A prompt this Neovim did not send through prompt() (e.g. another
    -- client of the API); still busy until it ends.
    a.prompts = 1
  end
end

function H.handlers.turn_end(d)
  local a = M.agents[d.agent or '']
  if a then
    a.prompts = math.max(0, a.prompts - 1)
  end
  local data = { session = d.session, stopReason = d.stopReason, message = d.message }
  -- Stopping the agent ends its turn with 'error'; that is no news.
  local quiet = a ~= nil and a.stopping
  local session = compat.str(d.session)
  local reply = session and M.sessions[session] and M.sessions[session].reply
  return function()
    compat.fire_user('AcpTurnEnd', H.log_user('AcpTurnEnd', data))
    if d.stopReason == 'error' and not quiet then
      vim.notify(
        ('(acp) %s: the turn failed: %s'):format(tostring(d.agent), compat.str(d.message) or 'unknown error'),
        vim.log.levels.ERROR
      )
    elseif d.stopReason ~= 'error' then
      local msg = ('(acp) %s [%s] %s'):format(tostring(d.agent), tostring(d.stopReason), H.one_line(reply))
      -- One screen line: a wrapped message would stop for "Press ENTER".
      local max = vim.o.columns - 12
      if vim.fn.strdisplaywidth(msg) > max then
        msg = vim.fn.strcharpart(msg, 0, max - 1) .. '…'
      end
      vim.notify(msg, vim.log.levels.INFO)
    end
  end
end

function H.handlers.permission(d)
  local id = d.id
  if type(id) ~= 'number' then
    error('(acp) permission event without a numeric id')
  end
  local options = {}
  for _, o in ipairs(type(d.options) == 'table' and d.options or {}) do
    if type(o) == 'table' then
      options[#options + 1] = o
    end
  end
  local tc = type(d.toolCall) == 'table' and d.toolCall or {}
  local req = {
    id = id,
    agent = compat.str(d.agent) or '?',
    session = compat.str(d.session) or '',
    toolCallId = compat.str(d.toolCallId) or compat.str(tc.toolCallId) or '',
    title = d.title,
    kind = d.kind,
    options = options,
    toolCall = tc,
    t = compat.now_ms(),
  }
  if M.pending[id] == nil then
    table.insert(M.order, id)
  end
  M.pending[id] = req
  -- The request's toolCall is an upsert too (agents ask about calls they
  -- never announced).
  local s = H.session(req.session, req.agent)
  H.upsert_tool(s, vim.tbl_extend('force', tc, { toolCallId = req.toolCallId }))
  local data = {
    id = id,
    session = req.session,
    toolCallId = req.toolCallId,
    title = M.title(req),
    kind = M.kind(req),
  }
  return function()
    compat.fire_user('AcpPermissionRequest', H.log_user('AcpPermissionRequest', data))
    require('acp.prompt').refresh()
  end
end

function H.handlers.permission_resolved(d)
  local req = M.pending[d.id]
  if req == nil then
    return
  end
  H.remove_pending(d.id)
  -- Counted for the exit message ("1 pending permission prompt was
  -- cancelled"): the broker cancels them just before agent_exit.
  local a = M.agents[req.agent]
  if a and d.outcome ~= 'selected' and (d.by == 'agent_exit' or (a.stopping and d.by == 'cancel')) then
    a.cancelled_by_exit = (a.cancelled_by_exit or 0) + 1
  end
  return H.resolved_effect(req, d.outcome, d.optionId, d.by)
end

function H.handlers.agent_exit(d)
  local name = compat.str(d.agent)
  if name == nil or M.agents[name] == nil then
    return
  end
  return H.agent_gone(name, d)
end

function H.handlers.error(d)
  return function()
    local who = compat.str(d.agent)
    local msg = compat.str(d.message) or 'unknown error'
    vim.notify(('(acp) %s%s'):format(who and (who .. ': ') or '', msg), vim.log.levels.ERROR)
    -- An answer the broker refused leaves its prompt pending: show it again.
    require('acp.prompt').on_error()
  end
end

function H.one_line(text)
  return text and vim.trim((text:gsub('%s+', ' '))) or ''
end

function H.session(id, agent)
  local s = M.sessions[id]
  if s == nil then
    s = { agent = compat.str(agent), tools = {}, tool_order = {} }
    M.sessions[id] = s
  end
  return s
end

--- `tool_call`, `tool_call_update` and a request's `toolCall` all upsert:
--- fields with a value replace the stored ones (content/locations whole).
function H.upsert_tool(s, u)
  local id = compat.str(u.toolCallId)
  if id == nil then
    return
  end
  local t = s.tools[id]
  if t == nil then
    t = { toolCallId = id }
    s.tools[id] = t
    table.insert(s.tool_order, id)
    if #s.tool_order > M.max_tools then
      s.tools[table.remove(s.tool_order, 1)] = nil
    end
  end
  for k, v in pairs(u) do
    if k ~= 'sessionUpdate' and compat.present(v) then
      t[k] = v
    end
  end
end

function H.remove_pending(id)
  M.pending[id] = nil
  for i, v in ipairs(M.order) do
    if v == id then
      table.remove(M.order, i)
      break
    end
  end
end

function H.log_user(pattern, data)
  M.log(pattern, data)
  return data
end

function H.resolved_effect(req, outcome, option_id, by)
  local data = {
    id = req.id,
    session = req.session,
    toolCallId = req.toolCallId,
    outcome = compat.str(outcome) or 'cancelled',
    optionId = compat.str(option_id),
    by = compat.str(by),
  }
  return function()
    require('acp.prompt').on_resolved(req.id)
    compat.fire_user('AcpPermissionResolved', H.log_user('AcpPermissionResolved', data))
  end
end

--- Resolves (cancelled) every pending prompt for which `pred(req)` holds;
--- returns the effect and the count.
function H.resolve_all(pred, by)
  local effects = {}
  for _, req in ipairs(M.pending_list()) do
    if pred(req) then
      H.remove_pending(req.id)
      effects[#effects + 1] = H.resolved_effect(req, 'cancelled', nil, by)
    end
  end
  return function()
    for _, e in ipairs(effects) do
      e()
    end
  end, #effects
end

--- An agent is gone (exit, crash or broker exit): its pending prompts are
--- cancelled, a running turn ends with 'error', then AcpAgentExit fires.
function H.agent_gone(name, d)
  local a = M.agents[name]
  M.agents[name] = nil
  if M.current == name then
    M.current = H.latest_agent()
  end
  local resolve, n = H.resolve_all(function(req)
    return req.agent == name
  end, d.by or 'agent_exit')
  n = n + (a.cancelled_by_exit or 0)
  for sid, s in pairs(M.sessions) do
    if s.agent == name then
      M.sessions[sid] = nil
    end
  end
  local turn_end = a.prompts > 0 and a.session ~= nil
  local exit_data = { agent = name, code = d.code, signal = d.signal }
  return function()
    resolve()
    if turn_end then
      local te = { session = a.session, stopReason = 'error', message = compat.str(d.message) or 'the agent exited' }
      compat.fire_user('AcpTurnEnd', H.log_user('AcpTurnEnd', te))
    end
    compat.fire_user('AcpAgentExit', H.log_user('AcpAgentExit', exit_data))
    if not d.quiet then
      H.notify_exit(a, d, n)
    end
  end
end

function H.notify_exit(a, d, n)
  local how
  if compat.present(d.signal) and d.signal ~= 0 and d.signal ~= '' then
    how = 'signal ' .. tostring(d.signal)
  else
    how = 'code ' .. tostring(compat.present(d.code) and d.code or '?')
  end
  local cancelled = ''
  if n > 0 then
    cancelled = ('; %d pending permission prompt%s %s cancelled'):format(n, n == 1 and '' or 's', n == 1 and 'was' or 'were')
  end
  if a.stopping then
    vim.notify(("(acp) agent '%s' stopped%s"):format(a.name, cancelled), vim.log.levels.INFO)
  else
    -- The broker's message often just repeats the status.
    local msg = compat.str(d.message)
    local extra = ''
    if msg and not msg:match('exited with code') and not msg:match('killed by signal') then
      extra = ': ' .. msg
    end
    if a.session == nil then
      -- Typically a missing sign-in or a bad flag: the agent's stderr is in the log.
      extra = extra .. ' before its session was ready; see ' .. require('acp.broker').log_path()
    end
    vim.notify(("(acp) agent '%s' exited (%s)%s%s"):format(a.name, how, extra, cancelled), vim.log.levels.WARN)
  end
end

--- The most recently started agent still alive.
function H.latest_agent()
  local best
  for name, a in pairs(M.agents) do
    if best == nil or (a.seq or 0) > (M.agents[best].seq or 0) then
      best = name
    end
  end
  return best
end

--- The first offered option of a kind ('allow_once', ...): index and option,
--- or nil. Agents offer several options of one kind; the first one wins.
---@param req {options: table[]}
---@param kind string
---@return integer|nil index
---@return table|nil option
function M.first_option(req, kind)
  for i, o in ipairs(req.options or {}) do
    if o.kind == kind then
      return i, o
    end
  end
  return nil, nil
end

return M
