-- Drives one real agent through Neovim, the Lua API and the broker, inside
-- run-agent.sh (which provides ACP_AGENT_CMD, ACP_AGENT_ENV, ACP_WORKSPACE
-- and ACP_RUN_DIR). ACP_POLICY is allow | reject | cancel | rules | deny:
--   allow  answers every request with its first allow_once option, by key
--          in the floating prompt;
--   reject answers with the first reject_once option (:AcpDeny);
--   cancel runs :AcpCancel while the first prompt is open;
--   rules  trusts project allow rules for the edit and the command: the
--          broker must answer both itself, with no prompt at all;
--   deny   a project deny rule for the edit: the broker rejects it.
-- Writes $ACP_RUN_DIR/nvim-result.json and exits 0 when the run matched the
-- expectations given as ACP_EXPECT_STOP and ACP_EXPECT_FILES (yes|no).
local acp = require('acp')
local decode = vim.json and vim.json.decode or vim.fn.json_decode
local encode = vim.json and vim.json.encode or vim.fn.json_encode
local policy = vim.env.ACP_POLICY or 'allow'
local ws = vim.env.ACP_WORKSPACE

acp.setup({ ui = { arm_ms = 50 }, log_level = 'debug' })

local result = { policy = policy, requests = {}, answers = {} }
local turn_end
vim.api.nvim_create_autocmd('User', {
  pattern = 'AcpTurnEnd',
  callback = function()
    turn_end = vim.g.acp_last_event.data
  end,
})
vim.api.nvim_create_autocmd('User', {
  pattern = 'AcpPermissionResolved',
  callback = function()
    local d = vim.g.acp_last_event.data
    table.insert(result.answers, { outcome = d.outcome, optionId = d.optionId ~= vim.NIL and d.optionId or nil, by = d.by })
  end,
})

local function write_settings(tbl)
  vim.fn.mkdir(ws .. '/.acp', 'p')
  vim.fn.writefile({ encode(tbl) }, ws .. '/.acp/settings.json')
end
if policy == 'rules' then
  write_settings({ permissions = { allow = { 'Edit(/test.txt)', 'Bash(touch shell-ran.txt)' } } })
  local broker = require('acp.config').broker_bin()
  vim.fn.system({ broker, 'trust', '--cwd', ws })
  assert(vim.v.shell_error == 0, 'acp-broker trust failed')
elseif policy == 'deny' then
  write_settings({ permissions = { deny = { 'Edit(/test.txt)' } } })
end
local decided = {}
vim.api.nvim_create_autocmd('User', {
  pattern = 'AcpPermissionDecided',
  callback = function()
    local d = vim.g.acp_last_event.data
    table.insert(decided, { decision = d.decision, rule = d.rule ~= vim.NIL and d.rule or nil })
  end,
})

-- Tool calls the broker saw act without a request (AcpUnasked): none may
-- appear when the agent asks for everything.
local unasked = {}
vim.api.nvim_create_autocmd('User', {
  pattern = 'AcpUnasked',
  callback = function()
    local d = vim.g.acp_last_event.data
    table.insert(unasked, { toolCallId = d.toolCallId, kind = d.kind, decision = d.decision })
  end,
})

-- What the agent read and wrote through the client's fs/* (the broker's
-- `fs` events): Gemini uses them when they are offered.
result.fs = {}
require('acp.state').subscribe(function(name, d)
  if name == 'fs' then
    table.insert(result.fs, { op = d.op, file = vim.fn.fnamemodify(d.path, ':t'), via = d.via })
  end
end)

local env = decode(vim.env.ACP_AGENT_ENV)
local cmd = decode(vim.env.ACP_AGENT_CMD)
acp.start({ cmd = cmd, env = env }, { cwd = ws })
acp.prompt('Create test.txt, then run touch shell-ran.txt.')

local function float_win()
  for _, w in ipairs(vim.api.nvim_list_wins()) do
    if vim.api.nvim_win_get_config(w).relative ~= '' then
      return w
    end
  end
end

local function first_of(p, kind)
  for i, o in ipairs(p.options) do
    if o.kind == kind then
      return i, o
    end
  end
end

local deadline = vim.loop.now() + 60000
local seen = {}
while not turn_end and vim.loop.now() < deadline do
  vim.wait(100, function()
    return turn_end ~= nil or (acp.pending()[1] ~= nil and not seen[acp.pending()[1].id])
  end, 10)
  local p = acp.pending()[1]
  if p and not seen[p.id] then
    seen[p.id] = true
    local kinds = {}
    for _, o in ipairs(p.options) do
      table.insert(kinds, o.optionId .. ':' .. o.kind)
    end
    table.insert(result.requests, { title = p.title, kind = p.kind, options = kinds })
    if policy == 'allow' then
      -- Answer as a person would: press the option's digit in the float.
      vim.wait(2000, function() return float_win() ~= nil end, 10)
      vim.wait(150)
      local i = first_of(p, 'allow_once')
      vim.api.nvim_set_current_win(float_win())
      vim.api.nvim_feedkeys(tostring(i), 'x', false)
    elseif policy == 'reject' or policy == 'deny' then
      vim.cmd('AcpDeny')
    elseif policy == 'rules' then
      result.unexpected_prompt = p.title
      vim.cmd('AcpDeny')
    else
      vim.cmd('AcpCancel')
    end
  end
end

result.stopReason = turn_end and turn_end.stopReason or 'timeout'
result.message = turn_end and turn_end.message ~= vim.NIL and turn_end.message or nil
result.test_txt = vim.fn.filereadable(ws .. '/test.txt') == 1
result.shell_ran = vim.fn.filereadable(ws .. '/shell-ran.txt') == 1
result.windows_left = float_win() ~= nil
result.decided = decided
result.unasked = unasked
local f = io.open(vim.env.ACP_RUN_DIR .. '/nvim-result.json', 'w')
f:write(encode(result))
f:close()
io.stdout:write(encode(result) .. '\n')

local want_stop = vim.env.ACP_EXPECT_STOP
local want_files = vim.env.ACP_EXPECT_FILES
local ok = result.stopReason == want_stop and not result.windows_left
  and (want_files == 'yes') == (result.test_txt and result.shell_ran)
  and (want_files == 'yes' or not result.test_txt)
if vim.env.ACP_AGENT == 'gemini' and want_files == 'yes' then
  -- Gemini creates the new file through the client: it reads it first
  -- (missing inside the project: empty content), then writes it.
  local wrote = false
  for _, e in ipairs(result.fs) do
    wrote = wrote or (e.op == 'write' and e.file == 'test.txt')
  end
  ok = ok and wrote
end
if ({ allow = true, reject = true, cancel = true, rules = true, deny = true })[policy] then
  -- The agent asked for everything: nothing acted unasked.
  ok = ok and #unasked == 0 and acp.status().unasked == 0
end
if policy == 'rules' then
  -- Both requests decided by the broker, none asked.
  ok = ok and result.unexpected_prompt == nil and #decided == 2
    and decided[1].decision == 'allow' and decided[2].decision == 'allow'
elseif policy == 'deny' then
  ok = ok and #decided >= 1 and decided[1].decision == 'deny' and decided[1].rule == 'Edit(/test.txt)'
end
vim.cmd(ok and 'qa!' or 'cquit 1')
