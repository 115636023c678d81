#!/bin/sh
# tests/run.sh MODE ... — runs test suites and adds up their TAP lines.
#
#   tests/run.sh unit BIN...                 C unit-test binaries
#   tests/run.sh e2e NVIM BROKER DEMO        every tests/e2e/test_*.lua on that nvim
#   tests/run.sh screen NVIM BROKER DEMO     the prompt in a real terminal (tmux;
#                                            tests/screen/; skipped without tmux)
#   tests/run.sh valgrind BIN...             unit binaries under valgrind
#   tests/run.sh conformance BROKER         tests/fixtures/policy*.jsonl through `decide`
#   tests/run.sh oracle BUILD                the bash oracle's fixed-seed suite
#                                            (tests/oracle/; needs root)
#   tests/run.sh schema                      the ACP schema validator's own tests
#                                            (every e2e file also validates what
#                                            the broker sent: tests/schema/)
#   tests/run.sh asan BUILD                  BUILD/asan/tests/* and e2e (nvim 0.7.2)
#                                            with BUILD/asan/acp-broker + acp-demo-agent
#   tests/run.sh all BUILD                   BUILD/tests/*, schema, layers, conformance,
#                                            the oracle, e2e on `nvim` (0.7.2), on
#                                            BUILD/nvim-0.10/usr/bin/nvim and on
#                                            BUILD/nvim-0.12/usr/bin/nvim, the screen
#                                            checks on all three, then asan
#
# Each suite's lines are printed prefixed with its name, e.g.
# "[e2e nvim-0.7.2] ok - allow writes the file". Lines starting "ok" count as
# passed and "not ok" as failed; a binary or test file that exits non-zero
# without a "not ok" line, crashes or times out counts as one failure. Every
# suite runs even when an earlier one fails. The last line is
# "N passed, N failed"; the exit status is 1 when anything failed.
#
# Environment: ACP_TEST_TIMEOUT (seconds per binary or e2e file, default 120),
# ACP_E2E_FILTER (a substring of the e2e file names to run, for debugging).
set -u

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
TIMEOUT=${ACP_TEST_TIMEOUT:-120}
PASSED=0
FAILED=0

WORK=$(mktemp -d "${TMPDIR:-/tmp}/acp-run.XXXXXX") || exit 1
trap 'rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM HUP

usage() {
	sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

abspath() {
	case $1 in
	/*) printf '%s\n' "$1" ;;
	*) printf '%s/%s\n' "$(cd "$(dirname "$1")" 2>/dev/null && pwd)" "$(basename "$1")" ;;
	esac
}

# fail SUITE MESSAGE: one synthesized failure.
fail() {
	echo "[$1] not ok - $2"
	FAILED=$((FAILED + 1))
}

# tally SUITE OUTFILE RC LABEL [VALGRIND]: print OUTFILE prefixed, count its
# TAP lines, and turn a bad exit into a failure of its own.
tally() {
	suite=$1 out=$2 rc=$3 label=$4 vg=${5:-}
	sed "s/^/[$suite] /" "$out"
	ok=$(grep -c -E '^ok($|[[:space:]])' "$out")
	nok=$(grep -c -E '^not ok($|[[:space:]])' "$out")
	PASSED=$((PASSED + ok))
	FAILED=$((FAILED + nok))
	if [ -n "$vg" ] && [ "$rc" = 99 ]; then
		fail "$suite" "$label: valgrind reported errors"
	elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
		fail "$suite" "$label: timed out after $TIMEOUT s"
	elif [ "$rc" -gt 128 ]; then
		fail "$suite" "$label: killed by signal $((rc - 128))"
	elif [ "$rc" != 0 ] && [ "$nok" = 0 ]; then
		fail "$suite" "$label: exited $rc"
	elif [ "$rc" = 0 ] && [ "$ok" = 0 ] && [ "$nok" = 0 ]; then
		fail "$suite" "$label: no TAP output"
	fi
}

# run_bin SUITE-PREFIX BIN [WRAPPER...]: one unit-test binary.
run_bin() {
	prefix=$1 bin=$2
	shift 2
	name=$(basename "$bin")
	case $name in *.d | *.o) return ;; esac # compiler by-products of a glob
	if [ ! -x "$bin" ]; then
		fail "$prefix $name" "$bin: not found or not executable"
		return
	fi
	bin=$(abspath "$bin")
	timeout -k 5 "$TIMEOUT" "$@" "$bin" </dev/null >"$WORK/out" 2>&1
	rc=$?
	vg=
	[ "${1:-}" = valgrind ] && vg=1
	tally "$prefix $name" "$WORK/out" "$rc" "$name" $vg
}

suite_unit() {
	prefix=$1
	shift
	if [ $# -eq 0 ] || { [ $# -eq 1 ] && [ ! -e "$1" ]; }; then
		fail "$prefix" "no unit-test binaries${1:+ (looked for $1)}"
		return
	fi
	for bin in "$@"; do
		run_bin "$prefix" "$bin"
	done
}

suite_valgrind() {
	if ! command -v valgrind >/dev/null 2>&1; then
		fail valgrind "valgrind not found (apt-get install valgrind)"
		return
	fi
	[ $# -gt 0 ] || {
		fail valgrind "no unit-test binaries"
		return
	}
	for bin in "$@"; do
		run_bin valgrind "$bin" valgrind -q --leak-check=full \
			--errors-for-leak-kinds=definite,indirect --error-exitcode=99
	done
}

nvim_version() {
	env -u VIMRUNTIME "$1" --version 2>/dev/null | head -n 1 | sed -n 's/^NVIM v\([0-9][0-9.]*\).*/\1/p'
}

# suite_e2e PREFIX NVIM BROKER DEMO
suite_e2e() {
	prefix=$1 nvim=$2 broker=$3 demo=$4
	ver=$(nvim_version "$nvim")
	if [ -z "$ver" ]; then
		fail "$prefix" "Neovim '$nvim' not found or does not run"
		return
	fi
	suite="$prefix nvim-$ver"
	for b in "$broker" "$demo"; do
		if [ ! -x "$b" ]; then
			fail "$suite" "$b: not found or not executable"
			return
		fi
	done
	found=
	for f in "$ROOT"/tests/e2e/test_*.lua; do
		[ -f "$f" ] || continue
		case $(basename "$f") in *"${ACP_E2E_FILTER:-}"*) ;; *) continue ;; esac
		found=1
		echo "[$suite] # tests/e2e/$(basename "$f")"
		# run_one.sh has its own timeout around nvim; this one is a backstop.
		ACP_BROKER_BIN=$(abspath "$broker") ACP_DEMO_AGENT_BIN=$(abspath "$demo") \
			timeout -k 5 $((TIMEOUT + 30)) "$ROOT/tests/e2e/run_one.sh" "$nvim" "$f" \
			</dev/null >"$WORK/out" 2>&1
		rc=$?
		tally "$suite" "$WORK/out" "$rc" "tests/e2e/$(basename "$f")"
	done
	[ -n "$found" ] || fail "$suite" "no tests/e2e/test_*.lua files"
}

# suite_screen NVIM BROKER DEMO: tests/screen/screen.py (tmux; one SKIP line
# without it).
suite_screen() {
	nvim=$1 broker=$2 demo=$3
	ver=$(nvim_version "$nvim")
	if [ -z "$ver" ]; then
		fail screen "Neovim '$nvim' not found or does not run"
		return
	fi
	timeout -k 5 $((TIMEOUT * 2)) python3 "$ROOT/tests/screen/screen.py" "$nvim" \
		"$(abspath "$broker")" "$(abspath "$demo")" </dev/null >"$WORK/out" 2>&1
	tally "screen nvim-$ver" "$WORK/out" "$?" "tests/screen/screen.py"
}

# The executables in DIR (the compiler's .d files live there too), or the
# unmatched pattern, which suite_unit reports.
bins_in() {
	n=0
	for f in "$1"/*; do
		if [ -f "$f" ] && [ -x "$f" ]; then
			printf '%s\n' "$f"
			n=$((n + 1))
		fi
	done
	[ $n -gt 0 ] || printf '%s\n' "$1/*"
}

# suite_conformance PREFIX BROKER: every case of tests/fixtures/policy.jsonl
# through `acp-broker decide` (tests/conformance.py).
# Then tests/fixtures/policy-extra.jsonl: more cases of the same semantics,
# written from the specification by someone who had not read the code; and
# policy-failclosed.jsonl: settings files that cannot be used.
suite_conformance() {
	prefix=$1 broker=$(abspath "$2")
	for fixture in policy policy-extra policy-failclosed policy-adversarial; do
		timeout -k 5 900 python3 "$ROOT/tests/conformance.py" "$broker" \
			"$ROOT/tests/fixtures/$fixture.jsonl" </dev/null >"$WORK/out" 2>&1
		tally "$prefix $fixture" "$WORK/out" "$?" "$fixture.jsonl"
	done
}

# suite_oracle BUILD: real bash against the analyser's atoms (tests/oracle/).
suite_oracle() {
	BUILD=$(abspath "$1") timeout -k 5 600 "$ROOT/tests/oracle/run.sh" \
		</dev/null >"$WORK/out" 2>&1
	tally oracle "$WORK/out" "$?" "tests/oracle/run.sh"
}

suite_asan() {
	build=$1
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
	export ASAN_OPTIONS UBSAN_OPTIONS
	# shellcheck disable=SC2046
	suite_unit asan $(bins_in "$build/asan/tests")
	suite_conformance "asan conformance" "$build/asan/acp-broker"
	ACP_E2E_SANITIZER_LOGS=1
	export ACP_E2E_SANITIZER_LOGS
	suite_e2e "asan e2e" nvim "$build/asan/acp-broker" "$build/asan/acp-demo-agent"
	unset ACP_E2E_SANITIZER_LOGS
}

[ $# -ge 1 ] || usage
mode=$1
shift
case $mode in
unit)
	suite_unit unit "$@"
	;;
valgrind)
	suite_valgrind "$@"
	;;
conformance)
	[ $# -eq 1 ] || usage
	suite_conformance conformance "$1"
	;;
schema)
	suite_unit schema "$ROOT/tests/schema/test_validate.sh"
	;;
oracle)
	[ $# -eq 1 ] || usage
	suite_oracle "$1"
	;;
e2e)
	[ $# -eq 3 ] || usage
	suite_e2e e2e "$1" "$2" "$3"
	;;
screen)
	[ $# -eq 3 ] || usage
	suite_screen "$1" "$2" "$3"
	;;
asan)
	[ $# -eq 1 ] || usage
	suite_asan "$1"
	;;
all)
	[ $# -eq 1 ] || usage
	build=$1
	# shellcheck disable=SC2046
	suite_unit unit $(bins_in "$build/tests")
	suite_unit schema "$ROOT/tests/schema/test_validate.sh"
	suite_unit layers "$ROOT/tests/layers.sh" "$ROOT/tests/layers-self-test.sh"
	suite_conformance conformance "$build/acp-broker"
	suite_oracle "$build"
	suite_e2e e2e nvim "$build/acp-broker" "$build/acp-demo-agent"
	suite_e2e e2e "$build/nvim-0.10/usr/bin/nvim" "$build/acp-broker" "$build/acp-demo-agent"
	suite_e2e e2e "$build/nvim-0.12/usr/bin/nvim" "$build/acp-broker" "$build/acp-demo-agent"
	suite_screen nvim "$build/acp-broker" "$build/acp-demo-agent"
	suite_screen "$build/nvim-0.10/usr/bin/nvim" "$build/acp-broker" "$build/acp-demo-agent"
	suite_screen "$build/nvim-0.12/usr/bin/nvim" "$build/acp-broker" "$build/acp-demo-agent"
	suite_asan "$build"
	;;
*)
	usage
	;;
esac

echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
