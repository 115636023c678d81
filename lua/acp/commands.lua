--- Implementations of the user commands (plugin/acp.lua only declares them)
--- and their completion.

local M = {}
local H = {}

-- Module definition ==========================================================

--- :AcpStart [agent]
---@param agent string|nil
function M.start(agent)
  if agent == '' then
    agent = nil
  end
  local acp = require('acp')
  if acp.start(agent) then
    local st = acp.status()
    if st.session then
      H.echo(('acp: %s is running (session %s)'):format(st.agent, st.session))
    else
      H.echo(('acp: starting %s…'):format(st.agent))
    end
  end
end

--- :AcpStop [agent]
---@param agent string|nil
function M.stop(agent)
  if agent == '' then
    agent = nil
  end
  require('acp').stop(agent)
end

--- :AcpPrompt {text}
---@param text string
function M.prompt(text)
  require('acp').prompt(text)
end

--- :AcpCancel
function M.cancel()
  if require('acp').cancel() then
    H.echo('acp: turn cancelled')
  end
end

--- :AcpPending: one line listing the queue, and the oldest prompt reopened
--- and focused.
function M.pending()
  local list = require('acp').pending()
  if #list == 0 then
    H.echo('acp: no pending permission prompts')
    return
  end
  local parts = {}
  for i, p in ipairs(list) do
    parts[#parts + 1] = ('%d. %s (%s)'):format(i, p.title, p.kind)
  end
  local msg = ('acp: %d pending: %s'):format(#list, table.concat(parts, ' · '))
  -- One screen line, so no hit-enter prompt swallows the next key.
  local max = vim.o.columns - 13
  if vim.fn.strdisplaywidth(msg) > max then
    msg = vim.fn.strcharpart(msg, 0, max - 1) .. '…'
  end
  H.echo(msg)
  require('acp.prompt').open()
end

--- :AcpAllow[!] [rule]: allow once the oldest pending prompt (! = all).
---@param bang boolean
---@param args string
function M.allow(bang, args)
  if args ~= nil and args:match('%S') then
    return H.rule('allow', args)
  end
  local targets = H.targets(bang)
  if targets == nil then
    return
  end
  local acp, missing = require('acp'), 0
  for _, p in ipairs(targets) do
    local o = H.first(p, 'allow_once')
    if o then
      acp.respond(p.id, o.optionId)
    else
      missing = missing + 1
    end
  end
  if missing > 0 then
    local what = #targets == 1 and 'no allow-once option offered'
      or ('%d of %d prompts offer no allow-once option'):format(missing, #targets)
    H.error(('(acp) %s: choose in the prompt'):format(what))
    require('acp.prompt').open()
  end
end

--- :AcpDeny[!] [rule]: reject once the oldest pending prompt (! = all);
--- reject_always when that is all that is offered, else `cancelled`.
---@param bang boolean
---@param args string
function M.deny(bang, args)
  if args ~= nil and args:match('%S') then
    return H.rule('deny', args)
  end
  local targets = H.targets(bang)
  if targets == nil then
    return
  end
  local acp = require('acp')
  for _, p in ipairs(targets) do
    local o = H.first(p, 'reject_once') or H.first(p, 'reject_always')
    acp.respond(p.id, o and o.optionId or nil)
  end
end

--- Completion: built-in presets and configured agents.
function M.complete_agents(arglead)
  return H.filter(require('acp.config').agent_names(), arglead)
end

--- Completion: running agents.
function M.complete_running(arglead)
  local names = vim.tbl_keys(require('acp.state').agents)
  table.sort(names)
  return H.filter(names, arglead)
end

-- Helper functionality =======================================================

function H.echo(msg, hl)
  vim.api.nvim_echo({ { msg, hl or 'None' } }, false, {})
end

function H.error(msg)
  vim.notify(msg, vim.log.levels.ERROR)
end

function H.filter(names, arglead)
  arglead = arglead or ''
  return vim.tbl_filter(function(n)
    return n:sub(1, #arglead) == arglead
  end, names)
end

--- The prompts a bare :AcpAllow / :AcpDeny answers: the oldest, or (bang)
--- all; skips those already answered here. Nil when there are none.
function H.targets(bang)
  local prompt = require('acp.prompt')
  local list = {}
  for _, p in ipairs(require('acp').pending()) do
    if not prompt.awaiting(p.id) then
      list[#list + 1] = p
      if not bang then
        break
      end
    end
  end
  if #list == 0 then
    H.echo('acp: no pending permission prompts')
    return nil
  end
  return list
end

function H.first(p, kind)
  local _, o = require('acp.state').first_option(p, kind)
  return o
end

--- :AcpAllow / :AcpDeny with arguments add rules ("[scope] Tool(spec)").
--- Every rule argument goes through here so the policy can take it over;
--- until it exists, `verb` and `args` are not used.
---@param verb 'allow'|'deny'
---@param args string
---@diagnostic disable-next-line: unused-local
function H.rule(verb, args)
  H.error('(acp) rules arrive with the permission policy; see :help acp-rules')
end

return M
