-- Feeds N `decided` events of the auto bench's shape to a Neovim that runs
-- the plugin (bench/init.lua) through `_on_events`, over RPC in batches of
-- 50 (or BATCH), as the broker sends them; for counting Neovim's instructions per event
-- under callgrind (bench/README.md, "The `decided` event as an array"):
--
--   valgrind --tool=callgrind --callgrind-out-file=OUT \
--     nvim --headless --clean -u bench/init.lua --listen SOCK &
--   nvim --headless --clean -l bench/decided_feed.lua SOCK N FORM [SINK [BATCH]]
--
-- (the feeding Neovim needs -l: 0.9 or later). FORM: array (this tree's
-- event), array2 (the array before the kind, the decision and by were
-- numbers), array1 (the array before a title equal to the command was `true`),
-- map (the form before the array). SINK (optional): `none` hands the batches
-- to a function that does nothing (what Neovim's decoding alone costs), `lua`
-- (or nothing) the plugin. BATCH: events per RPC call (default 50; N a
-- multiple of it), for what a batch costs Neovim beside its events.
-- Prints what the ledger and the log kept.
local sock, n, form, sink = arg[1], tonumber(arg[2]), arg[3], arg[4]
local batch = tonumber(arg[5] or '') or 50
local ch
for _ = 1, 1200 do
  local ok, c = pcall(vim.fn.sockconnect, 'pipe', sock, { rpc = true })
  if ok and c and c > 0 then
    ch = c
    break
  end
  vim.wait(100)
end
assert(ch, 'no server')
local code = "return require('acp.broker')._on_events(...)"
if sink == 'none' then
  code = 'return'
end
local function ev(i)
  local multi = i % 2 == 0
  local cmd = multi and 'git status && git diff' or 'git status'
  local m = {
    agent = 'bench',
    session = 'sess_1',
    toolCallId = 'call_' .. i,
    kind = 'execute',
    title = cmd,
    command = cmd,
    paths = {},
    decision = 'allow',
    by = 'rule',
    reason = 'allowed by Bash(git *) (.claude/settings.json)',
    rule = 'Bash(git *)',
    source = '.claude/settings.json',
    optionId = 'allow',
  }
  if multi then
    m.atoms = { { kind = 'command', text = 'git status' }, { kind = 'command', text = 'git diff' } }
  end
  if form == 'map' then
    return m
  end
  if form == 'array1' then
    return {
      m.agent, m.session, m.toolCallId, m.kind, m.title, m.command, m.decision, m.by, m.optionId,
      m.reason, m.rule, m.source,
      multi and { 'command', 'git status', false, 'command', 'git diff', false } or vim.NIL,
      m.paths,
    }
  end
  local a = {
    m.agent, m.session, m.toolCallId, m.kind, true, m.command, m.decision, m.by, m.optionId,
    m.reason, m.rule, m.source,
  }
  if multi then
    a[13] = { 'command', 'git status', false, 'command', 'git diff', false }
  end
  if form ~= 'array2' then
    -- execute, allow, rule: numbers (acp.decided's lists).
    a[4], a[7], a[8] = 6, 1, 1
  end
  return a
end
vim.rpcrequest(ch, 'nvim_exec_lua', code, { { { 'turn_start', { agent = 'bench', session = 'sess_1' } } } })
for b = 1, n / batch do
  local list = {}
  for j = 1, batch do
    list[j] = { 'decided', ev((b - 1) * batch + j) }
  end
  vim.rpcrequest(ch, 'nvim_exec_lua', code, { list })
end
vim.wait(500)
local info = vim.rpcrequest(ch, 'nvim_exec_lua', [[
  local l = require('acp.ledger').sessions['sess_1']
  local ev = require('acp.state').logged()
  local last = ev[#ev]
  return { n = l and l.ndecisions or -1, last = last and last.event, tcid = last and last.data and last.data.toolCallId, err = require('acp.events').view_error, msgs = vim.fn.execute('messages'):sub(-300) }
]], {})
io.stderr:write(vim.inspect(info) .. '\n')
vim.wait(200)
pcall(vim.rpcrequest, ch, 'nvim_command', 'qa!')
