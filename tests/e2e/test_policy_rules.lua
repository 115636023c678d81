-- Rules decide without the person: a deny rule answers the agent's reject
-- option at once and says which rule; :AcpAllow adds a project rule that
-- applies at once (the project stays trusted) and refuses an invalid one;
-- a malformed settings file is reported once, with file:line:column, and
-- decisions go on. :AcpRules and :AcpLog show what happened.
local T = require('helpers')
local selected = T.selected
local write = T.write
local idle = T.idle
local shell = T.shell_request

local notes_with = T.notes_with

local function buffer_text(buf)
  return table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), '\n')
end

local function find_buf(pred)
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(b) and pred(b) then
      return b
    end
  end
end

T.test('a project deny rule answers reject at once, without a prompt, and names the rule', function()
  local project = T.project()
  -- Deny rules are restrictive: they apply although the project is not trusted.
  write(project .. '/.acp/settings.json', '{"permissions":{"deny":["Bash(rm *)"]}}')
  local decided = T.on('AcpPermissionDecided')
  local requests = T.on('AcpPermissionRequest')
  local ctx = T.start_demo({
    name = 'deny-rule',
    steps = { shell('rm_${turn}', 'rm -rf build'), { type = 'message', text = 'Done.' } },
  }, { project = project })
  require('acp').prompt('Clean up')
  T.eq(T.answer(ctx, 'rm_1').result, selected('reject'), 'the answer to rm -rf build')
  idle()
  T.eq(#requests, 0, 'AcpPermissionRequest count (no prompt)')
  T.eq(T.find_float(), nil, 'a prompt window')
  T.wait(function()
    return #decided > 0
  end, nil, 'AcpPermissionDecided')
  T.eq(decided[1].decision, 'deny', 'AcpPermissionDecided decision')
  T.eq(decided[1].toolCallId, 'rm_1', 'AcpPermissionDecided toolCallId')
  T.eq(decided[1].optionId, 'reject', 'AcpPermissionDecided optionId')
  T.eq(decided[1].rule, 'Bash(rm *)', 'AcpPermissionDecided rule')
  local warned = T.wait(function()
    return notes_with('Bash(rm *)', vim.log.levels.WARN)[1]
  end, nil, 'a warning naming the rule')
  T.contains(warned, 'denied', 'the warning')
  T.contains(warned, 'rm -rf build', 'the warning')

  -- :AcpLog opens the audit log as a table, read-only, at its end.
  vim.cmd('AcpLog')
  local buf = vim.api.nvim_get_current_buf()
  T.contains(vim.api.nvim_buf_get_name(buf), 'acp://log', ':AcpLog buffer name')
  T.contains(buffer_text(buf), 'Bash(rm *)', 'the audit log')
  T.eq(vim.api.nvim_win_get_cursor(0)[1], vim.api.nvim_buf_line_count(buf), 'cursor on the last line')
  T.contains(require('acp.logview').json_at_cursor(), '"toolCallId":"rm_1"', 'the raw line of the last row')
  T.eq(vim.bo[buf].modifiable, false, "the log is not 'modifiable'")
  vim.cmd('close')
end)

T.test('with no autocommand defined, a denial still warns; the User event is not fired', function()
  local project = T.project()
  write(project .. '/.acp/settings.json', '{"permissions":{"deny":["Bash(rm *)"]}}')
  vim.g.acp_last_event = nil
  local ctx = T.start_demo({
    name = 'deny-quiet',
    steps = { shell('rm_${turn}', 'rm -rf build'), { type = 'message', text = 'Done.' } },
  }, { project = project })
  require('acp').prompt('Clean up')
  T.eq(T.answer(ctx, 'rm_1').result, selected('reject'), 'the answer to rm -rf build')
  idle()
  local warned = T.wait(function()
    return notes_with('Bash(rm *)', vim.log.levels.WARN)[1]
  end, nil, 'a warning naming the rule')
  T.contains(warned, 'denied', 'the warning')
  local last = vim.g.acp_last_event
  T.ok(last == nil or last.event ~= 'AcpPermissionDecided', 'acp_last_event: ' .. vim.inspect(last))
end)

T.test(':AcpAllow project {rule} writes .acp/settings.json, keeps the project trusted and applies at once', function()
  local ctx = T.start_demo({
    name = 'allow-project',
    steps = { shell('npm_${turn}', 'npm test'), { type = 'message', text = 'Done.' } },
  })
  local added = #notes_with('Bash(npm test)')
  vim.cmd('AcpAllow project Bash(npm test)')
  T.wait(function()
    return #notes_with('Bash(npm test)', vim.log.levels.INFO) > added
  end, nil, 'the rule to be added')
  local file = ctx.project .. '/.acp/settings.json'
  local json = vim.fn.json_decode(T.read(file) or 'null')
  T.eq(json.permissions.allow, { 'Bash(npm test)' }, 'permissions.allow in ' .. file)
  T.wait(function()
    return require('acp').status().trusted
  end, nil, 'status().trusted after :AcpAllow project')

  require('acp').prompt('Run the tests')
  T.eq(T.answer(ctx, 'npm_1').result, selected('allow'), 'the answer to npm test')
  idle()
  T.eq(T.find_float(), nil, 'a prompt window')

  -- :AcpRules lists the rule with its file.
  vim.cmd('AcpRules')
  local buf = T.wait(function()
    return find_buf(function(b)
      return vim.bo[b].filetype == 'acp-rules'
    end)
  end, nil, 'the :AcpRules buffer')
  local text = buffer_text(buf)
  T.contains(text, 'Bash(npm test)', ':AcpRules')
  T.contains(text, '.acp/settings.json', ':AcpRules')
  T.contains(text, 'Mode:', ':AcpRules')
  T.contains(text, 'Yolo:', ':AcpRules')
  T.contains(text, 'Trust:', ':AcpRules')
  T.eq(vim.bo[buf].buftype, 'nofile', ":AcpRules 'buftype'")
  vim.api.nvim_set_current_win(vim.fn.bufwinid(buf))
  T.feed('q')
  T.eq(vim.fn.bufwinid(buf), -1, 'q closes :AcpRules')
end)

T.test(':AcpAllow project in an untrusted project adds the rule, says it applies only after :AcpTrust, and it does not apply', function()
  local project = T.project()
  -- The repository brought its own allow rule: permissive, not trusted.
  write(project .. '/.acp/settings.json', '{"permissions":{"allow":["Bash(make *)"]}}')
  local ctx = T.start_demo({
    name = 'allow-untrusted',
    steps = { shell('npm_${turn}', 'npm test'), { type = 'message', text = 'Done.' } },
  }, { project = project })
  vim.cmd('AcpAllow project Bash(npm test)')
  T.wait(function()
    return #notes_with('applies once you trust', vim.log.levels.WARN) > 0
  end, nil, 'the note that the rule waits for :AcpTrust')
  local json = vim.fn.json_decode(T.read(project .. '/.acp/settings.json'))
  T.eq(json.permissions.allow, { 'Bash(make *)', 'Bash(npm test)' }, 'permissions.allow')
  T.eq(require('acp').status().trusted, false, 'status().trusted')
  require('acp').prompt('Run the tests')
  -- Not trusted: the person is asked, the repository's content stays off.
  T.wait_pending('npm_1')
  vim.cmd('AcpDeny')
  T.eq(T.answer(ctx, 'npm_1').result, selected('reject'), 'the answer')
  idle()
end)

T.test('an invalid rule is refused with the reason and nothing is written', function()
  local ctx = T.start_demo({ name = 'invalid-rule', steps = { { type = 'message', text = 'Hi.' } } })
  vim.cmd('AcpAllow Bash(')
  local err = T.wait(function()
    for _, n in ipairs(T.notes) do
      if n.level == vim.log.levels.ERROR then
        return n.msg
      end
    end
  end, nil, 'an error for the invalid rule')
  T.contains(err, '(acp)', 'the error')
  T.ok(err:find('Bash(', 1, true) or err:find('rule'), 'the error says it is about the rule: ' .. err)
  T.ok(not T.exists(ctx.project .. '/.acp/settings.json'), 'no .acp/settings.json')
  -- Without a rule, :AcpAsk says what it needs.
  T.notes = {}
  pcall(vim.cmd, 'AcpAsk session') -- an error message raises inside :command on 0.7
  T.contains(T.notes_text(), 'needs a rule', ':AcpAsk session')
end)

T.test('completion: scopes, then tool names; a complete-looking invalid rule gets none and its reason', function()
  local c = require('acp.commands')
  local first = c.complete_rule('', 'AcpAllow ', 9)
  for _, want in ipairs({ 'session', 'project', 'user', 'Bash(', 'WebFetch(domain:', 'Kind(', 'mcp__' }) do
    T.ok(vim.tbl_contains(first, want), 'first argument offers ' .. want)
  end
  T.eq(c.complete_rule('B', 'AcpDeny project B', 17), { 'Bash(' }, 'after a scope')
  T.ok(not vim.tbl_contains(c.complete_rule('', 'AcpDeny ', 8), 'session'), 'no session scope for deny rules')
  T.ok(not vim.tbl_contains(c.complete_rule('', 'AcpAsk user ', 12), 'session'), 'no scope after a scope')
  T.eq(c.complete_rule('Kind(ed', 'AcpAllow Kind(ed', 16), { 'Kind(edit)' }, 'Kind(')
  T.eq(c.complete_rule('WebSearch', 'AcpAllow WebSearch', 18), { 'WebSearch' }, 'a valid bare tool')
  -- No tool name: the broker's rule-check refuses it.
  T.eq(c.complete_rule('(ls)', 'AcpAllow (ls)', 13), {}, 'an invalid rule')
  T.contains(vim.fn.execute('messages'), '(ls)', 'the reason is echoed')
  T.eq(c.complete_yolo('t'), { 'toggle' }, ':AcpYolo')
  T.eq(c.complete_mode('a'), { 'acceptEdits' }, ':AcpMode')
end)

T.test('a malformed .acp/settings.json: one message with file:line:column, no crash, decisions go on', function()
  local project = T.project()
  write(project .. '/.acp/settings.json', '{\n  "permissions": {\n    "deny": ["Bash(rm *)",]\n  }\n}\n')
  local scenario = {
    name = 'malformed',
    steps = {
      shell('curl_${turn}', 'curl -s https://example.com'),
      shell('npm_${turn}', 'npm test'),
      { type = 'message', text = 'Done.' },
    },
  }
  -- Decisions still come from the other sources (here setup()).
  local setup = { ui = { arm_ms = 50 }, permissions = { deny = { 'Bash(curl *)' } } }
  local ctx = T.start_demo(scenario, { project = project, setup = setup })
  local msg = T.wait(function()
    return notes_with('.acp/settings.json', vim.log.levels.ERROR)[1]
  end, nil, 'the message about the malformed file')
  T.ok(msg:find('settings%.json:%d+:%d+'), 'file:line:column in ' .. msg)
  require('acp').prompt('Go')
  T.eq(T.answer(ctx, 'curl_1').result, selected('reject'), 'setup() deny rule still applies')
  T.answer_with_keys('npm_1', 'a')
  T.eq(T.answer(ctx, 'npm_1').result, selected('allow'), 'the person still decides')
  idle()
  -- A new session in the same project: the message is not repeated.
  require('acp').stop()
  T.wait(function()
    return next(require('acp.state').agents) == nil
  end, nil, 'the agent to stop')
  ctx = T.start_demo(scenario, { project = project, setup = setup })
  T.wait(function()
    return require('acp.state').settings_for(project) ~= nil
  end, nil, 'the settings of the new session')
  T.wait_ms(200)
  T.eq(#notes_with('.acp/settings.json', vim.log.levels.ERROR), 1, 'messages about the malformed file')
  local ok = pcall(vim.cmd, 'checkhealth acp')
  T.ok(ok, ':checkhealth acp ran')
  T.contains(buffer_text(vim.api.nvim_get_current_buf()), 'settings.json', ':checkhealth acp reports the file')
end)

T.done()
