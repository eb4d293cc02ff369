"""f2fs live on a phone whose /data is f2fs (the virtual phone: Debian's 6.1 kernel): `mobiperf run -t adb:...`
captures the workloads of tests/fixtures/f2fs/capture.py afresh, and the analysis must give what f2fs's design
says (tests/support/f2fs_checks.py), as the golden captures do offline (tests/golden/test_f2fs_layers.py).

The phone is named by MOBIPERF_F2FS_PHONE (adb:127.0.0.1:PORT, the guest's adbd reached through QEMU's user
network; root by su); without it the test skips and says so. Slow: a run under TCG takes minutes."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from f2fs_checks import check_appending_fdatasyncs, check_sync_checkpoint
from mobiperf.core.f2fs_disk import decode_super
from mobiperf.core.runstore import RunDir
from mobiperf.orchestration import pipeline

PHONE = os.environ.get("MOBIPERF_F2FS_PHONE")
CAPTURE = Path(__file__).resolve().parents[1] / "fixtures" / "f2fs" / "capture.py"

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not PHONE, reason="no phone with f2fs /data: set MOBIPERF_F2FS_PHONE=adb:HOST:PORT "
                                                   "(a guest from Debian's 6.1 kernel with its adbd, or a phone)")]


def _capture(name: str, dest: Path) -> tuple[RunDir, dict]:
    spec = importlib.util.spec_from_file_location("f2fs_capture", CAPTURE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    run = RunDir.open(module.capture(PHONE, name, dest_root=dest))
    for sub in ("tables", "results"):
        (run.path / sub).mkdir(exist_ok=True)
    return run, pipeline.analyze(run, reparse=True)


def test_appending_fdatasyncs_on_the_phone(tmp_path):
    run, results = _capture("append-fdatasync", tmp_path)
    layout = run.path / "raw" / "rep0" / "layout"
    sb = decode_super((layout / "f2fs_sb.bin").read_bytes())     # the phone's own superblock, read with dd
    assert sb.fields["main_blkaddr"] > sb.fields["ssa_blkaddr"] > sb.fields["cp_blkaddr"]
    check_appending_fdatasyncs(results["io_span"], run.read_table("fsync_event"))


def test_sync_forces_a_checkpoint_on_the_phone(tmp_path):
    _, results = _capture("sync-checkpoint", tmp_path)
    check_sync_checkpoint(results["io_span"])
