#!/usr/bin/env bash
# Run CMD against one real ACP agent, offline, with a fake LLM server.
#
#   tests/agents/run-agent.sh [--out DIR] [--timeout SECONDS] AGENT -- CMD...
#
# AGENT is gemini, claude or codex (the pinned packages in
# tests/agents/package.json; install them first with
#   npm ci --prefix tests/agents --ignore-scripts --no-audit --no-fund).
#
# Everything runs in fresh network + PID namespaces (`unshare -n -p -f`, or
# `unshare -r -n -p -f` when not root): only loopback exists, and every
# process left over (agent, launcher orphans, fake server) dies with the
# namespace. Inside, the script
#   - creates a run dir: home/ (HOME), workspace/, codex-home/ (CODEX_HOME),
#   - writes the agent's config files (see write_agent_config below),
#   - starts fake-llm.mjs on 127.0.0.1 (log: fake-llm.jsonl),
#   - runs CMD in the workspace with a clean environment plus:
#       ACP_AGENT         gemini | claude | codex
#       ACP_AGENT_CMD     JSON array: the agent command line to spawn
#       ACP_AGENT_ENV     JSON object: the variables the agent needs (they are
#                         also exported, so a plain inherited env works too)
#       ACP_WORKSPACE     the workspace directory (use it as the session cwd)
#       ACP_RUN_DIR       directory for transcripts/logs of this run
#       ACP_FAKE_LLM_URL  http://127.0.0.1:PORT
#   - kills CMD's process group after --timeout (default 90 s, env
#     ACP_AGENTS_TIMEOUT) and exits with CMD's status (124 on timeout).
# ACP_AGENTS_NETNS=0 skips the namespaces (not offline; last resort).
# --out DIR keeps the run dir there (DIR must not exist or be empty);
# otherwise a temporary one is used and removed unless the run failed or
# ACP_AGENTS_KEEP=1 (its path is printed on stderr then).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NODE_MODULES=$HERE/node_modules

usage() {
  sed -n '2,4p' "$0" >&2
  exit 2
}

# ------------------------------------------------------------------ inside
if [[ ${1:-} == --inside ]]; then
  shift
  AGENT=$1; shift; shift # AGENT --
  RUN=$ACP_RUN_DIR

  if [[ ${ACP_AGENTS_NETNS:-1} != 0 ]]; then ip link set lo up; fi

  mkdir -p "$RUN/home" "$RUN/workspace" "$RUN/codex-home"
  TTL=$((TIMEOUT + 30))
  node "$HERE/fake-llm.mjs" --port 0 --ttl "$TTL" --log "$RUN/fake-llm.jsonl" \
    --workspace "$RUN/workspace" >"$RUN/fake-llm.port" 2>"$RUN/fake-llm.stderr" &
  FAKE_PID=$!
  PORT=
  for _ in $(seq 1 100); do
    PORT=$(head -n1 "$RUN/fake-llm.port" 2>/dev/null || true)
    [[ -n $PORT ]] && break
    sleep 0.05
  done
  if [[ -z $PORT ]]; then
    echo "run-agent: fake LLM server did not start" >&2
    cat "$RUN/fake-llm.stderr" >&2 || true
    exit 1
  fi
  URL=http://127.0.0.1:$PORT

  mkdir -p "$RUN/tmp"
  # What the agent process needs; complete on its own (PATH included), so a
  # spawner may use it as the whole environment or merge it over its own.
  declare -A AENV=([HOME]=$RUN/home [PATH]=$PATH [LANG]=C.UTF-8 [TMPDIR]=$RUN/tmp)
  case $AGENT in
  gemini)
    mkdir -p "$RUN/home/.gemini"
    cat >"$RUN/home/.gemini/settings.json" <<'EOF'
{
  "general": { "enableAutoUpdate": false, "enableAutoUpdateNotification": false },
  "privacy": { "usageStatisticsEnabled": false },
  "telemetry": { "enabled": false },
  "security": { "folderTrust": { "enabled": false } }
}
EOF
    AENV[GOOGLE_GEMINI_BASE_URL]=$URL
    AENV[GEMINI_API_KEY]=fake-gemini-key
    AENV[GEMINI_CLI_NO_RELAUNCH]=true
    CMD_JSON=$(node -e 'console.log(JSON.stringify(process.argv.slice(1)))' \
      "$NODE_MODULES/.bin/gemini" --acp --model gemini-2.5-flash)
    ;;
  claude)
    AENV[ANTHROPIC_BASE_URL]=$URL
    AENV[ANTHROPIC_API_KEY]=fake-anthropic-key
    AENV[CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC]=1
    # Bash tool scratch dir, else /tmp/claude-<uid>/ (shared between runs).
    AENV[CLAUDE_CODE_TMPDIR]=$RUN/tmp
    # IS_SANDBOX must be unset or "1" (not inherited: the env is clean).
    CMD_JSON=$(node -e 'console.log(JSON.stringify(process.argv.slice(1)))' \
      "$NODE_MODULES/.bin/claude-agent-acp")
    ;;
  codex)
    cat >"$RUN/codex-home/config.toml" <<EOF
model = "gpt-5.4"
model_provider = "fake"
check_for_update_on_startup = false

[model_providers.fake]
name = "fake"
base_url = "$URL/v1"
wire_api = "responses"
env_key = "FAKE_OPENAI_API_KEY"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false
EOF
    AENV[CODEX_HOME]=$RUN/codex-home
    AENV[FAKE_OPENAI_API_KEY]=fake-openai-key
    # Prefer the native binary: the JS launcher runs it with spawnSync, so
    # killing only the launcher's pid would orphan it.
    BIN=
    case $(uname -m) in
    x86_64) BIN=$NODE_MODULES/@zed-industries/codex-acp-linux-x64/bin/codex-acp ;;
    aarch64) BIN=$NODE_MODULES/@zed-industries/codex-acp-linux-arm64/bin/codex-acp ;;
    esac
    [[ -n $BIN && -x $BIN ]] || BIN=$NODE_MODULES/.bin/codex-acp
    CMD_JSON=$(node -e 'console.log(JSON.stringify(process.argv.slice(1)))' "$BIN")
    ;;
  esac

  # Clean environment: nothing from the caller's env reaches the agent except
  # PATH/locale/terminal and the ACP_* knobs of the tests themselves.
  ENVV=(TERM="${TERM:-dumb}" USER="$(id -un)")
  while IFS='=' read -r k _; do
    [[ $k == ACP_* && $k != ACP_RUN_DIR ]] && ENVV+=("$k=${!k}")
  done < <(env)
  ENV_JSON=$(for k in "${!AENV[@]}"; do printf '%s\0%s\0' "$k" "${AENV[$k]}"; done |
    node -e 'const a=require("fs").readFileSync(0,"utf8").split("\0");const o={};
      for(let i=0;i+1<a.length;i+=2)o[a[i]]=a[i+1];console.log(JSON.stringify(o))')
  for k in "${!AENV[@]}"; do ENVV+=("$k=${AENV[$k]}"); done
  ENVV+=(ACP_AGENT="$AGENT" ACP_AGENT_CMD="$CMD_JSON" ACP_AGENT_ENV="$ENV_JSON"
    ACP_WORKSPACE="$RUN/workspace" ACP_RUN_DIR="$RUN" ACP_FAKE_LLM_URL="$URL")

  cd "$RUN/workspace"
  set +e
  # timeout(1) runs CMD in its own process group and signals the group.
  env -i "${ENVV[@]}" timeout --kill-after=5 "$TIMEOUT" "$@"
  STATUS=$?
  set -e
  [[ $STATUS == 124 ]] && echo "run-agent: $AGENT: timeout after ${TIMEOUT}s" >&2
  kill "$FAKE_PID" 2>/dev/null || true
  # Leaving: this shell is PID 1 of the namespace, so the kernel kills
  # whatever is still running in it.
  exit "$STATUS"
fi

# ----------------------------------------------------------------- outside
OUT=
TIMEOUT=${ACP_AGENTS_TIMEOUT:-90}
while [[ $# -gt 0 ]]; do
  case $1 in
  --out) OUT=$2; shift 2 ;;
  --timeout) TIMEOUT=$2; shift 2 ;;
  -h | --help) usage ;;
  *) break ;;
  esac
done
[[ $# -ge 3 && $2 == -- ]] || usage
AGENT=$1
case $AGENT in gemini | claude | codex) ;; *) echo "run-agent: unknown agent '$AGENT'" >&2; exit 2 ;; esac
if [[ ! -d $NODE_MODULES/@zed-industries/codex-acp ]]; then
  echo "run-agent: agents not installed; run: npm ci --prefix tests/agents --ignore-scripts --no-audit --no-fund" >&2
  exit 2
fi

if [[ -n $OUT ]]; then
  mkdir -p "$OUT"
  RUN=$(cd "$OUT" && pwd)
  CLEAN=0
else
  RUN=$(mktemp -d "${TMPDIR:-/tmp}/acp-agent-$AGENT.XXXXXX")
  CLEAN=1
fi

if [[ ${ACP_AGENTS_NETNS:-1} == 0 ]]; then
  # Escape hatch for environments without namespaces: NOT offline (Claude
  # Code looks up raw.githubusercontent.com) and leftovers are not reaped.
  echo "run-agent: ACP_AGENTS_NETNS=0: running without network/PID namespaces" >&2
  NS=(setsid -w)
elif [[ $(id -u) == 0 ]]; then
  NS=(unshare -n -p -f --kill-child)
else
  NS=(unshare -r -n -p -f --kill-child)
fi
set +e
ACP_RUN_DIR=$RUN TIMEOUT=$TIMEOUT "${NS[@]}" "$0" --inside "$@"
STATUS=$?
set -e
if [[ $CLEAN == 1 ]]; then
  if [[ $STATUS != 0 || ${ACP_AGENTS_KEEP:-0} == 1 ]]; then
    echo "run-agent: $AGENT: exit $STATUS, run dir kept: $RUN" >&2
  else
    rm -rf "$RUN"
  fi
fi
exit "$STATUS"
