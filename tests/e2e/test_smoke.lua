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

-- `make` (what plugin managers run) generates doc/tags; it is not committed.
T.test(':help acp works after make: doc/tags has every *tag* of doc/acp.txt', function()
  local doc = T.dir .. '/../../doc/'
  T.ok(vim.fn.filereadable(doc .. 'tags') == 1, 'doc/tags exists (run make)')
  local tags = {}
  for _, line in ipairs(vim.fn.readfile(doc .. 'tags')) do
    local tag, file = line:match('^([^\t]+)\t([^\t]+)\t')
    tags[tag or line] = file
  end
  local missing = {}
  for _, line in ipairs(vim.fn.readfile(doc .. 'acp.txt')) do
    -- A tag is *name* between white space (as :helptags reads it).
    for tag in (' ' .. line .. ' '):gmatch('%f[%S]%*([^%s*|]+)%*%f[%s]') do
      if tags[tag] ~= 'acp.txt' then
        missing[#missing + 1] = tag
      end
    end
  end
  T.eq(missing, {}, 'tags of doc/acp.txt missing from doc/tags (run make)')
  for _, topic in ipairs({ 'acp', ':AcpStart', 'acp-api' }) do
    vim.cmd('help ' .. topic)
    T.eq(vim.fn.fnamemodify(vim.api.nvim_buf_get_name(0), ':t'), 'acp.txt', ':help ' .. topic)
    vim.cmd('helpclose')
  end
end)

-- Neovim 0.12 renamed vim.diff and the `buffer` key of autocommands and
-- keymaps; compat picks the name this Neovim takes.
T.test('compat: the buffer key of autocommands and keymaps, and the diff function', function()
  local compat = require('acp.compat')
  local new = vim.fn.has('nvim-0.12') == 1
  T.eq(compat.buf_key, new and 'buf' or 'buffer', 'compat.buf_key')
  T.eq(compat.diff, new and vim.text.diff or vim.diff, 'compat.diff')
  T.eq(compat.diff('a\nb\n', 'a\nc\n', { result_type = 'indices' }), { { 2, 1, 2, 1 } }, 'a diff')

  local buf = vim.api.nvim_create_buf(false, true)
  vim.keymap.set('n', '<F13>', '<Nop>', { [compat.buf_key] = buf, desc = 'acp-test' })
  local local_maps = vim.tbl_filter(function(m)
    return m.desc == 'acp-test'
  end, vim.api.nvim_buf_get_keymap(buf, 'n'))
  T.eq(#local_maps, 1, 'the mapping is local to the buffer')
  T.eq(vim.fn.maparg('<F13>', 'n'), '', 'and not global')
  local fired = 0
  vim.api.nvim_create_autocmd('User', {
    [compat.buf_key] = buf,
    callback = function()
      fired = fired + 1
    end,
  })
  T.eq(#vim.api.nvim_get_autocmds({ event = 'User', [compat.buf_key] = buf }), 1, 'the autocommand is local')
  local other = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_exec_autocmds('User', { [compat.buf_key] = other })
  T.eq(fired, 0, 'not fired for another buffer')
  vim.api.nvim_exec_autocmds('User', { [compat.buf_key] = buf })
  T.eq(fired, 1, 'fired for its buffer')
  vim.api.nvim_buf_delete(buf, { force = true })
  vim.api.nvim_buf_delete(other, { force = true })

  -- The plugin uses them through compat only.
  local direct = {}
  for _, path in ipairs(vim.fn.globpath(T.dir .. '/../../lua', '**/*.lua', false, true)) do
    local code = {}
    for _, line in ipairs(vim.fn.readfile(path)) do
      code[#code + 1] = line:gsub('%-%-.*', '')
    end
    local src = table.concat(code, '\n')
    local name = path:match('.*/lua/(.*)')
    local renamed = src:find('[{,]%s*buffer%s*=') or src:find('vim%.diff%f[^%w_]') or src:find('vim%.text%.diff')
    if renamed and name ~= 'acp/compat.lua' then
      direct[#direct + 1] = name
    end
  end
  T.eq(direct, {}, "files that use a `buffer` key or vim.diff without compat")
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
  -- Every Neovim this suite runs on is one the tests run on.
  local v = vim.version()
  local line = ('Neovim %d.%d.%d (the tests run on 0.7.2, 0.10.x and 0.12.x)'):format(v.major, v.minor, v.patch)
  T.contains(text, line, 'health buffer')
  T.ok(not text:find('doc/tags is missing', 1, true), 'doc/tags missing:\n' .. text)
end)

T.done()
