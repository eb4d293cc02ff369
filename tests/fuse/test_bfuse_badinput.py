"""bFUSE refuses bad input before mounting, with a message that names the problem, and exits non-zero."""

from __future__ import annotations

import subprocess

import pytest

from conftest import needs_fuse
from bfuse_mounts import bfuse_mount, bfuse_binary, is_mounted, lazy_unmount  # noqa: F401  (fixtures)


def run_bfuse(binary, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=20)


@pytest.fixture
def dirs(tmp_path):
    source, mountpoint = tmp_path / "src", tmp_path / "mnt"
    source.mkdir()
    mountpoint.mkdir()
    yield source, mountpoint
    lazy_unmount(mountpoint)   # in case a bad option was accepted after all


@pytest.mark.parametrize("options, message", [
    ("preset=nope", "unknown preset 'nope'"),
    ("preset=bfuse,io_unit=3k", "invalid option io_unit=3k: must be a multiple of 4k between 4k and 1M"),
    ("preset=bfuse,io_unit=2M", "invalid option io_unit=2M"),
    ("preset=bfuse,io_unit=big", "invalid option io_unit=big: not a size"),
    ("preset=bfuse,buffer=5M", "invalid option buffer=5242880: must be 0 or a multiple of entry=2097152"),
    ("preset=bfuse,buffer=2G", "invalid option buffer=2G: at most 1G"),
    ("preset=bfuse,entry=256k", "invalid option entry=262144: smaller than io_unit=524288"),
    ("preset=bfuse,entry=5000", "invalid option entry=5000: must be a multiple of 4k"),
    ("preset=bfuse,flush_ms=0", "invalid option flush_ms=0: must be 1ms..60s"),
    ("preset=bfuse,flush_ms=soon", "invalid option flush_ms=soon: not a duration"),
    ("preset=bfuse,threads=0", "invalid option threads=0: must be 1..64"),
    ("preset=bfuse,splice=maybe", "invalid option splice=maybe"),
    ("preset=bfuse,counters=", "invalid option counters=: needs a path"),
    ("preset=bfuse,no_such_option=1", "unknown option"),
])
def test_bad_option_values_are_refused_before_mounting(bfuse_binary, dirs, options, message):
    source, mountpoint = dirs
    result = run_bfuse(bfuse_binary, "-f", "-o", options, str(source), str(mountpoint))
    assert result.returncode == 1
    assert message in result.stderr
    assert not is_mounted(mountpoint)


def test_missing_source_directory(bfuse_binary, dirs, tmp_path):
    _, mountpoint = dirs
    result = run_bfuse(bfuse_binary, "-f", "-o", "preset=bfuse", str(tmp_path / "absent"), str(mountpoint))
    assert result.returncode == 1
    assert f"source directory '{tmp_path / 'absent'}': No such file or directory" in result.stderr


def test_source_that_is_a_file(bfuse_binary, dirs, tmp_path):
    _, mountpoint = dirs
    (tmp_path / "file").write_text("x")
    result = run_bfuse(bfuse_binary, "-f", "-o", "preset=bfuse", str(tmp_path / "file"), str(mountpoint))
    assert result.returncode == 1
    assert "Not a directory" in result.stderr


def test_missing_mountpoint_and_missing_arguments(bfuse_binary, dirs, tmp_path):
    source, _ = dirs
    result = run_bfuse(bfuse_binary, "-f", str(source), str(tmp_path / "nowhere"))
    assert result.returncode == 1
    assert "mountpoint" in result.stderr and "No such file or directory" in result.stderr
    result = run_bfuse(bfuse_binary, "-f", str(source))
    assert result.returncode == 1
    assert "need SOURCE and MOUNTPOINT" in result.stderr


@needs_fuse
def test_busy_mountpoint_is_refused(bfuse_binary, bfuse_mount):
    mount = bfuse_mount("preset=bfuse")
    result = run_bfuse(bfuse_binary, "-f", "-o", "preset=legacy", str(mount.source), str(mount.mountpoint))
    assert result.returncode == 1
    assert "is busy: something is already mounted there" in result.stderr
    # the first mount is untouched
    (mount.mountpoint / "still").write_text("ok")
    assert (mount.source / "still").read_text() == "ok"


def test_help_lists_the_options(bfuse_binary):
    result = run_bfuse(bfuse_binary, "--help")
    assert result.returncode == 0
    for option in ("preset=NAME", "io_unit=SIZE", "buffer=SIZE", "entry=SIZE", "flush_ms=DURATION", "threads=N",
                   "splice=BOOL", "writeback_cache=BOOL", "counters=PATH", "legacy | bfuse (default) | nobuf"):
        assert option in result.stdout
