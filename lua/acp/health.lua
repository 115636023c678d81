--- :checkhealth acp

local M = {}
local H = {}

function M.check()
  local h = require('acp.compat').health()
  local config = require('acp.config')

  h.start('acp: Neovim')
  local v = vim.version()
  local version = ('%d.%d.%d'):format(v.major, v.minor, v.patch)
  if vim.fn.has('nvim-0.7.2') == 1 then
    h.ok('Neovim ' .. version)
  else
    h.error('Neovim ' .. version .. ' is too old', { 'acp needs Neovim 0.7.2 or later' })
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
  local broker = require('acp.broker')
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

  h.start('acp: logs')
  h.info('broker log: ' .. broker.log_path() .. ' (level ' .. config.log_level() .. ')')
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
