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
