--- Small helpers the controller and the RPC layer share.

local M = {}

--- Calls fn(i) for i = first, last, step under one pcall (these loops run
--- for every broker event: no pcall per item); when one raises,
--- on_error(i, err) is called and the rest go on under a new pcall.
---@param first integer
---@param last integer
---@param step integer
---@param fn fun(i: integer)
---@param on_error fun(i: integer, err: any)
function M.each_protected(first, last, step, fn, on_error)
  local at = first
  local function run(from)
    for i = from, last, step do
      at = i
      fn(i)
    end
  end
  local from = first
  while from <= last do
    local ok, err = pcall(run, from)
    if ok then
      return
    end
    on_error(at, err)
    from = at + step
  end
end

return M
