#!/bin/sh
# tests/fetch-nvim.sh DEST
#
# Puts Neovim 0.10 from Debian trixie packages into DEST (an absolute path,
# e.g. build/nvim-0.10 made absolute by the Makefile), next to the system's
# Neovim, without installing anything: a private, throw-away apt config
# downloads the .debs, dpkg-deb unpacks them, and patchelf (bookworm's, also
# only unpacked) points the binary at the unpacked glibc. The binary is
# DEST/usr/bin/nvim. Trixie's Neovim needs glibc 2.38 and bookworm has 2.36,
# so trixie's libc6 comes along; LD_LIBRARY_PATH is not an option because
# every child process inherits it and breaks on the system's own loader.
#
# Idempotent: does nothing when DEST/usr/bin/nvim already runs and says v0.10.
# Versions are not pinned: trixie point releases replace them and the old
# ones vanish from the mirror; the package names are stable.
set -eu

die() {
	echo "fetch-nvim: $*" >&2
	exit 1
}

[ $# -eq 1 ] || die "usage: $0 DEST (an absolute path)"
DEST=$1
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
		head -n 1 | grep -q '^NVIM v0\.10\.'
}

if works; then
	exit 0
fi
# DEST is replaced whole below: refuse anything that is not ours.
if [ -d "$DEST" ] && [ -n "$(ls -A "$DEST")" ] && [ ! -e "$DEST/usr/bin/nvim" ]; then
	die "$DEST exists and does not look like an unpacked Neovim; not touching it"
fi

for tool in apt-get dpkg-deb; do
	command -v "$tool" >/dev/null 2>&1 || die "'$tool' not found (this needs Debian or a derivative)"
done
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
[ -r "$KEYRING" ] || die "$KEYRING missing (install debian-archive-keyring)"
case $(uname -m) in
x86_64) TRIPLET=x86_64-linux-gnu LOADER=ld-linux-x86-64.so.2 ;;
aarch64) TRIPLET=aarch64-linux-gnu LOADER=ld-linux-aarch64.so.1 ;;
*) die "unsupported machine $(uname -m)" ;;
esac

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
deb [signed-by=$KEYRING] http://deb.debian.org/debian trixie main
deb [signed-by=$KEYRING] http://deb.debian.org/debian bookworm main
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

echo "fetch-nvim: downloading Neovim 0.10 from Debian trixie into $DEST"
apt-get "$@" update >"$W/update.log" 2>&1 || {
	cat "$W/update.log" >&2
	die "apt-get update (private config) failed"
}
(cd "$W/debs" && apt-get "$@" download \
	neovim neovim-runtime libc6 \
	libluajit-5.1-2 libluajit-5.1-common libmsgpack-c2 libtree-sitter0.22 \
	libunibilium4 libuv1t64 libvterm0 lua-lpeg lua-luv patchelf/bookworm) ||
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
	die "$DEST/usr/bin/nvim does not run or is not v0.10"
}
echo "fetch-nvim: $(env -u VIMRUNTIME "$DEST/usr/bin/nvim" --version | head -n 1) in $DEST/usr/bin/nvim"
