-- Fault injection on the agent's side of the protocol: invalid UTF-8, JSON
-- that is not an object (a number, a string, null, a batch array), requests
-- whose id has the wrong type (true, 1.5, {}, [], null, false), and
-- responses to requests the broker never made (unknown ids, the running
-- prompt's id with the wrong JSON type, a second answer to initialize).
--
-- What the broker does, asserted here: a line it cannot parse, or whose id
-- it could not echo, is skipped with a log line and never answered (the
-- broker sends nothing it cannot route, where JSON-RPC would answer some
-- with id null); a request with a usable id but an invalid shape is
-- answered -32600; none of these lines reaches the person as a prompt, ends
-- the turn or shows its text; the broker and the agent stay up and the next
-- well-formed request works.
-- (test_hygiene.lua covers unknown methods, '{not json' and a stray id 999.)
local T = require('helpers')

-- A permission request line for the running session with id (JSON text).
local function perm_line(id, tcid, title)
  return '{"jsonrpc":"2.0","id":'
    .. id
    .. ',"method":"session/request_permission","params":{"sessionId":"${session}",'
    .. '"toolCall":{"toolCallId":"'
    .. tcid
    .. '","title":"'
    .. (title or tcid)
    .. '","kind":"edit"},"options":[{"optionId":"ok","name":"Allow","kind":"allow_once"}]}}'
end

-- A raw step; latin1: each character U+0000-U+00FF is written as one byte
-- (so "\195\169", UTF-8 for U+00E9, goes out as the lone byte E9).
local function raw(line, latin1)
  return { type = 'raw', line = line, encoding = latin1 and 'latin1' or nil }
end

local function broker_pid()
  local chan = require('acp.broker').chan
  return chan and vim.fn.jobpid(chan) or nil
end

-- Every response the agent received, in order (messages without a method).
local function responses(ctx)
  local r = {}
  for _, m in ipairs(T.messages(T.transcript(ctx.transcript), 'in')) do
    if m.method == nil then
      r[#r + 1] = m
    end
  end
  return r
end

local STEPS = {
  -- Invalid UTF-8: the bytes E9, FF, FE in a request's title; an unpaired
  -- surrogate escape; C3 28 inside a message chunk.
  raw(perm_line('"utf8-bytes"', 'utf8_bytes', 'caf\195\169 \195\191\195\190'), true),
  raw(perm_line('"utf8-surrogate"', 'utf8_surrogate', 'half \\ud800 a pair')),
  raw(
    '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"${session}","update":'
      .. '{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"BAD \195\131( BYTES"}}}}',
    true
  ),
  -- JSON that is not an object; a batch (an array) holding a request.
  raw('42'),
  raw('"session/request_permission"'),
  raw('null'),
  raw('true'),
  raw('[]'),
  raw('[' .. perm_line('"in-batch"', 'in_batch') .. ']'),
  -- Requests whose id has a type that cannot be echoed.
  raw(perm_line('true', 'id_true')),
  raw(perm_line('1.5', 'id_real')),
  raw(perm_line('{}', 'id_object')),
  raw(perm_line('[7]', 'id_array')),
  raw(perm_line('null', 'id_null')),
  raw('{"jsonrpc":"2.0","id":false,"method":"_demo/unknown"}'),
  -- A usable id on an invalid request: answered -32600.
  raw((perm_line('"v1"', 'bad_version'):gsub('"2%.0"', '"1.0"', 1))),
  raw('{"jsonrpc":"2.0","id":"np","method":"session/request_permission","params":"not an object"}'),
  -- Responses to requests never made.
  raw('{"jsonrpc":"2.0","id":424242,"result":{}}'),
  raw('{"jsonrpc":"2.0","id":"never","error":{"code":-32000,"message":"no"}}'),
  raw('{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}'),
  -- The running prompt's id as a string, as a real, with both result and
  -- error, with a non-integer error code: none answers the prompt.
  raw('{"jsonrpc":"2.0","id":"${prompt_id}","result":{"stopReason":"end_turn"}}'),
  raw('{"jsonrpc":"2.0","id":${prompt_id}.0,"result":{"stopReason":"end_turn"}}'),
  raw('{"jsonrpc":"2.0","id":${prompt_id},"result":{"stopReason":"end_turn"},"error":{"code":1,"message":"x"}}'),
  raw('{"jsonrpc":"2.0","id":${prompt_id},"error":{"code":"not an integer","message":"x"}}'),
  -- Then a well-formed request and a message.
  {
    type = 'permission',
    toolCall = { toolCallId = 'good_${turn}', title = 'Write ok.txt', kind = 'edit' },
    options = {
      { optionId = 'ok', name = 'Allow', kind = 'allow_once' },
      { optionId = 'no', name = 'Reject', kind = 'reject_once' },
    },
  },
  { type = 'message', text = 'Survived.' },
}

-- Every line of the broker log is a record ("YYYY-MM-DD hh:mm:ss.mmm pid
-- LEVEL ..."): nothing of a skipped line's neighbours leaks in.
local function check_log_records(log)
  local bad = {}
  for line in log:gmatch('[^\n]+') do
    if not line:match('^%d%d%d%d%-%d%d%-%d%d %d%d:%d%d:%d%d') then
      bad[#bad + 1] = line:sub(1, 120)
    end
  end
  T.eq(bad, {}, 'broker log lines that are not log records')
end

-- Why the broker skipped lines: each reason must be in its log.
local REASONS = {
  'parse error',
  'not a JSON object',
  'id is not an integer or a string',
  'jsonrpc is not "2.0"',
  'params is not an object or an array',
  'response to a request we never made',
  'no method and no usable id',
  'response needs one of result or error',
  'error has no integer code',
}

T.test('malformed lines are skipped or answered -32600; no prompt, no turn end; the session goes on', function()
  local log_path = require('acp.broker').log_path()
  local log0 = #(T.read(log_path) or '')
  local requests = T.on('AcpPermissionRequest')
  local turn_end = T.on('AcpTurnEnd')
  local exits = T.on('AcpAgentExit')
  -- Every message chunk Lua sees (the mirror keeps only the last message).
  local texts, listening = {}, true
  require('acp.state').subscribe(function(name, data)
    local u = listening and name == 'update' and type(data.update) == 'table' and data.update
    if u and u.sessionUpdate == 'agent_message_chunk' and type(u.content) == 'table' then
      texts[#texts + 1] = tostring(u.content.text)
    end
  end)
  T.defer(function()
    listening = false
  end)
  local ctx = T.start_demo({ name = 'faults', steps = STEPS })
  local pid = broker_pid()
  require('acp').prompt('Misbehave a lot')

  local p = T.wait_pending('good_1')
  -- Lines are handled in order: whatever the bad lines did has happened.
  T.eq(#turn_end, 0, 'AcpTurnEnd before the good request (a stray response ended the turn?)')
  T.eq(require('acp').status().busy, true, 'status().busy before the answer')
  T.eq(#require('acp').pending(), 1, 'pending prompts (only the well-formed request)')
  T.ok(require('acp').respond(p.id, 'ok'), 'respond()')
  T.eq(T.answer(ctx, 'good_1').result, T.selected('ok'), 'answer to the good request')
  T.idle()

  T.eq(#turn_end, 1, 'AcpTurnEnd count')
  T.eq(turn_end[1].stopReason, 'end_turn', 'stopReason')
  T.eq(#requests, 1, 'AcpPermissionRequest count')
  T.eq(requests[1].toolCallId, 'good_1', 'the one request shown')
  T.eq(#exits, 0, 'AcpAgentExit count')
  T.eq(broker_pid(), pid, 'the same broker')
  T.ok(T.alive(pid), 'the broker is alive')

  -- What the agent got back: -32600 for the two usable ids, the answer to
  -- the good request, nothing else (no id null, no answer to a response).
  local got = {}
  for _, m in ipairs(responses(ctx)) do
    got[#got + 1] = { id = m.id, code = type(m.error) == 'table' and m.error.code or nil }
  end
  T.eq(got, {
    { id = 'v1', code = -32600 },
    { id = 'np', code = -32600 },
    { id = 0 },
  }, 'responses the agent received, in order')

  -- The chunk with invalid bytes never reached Lua; the good one did.
  T.wait(function()
    return table.concat(texts):find('Survived.', 1, true)
  end, nil, 'the last message in Lua')
  T.ok(not table.concat(texts):find('BAD', 1, true), 'the invalid chunk reached Lua: ' .. vim.inspect(texts))

  local log = (T.read(log_path) or ''):sub(log0 + 1)
  for _, why in ipairs(REASONS) do
    T.contains(log, why, 'the broker log')
  end
  -- A skipped line is quoted up to its own end: the bytes after it in the
  -- read buffer (the next lines) must not follow it into the log.
  check_log_records(log)
end)

T.test('short bad lines at the end of a full 64 KiB read are logged without reading past it', function()
  -- 64 KiB of 127-byte garbage lines in one write: the broker's read buffer
  -- is 64 KiB, so a read can end exactly with a short bad line, whose log
  -- quote must stop at its end (under ASan, reading on is a heap overflow).
  local log_path = require('acp.broker').log_path()
  local log0 = #(T.read(log_path) or '')
  local steps = {}
  for _ = 1, 20 do
    steps[#steps + 1] = { type = 'garbage', bytes = 65536, line = 127 }
    steps[#steps + 1] = { type = 'sleep', ms = 10 }
  end
  steps[#steps + 1] = {
    type = 'permission',
    toolCall = { toolCallId = 'after_${turn}', title = 'Write ok.txt', kind = 'edit' },
    options = { { optionId = 'ok', name = 'Allow', kind = 'allow_once' } },
  }
  local ctx = T.start_demo({ name = 'read-ends', steps = steps })
  local pid = broker_pid()
  require('acp').prompt('Garbage in 64 KiB pieces')
  local p = T.wait_pending('after_1', 30000)
  require('acp').respond(p.id, 'ok')
  T.eq(T.answer(ctx, 'after_1').result, T.selected('ok'), 'the answer after the garbage')
  T.idle()
  T.ok(T.alive(pid), 'the broker is alive')
  local log = (T.read(log_path) or ''):sub(log0 + 1)
  local n = select(2, log:gsub('skipped a line', ''))
  T.eq(n, 20 * 512, 'log lines about skipped lines (one per garbage line)')
  check_log_records(log)
end)

T.test('the agent sends a response with the id of an open permission request of its own', function()
  -- The broker's ids and the agent's ids are separate spaces: a "response"
  -- from the agent with the id of the agent's own pending request is not an
  -- answer to anything the broker asked, and the request stays pending.
  local ctx = T.start_demo({
    name = 'self-answer',
    steps = {
      {
        type = 'permission',
        id = 'mine',
        wait = false,
        toolCall = { toolCallId = 'own_${turn}', title = 'Write own.txt', kind = 'edit' },
        options = { { optionId = 'ok', name = 'Allow', kind = 'allow_once' } },
      },
      raw('{"jsonrpc":"2.0","id":"mine","result":{"outcome":{"outcome":"selected","optionId":"ok"}}}'),
      { type = 'sleep', ms = 300 },
      {
        type = 'permission',
        toolCall = { toolCallId = 'next_${turn}', title = 'Write next.txt', kind = 'edit' },
        options = { { optionId = 'ok', name = 'Allow', kind = 'allow_once' } },
      },
    },
  })
  require('acp').prompt('Answer yourself')
  T.wait_pending('next_1')
  local ids = {}
  for _, p in ipairs(require('acp').pending()) do
    ids[#ids + 1] = p.toolCallId
  end
  T.eq(ids, { 'own_1', 'next_1' }, 'both requests still pending')
  T.eq(#responses(ctx), 0, 'nothing answered yet')
  vim.cmd('AcpAllow!')
  T.eq(T.answer(ctx, 'own_1').result, T.selected('ok'), 'own_1 answered by the person')
  T.eq(T.answer(ctx, 'next_1').result, T.selected('ok'), 'next_1 answered by the person')
  T.idle()
end)

T.done()
