"""Bad input: a run without a layer's tables says which events or collector would give them; a trace with lines
of an unknown kernel variant is analyzed as far as it parses, with a warning naming the unparsed events; pairing
survives lost, unknown and orphan events."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl

from mobiperf.orchestration import pipeline
from mobiperf.collectors.parse.pairing import pair_block_requests
from mobiperf.core.runstore import RunDir
from mobiperf.core.schema import BLOCK_EVENT

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "golden"


def _copy(tmp_path: Path, name: str) -> Path:
    dest = tmp_path / name
    shutil.copytree(GOLDEN / name, dest, ignore=shutil.ignore_patterns("expected"))
    for sub in ("tables", "results"):
        (dest / sub).mkdir(exist_ok=True)
    return dest


def test_missing_tables_name_the_events_to_enable(tmp_path):
    run = RunDir.open(_copy(tmp_path, "split-4m-direct"))
    results = pipeline.analyze(run, reparse=True)
    assert "block_io" in results and "syscall_class" not in results
    skipped = run.read_meta()["analysis"]["skipped"]
    assert "strace" in skipped["syscall_class"] and "syscall_io" in skipped["syscall_class"]
    assert "fuse:fuse_request_send" in skipped["fuse_latency"]
    assert "block_io" not in run.read_meta()["analysis"]["without"]  # this capture has its layout snapshot


def test_missing_optional_tables_are_named(tmp_path):
    dest = _copy(tmp_path, "split-4m-direct")
    shutil.rmtree(dest / "raw" / "rep0" / "layout")
    run = RunDir.open(dest)
    results = pipeline.analyze(run, reparse=True)
    assert "block_io" in results and set(results["block_io"]["file_type"].unique()) <= {"unknown", "other"}
    without = run.read_meta()["analysis"]["without"]
    assert "file_extent" in without["block_io"] and "layout snapshot" in without["block_io"]


def test_unknown_kernel_variant_degrades_with_a_warning(tmp_path):
    dest = _copy(tmp_path, "rand4k-fsync")
    trace = dest / "raw" / "rep0" / "ftrace.txt"
    lines = trace.read_text().splitlines()
    # a vendor kernel printing block_rq_issue in a format nobody knows, and an event nobody knows
    mutated = [line.replace("block_rq_issue: ", "block_rq_issue: vendor{") if i % 2 else line
               for i, line in enumerate(lines)]
    mutated.insert(5, "     kworker/0:1-12     [000] .....   100.000001: block_time: 7,0 W 12 us")
    trace.write_text("\n".join(mutated) + "\n")
    run = RunDir.open(dest)
    results = pipeline.analyze(run, reparse=True)
    warnings = " ".join(run.read_meta()["warnings"])
    assert "block_rq_issue" in warnings
    assert "block_io" in results and len(results["block_io"]) > 0  # what parsed is still analyzed
    assert results["block_io"]["d2c_ns"].null_count() > 0          # the lost issues leave null phases


def _events(rows):
    return BLOCK_EVENT.validate(pl.DataFrame(rows, schema=list(BLOCK_EVENT.columns), orient="row"))


def test_pairing_survives_orphans_and_unknown_events():
    rows = [
        (0, 10, 0, 1, "a", "block_rq_complete", 7, 0, 64, 8, 4096, "W", 0),     # completion before the trace
        (0, 20, 0, 1, "a", "block_io_start", 7, 0, 64, 8, 4096, "W", 0),        # an event pairing does not use
        (0, 30, 0, 1, "a", "block_rq_issue", 7, 0, 128, 8, 4096, "W", 0),       # issue whose Q/G were lost
        (0, 40, 0, 1, "a", "block_rq_complete", 7, 0, 128, 8, 4096, "W", 0),
        (0, 50, 0, 1, "a", "block_bio_queue", 7, 0, 256, 8, 4096, "R", 0),      # queued, never completed
        (0, 60, 0, 1, "a", "block_getrq", 7, 0, 256, 8, 4096, "R", 0),
        (0, 70, 0, 1, "a", "block_plug", -1, -1, -1, -1, -1, "", 0),
    ]
    rq, stats = pair_block_requests(_events(rows))
    assert rq["sector"].to_list() == [128, 256]
    assert rq["is_complete_match"].to_list() == [False, False]
    assert stats.unmatched["complete without issue"] == 1
    assert stats.ignored["deviceless block_plug"] == 1
    assert stats.matched_share == 0.0


def test_pairing_of_nothing():
    rq, stats = pair_block_requests(BLOCK_EVENT.empty())
    assert rq.is_empty() and stats.requests == 0 and stats.matched_share == 1.0


def test_without_a_syscall_layer_the_block_answers_stay_and_one_line_names_the_option(tmp_path):
    from click.testing import CliRunner

    from mobiperf.cli import cli

    dest = _copy(tmp_path, "split-4m-direct")
    done = CliRunner().invoke(cli, ["analyze", str(dest)])
    assert done.exit_code == 0, done.output
    assert "Latency by phase (block layer" in done.stdout
    notes = [line for line in done.stderr.splitlines() if "--source syscalls" in line]
    assert len(notes) == 1, done.stderr  # io_span, waterfall, layer_breakdown...: one cause, one line
    assert "waterfall" in notes[0] and "layer_breakdown" in notes[0]


def test_fuse_requests_without_the_daemons_file_system_events(tmp_path):
    """A FUSE trace without the daemon's calls or sync_file events nests the calls' FUSE requests and the block
    requests of their daemon thread, with no lower file system layer (fs_ns 0), and crashes nothing."""
    dest = tmp_path / "fuse"
    shutil.copytree(Path(__file__).resolve().parents[1] / "fixtures" / "layers" / "fuse-fdatasync", dest)
    (dest / "raw" / "rep0" / "tasks.json").unlink()  # no task roles: the daemon's calls look like anyone's
    trace = dest / "raw" / "rep0" / "ftrace.txt"
    trace.write_text("".join(line for line in trace.read_text().splitlines(keepends=True)
                             if "ext4_sync_file" not in line))
    calls = dest / "raw" / "rep0" / "syscalls.txt"
    calls.write_text("".join(line for line in calls.read_text().splitlines(keepends=True)
                             if not line.lstrip().startswith("bfuse-")))
    for sub in ("tables", "results"):
        (dest / sub).mkdir(exist_ok=True)
    run = RunDir.open(dest)
    results = pipeline.analyze(run, reparse=True)
    wf = results["waterfall"].filter(pl.col("syscall") == "fdatasync")
    assert len(wf) == 50 and (wf["fuse_requests"] == 1).all() and (wf["fs_ns"] == 0).all()
    assert (wf["data_bytes"] == 4096).all()  # the daemon thread's write is still inside its FUSE request
