-- `security.disableYoloMode: true` in the user's ~/.gemini/settings.json
-- vetoes yolo: :AcpYolo on is refused and the message names that file, and
-- requests are still asked.
local T = require('helpers')
local write = T.write

local VETO_OPTIONS = {
  { kind = 'allow_once', name = 'Allow', optionId = 'allow' },
  { kind = 'reject_once', name = 'Reject', optionId = 'reject' },
}

local function shell(tcid, command)
  return T.shell_request(tcid, command, VETO_OPTIONS)
end

T.test(':AcpYolo on is refused when ~/.gemini/settings.json disables yolo, naming the file', function()
  -- run_one.sh gives every test file a private HOME.
  local user_file = os.getenv('HOME') .. '/.gemini/settings.json'
  write(user_file, '{"security":{"disableYoloMode":true}}')
  T.defer(function()
    os.remove(user_file)
  end)
  local ctx = T.start_demo({
    name = 'veto',
    steps = { shell('touch_${turn}', 'touch x'), { type = 'message', text = 'Done.' } },
  })
  T.wait(function()
    return require('acp').status().yolo_veto
  end, nil, 'status().yolo_veto')

  vim.cmd('AcpYolo on')
  local err = T.wait(function()
    for _, n in ipairs(T.notes) do
      if n.level == vim.log.levels.ERROR then
        return n.msg
      end
    end
  end, nil, 'the refusal')
  T.contains(err, '.gemini/settings.json', 'the refusal names the vetoing file')
  T.wait_ms(200)
  T.eq(require('acp').status().yolo, false, 'status().yolo')

  -- Still asked.
  require('acp').prompt('Touch x')
  T.wait_pending('touch_1')
  T.answer_with_keys('touch_1', 'r')
  T.eq(T.answer(ctx, 'touch_1').result, { outcome = { outcome = 'selected', optionId = 'reject' } }, 'answer')

  -- :AcpRules says who vetoes it.
  vim.cmd('AcpRules')
  local text = T.wait(function()
    for _, b in ipairs(vim.api.nvim_list_bufs()) do
      if vim.api.nvim_buf_is_loaded(b) and vim.bo[b].filetype == 'acp-rules' then
        return table.concat(vim.api.nvim_buf_get_lines(b, 0, -1, false), '\n')
      end
    end
  end, nil, 'the :AcpRules buffer')
  T.contains(text, 'vetoed', ':AcpRules')
  T.contains(text, '.gemini/settings.json', ':AcpRules')
end)

T.done()
