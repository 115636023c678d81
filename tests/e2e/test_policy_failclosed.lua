-- Settings files that cannot be used fail closed (design §6): a project
-- .acp/settings.json with a trailing comma that denies `git push` must not
-- let yolo allow the push; :AcpYolo on and :AcpMode acceptEdits are refused
-- naming the file; a directory in place of .claude/settings.json suspends
-- acceptEdits; fixing the file brings everything back.
local T = require('helpers')
local write = T.write

local notes_with = T.notes_with

local function rules_text()
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(b) and vim.bo[b].filetype == 'acp-rules' then
      return table.concat(vim.api.nvim_buf_get_lines(b, 0, -1, false), '\n')
    end
  end
end

local function edit(tcid, file)
  return {
    type = 'permission',
    announce = true,
    toolCall = {
      toolCallId = tcid,
      title = 'Write ' .. file,
      kind = 'edit',
      content = { { type = 'diff', path = '${cwd}/' .. file, oldText = vim.NIL, newText = 'x\n' } },
      locations = { { path = '${cwd}/' .. file } },
    },
    options = {
      { optionId = 'allow', name = 'Allow', kind = 'allow_once' },
      { optionId = 'reject', name = 'Reject', kind = 'reject_once' },
    },
  }
end

T.test('a malformed project file under yolo: the push it denies is asked, :AcpYolo on refused, fixed: denied', function()
  local project = T.project()
  local file = project .. '/.acp/settings.json'
  write(file, '{\n  "permissions": {\n    "deny": ["Bash(git push *)"],\n  }\n}\n')
  local scenario = {
    name = 'failclosed',
    steps = {
      T.shell_request('push_${turn}', 'git push --force origin main'),
      T.shell_request('npm_${turn}', 'npm test'),
      { type = 'message', text = 'Done.' },
    },
  }
  local ctx = T.start_demo(scenario, { project = project, setup = { ui = { arm_ms = 50 }, yolo = true } })
  local msg = T.wait(function()
    return notes_with('.acp/settings.json', vim.log.levels.ERROR)[1]
  end, nil, 'the message about the broken file')
  T.ok(msg:find('settings%.json:%d+:%d+'), 'file:line:column in ' .. msg)
  T.contains(msg, 'yolo, acceptEdits, allow rules and trust are suspended for this project', 'what is suspended')
  T.eq(require('acp').status().yolo, false, 'status().yolo with yolo in setup()')

  vim.cmd('AcpYolo on')
  local refusal = T.wait(function()
    return notes_with('yolo is suspended', vim.log.levels.ERROR)[1]
  end, nil, ':AcpYolo on refused')
  T.contains(refusal, file, 'the refusal names the file')
  vim.cmd('AcpMode acceptEdits')
  local mode_refusal = T.wait(function()
    return notes_with('acceptEdits is suspended', vim.log.levels.ERROR)[1]
  end, nil, ':AcpMode acceptEdits refused')
  T.contains(mode_refusal, file, 'the mode refusal names the file')
  T.wait_ms(200)
  T.eq(require('acp').status().yolo, false, 'status().yolo after :AcpYolo on')

  -- The push is asked (its deny rule cannot be seen, and yolo is
  -- suspended); so is a harmless command.
  require('acp').prompt('Push')
  T.answer_with_keys('push_1', 'r')
  T.eq(T.answer(ctx, 'push_1').result, T.selected('reject'), 'the push was asked and rejected')
  T.answer_with_keys('npm_1', 'a')
  T.eq(T.answer(ctx, 'npm_1').result, T.selected('allow'), 'npm test was asked')
  T.idle()

  vim.cmd('AcpRules')
  local text = T.wait(rules_text, nil, 'the :AcpRules buffer')
  T.contains(text, 'FAILING CLOSED', ':AcpRules')
  T.contains(text, '.acp/settings.json:4:', ':AcpRules names file and line')
  T.contains(text, 'suspended', ':AcpRules yolo line')
  vim.cmd('close')

  local ok = pcall(vim.cmd, 'checkhealth acp')
  T.ok(ok, ':checkhealth acp ran')
  local health = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\n')
  T.contains(health, '.acp/settings.json:4:', ':checkhealth names file and line')
  T.contains(health, 'suspended', ':checkhealth says what is suspended')

  -- Fixed: its deny rule denies at once and yolo is back (and :AcpYolo on
  -- is accepted again).
  write(file, '{\n  "permissions": {\n    "deny": ["Bash(git push *)"]\n  }\n}\n')
  require('acp').prompt('Push again')
  T.eq(T.answer(ctx, 'push_2').result, T.selected('reject'), 'denied by the fixed file, without a prompt')
  T.eq(T.answer(ctx, 'npm_2').result, T.selected('allow'), 'allowed by yolo, without a prompt')
  T.idle()
  vim.cmd('AcpYolo on')
  T.wait(function()
    return require('acp').status().yolo
  end, nil, 'status().yolo after the fix')
end)

T.test('a directory in place of .claude/settings.json under acceptEdits: edits are asked', function()
  local project = T.project()
  vim.fn.mkdir(project .. '/.claude/settings.json', 'p')
  local scenario = {
    name = 'failclosed-dir',
    steps = { edit('edit_${turn}', 'a.txt'), { type = 'message', text = 'Done.' } },
  }
  local setup = { ui = { arm_ms = 50 }, permissions = { defaultMode = 'acceptEdits' } }
  local ctx = T.start_demo(scenario, { project = project, setup = setup })
  local msg = T.wait(function()
    return notes_with('.claude/settings.json', vim.log.levels.ERROR)[1]
  end, nil, 'the message about the directory')
  T.contains(msg, 'is a directory', 'the reason')
  T.eq(require('acp').status().mode, 'default', 'acceptEdits suspended')
  require('acp').prompt('Edit')
  T.answer_with_keys('edit_1', 'r')
  T.eq(T.answer(ctx, 'edit_1').result, T.selected('reject'), 'the edit was asked')
  T.idle()
  vim.fn.delete(project .. '/.claude/settings.json', 'd')
  require('acp').prompt('Edit again')
  T.eq(T.answer(ctx, 'edit_2').result, T.selected('allow'), 'acceptEdits is back: allowed without a prompt')
end)

T.done()
