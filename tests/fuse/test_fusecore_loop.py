"""fusecore's own receive loop (-o own_loop=1, splice off), exercised through bfuse (preset=bfuse,splice=0).

The loop reads each request into a pool buffer; a write hook may keep that buffer (bFUSE's large buffered writes).
These tests check what a loop must do besides: serve concurrent requests on several threads, keep every byte of
adopted buffers apart (no buffer handed to the kernel twice), and end on unmount and on a signal without hanging.
"""

from __future__ import annotations

import hashlib
import os
import signal
import threading

from conftest import needs_fuse
from bfuse_mounts import bfuse_mount, bfuse_binary, is_mounted, lazy_unmount  # noqa: F401  (fixtures)

pytestmark = needs_fuse

KIB = 1024
MIB = 1024 * KIB


def block(writer: int, k: int, size: int) -> bytes:
    """Distinct content per writer and block, so a buffer reused too early shows up as wrong bytes."""
    seed = hashlib.sha256(f"{writer}/{k}".encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


def test_concurrent_writers_keep_their_bytes_apart(bfuse_mount):
    """4 threads write 512 KiB blocks to 4 files at once (adopted buffers); reads while buffered, then natively."""
    mount = bfuse_mount("preset=bfuse,splice=0,flush_ms=60s")
    blocks, size, errors = 12, 512 * KIB, []

    def write_file(writer: int) -> None:
        try:
            fd = os.open(mount.mountpoint / f"w{writer}", os.O_RDWR | os.O_CREAT, 0o644)
            for k in range(blocks):
                assert os.pwrite(fd, block(writer, k, size), k * size) == size
            for k in range(blocks):      # served from the buffer and the native file together
                assert os.pread(fd, size, k * size) == block(writer, k, size), f"writer {writer} block {k}"
            os.close(fd)
        except Exception as err:  # reported by the main thread
            errors.append(err)

    threads = [threading.Thread(target=write_file, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    for writer in range(4):
        expected = b"".join(block(writer, k, size) for k in range(blocks))
        assert (mount.source / f"w{writer}").read_bytes() == expected
    counters = mount.unmount()
    assert counters["config"]["own_loop"] is True
    assert counters["counters"]["adopted_writes"] == 4 * blocks
    assert counters["counters"]["copied_writes"] == 0


def test_small_io_unit_uses_receive_buffers_large_enough_for_every_request(bfuse_mount):
    """io_unit=4k: the loop's buffers still hold any request (the kernel refuses shorter reads of /dev/fuse)."""
    mount = bfuse_mount("preset=bfuse,splice=0,io_unit=4k,entry=64k,buffer=256k")
    data = os.urandom(300 * KIB + 17)
    (mount.mountpoint / "f").write_bytes(data)
    (mount.mountpoint / "d").mkdir()
    os.symlink("../f", mount.mountpoint / "d" / "link")
    assert (mount.mountpoint / "d" / "link").read_bytes() == data
    counters = mount.unmount()
    assert counters["ops"]["write"]["requests"] >= 76        # 4 KiB requests
    assert (mount.source / "f").read_bytes() == data


def test_loop_ends_on_unmount_with_idle_and_busy_threads(bfuse_mount):
    mount = bfuse_mount("preset=bfuse,splice=0,threads=8")
    (mount.mountpoint / "f").write_bytes(b"x" * MIB)
    counters = mount.unmount()                        # every worker was blocked in read(2) or serving
    assert mount.process.returncode == 0
    assert counters["config"]["threads"] == 8
    assert (mount.source / "f").read_bytes() == b"x" * MIB


def test_loop_ends_on_sigint_and_writes_buffered_data(bfuse_mount):
    """SIGINT while 4 workers sit in read(2): the loop stops them, the buffer is written out, the mount goes."""
    mount = bfuse_mount("preset=bfuse,splice=0,flush_ms=60s")
    fd = os.open(mount.mountpoint / "f", os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"s" * (600 * KIB))
    assert (mount.source / "f").stat().st_size == 0
    mount.process.send_signal(signal.SIGINT)
    mount.process.wait(timeout=10)
    try:
        os.close(fd)
    except OSError:
        pass   # the mount is gone
    lazy_unmount(mount.mountpoint)
    assert mount.process.returncode == 0
    assert (mount.source / "f").read_bytes() == b"s" * (600 * KIB)
    assert not is_mounted(mount.mountpoint)


def test_libfuse_loop_when_asked_or_with_splice(bfuse_mount):
    for k, (options, own_loop) in enumerate([("preset=bfuse,own_loop=0", False), ("preset=bfuse,splice=1", False),
                                             ("preset=bfuse", False), ("preset=bfuse,splice=0", True),
                                             ("preset=nobuf,own_loop=1", True)]):
        mount = bfuse_mount(options, name=f"m{k}")
        (mount.mountpoint / "f").write_bytes(b"y" * MIB)
        counters = mount.unmount()
        assert counters["config"]["own_loop"] is own_loop, options
        assert (mount.source / "f").read_bytes() == b"y" * MIB
