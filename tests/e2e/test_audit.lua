-- The audit log records every decision, whoever made it, one JSON object
-- per line with the documented keys, and never a file's contents.
local T = require('helpers')
local write = T.write

local SECRET = 'the-secret-file-content-4711'

local function audit_lines()
  local path = (os.getenv('XDG_STATE_HOME') or (os.getenv('HOME') .. '/.local/state')) .. '/acp-broker/audit.jsonl'
  local lines = {}
  local f = io.open(path, 'r')
  if f then
    for line in f:lines() do
      lines[#lines + 1] = { raw = line, v = vim.fn.json_decode(line) }
    end
    f:close()
  end
  return lines, path
end

local function edit(tcid, file)
  return {
    type = 'permission',
    toolCall = {
      toolCallId = tcid,
      title = 'Write ' .. file,
      kind = 'edit',
      content = { { type = 'diff', path = '${cwd}/' .. file, oldText = vim.NIL, newText = SECRET } },
      locations = { { path = '${cwd}/' .. file } },
    },
    options = {
      { optionId = 'yes', name = 'Allow', kind = 'allow_once' },
      { optionId = 'no', name = 'Reject', kind = 'reject_once' },
    },
    on_allow = { type = 'write', path = file, content = SECRET },
  }
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

T.test('every decision is one audit line with the documented keys, never file contents', function()
  local project = T.project()
  -- A deny rule is restrictive: it applies without trust.
  write(project .. '/.acp/settings.json', '{"permissions":{"deny":["Bash(rm *)"]}}')
  local ctx = T.start_demo({
    name = 'audit',
    steps = {
      shell('denied_${turn}', 'rm -rf build'),
      edit('asked_${turn}', 'notes.txt'),
      { type = 'message', text = 'Done.' },
    },
  }, { project = project })
  require('acp').prompt('Go')
  -- The deny is answered by the broker at once; the edit asks the person.
  T.eq(T.answer(ctx, 'denied_1').result, { outcome = { outcome = 'selected', optionId = 'no' } }, 'deny answer')
  T.answer_with_keys('asked_1', 'a')
  T.eq(T.answer(ctx, 'asked_1').result, { outcome = { outcome = 'selected', optionId = 'yes' } }, 'ask answer')
  T.wait(function()
    return not require('acp').status().busy
  end, nil, 'the turn to end')

  local lines, path = audit_lines()
  T.eq(#lines, 2, 'audit lines in ' .. path)
  local keys = {
    'ts', 'root', 'agent', 'sessionId', 'toolCallId', 'kind', 'title', 'command', 'paths',
    'decision', 'by', 'rule', 'source', 'outcome', 'optionId', 'wait_ms',
  }
  for i, l in ipairs(lines) do
    for _, k in ipairs(keys) do
      T.ok(l.v[k] ~= nil, ('line %d has key %s: %s'):format(i, k, l.raw))
    end
    T.ok(not l.raw:find(SECRET, 1, true), 'no file contents in line ' .. i)
    T.ok(l.v.ts:match('^%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%d'), 'ISO 8601 ts: ' .. l.v.ts)
  end
  local deny, ask = lines[1].v, lines[2].v
  T.eq(
    { deny.toolCallId, deny.decision, deny.by, deny.rule, deny.outcome, deny.optionId, deny.command },
    { 'denied_1', 'deny', 'rule', 'Bash(rm *)', 'selected', 'no', 'rm -rf build' },
    'the deny line'
  )
  T.contains(deny.source, '.acp/settings.json', 'the deny line names the file')
  T.eq(
    { ask.toolCallId, ask.decision, ask.by, ask.outcome, ask.optionId, ask.kind },
    { 'asked_1', 'ask', 'person', 'selected', 'yes', 'edit' },
    'the ask line'
  )
  T.eq(ask.paths, { project .. '/notes.txt' }, 'the ask line lists the path')
  T.ok(type(ask.wait_ms) == 'number' and ask.wait_ms >= 0, 'wait_ms is a number')
end)

T.test('a cancelled prompt is audited as cancelled', function()
  local ctx = T.start_demo({ name = 'audit-cancel', steps = { edit('cancelled_${turn}', 'x.txt') } })
  require('acp').prompt('Go')
  T.wait_prompt('cancelled_1')
  vim.cmd('AcpCancel')
  T.eq(T.answer(ctx, 'cancelled_1').result, { outcome = { outcome = 'cancelled' } }, 'answer')
  local last
  T.wait(function()
    local lines = audit_lines()
    last = lines[#lines] and lines[#lines].v
    return last and last.toolCallId == 'cancelled_1'
  end, nil, 'the audit line of the cancelled prompt')
  T.eq({ last.decision, last.by, last.outcome, last.optionId }, { 'ask', 'cancel', 'cancelled', vim.NIL }, 'the line')
end)

T.done()
