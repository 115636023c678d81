-- Protocol hygiene the broker owes the agent: every request gets an answer
-- (-32601 for a method it does not offer, -32602 for a malformed permission
-- request or a client method of an unknown session, never a selection), lines it cannot use are skipped without
-- ending the session, and a request the agent withdraws ($/cancel_request)
-- is answered `cancelled` and its prompt closes.
local T = require('helpers')

local function permission(id, tcid)
  return {
    type = 'permission',
    id = id,
    toolCall = { toolCallId = tcid, title = 'Write ok.txt', kind = 'edit', locations = { { path = '${cwd}/ok.txt' } } },
    options = {
      { optionId = 'ok', name = 'Allow', kind = 'allow_once' },
      { optionId = 'no', name = 'Reject', kind = 'reject_once' },
    },
    on_allow = { type = 'write', path = 'ok.txt', content = 'ok\n' },
  }
end

local function raw(line)
  return { type = 'raw', line = line }
end

-- Finds the answer the agent received for its request id (exact JSON type).
local function reply(ctx, id)
  return T.wait(function()
    for _, m in ipairs(T.messages(T.transcript(ctx.transcript), 'in')) do
      if m.method == nil and m.id == id and type(m.id) == type(id) then
        return m
      end
    end
  end, nil, 'an answer to request ' .. vim.inspect(id))
end

T.test('bad lines and unknown methods are answered or skipped; the session goes on', function()
  local ctx = T.start_demo({
    name = 'hygiene',
    steps = {
      raw('{"jsonrpc":"2.0","id":"u1","method":"_demo/unknown","params":{}}'),
      raw('{"jsonrpc":"2.0","id":"u2","method":"fs/read_text_file","params":{"sessionId":"x","path":"/etc/passwd"}}'),
      raw('{"jsonrpc":"2.0","id":"m1","method":"session/request_permission","params":{"sessionId":"not-a-session","toolCall":{"toolCallId":"t"},"options":[{"optionId":"ok","name":"Allow","kind":"allow_once"}]}}'),
      raw('{"jsonrpc":"2.0","id":"m2","method":"session/request_permission","params":{"sessionId":"x"}}'),
      raw('{this is not json'),
      raw('[{"jsonrpc":"2.0","method":"session/update"}]'),
      raw('{"jsonrpc":"2.0","id":999,"result":{}}'),
      raw('{"jsonrpc":"2.0","method":"_demo/notice","params":{}}'),
      permission(nil, 'good_${turn}'),
      { type = 'message', text = 'Still here.' },
    },
  })
  local requests = T.on('AcpPermissionRequest')
  require('acp').prompt('Misbehave a little')
  T.eq(reply(ctx, 'u1').error.code, -32601, 'an unknown method')
  T.eq(reply(ctx, 'u2').error.code, -32602, 'fs/* for a session that does not exist')
  for _, id in ipairs({ 'm1', 'm2' }) do
    local r = reply(ctx, id)
    T.eq(r.error and r.error.code, -32602, 'a malformed permission request ' .. id)
    T.eq(r.result, nil, 'no selection for ' .. id)
  end
  -- Only the well-formed request reached the person.
  T.answer_with_keys('good_1', 'a')
  T.eq(T.answer(ctx, 'good_1').result, { outcome = { outcome = 'selected', optionId = 'ok' } }, 'answer')
  T.wait(function()
    return not require('acp').status().busy
  end, nil, 'the turn to end')
  T.eq(#requests, 1, 'AcpPermissionRequest count')
  T.ok(T.exists(ctx.project .. '/ok.txt'), 'ok.txt written after the bad lines')
  -- Nothing the broker sent was an answer to the notification or the stray
  -- response.
  for _, m in ipairs(T.messages(T.transcript(ctx.transcript), 'in')) do
    T.ok(m.id ~= 999, 'no answer to a response')
  end
end)

T.test('$/cancel_request withdraws a pending prompt: answered cancelled, window closed', function()
  local step = permission('w1', 'withdrawn_${turn}')
  step.wait = false
  local ctx = T.start_demo({
    name = 'withdraw',
    steps = {
      step,
      { type = 'sleep', ms = 400 },
      raw('{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"w1"}}'),
      { type = 'sleep', ms = 200 },
      { type = 'message', text = 'Never mind.' },
    },
  })
  local resolved = T.on('AcpPermissionResolved')
  require('acp').prompt('Ask, then change your mind')
  T.wait_prompt('withdrawn_1')
  T.eq(reply(ctx, 'w1').result, { outcome = { outcome = 'cancelled' } }, 'answer to the withdrawn request')
  T.wait(function()
    return #resolved == 1
  end, nil, 'AcpPermissionResolved')
  T.eq({ resolved[1].outcome, resolved[1].by }, { 'cancelled', 'agent' }, '{outcome, by}')
  T.wait(function()
    return #T.floats() == 0
  end, nil, 'the prompt window to close')
  T.eq(require('acp').pending(), {}, 'pending() after the withdrawal')
end)

-- The Lua side is a model (acp.state) and views that subscribe to it: no
-- module requires a module that requires it back, directly or in a cycle.
-- Every `require('acp…')` in the source counts, inside a function or not.
T.test('lua/acp: the modules require each other without a cycle', function()
  local root = vim.fn.fnamemodify(T.dir, ':h:h')
  local files = vim.fn.globpath(root .. '/lua', 'acp/**/*.lua', false, true)
  table.sort(files)
  local graph, names = {}, {}
  for _, f in ipairs(files) do
    local name = f:sub(#root + 6, -5):gsub('/init$', ''):gsub('/', '.')
    names[#names + 1] = name
    local deps = {}
    for line in (T.read(f) or ''):gmatch('[^\n]*') do
      line = line:gsub('%-%-.*$', '')
      for dep in line:gmatch('require%s*%(?%s*[\'"](acp[%w_.]*)[\'"]') do
        if dep ~= name then
          deps[dep] = true
        end
      end
    end
    graph[name] = deps
  end
  T.ok(#names > 10 and graph['acp'] ~= nil and graph['acp.state'] ~= nil, 'the modules were found: ' .. table.concat(names, ' '))
  -- Depth-first search; a module met again while on the path closes a cycle.
  local on_path, done, path, cycles = {}, {}, {}, {}
  local function visit(m)
    if on_path[m] then
      local from
      for i, p in ipairs(path) do
        if p == m then
          from = i
        end
      end
      local c = vim.list_slice(path, from)
      c[#c + 1] = m
      cycles[#cycles + 1] = table.concat(c, ' -> ')
      return
    end
    if done[m] or graph[m] == nil then
      return
    end
    on_path[m], path[#path + 1] = true, m
    local deps = vim.tbl_keys(graph[m])
    table.sort(deps)
    for _, d in ipairs(deps) do
      visit(d)
    end
    on_path[m], path[#path] = nil, nil
    done[m] = true
  end
  for _, m in ipairs(names) do
    visit(m)
  end
  T.eq(cycles, {}, 'require cycles')
end)

T.done()
