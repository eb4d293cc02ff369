"""POSIX semantics of bFUSE with the write buffer on: every operation sees buffered data, sync points write it out.

The mounts use flush_ms=60s so that data written without a sync point provably stays in the daemon's buffer (the
native file is checked to lack it) before the operation under test runs.
"""

from __future__ import annotations

import errno
import json
import mmap
import os
import signal
import subprocess
import time

import pytest

from conftest import is_root, needs_fuse
from bfuse_mounts import bfuse_mount, bfuse_binary, lazy_unmount  # noqa: F401  (fixtures)

pytestmark = needs_fuse

HELD = "preset=bfuse,flush_ms=60s"
KIB = 1024


def pattern(size: int, seed: int = 1) -> bytes:
    return bytes((seed * 131 + k * 7 + k // 4096) % 251 + 1 for k in range(size))


def native_size(path) -> int:
    return path.stat().st_size if path.exists() else -1


def buffered_file(mount, name: str = "f", size: int = 300 * KIB, seed: int = 1) -> tuple[int, bytes]:
    """Create mnt/name, write `size` bytes in 100 KiB writes, leave it open; the data stays in the buffer."""
    data = pattern(size, seed)
    fd = os.open(mount.mountpoint / name, os.O_RDWR | os.O_CREAT, 0o644)
    for off in range(0, size, 100 * KIB):
        os.pwrite(fd, data[off:off + 100 * KIB], off)
    assert native_size(mount.source / name) == 0, "data should still be in the daemon's buffer"
    return fd, data


def test_fsync_writes_buffered_data_to_the_native_file(bfuse_mount):
    mount = bfuse_mount(HELD)
    fd, data = buffered_file(mount)
    os.fsync(fd)
    assert (mount.source / "f").read_bytes() == data
    os.close(fd)
    counters = mount.counters()["counters"]
    assert counters["buffered_writes"] == 3
    assert counters["coalesced_requests"] == 2
    assert counters["flushed_entries_fsync"] == 1
    assert counters["daemon_fsync_calls"] == 1


def test_fdatasync_writes_buffered_data_to_the_native_file(bfuse_mount):
    mount = bfuse_mount(HELD)
    fd, data = buffered_file(mount)
    os.fdatasync(fd)
    assert (mount.source / "f").read_bytes() == data
    os.close(fd)
    assert mount.counters()["counters"]["daemon_fdatasync_calls"] == 1


def test_close_writes_buffered_data_before_returning(bfuse_mount):
    mount = bfuse_mount(HELD)
    fd, data = buffered_file(mount)
    os.close(fd)
    assert (mount.source / "f").read_bytes() == data
    assert mount.counters()["counters"]["flushed_entries_close"] == 1


def test_read_through_another_descriptor_is_served_from_the_buffer(bfuse_mount):
    mount = bfuse_mount(HELD)
    fd, data = buffered_file(mount)
    with open(mount.mountpoint / "f", "rb") as reader:
        assert reader.read() == data
    assert native_size(mount.source / "f") == 0, "a read must not flush: the bytes come from the buffer"
    counters = mount.counters()["counters"]
    assert counters["reads_from_buffer"] >= 1 and counters["flushed_entries_read"] == 0
    os.close(fd)
    assert (mount.source / "f").read_bytes() == data


def test_read_lays_buffered_bytes_over_the_native_file(bfuse_mount):
    mount = bfuse_mount(HELD)
    base = pattern(1024 * KIB, seed=2)
    (mount.mountpoint / "f").write_bytes(base)
    fd = os.open(mount.mountpoint / "f", os.O_RDWR)
    new = pattern(100 * KIB, seed=3)
    os.pwrite(fd, new, 512 * KIB)
    with open(mount.mountpoint / "f", "rb") as reader:   # a new open drops the kernel's cached pages
        assert reader.read(100 * KIB) == base[:100 * KIB]
        reader.seek(500 * KIB)
        assert reader.read(200 * KIB) == base[500 * KIB:512 * KIB] + new + base[612 * KIB:700 * KIB]
    assert (mount.source / "f").read_bytes()[512 * KIB:612 * KIB] == base[512 * KIB:612 * KIB], "flushed by a read"
    counters = mount.counters()["counters"]
    assert counters["reads_from_buffer"] >= 1 and counters["flushed_entries_read"] == 0
    os.close(fd)
    assert (mount.source / "f").read_bytes() == base[:512 * KIB] + new + base[612 * KIB:]


def test_read_of_buffered_data_past_the_native_end_and_a_hole(bfuse_mount):
    """Native file 10 KiB; buffered bytes at 300 KiB..400 KiB: the read sees the hole as zeros and the tail."""
    mount = bfuse_mount(HELD + ",timeout=0")
    (mount.mountpoint / "f").write_bytes(b"a" * (10 * KIB))
    fd = os.open(mount.mountpoint / "f", os.O_RDWR)
    tail = pattern(100 * KIB, seed=4)
    os.pwrite(fd, tail, 300 * KIB)
    assert native_size(mount.source / "f") == 10 * KIB
    with open(mount.mountpoint / "f", "rb") as reader:
        assert reader.read() == b"a" * (10 * KIB) + bytes(290 * KIB) + tail
        reader.seek(350 * KIB)
        assert reader.read(1000 * KIB) == tail[50 * KIB:]
    assert native_size(mount.source / "f") == 10 * KIB
    os.close(fd)
    assert (mount.source / "f").read_bytes() == b"a" * (10 * KIB) + bytes(290 * KIB) + tail


def test_read_sees_the_latest_of_overlapping_buffered_writes(bfuse_mount):
    """Rewrites inside the filling entry and a second entry over the first: later writes win, also in reads."""
    mount = bfuse_mount(HELD)
    fd = os.open(mount.mountpoint / "f", os.O_RDWR | os.O_CREAT, 0o644)
    expected = bytearray(pattern(600 * KIB, seed=5))
    os.pwrite(fd, bytes(expected), 0)                 # large write: a segment of its own
    for off, size, seed in ((100, 5000, 6), (4090, 20, 7), (599 * KIB, 3 * KIB, 8), (300 * KIB, 300 * KIB, 9)):
        chunk = pattern(size, seed)
        os.pwrite(fd, chunk, off)
        expected[off:off + size] = chunk
    os.pwrite(fd, b"Z" * 7000, 50)                    # starts before the newest entry: a new entry, newer
    expected[50:7050] = b"Z" * 7000
    assert native_size(mount.source / "f") in (0, 602 * KIB)   # the first entry may have been sealed and flushed
    with open(mount.mountpoint / "f", "rb") as reader:
        assert reader.read() == bytes(expected)
    os.close(fd)
    assert (mount.source / "f").read_bytes() == bytes(expected)


def test_stat_size_includes_buffered_data(bfuse_mount):
    # timeout=0: every stat goes to the daemon, so its size fix-up is what the kernel reports
    mount = bfuse_mount(HELD + ",timeout=0")
    fd, _ = buffered_file(mount, size=300 * KIB)
    assert os.stat(mount.mountpoint / "f").st_size == 300 * KIB
    assert os.fstat(fd).st_size == 300 * KIB
    assert native_size(mount.source / "f") == 0
    os.close(fd)
    assert mount.counters()["ops"]["getattr"]["requests"] >= 2


def test_truncate_down_and_up_of_a_buffered_file(bfuse_mount):
    mount = bfuse_mount(HELD)
    fd, data = buffered_file(mount)
    os.ftruncate(fd, 100 * KIB + 5)
    assert native_size(mount.source / "f") == 100 * KIB + 5
    assert os.pread(fd, 400 * KIB, 0) == data[:100 * KIB + 5]
    os.truncate(mount.mountpoint / "f", 200 * KIB)
    assert os.pread(fd, 400 * KIB, 0) == data[:100 * KIB + 5] + bytes(100 * KIB - 5)
    os.close(fd)
    assert mount.counters()["counters"]["flushed_entries_truncate"] == 1


def test_open_with_o_trunc_discards_buffered_data(bfuse_mount):
    mount = bfuse_mount(HELD)
    fd, _ = buffered_file(mount)
    with open(mount.mountpoint / "f", "wb") as again:
        again.write(b"new")
    os.close(fd)
    assert (mount.mountpoint / "f").read_bytes() == b"new"
    assert (mount.source / "f").read_bytes() == b"new"


def test_rename_of_a_buffered_file_keeps_its_data(bfuse_mount):
    mount = bfuse_mount(HELD)
    fd, data = buffered_file(mount)
    os.mkdir(mount.mountpoint / "d")
    os.rename(mount.mountpoint / "f", mount.mountpoint / "d" / "g")
    assert (mount.mountpoint / "d" / "g").read_bytes() == data
    os.fsync(fd)
    os.close(fd)
    assert (mount.source / "d" / "g").read_bytes() == data
    assert not (mount.source / "f").exists()


def test_rename_over_a_buffered_file(bfuse_mount):
    mount = bfuse_mount(HELD)
    fd, _ = buffered_file(mount, "victim")
    (mount.mountpoint / "new").write_bytes(b"replacement")
    os.rename(mount.mountpoint / "new", mount.mountpoint / "victim")
    os.close(fd)   # the old inode's data goes to the unlinked inode, not over the new file
    assert (mount.mountpoint / "victim").read_bytes() == b"replacement"
    assert (mount.source / "victim").read_bytes() == b"replacement"


def test_unlinked_open_file_keeps_its_buffered_data(bfuse_mount):
    mount = bfuse_mount(HELD)
    fd, data = buffered_file(mount)
    os.unlink(mount.mountpoint / "f")
    assert not (mount.source / "f").exists()
    assert os.pread(fd, len(data), 0) == data
    os.close(fd)
    assert os.listdir(mount.source) == []


def test_mmap_reads_buffered_data_and_msync_writes_through(bfuse_mount):
    mount = bfuse_mount(HELD)
    fd, data = buffered_file(mount)
    with mmap.mmap(fd, len(data), mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE) as view:
        assert view[:] == data
        view[4096:8192] = b"m" * 4096
        view.flush()
    os.fsync(fd)
    os.close(fd)
    expected = data[:4096] + b"m" * 4096 + data[8192:]
    assert (mount.source / "f").read_bytes() == expected
    assert (mount.mountpoint / "f").read_bytes() == expected


def test_management_thread_flushes_idle_entries(bfuse_mount):
    mount = bfuse_mount("preset=bfuse,flush_ms=20ms")
    fd = os.open(mount.mountpoint / "f", os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"t" * 50000)
    deadline = time.monotonic() + 2.0   # the entry is due after 20 ms idle
    while native_size(mount.source / "f") != 50000 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert native_size(mount.source / "f") == 50000, "the management thread did not write the idle entry out"
    assert mount.counters()["counters"]["flushed_entries_timer"] == 1
    os.close(fd)


def test_unmount_flushes_everything(bfuse_mount):
    """SIGTERM with a file still open and its data buffered: the daemon writes it out before it goes."""
    mount = bfuse_mount(HELD)
    fd, data = buffered_file(mount)
    mount.process.send_signal(signal.SIGTERM)
    mount.process.wait(timeout=10)
    try:
        os.close(fd)
    except OSError:
        pass   # the mount is gone
    lazy_unmount(mount.mountpoint)
    assert (mount.source / "f").read_bytes() == data
    counters = json.loads(mount.counters_path.read_text())["counters"]
    assert counters["flushed_entries_unmount"] == 1


def test_open_with_o_nofollow_reopens_an_existing_file(bfuse_mount):
    """SQLite opens its journal with O_NOFOLLOW; the daemon's reopen through /proc must not fail with ELOOP."""
    mount = bfuse_mount(HELD)
    (mount.mountpoint / "j").write_bytes(b"journal")
    fd = os.open(mount.mountpoint / "j", os.O_RDWR | os.O_NOFOLLOW)
    assert os.read(fd, 100) == b"journal"
    os.close(fd)
    os.symlink("j", mount.mountpoint / "link")
    with pytest.raises(OSError) as refused:
        os.open(mount.mountpoint / "link", os.O_RDONLY | os.O_NOFOLLOW)
    assert refused.value.errno == errno.ELOOP


def test_no_getxattr_per_write(bfuse_mount):
    mount = bfuse_mount("preset=bfuse")
    with open(mount.mountpoint / "f", "wb", buffering=0) as f:
        for _ in range(200):
            f.write(b"x" * 4096)
    ops = mount.counters()["ops"]
    assert ops["write"]["requests"] == 200
    assert ops.get("getxattr", {"requests": 0})["requests"] <= 1


@pytest.fixture
def tiny_tmpfs(tmp_path):
    """A 1 MiB tmpfs to run out of space on (root only); lazily unmounted."""
    if not is_root():
        pytest.skip("needs root to mount a small tmpfs")
    path = tmp_path / "tiny"
    path.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "bfuse-test-tiny", str(path)], check=True, timeout=10)
    yield path
    lazy_unmount_native(path)


def lazy_unmount_native(path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=10)


def test_deferred_enospc_is_reported_at_fsync(bfuse_mount, tiny_tmpfs):
    mount = bfuse_mount(HELD, source=tiny_tmpfs)
    fd = os.open(mount.mountpoint / "big", os.O_WRONLY | os.O_CREAT, 0o644)
    for k in range(3):   # 1.5 MiB: accepted into the buffer, does not fit on the 1 MiB filesystem
        assert os.write(fd, b"e" * (512 * KIB)) == 512 * KIB
    with pytest.raises(OSError) as failure:
        os.fsync(fd)
    assert failure.value.errno == errno.ENOSPC
    os.close(fd)
    counters = mount.counters()["counters"]
    assert counters["deferred_write_errors"] == 1
    assert counters["deferred_errors_reported"] == 1
    assert "No space left on device" in mount.stderr()


def test_deferred_enospc_is_reported_at_close(bfuse_mount, tiny_tmpfs):
    mount = bfuse_mount(HELD, source=tiny_tmpfs)
    fd = os.open(mount.mountpoint / "big", os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"e" * (1536 * KIB))   # 1.5 MiB in 512 KiB requests
    with pytest.raises(OSError) as failure:
        os.close(fd)
    assert failure.value.errno == errno.ENOSPC
    assert mount.counters()["counters"]["deferred_errors_reported"] == 1


def test_deferred_error_is_not_taken_by_a_read_only_close(bfuse_mount, tiny_tmpfs):
    """A reader's close neither flushes the writer's data nor swallows its ENOSPC: the writer's fsync gets it."""
    mount = bfuse_mount(HELD, source=tiny_tmpfs)
    fd = os.open(mount.mountpoint / "big", os.O_WRONLY | os.O_CREAT, 0o644)
    for k in range(3):
        assert os.write(fd, b"e" * (512 * KIB)) == 512 * KIB
    reader = os.open(mount.mountpoint / "big", os.O_RDONLY)
    assert os.pread(reader, 10, 512 * KIB) == b"e" * 10          # from the buffer
    os.close(reader)                                             # no flush, no error
    assert native_size(mount.source / "big") <= 1024 * KIB      # [0,1M) was full and went; [1M,1.5M) is held
    with pytest.raises(OSError) as failure:
        os.fsync(fd)
    assert failure.value.errno == errno.ENOSPC
    os.close(fd)
    assert mount.counters()["counters"]["deferred_errors_reported"] == 1
