"""`strace -c` counts as a parse-stage table (strace_count), and a sweep unit's syscall.* metrics read from it."""

from __future__ import annotations

import json

import polars as pl

from mobiperf.collectors.parse import parse_raw_dir
from mobiperf.core.runstore import RunDir
from mobiperf.core.schema import STRACE_COUNT
from mobiperf.orchestration import sweep

# strace 6.1 `strace -f -qq -c -U calls,name -- sh -c ...` on this host (no errors column: none was asked for),
# after a line of the workload's own stderr
STRACE_C = """\
mobibench: a line of the workload's own
    calls syscall
--------- ----------------
      412 pwrite64
      200 fdatasync
       12 openat
--------- ----------------
      624 total
"""


def test_a_repetitions_strace_c_table_is_the_strace_count_table(tmp_path):
    raw = tmp_path / "rep2"
    raw.mkdir()
    (raw / "stderr.txt").write_text(STRACE_C)
    table = parse_raw_dir(raw, 2).tables["strace_count"]
    assert table.schema == STRACE_COUNT.empty().schema
    assert table.sort("syscall").rows() == [(2, "fdatasync", 200), (2, "openat", 12), (2, "pwrite64", 412)]
    (raw / "stderr.txt").write_text("mobibench: write: No space left on device\n")
    assert "strace_count" not in parse_raw_dir(raw, 2).tables


def test_a_units_syscall_counts_come_from_the_table_else_from_stderr(tmp_path):
    path = tmp_path / "r"
    raw = path / "raw" / "rep0"
    raw.mkdir(parents=True)
    (raw / "stderr.txt").write_text(STRACE_C)
    meta = {"format": "mobiperf-run", "version": 1, "status": "complete", "repetitions": [
        {"index": 0, "exit_code": 0, "workload_ns": 10**9, "counters": {}, "metrics": []}]}
    (path / "run.json").write_text(json.dumps(meta))
    metrics, _ = sweep.manifest_figures(sweep.unit_metrics(path, sweep.CellPlan())[0])   # not parsed: from stderr
    assert (metrics["syscall.pwrite64"], metrics["syscall.openat"]) == (412, 12)
    (path / "tables").mkdir()
    RunDir(path).write_table(STRACE_COUNT, pl.DataFrame(
        {"rep": [0, 1], "syscall": ["pwrite64", "pwrite64"], "calls": [400, 7]},
        schema={"rep": pl.Int32, "syscall": pl.Utf8, "calls": pl.Int64}))
    metrics, _ = sweep.manifest_figures(sweep.unit_metrics(path, sweep.CellPlan())[0])
    assert metrics["syscall.pwrite64"] == 400 and "syscall.openat" not in metrics  # the table's, repetition 0's
