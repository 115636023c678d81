--- How the broker's data reads for a person: why it decided, what trusting
--- a project would enable, a diff, the command of a tool call. Pure
--- functions of their arguments; shared by the prompt, the chat, the
--- commands and the notifications.

local compat = require('acp.compat')
local text = require('acp.text')

local M = {}
local H = {}

--- Why the broker decided or asks, for a person: its `reason`, plus the
--- rule and its source when the reason does not name them.
---@param d {reason: string|nil, rule: string|nil, source: string|nil, by: string|nil}
---@return string
function M.why(d)
  local why = d.reason or (d.by and ('by ' .. d.by)) or 'no reason given'
  if d.rule and not why:find(d.rule, 1, true) then
    why = why .. ' (rule ' .. d.rule .. ')'
  end
  -- The broker's reasons name the file relative to the project root.
  local tail = d.source and d.source:match('[^/]+/[^/]+$') or d.source
  if d.source and not why:find(tail, 1, true) then
    local src = d.source:find('/', 1, true) and vim.fn.fnamemodify(d.source, ':~:.') or d.source
    why = why .. ' [' .. src .. ']'
  end
  return why
end

--- What trusting a project would enable, as lines for a person
--- (`permissive` of the `settings` event, whatever its exact shape).
---@param p any
---@param opts {sources: boolean|nil}|nil sources = false leaves out the files
---@return string[]
function M.describe_permissive(p, opts)
  local items = {}
  H.describe(p, nil, items, not (opts and opts.sources == false))
  return items
end

-- The tools of each rule class (src/policy/rules.c), and what a rule of
-- the class with no argument, or any, allows.
H.classes = {
  { 'any command', { 'Bash', 'Shell', 'run_shell_command', 'ShellTool', 'PowerShell' } },
  { 'any file read', { 'Read', 'Grep', 'Glob', 'LS', 'read_file', 'read_many_files', 'list_directory', 'glob', 'grep_search', 'search_file_content' } },
  { 'any file edit', { 'Edit', 'Write', 'MultiEdit', 'NotebookEdit', 'write_file', 'replace' } },
  { 'any URL fetch', { 'WebFetch', 'web_fetch' } },
  { 'any web search', { 'WebSearch', 'google_web_search' } },
}
-- Tools whose argument Gemini ignores: the rule allows every use.
H.args_ignored = { read_file = 1, read_many_files = 1, list_directory = 1, glob = 1, grep_search = 1, search_file_content = 1, write_file = 1, replace = 1, web_fetch = 1, google_web_search = 1 }

--- What an allow rule enables, in a few words for a person ("any command",
--- "any file edit", "commands starting with git push"), or nil when the
--- rule is not understood here.
---@param rule string
---@return string|nil
function M.enables(rule)
  if type(rule) ~= 'string' then
    return nil
  end
  local tool, arg = rule:match('^%s*([^()]-)%s*%((.*)%)%s*$')
  tool = vim.trim(tool or rule)
  local cls
  for _, c in ipairs(H.classes) do
    if vim.tbl_contains(c[2], tool) then
      cls = c[1]
    end
  end
  if tool:match('^mcp__') then
    local server, name = tool:match('^mcp__([^_]+)__(.*)$')
    if server == nil or name == '' or name == '*' then
      return 'every tool of MCP server ' .. (server or tool:sub(6))
    end
    return 'the MCP tool ' .. name .. ' of ' .. server
  end
  local kind = tool == 'Kind' and arg
  if kind then
    return 'any ' .. kind .. ' tool call'
  end
  if not cls then
    return nil
  end
  if arg == nil or vim.trim(arg) == '' or arg == '*' or arg == '**' or arg == '//**' or H.args_ignored[tool] then
    return cls
  end
  if cls == 'any command' then
    if tool == 'run_shell_command' or tool == 'ShellTool' then
      return 'commands starting with ' .. arg
    end
    local prefix = arg:match('^(.-)%s*:?%s*%*$')
    if prefix and not prefix:find('*', 1, true) then
      return 'commands starting with ' .. prefix
    end
    return arg:find('*', 1, true) and ('commands matching ' .. arg) or ('the command ' .. arg)
  end
  if cls == 'any URL fetch' then
    local host = arg:match('^domain:(.*)$')
    return host and ('fetches from ' .. host) or nil
  end
  if cls == 'any web search' then
    return cls
  end
  -- Paths: the project root, home, anywhere.
  local what = cls:match('^any (.*)$')
  local where = { ['/**'] = 'in the project', ['~/**'] = 'in your home', ['~'] = 'in your home', ['**'] = 'anywhere' }
  if where[arg] then
    return 'any ' .. what .. ' ' .. where[arg]
  end
  local noun = cls == 'any file read' and 'reads' or 'edits'
  local function shown(path)
    if path:sub(1, 2) == '//' then
      return path:sub(2)
    elseif path:sub(1, 1) == '/' then
      return "the project's " .. path:sub(2)
    end
    return path
  end
  local dir = arg:match('^(.-)/%*%*$')
  if dir and dir ~= '' and not dir:find('[*?]') then
    return noun .. ' under ' .. shown(dir) .. '/'
  end
  return noun .. (arg:find('[*?]') and ' matching ' or ' of ') .. shown(arg)
end

--- The shell command of an `execute` tool call's rawInput (a string, or an
--- argv list quoted as a shell would need it), or nil. Only for tool calls
--- no permission request was judged for: a prompt shows the command the
--- broker analysed (`command` in the permission event).
---@param input any the tool call's rawInput
---@return string|nil
function M.command(input)
  if type(input) ~= 'table' then
    return nil
  end
  local cmd = input.command or input.cmd
  if type(cmd) == 'string' and cmd ~= '' then
    return cmd
  elseif type(cmd) == 'table' and compat.islist(cmd) and #cmd > 0 then
    return text.shell_join(cmd)
  end
  return nil
end

--- A ToolCallContent `diff` as unified-diff text to show, for the prompt
--- and the chat: `from` and `to` are the ---/+++ lines, then either `lines`
--- (the hunks) or a `note` saying why there are none.
---
--- With `have` (what the person has of the file: the loaded buffer, unsaved
--- changes included, else the disk), the diff is computed against it, and
--- `notice` says, in one line, when the agent's oldText is not that text
--- (doc/acp.txt `acp-unsaved`). `have.snippet`: the agent's oldText is only
--- the part it replaces (Claude's Edit), so it is looked for in `have`;
--- `have.seen`: the text the agent last saw of the file (acp.merge).
---@param item table
---@param have {text: string, from: 'buffer'|'disk', modified: boolean, snippet: boolean|nil, seen: string|nil}|nil
---@return {from: string, to: string, lines: string[]|nil, note: string|nil, notice: string|nil}
function M.diff(item, have)
  local path = text.short_path(compat.str(item.path) or '?')
  local new = type(item.newText) == 'string' and item.newText or ''
  local old = type(item.oldText) == 'string' and item.oldText or nil
  local r = {
    from = '--- ' .. (old and path or '/dev/null'),
    to = '+++ ' .. path .. (old and '' or '  (new file)'),
  }
  if have ~= nil and type(have.text) == 'string' then
    old, new = H.against(r, path, old, new, have)
  end
  -- Both texts end with a newline, so vim.diff does not flag the last line.
  local function nl(s)
    return (s ~= '' and s:sub(-1) ~= '\n') and s .. '\n' or s
  end
  local ok, diff = pcall(text.diff, nl(old or ''), nl(new), { result_type = 'unified', ctxlen = 3 })
  if not ok or type(diff) ~= 'string' then
    r.note = '(could not compute the diff)'
  elseif diff == '' then
    r.note = '(no changes)'
  else
    r.lines = text.split_lines(diff)
  end
  return r
end

--- The texts to diff when the person has `have.text` of the file; sets
--- r.notice (and r.from) when the agent's old text is not what they have.
function H.against(r, path, old, new, have)
  local cur = have.text
  local where = have.from == 'buffer' and 'your buffer' or 'the file on disk'
  if have.snippet and old ~= nil and old ~= '' then
    local s, e = cur:find(old, 1, true)
    if s == nil then
      r.notice = have.modified and 'Your buffer has unsaved changes the agent has not seen: the text it replaces is not there'
        or ('The text the agent replaces is not in ' .. where)
      return old, new
    end
    if cur:find(old, e + 1, true) ~= nil then
      return old, new -- more than once: its own diff
    end
    r.from = '--- ' .. path
    return cur, cur:sub(1, s - 1) .. new .. cur:sub(e + 1)
  end
  if old == cur or (old == nil and cur == '') then
    return old, new
  end
  if old == nil and have.seen == cur then
    -- No old text sent (Claude's Write), but the agent read this text.
    r.from, r.to = '--- ' .. path, '+++ ' .. path
    return cur, new
  end
  if have.modified then
    r.notice = 'Your buffer has unsaved changes the agent has not seen'
  elseif old == nil then
    r.notice = 'The file exists: the agent replaces all of it'
  else
    r.notice = 'The agent saw other text than ' .. where .. ' holds now'
  end
  r.from = '--- ' .. path .. '  (' .. where .. ')'
  r.to = '+++ ' .. path .. "  (the agent's)"
  return cur, new
end

--- An allow rule with what it enables ("Bash: any command").
function H.rule(rule, list)
  local what = (list == nil or list == 'allow') and M.enables(rule)
  return what and (rule .. ': ' .. what) or rule
end

--- A mode with what it enables.
function H.mode(mode)
  local what = ({
    acceptEdits = 'any file edit in the project without asking',
    bypassPermissions = 'every request without asking',
    yolo = 'every request without asking',
  })[mode]
  return 'mode ' .. mode .. (what and (': ' .. what) or '')
end

--- Describes `p` into `items`. The broker sends `{["<file>"] = {allow =
--- {...}, defaultMode = 'acceptEdits', yolo = true}}`; lists, rule records
--- and strings are understood too. `list` is the rule list `p` belongs to,
--- `from` the file it comes from, when known.
function H.describe(p, list, items, sources, from)
  local function src(path)
    path = compat.str(path) or from
    return (sources and path) and (' (' .. vim.fn.fnamemodify(path, ':~:.') .. ')') or ''
  end
  if not compat.present(p) or p == false then
    return
  end
  if type(p) == 'string' then
    items[#items + 1] = ((list and list ~= 'allow') and (list .. ' ') or '') .. H.rule(p, list) .. src(nil)
  elseif type(p) ~= 'table' then
    items[#items + 1] = tostring(p) .. src(nil)
  elseif compat.islist(p) then
    for _, x in ipairs(p) do
      H.describe(x, list, items, sources, from)
    end
  elseif compat.str(p.rule) then
    local l = compat.str(p.list) or list
    items[#items + 1] = ((l and l ~= 'allow') and (l .. ' ') or '') .. H.rule(p.rule, l) .. src(p.source)
  else
    local keys = vim.tbl_keys(p)
    table.sort(keys, function(x, y)
      return tostring(x) < tostring(y)
    end)
    for _, k in ipairs(keys) do
      local v = p[k]
      if k == 'allow' or k == 'rules' then
        H.describe(v, 'allow', items, sources, from)
      elseif k == 'yolo' then
        local yolo = 'yolo: every request without asking'
        if v == true then
          items[#items + 1] = yolo .. src(nil)
        elseif compat.str(v) then
          items[#items + 1] = yolo .. src(v)
        elseif type(v) == 'table' then
          items[#items + 1] = yolo .. src(v.source)
        end
      elseif k == 'mode' or k == 'defaultMode' then
        if type(v) == 'table' then
          items[#items + 1] = H.mode(tostring(compat.str(v.mode) or '?')) .. src(v.source)
        elseif compat.str(v) then
          items[#items + 1] = H.mode(v) .. src(nil)
        end
      elseif type(v) == 'table' and not compat.islist(v) then
        -- Keyed by the file it comes from.
        H.describe(v, list, items, sources, tostring(k))
      elseif compat.present(v) and v ~= false then
        local ok, json = pcall(vim.fn.json_encode, v)
        items[#items + 1] = tostring(k) .. ': ' .. (ok and json or tostring(v)) .. src(nil)
      end
    end
  end
end

return M
