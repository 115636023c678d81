-- Fault injection: an agent sends 10,000 permission requests at once. All
-- reach the person (the broker holds up to 16384), one :AcpDeny! answers
-- them all, each exactly once, with its own id, in the order they were
-- asked; the broker's memory stays bounded and Neovim is usable afterwards.
local T = require('helpers')
local note = T.note
local broker_pid = T.broker_pid
local status_kib = T.status_kib
local fresh_broker = T.fresh_broker

local N = 10000
local SLOW = 90000 -- ms: generous for a 2-core machine shared with a fuzzer (the file has 120 s)
local SANITIZED = os.getenv('ACP_E2E_SANITIZER_LOGS') == '1'
-- Peak memory the broker may add for 10,000 pending requests. Measured:
-- 44-58 MiB. About 4.7 KiB per pending request (its id, options, the
-- decision's details kept for the audit log, the call waiting for Lua's
-- answer) stays until answered; the rest is permission events waiting in
-- the queue to Neovim, more when Neovim is slower. 96 MiB leaves room for
-- a slow Neovim and still catches a request kept twice over, or a leak.
local GROWTH_KIB = 96 * 1024

local function now_ms()
  return (vim.loop.hrtime()) / 1e6
end

-- The permission requests the agent sent and the responses it received,
-- each in transcript order (without T.permissions, which is quadratic).
local function exchange(path)
  local asked, answers = {}, {}
  local f = assert(io.open(path, 'r'))
  for line in f:lines() do
    -- Only lines about permission traffic are decoded.
    local ask = line:find('session/request_permission', 1, true)
    if ask or (line:find('"dir":"in"', 1, true) and line:find('"outcome"', 1, true)) then
      local ok, e = pcall(vim.fn.json_decode, line)
      if ok and type(e.msg) == 'table' then
        if e.dir == 'out' and e.msg.method == 'session/request_permission' then
          asked[#asked + 1] = e.msg
        elseif e.dir == 'in' and e.msg.method == nil then
          answers[#answers + 1] = e.msg
        end
      end
    end
  end
  f:close()
  return asked, answers
end

T.test(('%d permission requests at once: all shown, :AcpDeny! answers each once, in order'):format(N), function()
  local pid, hwm0 = fresh_broker()
  local ctx = T.start_demo({
    name = 'many',
    steps = {
      {
        type = 'many_permissions',
        count = N,
        request = {
          toolCall = { toolCallId = 'many_${n}_${turn}', title = 'Write f${n}.txt', kind = 'edit' },
          options = {
            { optionId = 'ok', name = 'Allow', kind = 'allow_once' },
            { optionId = 'no', name = 'Reject', kind = 'reject_once' },
          },
        },
      },
      { type = 'message', text = 'All answered.' },
    },
  })
  local turn_end = T.on('AcpTurnEnd')
  local t0 = now_ms()
  require('acp').prompt('Ask ten thousand times')
  T.wait(function()
    return #require('acp').pending() == N
  end, SLOW, N .. ' pending prompts')
  local t_arrived = now_ms()
  T.wait_prompt(nil, SLOW)
  T.eq(require('acp').status().pending, N, 'status().pending')
  local order = require('acp').pending()
  T.eq(order[1].toolCallId, 'many_1_1', 'the oldest prompt first')
  T.eq(order[N].toolCallId, 'many_' .. N .. '_1', 'the newest prompt last')

  local t1 = now_ms()
  vim.cmd('AcpDeny!')
  local t_cmd = now_ms()
  T.wait(function()
    return #turn_end == 1
  end, SLOW, 'the turn to end after the last answer')
  local t_done = now_ms()
  T.eq(turn_end[1].stopReason, 'end_turn', 'stopReason')
  T.wait(function()
    return #require('acp').pending() == 0 and #T.floats() == 0
  end, SLOW, 'no pending prompt and no prompt window left')
  local hwm = status_kib(pid, 'VmHWM')
  note(
    '%d requests: all pending after %.1f s; :AcpDeny! ran %.1f s; '
      .. 'last answer + turn end %.1f s later; broker VmHWM %d -> %d KiB',
    N,
    (t_arrived - t0) / 1000,
    (t_cmd - t1) / 1000,
    (t_done - t_cmd) / 1000,
    hwm0,
    hwm
  )

  local asked, answers = exchange(ctx.transcript)
  T.eq(#asked, N, 'requests the agent sent')
  T.eq(#answers, N, 'responses the agent received (each request once)')
  local bad = {}
  for i = 1, N do
    local q, a = asked[i], answers[i]
    -- Answers arrive in the order the requests were made, each with the id
    -- of its own request (ids are integers from 0: the agent's counter).
    if a.id ~= q.id or type(a.id) ~= type(q.id) or not vim.deep_equal(a.result, T.selected('no')) then
      bad[#bad + 1] = ('#%d: asked id %s, answered %s'):format(i, vim.inspect(q.id), vim.inspect(a))
      if #bad >= 5 then
        break
      end
    end
  end
  T.eq(bad, {}, 'answers out of order, with a wrong id or a wrong outcome')

  T.ok(T.alive(pid), 'the broker is alive')
  if not SANITIZED then
    T.ok(hwm - hwm0 < GROWTH_KIB, ('broker peak memory grew by %d KiB (bound %d KiB)'):format(hwm - hwm0, GROWTH_KIB))
  end

  -- Neovim is usable: a scheduled callback runs, a command answers.
  local ran = false
  vim.schedule(function()
    ran = true
  end)
  T.wait(function()
    return ran
  end, nil, 'a scheduled callback')
  vim.cmd('AcpPending')
  T.eq(require('acp').status().busy, false, 'status().busy')
end)

T.done()
