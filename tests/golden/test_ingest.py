"""`mobiperf ingest`: run directories from a phone's ftrace text, a blk tracer capture and a strace log."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import polars as pl

FIX = Path(__file__).parents[1] / "fixtures"
MOBIPERF = [sys.executable, "-m", "mobiperf"]


def ingest(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*MOBIPERF, "ingest", *args], capture_output=True, text=True, timeout=180)


def test_ingest_phone_ftrace_and_strace(tmp_path):
    out = tmp_path / "phone"
    done = ingest(str(FIX / "ftrace" / "k4.14-android-ufs.txt"), str(FIX / "strace" / "dd-fsync-threads.strace"),
                  "-o", str(out), "--label", "Android 4.14 UFS")
    assert done.returncode == 0, done.stderr
    assert "ftrace     1 file(s)" in done.stdout and "strace     1 file(s)" in done.stdout
    meta = json.loads((out / "run.json").read_text())
    assert meta["status"] == "complete" and meta["stack"] == "Android 4.14 UFS"
    # the span of the trace-clock events: the first block_bio_queue to the last line, f2fs_sync_file_exit
    assert meta["repetitions"][0]["workload_ns"] == 1_520_102_100_000 - 1_520_100_001_000
    assert meta["repetitions"][0]["workload_window"] == "trace span"
    events = pl.read_parquet(out / "tables" / "block_event.parquet")
    assert len(events) == 12 and set(events["dev_major"]) - {-1} == {259}
    calls = pl.read_parquet(out / "tables" / "syscall_io.parquet")
    assert calls.filter(pl.col("syscall") == "pwrite64")["offset_bytes"].to_list() == [8192]
    assert pl.read_parquet(out / "tables" / "jbd2_run_stats.parquet")["tid"].to_list() == [88213]
    assert (out / "report.html").stat().st_size > 10000


def test_ingest_blk_tracer_capture(tmp_path):
    out = tmp_path / "blk"
    done = ingest(str(FIX / "blktrace" / "loop-dd-4k-direct.blkbin"), "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert (out / "raw" / "rep0" / "blktrace" / "loop-dd-4k-direct.blkbin").exists()
    rq = pl.read_parquet(out / "tables" / "block_rq.parquet")
    assert len(rq) == 50 and set(rq["size_bytes"]) == {4096} and set(rq["op"]) == {"write"}
    show = subprocess.run([*MOBIPERF, "show", str(out)], capture_output=True, text=True, timeout=60)
    assert "block.requests{op=write}" in show.stdout and "50" in show.stdout


def test_ingest_refuses_existing_dir_and_missing_file(tmp_path):
    done = ingest(str(tmp_path / "nope.txt"), "-o", str(tmp_path / "x"))
    assert done.returncode == 2 and "no such file" in done.stderr
    (tmp_path / "y").mkdir()
    done = ingest(str(FIX / "ftrace" / "k3.4-mmc-fsync.txt"), "-o", str(tmp_path / "y"))
    assert done.returncode == 2 and "never overwritten" in done.stderr


def test_ingest_trace_cmd_dat(tmp_path):
    """A .dat made by `trace-cmd extract` of an instance of our own, traced on a loop device of our own."""
    import os
    import shutil

    import pytest

    if os.geteuid() != 0 or not shutil.which("trace-cmd") or not os.path.isdir("/sys/kernel/tracing/instances"):
        pytest.skip("needs root, tracefs instances and trace-cmd (Debian: trace-cmd)")
    name = f"mobiperf-test-tc-{os.getpid()}"
    inst = Path("/sys/kernel/tracing/instances") / name
    image = tmp_path / "disk.img"
    subprocess.run(["truncate", "-s", "64M", str(image)], check=True, timeout=30)
    dev = subprocess.run(["losetup", "--find", "--show", "--direct-io=on", str(image)], capture_output=True,
                         text=True, check=True, timeout=30).stdout.strip()
    try:
        major, minor = map(int, Path(f"/sys/block/{Path(dev).name}/dev").read_text().split(":"))
        inst.mkdir()
        for ev in ("block_bio_queue", "block_getrq", "block_rq_issue", "block_rq_complete"):
            (inst / "events" / "block" / ev / "filter").write_text(f"dev == {(major << 20) | minor}")
            (inst / "events" / "block" / ev / "enable").write_text("1")
        (inst / "tracing_on").write_text("1")
        subprocess.run(["dd", "if=/dev/zero", f"of={dev}", "bs=4k", "count=10", "oflag=direct"],
                       capture_output=True, check=True, timeout=60)
        (inst / "tracing_on").write_text("0")
        dat = tmp_path / "trace.dat"
        subprocess.run(["trace-cmd", "extract", "-B", name, "-o", str(dat)], capture_output=True, check=True,
                       timeout=120)
    finally:
        if inst.exists():  # trace-cmd extract removes the instance itself; if it did not, we do
            inst.rmdir()
        subprocess.run(["losetup", "-d", dev], timeout=30)
    out = tmp_path / "tc"
    done = ingest(str(dat), "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert "trace-cmd  1 file(s)" in done.stdout
    # The .dat also holds the top-level buffer, where other tracing users of this machine may have left events
    # (trace_marker writes of earlier tests): both are read, merged by time, as `trace-cmd report` shows them.
    events = pl.read_parquet(out / "tables" / "block_event.parquet").filter(
        (pl.col("dev_minor") == minor) & (pl.col("comm") == "dd"))
    counts = dict(events.group_by("event").len().iter_rows())
    assert counts == {"block_bio_queue": 10, "block_getrq": 10, "block_rq_issue": 10}
    assert set(events["size_bytes"]) == {4096}


def test_lost_events_are_reported_per_source(tmp_path):
    """`CPU:N [LOST n EVENTS]` in a phone's trace: run.json's parse summary names the file, show warns."""
    trace = tmp_path / "lossy.txt"
    lines = (FIX / "ftrace" / "k4.14-android-ufs.txt").read_text().splitlines()
    lines.insert(5, "CPU:2 [LOST 4321 EVENTS]")
    trace.write_text("\n".join(lines) + "\n")
    out = tmp_path / "lossy"
    assert ingest(str(trace), "-o", str(out)).returncode == 0
    meta = json.loads((out / "run.json").read_text())
    assert meta["parse"]["repetitions"]["0"]["lost_events"] == {str(trace): 4321}  # filed under the user's name
    show = subprocess.run([*MOBIPERF, "show", str(out)], capture_output=True, text=True, timeout=60)
    assert f"{trace}: 4321 events were lost" in show.stdout


def test_ingest_binary_pages_with_their_formats(tmp_path):
    out = tmp_path / "pages"
    done = ingest(str(FIX / "ftrace" / "raw-6.18-dd12"), "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert "ftrace-raw 1 file(s)" in done.stdout
    rq = pl.read_parquet(out / "tables" / "block_rq.parquet")
    assert len(rq) == 12 and set(rq["size_bytes"]) == {4096}
    assert pl.read_parquet(out / "tables" / "trace_marker.parquet")["text"].to_list() == ["hello marker"]
