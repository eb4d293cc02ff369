#!/bin/sh
# fetch-arm64-dev.sh PACKAGE DIR DEST - unpack Debian's arm64 build of a -dev
# package (its static library and headers) into DIR/DEST/usr, for the static
# aarch64 builds of the reference binaries that phones run.
#
# Debian's cross toolchain has no arm64 libsqlite3 or libfuse3, and adding
# arm64 to dpkg would change the host for everyone.  So apt-get runs with a
# private state (package lists and cache under DIR/apt) that knows only
# arm64, downloads PACKAGE:arm64 (the host's version) and unpacks it with
# dpkg-deb -x.  Nothing is installed.  Exits non-zero on failure; the
# component's Makefile then says what it skips.
set -eu
[ $# -eq 3 ] || { echo "usage: $0 PACKAGE DIR DEST" >&2; exit 2; }
pkg=$1 dir=$2 dest=$3
mkdir -p "$dir/apt/lists/partial" "$dir/apt/cache/archives/partial"
apt_dir=$(cd "$dir/apt" && pwd)
set -- -q -o APT::Architecture=arm64 -o APT::Architectures::=arm64 \
	-o Dir::State::Lists="$apt_dir/lists" -o Dir::Cache="$apt_dir/cache" \
	-o Dir::State::status=/dev/null -o Debug::NoLocking=1
command -v apt-get >/dev/null || { echo "no apt-get" >&2; exit 1; }
timeout 300 apt-get "$@" update >/dev/null
rm -f "$apt_dir/${pkg}"_*_arm64.deb
(cd "$apt_dir" && timeout 300 apt-get "$@" download "$pkg:arm64") \
	2>&1 | grep -v unsandboxed >&2 || true
deb=$(ls "$apt_dir/${pkg}"_*_arm64.deb 2>/dev/null | head -n 1)
[ -n "$deb" ] || { echo "$pkg:arm64 download failed" >&2; exit 1; }
rm -rf "$dir/$dest"
dpkg-deb -x "$deb" "$dir/$dest"
echo "fetch-arm64-dev: $(basename "$deb") unpacked in $dir/$dest"
