"""f2fs live on the virtual phone (Debian's 6.1 kernel, /data on f2fs): `mobiperf run -t adb:...` captures the
workloads of tests/fixtures/f2fs/capture.py afresh, and the analysis gives what f2fs's design says
(tests/support/f2fs_checks.py), as the golden captures of the same workloads do offline
(tests/golden/test_f2fs_layers.py); and mobiperf inside the phone builds `--stack f2fs` on its kernel. Slow: a
run under TCG takes minutes."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import polars as pl
import pytest

from f2fs_checks import check_appending_fdatasyncs, check_sync_checkpoint
from f2fs_guest import DISK_SERIAL, build_mobiperf_disk, install_wrapper, mobiperf_in_guest
from mobiperf.core.f2fs_disk import decode_super
from mobiperf.core.runstore import RunDir
from mobiperf.orchestration import pipeline
from vphone_fixtures import PhoneDevice

pytest_plugins = ["adb_fixtures", "vphone_fixtures"]
pytestmark = pytest.mark.slow
CAPTURE = Path(__file__).resolve().parents[1] / "fixtures" / "f2fs" / "capture.py"


def _capture(phone: PhoneDevice, name: str, dest: Path) -> tuple[RunDir, dict]:
    spec = importlib.util.spec_from_file_location("f2fs_capture", CAPTURE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    env = dict(os.environ, ANDROID_ADB_SERVER_PORT=str(phone.server_port))
    run = RunDir.open(module.capture(f"adb:{phone.serial}", name, timeout_s=1800, dest_root=dest, env=env))
    for sub in ("tables", "results"):
        (run.path / sub).mkdir(exist_ok=True)
    return run, pipeline.analyze(run, reparse=True)


def test_appending_fdatasyncs_on_the_phone(vphone: PhoneDevice, tmp_path):
    run, results = _capture(vphone, "append-fdatasync", tmp_path)
    sb = decode_super((run.path / "raw" / "rep0" / "layout" / "f2fs_sb.bin").read_bytes())  # read with the phone's dd
    assert sb.fields["main_blkaddr"] > sb.fields["ssa_blkaddr"] > sb.fields["cp_blkaddr"]
    check_appending_fdatasyncs(results["io_span"], run.read_table("fsync_event"))


def test_sync_forces_a_checkpoint_on_the_phone(vphone: PhoneDevice, tmp_path):
    run, results = _capture(vphone, "sync-checkpoint", tmp_path)
    check_sync_checkpoint(results["io_span"])


def test_f2fs_stack_built_inside_the_phone(start_vphone, tmp_path):
    """`--stack f2fs` working for real: mobiperf inside the phone (its kernel has f2fs; tests/support/f2fs_guest.py)
    builds the stack as it builds ext4's (a loop device over an image file, mkfs.f2fs, mount), traces and
    analyses it; the run, pulled back, re-analyses here to what f2fs's design says. The file is in the fresh file
    system's root, which mkfs's checkpoint already has: no fdatasync needs a checkpoint, each writes its data
    block, its node block and a flush."""
    disk = build_mobiperf_disk(tmp_path / "mobiperf.f2fs")
    phone = start_vphone(extra_disks={DISK_SERIAL: disk}, tcg_cpu="max")
    install_wrapper(phone, tmp_path)
    remote = "/data/local/tmp/runs/f2fs-stack"
    done = mobiperf_in_guest(phone, "run", "--stack", "f2fs", "--image-size", "256M", "--no-report", "-o", remote,
                             "--", "mobibench", "-p", ".", "-f", "400", "-r", "4", "-a", "4", "-y", "8", "-q",
                             "--no-drop-caches")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    phone.server.client("-s", phone.serial, "pull", remote, str(tmp_path), timeout=600)
    left = mobiperf_in_guest(phone, "doctor", timeout=600)
    assert "no leftovers" in left.stdout + left.stderr, left.stdout + left.stderr
    run = RunDir.open(tmp_path / "f2fs-stack")
    meta = run.read_meta()
    assert meta["stack"] == "f2fs" and meta["target"]["kernel"].startswith("6.1.")
    rep = meta["repetitions"][0]
    assert rep["exit_code"] == 0 and rep["stack"]["filesystem"] == "f2fs"
    assert rep["stack"]["device"].startswith("/dev/loop")
    sb = decode_super((run.path / "raw" / "rep0" / "layout" / "f2fs_sb.bin").read_bytes())
    assert sb.fields["block_count"] == (256 << 20) // 4096      # the stack's own 256 MiB image
    # re-parsed here from the raw traces, not trusted from the phone: under TCG, CPython 3.11 with these wheels
    # paired the block events of one capture into 321 requests where this host pairs the same events into 309
    results = pipeline.analyze(run, reparse=True, force=True)
    check_appending_fdatasyncs(results["io_span"], run.read_table("fsync_event"))
    regions = set(results["block_io"].filter(pl.col("op") == "write")["region"])
    assert {"data", "node"} <= regions, regions
