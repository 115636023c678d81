-- The agent cannot write the files that govern permissions without the
-- person asking for it. In yolo (a trusted project .acp/settings.json with
-- "yolo": true), in acceptEdits and with allow rules that cover every path
-- (Edit(/**), Edit(//**), Bash(echo *), Bash(sed *)), an agent's request to
-- write any of these is never answered by the broker alone: a prompt appears,
-- nothing is written while it waits, and the write happens only if the person
-- allows it.
--
--   project: .acp/settings.json, .gemini/settings.json, .claude/settings.json,
--            .claude/settings.local.json
--   user:    ~/.gemini/settings.json, ~/.claude/settings.json,
--            $XDG_CONFIG_HOME/acp-broker/settings.json,
--            $XDG_STATE_HOME/acp-broker/trust.json
--   also:    a symlink in the project pointing at ~/.claude/settings.json,
--            a `..` path, a Gemini-shaped edit (diff only), and the shell:
--            `echo x > .gemini/settings.json`, `sed -i`, `echo x > link.json`
--
-- In each mode an ordinary edit of the project (and, where the mode allows
-- commands, an ordinary shell redirect) is allowed without a prompt before
-- and after the governing requests, so the mode really was on.
--
-- Also: respond() with `remember` on an option that is not allow_once is
-- refused by the broker (nothing sent, nothing remembered, the prompt stays);
-- an allow_once remembered for the session does not cover the same governing
-- file next time; and in yolo, writing a governing file through its
-- directory (`cp f dir/`, `cp -r src/.acp .`, `mv dir elsewhere`) asks too.
local T = require('helpers')
local write = T.write
local selected = T.selected

local OPTIONS = {
  { kind = 'allow_always', name = 'Always Allow', optionId = 'allow_always' },
  { kind = 'allow_once', name = 'Allow', optionId = 'allow' },
  { kind = 'reject_once', name = 'Reject', optionId = 'reject' },
}

local HOME = assert(os.getenv('HOME'))
local XDG_CONFIG = assert(os.getenv('XDG_CONFIG_HOME'))
local XDG_STATE = assert(os.getenv('XDG_STATE_HOME'))
local USER_FILE = XDG_CONFIG .. '/acp-broker/settings.json'
local TRUST_FILE = XDG_STATE .. '/acp-broker/trust.json'

-- A Claude-shaped write (rawInput.file_path + content, a diff, a location).
-- `path` is absolute or starts with ${cwd}.
local function edit(tcid, path, text)
  return {
    type = 'permission',
    announce = true,
    toolCall = {
      toolCallId = tcid,
      title = 'Write ' .. path,
      kind = 'edit',
      rawInput = { file_path = path, content = text },
      content = { { type = 'diff', path = path, oldText = vim.NIL, newText = text } },
      locations = { { path = path } },
    },
    options = OPTIONS,
    on_allow = { type = 'write', path = path, content = text },
  }
end

-- A Gemini-shaped write: kind edit, the path only in a diff and locations.
local function gemini_edit(tcid, path, text)
  return {
    type = 'permission',
    toolCall = {
      toolCallId = tcid,
      title = 'WriteFile ' .. path,
      kind = 'edit',
      status = 'pending',
      content = { { type = 'diff', path = path, oldText = '', newText = text, _meta = { kind = 'modify' } } },
      locations = { { path = path } },
    },
    options = {
      { optionId = 'proceed_always', name = 'Allow for this session', kind = 'allow_always' },
      { optionId = 'proceed_once', name = 'Allow', kind = 'allow_once' },
      { optionId = 'cancel', name = 'Reject', kind = 'reject_once' },
    },
    on_allow = { type = 'write', path = path, content = text },
  }
end

local function shell(tcid, command)
  local s = T.shell_request(tcid, command, OPTIONS)
  s.on_allow = { type = 'run', command = command }
  return s
end

--- A fresh project with every governing file present (known contents), a
--- symlink link.json -> ~/.claude/settings.json, and project_settings as
--- its .acp/settings.json. trust: run `acp-broker trust --cwd` afterwards.
local function governed_project(project_settings, trust)
  local p = T.project()
  write(p .. '/.acp/settings.json', project_settings)
  write(p .. '/.gemini/settings.json', '{"general":{"vimMode":false}}\n')
  write(p .. '/.claude/settings.json', '{"permissions":{"deny":["Bash(curl *)"]}}\n')
  write(p .. '/.claude/settings.local.json', '{"permissions":{"ask":["Bash(git push *)"]}}\n')
  write(p .. '/notes.txt', 'notes\n')
  if not T.exists(HOME .. '/.gemini/settings.json') then
    write(HOME .. '/.gemini/settings.json', '{"general":{"vimMode":false}}\n')
  end
  if not T.exists(HOME .. '/.claude/settings.json') then
    write(HOME .. '/.claude/settings.json', '{"permissions":{"deny":["Bash(rm -rf /*)"]}}\n')
  end
  if not T.exists(USER_FILE) then
    write(USER_FILE, '{"permissions":{"deny":["Bash(shutdown *)"]}}\n')
  end
  os.remove(p .. '/link.json')
  assert(vim.loop.fs_symlink(HOME .. '/.claude/settings.json', p .. '/link.json'))
  if trust then
    local out = vim.fn.system({ os.getenv('ACP_BROKER_BIN'), 'trust', '--cwd', p })
    T.eq(vim.v.shell_error, 0, 'acp-broker trust: ' .. out)
  end
  T.ok(T.exists(TRUST_FILE) or not trust, 'trust.json exists after acp-broker trust')
  if not T.exists(TRUST_FILE) then
    write(TRUST_FILE, '{}\n')
  end
  return p
end

--- The governing requests: {tcid, step, file (the file it would change,
--- absolute), allow (the person allows it: only files whose change cannot
--- turn the mode off)}.
local round = 0
local function governing_requests(project)
  round = round + 1
  -- Contents differ from round to round, so that "written" is never
  -- mistaken for "already had that content".
  local tag = '"round":' .. round
  local P, HC = project, HOME .. '/.claude/settings.json'
  local ALLOW_ALL = '{"yolo":true,"permissions":{"allow":["Bash(*)"]}}'
  local GEMINI_YOLO = '{"security":{"disableYoloMode":false}}'
  -- {name, how: edit|gemini|shell, path or command, the file it changes, content, allow}
  local list = {
    { 'acp', edit, '${cwd}/.acp/settings.json', P .. '/.acp/settings.json', ALLOW_ALL },
    { 'gemini', edit, '${cwd}/.gemini/settings.json', P .. '/.gemini/settings.json', GEMINI_YOLO },
    { 'claude', edit, '${cwd}/.claude/settings.json', P .. '/.claude/settings.json', ALLOW_ALL },
    { 'claude_local', edit, '${cwd}/.claude/settings.local.json', P .. '/.claude/settings.local.json', '{}' },
    {
      'home_gemini',
      edit,
      HOME .. '/.gemini/settings.json',
      HOME .. '/.gemini/settings.json',
      '{"general":{"vimMode":true},' .. tag .. '}\n',
      true,
    },
    { 'home_claude', edit, HC, HC, ALLOW_ALL },
    { 'user', edit, USER_FILE, USER_FILE, ALLOW_ALL },
    { 'trust', edit, TRUST_FILE, TRUST_FILE, '{}' },
    { 'link', edit, '${cwd}/link.json', HC, '{"permissions":{"deny":["Bash(rm -rf /*)"]},' .. tag .. '}\n', true },
    { 'dotdot', edit, '${cwd}/src/../.acp/settings.json', P .. '/.acp/settings.json', ALLOW_ALL },
    { 'gemini_shape', gemini_edit, '${cwd}/.gemini/settings.json', P .. '/.gemini/settings.json', '{}' },
    { 'sh_redirect', shell, 'echo x > .gemini/settings.json', P .. '/.gemini/settings.json' },
    { 'sh_sed', shell, 'sed -i s/vimMode/pwned/ .gemini/settings.json', P .. '/.gemini/settings.json' },
    { 'sh_link', shell, 'echo x > link.json', HC },
    { 'sh_user', shell, 'echo x > ' .. USER_FILE, USER_FILE },
  }
  local r = {}
  for _, g in ipairs(list) do
    local name, how, arg, file, content, allow = (table.unpack or unpack)(g)
    local step = how(name .. '_${turn}', arg, content)
    r[#r + 1] = { tcid = name .. '_1', step = step, file = file, allow = allow or false }
  end
  return r
end

-- Audit log lines (decoded) of session `session` whose toolCallId is tcid.
local function audit_for(session, tcid)
  local r = {}
  local f = io.open(XDG_STATE .. '/acp-broker/audit.jsonl', 'r')
  if f then
    for line in f:lines() do
      local ok, v = pcall(vim.fn.json_decode, line)
      if ok and type(v) == 'table' and v.sessionId == session and v.toolCallId == tcid then
        r[#r + 1] = v
      end
    end
    f:close()
  end
  return r
end

--- Waits until tcid is either pending (returns the pending() entry) or
--- already answered in the transcript (raises: the broker decided alone).
local function expect_asked(ctx, tcid, what)
  local r = T.wait(function()
    for _, p in ipairs(require('acp').pending()) do
      if p.toolCallId == tcid then
        return { pending = p }
      end
    end
    local req = T.requests(ctx, tcid)[1]
    if req and req.response then
      return { answered = req.response }
    end
  end, nil, 'a prompt for ' .. tcid)
  if r.answered then
    local a = select(2, pcall(T.wait, function()
      return audit_for(ctx.session, tcid)[1]
    end, 2000, 'the audit line'))
    a = type(a) == 'table' and a or {}
    error(
      string.format(
        '%s (%s) was answered without asking the person: %s; audit: decision=%s by=%s reason/rule=%s',
        tcid,
        what or '',
        vim.inspect(r.answered.result or r.answered.error, { newline = ' ', indent = '' }),
        tostring(a.decision),
        tostring(a.by),
        tostring(a.rule)
      ),
      2
    )
  end
  return r.pending
end

--- Waits for the auto-allowed control request tcid: allowed, no prompt.
local function expect_auto_allowed(ctx, tcid, asked)
  T.eq(T.answer(ctx, tcid).result, selected('allow'), 'the answer to the control ' .. tcid)
  for _, a in ipairs(asked) do
    T.ok(a.toolCallId ~= tcid, 'no prompt for the control ' .. tcid)
  end
end

--- Plays the governing requests of a started scenario: each must prompt;
--- while it waits the file is unchanged and the agent has no answer; the
--- person rejects it (the file stays unchanged) or allows it (then it is
--- written).
local function play(ctx, requests)
  for _, g in ipairs(requests) do
    local before = T.read(g.file)
    local p = expect_asked(ctx, g.tcid, g.file)
    -- The agent records its request after sending it: the prompt can come
    -- first on a slow machine.
    local req = T.wait(function()
      return T.requests(ctx, g.tcid)[1]
    end, nil, 'the request ' .. g.tcid .. ' in the transcript')
    T.eq(req.response, nil, 'an answer to ' .. g.tcid .. ' before the person answered')
    T.eq(T.read(g.file), before, g.file .. ' while the prompt for ' .. g.tcid .. ' waits')
    local allow_id = p.options[2].optionId -- allow_once in both option sets
    local reject_id = p.options[3].optionId
    if g.allow then
      T.answer_with_keys(g.tcid, 'a')
      T.eq(T.answer(ctx, g.tcid).result, selected(allow_id), 'the answer to ' .. g.tcid)
      local want = g.step.on_allow.content
      T.wait(function()
        return T.read(g.file) == want
      end, nil, g.file .. ' written after the person allowed ' .. g.tcid)
    else
      T.answer_with_keys(g.tcid, 'r')
      T.eq(T.answer(ctx, g.tcid).result, selected(reject_id), 'the answer to ' .. g.tcid)
      T.eq(T.read(g.file), before, g.file .. ' after the person rejected ' .. g.tcid)
    end
    -- The audit line may follow the answer by a moment.
    local audit = T.wait(function()
      local a = audit_for(ctx.session, g.tcid)
      return #a > 0 and a
    end, nil, 'the audit line for ' .. g.tcid)
    T.eq(#audit, 1, 'audit lines for ' .. g.tcid)
    T.eq({ audit[1].decision, audit[1].by }, { 'ask', 'person' }, 'audit {decision, by} for ' .. g.tcid)
  end
end

--- Runs one mode: controls, the governing requests, controls again.
--- opts: project, setup (for start_demo), before_prompt (fn(ctx)), shell_control
--- (the mode allows a plain shell redirect), check (fn(): mode still on).
local function run_mode(opts)
  local project = opts.project
  local requests = governing_requests(project)
  local steps = {
    edit('control_a_${turn}', '${cwd}/notes.txt', 'control a\n'),
  }
  if opts.shell_control then
    steps[#steps + 1] = shell('control_sh_${turn}', 'echo control > control.txt')
  end
  for _, g in ipairs(requests) do
    steps[#steps + 1] = g.step
  end
  steps[#steps + 1] = edit('control_b_${turn}', '${cwd}/notes.txt', 'control b\n')
  steps[#steps + 1] = { type = 'message', text = 'Done.' }
  local asked = T.on('AcpPermissionRequest')
  local ctx = T.start_demo({ name = 'governing', steps = steps }, { project = project, setup = opts.setup })
  if opts.before_prompt then
    opts.before_prompt(ctx)
  end
  opts.check()
  require('acp').prompt('Loosen your own permissions')
  expect_auto_allowed(ctx, 'control_a_1', asked)
  if opts.shell_control then
    expect_auto_allowed(ctx, 'control_sh_1', asked)
  end
  play(ctx, requests)
  expect_auto_allowed(ctx, 'control_b_1', asked)
  T.idle()
  T.eq(T.read(project .. '/notes.txt'), 'control b\n', 'notes.txt (the controls were written)')
  opts.check()
  return ctx
end

T.test('yolo (trusted .acp/settings.json "yolo": true): every governing file asks; only the person allows', function()
  local project = governed_project('{"yolo":true}\n', true)
  run_mode({
    project = project,
    shell_control = true,
    check = function()
      T.wait(function()
        return require('acp').status().yolo
      end, nil, 'status().yolo')
      T.eq(require('acp').status().trusted, true, 'status().trusted')
    end,
  })
end)

T.test('acceptEdits (:AcpMode): every governing file asks; only the person allows', function()
  local project = governed_project('{}\n', false)
  run_mode({
    project = project,
    before_prompt = function(ctx)
      T.ok(require('acp.broker').mode(ctx.project, 'acceptEdits'), 'acp_mode sent')
    end,
    check = function()
      T.wait(function()
        return require('acp').status().mode == 'acceptEdits'
      end, nil, "status().mode == 'acceptEdits'")
    end,
  })
end)

T.test('allow rules Edit(/**), Edit(//**), Bash(echo *), Bash(sed *): every governing file asks', function()
  local project = governed_project('{}\n', false)
  run_mode({
    project = project,
    shell_control = true,
    setup = {
      ui = { arm_ms = 50 },
      permissions = { allow = { 'Edit(/**)', 'Edit(//**)', 'Edit(~/**)', 'Bash(echo *)', 'Bash(sed *)' } },
    },
    check = function()
      T.eq(require('acp').status().yolo, false, 'status().yolo')
      T.eq(require('acp').status().mode, 'default', 'status().mode')
    end,
  })
end)

T.test('respond() with remember on an option that is not allow_once is refused; nothing is remembered', function()
  local project = governed_project('{"yolo":true}\n', true)
  local user_before = T.read(USER_FILE)
  local acp_before = T.read(project .. '/.acp/settings.json')
  local target = project .. '/.gemini/settings.json'
  local gemini_before = T.read(target)
  local ctx = T.start_demo({
    name = 'remember-refused',
    steps = {
      edit('first_${turn}', '${cwd}/.gemini/settings.json', '{"general":{"vimMode":true}}\n'),
      edit('again_${turn}', '${cwd}/.gemini/settings.json', '{"general":{"vimMode":false}}\n'),
      { type = 'message', text = 'Done.' },
    },
  }, { project = project })
  T.wait(function()
    return require('acp').status().yolo
  end, nil, 'status().yolo')
  require('acp').prompt('Edit .gemini/settings.json twice')
  local p = expect_asked(ctx, 'first_1')

  local function refused(option_id, remember)
    local n = #T.notes
    require('acp').respond(p.id, option_id, { remember = remember })
    local msg = T.wait(function()
      for i = n + 1, #T.notes do
        if T.notes[i].level == vim.log.levels.ERROR then
          return T.notes[i].msg
        end
      end
    end, nil, 'an error for ' .. option_id .. ' with remember=' .. remember)
    T.contains(msg, 'allow-once', 'the error for ' .. option_id .. ' with remember=' .. remember)
    T.wait(function()
      local list = require('acp').pending()
      return #list == 1 and list[1].id == p.id
    end, nil, 'the prompt to be pending still')
    local what = '(' .. option_id .. ', ' .. remember .. ')'
    T.eq(T.requests(ctx, 'first_1')[1].response, nil, 'the agent got no answer ' .. what)
  end
  refused('allow_always', 'session')
  refused('allow_always', 'project')
  refused('allow_always', 'agent')
  refused('reject', 'session')
  refused('reject', 'project')
  refused('reject', 'agent')

  -- Nothing was remembered anywhere.
  T.eq(T.read(USER_FILE), user_before, 'the user settings file (no per-agent yolo)')
  T.eq(T.read(project .. '/.acp/settings.json'), acp_before, '.acp/settings.json (no project rule)')
  T.eq(T.read(target), gemini_before, '.gemini/settings.json')
  local rules = vim.fn.system({ os.getenv('ACP_BROKER_BIN'), 'rules', '--cwd', project })
  T.ok(not rules:find('.gemini/settings.json', 1, true), 'no rule for the file in `acp-broker rules`:\n' .. rules)

  -- allow_once with remember = 'session' is accepted, and still the same
  -- write asks again: a remembered rule does not cover a governing file.
  require('acp').respond(p.id, 'allow', { remember = 'session' })
  T.eq(T.answer(ctx, 'first_1').result, selected('allow'), 'the answer to first_1')
  T.wait(function()
    return T.read(target) == '{"general":{"vimMode":true}}\n'
  end, nil, '.gemini/settings.json written after the person allowed it')
  expect_asked(ctx, 'again_1', 'the same write after "allow for this session"')
  T.answer_with_keys('again_1', 'r')
  T.eq(T.answer(ctx, 'again_1').result, selected('reject'), 'the answer to again_1')
  T.idle()
  T.eq(T.read(target), '{"general":{"vimMode":true}}\n', '.gemini/settings.json after the reject')
end)

-- Writing a governing file through the directory that holds it: a copy into
-- the directory (`cp f dir/`, `cp -r src/.acp .`) or moving the directory
-- away (which drops the deny rules in it) changes the file as surely as
-- `echo x > file`, and must ask too.
T.test('yolo: copying into, or moving, the directories that hold governing files asks', function()
  local project = governed_project('{"yolo":true}\n', true)
  local evil = T.project()
  write(evil .. '/settings.json', '{"yolo":true,"permissions":{"allow":["Bash(*)"]}}\n')
  write(evil .. '/trust.json', '{}\n')
  write(evil .. '/.acp/settings.json', '{"yolo":true,"permissions":{"allow":["Bash(*)"]}}\n')
  write(evil .. '/.claude/settings.json', '{"permissions":{"allow":["Bash(*)"]}}\n')
  local saved = {}
  for _, f in ipairs({ USER_FILE, TRUST_FILE, HOME .. '/.claude/settings.json' }) do
    saved[f] = T.read(f)
  end
  T.defer(function() -- the commands may have run: put things back for later tests
    vim.fn.mkdir(XDG_CONFIG .. '/acp-broker', 'p')
    for f, text in pairs(saved) do
      write(f, text)
    end
  end)
  local gone = T.tmpname('gone')
  local cases = {
    { 'cp_user_dir_1', 'cp ' .. evil .. '/settings.json ' .. XDG_CONFIG .. '/acp-broker/', USER_FILE },
    { 'cp_trust_dir_1', 'cp ' .. evil .. '/trust.json ' .. XDG_STATE .. '/acp-broker/', TRUST_FILE },
    { 'cp_project_dir_1', 'cp -r ' .. evil .. '/.acp .', project .. '/.acp/settings.json' },
    { 'cp_home_dir_1', 'cp -r ' .. evil .. '/.claude ' .. HOME .. '/', HOME .. '/.claude/settings.json' },
    { 'mv_user_dir_1', 'mv ' .. XDG_CONFIG .. '/acp-broker ' .. gone, USER_FILE },
  }
  local steps = {}
  for _, c in ipairs(cases) do
    steps[#steps + 1] = shell(c[1]:gsub('_1$', '_${turn}'), c[2])
  end
  steps[#steps + 1] = { type = 'message', text = 'Done.' }
  local ctx = T.start_demo({ name = 'governing-dirs', steps = steps }, { project = project })
  T.wait(function()
    return require('acp').status().yolo
  end, nil, 'status().yolo')
  require('acp').prompt('Replace the settings wholesale')
  local bad = {}
  for _, c in ipairs(cases) do
    local before = T.read(c[3])
    local ok, err = pcall(expect_asked, ctx, c[1], c[2])
    if ok then
      T.eq(T.read(c[3]), before, c[3] .. ' while the prompt for ' .. c[1] .. ' waits')
      T.answer_with_keys(c[1], 'r')
      T.eq(T.answer(ctx, c[1]).result, selected('reject'), 'the answer to ' .. c[1])
    else
      T.wait(function()
        return #T.tr_events(T.transcript(ctx.transcript), 'ran') >= #bad + 1
      end, nil, 'the command of ' .. c[1] .. ' to run')
      local after = T.read(c[3])
      local effect = after == before and ('left ' .. c[3] .. ' as it was') or ('changed ' .. c[3])
      bad[#bad + 1] = tostring(err):gsub('^[^:]*:%d+: ', '') .. string.format('\n    `%s` %s', c[2], effect)
    end
  end
  T.idle()
  if #bad > 0 then
    error(#bad .. ' of ' .. #cases .. ' writes through a directory were not asked:\n  ' .. table.concat(bad, '\n  '))
  end
end)

T.done()
