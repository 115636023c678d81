#!/bin/sh
# tests/e2e/run_one.sh NVIM TESTFILE
#
# Runs one end-to-end test file in its own headless Neovim, with a fresh
# temporary HOME and XDG dirs, and prints its TAP lines ("ok - name" /
# "not ok - name" plus "#" diagnostics) on stdout. Exits 0 when every test
# passed, 1 otherwise.
#
# Environment:
#   ACP_BROKER_BIN, ACP_DEMO_AGENT_BIN  default build/acp-broker, build/acp-demo-agent
#   ACP_TEST_TIMEOUT                    seconds for the whole file (default 120)
#   ACP_E2E_SANITIZER_LOGS=1            collect ASan/UBSan reports of the broker and
#                                       the demo agent; any report fails the file
#   ACP_E2E_KEEP=1                      keep the temporary directory
#
# After Neovim exits, everything the client sent in the demo agent's
# transcripts under the file's temporary directory is validated against the
# ACP schema (tests/schema/validate.py): "ok - schema: FILE" or
# "not ok - schema: FILE" with the reasons.
#
# After Neovim exits, every process started for this file (found by a marker
# in its environment) must be gone within a few seconds: a leftover broker or
# agent fails the file, and is then killed.
set -u

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)

if [ $# -ne 2 ]; then
	echo "usage: $0 NVIM TESTFILE" >&2
	exit 2
fi
NVIM=$1
FILE=$2

abspath() {
	case $1 in
	/*) printf '%s\n' "$1" ;;
	*) printf '%s/%s\n' "$(cd "$(dirname "$1")" && pwd)" "$(basename "$1")" ;;
	esac
}

[ -f "$FILE" ] || {
	echo "not ok - $FILE: no such test file"
	exit 1
}
FILE=$(abspath "$FILE")
NAME=$(basename "$FILE")
case $NVIM in
*/*) NVIM=$(abspath "$NVIM") ;;
esac
BROKER=$(abspath "${ACP_BROKER_BIN:-$ROOT/build/acp-broker}")
DEMO=$(abspath "${ACP_DEMO_AGENT_BIN:-$ROOT/build/acp-demo-agent}")
TIMEOUT=${ACP_TEST_TIMEOUT:-120}

T=$(mktemp -d "${TMPDIR:-/tmp}/acp-e2e.XXXXXX") || exit 1
mkdir -p "$T/home" "$T/config" "$T/state" "$T/data" "$T/cache" "$T/tmp"
: >"$T/results"

SAN=
if [ "${ACP_E2E_SANITIZER_LOGS:-}" = 1 ]; then
	SAN=1
	ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}log_path=$T/asan"
	UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}log_path=$T/ubsan"
	export ASAN_OPTIONS UBSAN_OPTIONS
fi

# The Lua string literal below is a long bracket; a path with "]]" would end it.
case $FILE in *']]'*)
	echo "not ok - $NAME: unsupported characters in the path"
	exit 1
	;;
esac

(cd "$T" && exec env -u VIMRUNTIME -u NVIM -u NVIM_LISTEN_ADDRESS -u NVIM_LOG_FILE \
	-u MYVIMRC -u VIMINIT -u NVIM_APPNAME \
	HOME="$T/home" XDG_CONFIG_HOME="$T/config" XDG_STATE_HOME="$T/state" \
	XDG_DATA_HOME="$T/data" XDG_CACHE_HOME="$T/cache" TMPDIR="$T/tmp" \
	ACP_BROKER_BIN="$BROKER" ACP_DEMO_AGENT_BIN="$DEMO" \
	ACP_TEST_OUT="$T/results" ACP_SCENARIOS="$ROOT/tests/scenarios" \
	ACP_E2E_ROOT="$ROOT" ACP_E2E_RUN="$T" \
	timeout -k 5 "$TIMEOUT" "$NVIM" --headless --clean \
	-u "$ROOT/tests/e2e/minimal_init.lua" \
	-c "lua require('helpers').run_file([[$FILE]])" \
	</dev/null >"$T/nvim.out" 2>&1)
rc=$?

# Processes started for this file carry ACP_E2E_RUN=$T in their environment.
leftovers() {
	for p in /proc/[0-9]*; do
		grep -qzx "ACP_E2E_RUN=$T" "$p/environ" 2>/dev/null || continue
		pid=${p#/proc/}
		state=$(sed 's/.*) \(.\).*/\1/' "$p/stat" 2>/dev/null) || continue
		[ "$state" = Z ] || [ -z "$state" ] || printf '%s ' "$pid"
	done
}
left=$(leftovers)
i=0
while [ -n "$left" ] && [ $i -lt 30 ]; do
	sleep 0.1 # polling a condition: the processes exiting
	i=$((i + 1))
	left=$(leftovers)
done

# Everything the client sent in every demo-agent transcript of this file must
# be valid against the ACP schema (tests/schema/validate.py; exit 77 = no
# python3-jsonschema, which only skips).
if command -v python3 >/dev/null 2>&1; then
	python3 "$ROOT/tests/schema/validate.py" -q "$T" >"$T/schema.out" 2>&1
	src=$?
else
	echo "# python3 not found" >"$T/schema.out"
	src=77
fi
case $src in
0) echo "ok - schema: $NAME ($(sed -n 's/^# schema: \([0-9]* client messages in [0-9]* transcripts\).*/\1/p' "$T/schema.out"))" >>"$T/results" ;;
77) echo "# schema: $NAME: not validated (no python3-jsonschema >= 4; make deps)" >>"$T/results" ;;
*)
	echo "not ok - schema: $NAME" >>"$T/results"
	sed 's/^/#   /' "$T/schema.out" | head -n 80 >>"$T/results"
	;;
esac

grep -v -x '# acp-e2e: done' "$T/results"
bad=0
grep -q '^not ok' "$T/results" && bad=1
case $rc in
0) ;;
124 | 137)
	echo "not ok - $NAME: timed out after $TIMEOUT s"
	bad=1
	;;
*)
	if [ "$rc" -gt 128 ]; then
		echo "not ok - $NAME: nvim killed by signal $((rc - 128))"
	else
		[ $bad = 1 ] || echo "not ok - $NAME: exited $rc"
	fi
	bad=1
	;;
esac
if [ "$rc" != 124 ] && [ "$rc" != 137 ] && ! grep -qx '# acp-e2e: done' "$T/results"; then
	echo "not ok - $NAME: did not finish (nvim exited $rc before T.done())"
	bad=1
fi
if [ -n "$left" ]; then
	echo "not ok - $NAME: processes left running 3 s after nvim exited"
	for pid in $left; do
		echo "#   $pid $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)"
	done
	# shellcheck disable=SC2086
	kill -9 $left 2>/dev/null
	bad=1
fi
if [ -n "$SAN" ]; then
	for f in "$T"/asan.* "$T"/ubsan.*; do
		[ -f "$f" ] || continue
		echo "not ok - $NAME: sanitizer report ${f##*/}"
		sed 's/^/#   /' "$f" | head -n 60
		bad=1
	done
fi

if [ $bad = 1 ]; then
	if [ -s "$T/nvim.out" ]; then
		echo "# nvim output (tail):"
		tail -n 30 "$T/nvim.out" | awk '{ print "#   " $0 }'
	fi
	log="$T/state/acp-broker/broker.log"
	if [ -s "$log" ]; then
		echo "# broker log (tail of $log):"
		tail -n 40 "$log" | awk '{ print "#   " $0 }'
	fi
fi

if [ "${ACP_E2E_KEEP:-}" = 1 ]; then
	echo "# kept $T"
else
	rm -rf "$T"
fi
exit $bad
