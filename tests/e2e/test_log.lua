-- :AcpLog shows the audit log as a table (time, agent, decision, by, rule,
-- title) of the current project's decisions; :AcpLog! of every project;
-- <CR> or K shows a row's line of JSON as written.
local T = require('helpers')
local api = vim.api

local function decide_in(project, tcid, command)
  T.write(project .. '/.acp/settings.json', '{"permissions":{"deny":["Bash(rm *)"]}}')
  local ctx = T.start_demo({
    name = 'log-' .. tcid,
    steps = { T.shell_request(tcid .. '_${turn}', command), { type = 'message', text = 'Done.' } },
  }, { project = project })
  require('acp').prompt('Go')
  T.eq(T.answer(ctx, tcid .. '_1').result, T.selected('reject'), 'denied by the rule')
  T.idle()
  return ctx
end

local function text(buf)
  return table.concat(api.nvim_buf_get_lines(buf, 0, -1, false), '\n')
end

T.test(':AcpLog is a table of this project; :AcpLog! of all; <CR> and K show the JSON', function()
  local other = T.project()
  decide_in(other, 'elsewhere', 'rm -rf other-build')
  T.stop_all()
  local here = T.project()
  local ctx = decide_in(here, 'here', 'rm -rf build')

  vim.cmd('AcpLog')
  local buf = api.nvim_get_current_buf()
  T.eq(vim.bo[buf].filetype, 'acp-log', 'filetype')
  local lines = api.nvim_buf_get_lines(buf, 0, -1, false)
  T.contains(lines[1], 'Decisions in ', 'the header')
  T.ok(lines[2]:match('^time%s+agent%s+decision%s+by%s+rule%s+title$'), 'the column names: ' .. lines[2])
  local t = text(buf)
  T.contains(t, 'rm -rf build', "the title of this project's decision")
  T.ok(not t:find('other-build', 1, true), "another project's decision is not shown:\n" .. t)
  local last = lines[#lines]
  T.ok(last:match('^%d%d:%d%d:%d%d%s+' .. vim.pesc(ctx.agent) .. '%s+deny%s+rule%s+Bash%(rm %*%)%s+rm %-rf build$'), 'the row: ' .. last)
  T.eq(api.nvim_win_get_cursor(0)[1], #lines, 'the cursor on the newest row')
  T.eq(vim.bo[buf].modifiable, false, 'read-only')

  -- The JSON of the row, a key away.
  T.feed('K')
  local float = T.wait(function()
    return T.find_float()
  end, nil, 'the JSON window')
  local shown = T.win_text(float)
  T.contains(shown, '{"', 'the raw line')
  T.contains(shown, '"toolCallId":"here_1"', 'the raw line of that decision')
  T.ok(shown:find('\nrule%s+Bash%(rm %*%)'), 'key by key:\n' .. shown)
  T.feed('q')
  T.wait(function()
    return T.find_float() == nil
  end, nil, 'the JSON window to close')
  T.feed('<CR>')
  T.wait(function()
    return T.find_float()
  end, nil, 'the JSON window on <CR>')
  T.feed('<Esc>')
  T.wait(function()
    return T.find_float() == nil
  end, nil, 'the JSON window to close on <Esc>')

  -- Every project: the same window, refreshed.
  vim.cmd('AcpLog!')
  T.eq(api.nvim_get_current_buf(), buf, 'the same table')
  t = text(buf)
  T.contains(t, 'other-build', "the other project's decision")
  T.contains(t, 'rm -rf build', "this project's decision")
  T.contains(api.nvim_buf_get_lines(buf, 0, 1, false)[1], 'every project', 'the header')
  vim.cmd('close')
end)

T.done()
