--- :checkhealth acp

local M = {}
local H = {}

function M.check()
  local h = require('acp.compat').health()
  local config = require('acp.config')

  h.start('acp: Neovim')
  local v = vim.version()
  local version = ('%d.%d.%d'):format(v.major, v.minor, v.patch)
  if vim.fn.has('nvim-0.7.2') ~= 1 then
    h.error('Neovim ' .. version .. ' is too old', { 'acp needs Neovim 0.7.2 or later' })
  elseif H.tested(v) then
    h.ok(('Neovim %s (the tests run on %s)'):format(version, H.TESTED))
  else
    h.ok('Neovim ' .. version)
    h.info(('the tests run on %s, not on this version; please report what does not work'):format(H.TESTED))
  end
  if vim.fn.filereadable(config.root() .. '/doc/tags') ~= 1 then
    h.warn('doc/tags is missing: :help acp does not work', { ('run `make` in %s'):format(config.root()) })
  end

  h.start('acp: broker')
  local bin = config.broker_bin()
  local make = ('run `make` in %s'):format(config.root())
  if vim.fn.filereadable(bin) ~= 1 then
    h.error('broker not found: ' .. bin, { make })
  elseif vim.fn.executable(bin) ~= 1 then
    h.error('broker is not executable: ' .. bin, { make })
  else
    local out = vim.fn.system({ bin, '--version' })
    if vim.v.shell_error == 0 then
      h.ok(('%s: %s'):format(bin, vim.trim(out)))
    else
      h.error(('`%s --version` failed (exit %d): %s'):format(bin, vim.v.shell_error, vim.trim(out)), { make })
    end
  end
  local broker = require('acp.rpc')
  if broker.chan ~= nil then
    local info = broker.info or {}
    h.info(('broker running (channel %d, pid %s)'):format(broker.chan, tostring(info.pid or '?')))
  else
    h.info('broker not running (it starts with :AcpStart)')
  end
  if #broker.stderr > 0 then
    h.warn('the broker wrote to stderr: ' .. broker.stderr[#broker.stderr], { 'see the log file below' })
  end

  h.start('acp: agents')
  local demo = config.demo_bin()
  if vim.fn.executable(demo) == 1 then
    h.ok('demo agent: ' .. demo)
  else
    h.warn('demo agent not built: ' .. demo, { make })
  end
  local found = 0
  for _, name in ipairs({ 'gemini', 'claude', 'codex' }) do
    found = found + (H.check_agent(h, config, name) and 1 or 0)
  end
  if found == 0 then
    h.warn('no real agent on PATH: only the demo agent can run', {
      'install one of the agents above, or add your own with `agents = { name = { cmd = {...} } }` in setup()',
    })
  end
  for name, a in pairs(config.get().agents) do
    if config.presets[name] == nil and name ~= 'demo' then
      local cmd = a.cmd[1]
      if vim.fn.executable(cmd) == 1 then
        h.ok(('%s: %s'):format(name, vim.fn.exepath(cmd)))
      else
        h.warn(('%s: `%s` not found on PATH'):format(name, cmd), { ('check `agents.%s.cmd` in setup()'):format(name) })
      end
    end
  end

  h.start('acp: asking posture')
  H.check_posture(h)

  h.start('acp: permission settings')
  H.check_settings(h, config, bin)

  h.start('acp: logs')
  h.info('broker log: ' .. broker.log_path() .. ' (level ' .. config.log_level() .. ')')
  local audit = require('acp.compat').state_path('audit.jsonl')
  if vim.fn.filereadable(audit) == 1 then
    h.info('audit log of decisions: ' .. audit .. ' (:AcpLog)')
  else
    h.info('audit log of decisions: ' .. audit .. ' (nothing decided yet)')
  end
end

--- The Neovim versions `make test` runs the end-to-end suite on.
H.TESTED = '0.7.2, 0.10.x and 0.12.x'

function H.tested(v)
  return v.major == 0 and ((v.minor == 7 and v.patch == 2) or v.minor == 10 or v.minor == 12)
end

--- Runs `<broker> rules --cwd <project root>` and reports settings files
--- that cannot be used (errors: they fail closed) and ignored rules (warnings).
function H.check_settings(h, config, bin)
  local root = require('acp.commands').root()
  if vim.fn.executable(bin) ~= 1 then
    h.warn('cannot check the settings files: the broker is not built')
    return
  end
  local ok, out = pcall(vim.fn.system, { bin, 'rules', '--cwd', root })
  local code = vim.v.shell_error
  local decoded, data = false, nil
  if ok and code == 0 then
    decoded, data = pcall(vim.fn.json_decode, out)
  end
  if not decoded or type(data) ~= 'table' then
    h.warn(
      ('could not check the settings files of %s (`%s rules` failed)'):format(root, vim.fn.fnamemodify(bin, ':t')),
      { 'rebuild the broker with `make`; see ' .. require('acp.rpc').log_path() }
    )
    return
  end
  local errors = type(data.errors) == 'table' and data.errors or {}
  local warnings = type(data.warnings) == 'table' and data.warnings or {}
  -- Files that cannot be used fail closed: one error says which and what
  -- is suspended; other errors (an unreadable trust store) follow.
  local closed = type(data.failClosed) == 'table' and data.failClosed or nil
  local own = {}
  if closed then
    for _, f in ipairs(type(closed.files) == 'table' and closed.files or {}) do
      if type(f) == 'table' and f.error then
        own[f.error] = true
      end
    end
    h.error(tostring(closed.message), { 'fix the file; until then everything not denied is asked; :AcpRules shows what applies' })
  end
  for _, e in ipairs(errors) do
    if not own[e] then
      h.error('settings: ' .. tostring(e), { ':AcpRules shows what applies' })
    end
  end
  for _, w in ipairs(warnings) do
    h.warn(tostring(w), { 'the rule is ignored; see :help acp-rules for the syntax' })
  end
  if #errors == 0 and #warnings == 0 then
    h.ok(('settings files of %s parse'):format(root))
  end
  local rules = type(data.rules) == 'table' and #data.rules or 0
  local mode = type(data.mode) == 'string' and data.mode or 'default'
  local yolo = data.veto == true and 'vetoed' or closed and 'suspended' or (data.yolo == true and 'on' or 'off')
  local trusted = closed and 'trust suspended' or data.trusted == true and 'trusted' or 'not trusted'
  h.info(('%d rule%s, mode %s, yolo %s, project %s (:AcpRules for details)'):format(rules, rules == 1 and '' or 's', mode, yolo, trusted))
end

--- Per running session: is the agent kept asking (design §6)?
function H.check_posture(h)
  local state = require('acp.state')
  local any = false
  for name, a in pairs(state.agents) do
    local id = a.session
    local s = id and state.sessions[id] or nil
    if s ~= nil then
      H.posture_line(h, name, id, s)
      any = true
    end
  end
  if not any then
    h.info('no session running. Gemini CLI, claude-agent-acp, codex-acp and the demo agent are kept asking (:help acp-posture); other agents are "unverified"')
  end
end

function H.posture_line(h, agent, id, s)
  local who = ('%s session %s'):format(agent, id)
  if s.posture == 'asking' then
    h.ok(('%s: asking posture (%s)'):format(who, tostring(s.posture_family or '?')))
  else
    h.warn(('%s: posture unverified: %s'):format(who, tostring(s.posture_reason or 'not checked yet')), {
      'the agent may approve tool calls itself, following its own or the project\'s settings',
      'see :help acp-posture for what the broker does per agent',
    })
  end
end

function H.check_agent(h, config, name)
  local user = config.get().agents[name]
  local cmd = user and user.cmd[1] or config.presets[name].cmd[1]
  if vim.fn.executable(cmd) == 1 then
    h.ok(('%s: %s'):format(name, vim.fn.exepath(cmd)))
    return true
  elseif user then
    h.warn(('%s: `%s` not found on PATH'):format(name, cmd), { ('check `agents.%s.cmd` in setup()'):format(name) })
  else
    h.info(('%s: `%s` not on PATH (optional). Install: %s'):format(name, cmd, config.presets[name].hint))
  end
  return false
end

return M
