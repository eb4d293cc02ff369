#!/bin/sh
# fetch-cross-dev.sh DEBARCH PACKAGE DEST - unpack Debian's DEBARCH build of a
# -dev package (its static library and headers) into DEST/usr, for the static
# binaries that phones run (make ARCH=..., see cross.mk).
#
# Debian's cross toolchains have no libsqlite3 or libfuse3 of the target
# architecture, and adding an architecture to dpkg would change the host for
# everyone.  So apt-get runs with a private state (package lists and cache
# under DEST.apt) that knows only DEBARCH, downloads PACKAGE:DEBARCH (the
# host's version) and unpacks it with dpkg-deb -x.  Nothing is installed.
# Exits non-zero on failure; the component's Makefile then says what it skips.
set -eu
[ $# -eq 3 ] || { echo "usage: $0 DEBARCH PACKAGE DEST" >&2; exit 2; }
arch=$1 pkg=$2 dest=$3
mkdir -p "$dest.apt/lists/partial" "$dest.apt/cache/archives/partial"
apt_dir=$(cd "$dest.apt" && pwd)
set -- -q -o APT::Architecture="$arch" -o APT::Architectures::="$arch" \
	-o Dir::State::Lists="$apt_dir/lists" -o Dir::Cache="$apt_dir/cache" \
	-o Dir::State::status=/dev/null -o Debug::NoLocking=1
command -v apt-get >/dev/null || { echo "no apt-get" >&2; exit 1; }
# A mirror in the middle of a sync fails one index (e.g. security) and not the
# others: go on, the download below says whether the package was found.
timeout 300 apt-get "$@" update >/dev/null || echo "fetch-cross-dev: apt-get update reported errors" >&2
rm -f "$apt_dir/${pkg}"_*_"$arch".deb
(cd "$apt_dir" && timeout 300 apt-get "$@" download "$pkg:$arch") \
	2>&1 | grep -v unsandboxed >&2 || true
deb=$(ls "$apt_dir/${pkg}"_*_"$arch".deb 2>/dev/null | head -n 1)
[ -n "$deb" ] || { echo "$pkg:$arch download failed" >&2; exit 1; }
rm -rf "$dest"
dpkg-deb -x "$deb" "$dest"
echo "fetch-cross-dev: $(basename "$deb") unpacked in $dest"
