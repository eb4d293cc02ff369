#!/bin/sh
# check-build-deps.sh [static]: whether this host can build the reference binaries, and if not, one line per
# missing piece naming the Debian package that brings it (exit status 1). With `static`, the static builds too
# (make static, make ARCH=<this host's ABI>): a static C library and the static libfuse3 and libsqlite3.
#
# The Makefile runs it before building, so `make -C reference-impl` and `pip install .` (setup.py builds the
# binaries through the Makefile) fail with that line instead of a compiler's "fuse.h: No such file".
CC=${CC:-cc}
PKG_CONFIG=${PKG_CONFIG:-pkg-config}
missing=""
need() { missing="$missing
reference-impl: $1 is missing: install $2 (Debian: apt-get install $3)"; }

command -v make >/dev/null 2>&1 || need "make" "make" "make"
command -v "$CC" >/dev/null 2>&1 || need "a C compiler ($CC)" "a C compiler" "build-essential"
command -v "$PKG_CONFIG" >/dev/null 2>&1 || need "pkg-config" "pkg-config" "pkg-config"
if command -v "$PKG_CONFIG" >/dev/null 2>&1; then
	"$PKG_CONFIG" --exists fuse3 || need "libfuse3 (pkg-config fuse3)" "the libfuse3 headers" "libfuse3-dev"
	"$PKG_CONFIG" --exists sqlite3 || need "libsqlite3 (pkg-config sqlite3)" "the SQLite headers" "libsqlite3-dev"
fi
if [ "$1" = static ] && command -v "$CC" >/dev/null 2>&1; then
	tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
	printf 'int main(void) { return 0; }\n' > "$tmp/t.c"
	"$CC" -static -o "$tmp/t" "$tmp/t.c" >/dev/null 2>&1 ||
		need "a static C library (libc.a: $CC -static fails)" "the C library's static archive" "libc6-dev"
	for lib in fuse3:libfuse3-dev sqlite3:libsqlite3-dev; do
		pc=${lib%%:*}
		dir=$("$PKG_CONFIG" --variable=libdir "$pc" 2>/dev/null) || continue  # no .pc at all: said above
		[ -f "$dir/lib$pc.a" ] || need "lib$pc.a (static)" "the static lib$pc" "${lib#*:}"
	done
fi
if [ -n "$missing" ]; then
	echo "$missing" | sed '1d' >&2
	exit 1
fi
