"""Fjord's bad-input handling: a clear message and exit 1 before anything is mounted; and, once mounted, a log
that cannot be written makes critical fsyncs fail loudly (ENOSPC/EIO) instead of pretending."""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import pytest

from conftest import needs_fuse, needs_root
from test_fjord_mount import fjord_mount, is_mounted  # noqa: F401  (fixture)

pytestmark = [needs_root, needs_fuse]


def run_fjord(binary: Path, tmp_path: Path, options: str, timeout: float = 30) -> subprocess.CompletedProcess:
    src, mnt = tmp_path / "src", tmp_path / "mnt"
    src.mkdir(exist_ok=True)
    mnt.mkdir(exist_ok=True)
    try:
        proc = subprocess.run([str(binary), "-f", "-o", options, str(src), str(mnt)], capture_output=True,
                              text=True, timeout=timeout)
    finally:
        if is_mounted(mnt):
            subprocess.run(["fusermount3", "-uz", str(mnt)], timeout=30)
            pytest.fail(f"fjord mounted with bad options {options}")
    assert proc.returncode not in (-11, -6, 139, 134), "crashed"
    return proc


@pytest.mark.parametrize("options, message", [
    ("preset=bogus", "unknown preset 'bogus'"),
    ("preset=FJORD-RAM", "unknown preset 'FJORD-RAM'"),
    ("ram_buffer=16M", "no preset given"),
    ("preset=fjord-ram,whitelist=../elsewhere", "whitelist=../elsewhere: whitelist entry '../elsewhere' is outside"),
    ("preset=fjord-ram,whitelist=cache:a/../../b", "whitelist entry 'a/../../b' is outside the mount"),
    ("preset=fjord-ram,whitelist=/etc", "whitelist entry '/etc' is outside the mount"),
    ("preset=fjord-ram,whitelist=.", "is the mount root itself"),
    ("preset=fjord-ram,ram_buffer=lots", "invalid option ram_buffer=lots: not a size"),
    ("preset=fjord-ram,flush_ms=soon", "invalid option flush_ms=soon: not a duration"),
    ("preset=fjord-ram,ram_buffer=1M,bypass=2M", "bypass (2097152) must not exceed ram_buffer (1048576)"),
    ("preset=logging,log_size=64k", "log_size 65536 is too small"),
    ("preset=both,log_size=1M,bypass=512k", "log_size 1048576 is too small"),
    ("preset=fjord-both,log=/nonexistent-dir/fj.log", "log directory of /nonexistent-dir/fj.log"),
])
def test_bad_options_fail_before_mounting(reference_binary, tmp_path, options, message):
    proc = run_fjord(reference_binary("fjord"), tmp_path, options)
    assert proc.returncode == 1
    assert message in proc.stderr


def test_whitelist_symlink_leaving_the_mount_is_refused(reference_binary, tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "cache").symlink_to("/tmp")
    proc = run_fjord(reference_binary("fjord"), tmp_path, "preset=fjord-ram,whitelist=cache")
    assert proc.returncode == 1
    assert "'cache' resolves to /tmp, outside the mount" in proc.stderr


def test_log_refuses_to_overwrite_a_file_that_is_not_a_log(reference_binary, tmp_path):
    victim = tmp_path / "precious.txt"
    victim.write_text("do not overwrite")
    proc = run_fjord(reference_binary("fjord"), tmp_path, f"preset=logging,log={victim}")
    assert proc.returncode == 1
    assert "is not a Fjord log; refusing to overwrite it" in proc.stderr
    assert victim.read_text() == "do not overwrite"


def test_log_inside_the_mountpoint_is_refused(reference_binary, tmp_path):
    proc = run_fjord(reference_binary("fjord"), tmp_path, f"preset=logging,log={tmp_path / 'mnt' / 'fj.log'}")
    assert proc.returncode == 1
    assert "must not lie inside the mountpoint" in proc.stderr


@pytest.fixture
def small_tmpfs(tmp_path):
    """Callable (name, options) -> a tmpfs mounted under tmp_path, unmounted in the finalizer."""
    mounted: list[Path] = []

    def mount(name: str, options: str) -> Path:
        path = tmp_path / name
        path.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", options, f"fjordtest-{name}", str(path)], check=True,
                       timeout=30)
        mounted.append(path)
        return path

    yield mount
    for path in mounted:
        subprocess.run(["umount", "-l", str(path)], timeout=30)


def test_log_on_a_read_only_filesystem_is_refused(reference_binary, tmp_path, small_tmpfs):
    ro = small_tmpfs("ro", "ro,size=4m")
    proc = run_fjord(reference_binary("fjord"), tmp_path, f"preset=fjord-both,log={ro / 'fj.log'}")
    assert proc.returncode == 1
    assert f"cannot open log {ro / 'fj.log'}: Read-only file system" in proc.stderr


def test_log_larger_than_its_filesystem_is_refused(reference_binary, tmp_path, small_tmpfs):
    tiny = small_tmpfs("tiny", "size=2m")
    proc = run_fjord(reference_binary("fjord"), tmp_path, f"preset=logging,log={tiny / 'fj.log'},log_size=8M")
    assert proc.returncode == 1
    assert "not enough free space for a 8388608-byte log" in proc.stderr
    assert not (tiny / "fj.log").exists()


def test_enospc_in_the_log_fails_critical_fsync_loudly(fjord_mount, small_tmpfs):
    # a sparse log (log_prealloc=0) on a 1 MiB tmpfs: its writes hit ENOSPC once the tmpfs is full
    tiny = small_tmpfs("full", "size=1m")
    m = fjord_mount("fjord-both", whitelist="cache", log=str(tiny / "fj.log"), log_size="8M", log_prealloc=0)
    (m.mountpoint / "cache").mkdir()
    fd = os.open(m.mountpoint / "crit.dat", os.O_RDWR | os.O_CREAT, 0o644)
    wfd = os.open(m.mountpoint / "cache" / "w.dat", os.O_RDWR | os.O_CREAT, 0o644)
    failure = None
    try:
        for k in range(600):  # 2.4 MB of 4 KiB records into a 1 MiB filesystem
            os.pwrite(fd, bytes([k % 251]) * 4096, k * 8192)
            try:
                os.fdatasync(fd)
            except OSError as err:
                failure = err
                break
        assert failure is not None, "a critical fdatasync succeeded although its log record could not be written"
        assert failure.errno in (errno.ENOSPC, errno.EIO)
        # it stays failed: nothing is acknowledged on top of a broken log
        with pytest.raises(OSError):
            os.fdatasync(fd)
        # whitelisted files are unaffected: their fsync is relaxed, and data still reaches the native file
        os.pwrite(wfd, b"w" * 4096, 0)
        os.fsync(wfd)
        assert os.pread(fd, 4096, 0) == bytes([0]) * 4096
    finally:
        os.close(fd)
        os.close(wfd)
    policy = m.counters()["policy"]
    assert policy["fsyncs_failed"] >= 2
    assert policy["log_error"] == errno.ENOSPC
    assert "LOG WRITE FAILED (No space left on device)" in m.stderr()
    assert "fsync of critical file crit.dat FAILED" in m.stderr()
