--- Configuration: defaults, merging, validation, agent presets and the paths
--- of the bundled binaries.

local compat = require('acp.compat')

local M = {}
local H = {}

-- Module definition ==========================================================

---@class acp.Keys
---@field allow_once string
---@field allow_always string
---@field reject_once string
---@field reject_always string
---@field hide string
---@field remember_session string
---@field remember_project string
---@field remember_session_broad string
---@field remember_project_broad string
---@field trust_agent string

---@class acp.Config
M.defaults = {
  -- Agent used by :AcpStart without an argument (and by :AcpPrompt when no
  -- agent runs yet).
  default_agent = 'demo',
  -- name -> { cmd = {...}, env = { VAR = 'value' | false }, yolo = bool }.
  -- An entry replaces a built-in preset of the same name whole.
  agents = {},
  -- Path of the broker binary; nil = <plugin root>/build/acp-broker.
  broker = nil,
  -- Permission rules (applied by the broker's policy; :help acp-rules).
  -- `defaultMode` (nil, 'default', 'acceptEdits', 'plan' or 'yolo') may be
  -- set too.
  permissions = { allow = {}, ask = {}, deny = {} },
  -- Yolo in every project (deny and ask rules still apply; a Gemini
  -- `security.disableYoloMode: true` vetoes it).
  yolo = false,
  ui = {
    backend = 'float', -- 'float' | 'select'
    focus = true, -- the float takes focus when Neovim is in normal mode
    border = 'rounded',
    arm_ms = 350, -- keys are ignored this long after the prompt appears
    width = 80,
    keys = {
      allow_once = 'a',
      allow_always = 'A',
      reject_once = 'r',
      reject_always = 'R',
      hide = 'q',
      -- The broker's extras (:help acp-prompt-extras).
      remember_session = 's',
      remember_project = 'p',
      -- The same with the broader rule (`Bash(git status *)`), when one is
      -- suggested.
      remember_session_broad = 'S',
      remember_project_broad = 'P',
      trust_agent = 't',
    },
  },
  log_level = 'info',
  -- A permission prompt that waits unseen (Neovim not focused, or the
  -- window not on the current tab page): `unseen` = vim.notify once, `osc`
  -- = also the terminal's notification (OSC 9 or 777; 'auto' picks from the
  -- terminal, false never). :help acp-prompt-notify
  notify = { unseen = true, osc = 'auto' },
  -- The chat (:AcpChat): keys of its input ('' = no mapping).
  chat = {
    keys = {
      send = '<C-s>', -- Insert and Normal mode (<CR> sends in Normal mode too)
      queue_edit = '<C-e>', -- take a queued prompt back into the input (Normal mode)
      queue_drop = '<C-x>', -- drop a queued prompt (Normal mode)
    },
  },
}

--- Built-in agents. `hint` tells the person how to install a missing one.
M.presets = {
  gemini = { cmd = { 'gemini', '--acp' }, hint = 'npm install -g @google/gemini-cli' },
  claude = { cmd = { 'claude-agent-acp' }, hint = 'npm install -g @zed-industries/claude-agent-acp' },
  codex = { cmd = { 'codex-acp' }, hint = 'npm install -g @zed-industries/codex-acp' },
}

M.log_levels = { 'error', 'warn', 'info', 'debug', 'trace' }

--- Broker policy modes (`permissions.defaultMode`, :AcpMode).
M.modes = { 'default', 'acceptEdits', 'plan', 'yolo' }

--- Root markers for the project directory of a session.
M.root_markers = { '.git', '.acp', '.gemini', '.claude' }

---@type acp.Config
M.options = vim.deepcopy(M.defaults)

--- Options exactly as the person passed them to setup() (before merging).
M.user = {}

--- Merges `opts` over the defaults, validates, and makes it the current config.
--- Raises an `(acp)` error on invalid values; warns about unknown keys.
---@param opts table|nil
---@return acp.Config
function M.setup(opts)
  if opts ~= nil and type(opts) ~= 'table' then
    H.error('setup(): `opts` should be a table, got ' .. type(opts))
  end
  opts = opts or {}
  H.warn_unknown(opts)
  local merged = vim.tbl_deep_extend('force', vim.deepcopy(M.defaults), opts)
  H.validate(merged)
  M.options = merged
  M.user = vim.deepcopy(opts)
  return merged
end

---@return acp.Config
function M.get()
  return M.options
end

--- The directory that holds `lua/`, `plugin/` and `build/`.
---@return string
function M.root()
  if H.root == nil then
    local src = debug.getinfo(1, 'S').source
    src = src:sub(1, 1) == '@' and src:sub(2) or src
    H.root = vim.fn.fnamemodify(src, ':p:h:h:h')
  end
  return H.root
end

--- The project of the current directory: its nearest ancestor (itself
--- included) holding a root marker, else the current directory.
---@return string
function M.project_dir()
  local here = compat.strip_slash(vim.fn.fnamemodify(vim.fn.getcwd(), ':p'))
  return compat.find_up(here, M.root_markers) or here
end

--- Path of the broker binary: `$ACP_BROKER_BIN`, then setup's `broker`, then
--- `<root>/build/acp-broker`.
---@return string
function M.broker_bin()
  local env = vim.env.ACP_BROKER_BIN
  if env ~= nil and env ~= '' then
    return env
  end
  return M.options.broker or compat.join(M.root(), 'build/acp-broker')
end

---@return string
function M.demo_bin()
  local env = vim.env.ACP_DEMO_AGENT_BIN
  if env ~= nil and env ~= '' then
    return env
  end
  return compat.join(M.root(), 'build/acp-demo-agent')
end

--- Names offered by completion: presets and configured agents, sorted.
---@return string[]
function M.agent_names()
  local seen, names = {}, {}
  local function add(n)
    if not seen[n] then
      seen[n] = true
      names[#names + 1] = n
    end
  end
  add('demo')
  for n in pairs(M.presets) do
    add(n)
  end
  for n in pairs(M.options.agents or {}) do
    add(n)
  end
  table.sort(names)
  return names
end

---@class acp.AgentSpec
---@field name string
---@field cmd string[]
---@field env table<string, string|boolean>
---@field yolo boolean|nil

--- Resolves an agent given by name or as `{cmd = {...}, env = {...}}`.
--- Returns nil and an `(acp)` message when it is unknown or its command is
--- not executable (with the install hint).
---@param agent string|table|nil
---@return acp.AgentSpec|nil spec
---@return string|nil err
function M.resolve_agent(agent)
  agent = agent or M.options.default_agent
  local spec, hint
  if type(agent) == 'table' then
    local ok, err = H.check_agent('agent', agent)
    if not ok then
      return nil, err
    end
    spec = { name = vim.fn.fnamemodify(agent.cmd[1], ':t'), cmd = agent.cmd, env = agent.env, yolo = agent.yolo }
  elseif type(agent) == 'string' and agent ~= '' then
    local user = M.options.agents[agent]
    if user ~= nil then
      spec = { name = agent, cmd = user.cmd, env = user.env, yolo = user.yolo }
      hint = ('check `agents.%s.cmd` in setup()'):format(agent)
    elseif agent == 'demo' then
      spec = { name = 'demo', cmd = { M.demo_bin() } }
      hint = ('run `make` in %s'):format(M.root())
    elseif M.presets[agent] ~= nil then
      local p = M.presets[agent]
      spec = { name = agent, cmd = vim.deepcopy(p.cmd) }
      hint = p.hint
    else
      return nil,
        ("(acp) unknown agent '%s': use one of %s, or add it to `agents` in setup()"):format(
          agent,
          table.concat(M.agent_names(), ', ')
        )
    end
  else
    return nil, '(acp) agent should be a name or a table {cmd = {...}}'
  end

  spec.cmd = vim.deepcopy(spec.cmd)
  spec.env = vim.deepcopy(spec.env or {})
  if vim.fn.executable(spec.cmd[1]) ~= 1 then
    if spec.name == 'demo' and M.options.agents.demo == nil then
      return nil, ('(acp) demo agent not built (%s): %s'):format(spec.cmd[1], hint)
    end
    return nil,
      ("(acp) agent '%s': `%s` not found or not executable. Install it: %s"):format(
        spec.name,
        spec.cmd[1],
        hint or 'check the `cmd` you passed'
      )
  end
  return spec
end

--- The log level for the broker: setup's `log_level` when the person set it,
--- else `$ACP_BROKER_LOG` when set, else the default.
---@return string
function M.log_level()
  if M.user.log_level == nil and vim.env.ACP_BROKER_LOG and vim.env.ACP_BROKER_LOG ~= '' then
    return vim.env.ACP_BROKER_LOG
  end
  return M.options.log_level
end

--- The options that take part in permission decisions, as `acp_config`
--- sends them (doc/protocol.md): lists stay lists, empty maps are maps.
---@return table
function M.policy()
  local o = M.options
  local permissions = {
    allow = vim.deepcopy(o.permissions.allow),
    ask = vim.deepcopy(o.permissions.ask),
    deny = vim.deepcopy(o.permissions.deny),
    defaultMode = o.permissions.defaultMode,
  }
  local agents = {}
  for name, a in pairs(o.agents) do
    if a.yolo ~= nil then
      agents[name] = { yolo = a.yolo }
    end
  end
  if next(agents) == nil then
    agents = vim.empty_dict()
  end
  return { permissions = permissions, yolo = o.yolo, agents = agents }
end

--- Default location of the broker's debug log.
---@return string
function M.log_path()
  return compat.state_path('broker.log')
end

-- Helper data ================================================================

H.known = {
  top = { 'default_agent', 'agents', 'broker', 'permissions', 'yolo', 'ui', 'log_level', 'notify', 'chat' },
  notify = { 'unseen', 'osc' },
  chat = { 'keys' },
  chat_keys = { 'send', 'queue_edit', 'queue_drop' },
  ui = { 'backend', 'focus', 'border', 'arm_ms', 'width', 'keys' },
  keys = {
    'allow_once',
    'allow_always',
    'reject_once',
    'reject_always',
    'hide',
    'remember_session',
    'remember_project',
    'remember_session_broad',
    'remember_project_broad',
    'trust_agent',
  },
  permissions = { 'allow', 'ask', 'deny', 'defaultMode' },
}

H.borders = { 'none', 'single', 'double', 'rounded', 'solid', 'shadow' }

-- Helper functionality =======================================================

function H.error(msg)
  error('(acp) ' .. msg, 0)
end

function H.check_type(name, val, ref, allow_nil)
  if allow_nil and val == nil then
    return
  end
  if type(val) ~= ref then
    H.error(('`%s` should be %s, got %s'):format(name, ref, vim.inspect(val)))
  end
end

function H.check_one_of(name, val, choices)
  if not vim.tbl_contains(choices, val) then
    H.error(('`%s` should be one of %s, got %s'):format(name, table.concat(choices, ', '), vim.inspect(val)))
  end
end

function H.check_string_list(name, val)
  H.check_type(name, val, 'table')
  for i, v in ipairs(val) do
    H.check_type(('%s[%d]'):format(name, i), v, 'string')
  end
end

function H.warn_unknown(opts)
  local unknown = {}
  local function scan(prefix, tbl, known)
    if type(tbl) ~= 'table' then
      return
    end
    for k in pairs(tbl) do
      if not vim.tbl_contains(known, k) then
        unknown[#unknown + 1] = prefix .. tostring(k)
      end
    end
  end
  scan('', opts, H.known.top)
  scan('ui.', opts.ui, H.known.ui)
  scan('ui.keys.', type(opts.ui) == 'table' and opts.ui.keys or nil, H.known.keys)
  scan('permissions.', opts.permissions, H.known.permissions)
  scan('notify.', opts.notify, H.known.notify)
  scan('chat.', opts.chat, H.known.chat)
  scan('chat.keys.', type(opts.chat) == 'table' and opts.chat.keys or nil, H.known.chat_keys)
  if #unknown > 0 then
    table.sort(unknown)
    vim.notify(
      '(acp) setup(): unknown option(s) ignored: ' .. table.concat(unknown, ', ') .. ' (see :help acp-config)',
      vim.log.levels.WARN
    )
  end
end

--- Checks `{cmd = {...}, env = {...}, yolo = bool}`; returns false, message.
function H.check_agent(name, a)
  local ok, err = pcall(function()
    H.check_type(name, a, 'table')
    H.check_type(name .. '.cmd', a.cmd, 'table')
    if #a.cmd == 0 then
      H.error(('`%s.cmd` should be a non-empty list of strings'):format(name))
    end
    H.check_string_list(name .. '.cmd', a.cmd)
    H.check_type(name .. '.env', a.env, 'table', true)
    for k, v in pairs(a.env or {}) do
      if type(k) ~= 'string' or (type(v) ~= 'string' and v ~= false) then
        H.error(
          ('`%s.env.%s` should be a string (or false to remove the variable), got %s'):format(
            name,
            tostring(k),
            vim.inspect(v)
          )
        )
      end
    end
    H.check_type(name .. '.yolo', a.yolo, 'boolean', true)
  end)
  return ok, err
end

function H.validate(c)
  H.check_type('default_agent', c.default_agent, 'string')
  H.check_type('agents', c.agents, 'table')
  for name, a in pairs(c.agents) do
    H.check_type('agents key', name, 'string')
    local ok, err = H.check_agent('agents.' .. name, a)
    if not ok then
      error(err, 0)
    end
  end
  H.check_type('broker', c.broker, 'string', true)
  H.check_type('permissions', c.permissions, 'table')
  for _, k in ipairs({ 'allow', 'ask', 'deny' }) do
    H.check_string_list('permissions.' .. k, c.permissions[k])
  end
  if c.permissions.defaultMode ~= nil then
    H.check_type('permissions.defaultMode', c.permissions.defaultMode, 'string')
    -- `bypassPermissions` is Claude's name for yolo.
    local modes = vim.list_extend(vim.deepcopy(M.modes), { 'bypassPermissions' })
    H.check_one_of('permissions.defaultMode', c.permissions.defaultMode, modes)
  end
  H.check_type('yolo', c.yolo, 'boolean')
  H.check_type('log_level', c.log_level, 'string')
  H.check_one_of('log_level', c.log_level, M.log_levels)

  H.check_type('notify', c.notify, 'table')
  H.check_type('notify.unseen', c.notify.unseen, 'boolean')
  if c.notify.osc ~= false then
    H.check_one_of('notify.osc', c.notify.osc, { 'auto', '9', '777' })
  end

  local ui = c.ui
  H.check_type('ui', ui, 'table')
  H.check_type('ui.backend', ui.backend, 'string')
  H.check_one_of('ui.backend', ui.backend, { 'float', 'select' })
  H.check_type('ui.focus', ui.focus, 'boolean')
  if type(ui.border) == 'string' then
    H.check_one_of('ui.border', ui.border, H.borders)
  elseif type(ui.border) ~= 'table' then
    H.error('`ui.border` should be a border name or a list of characters, got ' .. vim.inspect(ui.border))
  end
  H.check_type('ui.arm_ms', ui.arm_ms, 'number')
  if ui.arm_ms < 0 then
    H.error('`ui.arm_ms` should be >= 0, got ' .. ui.arm_ms)
  end
  H.check_type('ui.width', ui.width, 'number')
  if ui.width < 20 then
    H.error('`ui.width` should be at least 20, got ' .. ui.width)
  end
  H.check_type('ui.keys', ui.keys, 'table')
  for _, k in ipairs(H.known.keys) do
    H.check_type('ui.keys.' .. k, ui.keys[k], 'string')
  end
  H.check_type('chat', c.chat, 'table')
  H.check_type('chat.keys', c.chat.keys, 'table')
  for _, k in ipairs(H.known.chat_keys) do
    H.check_type('chat.keys.' .. k, c.chat.keys[k], 'string')
  end
end

return M
