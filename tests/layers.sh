#!/bin/sh
# tests/layers.sh [SRC] — checks that every #include "..." in SRC (default
# src/) goes to its own layer or one below it. Prints TAP lines, one per
# file, and exits 1 when any file reaches upwards.
#
# The layers, lowest first, and what each may include (besides itself):
#
#   base/     memory, logging, UTF-8, files   nothing
#   codec/    JSON <-> msgpack                base
#   io/       Neovim's RPC, pipes, processes  base
#   acp/      JSON-RPC framing, the ACP state base codec io
#   policy/   rules, shell analysis, settings base
#   broker/   the services Neovim and agents  base codec io acp policy
#             see: fs, terminals, audit
#   src/*.c   main.c and cli.c                everything
#   demo/     the demo agent, a program       base
#
# Across folders an include names the folder ("base/mem.h", with -Isrc);
# inside a folder a bare name ("mem.h") is used, and a bare name of a header
# that is not beside the file is an error (it would hide the layer).
#
#   tests/layers.sh --self-test   plants an upward include in a copy of src/
#                                 and checks that it is caught
set -u

allowed() {
	case $1 in
	base) echo "base" ;;
	codec) echo "base codec" ;;
	io) echo "base io" ;;
	acp) echo "base codec io acp" ;;
	policy) echo "base policy" ;;
	broker) echo "base codec io acp policy broker" ;;
	demo) echo "base demo" ;;
	top) echo "base codec io acp policy broker top" ;;
	*) echo "" ;;
	esac
}

check() {
	src=$1
	bad=0
	for f in $(cd "$src" && find . -name '*.[ch]' | sed 's|^\./||' | sort); do
		case $f in
		*/*) layer=${f%%/*} ;;
		*) layer=top ;;
		esac
		ok=$(allowed "$layer")
		dir=$(dirname "$f")
		why=
		for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$src/$f"); do
			case $inc in
			*/*)
				to=${inc%%/*}
				[ -f "$src/$inc" ] || { why="$why; $inc does not exist"; continue; }
				case " $ok " in
				*" $to "*) ;;
				*) why="$why; $inc is in $to/, above $layer" ;;
				esac
				;;
			*)
				[ -f "$src/$dir/$inc" ] ||
					why="$why; \"$inc\" is not beside it (name its folder)"
				;;
			esac
		done
		if [ -n "$why" ]; then
			echo "not ok - src/$f${why}"
			bad=1
		else
			echo "ok - src/$f includes only ${ok%% top}"
		fi
	done
	return $bad
}

here=$(cd "$(dirname "$0")/.." && pwd)
if [ "${1:-}" = --self-test ]; then
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/acp-layers.XXXXXX") || exit 1
	trap 'rm -rf "$tmp"' EXIT
	cp -R "$here/src" "$tmp/src"
	rc=0
	# An upward include, a bare name hiding its folder, a missing header.
	for plant in '#include "broker/broker.h"|base/mem.c' \
		'#include "acp/acp.h"|policy/policy.c' \
		'#include "gate.h"|broker/audit.c' \
		'#include "io/nope.h"|acp/acp.c'; do
		line=${plant%|*}
		file=${plant#*|}
		cp "$here/src/$file" "$tmp/src/$file.orig"
		printf '%s\n' "$line" >>"$tmp/src/$file"
		if check "$tmp/src" >"$tmp/out" 2>&1; then
			echo "not ok - layers: $line in $file was not caught"
			rc=1
		elif grep -q "^not ok - src/$file" "$tmp/out"; then
			echo "ok - layers: $line in $file is caught"
		else
			echo "not ok - layers: $line in $file blamed the wrong file"
			rc=1
		fi
		mv "$tmp/src/$file.orig" "$tmp/src/$file"
	done
	if check "$tmp/src" >/dev/null; then
		echo "ok - layers: the restored copy passes"
	else
		echo "not ok - layers: the restored copy fails"
		rc=1
	fi
	exit $rc
fi

check "${1:-$here/src}"
