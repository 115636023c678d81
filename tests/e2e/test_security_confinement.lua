-- fs/* and terminal/* confinement. The broker does not implement fs/* or
-- terminal/* yet, so confinement today means: the client advertises neither
-- capability in `initialize`, and every fs/* and terminal/* request the agent
-- sends anyway is refused with -32601 (no result), whatever the path: `..`,
-- an absolute path outside the project, a symlink leaving the project, a
-- symlink swapped between two requests, a path inside the project. Nothing is
-- read (no file content reaches the agent) and nothing is written or run.
-- The connection goes on: a permission request afterwards still works.
--
-- When fs/* arrives, these requests must still be refused for the paths
-- outside the project (design §9); the in-project ones will then need their
-- own tests.
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

T.test('initialize advertises no fs and no terminal capability', function()
  local ctx = T.start_demo({ name = 'caps', steps = { { type = 'message', text = 'hi' } } })
  local init = T.messages(T.transcript(ctx.transcript), 'in', 'initialize')
  T.eq(#init, 1, 'initialize requests')
  local caps = init[1].params.clientCapabilities
  T.ok(type(caps) == 'table', 'clientCapabilities is an object')
  T.eq(caps.terminal, false, 'clientCapabilities.terminal')
  T.eq(caps.fs, { readTextFile = false, writeTextFile = false }, 'clientCapabilities.fs')
  -- Nothing else in the capabilities says "yes" either.
  local function no_true(v, where)
    if v == true then
      error('capability set to true at ' .. where)
    elseif type(v) == 'table' then
      for k, x in pairs(v) do
        no_true(x, where .. '.' .. tostring(k))
      end
    end
  end
  no_true(caps, 'clientCapabilities')
end)

T.test('every fs/* and terminal/* request is refused with -32601; nothing is read, written or run', function()
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
  for _, id in ipairs(ids) do
    -- The request really went out, with the real session id (so that a
    -- future refusal for "unknown session" cannot pass for confinement).
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
    T.eq(resp[1].result, nil, 'result of ' .. id)
    T.ok(type(resp[1].error) == 'table', 'error answer to ' .. id)
    T.eq(resp[1].error.code, -32601, 'error code answered to ' .. id)
  end

  -- Nothing read: no file content reached the agent.
  local raw_tr = T.read(ctx.transcript)
  T.ok(not raw_tr:find(SECRET, 1, true), 'the secret must never reach the agent')
  T.ok(not raw_tr:find(INSIDE, 1, true), 'inside.txt must not be read either (fs/* is not offered)')
  T.ok(not raw_tr:find('root:x:0:0', 1, true), '/etc/passwd must never reach the agent')
  -- Nothing written or run.
  for _, p in ipairs({
    outside .. '/pwned.txt',
    outside .. '/pwned-abs.txt',
    outside .. '/pwned-link.txt',
    outside .. '/ran.txt',
    project .. '/new-inside.txt',
  }) do
    T.ok(not T.exists(p), p .. ' must not exist')
  end
  T.eq(T.read(outside .. '/victim.txt'), 'victim\n', 'victim.txt (through link-victim and the swapped link)')
  T.eq(T.read(home .. '/.bashrc'), '# bashrc\n', '~/.bashrc')
  T.eq(T.read(project .. '/inside.txt'), INSIDE, 'inside.txt')
  T.eq(T.read(outside .. '/secret.txt'), SECRET, 'secret.txt')
  -- The demo agent never saw a wrote/ran event through the client.
  T.eq(#T.tr_events(tr, 'wrote'), 0, 'wrote events')
  T.eq(#T.tr_events(tr, 'ran'), 0, 'ran events')
  -- The turn ended normally and the agent is still there.
  T.ok(require('acp').status().session == ctx.session, 'the session is still there')
end)

T.test('a scenario action never goes through the client: with fs/terminal off the agent acts itself', function()
  -- The demo agent sends fs/write_text_file / terminal/create only when the
  -- client advertised them; with the broker it writes and runs locally.
  local ctx = T.start_demo({
    name = 'local-actions',
    steps = {
      {
        type = 'permission',
        toolCall = { toolCallId = 'w_${turn}', title = 'Write a.txt', kind = 'edit' },
        options = { { optionId = 'ok', name = 'Allow', kind = 'allow_once' } },
        on_allow = { type = 'write', path = 'a.txt', content = 'a\n' },
      },
      {
        type = 'permission',
        toolCall = { toolCallId = 'r_${turn}', title = 'true', kind = 'execute', rawInput = { command = 'true' } },
        options = { { optionId = 'ok', name = 'Allow', kind = 'allow_once' } },
        on_allow = { type = 'run', command = 'true' },
      },
    },
  })
  require('acp').prompt('Go')
  T.answer_with_keys('w_1', 'a')
  T.answer_with_keys('r_1', 'a')
  T.idle()
  local tr = T.transcript(ctx.transcript)
  local wrote, ran = T.tr_events(tr, 'wrote'), T.tr_events(tr, 'ran')
  T.eq(#wrote, 1, 'wrote events')
  T.eq(wrote[1].via, 'local', 'the write did not go through the client')
  T.eq(#ran, 1, 'ran events')
  T.eq(ran[1].via, 'local', 'the command did not go through the client')
  for _, m in ipairs(T.messages(tr, 'out')) do
    T.ok(not (m.method or ''):match('^fs/') and not (m.method or ''):match('^terminal/'), 'no fs/terminal request')
  end
end)

T.done()
