-- A repository cannot loosen its own permissions: its allow rules and its
-- yolo request apply only once the person trusted them (:AcpTrust or
-- `acp-broker trust`). In yolo, an ask rule still asks.
local T = require('helpers')
local selected = T.selected
local write = T.write
local idle = T.idle

local OPTIONS = {
  { kind = 'allow_always', name = 'Always Allow', optionId = 'allow_always' },
  { kind = 'allow_once', name = 'Allow', optionId = 'allow' },
  { kind = 'reject_once', name = 'Reject', optionId = 'reject' },
}

local function shell(tcid, command)
  return T.shell_request(tcid, command, OPTIONS)
end

-- A Claude-shaped write of `file` in the project.
local function edit(tcid, file, text)
  return {
    type = 'permission',
    announce = true,
    toolCall = {
      toolCallId = tcid,
      title = 'Write ' .. file,
      kind = 'edit',
      rawInput = { file_path = '${cwd}/' .. file, content = text },
      content = { { type = 'diff', path = '${cwd}/' .. file, newText = text } },
      locations = { { path = '${cwd}/' .. file } },
    },
    options = OPTIONS,
    on_allow = { type = 'write', path = file, content = text },
  }
end

--- Replaces vim.fn.confirm for this test: records the message, answers `choice`.
local function stub_confirm(choice)
  local asked = {}
  local real = vim.fn.confirm
  vim.fn.confirm = function(msg)
    asked[#asked + 1] = msg
    return choice
  end
  T.defer(function()
    vim.fn.confirm = real
  end)
  return asked
end

T.test("an untrusted project's allow rule is ignored until :AcpTrust, then it applies", function()
  local project = T.project()
  write(project .. '/.acp/settings.json', '{"permissions":{"allow":["Bash(npm test)"]}}')
  local ctx = T.start_demo({
    name = 'untrusted',
    steps = { shell('npm_${turn}', 'npm test'), { type = 'message', text = 'Done.' } },
  }, { project = project })
  -- Told once that the project wants more than it gets.
  local told = T.wait(function()
    for _, n in ipairs(T.notes) do
      if n.msg:find(':AcpTrust', 1, true) then
        return n.msg
      end
    end
  end, nil, 'the "not trusted" message')
  T.contains(told, 'not trusted', 'the message')
  T.eq(require('acp').status().trusted, false, 'status().trusted')

  require('acp').prompt('Run the tests')
  local win = T.wait_prompt('npm_1')
  T.contains(T.win_text(win), 'Why:', 'the prompt says why it asks')
  T.answer_with_keys('npm_1', 'a')
  T.eq(T.answer(ctx, 'npm_1').result, selected('allow'), 'the answer (by the person)')
  idle()

  -- Declining changes nothing.
  local asked = stub_confirm(2)
  vim.cmd('AcpTrust')
  T.wait(function()
    return #asked == 1
  end, nil, 'the confirmation')
  T.contains(asked[1], 'Bash(npm test)', 'the confirmation shows what trusting enables')
  T.wait_ms(200)
  T.eq(require('acp').status().trusted, false, 'status().trusted after declining')

  vim.fn.confirm = function(msg)
    asked[#asked + 1] = msg
    return 1
  end
  vim.cmd('AcpTrust')
  T.wait(function()
    return require('acp').status().trusted
  end, nil, 'status().trusted after :AcpTrust')
  T.wait(function()
    for _, n in ipairs(T.notes) do
      if n.msg:find('trusted the settings', 1, true) then
        return true
      end
    end
  end, nil, 'the message saying what was enabled')

  local decided = T.on('AcpPermissionDecided')
  require('acp').prompt('Run the tests again')
  T.eq(T.answer(ctx, 'npm_2').result, selected('allow'), 'the answer after trusting')
  idle()
  T.eq(T.requests(ctx, 'npm_2')[1] ~= nil, true, 'the request was made')
  T.wait(function()
    return #decided > 0
  end, nil, 'AcpPermissionDecided')
  T.eq(decided[1].decision, 'allow', 'decision')
  T.eq(decided[1].rule, 'Bash(npm test)', 'rule')
  T.eq(T.find_float(), nil, 'a prompt window')
end)

T.test('yolo from a trusted .gemini/settings.json approves a write; an ask rule still asks', function()
  local project = T.project()
  write(project .. '/.gemini/settings.json', '{"security":{"disableYoloMode":false}}')
  write(project .. '/.acp/settings.json', '{"permissions":{"ask":["Bash(git push *)"]}}')
  -- Trusted from the command line, as a person would in a shell.
  local out = vim.fn.system({ os.getenv('ACP_BROKER_BIN'), 'trust', '--cwd', project })
  T.eq(vim.v.shell_error, 0, 'acp-broker trust: ' .. out)
  local ctx = T.start_demo({
    name = 'yolo',
    steps = {
      edit('write_${turn}', 'notes.txt', 'hello\n'),
      shell('push_${turn}', 'git push origin main'),
      { type = 'message', text = 'Done.' },
    },
  }, { project = project })
  T.wait(function()
    return require('acp').status().yolo
  end, nil, 'status().yolo')
  T.eq(require('acp').status().trusted, true, 'status().trusted')
  T.eq(require('acp').status().yolo_veto, false, 'status().yolo_veto')

  require('acp').prompt('Write and push')
  T.eq(T.answer(ctx, 'write_1').result, selected('allow'), 'the write is approved by yolo')
  local p = T.wait_pending('push_1')
  T.eq(p.kind, 'execute', 'the push asks')
  local req = require('acp.state').pending[p.id]
  T.contains(req.reason or '', 'Bash(git push *)', 'the reason names the ask rule')
  T.answer_with_keys('push_1', 'r')
  T.eq(T.answer(ctx, 'push_1').result, selected('reject'), 'the answer to the push')
  idle()
  T.eq(T.read(project .. '/notes.txt'), 'hello\n', 'notes.txt')

  -- :AcpYolo without an argument says where yolo comes from.
  vim.cmd('AcpYolo')
  T.wait(function()
    return T.notes_text():find('yolo is on', 1, true)
  end, nil, '":AcpYolo" to report yolo on')
end)


T.test(':AcpTrust names what each entry enables: a bare Bash is any command, Edit any file edit', function()
  local project = T.project()
  write(
    project .. '/.acp/settings.json',
    '{"permissions":{"allow":["Bash","Edit","Bash(git status *)","Edit(/src/**)","WebFetch(domain:example.com)"],"defaultMode":"acceptEdits"}}'
  )
  T.start_demo({ name = 'trust-names', steps = { { type = 'message', text = 'Done.' } } }, { project = project })
  local asked = stub_confirm(2)
  vim.cmd('AcpTrust')
  T.wait(function()
    return #asked == 1
  end, nil, 'the confirmation')
  for _, want in ipairs({
    'Bash: any command',
    'Edit: any file edit',
    'Bash(git status *): commands starting with git status',
    "Edit(/src/**): edits under the project's src/",
    'WebFetch(domain:example.com): fetches from example.com',
    'mode acceptEdits: any file edit in the project without asking',
  }) do
    T.contains(asked[1], want, 'the confirmation says what the entry enables')
  end
  T.eq(require('acp').status().trusted, false, 'declined')
end)

T.done()
