-- A key typed before the prompt appeared never answers it: the prompt
-- ignores keys for ui.arm_ms after it opens, so a person typing "1" or "a"
-- for something else cannot approve a tool call they have not seen.
-- This file keeps a real arming delay (not the 50 ms the other tests use).
local T = require('helpers')

local ARM_MS = 600

local function scenario()
  return {
    name = 'typeahead',
    steps = {
      { type = 'message', text = 'Thinking...' },
      { type = 'sleep', ms = 300 },
      {
        type = 'permission',
        toolCall = {
          toolCallId = 'typeahead_${turn}',
          title = 'Write typeahead.txt',
          kind = 'edit',
          content = { { type = 'diff', path = '${cwd}/typeahead.txt', oldText = vim.NIL, newText = 'typed\n' } },
          locations = { { path = '${cwd}/typeahead.txt' } },
        },
        options = {
          { optionId = 'yes', name = 'Allow', kind = 'allow_once' },
          { optionId = 'no', name = 'Reject', kind = 'reject_once' },
        },
        on_allow = { type = 'write', path = 'typeahead.txt', content = 'typed\n' },
      },
      { type = 'message', text = 'Done.' },
    },
  }
end

for _, key in ipairs({ '1', 'a' }) do
  T.test(('"%s" typed before the prompt appeared does not answer it'):format(key), function()
    local ctx = T.start_demo(scenario(), { setup = { ui = { arm_ms = ARM_MS } } })
    require('acp').prompt('Write it')
    -- The person types while the agent thinks; Neovim reads the key only
    -- once the prompt is on screen.
    T.feed(key, 'mt')
    local win = T.wait_prompt('typeahead_1')
    local opened = vim.loop.hrtime()
    T.eq(vim.api.nvim_get_current_win(), win, 'the prompt has focus')
    T.feed('', 'x') -- now Neovim handles the typeahead
    T.ok((vim.loop.hrtime() - opened) / 1e6 < ARM_MS, 'the typeahead ran inside the arming delay (slow machine?)')
    -- After the arming delay the request is still pending and unanswered.
    T.wait_ms(ARM_MS + 100)
    T.eq(#require('acp').pending(), 1, 'pending prompts after the early key')
    T.eq(T.requests(ctx, 'typeahead_1')[1].response, nil, 'answer received by the agent')
    T.ok(T.find_float(), 'the prompt is still on screen')
    -- A key pressed now, on the visible prompt, answers it.
    T.eq(vim.api.nvim_get_current_win(), T.find_float(), 'the prompt still has focus')
    T.feed(key)
    T.eq(T.answer(ctx, 'typeahead_1').result, { outcome = { outcome = 'selected', optionId = 'yes' } }, 'answer')
    T.wait(function()
      return T.exists(ctx.project .. '/typeahead.txt')
    end, nil, 'typeahead.txt to be written')
  end)
end

T.done()
