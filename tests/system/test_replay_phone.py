"""Phone traces from elsewhere replayed on the emulated phone's /sdcard stacks and compared (mobiperf replay with
several --stack): the android_fs fixture, and a real public capture of an Android app (the DroidTraceCall strace of
the dialer, tests/fixtures/README.md), on ext4 under the legacy FUSE daemon and under bFUSE, with the 2012 phone's
models. Real loop devices, FUSE daemons, tracefs."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from conftest import needs_fuse, needs_root

pytestmark = [needs_root, needs_fuse]
MOBIPERF = [sys.executable, "-m", "mobiperf"]
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LAYERS = ("syscall", "fuse", "fs", "journal", "block", "device")


def what_if(trace: Path, out: Path, *args: str, timeout: float = 1200) -> subprocess.CompletedProcess:
    done = subprocess.run([*MOBIPERF, "replay", str(trace), "--stack", "ext4+fuse", "--stack", "ext4+bfuse",
                           "--phone", "galaxy-s3-2012", "-o", str(out), *args], capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def assert_compared(done: subprocess.CompletedProcess, out: Path, *, report: bool) -> dict[str, list[str]]:
    text = done.stdout
    assert "== ext4+fuse -> ext4+bfuse" in text
    verdict = text.split("== ext4+fuse -> ext4+bfuse\n", 1)[1].splitlines()[0]
    assert re.search(r"workload\.io_time is [\d.]+x BASE", verdict), verdict
    table = text.split("time by layer", 1)[1].splitlines()[2:2 + len(LAYERS)]
    rows = {line.split()[0]: line.split()[1:] for line in table}
    assert list(rows) == list(LAYERS), text
    assert "where the time moved: all calls" in text       # compare's differential profile, its movers
    assert (out / "compare.html").exists() is report and (out / "1-ext4-fuse" / "report.html").exists() is report
    for run in ("1-ext4-fuse", "2-ext4-bfuse"):
        meta = json.loads((out / run / "run.json").read_text())
        assert meta["status"] == "complete" and meta["replay"]["same_stack"] is False
        assert meta["device"] == "emmc-2012" and meta["fuse_wakeup_ns"] == 430_000    # the phone model's
        held = pl.read_parquet(out / run / "results" / "replay_fidelity.parquet").filter(
            pl.col("tolerance").is_not_null())
        assert held["ok"].all() and set(held["metric"].str.split(".").list.first()) == {"calls", "syscall"}
    return rows


def test_the_android_fs_fixture_on_fuse_and_bfuse(tmp_path, clean_machine):
    out = tmp_path / "what-if"
    done = what_if(FIXTURES / "android" / "k4.14-android-fs.txt", out, "-n", "1", "--no-report")
    assert_compared(done, out, report=False)
    fidelity = pl.read_parquet(out / "1-ext4-fuse" / "results" / "replay_fidelity.parquet")
    replayed = dict(fidelity.select("metric", "replay").rows())
    assert (replayed["calls.pread"], replayed["calls.pwrite"]) == (3, 4)     # the fixture's reads and writes
    assert replayed["syscall.read_bytes"] == 16384 + 131072 + 65536
    # legacy FUSE moves the 128 KiB JPEG read in 4 KiB requests, bFUSE in one: the FUSE layer's time says so
    fuse_reads = {run: pl.read_parquet(out / run / "tables" / "fuse_req.parquet").filter(pl.col("opcode") == 15)
                  for run in ("1-ext4-fuse", "2-ext4-bfuse")}
    assert fuse_reads["1-ext4-fuse"]["data_bytes"].max() <= 4096 < fuse_reads["2-ext4-bfuse"]["data_bytes"].max()


@pytest.mark.slow
def test_a_real_public_capture_of_an_app_on_fuse_and_bfuse(tmp_path, clean_machine):
    out = tmp_path / "what-if"
    done = what_if(FIXTURES / "strace" / "droidtracecall-dialer.strace.gz", out, "-n", "5")
    rows = assert_compared(done, out, report=True)
    assert "128 calls in 8 threads" in done.stdout
    assert "left out or added: the recording has no times" in done.stdout
    fidelity = pl.read_parquet(out / "1-ext4-fuse" / "results" / "replay_fidelity.parquet")
    assert dict(fidelity.filter(pl.col("rep") == 0).select("metric", "replay").rows())["calls.pread"] == 84
    assert float(rows["fuse"][0].replace(",", "")) > 0            # the app's reads went through FUSE
