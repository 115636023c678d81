--- acp: pair-program with a coding agent (any ACP agent) and stay in charge
--- of every tool call. Public Lua API; see `:help acp-api`.

local M = {}
local H = {}

-- Module definition ==========================================================

--- Optional: merge `opts` over the defaults (`:help acp-config`).
---@param opts table|nil
function M.setup(opts)
  require('acp.config').setup(opts)
  require('acp.highlight').setup()
  -- A running broker gets the new permissions at once; one that starts
  -- later gets them when it starts.
  local rpc = package.loaded['acp.rpc']
  if rpc ~= nil then
    rpc.configure()
  end
end

--- Starts (or reuses) the agent connection and a session in the project.
--- Returns at once; `status().session` is set once the session exists.
--- `opts.resume`: true (the last session in cwd) or a sessionId to resume;
--- `opts.new`: a new session even when the agent has one in cwd.
---@param agent string|table|nil name (preset or `agents.<name>`, or one started before), or {cmd = {...}, env = {...}}
---@param opts {cwd: string|nil, resume: boolean|string|nil, new: boolean|nil}|nil
---@return boolean ok
---@return string|nil err
function M.start(agent, opts)
  opts = opts or {}
  local config, state = require('acp.config'), require('acp.state')
  local spec, err = config.resolve_agent(agent)
  if spec == nil and type(agent) == 'string' and H.started[agent] ~= nil then
    -- An agent started before from a {cmd = ...} table, by its name.
    spec = vim.deepcopy(H.started[agent])
  end
  if spec == nil then
    return H.fail(err)
  end
  local cwd, cwd_err = H.cwd(opts.cwd)
  if cwd == nil then
    return H.fail(cwd_err)
  end
  local resume = opts.resume
  if resume == true then
    resume = state.last_session(spec.name, cwd)
    if resume == nil then
      vim.notify(('(acp) %s: no earlier session in %s; starting a new one'):format(spec.name, cwd), vim.log.levels.INFO)
    end
  elseif resume ~= nil and type(resume) ~= 'string' then
    return H.fail('(acp) start(): resume should be true or a sessionId')
  end
  -- The broker reuses a live connection of that name (and its session in
  -- that directory); the agent becomes the current one either way.
  local ok, send_err = require('acp.rpc').start_agent(
    spec.name,
    { cmd = spec.cmd, env = spec.env, cwd = cwd, resume = resume, new = opts.new == true or nil }
  )
  if not ok then
    return H.fail(send_err)
  end
  H.started[spec.name] = { name = spec.name, cmd = vim.deepcopy(spec.cmd), env = vim.deepcopy(spec.env) }
  state.agent_starting(spec.name, cwd, spec.env)
  return true
end

--- Sends `text` to the current session (queued by the broker until the
--- session exists). Starts the default agent when none runs.
--- `opts.context`: context items sent with it (`:help acp-context`), after
--- the items staged with add_context(), which are then cleared.
---@param text string
---@param opts {context: table[]|nil}|nil
---@return boolean ok
---@return string|nil err
function M.prompt(text, opts)
  if type(text) ~= 'string' or text:match('^%s*$') then
    return H.fail('(acp) prompt(): text should be a non-empty string')
  end
  if opts ~= nil and type(opts) ~= 'table' then
    return H.fail('(acp) prompt(): opts should be a table or nil')
  end
  local context = require('acp.context')
  local items = {}
  local given = opts and opts.context
  if given ~= nil and type(given) ~= 'table' then
    return H.fail('(acp) prompt(): context should be a list of items')
  end
  for _, item in ipairs(given or {}) do
    local it, err = context.normalize(item)
    if it == nil then
      return H.fail(err)
    end
    items[#items + 1] = it
  end
  local state = require('acp.state')
  if state.agent() == nil then
    local ok, err = M.start()
    if not ok then
      return false, err
    end
  end
  local name = state.current
  local blocks, notes = context.build(name, items)
  local ok, err = require('acp.rpc').prompt(name, text, nil, blocks)
  if not ok then
    return H.fail(err)
  end
  context.take()
  state.prompt_sent(name)
  if #notes > 0 then
    vim.notify('(acp) ' .. table.concat(notes, '\n'), vim.log.levels.WARN)
  end
  return true
end

--- Stages a context item for the next prompt (what :AcpAdd does):
--- `{kind='selection', buf=, first=, last=}`, `{kind='file', path=}`,
--- `{kind='buffer', buf=}`, `{kind='diagnostics', buf=}`, `{kind='quickfix'}`.
---@param item table
---@return boolean ok
---@return string|nil err
function M.add_context(item)
  local ok, err = require('acp.context').add(item)
  if not ok then
    return H.fail(err)
  end
  return true
end

--- Cancels the running turn of the current agent; its pending prompts are
--- answered `cancelled`.
---@return boolean ok
---@return string|nil err
function M.cancel()
  local a = require('acp.state').agent()
  if a == nil then
    return H.fail('(acp) no agent is running')
  end
  require('acp.rpc').cancel(a.name)
  return true
end

--- Pending permission prompts, oldest first:
--- `{ {id=, session=, toolCallId=, title=, kind=, options={{optionId=, name=, kind=}}}, ... }`.
---@return table[]
function M.pending()
  local state = require('acp.state')
  local list = {}
  for _, req in ipairs(state.pending_list()) do
    list[#list + 1] = state.public(req)
  end
  return list
end

--- Answers pending prompt `id` with an offered `optionId` (nil = the outcome
--- `cancelled`). `opts.remember` = 'session'|'project'|'agent' also records a
--- narrow rule (with an allow-kind option); with `opts.broad = true`, the
--- broader alternative the prompt suggested (its `broad` rules) instead.
---@param id integer
---@param option_id string|nil
---@param opts {remember: string|nil, broad: boolean|nil}|nil
---@return boolean ok
---@return string|nil err
function M.respond(id, option_id, opts)
  if type(id) ~= 'number' then
    return H.fail('(acp) respond(): id should be the number from pending(), got ' .. vim.inspect(id))
  end
  if option_id ~= nil and type(option_id) ~= 'string' then
    return H.fail('(acp) respond(): optionId should be a string or nil, got ' .. vim.inspect(option_id))
  end
  if opts ~= nil and type(opts) ~= 'table' then
    return H.fail('(acp) respond(): opts should be a table or nil')
  end
  opts = opts or {}
  if opts.remember ~= nil and not vim.tbl_contains({ 'session', 'project', 'agent' }, opts.remember) then
    return H.fail("(acp) respond(): remember should be 'session', 'project' or 'agent', got " .. vim.inspect(opts.remember))
  end
  if opts.broad ~= nil and type(opts.broad) ~= 'boolean' then
    return H.fail('(acp) respond(): broad should be a boolean, got ' .. vim.inspect(opts.broad))
  end
  local sent = require('acp.rpc').respond(id, option_id, { remember = opts.remember, broad = opts.broad })
  if not sent then
    return H.fail('(acp) respond(): the broker is not running')
  end
  require('acp.state').emit('answered', id)
  return true
end

--- State of the current agent and session.
---@return {agent: string|nil, session: string|nil, mode: string, yolo: boolean, yolo_veto: boolean, trusted: boolean, pending: integer, busy: boolean, unasked: integer, posture: string, posture_reason: string|nil}
function M.status()
  local state = require('acp.state')
  local a = state.agent()
  -- The project's effective settings as the broker last reported them.
  local s = a and state.settings_for(a.cwd) or {}
  local sess = a and a.session and state.sessions[a.session] or nil
  return {
    agent = a and a.name or nil,
    session = a and a.session or nil,
    mode = require('acp.compat').str(s.mode) or 'default',
    yolo = s.yolo == true,
    yolo_veto = s.veto == true,
    trusted = s.trusted == true,
    pending = #state.order,
    busy = state.busy(),
    -- Tool calls of this session that acted without asking (`unasked`).
    unasked = a and a.session and state.sessions[a.session] and state.sessions[a.session].unasked or 0,
    -- 'asking' once the broker put the agent in its asking posture and
    -- checked it; 'unverified' before that or when it cannot (the reason).
    posture = sess and sess.posture == 'asking' and 'asking' or 'unverified',
    posture_reason = sess and sess.posture_reason or nil,
  }
end

--- A short string for a statusline: the current agent and what it does
--- ("claude: idle", "claude: working", "claude: waiting 2" for prompts
--- waiting for you), then " yolo" and " !unverified" (the agent may act
--- without asking) when they apply; "" with no agent. Cheap enough for
--- every redraw: it reads the state Lua already holds and loads nothing.
---@return string
function M.statusline()
  local state = package.loaded['acp.state']
  local a = state and state.agent()
  if a == nil then
    return ''
  end
  local n = #state.order
  local doing = n > 0 and ('waiting ' .. n) or (a.prompts or 0) > 0 and 'working' or a.session and 'idle' or 'starting'
  local st = a.cwd and state.settings_for(a.cwd) or {}
  local sess = a.session and state.sessions[a.session]
  local warn = sess and sess.posture == 'unverified' and sess.posture_reason and ' !unverified' or ''
  return a.name .. ': ' .. doing .. (st.yolo == true and ' yolo' or '') .. warn
end

--- Ends the agent (default: the current one): its process group is
--- terminated and its pending prompts are answered `cancelled`.
---@param agent string|nil
---@return boolean ok
---@return string|nil err
function M.stop(agent)
  local state = require('acp.state')
  local a = state.agent(agent)
  if a == nil then
    return H.fail(agent and ("(acp) agent '%s' is not running"):format(agent) or '(acp) no agent is running')
  end
  state.agent_stopping(a.name)
  if not require('acp.rpc').stop_agent(a.name) then
    -- No broker: nothing can be running.
    state.agents[a.name] = nil
  end
  return true
end

--- Opens (or focuses) the chat buffer of a session: `opts.session` (an ACP
--- sessionId), else the current agent's session.
---@param opts table|nil {session: string|nil, agent: string|nil}
---@return boolean ok
---@return string|nil err
function M.chat(opts)
  return require('acp.chat').open(opts or {})
end

--- What the agent changed in the session: `{ {path=, hunks={ {old_start=,
--- old_count=, new_start=, new_count=}, ...} }, ... }`, each file against
--- its snapshot from before the agent's first change (`:help acp-review`).
--- opts.scope = 'turn': the last turn that changed files, against their
--- snapshots from before that turn.
---@param opts {scope: string|nil, session: string|nil}|nil
---@return table[]
function M.review(opts)
  return require('acp.ledger').review(opts)
end

--- Restores hunk `hunk` (an index into review()'s hunks of path; nil: all
--- of them) in the loaded buffer (undoable), else in a buffer loaded for
--- it; a buffer without unsaved changes is written. The agent is not told.
---@param path string
---@param hunk integer|nil
---@param opts {scope: string|nil, session: string|nil}|nil as for review()
---@return boolean ok
---@return string|nil err
function M.revert(path, hunk, opts)
  local ok, msg = require('acp.ledger').revert(path, hunk, opts)
  if not ok then
    return H.fail(msg)
  end
  vim.notify(msg, vim.log.levels.INFO)
  return true
end

-- Helper functionality =======================================================

function H.fail(msg)
  vim.notify(msg, vim.log.levels.ERROR)
  return false, msg
end

--- The session directory: `cwd` given, else the nearest ancestor of the
--- current directory holding a project marker, else the current directory.
--- The agents started in this Neovim, by name: {name, cmd, env}.
H.started = {}

function H.cwd(dir)
  local compat, config = require('acp.compat'), require('acp.config')
  if dir ~= nil then
    if type(dir) ~= 'string' or vim.fn.isdirectory(dir) ~= 1 then
      return nil, '(acp) start(): cwd is not a directory: ' .. vim.inspect(dir)
    end
    return compat.strip_slash(vim.fn.fnamemodify(dir, ':p'))
  end
  return config.project_dir()
end

return M
