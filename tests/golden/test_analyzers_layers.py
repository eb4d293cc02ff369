"""Cross-layer analyzers on a real trace: the waterfall, the layer breakdown and amplification.

The golden trace rand4k-fsync (mobibench -a 1 -y 2: 4 KiB random writes, each followed by fsync) has the block
and ext4 sync_file events but no syscall table (no syscall events or strace in this capture, an older run). The
syscall table here is made from it in the documented shape of syscall_io: one fsync around each ext4_sync_file
enter/exit of the workload, and one 4 KiB pwrite64 just before each, as the syscalls events would have recorded
them (tests/golden/test_layer_model.py has the real captures with every layer).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest

from mobiperf.orchestration import pipeline
from mobiperf.analyzers.amplification import measure_amplification
from mobiperf.analyzers.io_span import nest_calls
from mobiperf.analyzers.latency import sync_file_calls
from mobiperf.analyzers.syscall import classify_syscalls
from mobiperf.analyzers.waterfall import break_down_layers, build_waterfall
from mobiperf.core.runstore import RunDir
from mobiperf.core.schema import AMPLIFICATION, IO_SPAN, LAYER_BREAKDOWN, SYSCALL_IO, WATERFALL

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "golden"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    dest = tmp_path_factory.mktemp("layers") / "rand4k"
    shutil.copytree(GOLDEN / "rand4k-fsync", dest, ignore=shutil.ignore_patterns("expected"))
    for sub in ("tables", "results"):
        (dest / sub).mkdir(exist_ok=True)
    rd = RunDir.open(dest)
    return rd, pipeline.analyze(rd, reparse=True)


@pytest.fixture(scope="module")
def syscalls(run) -> pl.DataFrame:
    rd, _ = run
    sf = sync_file_calls(rd.read_table("fsync_event")).filter(pl.col("comm") == "mobibench")
    # the call brackets its sync_file: 2 us of VFS before and after
    fsyncs = sf.select("rep", (pl.col("ts") - 2_000).alias("ts"), (pl.col("dur") + 4_000).alias("dur"), "pid",
                       "comm", pl.lit("fsync").alias("syscall"))
    writes = sf.select("rep", (pl.col("ts") - 20_000).alias("ts"), pl.lit(15_000, pl.Int64).alias("dur"), "pid",
                       "comm", pl.lit("pwrite64").alias("syscall"))
    rows = pl.concat([fsyncs, writes]).with_columns(
        fd=pl.lit(3), path=pl.lit("/data/mobibench/test.dat0"),
        request_bytes=pl.when(pl.col("syscall") == "fsync").then(-1).otherwise(4096),
        offset_bytes=pl.when(pl.col("syscall") == "fsync").then(-1).otherwise(pl.int_range(pl.len()) * 8192),
        ret=pl.when(pl.col("syscall") == "fsync").then(0).otherwise(4096), errno=pl.lit(""),
        source=pl.lit("test")).sort("ts")
    return SYSCALL_IO.validate(rows)


def spans_of(rd: RunDir, results, syscalls: pl.DataFrame) -> pl.DataFrame:
    return IO_SPAN.validate(nest_calls(syscalls, fsync_event=rd.read_table("fsync_event"),
                                       jbd2_commit=rd.read_table("jbd2_commit") if rd.has_table("jbd2_commit")
                                       else None, block_io=results["block_io"]))


def test_waterfall_stitches_fsync_to_its_block_requests(run, syscalls):
    rd, results = run
    sc = classify_syscalls(syscalls)
    wf = WATERFALL.validate(build_waterfall(spans_of(rd, results, syscalls))).filter(pl.col("syscall") == "fsync")
    assert len(wf) == int((sc["op"] == "sync").sum()) >= 128
    # an fsync of a 4 KiB write causes block IO: the data write, the journal commit, and the flushes
    assert (wf["block_requests"] > 0).mean() > 0.9
    assert (wf["journal_bytes"] > 0).mean() > 0.5  # 80 jbd2 commits for 130 fsyncs in this trace
    assert (wf["flushes"] > 0).mean() > 0.8
    assert (wf["block_ns"] <= wf["dur_ns"]).all() and (wf["device_ns"] <= wf["block_ns"]).all()
    assert (wf["fs_ns"] > 0).mean() > 0.9 and (wf["fs_ns"] <= wf["dur_ns"]).all()
    assert (wf["block_ns"] <= wf["fs_ns"]).all()  # the block requests it waited for are inside its sync_file
    assert (wf["other_ns"] == 4_000).all()  # the call's own time outside the file system: the 2 + 2 us
    # every block request is attributed to at most one call
    assert wf["block_requests"].sum() <= len(results["block_io"])


def test_layer_breakdown_shares_add_up(run, syscalls):
    rd, results = run
    wf = build_waterfall(spans_of(rd, results, syscalls))
    lb = LAYER_BREAKDOWN.validate(break_down_layers(wf))
    fsync = lb.filter(pl.col("syscall") == "fsync")
    assert set(fsync["layer"]) == {"syscall", "fs", "journal", "block", "device"}  # the layers it has: no FUSE
    assert abs(fsync["share"].sum() - 1.0) < 1e-9
    assert fsync.filter(pl.col("layer") == "device")["share"][0] > 0.2  # the device does the waiting


def test_amplification_of_small_synchronous_writes(run, syscalls):
    _, results = run
    sc = classify_syscalls(syscalls)
    amp = AMPLIFICATION.validate(measure_amplification(sc, results["block_io"]))
    write = {(r["layer"], r["region"]): r for r in amp.filter(pl.col("op") == "write").iter_rows(named=True)}
    app = write[("app", "all")]["bytes"]
    assert app == 4096 * len(sc.filter(pl.col("op") == "write"))
    # journaling of journal: the block layer writes several times what the application wrote
    assert write[("block", "all")]["ratio_to_app"] > 2
    assert write[("block", "journal")]["bytes"] > write[("block", "data")]["bytes"] * 0.5


def test_pipeline_runs_the_syscall_analyzers_when_the_table_exists(run, syscalls, tmp_path):
    rd, _ = run
    dest = tmp_path / "with-syscalls"
    shutil.copytree(rd.path, dest)
    rd2 = RunDir.open(dest)
    rd2.write_table(SYSCALL_IO, syscalls)
    results = pipeline.analyze(rd2)  # no re-parse: keeps the syscall table just written
    for name in ("syscall_class", "syscall_latency", "io_span", "waterfall", "layer_breakdown", "amplification"):
        assert name in results, name
    io_class = results["io_class"]
    assert set(io_class["layer"]) == {"block", "syscall"}
    lat = results["syscall_latency"].filter(pl.col("op") == "fsync")
    assert lat["count"][0] >= 128


def test_block_cause_names_the_fsync_behind_journal_and_data_writes(run, syscalls):
    from mobiperf.analyzers.waterfall import attribute_block_causes
    from mobiperf.core.schema import BLOCK_CAUSE

    rd, results = run
    cause = BLOCK_CAUSE.validate(attribute_block_causes(spans_of(rd, results, syscalls), results["block_io"]))
    assert len(cause) == len(results["block_io"])  # every request once
    writes = cause.filter(pl.col("op") == "write")
    by = dict(writes.group_by("cause").len().iter_rows())
    assert set(by) <= {"fsync", "none"} and by.get("fsync", 0) > 0.5 * len(writes)
    journal = writes.filter(pl.col("region") == "journal")
    assert (journal["cause"] == "fsync").mean() > 0.9
