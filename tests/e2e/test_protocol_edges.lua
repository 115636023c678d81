-- Protocol edges the broker and the shim must get right: a request about a
-- tool call that was never announced, and request ids that collide (0 and
-- "0") and must be echoed with their exact JSON type.
local T = require('helpers')

T.test('a request for a never-announced toolCallId shows a prompt with its title', function()
  local ctx = T.start_demo('unannounced.json')
  local requests = T.on('AcpPermissionRequest')
  require('acp').prompt('Read my notes')
  local tcid = 'resolve-prompt-' .. ctx.project .. '/notes.txt-1'
  local win = T.wait_prompt(tcid)
  T.contains(T.win_text(win), 'Read notes.txt', 'prompt text')
  local p = require('acp').pending()[1]
  T.eq({ p.toolCallId, p.title, p.kind }, { tcid, 'Read notes.txt', 'read' }, '{toolCallId, title, kind} of pending()[1]')
  T.wait(function()
    return #requests == 1
  end, nil, 'AcpPermissionRequest')
  T.eq(requests[1].title, 'Read notes.txt', 'AcpPermissionRequest title')
  T.eq(requests[1].toolCallId, tcid, 'AcpPermissionRequest toolCallId')
  T.eq(requests[1].id, p.id, 'AcpPermissionRequest id = pending()[1].id')
  -- It can be answered like any other.
  T.answer_with_keys(tcid, 'a')
  T.eq(
    T.answer(ctx, tcid).result,
    { outcome = { outcome = 'selected', optionId = 'proceed_once' } },
    'answer to the unannounced request'
  )
end)

T.test('colliding request ids 0 and "0" are answered with the same JSON type', function()
  local ctx = T.start_demo('colliding-ids.json')
  require('acp').prompt('Two at once')
  local int_p = T.wait_pending('int_id_1')
  local str_p = T.wait_pending('string_id_1')
  T.ok(int_p.id ~= str_p.id, 'the two prompts have different broker ids')
  -- Allow the one with the integer id, reject the one with the string id,
  -- so that a mix-up shows in the outcomes as well as in the ids.
  require('acp').respond(int_p.id, 'allow')
  require('acp').respond(str_p.id, 'reject')
  local int_r = T.answer(ctx, 'int_id_1')
  local str_r = T.answer(ctx, 'string_id_1')
  T.eq(type(int_r.id), 'number', 'type of the id answered to the integer request')
  T.eq(int_r.id, 0, 'id answered to the integer request')
  T.eq(type(str_r.id), 'string', 'type of the id answered to the string request')
  T.eq(str_r.id, '0', 'id answered to the string request')
  T.eq(int_r.result, { outcome = { outcome = 'selected', optionId = 'allow' } }, 'answer to id 0')
  T.eq(str_r.result, { outcome = { outcome = 'selected', optionId = 'reject' } }, 'answer to id "0"')
  T.wait(function()
    return T.exists(ctx.project .. '/int-id.txt')
  end, nil, 'int-id.txt to be written')
  T.wait(function()
    return not require('acp').status().busy
  end, nil, 'the turn to end')
  T.ok(not T.exists(ctx.project .. '/string-id.txt'), 'string-id.txt must not exist')
  -- Exactly one answer per request: nothing answered twice or to the wrong id.
  local answers = 0
  for _, m in ipairs(T.messages(T.transcript(ctx.transcript), 'in')) do
    if m.method == nil and (m.id == 0 or m.id == '0') then
      answers = answers + 1
    end
  end
  T.eq(answers, 2, 'responses with id 0 or "0" received by the agent')
end)

T.done()
