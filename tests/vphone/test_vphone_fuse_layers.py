"""The FUSE and call layers on the virtual phone (Debian's 6.1 kernel: no FUSE events, syscalls and raw_syscalls
events): a workload whose every call is known, 100 writes of 4 KiB each followed by fdatasync, through the phone's
own /sdcard daemon (bindfs, not mobiperf's: its FUSE layer from its /dev/fuse calls and their wake-ups) and through
bFUSE over /data (its request log); the call layer from raw_syscalls. Per fdatasync: its FUSE request, nested
under it, the lower file system under that, and the layers' shares adding up. Slow: a run on the phone takes minutes
under TCG."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import polars as pl
import pytest

pytest_plugins = ["adb_fixtures", "vphone_fixtures"]
pytestmark = pytest.mark.slow

RAW_CALLS = ["--source", "ftrace", "--source", "raw_syscalls", "--source", "layout", "--source", "facts"]
WORKLOAD = ["mobibench", "-p", ".", "-f", "400", "-r", "4", "-a", "0", "-y", "8"]


def _run(vphone, stack: str, out) -> dict:
    env = dict(os.environ, ANDROID_ADB_SERVER_PORT=str(vphone.server_port))
    done = subprocess.run([sys.executable, "-m", "mobiperf", "run", "-t", f"adb:{vphone.serial}", "--stack", stack,
                           "--no-report", "-o", str(out), *RAW_CALLS, "--", *WORKLOAD],
                          capture_output=True, text=True, timeout=3600, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    return {"stdout": done.stdout, "meta": json.loads((out / "run.json").read_text())}


def _assert_nest(out, source: str) -> pl.DataFrame:
    req = pl.read_parquet(out / "tables" / "fuse_req.parquet")
    assert set(req["source"]) == {source}
    wf = pl.read_parquet(out / "results" / "waterfall.parquet").filter(pl.col("syscall") == "fdatasync")
    assert wf.height == 100 and (wf["fuse_requests"] >= 1).mean() >= 0.99
    assert (wf["fuse_ns"] <= wf["dur_ns"]).all() and (wf.filter(pl.col("fs_ns") > 0)["fs_ns"]
                                                      <= wf.filter(pl.col("fs_ns") > 0)["fuse_ns"]).all()
    lb = pl.read_parquet(out / "results" / "layer_breakdown.parquet").group_by("syscall").agg(pl.col("share").sum())
    assert ((lb["share"] - 1).abs() <= 0.01).all()
    calls = pl.read_parquet(out / "tables" / "syscall_io.parquet")
    assert set(calls["source"]) == {"raw_syscalls"} and calls.filter(pl.col("syscall") == "fdatasync").height >= 100
    return req


def test_sdcard_through_the_phones_own_daemon(vphone, tmp_path):
    got = _run(vphone, "dir:/sdcard/kq", tmp_path / "sdcard")
    req = _assert_nest(tmp_path / "sdcard", "dev_fuse_calls")
    assert req.filter(pl.col("opcode_name") == "FUSE_WRITE")["data_bytes"].sum() == 2 * 400 * 1024
    assert "FUSE layer: from the daemon's /dev/fuse reads and writes (bindfs)" in got["stdout"]
    assert "call layer: from raw_syscalls" in got["stdout"]


def test_bfuse_over_data_from_its_request_log(vphone, tmp_path):
    got = _run(vphone, "dir:/data/local/tmp/kq+bfuse", tmp_path / "bfuse")
    req = _assert_nest(tmp_path / "bfuse", "daemon_log")
    assert req.filter((pl.col("opcode_name") == "FUSE_WRITE") & (pl.col("data_bytes") == 4096)).height == 100
    assert "FUSE layer: from bfuse's request log (the trace has no usable FUSE events)" in got["stdout"]
