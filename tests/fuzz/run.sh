#!/bin/sh
# Builds and runs the libFuzzer targets (tests/fuzz/fuzz_<name>.c).
#
#   tests/fuzz/run.sh [SECONDS] [TARGET...]
#
# Each target runs for SECONDS (default 10), one after the other, on a copy
# of its seed corpus (tests/fuzz/corpus/<name>/ is never written; new inputs
# go to $BUILD/fuzz/corpus-<name>/). One line per target:
#
#   fuzz <name>: <execs> execs in <s> s, <cov> cov, ok|FAILED
#
# and the exit status is non-zero when any target crashed, leaked, hung or
# failed a property (the reproducer's path is printed, the full log is in
# $BUILD/fuzz/log-<name>.txt). Before fuzzing, each target runs the inputs
# tests/fuzz/regressions/<name>-* once; any failure there fails the target.
#
# Environment: BUILD (default build), FUZZ_CC (default clang), PKG_CONFIG,
# FUZZ_RUNS (adds -runs=N: stop after N executions or SECONDS, whichever
# comes first), FUZZ_FLAGS (more libFuzzer flags, e.g. -use_value_profile=1),
# FUZZ_NICE (default "nice -n 19"; empty to run at normal priority).
# Reproduce a finding: $BUILD/fuzz/fuzz_<name> <file>.

set -u

cd "$(dirname "$0")/../.." || exit 2

secs=10
if [ $# -gt 0 ]; then
  secs=$1
  shift
fi
case $secs in
'' | *[!0-9]*)
  echo "usage: tests/fuzz/run.sh [SECONDS] [TARGET...]" >&2
  exit 2
  ;;
esac

BUILD=${BUILD:-build}
OUT=$BUILD/fuzz
CC=${FUZZ_CC:-clang}
PKG_CONFIG=${PKG_CONFIG:-pkg-config}
NICE=${FUZZ_NICE-nice -n 19}

if [ $# -eq 0 ]; then
  set --
  for f in tests/fuzz/fuzz_*.c; do
    n=${f#tests/fuzz/fuzz_}
    set -- "$@" "${n%.c}"
  done
fi
for t in "$@"; do
  if [ ! -f "tests/fuzz/fuzz_$t.c" ]; then
    echo "fuzz: no target $t (tests/fuzz/fuzz_$t.c)" >&2
    exit 2
  fi
done

if ! command -v "$CC" >/dev/null 2>&1; then
  echo "fuzz: $CC not found (make deps installs clang and libclang-rt-14-dev)" >&2
  exit 2
fi

# msgpack-c 6.x names its pkg-config module msgpack-c; 4.x (Debian 12) msgpack.
msgpack=msgpack
if $PKG_CONFIG --exists msgpack-c 2>/dev/null; then
  msgpack="msgpack-c"
fi
if ! PKG_CFLAGS=$($PKG_CONFIG --cflags libuv jansson $msgpack) ||
  ! PKG_LIBS=$($PKG_CONFIG --libs libuv jansson $msgpack); then
  echo "fuzz: missing build dependencies (make deps)" >&2
  exit 2
fi

SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
CFLAGS="-g -O1 -fno-omit-frame-pointer -std=c11 -D_POSIX_C_SOURCE=200809L \
-D_DEFAULT_SOURCE -Isrc -Wall -Wextra"
VERSION_DEF='-DACP_VERSION="fuzz"'

mkdir -p "$OUT/obj" || exit 2

# The library objects, instrumented for coverage (no main: libFuzzer's).
# Everything is rebuilt when any source or header is newer than the stamp.
stamp=$OUT/obj/.stamp
if [ ! -f "$stamp" ] ||
  [ -n "$(find src -name '*.[ch]' -newer "$stamp" | head -n 1)" ]; then
  echo "fuzz: building the library in $OUT/obj"
  rm -f "$OUT"/obj/*.o "$stamp"
  for f in $(find src -name '*.c' ! -path 'src/demo/*' ! -path src/main.c |
    sort); do
    o=$OUT/obj/$(echo "${f#src/}" | tr / _ | sed 's/\.c$//').o
    # shellcheck disable=SC2086
    $NICE "$CC" $CFLAGS "$VERSION_DEF" $SAN -fsanitize=fuzzer-no-link \
      $PKG_CFLAGS -c "$f" -o "$o" || exit 2
  done
  touch "$stamp"
fi

fail=0
for t in "$@"; do
  bin=$OUT/fuzz_$t
  src=tests/fuzz/fuzz_$t.c
  if [ ! -x "$bin" ] || [ -n "$(find "$src" "$stamp" tests/fuzz/*.h tests/unit/request_ref.c \
    -newer "$bin" | head -n 1)" ]; then
    # shellcheck disable=SC2086
    if ! $NICE "$CC" $CFLAGS "$VERSION_DEF" $SAN -fsanitize=fuzzer \
      $PKG_CFLAGS -Itests/fuzz -o "$bin" "$src" "$OUT"/obj/*.o $PKG_LIBS; then
      echo "fuzz $t: build FAILED"
      fail=1
      continue
    fi
  fi

  corpus=$OUT/corpus-$t
  artifacts=$OUT/artifacts-$t
  tmp=$OUT/tmp-$t
  log=$OUT/log-$t.txt
  mkdir -p "$corpus" "$artifacts" "$tmp"
  if [ -d "tests/fuzz/corpus/$t" ]; then
    cp -p "tests/fuzz/corpus/$t"/* "$corpus"/ 2>/dev/null
  fi
  dict=
  [ -f "tests/fuzz/$t.dict" ] && dict=-dict=tests/fuzz/$t.dict
  runs=
  [ -n "${FUZZ_RUNS:-}" ] && runs=-runs=$FUZZ_RUNS

  binpath=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
  regs=$(find tests/fuzz/regressions -type f -name "$t-*" 2>/dev/null | sort)
  if [ -n "$regs" ]; then
    # shellcheck disable=SC2086
    if ! TMPDIR=$(cd "$tmp" && pwd) \
      UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} \
      $NICE "$binpath" -rss_limit_mb=2048 -timeout=10 $regs \
      >"$OUT/regress-$t.txt" 2>&1; then
      echo "fuzz $t: 0 execs in 0 s, 0 cov, FAILED (a regression input)"
      grep -m 3 'ERROR: \|runtime error:\|fuzz property\|^Running: ' \
        "$OUT/regress-$t.txt" | sed 's/^/  /'
      echo "  log: $OUT/regress-$t.txt"
      rm -rf "$tmp"
      fail=1
      continue
    fi
  fi

  start=$(date +%s)
  # The targets keep their scratch files (settings) under TMPDIR.
  # shellcheck disable=SC2086
  TMPDIR=$(cd "$tmp" && pwd) \
    UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} \
    $NICE "$binpath" \
    -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" $dict $runs \
    ${FUZZ_FLAGS:-} "$corpus" >"$log" 2>&1
  rc=$?
  end=$(date +%s)
  rm -rf "$tmp"

  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  if [ -z "$execs" ]; then
    execs=$(sed -n 's/^#\([0-9][0-9]*\).*/\1/p' "$log" | tail -n 1)
  fi
  cov=$(sed -n 's/.* cov: \([0-9][0-9]*\).*/\1/p' "$log" | tail -n 1)
  status=ok
  if [ $rc -ne 0 ] || grep -q '^==[0-9]*==ERROR\|^SUMMARY: \|runtime error:' "$log"; then
    status=FAILED
    fail=1
  fi
  echo "fuzz $t: ${execs:-0} execs in $((end - start)) s, ${cov:-0} cov, $status"
  if [ $status = FAILED ]; then
    grep -m 3 'ERROR: \|runtime error:\|fuzz property\|deadly signal' "$log" |
      sed 's/^/  /'
    grep 'Test unit written to\|^artifact_prefix' "$log" | sed 's/^/  /'
    echo "  log: $log"
  fi
done
exit $fail
