-- The plugin loads, defines its commands, answers status() with the keys of
-- :help acp-api and has a health check that runs without a Lua error. Needs no
-- agent, so it also validates the harness itself.
local T = require('helpers')

-- Every command :help acp documents (a *:Acp...* tag) exists, and every Acp
-- command plugin/acp.lua defines is documented.
T.test('plugin/acp.lua defines the commands :help acp documents, and no other', function()
  local doc = table.concat(vim.fn.readfile(T.dir .. '/../../doc/acp.txt'), '\n')
  local documented = {}
  for name in doc:gmatch('%*:(Acp%a+)%*') do
    documented[name] = true
  end
  T.ok(documented.AcpStart and documented.AcpAllow, 'the tags were read')
  local cmds = vim.api.nvim_get_commands({})
  local missing, undocumented = {}, {}
  for name in pairs(documented) do
    if cmds[name] == nil then
      missing[#missing + 1] = name
    end
  end
  for name in pairs(cmds) do
    if name:match('^Acp') and not documented[name] then
      undocumented[#undocumented + 1] = name
    end
  end
  table.sort(missing)
  table.sort(undocumented)
  T.eq(missing, {}, 'documented commands missing')
  T.eq(undocumented, {}, 'commands without a *:Acp...* tag in doc/acp.txt')
end)

T.test('loading the plugin does not load the Lua modules', function()
  -- plugin/ only defines commands; everything else loads on first use (:help acp-commands).
  T.eq(package.loaded['acp.broker'], nil, 'acp.broker loaded at startup')
end)

T.test("require('acp') exposes the API of :help acp-api", function()
  local acp = require('acp')
  for _, f in ipairs({ 'setup', 'start', 'prompt', 'cancel', 'pending', 'respond', 'status', 'stop' }) do
    T.eq(type(acp[f]), 'function', 'acp.' .. f)
  end
end)

T.test('status() before any agent has the keys and types of :help acp-api', function()
  local s = require('acp').status()
  T.eq(s.agent, nil, 'agent')
  T.eq(s.session, nil, 'session')
  T.eq(type(s.mode), 'string', 'type of mode')
  T.eq(type(s.yolo), 'boolean', 'type of yolo')
  T.eq(type(s.yolo_veto), 'boolean', 'type of yolo_veto')
  T.eq(type(s.trusted), 'boolean', 'type of trusted')
  T.eq(s.pending, 0, 'pending')
  T.eq(s.busy, false, 'busy')
  T.eq(s.unasked, 0, 'unasked')
  T.eq(s.posture, 'unverified', 'posture before any agent')
  local known = {
    agent = 1,
    session = 1,
    mode = 1,
    yolo = 1,
    yolo_veto = 1,
    trusted = 1,
    pending = 1,
    busy = 1,
    posture = 1,
    posture_reason = 1,
    unasked = 1,
  }
  for k in pairs(s) do
    T.ok(known[k], 'unexpected key in status(): ' .. tostring(k))
  end
  T.eq(require('acp').pending(), {}, 'pending()')
end)

T.test('setup() accepts the options the tests use', function()
  require('acp').setup({ ui = { arm_ms = 50 } })
end)

T.test(':checkhealth acp runs without a Lua error', function()
  local ok, err = pcall(vim.cmd, 'checkhealth acp')
  T.ok(ok, 'checkhealth raised: ' .. tostring(err))
  local buf = vim.api.nvim_get_current_buf()
  local text = table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), '\n')
  T.ok(not text:find('Failed to run healthcheck', 1, true), 'health check failed:\n' .. text)
  T.ok(not text:find('No healthcheck found', 1, true), 'no health check for acp:\n' .. text)
  T.contains(text, 'acp', 'health buffer')
end)

T.done()
