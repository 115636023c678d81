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
run() { # agent policy expected-stop expected-files [VAR=value...]
  # ACP_MATRIX_FILTER=substring runs only the matching cases.
  [[ -z ${ACP_MATRIX_FILTER:-} || "$1 $2 ${*:5}" == *"$ACP_MATRIX_FILTER"* ]] || return 0
  n=$((n + 1))
  local out
  out=$(env ACP_POLICY="$2" ACP_EXPECT_STOP="$3" ACP_EXPECT_FILES="$4" "${@:5}" \
    "$HERE/run-agent.sh" --timeout 90 "$1" -- env -u VIMRUNTIME \
    ACP_BROKER_BIN="$BROKER" "$NVIM" --headless --clean \
    --cmd "set rtp^=$ROOT" -c 'runtime plugin/acp.lua' \
    -c "luafile $HERE/nvim-drive.lua" 2>&1)
  if [[ $? == 0 ]]; then
    echo "ok $n - $1 $2${5:+ ${*:5}}: stopReason $3, files $4"
  else
    failed=$((failed + 1))
    echo "not ok $n - $1 $2${5:+ ${*:5}}: expected stopReason $3, files $4"
    printf '%s\n' "$out" | tail -5 | sed 's/^/#   /'
  fi
}
for agent in gemini claude codex; do
  run "$agent" allow end_turn yes
  run "$agent" cancel cancelled no
  run "$agent" rules end_turn yes
done
# The turn ledger: review() lists the file the agent created (Claude
# writes it itself, Gemini through fs/*) and revert() empties it.
run claude allow end_turn yes ACP_EXPECT_REVIEW=1
run gemini allow end_turn yes ACP_EXPECT_REVIEW=1
# A rule allows Claude's Write and a Bash `sed -i` of the file it wrote;
# both act before Neovim hears of them: the broker's snapshot (doc/acp.txt,
# acp-review) keeps the file new in the review, with the sed's change.
run claude rules end_turn yes ACP_EXPECT_REVIEW=1 \
  "ACP_FAKE_SHELL=sed -i s/hello/HELLO/ test.txt && touch shell-ran.txt" \
  "ACP_EXPECT_TEXT=HELLO from the fake LLM"
run gemini reject end_turn no
run claude reject end_turn no
run codex reject cancelled no
run gemini deny end_turn no
run claude deny end_turn no
run codex deny cancelled no
# The asking posture (doc/acp.txt, acp-posture): each project brings its
# agent's own permissive settings. Untrusted, the person is asked for the
# write and the command (reject: no file); trusted (acp-broker trust), the
# broker's rules answer both, by "rule".
P=(ACP_EXPECT_POSTURE=asking)
run claude allow end_turn yes ACP_PROJECT=claude-allow ACP_EXPECT_ASKED=2 "${P[@]}"
run claude reject end_turn no ACP_PROJECT=claude-allow "${P[@]}"
run claude allow end_turn yes ACP_PROJECT=claude-mode ACP_EXPECT_ASKED=2 "${P[@]}"
run claude allow end_turn yes ACP_PROJECT=claude-local ACP_EXPECT_ASKED=2 "${P[@]}"
run claude trusted end_turn yes ACP_PROJECT=claude-allow "${P[@]}"
run gemini allow end_turn yes ACP_PROJECT=gemini-allow ACP_EXPECT_ASKED=2 "${P[@]}"
run gemini reject end_turn no ACP_PROJECT=gemini-allow "${P[@]}"
run gemini allow end_turn yes ACP_PROJECT=gemini-mode ACP_EXPECT_ASKED=2 "${P[@]}"
run gemini trusted end_turn yes ACP_PROJECT=gemini-allow "${P[@]}"
run codex allow end_turn yes ACP_PROJECT=codex-config ACP_EXPECT_ASKED=2 "${P[@]}"
run codex reject cancelled no ACP_PROJECT=codex-config "${P[@]}"
run codex trusted end_turn yes ACP_PROJECT=codex-config "${P[@]}"
# The posture switched off (a test-only switch): the agent acts on the
# project's settings without asking, and the broker must notice (audit
# outcome "unasked").
# Gemini writes through fs/write_text_file: that write, never asked by the
# agent, is asked by the broker itself (one prompt); its command is not.
U=(ACP_BROKER_TEST_NO_POSTURE=1 ACP_EXPECT_POSTURE=unverified ACP_EXPECT_UNASKED=1)
run claude allow end_turn yes ACP_PROJECT=claude-allow ACP_EXPECT_ASKED=0 "${U[@]}"
run gemini allow end_turn yes ACP_PROJECT=gemini-allow ACP_EXPECT_ASKED=1 "${U[@]}"
run codex allow end_turn edit ACP_PROJECT=codex-config ACP_EXPECT_ASKED=0 "${U[@]}"
# Context into prompts: the lines of :2,3AcpPrompt reach the model.
run claude allow end_turn yes ACP_CONTEXT=selection
run gemini allow end_turn yes ACP_CONTEXT=selection
run codex allow end_turn yes ACP_CONTEXT=selection
echo "1..$n"
exit $((failed > 0))
