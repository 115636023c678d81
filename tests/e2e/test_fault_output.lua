-- Fault injection: an agent that writes far too much. 1 GiB of output cut
-- into lines longer than the broker's limit (32 MiB), and one valid JSON
-- line of 64 MiB: each overlong line is discarded as it streams, with one
-- log line, the connection goes on (the next permission request reaches the
-- person and is answered) and the broker's peak memory stays bounded.
local T = require('helpers')
local broker_pid = T.broker_pid
local fresh_broker = T.fresh_broker

local MiB = 1024 * 1024
-- 1 GiB streams through the broker in under a second here (2 cores), ASan too.
local BULK = 1024 * MiB
-- Under ASan the broker's memory is shadow memory and a quarantine of freed
-- blocks: its peak says nothing about the broker's own bound.
local SANITIZED = os.getenv('ACP_E2E_SANITIZER_LOGS') == '1'
-- What the broker may hold beyond its memory at start: the start of an
-- overlong line, up to the 32 MiB limit (then it is skipped as it streams),
-- plus 16 MiB for packing, logging and malloc's slack. Keeping a whole
-- 64 MiB line, or any of the bulk, exceeds it.
local GROWTH_KIB = (32 + 16) * 1024
local SLOW = 60000 -- ms; generous: the machine may be busy

-- A diagnostic line in the TAP output (not a test result).
local function note(fmt, ...)
  local out = os.getenv('ACP_TEST_OUT')
  local line = '# ' .. fmt:format(...)
  if out and out ~= '' then
    local f = assert(io.open(out, 'a'))
    f:write(line, '\n')
    f:close()
  else
    print(line)
  end
end

-- A field of /proc/<pid>/status in KiB (VmHWM: peak resident set).
local function status_kib(pid, field)
  local s = T.read('/proc/' .. pid .. '/status') or ''
  return tonumber(s:match(field .. ':%s*(%d+) kB'))
end

local function log_text()
  return T.read(require('acp.broker').log_path()) or ''
end

-- Lines of the broker log saying a line of n bytes was discarded.
local function discarded(text)
  local sizes = {}
  for n in text:gmatch('discarded a (%d+)%-byte line') do
    sizes[#sizes + 1] = tonumber(n)
  end
  return sizes
end

local function ask(tcid)
  return {
    type = 'permission',
    toolCall = { toolCallId = tcid, title = 'Write after.txt', kind = 'edit' },
    options = {
      { optionId = 'ok', name = 'Allow', kind = 'allow_once' },
      { optionId = 'no', name = 'Reject', kind = 'reject_once' },
    },
  }
end

-- Plays steps (their permission request tcid answered 'ok') and checks the
-- broker survived with its memory bounded; returns the broker log's new part.
local function survive(steps, tcid, what)
  local pid, hwm0 = fresh_broker()
  local log0 = #log_text()
  local ctx = T.start_demo({ name = what, steps = steps })
  local t0 = vim.loop.hrtime()
  require('acp').prompt('Write a lot')
  local p = T.wait_pending(tcid, SLOW)
  local secs = (vim.loop.hrtime() - t0) / 1e9
  T.ok(require('acp').respond(p.id, 'ok'), 'respond()')
  T.eq(T.answer(ctx, tcid).result, T.selected('ok'), 'the answer the agent received')
  T.wait(function()
    return not require('acp').status().busy
  end, SLOW, 'the turn to end')
  T.eq(broker_pid(), pid, 'the same broker process')
  T.ok(T.alive(pid), 'the broker is alive')
  local hwm = status_kib(pid, 'VmHWM')
  note('%s: %.1f s until the request arrived; broker VmHWM %d KiB at start, %d KiB after', what, secs, hwm0, hwm)
  if not SANITIZED then
    T.ok(hwm - hwm0 < GROWTH_KIB, ('peak memory grew by %d KiB (bound %d KiB)'):format(hwm - hwm0, GROWTH_KIB))
  end
  return log_text():sub(log0 + 1), ctx
end

T.test('1 GiB of output in overlong lines: discarded, the next request works, memory bounded', function()
  -- 128 MiB lines (with their newline), so the bulk is exactly 8 of them:
  -- no shorter tail line, which the broker would parse (jansson copies a run
  -- of letters while it reports the error, a cost of lines under the limit).
  local line = 128 * MiB - 1
  local log = survive({
    { type = 'message', text = 'Here comes a lot.' },
    { type = 'garbage', bytes = BULK, line = line },
    ask('after_bulk_${turn}'),
    { type = 'message', text = 'Still here.' },
  }, 'after_bulk_1', ('%d MiB in lines of %d bytes'):format(BULK / MiB, line))
  local want = {}
  for i = 1, BULK / (line + 1) do
    want[i] = line
  end
  T.eq(discarded(log), want, 'the discarded lines the broker logged (one each)')
end)

T.test('a single 64 MiB line of valid JSON: discarded with one log line, the session goes on', function()
  -- The longest message chunk Lua sees.
  local longest, listening = { 0 }, true
  require('acp.state').subscribe(function(name, data)
    local u = listening and name == 'update' and type(data.update) == 'table' and data.update
    if u and u.sessionUpdate == 'agent_message_chunk' and type(u.content) == 'table' then
      longest[1] = math.max(longest[1], #tostring(u.content.text))
    end
  end)
  T.defer(function()
    listening = false
  end)
  local log, ctx = survive({
    { type = 'garbage', bytes = 64 * MiB, json = true },
    ask('after_big_${turn}'),
  }, 'after_big_1', 'one 64 MiB JSON line')
  local sizes = discarded(log)
  T.eq(#sizes, 1, 'log lines about a discarded line')
  T.ok(sizes[1] > 64 * MiB, 'the logged length ' .. tostring(sizes[1]) .. ' is the whole line')
  -- The 64 MiB text never reached Neovim.
  T.ok(longest[1] < 1024, 'the longest message chunk Lua saw has ' .. longest[1] .. ' bytes')
  -- The session takes another prompt.
  require('acp').prompt('Again')
  local p = T.wait_pending('after_big_2', SLOW)
  require('acp').respond(p.id, 'no')
  T.eq(T.answer(ctx, 'after_big_2').result, T.selected('no'), 'the answer in the second turn')
  T.idle()
end)

T.done()
