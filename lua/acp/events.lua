--- The controller: receives the broker's events (through acp.broker),
--- updates the model (acp.state) and schedules their effects: User
--- autocommands, notifications, and `state.emit` for the views that
--- subscribed (the prompt, the chat, the login, the commands).
---
--- Each event updates the mirror synchronously and schedules its effects so
--- they run in event order, outside the RPC call.

local compat = require('acp.compat')
local config = require('acp.config')
local decided = require('acp.decided')
local D_DECISION = decided.DECISION
local format = require('acp.format')
local state = require('acp.state')
local text = require('acp.text')
local util = require('acp.util')

local M = {}
local H = {}

-- Module definition ==========================================================

--- Where the broker logs (what it said in its `ready` event, else the
--- default location); set by acp.rpc.
---@type fun(): string
M.log_path = config.log_path

--- The last error a view raised on an event (they must not; for tests).
---@type string|nil
M.view_error = nil

--- Counts the events handled (and agents gone): the views' inputs change
--- only with it (the prompt reuses a layout while it stays the same).
---@type integer
M.seq = 0

--- Updates the mirror for one broker event and schedules its effects.
---@param name string
---@param data table
---@return boolean
function M.handle(name, data)
  M.seq = M.seq + 1
  if name == 'decided' then
    M.requests = M.requests + 1
    -- An array (acp.decided): readable by name for the log and the views.
    data = decided.wrap(data)
  end
  if not H.is_chunk(name, data) then
    state.log(name, data)
  end
  local handler = H.handlers[name]
  local effect
  if handler ~= nil then
    effect = handler(data)
  end
  -- The chat buffers keep every session's history, window open or not; they
  -- only queue here and draw on a timer (lua/acp/chat/).
  local err = state.try_emit('event', name, data)
  if err ~= nil then
    M.view_error = tostring(err)
  end
  if effect == nil and #state.listeners == 0 and state.listeners_of[name] == nil then
    return true
  end
  -- Queued as (fn, args) without a closure: a burst of thousands of
  -- events (requests decided by rules) allocates no function per event.
  H.push(H.event_effect, effect or false, name, data)
  if name == 'permission' then
    M.asking = M.asking + 1
    M.requests = M.requests + 1
  end
  return true
end

--- `permission` events whose effects (the prompt's window) have not run
--- yet: the chat's drawing waits for them (lua/acp/chat/window.lua), and
--- M.on_asked, when set, is called once the last of them has run.
---@type integer
M.asking = 0
---@type function|nil
M.on_asked = nil
--- How many of the agents' permission requests came (`permission` and
--- `decided` events): the chat tells from it whether requests are coming.
---@type integer
M.requests = 0

--- Runs fn once Neovim may block again (vim.schedule), after every function
--- deferred before it. A burst of events costs one scheduled callback.
---@param fn function
function M.defer(fn)
  H.push(H.call, fn, nil, nil)
end

--- The deferred calls, four slots each: fn, a, b, c (called fn(a, b, c)).
H.deferred = { n = 0 }

function H.push(fn, a, b, c)
  local q = H.deferred
  local n = q.n
  q[n + 1], q[n + 2], q[n + 3], q[n + 4] = fn, a, b, c
  q.n = n + 4
  if n == 0 then
    vim.schedule(H.run_deferred)
  end
end

function H.run_deferred()
  local q = H.deferred
  H.deferred = { n = 0 }
  -- Whether a User AcpPermissionDecided autocommand exists, looked up
  -- once for a run of `decided` effects (H.decided_effect).
  H.decided_user = nil
  -- One pcall for the whole queue; after a failure, the rest under another.
  util.each_protected(1, q.n, 4, H.run_one, H.run_failed, q)
end

function H.run_one(q, i)
  q[i](q[i + 1], q[i + 2], q[i + 3])
end

function H.run_failed(_, _, err)
  vim.notify('(acp) internal error: ' .. tostring(err), vim.log.levels.ERROR)
end

function H.call(fn)
  H.decided_user = nil
  fn()
end

--- The effects of one broker event: the handler's, then the listeners.
function H.event_effect(effect, name, data)
  if name == 'permission' and M.asking > 0 then
    M.asking = M.asking - 1
  end
  if effect ~= H.decided_effect then
    -- Other effects fire autocommands, which may define others.
    H.decided_user = nil
  end
  if effect then
    effect(data)
  end
  if name == 'permission' and M.asking == 0 and M.on_asked ~= nil then
    M.on_asked()
  end
  H.call_listeners(state.listeners, name, data)
  local only = state.listeners_of[name]
  if only ~= nil then
    H.call_listeners(only, name, data)
  end
end

function H.call_listeners(list, name, data)
  for i = 1, #list do
    local ok, err = pcall(list[i], name, data)
    if not ok then
      vim.notify('(acp) listener error: ' .. tostring(err), vim.log.levels.ERROR)
    end
  end
end

--- The broker died: clean up as if every agent exited.
---@param code integer
function M.broker_exited(code)
  M.seq = M.seq + 1
  local names = vim.tbl_keys(state.agents)
  table.sort(names)
  for _, name in ipairs(names) do
    local effect = H.agent_gone(name, {
      agent = name,
      by = 'broker_exit',
      message = ('the broker exited (code %d)'):format(code),
      quiet = true,
    })
    M.defer(effect)
  end
  -- Prompts of agents the mirror did not know (should not happen).
  local leftover = H.resolve_all(function()
    return true
  end, 'broker_exit')
  M.defer(leftover)
  -- Runtime yolo and modes die with the broker.
  state.settings = {}
  state.drop_waiters()
end

-- Helper functionality =======================================================

H.handlers = {}

--- A handler of events about a session: fn(s, d) with the session's mirror
--- (created on first use); an event that names no session is ignored.
function H.for_session(fn)
  return function(d)
    local s = H.session_of(d)
    if s ~= nil then
      return fn(s, d)
    end
  end
end


--- What the person has been told already, so each notice comes once per
--- Neovim session: untrusted roots, settings errors and warnings by text.
H.told = { untrusted = {}, errors = {}, warnings = {}, closed = {} }

--- The mirror of the session event `d` is about (created on first use),
--- or nil when it names none.
function H.session_of(d)
  local session = compat.str(d.session)
  return session and state.session(session, d.agent) or nil
end

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
  state.agents[name] = state.agents[name] or { name = name, prompts = 0, stopping = false, cwd = vim.fn.getcwd() }
  state.agents[name].pid = d.pid
end

function H.handlers.agent_ready(d)
  local a = state.agents[d.agent or '']
  if a then
    a.info = d
  end
end

function H.handlers.session_new(d)
  local name, session = compat.str(d.agent), compat.str(d.session)
  if name == nil or session == nil then
    return
  end
  local a = state.agents[name]
  if a == nil then
    a = { name = name, prompts = 0, stopping = false }
    state.agents[name] = a
  end
  a.session = session
  a.cwd = compat.str(d.cwd) or a.cwd
  local s = state.session(session, name)
  s.cwd = a.cwd
  if compat.present(d.modes) then
    s.modes = d.modes
    s.current_mode = compat.str(d.modes.currentModeId) or s.current_mode
  end
  s.loading = false
  local resumed, reused = d.resumed == true, d.reused == true
  return function()
    state.remember_session(name, s.cwd, session)
    local msg = ('(acp) %s: session %s'):format(name, resumed and 'resumed' or 'ready')
    if reused then
      msg = ('(acp) %s: session %s reused (:AcpNew starts a new conversation)'):format(name, session)
    end
    vim.notify(msg, vim.log.levels.INFO)
  end
end

H.handlers.session_loading = H.for_session(function(s, d)
  s.cwd = compat.str(d.cwd) or s.cwd
  s.loading = true
end)

H.handlers.mode_set = H.for_session(function(s, d)
  s.current_mode = compat.str(d.modeId)
  if d.by == 'broker' then
    return -- the broker keeping the asking posture: the posture event tells
  end
  return function()
    vim.notify(('(acp) %s: agent mode %s'):format(tostring(d.agent), tostring(s.current_mode)), vim.log.levels.INFO)
  end
end)

--- The agent's asking posture for a session (design §6): 'asking' once the
--- broker has put it in its asking mode, else 'unverified' with a reason.
--- The person is told before the first prompt; prompts are not blocked.
H.handlers.posture = H.for_session(function(s, d)
  local before = s.posture_reason
  s.posture = compat.str(d.posture) or 'unverified'
  s.posture_reason = compat.str(d.reason)
  s.posture_family = compat.str(d.family)
  s.default_mode = compat.str(d.defaultMode) -- the agent's mode :AcpMode default sets
  if s.posture ~= 'unverified' or s.posture_reason == before then
    return
  end
  return function()
    vim.notify(
      ('(acp) %s: %s — it may act without asking you. Prompts still go to it; :checkhealth acp, :AcpLog'):format(
        tostring(d.agent),
        tostring(s.posture_reason)
      ),
      vim.log.levels.WARN
    )
  end
end)

function H.handlers.terminal(d)
  local id = compat.str(d.terminalId)
  local s = id and H.session_of(d)
  if s then
    s.terminals = s.terminals or {}
    s.terminals[id] = d
  end
end

function H.handlers.auth_required(d)
  local name = compat.str(d.agent)
  local a = name and state.agents[name]
  if a == nil then
    return
  end
  local methods = {}
  for _, m in ipairs((a.info and type(a.info.authMethods) == 'table') and a.info.authMethods or {}) do
    -- Terminal logins are run by the person, never sent to `authenticate`.
    if type(m) == 'table' and compat.str(m.id) and m.type ~= 'terminal' then
      methods[#methods + 1] = m
    end
  end
  return function()
    state.emit('auth_required', name, methods)
  end
end

function H.handlers.authenticated(d)
  return function()
    vim.notify(('(acp) %s: logged in (%s)'):format(tostring(d.agent), tostring(d.methodId)), vim.log.levels.INFO)
  end
end

function H.handlers.update(d)
  local u = d.update
  local s = type(u) == 'table' and H.session_of(d)
  if not s then
    return
  end
  if u.sessionUpdate == 'agent_message_chunk' and type(u.content) == 'table' and type(u.content.text) == 'string' then
    -- The agent's last message of the turn is what the turn-end note shows
    -- (until the chat buffer exists). A new messageId, or a tool call in
    -- between, starts a new message; only a bounded tail is kept.
    local id = compat.str(u.messageId)
    if s.reply_done or (id ~= nil and id ~= s.reply_id) then
      s.reply, s.reply_done = nil, false
    end
    s.reply_id = id
    local t = u.content.text
    -- A joined update can hold a batch of text: only its tail is copied.
    s.reply = #t >= 600 and t:sub(-600) or ((s.reply or '') .. t):sub(-600)
  elseif u.sessionUpdate == 'tool_call' or u.sessionUpdate == 'tool_call_update' then
    s.reply_done = true
    state.upsert_tool(s, u)
  elseif u.sessionUpdate == 'current_mode_update' then
    s.current_mode = compat.str(u.currentModeId) or s.current_mode
  end
end

function H.handlers.turn_start(d)
  local s = H.session_of(d)
  if s ~= nil then
    s.reply = nil
  end
  local a = state.agents[d.agent or '']
  if a and a.prompts == 0 then
    -- A prompt this Neovim did not send through prompt() (e.g. another
    -- client of the API); still busy until it ends.
    a.prompts = 1
  end
end

function H.handlers.turn_end(d)
  local a = state.agents[d.agent or '']
  if a then
    a.prompts = math.max(0, a.prompts - 1)
  end
  local data = { session = d.session, stopReason = d.stopReason, message = d.message }
  -- Stopping the agent ends its turn with 'error'; that is no news.
  local quiet = a ~= nil and a.stopping
  local session = compat.str(d.session)
  local reply = session and state.sessions[session] and state.sessions[session].reply
  return function()
    compat.fire_user('AcpTurnEnd', H.log_user('AcpTurnEnd', data))
    if d.stopReason == 'error' and not quiet then
      vim.notify(
        ('(acp) %s: the turn failed: %s'):format(tostring(d.agent), compat.str(d.message) or 'unknown error'),
        vim.log.levels.ERROR
      )
    elseif d.stopReason ~= 'error' then
      local msg = ('(acp) %s [%s] %s'):format(tostring(d.agent), tostring(d.stopReason), text.squash(reply))
      -- One screen line: a wrapped message would stop for "Press ENTER".
      vim.notify(text.truncate(msg, vim.o.columns - 12), vim.log.levels.INFO)
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
  -- Kept while the prompt waits (10,000 may wait): the fields that are
  -- absent are left out of the constructor, which would size the table
  -- for every key named in it, nil or not.
  local req = {
    id = id,
    agent = compat.str(d.agent) or '?',
    session = compat.str(d.session) or '',
    toolCallId = compat.str(d.toolCallId) or compat.str(tc.toolCallId) or '',
    options = options,
    toolCall = tc,
    narrow = H.strings(d.narrow),
    broad = H.strings(d.broad),
    t = compat.now_ms(),
  }
  req.title, req.kind = d.title, d.kind
  req.reason, req.rule, req.source = compat.str(d.reason), compat.str(d.rule), compat.str(d.source)
  req.command = compat.str(d.command)
  req.allowOption, req.rejectOption = compat.str(d.allowOption), compat.str(d.rejectOption)
  -- The atoms matter (the prompt's "Judged:" line) unless they are the
  -- command alone.
  local atoms = H.atoms(d.atoms)
  if #atoms > 1 or (atoms[1] ~= nil and (atoms[1].inner or atoms[1].text ~= req.command)) then
    req.atoms = atoms
  end
  if state.pending[id] == nil then
    table.insert(state.order, id)
  end
  state.pending[id] = req
  -- The request's toolCall is an upsert too (agents ask about calls they
  -- never announced).
  local s = state.session(req.session, req.agent)
  -- upsert_tool copies the fields: a copy with the id is made only when
  -- the request's id is not the tool call's own.
  state.upsert_tool(s, tc.toolCallId == req.toolCallId and tc or vim.tbl_extend('force', tc, { toolCallId = req.toolCallId }))
  local data = {
    id = id,
    session = req.session,
    toolCallId = req.toolCallId,
    title = state.title(req),
    kind = state.kind(req),
  }
  return function()
    compat.fire_user('AcpPermissionRequest', H.log_user('AcpPermissionRequest', data))
    state.emit('pending')
  end
end

function H.handlers.permission_resolved(d)
  local req = state.pending[d.id]
  if req == nil then
    return
  end
  state.remove_pending(d.id)
  -- Counted for the exit message ("1 pending permission prompt was
  -- cancelled"): the broker cancels them just before agent_exit.
  local a = state.agents[req.agent]
  if a and d.outcome ~= 'selected' and (d.by == 'agent_exit' or (a.stopping and d.by == 'cancel')) then
    a.cancelled_by_exit = (a.cancelled_by_exit or 0) + 1
  end
  return H.resolved_effect(req, d.outcome, d.optionId, d.by)
end

function H.handlers.agent_exit(d)
  local name = compat.str(d.agent)
  if name == nil or state.agents[name] == nil then
    return
  end
  return H.agent_gone(name, d)
end

function H.handlers.decided()
  -- Nothing is copied here: an agent can have thousands of requests decided
  -- per second. The effect reads the event itself (H.decided_effect).
  return H.decided_effect
end

--- The data of `User AcpPermissionDecided` for a `decided` event d (an
--- array, acp.decided).
function H.decided_data(d)
  local session = compat.str(rawget(d, decided.SESSION)) or ''
  local tcid = compat.str(rawget(d, decided.TOOL_CALL_ID)) or ''
  local s = state.sessions[session]
  local known = s and s.tools[tcid] or {}
  local kind = compat.str(rawget(d, decided.KIND))
  local command = compat.str(rawget(d, decided.COMMAND))
  return {
    agent = compat.str(rawget(d, decided.AGENT)),
    session = session,
    toolCallId = tcid,
    title = decided.title(d) or compat.str(known.title) or kind or 'a tool call',
    kind = kind or compat.str(known.kind) or 'other',
    decision = compat.str(rawget(d, decided.DECISION)) or '?',
    optionId = compat.str(rawget(d, decided.OPTION_ID)),
    reason = compat.str(rawget(d, decided.REASON)),
    rule = compat.str(rawget(d, decided.RULE)),
    source = compat.str(rawget(d, decided.SOURCE)),
    by = compat.str(rawget(d, decided.BY)),
    command = command,
    atoms = decided.atoms(d, command),
  }
end

--- The effect of a `decided` event d: `User AcpPermissionDecided` (its data
--- built only when such an autocommand exists), a warning for a denial, the
--- folded echo for allows (formatted once, for the last of a burst).
function H.decided_effect(d)
  if H.decided_user == nil then
    H.decided_user = compat.has_user('AcpPermissionDecided')
  end
  local data
  if H.decided_user then
    data = H.decided_data(d)
    compat.fire_user('AcpPermissionDecided', H.log_user('AcpPermissionDecided', data))
    -- The autocommand may have defined or deleted others.
    H.decided_user = nil
  end
  local decision = d[D_DECISION]
  if decision == 'deny' then
    data = data or H.decided_data(d)
    vim.notify(('(acp) denied %s: %s'):format(text.squash(data.title), format.why(data)), vim.log.levels.WARN)
    H.decided_user = nil
  elseif decision == 'allow' then
    H.echo_allowed(d)
  end
end

--- A tool call that acted without a request the broker saw, where the
--- policy would have asked or denied (the broker audited it as `unasked`).
function H.handlers.unasked(d)
  local session = compat.str(d.session) or ''
  local tcid = compat.str(d.toolCallId) or ''
  local s = state.session(session, d.agent)
  s.unasked = (s.unasked or 0) + 1
  local known = s.tools[tcid] or {}
  local paths = H.strings(d.paths)
  local data = {
    agent = compat.str(d.agent),
    session = session,
    toolCallId = tcid,
    title = compat.str(d.title) or compat.str(known.title) or compat.str(d.kind) or 'a tool call',
    kind = compat.str(d.kind) or compat.str(known.kind) or 'other',
    command = compat.str(d.command),
    paths = paths,
    decision = compat.str(d.decision) or '?',
    reason = compat.str(d.reason),
    rule = compat.str(d.rule),
    source = compat.str(d.source),
  }
  return function()
    compat.fire_user('AcpUnasked', H.log_user('AcpUnasked', data))
    local what = data.command or (#paths > 0 and table.concat(paths, ', ')) or data.title
    vim.notify(
      ('(acp) %s acted WITHOUT ASKING: %s %s (the policy would have %s: %s)'):format(
        tostring(data.agent),
        data.kind,
        text.squash(what),
        data.decision == 'deny' and 'denied it' or 'asked you',
        format.why(data)
      ),
      data.decision == 'deny' and vim.log.levels.ERROR or vim.log.levels.WARN
    )
  end
end

function H.handlers.settings(d)
  local root = compat.str(d.root)
  if root == nil then
    return
  end
  local st = {
    root = root,
    mode = compat.str(d.mode) or 'default',
    yolo = d.yolo == true,
    yoloSource = compat.str(d.yoloSource),
    veto = d.veto == true,
    vetoSource = compat.str(d.vetoSource),
    trusted = d.trusted == true,
    hasPermissive = d.hasPermissive == true,
    permissive = compat.present(d.permissive) and d.permissive or nil,
    errors = H.strings(d.errors),
    warnings = H.strings(d.warnings),
    failClosed = H.fail_closed(d.failClosed),
  }
  state.settings[root] = st
  -- A broken file's error is part of the fail-closed message: one notice
  -- per root and message, again when it changes or breaks anew.
  local closed, own = nil, {}
  if st.failClosed then
    for _, f in ipairs(st.failClosed.files) do
      own[f.error] = true
    end
    if H.told.closed[root] ~= st.failClosed.message then
      closed = st.failClosed.message
    end
  end
  H.told.closed[root] = st.failClosed and st.failClosed.message or nil
  local other = {}
  for _, e in ipairs(st.errors) do
    if not own[e] then
      other[#other + 1] = e
    end
  end
  local errors, warnings = H.news(H.told.errors, other), H.news(H.told.warnings, st.warnings)
  local untrusted = false
  -- (While a file fails closed, trust is suspended and :AcpTrust refused:
  -- the notice waits until it is fixed.)
  if st.hasPermissive and not st.trusted and not st.failClosed then
    untrusted = not H.told.untrusted[root]
    H.told.untrusted[root] = true
  else
    -- Trusted now: a later change of the files is worth telling again.
    H.told.untrusted[root] = nil
  end
  local waiter = state.take_waiter('settings', root)
  return function()
    if closed then
      -- The broker's text names file:line:column and what is suspended.
      vim.notify('(acp) ' .. closed, vim.log.levels.ERROR)
    end
    if #errors > 0 then
      vim.notify('(acp) ' .. table.concat(errors, '; '), vim.log.levels.ERROR)
    end
    if #warnings > 0 then
      vim.notify('(acp) settings: ' .. table.concat(warnings, '; '), vim.log.levels.WARN)
    end
    if untrusted then
      local items = format.describe_permissive(st.permissive, { sources = false })
      local what = #items > 0 and (' (' .. text.shorten(items, 3) .. ')') or ''
      vim.notify(
        ("(acp) this project's settings allow more%s but are not trusted: :AcpTrust to review and enable them"):format(what),
        vim.log.levels.WARN
      )
    end
    if waiter then
      waiter(st)
    end
  end
end

function H.handlers.rules(d)
  local root = compat.str(d.root) or ''
  local waiter = state.take_waiter('rules', root)
  return function()
    if waiter then
      waiter(d)
    else
      state.emit('rules', d)
    end
  end
end

function H.handlers.rule_added(d)
  local list, rule, scope = compat.str(d.list) or '?', compat.str(d.rule) or '?', compat.str(d.scope)
  local file = compat.str(d.file)
  local where
  if scope == 'session' then
    where = 'for this session'
  elseif file then
    where = 'to ' .. vim.fn.fnamemodify(file, ':~:.')
  else
    where = ('(%s)'):format(scope or '?')
  end
  local note = compat.str(d.note)
  return function()
    local msg = ('(acp) added %s rule %s %s'):format(list, rule, where)
    if note then
      vim.notify(msg .. '; ' .. note, vim.log.levels.WARN)
    else
      vim.notify(msg, vim.log.levels.INFO)
    end
  end
end

function H.handlers.trusted(d)
  local root = compat.str(d.root) or '?'
  local items = format.describe_permissive(d.enabled)
  return function()
    local what = #items > 0 and ('; now in force: ' .. table.concat(items, ', ')) or '; it enables nothing beyond the defaults'
    vim.notify(('(acp) trusted the settings of %s%s'):format(vim.fn.fnamemodify(root, ':~'), what), vim.log.levels.INFO)
  end
end

function H.handlers.error(d)
  -- A refused command gets this instead of the answer it waited for.
  state.drop_waiters()
  return function()
    local who = compat.str(d.agent)
    local msg = compat.str(d.message) or 'unknown error'
    vim.notify(('(acp) %s%s'):format(who and (who .. ': ') or '', msg), vim.log.levels.ERROR)
    -- An answer the broker refused leaves its prompt pending: show it again.
    state.emit('error')
  end
end

function H.strings(v)
  local list = {}
  if type(v) == 'table' then
    for _, x in ipairs(v) do
      if compat.str(x) then
        list[#list + 1] = compat.str(x)
      end
    end
  end
  return list
end

--- The broker's failClosed value (settings files that cannot be used), or nil.
---@return acp.FailClosed|nil
function H.fail_closed(v)
  if type(v) ~= 'table' or compat.str(v.message) == nil then
    return nil
  end
  local files = {}
  for _, f in ipairs(type(v.files) == 'table' and v.files or {}) do
    if type(f) == 'table' and compat.str(f.file) then
      files[#files + 1] = {
        file = compat.str(f.file),
        error = compat.str(f.error) or compat.str(f.file),
        scope = compat.str(f.scope) or 'project',
      }
    end
  end
  return { message = compat.str(v.message), scope = compat.str(v.scope) or 'project', files = files }
end

--- The entries of `list` not in the set `seen` (which learns them).
function H.news(seen, list)
  local new = {}
  for _, x in ipairs(list) do
    if not seen[x] then
      seen[x] = true
      new[#new + 1] = x
    end
  end
  return new
end

--- Why the broker decided: its reason, plus the rule and its file when the
--- reason does not name them.
--- The atoms of a permission or decided event, as the broker judged them.
---@param v any
---@return {kind: string, text: string, inner: boolean|nil}[]
function H.atoms(v)
  local out = {}
  for _, a in ipairs(type(v) == 'table' and v or {}) do
    if type(a) == 'table' and compat.str(a.text) then
      out[#out + 1] = { kind = compat.str(a.kind) or 'other', text = a.text, inner = a.inner == true }
    end
  end
  return out
end

--- Echoes one line about automatic allows without a hit-enter prompt:
--- allows that come in a burst are folded into one message.
--- Echoes "acp: allowed {title}: {why}" for a decision; a burst within
--- 30 ms is one message counting them (formatted once, for the last).
---@param d table the `decided` event
function H.echo_allowed(d)
  H.allowed = H.allowed or { n = 0 }
  local a = H.allowed
  a.n, a.last = a.n + 1, d
  if a.timer then
    return
  end
  a.timer = true
  -- A function of its own, not a closure: a function that makes one
  -- returns through bytecode UCLO, which LuaJIT does not compile.
  vim.defer_fn(H.echo_allowed_now, 30)
end

function H.echo_allowed_now()
  local a = H.allowed
  local data = H.decided_data(a.last)
  local last = ('%s: %s'):format(text.squash(data.title), format.why(data))
  local msg = a.n > 1 and ('acp: %d requests allowed; last: %s'):format(a.n, last) or ('acp: allowed ' .. last)
  a.n, a.last, a.timer = 0, nil, false
  vim.api.nvim_echo({ { text.truncate(msg, vim.o.columns - 12), 'None' } }, true, {})
end

function H.log_user(pattern, data)
  state.log(pattern, data)
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
    state.emit('resolved', req.id)
    compat.fire_user('AcpPermissionResolved', H.log_user('AcpPermissionResolved', data))
  end
end

--- Resolves (cancelled) every pending prompt for which `pred(req)` holds;
--- returns the effect and the count.
function H.resolve_all(pred, by)
  local effects = {}
  for _, req in ipairs(state.pending_list()) do
    if pred(req) then
      state.remove_pending(req.id)
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
  local a = state.agents[name]
  state.agents[name] = nil
  if state.current == name then
    state.current = state.latest_agent()
  end
  local resolve, n = H.resolve_all(function(req)
    return req.agent == name
  end, d.by or 'agent_exit')
  n = n + (a.cancelled_by_exit or 0)
  for sid, s in pairs(state.sessions) do
    if s.agent == name then
      state.sessions[sid] = nil
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
    if msg and msg:find('; its last stderr: ', 1, true) then
      extra = '' -- said below, line by line
    end
    if a.session == nil then
      -- Typically a missing sign-in or a bad flag.
      extra = extra .. ' before its session was ready'
    end
    -- What the agent last wrote to stderr (the broker keeps a few short
    -- lines), and the log that has all of it.
    local lines = { ("(acp) agent '%s' exited (%s)%s%s"):format(a.name, how, extra, cancelled) }
    local tail = type(d.stderr) == 'table' and d.stderr or {}
    if #tail > 0 then
      lines[#lines + 1] = 'Its last stderr:'
      for i = 1, math.min(#tail, 5) do
        lines[#lines + 1] = '  ' .. tostring(tail[i])
      end
    end
    lines[#lines + 1] = 'Log: ' .. (compat.str(d.log) or M.log_path())
    vim.notify(table.concat(lines, '\n'), vim.log.levels.WARN)
  end
end


return M
