#!/usr/bin/env bash
# Real agents driven through Neovim, the Lua API and the broker:
# gemini, claude and codex × allow, reject, cancel (see nvim-drive.lua).
# Usage: tests/agents/run-nvim-matrix.sh [NVIM] — prints TAP lines.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
NVIM=${1:-nvim}
# run-agent.sh changes directory: make the Neovim path absolute.
case $NVIM in */*) NVIM=$(cd "$(dirname "$NVIM")" && pwd)/$(basename "$NVIM") ;; esac
BROKER=${ACP_BROKER_BIN:-$ROOT/build/acp-broker}
n=0 failed=0
run() { # agent policy expected-stop expected-files
  n=$((n + 1))
  local out
  out=$(ACP_POLICY=$2 ACP_EXPECT_STOP=$3 ACP_EXPECT_FILES=$4 \
    "$HERE/run-agent.sh" --timeout 90 "$1" -- env -u VIMRUNTIME \
    ACP_BROKER_BIN="$BROKER" "$NVIM" --headless --clean \
    --cmd "set rtp^=$ROOT" -c 'runtime plugin/acp.lua' \
    -c "luafile $HERE/nvim-drive.lua" 2>&1)
  if [[ $? == 0 ]]; then
    echo "ok $n - $1 $2: stopReason $3, files $4"
  else
    failed=$((failed + 1))
    echo "not ok $n - $1 $2: expected stopReason $3, files $4"
    printf '%s\n' "$out" | tail -5 | sed 's/^/#   /'
  fi
}
for agent in gemini claude codex; do
  run "$agent" allow end_turn yes
  run "$agent" cancel cancelled no
  run "$agent" rules end_turn yes
done
run gemini reject end_turn no
run claude reject end_turn no
run codex reject cancelled no
run gemini deny end_turn no
run claude deny end_turn no
run codex deny cancelled no
echo "1..$n"
exit $((failed > 0))
