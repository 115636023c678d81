--- Small helpers the controller and the RPC layer share.

local M = {}
local H = {}

--- Calls fn(ctx, i) for i = first, last, step under one pcall (these loops
--- run for every broker event: no pcall per item); when one raises,
--- on_error(ctx, i, err) is called and the rest go on under a new pcall.
---
--- No closure is made here (pass module functions and a ctx): a function
--- that makes one is not compiled by LuaJIT (bytecodes FNEW, UCLO), and
--- neither is any trace through it.
---@param first integer
---@param last integer
---@param step integer
---@param fn fun(ctx: any, i: integer)
---@param on_error fun(ctx: any, i: integer, err: any)
---@param ctx any
function M.each_protected(first, last, step, fn, on_error, ctx)
  -- H.at[depth]: where the loop at this depth got to (fn may call
  -- each_protected in turn).
  local depth = H.depth + 1
  local from = first
  while from <= last do
    local ok, err = pcall(H.run, depth, from, last, step, fn, ctx)
    H.depth = depth - 1
    if ok then
      return
    end
    local at = H.at[depth]
    on_error(ctx, at, err)
    from = at + step
  end
end

H.depth, H.at = 0, {}

function H.run(depth, from, last, step, fn, ctx)
  H.depth = depth
  local at = H.at
  for i = from, last, step do
    at[depth] = i
    fn(ctx, i)
  end
end

return M
