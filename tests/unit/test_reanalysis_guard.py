"""Re-analysis never replaces a run's figures with weaker data silently: a raw trace damaged since the run was
analysed (here: cut to its first half) makes `mobiperf analyze` refuse and change nothing; --force goes on and
records the loss in run.json. The trace is a real one (tests/fixtures/ftrace: 4 KiB direct O_DSYNC writes)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mobiperf.orchestration import pipeline
from mobiperf.orchestration.reanalysis import WeakerDataError, counts, events_lost, forget_repetition
from mobiperf.core.runstore import RunDir

MOBIPERF = [sys.executable, "-m", "mobiperf"]
TRACE = Path(__file__).parents[1] / "fixtures" / "ftrace" / "k6.18-dd-4k-direct-dsync.txt"


def analyze(run: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([*MOBIPERF, "analyze", str(run), "--format", "json", *extra], capture_output=True,
                          text=True, timeout=300)


def write_requests(run: Path) -> float:
    meta = json.loads((run / "run.json").read_text())
    return next(m["value"] for m in meta["metrics"] if m["name"] == "block.requests" and m["labels"] == {"op": "write"})


@pytest.fixture
def analysed_run(tmp_path) -> Path:
    run = RunDir.create(tmp_path / "run", {"id": "run", "stack": "ext4", "command": ["dd"],
                                           "repetitions": [{"index": 0, "exit_code": 0, "workload_ns": 10**9}],
                                           "warnings": []})
    shutil.copy(TRACE, run.raw_dir(0) / "ftrace.txt")
    run.update_meta(status="complete")
    pipeline.analyze(run, reparse=True)   # what `mobiperf run` does after collecting
    return run.path


def cut_trace(run: Path) -> None:
    trace = run / "raw" / "rep0" / "ftrace.txt"
    lines = trace.read_text().splitlines(keepends=True)
    trace.write_text("".join(lines[:len(lines) // 2]))


def test_a_damaged_trace_is_refused_and_changes_nothing(analysed_run):
    before_meta = (analysed_run / "run.json").read_text()
    before_table = (analysed_run / "tables" / "block_rq.parquet").read_bytes()
    assert write_requests(analysed_run) > 256   # dd's 256 O_DSYNC writes and their journal commits
    cut_trace(analysed_run)
    done = analyze(analysed_run)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "re-parsing the raw traces found fewer events than the run recorded" in done.stderr
    assert "rep 0 ftrace lines: 11360 before, 5680 now" in done.stderr, done.stderr
    assert "mobiperf analyze --force" in done.stderr
    assert (analysed_run / "run.json").read_text() == before_meta   # nothing replaced
    assert (analysed_run / "tables" / "block_rq.parquet").read_bytes() == before_table


def test_force_replaces_and_records_the_loss(analysed_run):
    full = write_requests(analysed_run)
    cut_trace(analysed_run)
    pipeline.analyze(RunDir.open(analysed_run), reparse=True, force=True)   # `mobiperf analyze --force`
    meta = json.loads((analysed_run / "run.json").read_text())
    assert write_requests(analysed_run) < full
    [entry] = meta["reanalysis"]
    assert entry["forced"] is True and "rep 0 ftrace lines: 11360 before, 5680 now" in entry["loss"]
    assert any(w.startswith("parse: fewer events than the earlier parse (forced)") for w in meta["warnings"])
    # The weaker figures are now what the run records: a re-analysis of the same trace goes through.
    pipeline.analyze(RunDir.open(analysed_run), reparse=True)


def test_runs_analysed_before_the_row_counts_are_checked_by_their_sources(analysed_run):
    run = RunDir.open(analysed_run)
    meta = run.read_meta()
    del meta["parse"]["table_rows"]   # what an older mobiperf recorded
    run.write_meta(meta)
    cut_trace(analysed_run)
    with pytest.raises(WeakerDataError, match="rep 0 ftrace lines: 11360 before, 5680 now"):
        pipeline.analyze(run, reparse=True)


def test_counts_and_losses_of_parse_summaries():
    recorded = {"repetitions": {"0": {"ftrace": {"lines": 100}, "strace": {"lines": 50},
                                      "blktrace": {"loop0.blktrace": {"records": 30}}}},
                "derived": {"block_pairing": {"requests": 20}}, "table_rows": {"block_event": 90}}
    assert counts(recorded) == {"table block_event rows": 90, "rep 0 ftrace lines": 100, "rep 0 strace lines": 50,
                                "rep 0 blktrace loop0.blktrace records": 30, "block pairing requests": 20}
    same = json.loads(json.dumps(recorded))
    assert events_lost(recorded, same) == []
    grown = json.loads(json.dumps(recorded))
    grown["repetitions"]["0"]["ftrace"]["lines"] = 120   # more is never a loss
    assert events_lost(recorded, grown) == []
    gone = {"repetitions": {"0": {"ftrace": {"lines": 100}}}, "derived": {"block_pairing": {"requests": 20}},
            "table_rows": {"block_event": 90}}
    assert events_lost(recorded, gone) == ["rep 0 strace lines: 50 before, 0 now",
                                           "rep 0 blktrace loop0.blktrace records: 30 before, 0 now"]


def test_a_repetition_collected_again_is_not_held_to_the_counts_of_the_one_it_replaced():
    # A run cut back to rep 0 whose rep 1 is collected again (what `compare --until` does with such a run):
    # rep 1's new trace is shorter than the old one, and that is not a loss; rep 0's counts are still held.
    recorded = {"repetitions": {"0": {"ftrace": {"lines": 100}}, "1": {"ftrace": {"lines": 1135}}},
                "derived": {"block_pairing": {"requests": 65}}, "table_rows": {"block_event": 330}}
    forget_repetition(recorded, 1)
    assert counts(recorded) == {"rep 0 ftrace lines": 100}
    new = {"repetitions": {"0": {"ftrace": {"lines": 100}}, "1": {"ftrace": {"lines": 1131}}},
           "derived": {"block_pairing": {"requests": 64}}, "table_rows": {"block_event": 326}}
    assert events_lost(recorded, new) == []
    new["repetitions"]["0"]["ftrace"]["lines"] = 60
    assert events_lost(recorded, new) == ["rep 0 ftrace lines: 100 before, 60 now"]
