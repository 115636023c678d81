--- Logging in to an agent that refuses to open a session until then.
---
--- The broker reports `auth_required`; the person picks one of the agent's
--- `authMethods`. A method that reads a key from the environment needs no
--- question when that variable is set for the agent: it is used at once.

local config = require('acp.config')
local rpc = require('acp.rpc')
local state = require('acp.state')

local M = {}
local H = {}

-- Module definition ==========================================================

--- Environment variables of well-known key-based methods, by method id.
--- A method can also name its variable itself (`_meta.env` or `varName`).
M.env_methods = {
  ['gemini-api-key'] = 'GEMINI_API_KEY',
  ['vertex-ai'] = 'GOOGLE_API_KEY',
  ['openai-api-key'] = 'OPENAI_API_KEY',
  ['codex-api-key'] = 'CODEX_API_KEY',
  ['anthropic-api-key'] = 'ANTHROPIC_API_KEY',
}

--- Picks a login method for agent `name` and sends it to the broker.
---@param name string
---@param methods table[] the agent's non-terminal authMethods
function M.choose(name, methods)
  if #methods == 0 then
    vim.notify(
      ('(acp) %s needs you to log in, and offers no method this client can use: run `%s` once in a terminal and follow its login steps, then :AcpStart %s'):format(
        name,
        H.command(name),
        name
      ),
      vim.log.levels.ERROR
    )
    return
  end
  local env = H.env_method(name, methods)
  if env ~= nil then
    vim.notify(('(acp) %s: logging in with %s (%s is set)'):format(name, env.id, env.var), vim.log.levels.INFO)
    rpc.authenticate(name, env.id)
    return
  end
  vim.ui.select(methods, {
    prompt = ('%s needs you to log in:'):format(name),
    format_item = function(m)
      local desc = type(m.description) == 'string' and m.description ~= '' and (' — ' .. m.description) or ''
      return tostring(m.name or m.id) .. desc
    end,
  }, function(choice)
    if choice == nil then
      vim.notify(('(acp) %s: no login chosen; :AcpStart %s asks again'):format(name, name), vim.log.levels.WARN)
      return
    end
    rpc.authenticate(name, choice.id)
  end)
end

-- Helper functionality =======================================================

--- The agent's command, for the message.
function H.command(name)
  local spec = config.resolve_agent(name)
  return spec and table.concat(spec.cmd, ' ') or name
end


--- The variable a method reads its key from, if it says or is well known.
function H.var_of(m)
  local meta = type(m._meta) == 'table' and m._meta or {}
  for _, v in ipairs({ m.varName, meta.env, meta.varName, M.env_methods[m.id] }) do
    if type(v) == 'string' and v ~= '' then
      return v
    end
  end
  return nil
end

--- The one method whose variable is set in the agent's environment.
function H.env_method(name, methods)
  local a = state.agents[name]
  local agent_env = a and a.env or {}
  local found
  for _, m in ipairs(methods) do
    local var = H.var_of(m)
    if var ~= nil then
      local v = agent_env[var]
      if v == nil then
        v = vim.env[var]
      elseif v == false then
        v = nil
      end
      if type(v) == 'string' and v ~= '' then
        if found ~= nil then
          return nil -- several: the person chooses
        end
        found = { id = m.id, var = var }
      end
    end
  end
  return found
end

state.on('auth_required', M.choose)

return M
