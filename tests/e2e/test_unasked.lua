-- Tool calls that act without a permission request (tests/scenarios/
-- unasked.json): the broker notices them from the agent's tool_call
-- updates, judges them as if they had been asked, and where the policy
-- would have asked or denied, audits them (by "agent", outcome "unasked"),
-- notifies the person, draws a red line in the chat and counts them in
-- status().unasked. Asked calls and calls the policy allows are not flagged.
local T = require('helpers')
local api = vim.api

local audit_lines = T.audit_lines

local function by_id(lines)
  local t = {}
  for _, l in ipairs(lines) do
    t[l.toolCallId] = l
  end
  return t
end

local function unasked_lines(session)
  local list = {}
  for _, l in ipairs(audit_lines()) do
    if l.outcome == 'unasked' and l.sessionId == session then
      list[#list + 1] = l
    end
  end
  return list
end

local function chat_text(session)
  local buf = require('acp.chat').buffer(session)
  return buf and table.concat(api.nvim_buf_get_lines(buf, 0, -1, false), '\n') or '', buf
end

--- Highlight groups on the first line of the chat containing `sub`.
local function groups_of(buf, sub)
  local ls = api.nvim_buf_get_lines(buf, 0, -1, false)
  local ns = api.nvim_get_namespaces()['acp-chat']
  for i, l in ipairs(ls) do
    if l:find(sub, 1, true) then
      local list = {}
      for _, m in ipairs(api.nvim_buf_get_extmarks(buf, ns, { i - 1, 0 }, { i - 1, -1 }, { details = true })) do
        list[#list + 1] = m[4].hl_group
      end
      return list
    end
  end
  return nil
end

T.test('calls that acted unasked: audited, notified, red in the chat, counted; asked ones are not', function()
  local project = T.project()
  -- A deny rule is restrictive: it applies without trust.
  T.write(project .. '/.acp/settings.json', '{"permissions":{"deny":["Bash(rm *)"]}}')
  local events = T.on('AcpUnasked')
  local ctx = T.start_demo('unasked.json', { project = project })
  T.eq(require('acp').status().unasked, 0, 'status().unasked before the turn')
  require('acp').chat()
  require('acp').prompt('Go')
  -- The asked write is a prompt like any other.
  T.answer_with_keys('asked_write_1', 'a')
  T.eq(T.answer(ctx, 'asked_write_1').result, T.selected('allow'), 'the asked write was allowed by the person')
  T.idle()
  T.wait(function()
    return require('acp').status().unasked == 3
  end, nil, 'status().unasked == 3, got ' .. tostring(require('acp').status().unasked))

  -- Audit lines are written once per broker loop iteration.
  local lines = T.wait(function()
    local l = unasked_lines(ctx.session)
    return #l >= 3 and l
  end, nil, 'three unasked audit lines')
  T.eq(#lines, 3, 'three unasked audit lines')
  local u = by_id(lines)
  local w, rm, touch = u.sneak_write_1, u.sneak_rm_1, u.sneak_touch_1
  T.ok(w and rm and touch, 'the write, the rm and the touch: ' .. vim.inspect(lines))
  T.eq({ w.by, w.outcome, w.decision, w.kind, w.optionId }, { 'agent', 'unasked', 'ask', 'edit', vim.NIL }, 'the write')
  T.eq(w.paths, { project .. '/sneaky.txt' }, 'the write names its path (from an earlier update)')
  T.eq(w.title, 'Write sneaky.txt', 'with its newest title')
  T.eq(
    { rm.by, rm.outcome, rm.decision, rm.rule, rm.command },
    { 'agent', 'unasked', 'deny', 'Bash(rm *)', 'rm -rf build' },
    'the rm: the deny rule would have denied it'
  )
  T.contains(rm.source, '.acp/settings.json', 'the rm line names the rule file')
  T.eq({ touch.decision, touch.command }, { 'ask', 'touch ran.txt' }, 'the command still running at the turn end')
  local all = by_id(audit_lines())
  T.eq({ all.asked_write_1.by, all.asked_write_1.outcome }, { 'person', 'selected' }, 'the asked write is audited as asked')
  T.eq(all.sneak_read_1, nil, 'a read is never flagged')

  T.eq(#events, 3, 'AcpUnasked fired three times')
  T.eq(events[1].toolCallId, 'sneak_write_1', 'first the write')
  local warn, err = {}, {}
  for _, n in ipairs(T.notes) do
    if n.msg:find('WITHOUT ASKING', 1, true) then
      if n.level == vim.log.levels.ERROR then
        err[#err + 1] = n.msg
      elseif n.level == vim.log.levels.WARN then
        warn[#warn + 1] = n.msg
      end
    end
  end
  T.eq(#warn, 2, 'two warnings (the write, the touch): ' .. T.notes_text())
  T.eq(#err, 1, 'one error (the rm a rule denies): ' .. T.notes_text())
  T.contains(err[1], 'rm -rf build', 'the error names the command')
  T.contains(warn[1], project .. '/sneaky.txt', 'the warning names the file')

  local text, buf = '', nil
  -- The header is drawn once the blocks queued before it are (the chat
  -- draws them in slices; Neovim, and this wait, run in between).
  T.wait(function()
    text, buf = chat_text(ctx.session)
    return text:find('UNASKED: execute touch ran.txt', 1, true) and text:find('3 tool calls acted WITHOUT ASKING', 1, true)
  end, nil, 'the chat to show the last unasked call and count it in its header')
  T.contains(text, 'UNASKED: edit Write sneaky.txt (the policy would have asked you)', 'the red note of the write')
  T.contains(text, 'UNASKED: execute rm -rf build (the policy would have denied it)', 'the red note of the rm')
  T.contains(text, 'UNASKED: the agent did this without asking; the policy would have asked you', 'the line in the block')
  T.contains(text, '+sneaky line', 'the diff of the file')
  T.contains(text, '3 tool calls acted WITHOUT ASKING', 'the header counts them')
  T.ok(not text:find('UNASKED: edit Write asked.txt', 1, true), 'no note for the asked write')
  T.ok(vim.tbl_contains(groups_of(buf, 'UNASKED: edit Write sneaky.txt') or {}, 'AcpChatError'), 'the note is red')
  T.ok(
    vim.tbl_contains(groups_of(buf, 'UNASKED: the agent did this') or {}, 'AcpChatError'),
    'the line in the block is red'
  )
end)

T.test('calls the policy would have allowed anyway (acceptEdits, an allow rule) are not flagged', function()
  local events = T.on('AcpUnasked')
  local ctx = T.start_demo('unasked.json', {
    setup = {
      ui = { arm_ms = 50 },
      permissions = { defaultMode = 'acceptEdits', allow = { 'Bash(touch ran.txt)' } },
    },
  })
  require('acp').prompt('Go')
  T.idle()
  T.eq(T.answer(ctx, 'asked_write_1').result, T.selected('allow'), 'the asked write was allowed by the mode')
  -- The rm is neither an edit nor allowed by a rule: it alone is flagged.
  T.wait(function()
    return #events >= 1
  end, nil, 'AcpUnasked for the rm')
  T.wait_ms(200)
  T.eq(#events, 1, 'one AcpUnasked: ' .. vim.inspect(events))
  T.eq({ events[1].toolCallId, events[1].decision }, { 'sneak_rm_1', 'ask' }, 'for the rm')
  T.eq(require('acp').status().unasked, 1, 'status().unasked')
  local lines = T.wait(function()
    local l = unasked_lines(ctx.session)
    return #l >= 1 and l
  end, nil, 'the unasked audit line')
  T.wait_ms(100)
  lines = unasked_lines(ctx.session)
  T.eq(#lines, 1, 'one unasked audit line')
  T.eq(lines[1].toolCallId, 'sneak_rm_1', 'the rm; not the write (acceptEdits) nor the touch (allow rule)')
end)

T.test('history replayed by session/load is not flagged', function()
  local events = T.on('AcpUnasked')
  local ctx = T.start_demo('resume.json')
  local first = ctx.session
  T.wait(function()
    return require('acp.state').last_session('acp-demo-agent', ctx.project) == first
  end, nil, 'the session remembered')
  require('acp').stop()
  T.wait(function()
    return require('acp').status().agent == nil
  end, nil, 'the agent to stop')
  local spec = {
    cmd = { os.getenv('ACP_DEMO_AGENT_BIN') },
    env = { ACP_DEMO_SCENARIO = ctx.scenario, ACP_DEMO_TRANSCRIPT = ctx.transcript },
  }
  T.ok(require('acp').start(spec, { cwd = ctx.project, resume = true }), 'start() with resume')
  T.wait(function()
    return require('acp').status().session == first
  end, nil, 'the same session back')
  -- The history holds a completed edit (history_write_1) nobody asked for
  -- in this process.
  require('acp').prompt('Hello again')
  T.idle()
  T.wait_ms(100)
  T.eq(#events, 0, 'no AcpUnasked: ' .. vim.inspect(events))
  T.eq(require('acp').status().unasked, 0, 'status().unasked')
  T.eq(#unasked_lines(first), 0, 'no unasked audit line')
end)

T.test('a call still running when the agent is stopped is flagged', function()
  local events = T.on('AcpUnasked')
  local ctx = T.start_demo({
    name = 'unasked-stop',
    steps = {
      {
        type = 'update',
        update = {
          sessionUpdate = 'tool_call',
          toolCallId = 'long_${turn}',
          title = 'make deploy',
          kind = 'execute',
          status = 'in_progress',
          rawInput = { command = 'make deploy' },
        },
      },
      { type = 'sleep', ms = 30000 },
    },
  })
  require('acp').prompt('Go')
  T.wait(function()
    local s = require('acp.state').sessions[ctx.session]
    return s and s.tools.long_1
  end, nil, 'the running call')
  T.eq(#events, 0, 'not flagged while it runs')
  require('acp').stop()
  T.wait(function()
    return #events == 1
  end, nil, 'AcpUnasked when the agent stops')
  T.eq({ events[1].toolCallId, events[1].command, events[1].decision }, { 'long_1', 'make deploy', 'ask' }, 'the call')
  T.wait(function()
    return #unasked_lines(ctx.session) == 1
  end, nil, 'its audit line')
end)

T.done()
