#!/bin/sh
# tests/fetch-nvim.sh VERSION DEST
#
# Puts a newer Neovim from Debian packages into DEST (an absolute path, e.g.
# build/nvim-0.12 made absolute by the Makefile), next to the system's
# Neovim, without installing anything:
#
#   VERSION 0.10   Debian trixie's neovim 0.10.x
#   VERSION 0.12   Debian sid's neovim 0.12.x (any 0.12.x: sid moves)
#
# A private, throw-away apt config downloads the .debs, dpkg-deb unpacks
# them, and patchelf (the system release's, also only unpacked) points the
# binary at the unpacked glibc. The binary is DEST/usr/bin/nvim. These
# Neovims need a newer glibc than Debian 12's 2.36 (trixie's 2.38, sid's
# 2.42), so that release's libc6 comes along; LD_LIBRARY_PATH is not an
# option because every child process inherits it and breaks on the system's
# own loader.
#
# The Debian mirror is the one the system's apt already uses (found with
# `apt-get indextargets`, so run `apt-get update` once), so a machine behind
# a local mirror or proxy fetches from there; ACP_DEBIAN_MIRROR=URI overrides.
#
# Idempotent: does nothing when DEST/usr/bin/nvim already runs and says
# v0.10.x (or v0.12.x). Versions are not pinned: point releases replace them
# and the old ones vanish from the mirror. The package names are checked
# against the release's own Depends of neovim before anything is downloaded,
# and a dependency this script does not know fails with its name.
set -eu

die() {
	echo "fetch-nvim: $*" >&2
	exit 1
}

[ $# -eq 2 ] || die "usage: $0 0.10|0.12 DEST (an absolute path)"
VERSION=$1
DEST=$2
# Every package that neovim or one of these needs must be listed here, or be
# in HOST (what the system's own libraries provide: the unpacked glibc loads
# the system's libgcc_s, and its iconv modules from the system's path).
COMMON="neovim neovim-runtime libc6 libluajit-5.1-2 libluajit-5.1-common
	libunibilium4 libuv1t64 lua-lpeg lua-luv"
HOST="libgcc-s1 libc-gconv-modules-extra"
case $VERSION in
0.10)
	SUITE=trixie
	PKGS="$COMMON libmsgpack-c2 libtree-sitter0.22 libvterm0"
	;;
0.12)
	SUITE=sid
	PKGS="$COMMON libtree-sitter0.26 libutf8proc3"
	;;
*) die "unknown VERSION '$VERSION' (0.10 or 0.12)" ;;
esac
VERSION_RE=$(printf '%s' "$VERSION" | sed 's/\./\\./g')

case $DEST in
/*) ;;
*) die "DEST must be an absolute path, got '$DEST'" ;;
esac
case $DEST in
*[[:space:]]*) die "DEST must not contain spaces: '$DEST'" ;;
esac
DEST=${DEST%/}
[ -n "$DEST" ] || die "DEST must not be /"

works() {
	[ -x "$DEST/usr/bin/nvim" ] &&
		env -u VIMRUNTIME "$DEST/usr/bin/nvim" --version 2>/dev/null |
		head -n 1 | grep -q "^NVIM v$VERSION_RE\."
}

if works; then
	exit 0
fi
# DEST is replaced whole below: refuse anything that is not ours.
if [ -d "$DEST" ] && [ -n "$(ls -A "$DEST")" ] && [ ! -e "$DEST/usr/bin/nvim" ]; then
	die "$DEST exists and does not look like an unpacked Neovim; not touching it"
fi

for tool in apt-get apt-cache dpkg-deb; do
	command -v "$tool" >/dev/null 2>&1 || die "'$tool' not found (this needs Debian or a derivative)"
done
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
[ -r "$KEYRING" ] || die "$KEYRING missing (install debian-archive-keyring)"
case $(uname -m) in
x86_64) TRIPLET=x86_64-linux-gnu LOADER=ld-linux-x86-64.so.2 ;;
aarch64) TRIPLET=aarch64-linux-gnu LOADER=ld-linux-aarch64.so.1 ;;
*) die "unsupported machine $(uname -m)" ;;
esac

# The system's Debian mirror: the main component of an archive whose Release
# file says "Label: Debian" (not Debian-Security), as apt itself lists it.
# Its release (bookworm on Debian 12) provides patchelf, which has to run here.
# Without downloaded lists (no `apt-get update` yet) there is no Label: then
# the first main component of a source that is not a -security, -updates or
# -backports suite.
# shellcheck disable=SC2016
targets=$(apt-get indextargets --format '$(LABEL) $(COMPONENT) $(RELEASE) $(REPO_URI)' \
	'Identifier: Packages' 2>/dev/null | awk '$1 == "Debian" && $2 == "main" { print $3, $4; exit }')
if [ -z "$targets" ]; then
	# shellcheck disable=SC2016
	targets=$(apt-get indextargets --no-release-info --format '$(COMPONENT) $(RELEASE) $(REPO_URI)' \
		'Identifier: Packages' 2>/dev/null |
		awk '$1 == "main" && $2 !~ /-(security|updates|backports)$/ { print $2, $3; exit }')
fi
HOST_RELEASE=${targets%% *}
if [ -z "$HOST_RELEASE" ] && [ -r /etc/os-release ]; then
	HOST_RELEASE=$(sed -n 's/^VERSION_CODENAME=//p' /etc/os-release | tr -d '"')
fi
MIRROR=${ACP_DEBIAN_MIRROR:-${targets#* }}
if [ -z "$MIRROR" ] || [ -z "$HOST_RELEASE" ]; then
	die "no Debian mirror in the system's apt configuration ('apt-get indextargets' lists no main component of a Debian archive); run 'apt-get update', or set ACP_DEBIAN_MIRROR=URI (e.g. http://deb.debian.org/debian)"
fi

# Everything is unpacked into a staging directory next to DEST and moved into
# place only once complete, so an interrupted run never leaves a half tree
# that a later run would take for a working one. The interpreter path written
# by patchelf is absolute, so it names the final DEST from the start.
mkdir -p "$(dirname "$DEST")"
STAGE=$DEST.tmp.$$
W=$STAGE.apt
cleanup() {
	rm -rf "$STAGE" "$W"
}
trap cleanup EXIT
trap 'exit 1' HUP INT TERM
rm -rf "$STAGE" "$W"
mkdir -p "$STAGE" "$W/lists/partial" "$W/cache/archives/partial" "$W/debs" "$W/patchelf" "$W/preferences.d"

cat >"$W/sources.list" <<EOF
deb [signed-by=$KEYRING] $MIRROR $SUITE main
deb [signed-by=$KEYRING] $MIRROR $HOST_RELEASE main
EOF
: >"$W/status"

# apt drops to the _apt user for downloads, which cannot write here; as root
# say so explicitly to silence the warning, otherwise apt runs as the caller.
SANDBOX=$(id -un)
set -- \
	-o "Dir::Etc::sourcelist=$W/sources.list" -o Dir::Etc::sourceparts=- \
	-o "Dir::Etc::preferences=$W/preferences" -o "Dir::Etc::preferencesparts=$W/preferences.d" \
	-o "Dir::State::Lists=$W/lists" -o "Dir::Cache=$W/cache" \
	-o "Dir::State::status=$W/status" -o "APT::Sandbox::User=$SANDBOX" -q

echo "fetch-nvim: downloading Neovim $VERSION from Debian $SUITE ($MIRROR) into $DEST"
apt-get "$@" update >"$W/update.log" 2>&1 || {
	cat "$W/update.log" >&2
	die "apt-get update (private config, $MIRROR $SUITE and $HOST_RELEASE) failed"
}
# apt-get update exits 0 when a source cannot be reached: look for the lists.
for rel in "$SUITE" "$HOST_RELEASE"; do
	found=
	for f in "$W/lists/"*"_dists_${rel}_main_binary-"*"_Packages"*; do
		[ -e "$f" ] && found=1
	done
	[ -n "$found" ] || {
		cat "$W/update.log" >&2
		die "no package list of Debian $rel from $MIRROR (see above)"
	}
done

# What the release has: neovim at the wanted version, and nothing among the
# Depends of the packages above that is not fetched or provided by the host
# (a new tree-sitter or libc soname changes a package name).
# shellcheck disable=SC2086
apt-cache "$@" show --no-all-versions neovim/$SUITE $PKGS >"$W/show" 2>"$W/show.err" || {
	cat "$W/show.err" >&2
	die "Debian $SUITE lacks a package this script fetches (see above): update tests/fetch-nvim.sh"
}
have=$(awk '/^Package: neovim$/ { p = 1; next } /^Package:/ { p = 0 } p && /^Version:/ { print $2; exit }' "$W/show")
case ${have#*:} in
"$VERSION".*) ;;
*) die "Debian $SUITE has neovim '${have:-none}', not $VERSION.x: update tests/fetch-nvim.sh" ;;
esac
missing=
# shellcheck disable=SC2086
known=" $(printf '%s ' $PKGS $HOST)"
for dep in $(sed -n 's/^\(Pre-\)\{0,1\}Depends: //p' "$W/show" | tr ',' '\n' |
	sed 's/|.*//; s/(.*//; s/:.*//; s/[[:space:]]//g' | sort -u); do
	case $known in
	*" $dep "*) ;;
	*) missing="$missing $dep" ;;
	esac
done
[ -z "$missing" ] ||
	die "Debian $SUITE's neovim $have needs$missing, which tests/fetch-nvim.sh does not fetch: add it to the $VERSION list"

# shellcheck disable=SC2086
(cd "$W/debs" && apt-get "$@" download $PKGS "patchelf/$HOST_RELEASE") ||
	die "apt-get download failed (see above)"

for f in "$W"/debs/*.deb; do
	case ${f##*/} in
	patchelf_*) dpkg-deb -x "$f" "$W/patchelf" ;;
	*) dpkg-deb -x "$f" "$STAGE" ;;
	esac || die "dpkg-deb -x $f failed"
done

[ -x "$STAGE/usr/bin/nvim" ] || die "no usr/bin/nvim in the unpacked packages"
[ -e "$STAGE/usr/lib/$TRIPLET/$LOADER" ] || die "no $LOADER in the unpacked libc6"
# DT_RPATH (not RUNPATH) so that it also covers the libraries' own needs;
# $ORIGIN keeps it relative. The interpreter must be absolute.
# shellcheck disable=SC2016
"$W/patchelf/usr/bin/patchelf" \
	--set-interpreter "$DEST/usr/lib/$TRIPLET/$LOADER" \
	--force-rpath --set-rpath '$ORIGIN/../lib/'"$TRIPLET" \
	"$STAGE/usr/bin/nvim" || die "patchelf failed"

rm -rf "$DEST"
mv "$STAGE" "$DEST"

works || {
	env -u VIMRUNTIME "$DEST/usr/bin/nvim" --version >&2 || true
	die "$DEST/usr/bin/nvim does not run or is not v$VERSION.x"
}
echo "fetch-nvim: $(env -u VIMRUNTIME "$DEST/usr/bin/nvim" --version | head -n 1) in $DEST/usr/bin/nvim"
