#!/bin/sh
# fetch-fuse-arm64.sh DIR - put Debian's arm64 libfuse3.a and fuse3 headers
# under DIR/arm64-fuse/usr, for the static aarch64 bfuse.
#
# Debian's cross toolchain has no arm64 libfuse3, and adding arm64 to dpkg
# would change the host for everyone.  So apt-get runs with a private state
# (package lists and cache under DIR/apt) that knows only arm64, downloads
# libfuse3-dev:arm64 (the host's libfuse version) and unpacks it with
# dpkg-deb -x.  Nothing is installed.  Exits non-zero on failure; the
# Makefile then skips the aarch64 build with a message.
set -eu
dir=${1:-build}
mkdir -p "$dir/apt/lists/partial" "$dir/apt/cache/archives/partial"
apt_dir=$(cd "$dir/apt" && pwd)
set -- -q -o APT::Architecture=arm64 -o APT::Architectures::=arm64 \
	-o Dir::State::Lists="$apt_dir/lists" -o Dir::Cache="$apt_dir/cache" \
	-o Dir::State::status=/dev/null -o Debug::NoLocking=1
command -v apt-get >/dev/null || { echo "no apt-get" >&2; exit 1; }
timeout 300 apt-get "$@" update >/dev/null
rm -f "$apt_dir"/libfuse3-dev_*_arm64.deb
(cd "$apt_dir" && timeout 300 apt-get "$@" download libfuse3-dev:arm64) \
	2>&1 | grep -v unsandboxed >&2 || true
deb=$(ls "$apt_dir"/libfuse3-dev_*_arm64.deb 2>/dev/null | head -n 1)
[ -n "$deb" ] || { echo "libfuse3-dev:arm64 download failed" >&2; exit 1; }
rm -rf "$dir/arm64-fuse"
dpkg-deb -x "$deb" "$dir/arm64-fuse"
echo "fetch-fuse-arm64: $(basename "$deb") unpacked in $dir/arm64-fuse"
