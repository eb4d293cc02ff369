"""Shared fixtures: the built reference binaries, and the guard that every test leaves the machine as it found it.

Tests live by kind, and each folder marks its tests (pytest -m selects by them; `pytest tests/unit` runs in
seconds without root):

    unit/       pure code: parsers, statistics, the run store, the CLI's vocabulary, the house's shape
    golden/     real traces through parse and analyze, against their expected tables
    property/   hypothesis: invariants of pairing, classification and the layer model
    system/     real stacks, tracefs, loop devices, cgroups, studies                       marker: root
    fuse/       the FUSE daemons (bfuse, fjord, fusecore, the device model) on real mounts     marker: fuse
    adb/        the adb path, against the loopback adbd and the Android-shaped device         marker: adb
    vphone/     the virtual phone (a QEMU guest with a kernel of its own, tests/support/vphone)   marker: vphone
    support/    helpers (fixtures, the loopback adbd, oracles, synthetic runs), not tests

A test anywhere that skips without root (needs_root) or without FUSE (needs_fuse) is marked root or fuse too;
`slow` stays a per-test marker (excluded from the default run).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# Test-only helpers (fixture modules, the loopback adbd, synthetic runs, oracles) live in tests/support and are
# imported by their own names.
sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))

# Fixture modules that test modules also import (as pytest_plugins and for their helpers): rewrite their asserts.
pytest.register_assert_rewrite("adb_fixtures", "android_device", "vphone_fixtures")

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


_OWNER_PID = re.compile(r"(?:stack|mobiperf)-(\d+)-")


def _ancestors(pid: int) -> set[int]:
    chain = set()
    while pid > 1 and pid not in chain:
        chain.add(pid)
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return chain


def _someone_elses(item: str) -> bool:
    """A stack or instance whose owner (the pid in its name) is alive and not this test run's descendant: another
    mobiperf on the same machine made it, while this test ran."""
    m = _OWNER_PID.search(item)
    if not m:
        return False
    owner = int(m.group(1))
    return Path(f"/proc/{owner}").exists() and os.getpid() not in _ancestors(owner)


@pytest.fixture
def clean_machine():
    """Asserts that the test left no mount, loop device or tracefs instance of mobiperf's behind."""
    before = _machine_state()
    yield
    after = _machine_state()
    leftovers = {kind: sorted(i for i in after[kind] - before[kind] if not _someone_elses(i)) for kind in after}
    leftovers = {kind: items for kind, items in leftovers.items() if items}
    assert not leftovers, f"left behind: {leftovers}"


FOLDER_MARKERS = {"system": ("root",), "fuse": ("fuse",), "adb": ("adb",), "vphone": ("vphone", "adb", "root")}
SKIP_MARKERS = {"needs root": "root", "needs /dev/fuse": "fuse"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        folder = Path(item.fspath).resolve().parent.name
        names = set(FOLDER_MARKERS.get(folder, ()))
        for mark in item.iter_markers("skipif"):
            reason = mark.kwargs.get("reason", "")
            names.update(m for prefix, m in SKIP_MARKERS.items() if reason.startswith(prefix))
        for name in sorted(names):
            item.add_marker(name)


def pytest_addoption(parser):
    parser.addoption("--regen-golden", action="store_true",
                     help="rewrite the expected tables of the golden traces from what the analyzers produce now")


def pytest_configure(config):
    if config.getoption("--regen-golden"):
        os.environ["MOBIPERF_REGEN_GOLDEN"] = "1"  # read by the golden tests
