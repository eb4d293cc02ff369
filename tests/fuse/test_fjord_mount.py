"""A Fjord daemon on a real FUSE mount, for the Fjord tests: start, counters, clean unmount, kill -9.

`FjordMount` runs `fjord -f -o preset=...` as a child process with stderr in a file, waits until the mount shows in
/proc/self/mountinfo, reads the counters JSON (SIGUSR1, the contract mobiperf relies on), and unmounts with
`fusermount3 -u` (or `-uz` after a kill). Every wait has a timeout; the `fjord_mount` fixture unmounts and kills in
its finalizer whatever a test left behind.

The tests in this module check the counters contract itself and that the six presets mirror SOURCE.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import needs_fuse, needs_root

pytestmark = [needs_root, needs_fuse]

PRESETS = ["native", "logging", "rambuf", "both", "fjord-ram", "fjord-both"]


def is_mounted(path: Path) -> bool:
    target = str(path)
    with open("/proc/self/mountinfo") as info:
        return any(line.split()[4] == target for line in info)


class FjordFailed(RuntimeError):
    pass


class FjordMount:
    """One fjord daemon serving `source` at `mountpoint`."""

    def __init__(self, binary: Path, source: Path, mountpoint: Path, preset: str, **options: str | int):
        self.binary = binary
        self.source = source
        self.mountpoint = mountpoint
        self.preset = preset
        self.options = dict(options)
        self.counters_path = mountpoint.parent / f"{mountpoint.name}.counters.json"
        self.stderr_path = mountpoint.parent / f"{mountpoint.name}.stderr"
        self.proc: subprocess.Popen | None = None

    def argv(self) -> list[str]:
        opts = ",".join([f"preset={self.preset}", f"counters={self.counters_path}"] +
                        [f"{key}={value}" for key, value in self.options.items()])
        return [str(self.binary), "-f", "-o", opts, str(self.source), str(self.mountpoint)]

    def start(self, timeout: float = 15) -> "FjordMount":
        self.source.mkdir(parents=True, exist_ok=True)
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        self.counters_path.unlink(missing_ok=True)
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(self.argv(), stdout=subprocess.DEVNULL, stderr=err)
        deadline = time.monotonic() + timeout
        while not is_mounted(self.mountpoint):
            if self.proc.poll() is not None:
                raise FjordFailed(f"fjord exited {self.proc.returncode}: {self.stderr()}")
            if time.monotonic() > deadline:
                raise FjordFailed(f"fjord did not mount within {timeout}s: {self.stderr()}")
            time.sleep(0.02)
        return self

    def stderr(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def counters(self, timeout: float = 10) -> dict:
        """Ask the running daemon for its counters (SIGUSR1) and return the JSON."""
        before = self.counters_path.stat().st_mtime_ns if self.counters_path.exists() else 0
        os.kill(self.proc.pid, signal.SIGUSR1)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.counters_path.exists() and self.counters_path.stat().st_mtime_ns != before:
                return json.loads(self.counters_path.read_text())
            time.sleep(0.02)
        raise FjordFailed("no counters after SIGUSR1")

    def unmount(self, timeout: float = 30) -> dict:
        """Clean unmount; returns the counters written at unmount."""
        subprocess.run(["fusermount3", "-u", str(self.mountpoint)], check=True, timeout=timeout)
        self.proc.wait(timeout=timeout)
        return json.loads(self.counters_path.read_text())

    def kill9(self, timeout: float = 30) -> None:
        """Crash the daemon: SIGKILL, then detach the dead mount."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=timeout)
        subprocess.run(["fusermount3", "-uz", str(self.mountpoint)], timeout=timeout,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def cleanup(self) -> None:
        if is_mounted(self.mountpoint):
            subprocess.run(["fusermount3", "-uz", str(self.mountpoint)], timeout=30,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)


@pytest.fixture
def fjord_mount(reference_binary, tmp_path):
    """Callable (preset, name="m", **options) -> started FjordMount over tmp_path/<name>-src."""
    mounts: list[FjordMount] = []

    def start(preset: str, name: str = "m", **options) -> FjordMount:
        mount = FjordMount(reference_binary("fjord"), tmp_path / f"{name}-src", tmp_path / f"{name}-mnt", preset,
                           **options)
        mounts.append(mount)
        return mount.start()

    yield start
    for mount in mounts:
        mount.cleanup()


@pytest.mark.parametrize("preset", PRESETS)
def test_presets_mirror_source_and_count(fjord_mount, preset):
    m = fjord_mount(preset, whitelist="cache", log_size="4M")
    (m.mountpoint / "cache").mkdir()
    with open(m.mountpoint / "cache" / "c.dat", "wb") as f:
        f.write(b"c" * 4096)
        os.fsync(f.fileno())
    with open(m.mountpoint / "db.dat", "wb", buffering=0) as f:
        for k in range(8):
            f.write(bytes([k]) * 4096)
        os.fdatasync(f.fileno())
    with open(m.mountpoint / "big.dat", "wb") as f:
        f.write(b"B" * (256 * 1024))
    assert (m.mountpoint / "db.dat").read_bytes()[4096 * 3] == 3
    counters = m.unmount()
    # after unmount every byte is in SOURCE
    assert (m.source / "db.dat").read_bytes() == b"".join(bytes([k]) * 4096 for k in range(8))
    assert (m.source / "cache" / "c.dat").read_bytes() == b"c" * 4096
    assert (m.source / "big.dat").stat().st_size == 256 * 1024
    policy = counters["policy"]
    assert counters["daemon"] == "fjord" and counters["preset"] == preset
    assert policy["fjord_preset"] == preset
    assert policy["bytes_native"] >= 8 * 4096 + 4096 + 256 * 1024
    relaxed = preset.startswith("fjord-")
    assert policy["fsyncs_relaxed"] == (1 if relaxed else 0)
    assert policy["fsyncs_honoured"] == (1 if relaxed else 2)
    if preset == "native":
        assert policy["writes_buffered"] == policy["writes_logged"] == 0
    if preset in ("rambuf", "both", "fjord-ram", "fjord-both"):
        assert policy["writes_buffered"] >= 9
        assert policy["writes_merged"] >= 7  # the eight 4 KiB blocks of db.dat coalesce
        assert policy["writes_bypassed"] >= 1  # 256 KiB >= bypass (64k)
    if preset in ("logging", "both", "fjord-both"):
        assert policy["writes_logged"] >= 1
        assert policy["bytes_log"] > 0
        assert policy["replay"]["stop_reason"] == "end"
    else:
        assert policy["bytes_log"] == 0 and policy["replay"] is None
    assert policy["mechanisms"] == {"rambuf": preset not in ("native", "logging"),
                                    "log": preset in ("logging", "both", "fjord-both"),
                                    "relax": relaxed}


def test_buffered_data_is_visible_before_any_flush(fjord_mount):
    m = fjord_mount("fjord-ram", whitelist="cache", flush_ms="60s")
    (m.mountpoint / "cache").mkdir()
    path = m.mountpoint / "cache" / "f"
    with open(path, "wb") as f:
        f.write(b"x" * 1000)
        f.flush()
        os.fsync(f.fileno())  # relaxed: nothing is written
        with open(path, "rb") as g:
            assert g.read() == b"x" * 1000
        assert os.stat(path).st_size == 1000
        assert (m.source / "cache" / "f").stat().st_size == 0  # still only in Fjord's RAM
        policy = m.counters()["policy"]
        assert policy["buffer_bytes"] == 1000 and policy["fsyncs_relaxed"] == 1
    # The last close hands it to the native file. FUSE sends RELEASE after close(2) has returned, so the
    # hand-over is asynchronous: wait for it (bounded), then check the bytes.
    native = m.source / "cache" / "f"
    deadline = time.monotonic() + 5
    while native.stat().st_size < 1000 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert native.read_bytes() == b"x" * 1000


@pytest.mark.parametrize("preset", PRESETS)
def test_sqlite_truncate_journal_through_each_preset(fjord_mount, preset):
    import sqlite3

    m = fjord_mount(preset, whitelist="cache", log_size="8M", flush_ms=100)
    rows = {}
    for subdir in ("cache", "data"):
        (m.mountpoint / subdir).mkdir()
        db = sqlite3.connect(m.mountpoint / subdir / "app.db", isolation_level=None)
        db.execute("PRAGMA journal_mode=TRUNCATE")
        db.execute("PRAGMA synchronous=FULL")
        db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
        for k in range(60):
            db.execute("BEGIN")
            db.execute("INSERT INTO t (id, v) VALUES (?, ?)", (k, "x" * 300))
            db.execute("UPDATE t SET v = ? WHERE id = ?", ("y" * 200, k // 2))
            db.execute("COMMIT")
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        rows[subdir] = db.execute("SELECT count(*), sum(length(v)) FROM t").fetchone()
        db.close()
    policy = m.unmount()["policy"]
    assert rows["cache"] == rows["data"] == (60, 30 * 200 + 30 * 300)
    for subdir in ("cache", "data"):  # and natively, after unmount
        db = sqlite3.connect(m.source / subdir / "app.db")
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert db.execute("SELECT count(*) FROM t").fetchone()[0] == 60
        db.close()
    if preset.startswith("fjord-"):
        assert policy["fsyncs_relaxed"] >= 60  # the whitelisted database's commits
    else:
        assert policy["fsyncs_relaxed"] == 0


def test_whitelisted_directory_sync_is_skipped_only_when_nothing_changed(fjord_mount):
    m = fjord_mount("fjord-ram", whitelist="cache")
    cache = m.mountpoint / "cache"
    cache.mkdir()

    def sync_dir(path):
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def dirsyncs():
        policy = m.counters()["policy"]
        return policy["dirsyncs_honoured"], policy["dirsyncs_skipped"]

    (cache / "journal").write_bytes(b"")
    time.sleep(0.1)
    sync_dir(cache)  # the new entry must become durable
    assert dirsyncs() == (1, 0)
    sync_dir(cache)  # nothing changed since: nothing to make durable
    sync_dir(cache)
    assert dirsyncs() == (1, 2)
    (cache / "journal").rename(cache / "journal2")  # a change: honoured again
    sync_dir(cache)
    assert dirsyncs() == (2, 2)
    (m.mountpoint / "data").mkdir()
    sync_dir(m.mountpoint / "data")  # a critical directory: always a real sync, not counted here
    sync_dir(m.mountpoint / "data")
    assert dirsyncs() == (2, 2)
    assert m.unmount()["policy"]["dirsyncs_skipped"] == 2
