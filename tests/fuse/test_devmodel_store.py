"""The throttled store end to end: devmodel daemon, a loop device on its disk.img, ext4 on top.

Real mounts under tmp_path; every step has a timeout and is undone in a finalizer (unmount, detach, stop).
Timing bounds are generous: the machine is shared and its CPU contended.
"""

from __future__ import annotations

import mmap
import os
import subprocess
import time
from contextlib import ExitStack
from pathlib import Path

import pytest

from mobiperf.stack.device_model import ThrottledStore, summarize_device_counters
from mobiperf.core.errors import StackError
from conftest import needs_fuse, needs_root

pytestmark = [needs_root, needs_fuse]

MiB = 1 << 20
DEVICE_SIZE = 128 * MiB


def _run(argv: list[str], timeout: float = 30) -> str:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=True).stdout


class Stack:
    """A store (or a plain file), its loop device and optionally ext4 on it, torn down in reverse."""

    def __init__(self, tmp_path: Path, daemon: Path, cleanup: ExitStack):
        self.tmp_path = tmp_path
        self.daemon = daemon
        self.cleanup = cleanup
        self.store: ThrottledStore | None = None

    def device(self, profile: str | None) -> str:
        """A loop device on a throttled store with `profile`, or on a plain file when profile is None."""
        backing = self.tmp_path / "backing.img"
        if profile is None:
            with open(backing, "wb") as f:
                f.truncate(DEVICE_SIZE)
            image = backing
        else:
            self.store = ThrottledStore(backing, DEVICE_SIZE, profile, self.tmp_path, self.daemon)
            image = self.store.__enter__()
            self.cleanup.callback(self.store.__exit__, None, None, None)
        loop = _run(["losetup", "-f", "--show", "--direct-io=on", str(image)]).strip()
        self.cleanup.callback(subprocess.run, ["losetup", "-d", loop], capture_output=True, timeout=30)
        return loop

    def ext4(self, loop: str) -> Path:
        _run(["mkfs.ext4", "-q", "-F", "-E", "nodiscard,lazy_itable_init=1,lazy_journal_init=1", loop], 60)
        mnt = self.tmp_path / "fs"
        mnt.mkdir()
        _run(["mount", loop, str(mnt)])
        self.cleanup.callback(subprocess.run, ["umount", str(mnt)], capture_output=True, timeout=30)
        return mnt


@pytest.fixture
def stack(tmp_path, reference_binary, request):
    cleanup = ExitStack()
    request.addfinalizer(cleanup.close)
    return Stack(tmp_path, reference_binary("devmodel"), cleanup)


def _write_seconds(path: Path | str, size: int, direct: bool, record: int = 512 * 1024) -> float:
    """Write `size` bytes in `record`-byte writes (O_DIRECT, or buffered then one fsync); elapsed seconds."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_DIRECT if direct else 0)
    aligned = mmap.mmap(-1, record)  # page-aligned, as O_DIRECT needs
    aligned.write(os.urandom(record))
    buf = memoryview(aligned)
    fd = os.open(path, flags, 0o644)
    try:
        start = time.monotonic()
        for off in range(0, size, record):
            os.pwrite(fd, buf, off)
        os.fsync(fd)
        return time.monotonic() - start
    finally:
        os.close(fd)


def _delta(after: dict, before: dict, op: str, key: str) -> int:
    return after["ops"][op][key] - before["ops"][op][key]


@pytest.mark.parametrize("direct", [True, False], ids=["o_direct", "buffered_fsync"])
def test_bandwidth_is_enforced_and_counted(stack, direct):
    loop = stack.device("write_bw=50M")
    fs = stack.ext4(loop)
    before = stack.store.counters()
    seconds = _write_seconds(fs / "data", 20 * MiB, direct)
    after = stack.store.counters()

    expected = 20 * MiB / (50 * MiB)  # 0.4 s
    assert 0.85 * expected <= seconds <= 3 * expected, f"20 MiB at 50 MiB/s took {seconds:.3f} s"
    written = _delta(after, before, "write", "bytes")
    assert 20 * MiB <= written <= 22 * MiB  # the data plus ext4's journal and metadata
    assert _delta(after, before, "write", "throttled_ns") > 0
    assert after["profile"]["write_bw_bytes_per_s"] == 50 * MiB
    metrics = summarize_device_counters(after)
    # O_DIRECT reaches the device in file order; buffered writeback interleaves the journal's commits with
    # the flusher's page ranges, so only a good part of it can be sequential.
    assert metrics["device.write.seq_fraction"] > (0.5 if direct else 0.35)


def test_emmc_profile_gives_the_papers_bandwidth(stack):
    loop = stack.device("emmc-2012")
    seconds = _write_seconds(loop, 16 * MiB, direct=True)
    mb_per_s = 16 * MiB / seconds / 1e6
    # nominal 40 MB/s; each 512 KiB request also pays 50 us of command latency
    assert 30 <= mb_per_s <= 40.5, f"emmc-2012 raw sequential write: {mb_per_s:.1f} MB/s"
    c = stack.store.counters()
    assert c["profile"]["name"] == "emmc-2012"
    assert c["ops"]["write"]["seq"] >= 30  # 32 requests of 512 KiB, all but the first sequential


def test_host_profile_adds_little(stack, tmp_path, reference_binary):
    size = 64 * MiB
    with ExitStack() as plain_cleanup:
        plain = Stack(tmp_path / "plain", reference_binary("devmodel"), plain_cleanup)
        plain.tmp_path.mkdir()
        plain_s = min(_write_seconds(plain.device(None), size, direct=True) for _ in range(3))
    loop = stack.device("host")
    host_s = min(_write_seconds(loop, size, direct=True) for _ in range(3))
    c = stack.store.counters()
    assert c["ops"]["write"]["bytes"] == 3 * size
    assert c["ops"]["write"]["throttled_ns"] == 0 and c["ops"]["flush"]["throttled_ns"] == 0
    # FUSE costs two copies and a round trip per request (0.3-0.6x of a plain loop's throughput on this loaded
    # 2-CPU machine, bench/devmodel_bench.py); "little" = far from the ~30x an emulated eMMC imposes
    assert host_s <= 5 * plain_s + 0.5, f"host profile {host_s:.3f} s vs plain loop {plain_s:.3f} s"


def test_flush_cost_is_charged_per_fsync(stack):
    loop = stack.device("flush_lat=20ms")
    before = stack.store.counters()
    fd = os.open(loop, os.O_WRONLY)
    try:
        start = time.monotonic()
        for i in range(10):
            os.pwrite(fd, b"x" * 4096, i * 1 * MiB)
            os.fsync(fd)
        seconds = time.monotonic() - start
    finally:
        os.close(fd)
    after = stack.store.counters()
    flushes = _delta(after, before, "flush", "count")
    assert 10 <= flushes <= 12, f"{flushes} flushes for 10 fsyncs of the raw device"
    assert _delta(after, before, "write", "count") >= 10
    assert seconds >= flushes * 0.020 * 0.95
    assert _delta(after, before, "flush", "throttled_ns") >= flushes * 20_000_000 * 0.9
    assert _delta(after, before, "flush", "service_ns") == flushes * 20_000_000


def test_ext4_fsync_pays_for_its_flushes(stack):
    loop = stack.device("flush_lat=20ms")
    fs = stack.ext4(loop)
    before = stack.store.counters()
    fd = os.open(fs / "db", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        start = time.monotonic()
        for i in range(5):
            os.pwrite(fd, b"y" * 4096, i * 4096)
            os.fsync(fd)
        seconds = time.monotonic() - start
    finally:
        os.close(fd)
    after = stack.store.counters()
    flushes = _delta(after, before, "flush", "count")
    # a journal commit is a REQ_PREFLUSH|FUA write; the loop device has no FUA, so 1-2 flushes per fsync
    assert 5 <= flushes <= 12
    assert seconds >= flushes * 0.020 * 0.9


def test_final_counters_after_exit(stack, tmp_path):
    loop = stack.device("emmc-2012")
    _write_seconds(loop, 2 * MiB, direct=True)
    subprocess.run(["losetup", "-d", loop], capture_output=True, timeout=30, check=True)
    store = stack.store
    store.__exit__(None, None, None)
    assert not os.path.ismount(store.mountpoint)
    final = store.counters()
    assert final["ops"]["write"]["bytes"] == 2 * MiB
    assert final["ops"]["write"]["count"] == 4
    assert sum(final["ops"]["write"]["latency_us_log2"]) == 4
    assert (tmp_path / "devmodel-counters.json").exists()


def test_missing_daemon_is_a_stack_error(tmp_path):
    store = ThrottledStore(tmp_path / "b.img", MiB, "host", tmp_path, tmp_path / "nowhere" / "devmodel")
    with pytest.raises(StackError, match="devmodel daemon not found"):
        store.__enter__()


def test_daemon_failure_is_reported(tmp_path, reference_binary):
    (tmp_path / "not-a-file").mkdir()
    store = ThrottledStore(tmp_path / "not-a-file", MiB, "host", tmp_path, reference_binary("devmodel"))
    with pytest.raises(StackError, match="devmodel failed to start: .*cannot open|not a regular file"):
        store.__enter__()


def test_reads_are_throttled_by_their_own_bandwidth(stack):
    loop = stack.device("read_bw=50M,rand_read_lat=1ms")
    _write_seconds(loop, 10 * MiB, direct=True)  # writes are unthrottled in this profile
    before = stack.store.counters()
    record = 512 * 1024
    buf = mmap.mmap(-1, record)
    fd = os.open(loop, os.O_RDONLY | os.O_DIRECT)
    try:
        start = time.monotonic()
        for off in range(0, 10 * MiB, record):
            assert os.preadv(fd, [buf], off) == record
        seconds = time.monotonic() - start
    finally:
        os.close(fd)
    after = stack.store.counters()
    assert 0.85 * 0.2 <= seconds <= 0.6, f"10 MiB at 50 MiB/s read in {seconds:.3f} s"
    assert _delta(after, before, "read", "bytes") == 10 * MiB
    assert _delta(after, before, "read", "rand") == 1  # the first request; the rest continue it
    assert _delta(after, before, "read", "seq") == 19
    assert _delta(after, before, "write", "count") == 0


def test_daemonized_devmodel_dumps_on_sigusr1_and_unmount(tmp_path, reference_binary):
    """Without -f the daemon forks: its signal thread must be started after the fork."""
    import json
    import signal

    mnt = tmp_path / "mnt"
    mnt.mkdir()
    counters = tmp_path / "c.json"
    subprocess.run(
        [str(reference_binary("devmodel")), "-o", f"profile=host,size=1M,counters={counters}",
         str(tmp_path / "b.img"), str(mnt)],
        capture_output=True, timeout=10, check=True,
    )
    try:
        pid = int(subprocess.run(["pgrep", "-n", "-f", f"counters={counters}"], capture_output=True, text=True,
                                 timeout=10, check=True).stdout.split()[0])
        first = json.loads(counters.read_text())["dump_seq"]
        os.kill(pid, signal.SIGUSR1)
        deadline = time.monotonic() + 5
        while json.loads(counters.read_text())["dump_seq"] == first and time.monotonic() < deadline:
            time.sleep(0.02)
        assert json.loads(counters.read_text())["dump_seq"] == first + 1
    finally:
        subprocess.run(["fusermount3", "-u", str(mnt)], capture_output=True, timeout=10)
    deadline = time.monotonic() + 5
    while json.loads(counters.read_text())["dump_seq"] < first + 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    final = json.loads(counters.read_text())
    assert final["dump_seq"] == first + 2 and final["profile"]["name"] == "host"
