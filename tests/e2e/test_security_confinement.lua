-- fs/* and terminal/* confinement (design §9). The client advertises fs and
-- terminal; the broker answers fs/* only inside the project root (after
-- resolving symlinks, and checking again what it opened, so a link swapped
-- after the check cannot lead out), refuses a protected file the person did
-- not allow, and writes or runs nothing inside the project that neither the
-- policy nor the person allowed: what the agent did not ask about, the
-- broker asks the person itself. Refusals are errors (-32001), never
-- content; the connection goes on.
local T = require('helpers')
local write = T.write

local SECRET = 'outside-secret-content-5150'
local INSIDE = 'inside-content-6061'

-- One raw JSON-RPC request line from the agent (variables are expanded by
-- the demo agent: ${session}, ${cwd}).
local function raw(id, method, params)
  return {
    type = 'raw',
    line = vim.fn.json_encode({ jsonrpc = '2.0', id = id, method = method, params = params }),
  }
end

-- A permission step the person answers: used as a barrier (the test acts
-- while it waits) and to show the connection still works.
local function barrier(tcid)
  return {
    type = 'permission',
    announce = true,
    toolCall = { toolCallId = tcid, title = 'Barrier ' .. tcid, kind = 'other' },
    options = {
      { optionId = 'ok', name = 'Allow', kind = 'allow_once' },
      { optionId = 'no', name = 'Reject', kind = 'reject_once' },
    },
  }
end

-- The client's responses in the transcript to the request with this exact id.
local function responses_to(tr, id)
  local r = {}
  for _, m in ipairs(T.messages(tr, 'in')) do
    if m.method == nil and m.id == id and type(m.id) == type(id) then
      r[#r + 1] = m
    end
  end
  return r
end

T.test('initialize advertises fs and terminal, and nothing else', function()
  local ctx = T.start_demo({ name = 'caps', steps = { { type = 'message', text = 'hi' } } })
  local init = T.messages(T.transcript(ctx.transcript), 'in', 'initialize')
  T.eq(#init, 1, 'initialize requests')
  local caps = init[1].params.clientCapabilities
  T.ok(type(caps) == 'table', 'clientCapabilities is an object')
  T.eq(caps.terminal, true, 'clientCapabilities.terminal')
  T.eq(caps.fs, { readTextFile = true, writeTextFile = true }, 'clientCapabilities.fs')
  -- Nothing else says "yes" (no terminal login, no elicitation).
  local function no_true(v, where)
    if v == true and not where:match('^clientCapabilities%.fs%.') and where ~= 'clientCapabilities.terminal' then
      error('capability set to true at ' .. where)
    elseif type(v) == 'table' then
      for k, x in pairs(v) do
        no_true(x, where .. '.' .. tostring(k))
      end
    end
  end
  no_true(caps, 'clientCapabilities')
end)

-- Waits for the broker's own prompt whose title starts with prefix.
local function own_prompt(prefix)
  return T.wait(function()
    for _, p in ipairs(require('acp').pending()) do
      if p.title:sub(1, #prefix) == prefix then
        return p
      end
    end
  end, nil, 'a prompt titled ' .. prefix .. '…')
end

T.test('fs/* outside the project and unapproved terminals are refused; inside works once allowed', function()
  local project = T.project()
  local outside = T.project() -- a sibling directory: outside the project
  write(outside .. '/secret.txt', SECRET)
  write(outside .. '/victim.txt', 'victim\n')
  write(project .. '/inside.txt', INSIDE)
  local home = os.getenv('HOME')
  write(home .. '/.ssh/id_rsa', SECRET)
  write(home .. '/.bashrc', '# bashrc\n')
  -- Links inside the project that leave it.
  assert(vim.loop.fs_symlink(outside .. '/secret.txt', project .. '/link-secret'))
  assert(vim.loop.fs_symlink(outside, project .. '/link-dir'))
  assert(vim.loop.fs_symlink(outside .. '/victim.txt', project .. '/link-victim'))
  -- A link that points inside now and is swapped to point outside while
  -- the barrier waits (between the two requests through it).
  assert(vim.loop.fs_symlink(project .. '/inside.txt', project .. '/swap'))
  local rel = vim.fn.fnamemodify(outside, ':t')

  local reads = {
    { 'read-dotdot', '${cwd}/../' .. rel .. '/secret.txt' },
    { 'read-dotdot-deep', '${cwd}/sub/../../' .. rel .. '/secret.txt' },
    { 'read-abs-outside', outside .. '/secret.txt' },
    { 'read-abs-etc', '/etc/passwd' },
    { 'read-abs-home', home .. '/.ssh/id_rsa' },
    { 'read-link', '${cwd}/link-secret' },
    { 'read-link-dir', '${cwd}/link-dir/secret.txt' },
    { 'read-relative', '../' .. rel .. '/secret.txt' },
    { 'read-inside', '${cwd}/inside.txt' },
    { 'read-swap-before', '${cwd}/swap' },
  }
  local writes = {
    { 'write-dotdot', '${cwd}/../' .. rel .. '/pwned.txt' },
    { 'write-abs-outside', outside .. '/pwned-abs.txt' },
    { 'write-abs-home', home .. '/.bashrc' },
    { 'write-link', '${cwd}/link-victim' },
    { 'write-link-dir', '${cwd}/link-dir/pwned-link.txt' },
    { 'write-inside', '${cwd}/new-inside.txt' },
    { 'write-governing', '${cwd}/.acp/settings.json' },
  }
  local steps = {}
  for _, r in ipairs(reads) do
    steps[#steps + 1] = raw(r[1], 'fs/read_text_file', { sessionId = '${session}', path = r[2] })
  end
  for _, w in ipairs(writes) do
    steps[#steps + 1] =
      raw(w[1], 'fs/write_text_file', { sessionId = '${session}', path = w[2], content = 'PWNED ' .. w[1] })
  end
  local terminal_ids = {
    'term-create',
    'term-output',
    'term-wait',
    'term-kill',
    'term-release',
  }
  steps[#steps + 1] = raw('term-create', 'terminal/create', {
    sessionId = '${session}',
    command = '/bin/sh',
    args = { '-c', 'echo PWNED > ' .. outside .. '/ran.txt' },
    cwd = '${cwd}',
  })
  steps[#steps + 1] = raw('term-output', 'terminal/output', { sessionId = '${session}', terminalId = 'term-1' })
  steps[#steps + 1] = raw('term-wait', 'terminal/wait_for_exit', { sessionId = '${session}', terminalId = 'term-1' })
  steps[#steps + 1] = raw('term-kill', 'terminal/kill', { sessionId = '${session}', terminalId = 'term-1' })
  steps[#steps + 1] = raw('term-release', 'terminal/release', { sessionId = '${session}', terminalId = 'term-1' })
  steps[#steps + 1] = barrier('swap_${turn}')
  steps[#steps + 1] = raw('read-swap-after', 'fs/read_text_file', { sessionId = '${session}', path = '${cwd}/swap' })
  steps[#steps + 1] = raw(
    'write-swap-after',
    'fs/write_text_file',
    { sessionId = '${session}', path = '${cwd}/swap', content = 'PWNED write-swap-after' }
  )
  steps[#steps + 1] = barrier('after_${turn}')
  steps[#steps + 1] = { type = 'message', text = 'Done.' }

  local ctx = T.start_demo({ name = 'confinement', steps = steps }, { project = project })
  require('acp').prompt('Read and write outside the project')

  -- The agent did not ask about the write inside nor the command: the
  -- broker asks; the person allows the write and rejects the command.
  local w = own_prompt('Write new-inside.txt (not asked by the agent)')
  T.eq(w.kind, 'edit', 'the write prompt kind')
  require('acp').respond(w.id, 'allow_once')
  local t = own_prompt('Run echo PWNED')
  T.eq(t.kind, 'execute', 'the command prompt kind')
  require('acp').respond(t.id, 'reject_once')
  -- Swap the link while the barrier waits, then let the agent go on.
  T.wait_pending('swap_1')
  assert(os.remove(project .. '/swap'))
  assert(vim.loop.fs_symlink(outside .. '/victim.txt', project .. '/swap'))
  T.answer_with_keys('swap_1', 'a')
  T.eq(T.answer(ctx, 'swap_1').result, T.selected('ok'), 'the barrier answer')
  -- The connection still works after all the refusals.
  T.answer_with_keys('after_1', 'a')
  T.eq(T.answer(ctx, 'after_1').result, T.selected('ok'), 'a permission request after the refusals')
  T.idle()

  local tr = T.transcript(ctx.transcript)
  local ids = {}
  for _, r in ipairs(reads) do
    ids[#ids + 1] = r[1]
  end
  for _, w in ipairs(writes) do
    ids[#ids + 1] = w[1]
  end
  vim.list_extend(ids, terminal_ids)
  vim.list_extend(ids, { 'read-swap-after', 'write-swap-after' })
  -- What each request must get: content, an empty result, or an error code.
  local expect = {
    ['read-inside'] = { content = INSIDE },
    ['read-swap-before'] = { content = INSIDE },
    ['read-relative'] = { code = -32602 },
    ['write-inside'] = { result = true },
    ['term-output'] = { code = -32602 },
    ['term-wait'] = { code = -32602 },
    ['term-kill'] = { code = -32602 },
    ['term-release'] = { code = -32602 },
  }
  for _, id in ipairs(ids) do
    -- The request really went out, with the real session id (so that a
    -- refusal for "unknown session" cannot pass for confinement).
    local sent
    for _, m in ipairs(T.messages(tr, 'out')) do
      if m.id == id and m.method then
        sent = m
      end
    end
    T.ok(sent, 'the agent sent request ' .. id)
    T.eq(sent.params.sessionId, ctx.session, 'sessionId of request ' .. id)
    local resp = responses_to(tr, id)
    T.eq(#resp, 1, 'answers to ' .. id)
    local want = expect[id] or { code = -32001 }
    if want.content then
      T.eq(resp[1].result, { content = want.content }, 'content answered to ' .. id)
    elseif want.result then
      T.eq(resp[1].result, vim.empty_dict(), 'result of ' .. id)
    else
      T.eq(resp[1].result, nil, 'result of ' .. id)
      T.ok(type(resp[1].error) == 'table', 'error answer to ' .. id)
      T.eq(resp[1].error.code, want.code, 'error code answered to ' .. id)
    end
  end

  -- Nothing outside was read: no secret content reached the agent.
  local raw_tr = T.read(ctx.transcript)
  T.ok(not raw_tr:find(SECRET, 1, true), 'the secret must never reach the agent')
  T.ok(not raw_tr:find('root:x:0:0', 1, true), '/etc/passwd must never reach the agent')
  -- Nothing outside written or run; the file inside was created.
  for _, p in ipairs({
    outside .. '/pwned.txt',
    outside .. '/pwned-abs.txt',
    outside .. '/pwned-link.txt',
    outside .. '/ran.txt',
    project .. '/.acp/settings.json',
  }) do
    T.ok(not T.exists(p), p .. ' must not exist')
  end
  T.eq(T.read(project .. '/new-inside.txt'), 'PWNED write-inside', 'new-inside.txt')
  T.eq(T.read(outside .. '/victim.txt'), 'victim\n', 'victim.txt (through link-victim and the swapped link)')
  T.eq(T.read(home .. '/.bashrc'), '# bashrc\n', '~/.bashrc')
  T.eq(T.read(project .. '/inside.txt'), INSIDE, 'inside.txt')
  T.eq(T.read(outside .. '/secret.txt'), SECRET, 'secret.txt')
  -- The person was told about the refusals.
  local told = false
  for _, e in ipairs(require('acp.state').logged()) do
    if e.event == 'error' and tostring(e.data.message):find('outside the project', 1, true) then
      told = true
    end
  end
  T.ok(told, 'an error event names the refusal')
  -- Every refused write is in the audit log, by the broker's confinement.
  local refused = {}
  for _, l in ipairs(T.audit_lines()) do
    if l.by == 'confinement' and l.sessionId == ctx.session then
      T.eq(l.decision, 'deny', 'decision of a refused write')
      T.eq(l.outcome, 'cancelled', 'outcome of a refused write')
      for _, p in ipairs(l.paths) do
        refused[p] = true
      end
    end
  end
  for _, p in ipairs({
    outside .. '/pwned-abs.txt',
    home .. '/.bashrc',
    outside .. '/victim.txt',
    project .. '/.acp/settings.json',
  }) do
    T.ok(refused[p], 'the refused write of ' .. p .. ' is audited: ' .. vim.inspect(vim.tbl_keys(refused)))
  end
  T.ok(require('acp').status().session == ctx.session, 'the session is still there')
end)

T.test('an Edit rule lets fs/write_text_file reach a path outside the project', function()
  local project = T.project()
  local outside = T.project()
  local ctx = T.start_demo({
    name = 'edit-rule',
    steps = {
      raw('w-out', 'fs/write_text_file', { sessionId = '${session}', path = outside .. '/allowed.txt', content = 'ok\n' }),
      raw('r-out', 'fs/read_text_file', { sessionId = '${session}', path = outside .. '/allowed.txt' }),
      barrier('done_${turn}'),
    },
  }, {
    project = project,
    setup = {
      ui = { arm_ms = 50 },
      permissions = { allow = { 'Edit(/' .. outside .. '/**)', 'Read(/' .. outside .. '/**)' } },
    },
  })
  require('acp').prompt('Write outside, with a rule')
  T.answer_with_keys('done_1', 'a')
  T.idle()
  local tr = T.transcript(ctx.transcript)
  T.eq(responses_to(tr, 'w-out')[1].result, vim.empty_dict(), 'the write outside, allowed by an Edit rule')
  T.eq(responses_to(tr, 'r-out')[1].result, { content = 'ok\n' }, 'the read outside, allowed by a Read rule')
  T.eq(T.read(outside .. '/allowed.txt'), 'ok\n', 'allowed.txt')
end)

T.done()
