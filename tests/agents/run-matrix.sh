#!/usr/bin/env bash
# Offline matrix: each real agent x {allow, reject, cancel} driven by
# acp-drive.mjs (raw JSON-RPC, no Neovim) against fake-llm.mjs.
#
#   tests/agents/run-matrix.sh [--agents "gemini claude codex"]
#                              [--policies "allow reject cancel"] [--no-fs]
#                              [--out DIR] [-j N]
#
# Adds one Gemini run with the client fs capability advertised (the only real
# agent here that calls fs/read_text_file + fs/write_text_file) unless --no-fs.
# -j N runs N agent runs at a time (default 1). Exit 0 when every run met its
# expectations; a table of results is printed at the end.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
AGENTS="gemini claude codex"
POLICIES="allow reject cancel"
FS=1
OUT=
JOBS=1
while [[ $# -gt 0 ]]; do
  case $1 in
  --agents) AGENTS=$2; shift 2 ;;
  --policies) POLICIES=$2; shift 2 ;;
  --no-fs) FS=0; shift ;;
  --out) OUT=$2; shift 2 ;;
  -j) JOBS=$2; shift 2 ;;
  *) sed -n '2,12p' "$0" >&2; exit 2 ;;
  esac
done
if [[ -z $OUT ]]; then
  OUT=$(mktemp -d "${TMPDIR:-/tmp}/acp-agents-matrix.XXXXXX")
  CLEAN=1
else
  mkdir -p "$OUT"
  OUT=$(cd "$OUT" && pwd)
  CLEAN=0
fi

# expectations AGENT POLICY -> acp-drive flags, in the array EXP
expect() {
  local agent=$1 policy=$2
  case $policy in
  allow | fs-allow)
    EXP=(--expect-stop end_turn --expect-files "test.txt shell-ran.txt" --expect-permissions 2 --expect-text '^All done\.$')
    if [[ $policy == fs-allow ]]; then EXP+=(--expect-fs-calls); fi
    ;;
  reject)
    if [[ $agent == codex ]]; then
      # codex ends the turn at once on reject_once (abort)
      EXP=(--expect-stop cancelled --expect-no-files "test.txt shell-ran.txt" --expect-permissions 1)
    else
      # the rejection goes back to the model, which answers "Stopped: ..."
      EXP=(--expect-stop end_turn --expect-no-files "test.txt shell-ran.txt" --expect-permissions 1 --expect-text '^Stopped: ')
    fi
    ;;
  cancel)
    EXP=(--expect-stop cancelled --expect-no-files "test.txt shell-ran.txt" --expect-permissions 1)
    ;;
  esac
}

RUNS=()
for a in $AGENTS; do
  for p in $POLICIES; do RUNS+=("$a:$p"); done
  if [[ $a == gemini && $FS == 1 ]]; then RUNS+=("gemini:fs-allow"); fi
done

one() {
  local agent=${1%%:*} policy=${1#*:}
  local dir=$OUT/$agent-$policy
  local drive_policy=$policy extra=()
  if [[ $policy == fs-allow ]]; then drive_policy=allow; extra=(--fs); fi
  local start end st
  start=$(date +%s%N)
  local EXP=()
  expect "$agent" "$policy"
  set +e
  "$HERE/run-agent.sh" --out "$dir" "$agent" -- \
    node "$HERE/acp-drive.mjs" --policy "$drive_policy" "${extra[@]}" "${EXP[@]}" >"$dir.out" 2>"$dir.err"
  st=$?
  set -e
  end=$(date +%s%N)
  echo "$st $(((end - start) / 1000000))" >"$dir.status"
}

START=$(date +%s%N)
running=0
for r in "${RUNS[@]}"; do
  one "$r" &
  running=$((running + 1))
  if ((running >= JOBS)); then wait -n || true; running=$((running - 1)); fi
done
wait || true
TOTAL=$((($(date +%s%N) - START) / 1000000))

FAILED=0
printf '%-8s %-9s %-6s %-10s %-5s %-28s %8s  %s\n' agent policy result stopReason perms files wall_ms problems
for r in "${RUNS[@]}"; do
  agent=${r%%:*} policy=${r#*:}
  dir=$OUT/$agent-$policy
  read -r st wall <"$dir.status"
  line=$(tail -n1 "$dir.out" 2>/dev/null || true)
  [[ $st == 0 ]] || FAILED=1
  # shellcheck disable=SC2016 # JavaScript, not shell
  node -e '
    const [st, wall, agent, policy, line] = process.argv.slice(1);
    let s = {};
    try { s = JSON.parse(line); } catch {}
    const files = Object.entries(s.files || {}).filter(([, v]) => v !== null).map(([k]) => k).join(",") || "-";
    const pr = (s.problems || (st === "0" ? [] : [`exit ${st}`])).join("; ");
    console.log([agent.padEnd(8), policy.padEnd(9), (st === "0" ? "ok" : "FAIL").padEnd(6),
      String(s.stopReason).padEnd(10), String((s.permissions || []).length).padEnd(5),
      files.padEnd(28), wall.padStart(8), " " + pr].join(" "));
  ' "$st" "$wall" "$agent" "$policy" "$line"
  if [[ $st != 0 ]]; then
    echo "--- $agent-$policy stderr:" >&2
    tail -n 20 "$dir.err" >&2 || true
  fi
done
if [[ $FAILED == 0 && $CLEAN == 1 ]]; then
  rm -rf "$OUT"
  echo "matrix: ${#RUNS[@]} runs in ${TOTAL} ms"
else
  echo "matrix: ${#RUNS[@]} runs in ${TOTAL} ms (artifacts: $OUT)"
fi
exit "$FAILED"
