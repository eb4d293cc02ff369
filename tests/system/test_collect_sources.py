"""Every trace source through a real `mobiperf run --source ... --event-set ...` (root): ftrace event sets, the workload-only syscalls instance,
strace, blktrace (blk tracer at the top level, restored), the layout snapshot and target facts; and a real SIGINT
in the middle of such a run leaves tracefs, mounts and loop devices as they were."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import polars as pl
import pytest

from conftest import needs_root

pytestmark = needs_root
TRACEFS = "/sys/kernel/tracing"
TOP_KNOBS = ("current_tracer", "options/bin", "options/context-info", "tracing_on")


def ours(pid: int) -> dict[str, list[str]]:
    """What the run of process pid has on the machine: its stack's mounts and loop devices, its instances."""
    mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()
              if f"/stack-{pid}-" in line]
    loops = [line for line in subprocess.run(["losetup", "-a"], capture_output=True, text=True,
                                             timeout=30).stdout.splitlines() if f"/stack-{pid}-" in line]
    instances = [i for i in os.listdir(f"{TRACEFS}/instances") if i.startswith(f"mobiperf-cxtest-{pid}-")]
    return {"mounts": mounts, "loop devices": loops, "tracefs instances": instances}


def top_level_state() -> dict[str, str]:
    return {k: Path(f"{TRACEFS}/{k}").read_text().strip() for k in TOP_KNOBS}


def blk_tracer_free() -> bool:
    return (Path(f"{TRACEFS}/current_tracer").read_text().strip() == "nop"
            and not Path(f"{TRACEFS}/set_event").read_text().strip())


def driver(tmp_path: Path) -> Path:
    """`mobiperf run` with tracefs instance names this test can recognise on a machine shared with other runs."""
    script = tmp_path / "run_named.py"
    script.write_text(textwrap.dedent("""
        import itertools, os, sys
        from mobiperf.collectors import ftrace
        counter, init = itertools.count(), ftrace.FtraceCollector.__init__
        def named(self, *a, **kw):
            kw.setdefault("name", f"mobiperf-cxtest-{os.getpid()}-{next(counter)}")
            init(self, *a, **kw)
        ftrace.FtraceCollector.__init__ = named
        from mobiperf.cli import main
        sys.argv = ["mobiperf", *sys.argv[1:]]
        main()
    """))
    return script


def run_args(sources: list[str], event_sets: list[str]) -> list[str]:
    return [a for s in sources for a in ("--source", s)] + [a for e in event_sets for a in ("--event-set", e)]


@pytest.fixture
def sources():
    wanted = ["ftrace", "syscalls", "strace", "layout", "facts"]
    if blk_tracer_free():
        wanted.append("blktrace")
    return wanted


def test_every_source_collects_and_parses(tmp_path, sources):
    before_top = top_level_state()
    out = tmp_path / "all"
    script = driver(tmp_path)
    proc = subprocess.Popen([sys.executable, str(script), "run", "--stack", "ext4", "-o", str(out),
                             *run_args(sources, ["ext4", "jbd2", "writeback"]), "--",
                             "dd", "if=/dev/zero", "of=f", "bs=4k", "count=200", "oflag=direct", "conv=fsync"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    assert proc.returncode == 0, stderr[-2000:]
    assert top_level_state() == before_top and ours(proc.pid) == {"mounts": [], "loop devices": [],
                                                                  "tracefs instances": []}
    meta = json.loads((out / "run.json").read_text())
    rep = meta["repetitions"][0]
    assert {"ftrace", "syscalls", "strace", "layout", "facts"} <= set(rep)
    assert rep["facts"]["device"]["path"] == rep["stack"]["device"] and rep["facts"]["memory"]["MemTotal_bytes"] > 0
    assert any(" ext4 " in m for m in rep["facts"]["mounts"])
    tables = out / "tables"
    calls = pl.read_parquet(tables / "syscall_io.parquet")
    for source in ("strace", "ftrace"):
        writes = calls.filter((pl.col("source") == source) & (pl.col("syscall") == "write")
                              & (pl.col("request_bytes") == 4096))
        assert len(writes) == 200 and set(writes["ret"]) == {4096}, source
        assert len(calls.filter((pl.col("source") == source) & (pl.col("syscall") == "fsync"))) == 1, source
    assert calls.filter(pl.col("source") == "strace")["path"].str.ends_with("/f").any()
    # Only the workload's system calls: every ftrace row belongs to the pids strace saw.
    assert set(calls.filter(pl.col("source") == "ftrace")["pid"]) <= set(
        calls.filter(pl.col("source") == "strace")["pid"])
    fsync = pl.read_parquet(tables / "fsync_event.parquet")
    assert fsync["phase"].to_list() == ["enter", "exit"]
    assert len(pl.read_parquet(tables / "jbd2_run_stats.parquet")) >= 1
    extents = pl.read_parquet(tables / "file_extent.parquet")
    assert extents.filter((pl.col("region") == "file") & (pl.col("path") == "f"))["length_bytes"].sum() == 819200
    assert len(extents.filter(pl.col("region") == "journal")) >= 1
    writes = pl.read_parquet(tables / "block_event.parquet").filter(pl.col("event") == "block_rq_issue")
    assert writes.filter(pl.col("rwbs").cast(pl.Utf8).str.contains("W"))["size_bytes"].sum() >= 819200
    if "blktrace" in sources:
        assert rep["blktrace"]["mode"] in ("tool", "blk-tracer")
        blk = pl.read_parquet(tables / "blktrace_event.parquet")
        is_write = pl.col("rwbs").cast(pl.Utf8).str.contains("W")  # block_event's rwbs is categorical
        issued = blk.filter((pl.col("event") == "block_rq_issue") & is_write)
        assert issued["size_bytes"].sum() >= 819200
        assert set(blk["dev_minor"]) == {rep["stack"]["dev_minor"]}


def test_sigint_mid_run_restores_everything(tmp_path, sources):
    before_top = top_level_state()
    out = tmp_path / "interrupted"
    script = driver(tmp_path)
    proc = subprocess.Popen([sys.executable, str(script), "run", "--stack", "ext4", "-o", str(out),
                             *run_args(sources, ["ext4", "jbd2"]), "--",
                             "sh", "-c", "dd if=/dev/zero of=f bs=4k count=50 oflag=direct; sleep 47.5"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 90
        while not (out / "raw" / "rep0" / "strace.log").exists() or \
                b"sleep" not in (out / "raw" / "rep0" / "strace.log").read_bytes():
            assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read()
            time.sleep(0.1)
        during = ours(proc.pid)
        assert len(during["tracefs instances"]) == 2 and during["mounts"] and during["loop devices"], during
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    assert proc.returncode == 130, stderr[-2000:]
    assert json.loads((out / "run.json").read_text())["status"] == "incomplete"
    assert top_level_state() == before_top
    assert ours(proc.pid) == {"mounts": [], "loop devices": [], "tracefs instances": []}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        assert b"47.5" not in cmd, "the workload outlived the run"


@pytest.mark.parametrize("batch", [None, 0.2], ids=["blocking", "batched"])
def test_binary_pages_match_the_text_trace(tmp_path, batch):
    """trace_pipe_raw pages and trace_pipe text of the same workload on a loop device of the test's own."""
    from mobiperf.collectors.ftrace import FtraceCollector, block_event_specs
    from mobiperf.collectors.parse import parse_raw_dir
    from mobiperf.target.transport import LocalTransport

    image = tmp_path / "disk.img"
    subprocess.run(["truncate", "-s", "64M", str(image)], check=True, timeout=30)
    dev = subprocess.run(["losetup", "--find", "--show", "--direct-io=on", str(image)], capture_output=True,
                         text=True, check=True, timeout=30).stdout.strip()
    counts = {}
    try:
        major, minor = map(int, Path(f"/sys/block/{Path(dev).name}/dev").read_text().split(":"))
        for raw in (True, False):
            out = tmp_path / ("raw" if raw else "text")
            name = f"mobiperf-cxtest-{os.getpid()}-{'raw' if raw else 'text'}"
            with FtraceCollector(LocalTransport(), TRACEFS, block_event_specs([(major, minor)]), out, name=name,
                                 raw_pages=raw, batch_interval_s=batch) as collector:
                collector.start()
                Path(collector.marker_path).write_text("window")
                subprocess.run(["dd", "if=/dev/zero", f"of={dev}", "bs=4k", "count=300", "oflag=direct"],
                               capture_output=True, check=True, timeout=120)
                assert collector.stop()["lost_events"] == 0
            assert not Path(f"{TRACEFS}/instances/{name}").exists()
            parsed = parse_raw_dir(out, 0)
            events = parsed.tables["block_event"]
            counts[raw] = dict(events.group_by("event").len().iter_rows())
            assert parsed.tables["trace_marker"]["text"].to_list() == ["window"]
            if raw:
                assert (events["ts"] % 1000 != 0).any()  # nanoseconds
    finally:
        subprocess.run(["losetup", "-d", dev], timeout=30)
    assert counts[True] == counts[False]
    assert counts[True]["block_rq_complete"] == 300
