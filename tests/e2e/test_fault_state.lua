-- Fault injection: the broker's state directory cannot be written, or the
-- disk is full. Decisions are still made (a deny rule denies, a prompt
-- asks and its answer reaches the agent) and the person is told once that
-- the audit log cannot be written.
--
-- The tests run as root, for whom chmod 0500 changes nothing. So:
-- * unwritable: $XDG_STATE_HOME/acp-broker is a regular file, so nothing can
--   be created in it (ENOTDIR), whoever runs the broker;
-- * disk full: audit.jsonl and broker.log are symlinks to /dev/full, which
--   opens but fails every write with ENOSPC, as a full disk does.
-- (A read-only bind mount or tmpfs would need mount privileges the CI
-- container may not have.)
local T = require('helpers')

local uv = vim.uv or vim.loop

local function state_dir()
  return assert(os.getenv('XDG_STATE_HOME'), 'XDG_STATE_HOME not set') .. '/acp-broker'
end

-- Stops the broker (if any); the next start() starts a new one, which looks
-- at the state directory afresh.
local function stop_broker()
  local broker = require('acp.broker')
  if broker.chan then
    T.stop_all()
    broker.shutdown()
    T.wait(function()
      return broker.chan == nil
    end, nil, 'the broker to exit')
  end
end

local function shell(tcid, command)
  return {
    type = 'permission',
    toolCall = { toolCallId = tcid, title = command, kind = 'execute', rawInput = { command = command } },
    options = {
      { optionId = 'yes', name = 'Allow', kind = 'allow_once' },
      { optionId = 'no', name = 'Reject', kind = 'reject_once' },
    },
  }
end

local function audit_notes()
  local list = {}
  for _, n in ipairs(T.notes) do
    if n.msg:find('audit log', 1, true) then
      list[#list + 1] = n
    end
  end
  return list
end

-- Asks (answered by the person), denies by rule, asks again in a second
-- turn: every decision is made although no audit line can be written, and
-- the person hears about the audit log exactly once.
local function decisions_still_made()
  local project = T.project()
  -- A deny rule is restrictive: it applies without trust.
  T.write(project .. '/.acp/settings.json', '{"permissions":{"deny":["Bash(rm *)"]}}')
  local ctx = T.start_demo({
    name = 'no-audit',
    steps = {
      shell('asked_${turn}', 'make test'),
      shell('denied_${turn}', 'rm -rf build'),
      { type = 'message', text = 'Done.' },
    },
  }, { project = project })
  local decided = T.on('AcpPermissionDecided')

  require('acp').prompt('Go')
  local p = T.wait_pending('asked_1')
  T.wait_prompt('asked_1')
  T.ok(require('acp').respond(p.id, 'yes'), 'respond()')
  T.eq(T.answer(ctx, 'asked_1').result, T.selected('yes'), 'the answer to the prompt')
  T.eq(T.answer(ctx, 'denied_1').result, T.selected('no'), 'the deny rule answered the agent')
  T.idle()
  T.wait(function()
    return #decided == 1
  end, nil, 'AcpPermissionDecided')
  T.eq({ decided[1].toolCallId, decided[1].decision }, { 'denied_1', 'deny' }, '{toolCallId, decision}')
  -- The failure notice did not bring the answered prompt back.
  T.never(function()
    return #T.floats() > 0
  end, 300, 'a prompt window after the answer')

  -- A second turn: the same decisions, no second notice.
  require('acp').prompt('Again')
  p = T.wait_pending('asked_2')
  require('acp').respond(p.id, 'no')
  T.eq(T.answer(ctx, 'asked_2').result, T.selected('no'), 'the answer in the second turn')
  T.eq(T.answer(ctx, 'denied_2').result, T.selected('no'), 'the deny rule in the second turn')
  T.idle()
  T.never(function()
    return #audit_notes() > 1
  end, 300, 'a second message about the audit log')

  local told = audit_notes()
  T.eq(#told, 1, 'messages about the audit log: ' .. T.notes_text())
  T.contains(told[1].msg, 'cannot be written', 'the message')
  T.contains(told[1].msg, state_dir() .. '/audit.jsonl', 'the message names the file')
  T.eq(told[1].level, vim.log.levels.ERROR, 'its level')
  return ctx
end

T.test('state directory unwritable (a file in its place): decisions made, told once', function()
  stop_broker()
  local dir = state_dir()
  vim.fn.delete(dir, 'rf')
  T.write(dir, 'not a directory\n')
  T.defer(function()
    stop_broker()
    vim.fn.delete(dir)
  end)
  decisions_still_made()
  T.eq(vim.fn.filereadable(dir), 1, 'the file is still there (nothing replaced it)')
  T.eq(T.read(dir), 'not a directory\n', 'and unchanged')
end)

T.test('disk full (audit log and broker log on /dev/full): decisions made, told once', function()
  stop_broker()
  local dir = state_dir()
  vim.fn.delete(dir, 'rf')
  vim.fn.mkdir(dir, 'p')
  for _, name in ipairs({ 'audit.jsonl', 'broker.log' }) do
    T.ok(uv.fs_symlink('/dev/full', dir .. '/' .. name), 'symlink ' .. name .. ' -> /dev/full')
  end
  T.defer(function()
    stop_broker()
    vim.fn.delete(dir, 'rf')
  end)
  decisions_still_made()
end)

T.test('the audit log works again once the state directory is back', function()
  -- A new broker with a writable state directory writes its audit log and
  -- says nothing about it.
  stop_broker()
  vim.fn.delete(state_dir(), 'rf')
  local ctx = T.start_demo({ name = 'audit-back', steps = { shell('back_${turn}', 'make') } })
  require('acp').prompt('Go')
  local p = T.wait_pending('back_1')
  require('acp').respond(p.id, 'yes')
  T.eq(T.answer(ctx, 'back_1').result, T.selected('yes'), 'the answer')
  T.idle()
  T.wait(function()
    return (T.read(state_dir() .. '/audit.jsonl') or ''):find('back_1', 1, true)
  end, nil, 'the decision in the audit log')
  T.eq(#audit_notes(), 0, 'messages about the audit log')
end)

T.done()
