"""`--stack f2fs` working for real: mobiperf inside a guest whose kernel (Debian's 6.1) has f2fs builds the stack
as it builds ext4's (a loop device over an image file, mkfs.f2fs, mount), traces it and analyses it; the run,
pulled back to this host, re-analyses offline to what f2fs's design says (tests/support/f2fs_checks.py): the
file is in the fresh file system's root, which its first checkpoint (mkfs's) already has, so no fdatasync needs
a checkpoint and each writes its data block, its node block and a flush.
How the guest gets mobiperf: tests/support/f2fs_guest.py.

The guest is named by MOBIPERF_GUEST_KERNEL_DIR: a directory with vmlinuz and initrd.gz of an Android-shaped
guest whose init starts an adbd on port 5555 (the virtual phone's kind); without it the test skips and says
so (MOBIPERF_GUEST_PORT: the host port for its adbd, else a free one). Slow: the guest runs under TCG, mobiperf's own start and analysis inside it take minutes."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path

import polars as pl
import pytest

from f2fs_checks import check_appending_fdatasyncs
from f2fs_guest import booted_guest, build_mobiperf_disk, mobiperf_in_guest
from mobiperf.core.f2fs_disk import decode_super
from mobiperf.core.runstore import RunDir
from mobiperf.orchestration import pipeline

KERNEL_DIR = os.environ.get("MOBIPERF_GUEST_KERNEL_DIR")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not KERNEL_DIR, reason="no guest: set MOBIPERF_GUEST_KERNEL_DIR to a directory "
                                                        "with vmlinuz and initrd.gz of a guest with adbd and f2fs"),
              pytest.mark.skipif(not (shutil.which("qemu-system-x86_64") and shutil.which("sload.f2fs")),
                                 reason="needs qemu-system-x86 and f2fs-tools")]


def _port() -> int:
    """MOBIPERF_GUEST_PORT (the host port QEMU forwards to the guest's adbd), else a free one."""
    if os.environ.get("MOBIPERF_GUEST_PORT"):
        return int(os.environ["MOBIPERF_GUEST_PORT"])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_f2fs_stack_in_a_guest_with_f2fs(tmp_path):
    disk = build_mobiperf_disk(tmp_path / "mobiperf.f2fs")
    remote = "/data/local/tmp/runs/f2fs-stack"
    with booted_guest(Path(KERNEL_DIR), _port(), disk, tmp_path) as serial:
        done = mobiperf_in_guest(serial, "run", "--stack", "f2fs", "--image-size", "256M", "--no-report", "-o",
                                 remote, "--", "mobibench", "-p", ".", "-f", "400", "-r", "4", "-a", "4", "-y",
                                 "8", "-q", "--no-drop-caches")
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        subprocess.run(["adb", "-s", serial, "pull", remote, str(tmp_path)], check=True, capture_output=True,
                       timeout=600)
        left = mobiperf_in_guest(serial, "doctor", timeout=600)
        assert "no leftovers" in left.stdout + left.stderr, left.stdout + left.stderr
    run = RunDir.open(tmp_path / "f2fs-stack")
    meta = run.read_meta()
    assert meta["stack"] == "f2fs" and meta["target"]["kernel"].startswith("6.1.")
    rep = meta["repetitions"][0]
    assert rep["exit_code"] == 0 and rep["stack"]["filesystem"] == "f2fs"
    assert rep["stack"]["device"].startswith("/dev/loop")
    sb = decode_super((run.path / "raw" / "rep0" / "layout" / "f2fs_sb.bin").read_bytes())
    assert sb.fields["block_count"] == (256 << 20) // 4096      # the stack's own 256 MiB image
    # re-parsed here from the raw traces: the guest's own analysis is not trusted (under TCG, this CPython 3.11 and
    # these wheels paired the block events of a capture into 321 requests where this host pairs 309: force)
    results = pipeline.analyze(run, reparse=True, force=True)
    check_appending_fdatasyncs(results["io_span"], run.read_table("fsync_event"))
    regions = set(results["block_io"].filter(pl.col("op") == "write")["region"])
    assert {"data", "node", "checkpoint"} <= regions, regions
