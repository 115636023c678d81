#!/bin/sh
# tests/oracle/run.sh [corpus | SECONDS [SEED]] — the bash oracle
# (tests/oracle/README.md).
#
#   tests/oracle/run.sh              the fixed-seed suite of `make test`: the
#                                    seed list, the commands of the
#                                    adversarial cases and 200 generated
#                                    commands (seed 1); known gaps
#                                    (known-gaps.txt) are "ok # TODO known gap"
#   tests/oracle/run.sh corpus [FILE.jsonl...]
#                                    the shell commands of the policy fixtures
#                                    (default tests/fixtures/policy*.jsonl),
#                                    known gaps as above (slow: npm, make, ...)
#   tests/oracle/run.sh SECONDS SEED generated commands for SECONDS (seed SEED,
#                                    default: the time), known gaps reported
#
# TAP on stdout, a summary line "# oracle: ..." at the end; the exit status is
# 1 when bash did something the analyser's atoms do not represent. Needs root.
# Environment: ORACLE_ATOMS (the oracle-atoms binary, default
# $BUILD/oracle-atoms; point it at another checkout's build to check that
# analyser), BUILD (default build), ORACLE_JOBS (commands run at once,
# default 2), ORACLE_FLAGS (more oracle.py options, e.g. -v).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
ATOMS=${ORACLE_ATOMS:-$BUILD/oracle-atoms}
PY=$(command -v python3) || { echo "not ok 1 - python3 not found"; exit 1; }

if [ $# -eq 0 ]; then
	# shellcheck disable=SC2086
	exec "$PY" "$HERE/oracle.py" --atoms "$ATOMS" \
		--seeds "$HERE/seeds.txt" \
		--jsonl "$ROOT/tests/fixtures/policy-adversarial.jsonl" \
		--generate 200 --seed 1 --jobs "${ORACLE_JOBS:-2}" ${ORACLE_FLAGS:-}
fi
if [ "$1" = corpus ]; then
	shift
	[ $# -gt 0 ] || set -- "$ROOT"/tests/fixtures/policy*.jsonl
	for f in "$@"; do
		set -- "$@" --jsonl "$f"
		shift
	done
	# shellcheck disable=SC2086
	exec "$PY" "$HERE/oracle.py" --atoms "$ATOMS" "$@" \
		--jobs "${ORACLE_JOBS:-2}" ${ORACLE_FLAGS:-}
fi
case $1 in '' | *[!0-9]*)
	sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
	;;
esac
# shellcheck disable=SC2086
exec "$PY" "$HERE/oracle.py" --atoms "$ATOMS" --no-known-gaps --quiet \
	--seconds "$1" --seed "${2:-$(date +%s)}" --jobs "${ORACLE_JOBS:-2}" \
	${ORACLE_FLAGS:-}
