"""What a host lacks to build the reference binaries is said before any compiler error, naming the Debian package
(reference-impl/check-build-deps.sh, run by `make -C reference-impl` and so by `pip install .`): on this host,
which has everything, and on hosts made to lack libfuse3-dev and SQLite's headers (pkg-config finds nothing) or a
static C library (a compiler that cannot link -static)."""

from __future__ import annotations

import os
import subprocess

from conftest import REFERENCE_IMPL


def check(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "-s", "-C", str(REFERENCE_IMPL), *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **env})


def test_this_host_can_build_everything():
    done = check("check-deps-static")
    assert done.returncode == 0 and done.stderr == "", done.stderr


def test_missing_libfuse3_and_sqlite_headers_are_named(tmp_path):
    done = check("all", PKG_CONFIG_LIBDIR=str(tmp_path))   # pkg-config finds no .pc file: the -dev packages gone
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if line.startswith("reference-impl:")]
    assert lines == [
        "reference-impl: libfuse3 (pkg-config fuse3) is missing: install the libfuse3 headers "
        "(Debian: apt-get install libfuse3-dev)",
        "reference-impl: libsqlite3 (pkg-config sqlite3) is missing: install the SQLite headers "
        "(Debian: apt-get install libsqlite3-dev)"]
    assert "error:" not in done.stderr   # stopped before any compiler ran


def test_a_missing_static_libc_is_named(tmp_path):
    cc = tmp_path / "cc"   # a compiler whose C library has no static archive: -static links fail as they would
    cc.write_text('#!/bin/sh\nfor a; do [ "$a" = -static ] && { echo "ld: cannot find -lc" >&2; exit 1; }; done\n'
                  'exec cc "$@"\n')
    cc.chmod(0o755)
    done = check("check-deps-static", CC=str(cc))
    assert done.returncode != 0
    assert f"reference-impl: a static C library (libc.a: {cc} -static fails) is missing: install the C library's " \
           "static archive (Debian: apt-get install libc6-dev)" in done.stderr
