--- The model: the Lua mirror of the broker's state (agents, sessions, tool
--- calls, pending permission prompts, project settings) and a small
--- subscription mechanism for the views.
---
--- The broker is the authority; this mirror only lets the UI and the API
--- answer at once (status(), pending()). acp.events updates it from broker
--- events; views (the chat, the prompt, the commands, the login) subscribe
--- with `on(event, fn)` and are told with `emit(event, ...)`. This module
--- requires no other module of the plugin but acp.compat.

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
---@field reason string|nil why the person is asked (the broker's words)
---@field rule string|nil the rule that made it ask, if one did
---@field source string|nil that rule's file, or the mode
---@field narrow string[] rules "allow for the session/project" would record
---@field broad string[] the broader alternative (`respond(..., {broad = true})`), or {}
---@field command string|nil the shell command the policy analysed
---@field atoms {kind: string, text: string, inner: boolean|nil}[]|nil what it judged; nil when that is the command alone
---@field allowOption string|nil the optionId an allow answers with (the broker's choice)
---@field rejectOption string|nil the optionId a reject answers with (nil: `cancelled`)
---@field t number arrival (ms, monotonic)

---@type table<integer, acp.Pending>
M.pending = {}

--- Tokens of pending prompts, oldest first.
---@type integer[]
M.order = {}

--- session id -> {agent, cwd, modes, tools = {toolCallId -> merged tool call}, tool_order}
M.sessions = {}

--- The event log: the last events seen (M.logged reads them): broker
--- events by their protocol name (streamed message chunks left out),
--- autocmds by their pattern. For tests and debugging. Kept as a ring of
--- references (two slots per event, no table per event: a burst of
--- `decided` events logs thousands a second) of 2 * max_events events.
M.max_events = 200

--- How many events were ever logged (M.logged(from) reads those after).
---@type integer
M.nlogged = 0

--- Most tool calls remembered per session (for titles and prompt bodies).
M.max_tools = 500

---@class acp.Settings
---@field root string
---@field mode string
---@field yolo boolean
---@field yoloSource string|nil what turned yolo on
---@field veto boolean
---@field vetoSource string|nil
---@field trusted boolean
---@field hasPermissive boolean
---@field permissive any what trusting would enable (the broker's shape)
---@field errors string[]
---@field warnings string[]
---@field failClosed acp.FailClosed|nil settings files that cannot be used

---@class acp.FailClosed
---@field message string what is broken and what is suspended, for a person
---@field scope string 'project' or 'everywhere'
---@field files {file: string, error: string, scope: string}[]

--- Project root -> the effective settings the broker last reported.
---@type table<string, acp.Settings>
M.settings = {}

--- Functions called as fn(name, data) after each broker event (after the
--- mirror is updated, from the scheduled effects). For other modules.
M.listeners = {}

--- Event name -> the functions subscribed to that event only (called after
--- M.listeners): an event nobody listens to queues no work for them.
---@type table<string, function[]>
M.listeners_of = {}

---@param fn fun(name: string, data: table)
---@param names string[]|nil only these events (default: every event)
function M.subscribe(fn, names)
  if names == nil then
    table.insert(M.listeners, fn)
    return
  end
  for _, name in ipairs(names) do
    local list = M.listeners_of[name] or {}
    M.listeners_of[name] = list
    list[#list + 1] = fn
  end
end

--- Subscribers by event (see M.on). Events emitted:
---   'event' (name, data)     a broker event updated the mirror (inside the
---                            RPC call: cheap work only)
---   'pending' ()             a permission prompt was added
---   'answered' (id)          the person answered a prompt from here
---   'resolved' (id)          the broker resolved a prompt
---   'error' ()               the broker reported an error
---   'auth_required' (name, methods)  the agent wants a login
---   'rules' (data)           a `rules` answer no command waited for
H.subscribers = {}

--- Calls fn(...) on every `emit(event, ...)`, in subscription order.
---@param event string
---@param fn function
function M.on(event, fn)
  local list = H.subscribers[event]
  if list == nil then
    list = {}
    H.subscribers[event] = list
  end
  list[#list + 1] = fn
end

--- Calls the subscribers of `event`; one that fails does not keep the
--- others from running, and the first error is raised at the end.
---@param event string
function M.emit(event, a, b, extra)
  local err = M.try_emit(event, a, b, extra)
  if err ~= nil then
    error(err, 0)
  end
end

--- Like emit, but returns the first error instead of raising it (for
--- events emitted inside the RPC call, where nothing may raise).
--- At most two arguments (a, b): no vararg, which LuaJIT does not compile
--- (bytecode VARG), on the path of every broker event.
---@param event string
---@return any|nil err
function M.try_emit(event, a, b, extra)
  if extra ~= nil then
    -- A third argument would be lost without a word.
    return ('(acp) state.emit(%s): at most two arguments'):format(tostring(event))
  end
  local list = H.subscribers[event]
  if list == nil then
    return nil
  end
  -- One pcall for all the subscribers (this runs for every broker event);
  -- after a failure, the rest under another. H.at[depth] is where the call
  -- at this depth got to (a subscriber may emit in turn).
  local depth = H.depth + 1
  local ok, first = pcall(H.call_from, depth, list, 1, a, b)
  H.depth = depth - 1
  if ok then
    return nil
  end
  while not ok do
    ok = pcall(H.call_from, depth, list, H.at[depth] + 1, a, b)
    H.depth = depth - 1
  end
  return first
end

H.depth, H.at = 0, {}

--- Calls list[from..] with the arguments, noting in H.at[depth] which one
--- runs.
function H.call_from(depth, list, from, a, b)
  H.depth = depth
  local at = H.at
  for i = from, #list do
    at[depth] = i
    list[i](a, b)
  end
end

---@param event string
---@param data table
function M.log(event, data)
  local n = M.nlogged
  local i = 2 * (n % H.log_size) + 1
  local ring = H.log
  ring[i], ring[i + 1] = event, data
  M.nlogged = n + 1
end

--- The events logged after the first `from` ever logged (default: all that
--- are kept), oldest first, as a new list.
---@param from integer|nil
---@return {event: string, data: table}[]
function M.logged(from)
  local n, size = M.nlogged, H.log_size
  local first = math.max((from or 0) + 1, n - size + 1, 1)
  local out = {}
  for k = first, n do
    local i = 2 * ((k - 1) % size) + 1
    out[#out + 1] = { event = H.log[i], data = H.log[i + 1] }
  end
  return out
end

--- The ring of M.log: event k (from 1) at 2 * ((k - 1) % size) + 1, its
--- data after it.
H.log, H.log_size = {}, 2 * M.max_events

--- Records that `name` is being started in `cwd` and makes it current.
---@param name string
---@param cwd string
---@param env table|nil the agent's environment additions (for logins)
function M.agent_starting(name, cwd, env)
  M.agents[name] = M.agents[name] or { name = name, prompts = 0, stopping = false }
  M.agents[name].cwd = cwd
  M.agents[name].env = env or M.agents[name].env
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

--- The settings of the project `dir` belongs to: the reported root equal to
--- `dir`, else the longest one that contains it. Nil when none is known.
---@param dir string|nil
---@return acp.Settings|nil
function M.settings_for(dir)
  if dir == nil then
    return nil
  end
  if M.settings[dir] ~= nil then
    return M.settings[dir]
  end
  local best
  for root, s in pairs(M.settings) do
    if (dir:sub(1, #root + 1) == root .. '/' or root == '/') and (best == nil or #root > #best.root) then
      best = s
    end
  end
  return best
end

--- Calls fn(data) with the next broker event `event` ('rules' or
--- 'settings') about `root` (an answer to a command just sent). Waiters
--- expire after a few seconds and are dropped by an `error` event (a
--- refused command gets no other answer).
---@param event string
---@param root string
---@param fn fun(data: table)
function M.expect(event, root, fn)
  table.insert(H.waiters, { event = event, root = root, fn = fn, t = compat.now_ms() })
end

--- The newest session of agent in cwd that this Neovim (or an earlier one)
--- saw, from the state file; nil when there is none.
---@param agent string
---@param cwd string
---@return string|nil
function M.last_session(agent, cwd)
  for _, e in ipairs(H.read_sessions()) do
    if e.agent == agent and e.cwd == cwd and type(e.session) == 'string' then
      return e.session
    end
  end
  return nil
end

--- The sessions remembered in the state file, newest first:
--- `{ {agent=, cwd=, session=, time=}, ... }` (for :AcpSessions).
---@return table[]
function M.saved_sessions()
  local list = {}
  for _, e in ipairs(H.read_sessions()) do
    if type(e) == 'table' and type(e.agent) == 'string' and type(e.cwd) == 'string' and type(e.session) == 'string' then
      list[#list + 1] = e
    end
  end
  return list
end

--- Sessions remembered for `:AcpStart!`, newest first (bounded).
M.max_saved_sessions = 100

function H.read_sessions()
  local path = compat.state_path('sessions.json')
  local ok, lines = pcall(vim.fn.readfile, path)
  if not ok or #lines == 0 then
    return {}
  end
  local dok, list = pcall(vim.fn.json_decode, table.concat(lines, '\n'))
  if not dok or type(list) ~= 'table' then
    return {}
  end
  return list
end

--- Remembers `session` as the newest of agent in cwd (for `:AcpStart!`).
function M.remember_session(agent, cwd, session)
  if agent == nil or cwd == nil then
    return
  end
  local list = { { agent = agent, cwd = cwd, session = session, time = os.time() } }
  for _, e in ipairs(H.read_sessions()) do
    if type(e) == 'table' and e.session ~= session and #list < M.max_saved_sessions then
      list[#list + 1] = e
    end
  end
  local path = compat.state_path('sessions.json')
  pcall(vim.fn.mkdir, vim.fn.fnamemodify(path, ':h'), 'p')
  local tmp = path .. '.tmp'
  if pcall(vim.fn.writefile, { vim.fn.json_encode(list) }, tmp) then
    (vim.uv or vim.loop).fs_rename(tmp, path)
  end
end

--- The optionId that answers `req` with `what` ('allow' | 'reject'), as the
--- broker chose it (policy_pick_option): index and option, or nil (for
--- 'reject', nil means the answer is `cancelled`).
---@param req acp.Pending
---@param what 'allow'|'reject'
---@return integer|nil
---@return table|nil
function M.picked_option(req, what)
  local id = req.rejectOption
  if what == 'allow' then
    id = req.allowOption
  end
  for i, o in ipairs(id ~= nil and req.options or {}) do
    if o.optionId == id then
      return i, o
    end
  end
  return nil, nil
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

--- The mirror of session `id`, created on first use.
---@param id string
---@param agent any
---@return table
function M.session(id, agent)
  local s = M.sessions[id]
  if s == nil then
    s = { agent = compat.str(agent), tools = {}, tool_order = {} }
    M.sessions[id] = s
  end
  return s
end

--- The tool call `id` of `session` as merged so far, or nil. The table is
--- updated in place by later updates.
---@param session string
---@param id string
---@return table|nil
function M.tool(session, id)
  local s = M.sessions[session]
  return s and s.tools[id]
end

--- `tool_call`, `tool_call_update` and a request's `toolCall` all upsert:
--- fields with a value replace the stored ones (content/locations whole).
function M.upsert_tool(s, u)
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

function M.remove_pending(id)
  M.pending[id] = nil
  for i, v in ipairs(M.order) do
    if v == id then
      table.remove(M.order, i)
      break
    end
  end
end

--- The most recently started agent still alive.
function M.latest_agent()
  local best
  for name, a in pairs(M.agents) do
    if best == nil or (a.seq or 0) > (M.agents[best].seq or 0) then
      best = name
    end
  end
  return best
end

--- Takes the function of the command waiting for `event` about `root` (see
--- M.expect), dropping those that expired; nil when none waits.
---@param event string
---@param root string
---@return function|nil
function M.take_waiter(event, root)
  local now, keep, pick = compat.now_ms(), {}, nil
  for _, w in ipairs(H.waiters) do
    if now - w.t <= H.waiter_ms then
      keep[#keep + 1] = w
    end
  end
  -- The one about this root, else the oldest for this event (the broker may
  -- name the root differently than the command did).
  for _, w in ipairs(keep) do
    if w.event == event and w.root == root then
      pick = w
      break
    end
  end
  if pick == nil then
    for _, w in ipairs(keep) do
      if w.event == event then
        pick = w
        break
      end
    end
  end
  H.waiters = vim.tbl_filter(function(w)
    return w ~= pick
  end, keep)
  return pick and pick.fn
end

--- Forgets every waiting command (a refused command gets no other answer;
--- the broker's exit answers none).
function M.drop_waiters()
  H.waiters = {}
end

-- Helper data ================================================================

H.seq = 0

--- Commands waiting for the broker's answer (see M.expect).
H.waiters = {}
H.waiter_ms = 5000

return M
