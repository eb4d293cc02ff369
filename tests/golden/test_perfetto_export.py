"""`mobiperf export --perfetto x.pftrace`: a protobuf TrackEvent trace that decodes with perfetto's own protos into
the tracks, nested slices, flows and counters of the run's tables.

Runs: two golden fixtures (real captures of this machine, re-analysed): fuse-seq512k (dd through bFUSE: FUSE
requests on the daemon's threads, its sync_file, a jbd2 commit, block requests) and strace-rand4k-fsync (4 KiB
writes + fsync under strace: calls, sync_file, commits, block requests); and an io_span table of the lead's
layer model (schema of results/io_span) made by hand, for the path that runs once it is in the run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import polars as pl
import pytest

from mobiperf.orchestration import pipeline
from mobiperf.reports.export_spans import spans_from_io_span
from mobiperf.reports.perfetto_track import write_track_trace
from mobiperf.core.runstore import RunDir

GOLDEN = Path(__file__).parents[1] / "fixtures" / "golden"
MOBIPERF = [sys.executable, "-m", "mobiperf"]


@pytest.fixture(scope="module", params=["fuse-seq512k", "strace-rand4k-fsync"])
def run(request, tmp_path_factory) -> RunDir:
    dest = tmp_path_factory.mktemp("pfx") / request.param
    shutil.copytree(GOLDEN / request.param, dest)
    for sub in ("tables", "results"):
        (dest / sub).mkdir(exist_ok=True)
    run = RunDir.open(dest)
    pipeline.analyze(run, reparse=True)
    return run


def decode(path: Path):
    """(tracks by uuid, slices [(track, name, category, ts, end, begin event)], counters by track) of a trace."""
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace

    trace = Trace.FromString(path.read_bytes())
    tracks, open_, slices, counters = {}, defaultdict(list), [], defaultdict(list)
    for p in trace.packet:
        if p.HasField("track_descriptor"):
            tracks[p.track_descriptor.uuid] = p.track_descriptor
        elif p.HasField("track_event"):
            e = p.track_event
            assert e.track_uuid in tracks  # every event's track was described before it
            if e.type == e.TYPE_SLICE_BEGIN:
                open_[e.track_uuid].append((p.timestamp, e))
            elif e.type == e.TYPE_SLICE_END:
                ts, begin = open_[e.track_uuid].pop()  # a stack per track: slices nest or this fails
                assert p.timestamp >= ts
                slices.append((e.track_uuid, begin.name, begin.categories[0], ts, p.timestamp, begin))
            elif e.type == e.TYPE_COUNTER:
                counters[e.track_uuid].append((p.timestamp, e.double_counter_value))
    assert not any(open_.values())  # every slice ended
    return tracks, slices, counters


def test_export_decodes_into_the_runs_tracks_slices_flows_and_counters(run, tmp_path):
    out = tmp_path / "x.pftrace"
    counts = write_track_trace(run, out)
    tracks, slices, counters = decode(out)
    by_layer = Counter(cat for _, _, cat, _, _, _ in slices)
    assert {k: v for k, v in by_layer.items()} == {k: v for k, v in counts.items() if k in by_layer}
    # Slice counts per layer are the run's tables.
    block_io = run.read_table("block_io")
    assert by_layer["block"] == len(block_io)
    if run.has_table("io_span"):  # the layer model's spans, each interval once
        spans = run.read_table("io_span").filter(pl.col("is_primary") & (pl.col("layer") != "device"))
        assert {k: v for k, v in by_layer.items() if k != "block.phase"} == dict(Counter(spans["layer"].to_list()))
    else:
        if run.has_table("fuse_req"):
            assert by_layer["fuse"] == run.read_table("fuse_req")["end_ts"].is_not_null().sum() > 1000
        if run.has_table("syscall_class"):
            assert by_layer["syscall"] == run.read_table("syscall_class")["dur"].is_not_null().sum() > 100
        enters = run.read_table("fsync_event").filter(pl.col("phase") == "enter")
        assert by_layer["fs"] == len(enters)
    commits = run.read_table("jbd2_commit")
    assert by_layer["journal"] == len(commits.filter(pl.col("phase") == "end"))
    # No partial overlap on a track (the decoder's stack already requires proper nesting per track).
    per_track = defaultdict(list)
    for track, _, cat, ts, end, _ in slices:
        per_track[track].append((ts, -end, end))
    for spans in per_track.values():
        spans.sort()
        stack = []
        for ts, _, end in spans:
            while stack and stack[-1] <= ts:
                stack.pop()
            assert not stack or end <= stack[-1]
            stack.append(end)
    # Every flow joins two slices: one starts it, one ends it.
    starts = Counter(f for *_, b in slices for f in b.flow_ids)
    ends = Counter(f for *_, b in slices for f in b.terminating_flow_ids)
    assert starts and set(starts) == set(ends) and set(starts.values()) == {1} and set(ends.values()) == {1}
    assert len(starts) == counts["flows"]
    # One track per block device; each request's phases nest inside it on its (lane) track, D2C ends with it.
    devices = {u for u, t in tracks.items() if t.name.startswith("block ") and not t.HasField("counter")}
    assert {t.name for u, t in tracks.items() if u in devices} == {
        f"block {a}:{b}" for a, b in block_io.select("dev_major", "dev_minor").unique().iter_rows()}
    requests = defaultdict(list)
    for track, _, cat, ts, end, _ in slices:
        if cat == "block":
            requests[track].append((ts, end))
    phases = [(track, name, ts, end) for track, name, cat, ts, end, _ in slices if cat == "block.phase"]
    assert phases and {n for _, n, _, _ in phases} <= {"Q2G", "G2I", "I2D", "D2C"}
    for track, name, ts, end in phases:
        around = [r for r in requests[track] if r[0] <= ts and end <= r[1]]
        assert around and (name != "D2C" or any(r[1] == end for r in around))
    # In flight at the device: back to 0 at the end, its peak the requests between issue and completion.
    inflight = [v for u, v in counters.items() if tracks[u].name.endswith("in flight")]
    assert inflight and all(v[-1][1] == 0 for v in inflight)
    issued = block_io.filter(pl.col("issue_ts").is_not_null())
    peak = max(issued.filter((pl.col("issue_ts") <= t) & (pl.col("complete_ts") > t)).height
               for t in issued["issue_ts"].to_list())
    assert max(v for series in inflight for _, v in series) == peak
    threads = [t for t in tracks.values() if t.HasField("thread")]
    assert threads and all(t.thread.thread_name for t in threads)


def test_the_causal_chain_of_a_fuse_run(tmp_path):
    dest = tmp_path / "fuse"
    shutil.copytree(GOLDEN / "fuse-seq512k", dest)
    for sub in ("tables", "results"):
        (dest / sub).mkdir(exist_ok=True)
    run = RunDir.open(dest)
    pipeline.analyze(run, reparse=True)
    out = tmp_path / "f.pftrace"
    write_track_trace(run, out)
    tracks, slices, _ = decode(out)
    by_flow_start = {f: (cat, name) for _, name, cat, *_, b in slices for f in b.flow_ids}
    pairs = Counter((by_flow_start[f], cat) for _, name, cat, *_, b in slices for f in b.terminating_flow_ids)
    layers = Counter((a[0], b) for (a, b), n in pairs.items() for _ in range(n))
    # The daemon's fsync of the file (fs) was asked by a FUSE request; the commit it waited for; its blocks.
    assert layers[("fuse", "fs")] >= 1 and layers[("fs", "journal")] >= 1 and layers[("journal", "block")] >= 1
    fuse_threads = {tracks[u].thread.thread_name for u, _, cat, *_ in slices if cat == "fuse"}
    assert fuse_threads and all("dd" not in n for n in fuse_threads)  # requests sit on the daemon's threads
    writes = [s for s in slices if s[2] == "fuse" and s[1] == "WRITE"]
    assert writes and {a.name for a in writes[0][5].debug_annotations} >= {"size_bytes"}


def test_io_span_of_the_layer_model_is_taken_as_it_is():
    """A call (pwrite64 under O_SYNC) -> FUSE WRITE -> the daemon's pwrite64 -> a block write whose device span
    (issue -> complete) is its D2C phase, as results/io_span holds them."""
    spans = pl.DataFrame({
        "rep": [0] * 5, "span_id": [1, 2, 3, 4, 5], "parent_id": [None, 1, 2, 3, 4], "call_id": [1] * 5,
        "layer": ["syscall", "fuse", "fs", "block", "device"], "name": ["pwrite64", "WRITE", "pwrite64", "write",
                                                                       "device"],
        "ts": [1000, 1100, 1200, 1300, 1500], "end_ts": [9000, 8900, 8800, 8000, 8000], "tid": [10, 20, 20, 20, 20],
        "comm": ["app", "fuse", "fuse", "fuse", "fuse"], "size_bytes": [4096] * 5, "is_primary": [True] * 5,
        "op": ["write"] * 5, "region": [None, None, None, "data", "data"], "dev_major": [None, None, None, 7, 7],
        "dev_minor": [None, None, None, 1, 1], "sector": [None, None, None, 2048, 2048],
        "fuse_unique": [None, 7, None, None, None], "path": ["/sdcard/a", None, "/data/media/a", None, None],
        "sync_mode": ["o_sync", None, "o_sync", "o_sync", None], "file_type": ["unknown"] * 5,
        "source_row": [0, 0, 0, 0, 0]})
    block_io = pl.DataFrame({"rep": [0], "queue_ts": [1300], "issue_ts": [1500], "q2g_ns": [50], "g2i_ns": [50],
                             "i2d_ns": [100], "d2c_ns": [6500]})
    got = spans_from_io_span(spans, block_io)
    assert got.select("span_id", "parent_id", "layer").rows() == [
        (1, None, "syscall"), (2, 1, "fuse"), (3, 2, "fs"), (4, 3, "block")]
    assert got.filter(pl.col("layer") == "block").select("queue_ts", "issue_ts", "d2c_ns").row(0) == (1300, 1500, 6500)


def test_cli_writes_protobuf_by_default_and_json_when_asked(tmp_path):
    dest = tmp_path / "run"
    shutil.copytree(GOLDEN / "strace-rand4k-fsync", dest)
    for sub in ("tables", "results"):
        (dest / sub).mkdir(exist_ok=True)
    pipeline.analyze(RunDir.open(dest), reparse=True)
    pf, js = tmp_path / "x.pftrace", tmp_path / "x.trace"
    done = subprocess.run([*MOBIPERF, "export", str(dest), "--perfetto", str(pf)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert "(spans from io_span)" in done.stdout and " flows" in done.stdout  # the run has the layer model
    assert pf.read_bytes()[:1] == b"\x0a"
    done = subprocess.run([*MOBIPERF, "export", str(dest), "--perfetto", str(js), "--format", "json"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and js.read_text().startswith('{"displayTimeUnit"')


@pytest.mark.skipif(not os.environ.get("MOBIPERF_TRACE_PROCESSOR_SHELL"),
                    reason="trace_processor downloads its shell binary, which this machine cannot fetch; set "
                           "MOBIPERF_TRACE_PROCESSOR_SHELL to a trace_processor_shell to run this")
def test_trace_processor_loads_the_export(run, tmp_path):
    from perfetto.trace_processor import TraceProcessor, TraceProcessorConfig

    out = tmp_path / "x.pftrace"
    counts = write_track_trace(run, out)
    tp = TraceProcessor(trace=str(out), config=TraceProcessorConfig(bin_path=os.environ[
        "MOBIPERF_TRACE_PROCESSOR_SHELL"]))
    try:
        n = tp.query("select count(*) as n from slice where category = 'block'").as_pandas_dataframe()["n"][0]
        flows = tp.query("select count(*) as n from flow").as_pandas_dataframe()["n"][0]
        assert n == counts["block"] and flows == counts["flows"]
    finally:
        tp.close()
