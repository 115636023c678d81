--- Highlight groups: default links to built-in groups, re-applied on
--- ColorScheme (a colorscheme's `:hi clear` removes them).

local M = {}

M.links = {
  AcpPromptNormal = 'NormalFloat',
  AcpPromptBorder = 'FloatBorder',
  AcpPromptHeader = 'Comment',
  AcpPromptTitle = 'Title',
  AcpPromptLabel = 'Identifier',
  AcpPromptCommand = 'String',
  AcpPromptAllow = 'DiffAdd',
  AcpPromptReject = 'DiffDelete',
  AcpPromptOption = 'Normal',
  AcpPromptKey = 'Special',
  AcpPromptExtra = 'DiffChange',
  AcpPromptFooter = 'Comment',
  AcpPromptDiffAdd = 'DiffAdd',
  AcpPromptDiffDelete = 'DiffDelete',
  AcpPromptDiffHunk = 'Special',
  AcpPromptWarning = 'WarningMsg',
  AcpChatHeader = 'Title',
  AcpChatMeta = 'Comment',
  AcpChatUser = 'Special',
  AcpChatAgent = 'Identifier',
  AcpChatThought = 'Comment',
  AcpChatToolTitle = 'Function',
  AcpChatStatus = 'Comment',
  AcpChatDone = 'String',
  AcpChatFailed = 'ErrorMsg',
  AcpChatAwaiting = 'WarningMsg',
  AcpChatLabel = 'Title',
  AcpChatError = 'ErrorMsg',
  AcpChatDiffAdd = 'DiffAdd',
  AcpChatDiffDelete = 'DiffDelete',
  AcpChatDiffHunk = 'Special',
  -- Markdown of the chat's messages without treesitter.
  AcpChatHeading = 'Title',
  AcpChatCode = 'Special',
}

--- Groups defined by attributes (no built-in group to link to).
M.attrs = {
  AcpChatBold = { bold = true },
  AcpChatItalic = { italic = true },
}

local applied = false

function M.apply()
  for name, link in pairs(M.links) do
    vim.api.nvim_set_hl(0, name, { link = link, default = true })
  end
  for name, attrs in pairs(M.attrs) do
    vim.api.nvim_set_hl(0, name, vim.tbl_extend('force', attrs, { default = true }))
  end
end

--- Defines the groups once and keeps them across colorscheme changes
--- (every `:colorscheme` applies them again). Cheap after the first call:
--- the prompt calls it before each window.
function M.setup()
  if applied then
    return
  end
  applied = true
  M.apply()
  vim.api.nvim_create_autocmd('ColorScheme', {
    group = vim.api.nvim_create_augroup('AcpHighlight', { clear = true }),
    callback = M.apply,
  })
end

return M
