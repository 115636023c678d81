-- Drives one real agent through Neovim, the Lua API and the broker, inside
-- run-agent.sh (which provides ACP_AGENT_CMD, ACP_AGENT_ENV, ACP_WORKSPACE
-- and ACP_RUN_DIR). ACP_POLICY is allow | reject | cancel | rules | deny:
--   allow  answers every request with its first allow_once option, by key
--          in the floating prompt;
--   reject answers with the first reject_once option (:AcpDeny);
--   cancel runs :AcpCancel while the first prompt is open;
--   rules  trusts project allow rules for the edit and the command: the
--          broker must answer both itself, with no prompt at all;
--   deny   a project deny rule for the edit: the broker rejects it;
--   trusted  the project's own agent settings (ACP_PROJECT) are trusted
--          with :AcpTrust's `acp-broker trust`: the broker's rules answer
--          both requests, the audit log shows by "rule", never "unasked".
-- ACP_PROJECT names permissive settings of the agent's own that the
-- project brings (see project_files below); ACP_EXPECT_POSTURE (asking |
-- unverified) is what status().posture must say before the first prompt,
-- and ACP_EXPECT_ASKED the number of prompts the person must see.
-- ACP_EXPECT_UNASKED=1: the audit log must hold an `unasked` line (the
-- posture is switched off with ACP_BROKER_TEST_NO_POSTURE=1).
-- ACP_CONTEXT=selection: the prompt is sent with `:2,3AcpPrompt` from a
-- file of the workspace, and the selected lines (not the others) must reach
-- the fake model's input (doc/acp.txt, acp-context).
-- ACP_EXPECT_REVIEW=1: test.txt is in review() and revert() empties it;
-- with ACP_EXPECT_TEXT, the one line it holds before the revert (with
-- ACP_FAKE_SHELL, the fake model's command; `rules` then allows Bash(sed *)).
-- Writes $ACP_RUN_DIR/nvim-result.json and exits 0 when the run matched the
-- expectations given as ACP_EXPECT_STOP and ACP_EXPECT_FILES (yes|no|edit).
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

-- Permissive settings of the agents' own, in several forms.
local project_files = {
  ['claude-allow'] = { ['.claude/settings.json'] = { permissions = { allow = { 'Bash', 'Write', 'Edit' } } } },
  ['claude-mode'] = {
    ['.claude/settings.json'] = { permissions = { defaultMode = 'acceptEdits', allow = { 'Bash(touch *)' } } },
  },
  ['claude-local'] = {
    ['.claude/settings.local.json'] = { permissions = { allow = { 'Bash(touch:*)', 'Write', 'Edit' }, defaultMode = 'acceptEdits' } },
  },
  ['gemini-allow'] = { ['.gemini/settings.json'] = { tools = { allowed = { 'write_file', 'run_shell_command', 'replace' } } } },
  ['gemini-mode'] = {
    ['.gemini/settings.json'] = { general = { defaultApprovalMode = 'auto_edit' }, tools = { allowed = { 'run_shell_command(touch)' } } },
  },
  ['codex-config'] = {
    ['.codex/config.toml'] = 'approval_policy = "never"\nsandbox_mode = "danger-full-access"\n',
  },
}
local project = vim.env.ACP_PROJECT
if project then
  assert(project_files[project], 'unknown ACP_PROJECT ' .. project)
  for rel, content in pairs(project_files[project]) do
    vim.fn.mkdir(vim.fn.fnamemodify(ws .. '/' .. rel, ':h'), 'p')
    local text = type(content) == 'string' and content or encode(content)
    vim.fn.writefile(vim.split(text, '\n'), ws .. '/' .. rel)
  end
  -- Project memory must keep loading: the agents read these.
  for _, f in ipairs({ 'CLAUDE.md', 'GEMINI.md', 'AGENTS.md' }) do
    vim.fn.writefile({ 'This project is a test workspace.' }, ws .. '/' .. f)
  end
  if project:match('^codex') then
    -- codex reads a project's .codex/config.toml only once the person
    -- trusted the project in codex itself: do that, it must not matter.
    local f = io.open(vim.env.CODEX_HOME .. '/config.toml', 'a')
    f:write(('\n[projects."%s"]\ntrust_level = "trusted"\n'):format(ws))
    f:close()
  end
end

local function write_settings(tbl)
  vim.fn.mkdir(ws .. '/.acp', 'p')
  vim.fn.writefile({ encode(tbl) }, ws .. '/.acp/settings.json')
end
if policy == 'rules' then
  local allow = { 'Edit(/test.txt)', 'Bash(touch shell-ran.txt)' }
  if vim.env.ACP_FAKE_SHELL then
    -- The fake model's command edits test.txt first (sed -i).
    table.insert(allow, 'Bash(sed *)')
  end
  write_settings({ permissions = { allow = allow } })
  local broker = require('acp.config').broker_bin()
  vim.fn.system({ broker, 'trust', '--cwd', ws })
  assert(vim.v.shell_error == 0, 'acp-broker trust failed')
elseif policy == 'trusted' then
  if project and project:match('^codex') then
    -- The broker reads no codex file: the rules come from .acp/.
    write_settings({ permissions = { allow = { 'Edit(/test.txt)', 'Bash(touch shell-ran.txt)' } } })
  end
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
-- The posture is known before the first prompt.
vim.wait(30000, function()
  local st = acp.status()
  return st.session ~= nil and (st.posture == 'asking' or st.posture_reason ~= nil)
end, 20)
result.posture = acp.status().posture
result.posture_reason = acp.status().posture_reason
if vim.env.ACP_CONTEXT == 'selection' then
  vim.fn.writefile({ 'int first;', 'int selected_7f3a;', 'int also_selected_c0de;', 'int outside_91c2;' }, ws .. '/ctx.c')
  vim.cmd('edit ' .. vim.fn.fnameescape(ws .. '/ctx.c'))
  vim.cmd('2,3AcpPrompt Create test.txt, then run touch shell-ran.txt.')
else
  acp.prompt('Create test.txt, then run touch shell-ran.txt.')
end

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
    elseif policy == 'rules' or policy == 'trusted' then
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
-- The audit log's lines of this run.
result.audit = {}
local audit = require('acp.compat').state_path('audit.jsonl')
if vim.fn.filereadable(audit) == 1 then
  for _, line in ipairs(vim.fn.readfile(audit)) do
    local okd, e = pcall(decode, line)
    if okd and type(e) == 'table' then
      table.insert(result.audit, { kind = e.kind, by = e.by, outcome = e.outcome, decision = e.decision })
    end
  end
end
if vim.env.ACP_EXPECT_REVIEW == '1' then
  -- The turn ledger (doc/acp.txt, acp-review): test.txt, created by the
  -- agent (Claude writes it itself, Gemini through fs/*), is in review()
  -- with one hunk against its snapshot (missing); reverting empties it.
  vim.wait(3000, function()
    return #acp.review() > 0
  end, 20)
  result.review = {}
  local found
  for _, r in ipairs(acp.review()) do
    local name = vim.fn.fnamemodify(r.path, ':t')
    table.insert(result.review, { file = name, hunks = #r.hunks })
    found = found or (name == 'test.txt' and #r.hunks == 1 and r.hunks[1].old_count == 0)
  end
  -- With ACP_FAKE_SHELL (a rule-allowed sed -i of it, which runs before
  -- Neovim hears of either call), the change is in the same hunk.
  result.test_txt_lines = vim.fn.filereadable(ws .. '/test.txt') == 1 and vim.fn.readfile(ws .. '/test.txt') or nil
  result.reverted = found and acp.revert(ws .. '/test.txt') and #vim.fn.readfile(ws .. '/test.txt') == 0 or false
  result.review_left = #acp.review()
end
local f = io.open(vim.env.ACP_RUN_DIR .. '/nvim-result.json', 'w')
f:write(encode(result))
f:close()
io.stdout:write(encode(result) .. '\n')

local want_stop = vim.env.ACP_EXPECT_STOP
local want_files = vim.env.ACP_EXPECT_FILES
local ok = result.stopReason == want_stop and not result.windows_left
if want_files == 'edit' then
  -- Only the edit happened (codex under approval_policy "never" refuses
  -- the command's escalation by itself).
  ok = ok and result.test_txt and not result.shell_ran
else
  ok = ok and (want_files == 'yes') == (result.test_txt and result.shell_ran)
    and (want_files == 'yes' or not result.test_txt)
end
if vim.env.ACP_AGENT == 'gemini' and want_files == 'yes' then
  -- Gemini creates the new file through the client: it reads it first
  -- (missing inside the project: empty content), then writes it.
  local wrote = false
  for _, e in ipairs(result.fs) do
    wrote = wrote or (e.op == 'write' and e.file == 'test.txt')
  end
  ok = ok and wrote
end
if ({ allow = true, reject = true, cancel = true, rules = true, deny = true })[policy]
  and vim.env.ACP_EXPECT_UNASKED ~= '1' then
  -- The agent asked for everything: nothing acted unasked.
  ok = ok and #unasked == 0 and acp.status().unasked == 0
end
if project then
  -- Project memory (CLAUDE.md, GEMINI.md, AGENTS.md) reached the model.
  local log = vim.env.ACP_RUN_DIR .. '/fake-llm.jsonl'
  local text = vim.fn.filereadable(log) == 1 and table.concat(vim.fn.readfile(log), '\n') or ''
  result.memory = text:find('This project is a test workspace.', 1, true) ~= nil
  ok = ok and result.memory
end
if vim.env.ACP_CONTEXT == 'selection' then
  -- The selected lines reached the model; the line outside the range did not.
  local log = vim.env.ACP_RUN_DIR .. '/fake-llm.jsonl'
  local text = vim.fn.filereadable(log) == 1 and table.concat(vim.fn.readfile(log), '\n') or ''
  result.context = text:find('int selected_7f3a;', 1, true) ~= nil
    and text:find('int also_selected_c0de;', 1, true) ~= nil
    and text:find('ctx.c', 1, true) ~= nil
    and text:find('outside_91c2', 1, true) == nil
  ok = ok and result.context
end
if vim.env.ACP_EXPECT_POSTURE then
  ok = ok and result.posture == vim.env.ACP_EXPECT_POSTURE
end
if vim.env.ACP_EXPECT_ASKED then
  ok = ok and #result.requests == tonumber(vim.env.ACP_EXPECT_ASKED)
end
local unasked_lines = 0
for _, e in ipairs(result.audit) do
  unasked_lines = unasked_lines + (e.outcome == 'unasked' and 1 or 0)
end
if vim.env.ACP_EXPECT_UNASKED == '1' then
  ok = ok and unasked_lines >= 1
elseif project then
  ok = ok and unasked_lines == 0
end
if policy == 'trusted' then
  -- The broker's rules decided both; the audit log says so.
  local by_rule = 0
  for _, e in ipairs(result.audit) do
    by_rule = by_rule + ((e.by == 'rule' or e.by == 'yolo') and e.decision == 'allow' and 1 or 0)
  end
  ok = ok and result.unexpected_prompt == nil and #decided == 2 and by_rule >= 2
end
if policy == 'rules' then
  -- Both requests decided by the broker, none asked.
  ok = ok and result.unexpected_prompt == nil and #decided == 2
    and decided[1].decision == 'allow' and decided[2].decision == 'allow'
elseif policy == 'deny' then
  ok = ok and #decided >= 1 and decided[1].decision == 'deny' and decided[1].rule == 'Edit(/test.txt)'
end
if vim.env.ACP_EXPECT_REVIEW == '1' then
  ok = ok and result.reverted == true and result.review_left == 0
  if vim.env.ACP_EXPECT_TEXT then
    ok = ok and vim.deep_equal(result.test_txt_lines, { vim.env.ACP_EXPECT_TEXT })
  end
end
vim.cmd(ok and 'qa!' or 'cquit 1')
