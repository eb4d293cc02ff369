"""bfuse mounts for the FUSE tests: start a daemon over a source directory and wait for its mount, stop it and
unmount, and the fixtures (bfuse_binary, bfuse_mount) the tests of tests/fuse share."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

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
