"""bFUSE mounts for tests: start the daemon on tmp dirs, wait for the mount, read its counters, always unmount.

The `bfuse_mount` fixture returns a factory `bfuse_mount("preset=bfuse,flush_ms=60s") -> BfuseMount`; every
mount it made is lazily unmounted (`fusermount3 -uz`) and its daemon reaped or killed in the finalizer. This module
also holds the tests of mounting itself (foreground, daemonized, mount(8) helper argument order, fsname/subtype).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import needs_fuse

MOUNT_TIMEOUT_S = 10.0


def is_mounted(path: Path) -> bool:
    target = str(path)
    with open("/proc/self/mountinfo") as mountinfo:
        return any(line.split()[4] == target for line in mountinfo)


def lazy_unmount(path: Path) -> None:
    if is_mounted(path):
        subprocess.run(["fusermount3", "-uz", str(path)], capture_output=True, timeout=10)


@dataclass
class BfuseMount:
    """One running bfuse daemon: SOURCE dir, MOUNTPOINT, its process and counters file."""

    source: Path
    mountpoint: Path
    process: subprocess.Popen
    counters_path: Path
    stderr_path: Path

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def counters(self) -> dict:
        """Ask the running daemon for its counters (SIGUSR1) and return the JSON."""
        self.counters_path.unlink(missing_ok=True)
        self.process.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + MOUNT_TIMEOUT_S
        while not self.counters_path.exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"no counters after SIGUSR1; stderr: {self.stderr()}")
            time.sleep(0.02)
        return json.loads(self.counters_path.read_text())

    def unmount(self) -> dict:
        """Unmount cleanly (the daemon flushes and writes its counters) and return the final counters."""
        subprocess.run(["fusermount3", "-u", str(self.mountpoint)], check=True, capture_output=True, timeout=10)
        self.process.wait(timeout=MOUNT_TIMEOUT_S)
        return json.loads(self.counters_path.read_text())

    def kill(self) -> None:
        """kill -9 the daemon (no flush, no counters) and detach the dead mount."""
        self.process.kill()
        self.process.wait(timeout=MOUNT_TIMEOUT_S)
        lazy_unmount(self.mountpoint)


def start_bfuse(binary: Path, workdir: Path, options: str, source: Path | None = None) -> BfuseMount:
    source = source or workdir / "source"
    mountpoint = workdir / "mnt"
    source.mkdir(parents=True, exist_ok=True)
    mountpoint.mkdir(parents=True, exist_ok=True)
    counters_path = workdir / "counters.json"
    stderr_path = workdir / "bfuse.stderr"
    with open(stderr_path, "wb") as stderr:
        process = subprocess.Popen(
            [str(binary), "-f", "-o", f"{options},counters={counters_path}", str(source), str(mountpoint)],
            stdout=subprocess.DEVNULL, stderr=stderr)
    mount = BfuseMount(source, mountpoint, process, counters_path, stderr_path)
    deadline = time.monotonic() + MOUNT_TIMEOUT_S
    while not is_mounted(mountpoint):
        if process.poll() is not None:
            raise RuntimeError(f"bfuse exited with {process.returncode}: {mount.stderr()}")
        if time.monotonic() > deadline:
            process.kill()
            raise TimeoutError(f"bfuse did not mount within {MOUNT_TIMEOUT_S}s: {mount.stderr()}")
        time.sleep(0.02)
    return mount


def stop_quietly(mount: BfuseMount) -> None:
    lazy_unmount(mount.mountpoint)
    try:
        mount.process.wait(timeout=MOUNT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        mount.process.kill()
        mount.process.wait(timeout=MOUNT_TIMEOUT_S)


@pytest.fixture
def bfuse_binary(reference_binary) -> Path:
    return reference_binary("bfuse")


@pytest.fixture
def bfuse_mount(bfuse_binary, tmp_path):
    """Factory: bfuse_mount(options, name=..., source=...) -> BfuseMount, unmounted at teardown."""
    mounts: list[BfuseMount] = []

    def make(options: str = "preset=bfuse", name: str = "m", source: Path | None = None) -> BfuseMount:
        mount = start_bfuse(bfuse_binary, tmp_path / name, options, source)
        mounts.append(mount)
        return mount

    yield make
    for mount in mounts:
        stop_quietly(mount)


# ---- tests of mounting itself ----

@needs_fuse
def test_mount_shows_source_and_type_and_counters_name_the_preset(bfuse_mount):
    mount = bfuse_mount("preset=bfuse")
    fields = next(line.split() for line in open("/proc/mounts") if line.split()[1] == str(mount.mountpoint))
    assert fields[0] == str(mount.source)
    assert fields[2] == "fuse.bfuse"
    (mount.mountpoint / "hello").write_text("hello")
    assert (mount.source / "hello").read_text() == "hello"
    counters = mount.unmount()
    assert counters["daemon"] == "bfuse"
    assert counters["preset"] == "bfuse"
    assert counters["config"]["io_unit"] == 512 * 1024
    assert counters["policy"]["entries"] == 4
    assert counters["policy"]["entry_bytes"] == 2 * 1024 * 1024


def _passthrough_kernel() -> bool:
    major, minor = (int(x) for x in os.uname().release.split(".")[:2])
    return (major, minor) >= (6, 9) and os.geteuid() == 0


@needs_fuse
def test_presets_configure_io_unit_threads_and_buffer(bfuse_mount):
    expected = {
        "legacy": (4096, 1, 0, False, False),
        "nobuf": (512 * 1024, 4, 0, False, False),
        "zerocopy": (512 * 1024, 4, 0, True, False),
        "bfuse": (512 * 1024, 4, 4, True, False),                # spliced in: libfuse's loop
        "bfuse,buffer=16M,entry=4M,io_unit=1M,threads=2": (1024 * 1024, 2, 4, True, False),
        "bfuse,splice=0": (512 * 1024, 4, 4, False, True),      # fusecore's loop: buffers adopted
        "bfuse,splice=0,own_loop=0": (512 * 1024, 4, 4, False, False),
        "passthrough": (512 * 1024, 4, 0, False, True),          # kernel passthrough on fusecore's loop
    }
    if not _passthrough_kernel():
        expected.pop("passthrough")
    for k, (preset, (io_unit, threads, entries, splice, own_loop)) in enumerate(expected.items()):
        counters = bfuse_mount(f"preset={preset}", name=f"p{k}").unmount()
        assert counters["config"] == {"io_unit": io_unit, "threads": threads, "splice": splice,
                                      "writeback_cache": False, "own_loop": own_loop,
                                      "passthrough": preset == "passthrough"}, preset
        assert counters["policy"]["entries"] == entries, preset


@needs_fuse
def test_mount_helper_argument_order(bfuse_binary, tmp_path):
    """`mount -t fuse.bfuse SRC MNT -o opts` runs `bfuse SRC MNT -o opts,dev,suid` (via mount.fuse3) and daemonizes."""
    if not os.path.exists("/sbin/mount.fuse3") or os.geteuid() != 0:
        pytest.skip("needs root and /sbin/mount.fuse3 (package fuse3)")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "bfuse").symlink_to(bfuse_binary)
    source, mountpoint, counters = tmp_path / "src", tmp_path / "mnt", tmp_path / "c.json"
    source.mkdir()
    mountpoint.mkdir()
    # mount(8) resets PATH, so call its helper directly with ours; with bfuse in /usr/local/bin,
    # `mount -t fuse.bfuse SRC MNT -o ...` does exactly this.
    env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}")
    try:
        subprocess.run(["/sbin/mount.fuse3", str(source), str(mountpoint), "-t", "bfuse",
                        "-o", f"preset=legacy,counters={counters}"], env=env, check=True, timeout=20,
                       capture_output=True)
        assert is_mounted(mountpoint)
        (mountpoint / "f").write_bytes(b"x" * 10000)
        subprocess.run(["fusermount3", "-u", str(mountpoint)], check=True, timeout=10)
        deadline = time.monotonic() + MOUNT_TIMEOUT_S
        while not counters.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        result = json.loads(counters.read_text())
        assert result["preset"] == "legacy"
        assert result["ops"]["write"] == {"requests": 3, "bytes": 10000}   # 4 KiB IO unit
        assert (source / "f").stat().st_size == 10000
    finally:
        lazy_unmount(mountpoint)
