"""Shared fixtures: the built reference binaries, and the guard that every test leaves the machine as it found it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
REFERENCE_IMPL = REPO / "reference-impl"


@pytest.fixture(scope="session")
def reference_binary():
    """Callable: name -> path of reference-impl/bin/<name>, built by the reference-impl Makefile if missing."""

    def find(name: str) -> Path:
        path = REFERENCE_IMPL / "bin" / name
        if not path.exists():
            subprocess.run(["make", "-s", "-C", str(REFERENCE_IMPL)], check=True, timeout=600)
        if not path.exists():
            pytest.fail(f"reference-impl did not build bin/{name}")
        return path

    return find


def is_root() -> bool:
    return os.geteuid() == 0


needs_root = pytest.mark.skipif(not is_root(), reason="needs root (loop devices, mounts, tracefs)")
needs_fuse = pytest.mark.skipif(not (os.path.exists("/dev/fuse") and shutil.which("fusermount3")),
                                reason="needs /dev/fuse and fusermount3 (Debian package fuse3)")


def _machine_state() -> dict[str, set[str]]:
    """What a mobiperf run may create machine-wide: mounts, loop devices, tracefs instances (ours by name)."""
    mounts = {line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()}
    loops = subprocess.run(["losetup", "-a"], capture_output=True, text=True, timeout=30).stdout.splitlines()
    instances = set()
    for tracefs in ("/sys/kernel/tracing", "/sys/kernel/debug/tracing"):
        if os.path.isdir(f"{tracefs}/instances"):
            instances = set(os.listdir(f"{tracefs}/instances"))
            break
    ours = ("mobiperf",)  # the stack lives under /var/tmp/mobiperf, instances are named mobiperf-*
    return {"mounts": {m for m in mounts if any(o in m for o in ours)},
            "loop devices": {line for line in loops if any(o in line for o in ours)},
            "tracefs instances": {i for i in instances if i.startswith("mobiperf")}}


@pytest.fixture
def clean_machine():
    """Asserts that the test left no mount, loop device or tracefs instance of mobiperf's behind."""
    before = _machine_state()
    yield
    after = _machine_state()
    leftovers = {kind: sorted(after[kind] - before[kind]) for kind in after if after[kind] - before[kind]}
    assert not leftovers, f"left behind: {leftovers}"


def pytest_addoption(parser):
    parser.addoption("--regen-golden", action="store_true",
                     help="rewrite the expected tables of the golden traces from what the analyzers produce now")


def pytest_configure(config):
    if config.getoption("--regen-golden"):
        os.environ["MOBIPERF_REGEN_GOLDEN"] = "1"  # read by the golden tests
