"""`mobiperf export --perfetto`: a Chrome JSON trace with every block request once, phases nested in their
request, no overlapping spans on a lane, the in-flight counter, syscall and FUSE tracks."""

import gzip
import json
import subprocess
import sys

import polars as pl
import pytest

from mobiperf.reports.perfetto_json import assign_lanes, fuse_events, syscall_events, write_trace
from synthetic import make_synthetic_run


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return make_synthetic_run(tmp_path_factory.mktemp("export") / "syn", n_requests=1500, repetitions=2)


def _load(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def test_assign_lanes_never_overlaps_and_reuses_lanes():
    starts, ends = [0, 1, 2, 10, 11], [5, 3, 12, 20, 12]
    assert assign_lanes(starts, ends) == [0, 1, 2, 0, 1]


def test_every_request_once_with_nested_phases_and_no_overlap(run, tmp_path):
    out = tmp_path / "t.json"
    counts = write_trace(run, out)
    trace = _load(out)
    events = trace["traceEvents"]
    block_io = run.read_table("block_io")
    spans = [e for e in events if e.get("cat") == "block"]
    assert len(spans) == len(block_io) == counts["block"]
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == {"rep 0 · block requests", "rep 1 · block requests"}
    by_lane: dict = {}
    for e in spans:
        by_lane.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for intervals in by_lane.values():
        intervals.sort()
        for (s0, e0), (s1, _) in zip(intervals, intervals[1:]):
            assert s1 >= e0 - 1e-9
    phases = [e for e in events if e.get("cat") == "block.phase"]
    assert {p["name"] for p in phases} == {"Q2G", "G2I", "I2D", "D2C"}
    # Each phase sits inside the request span of its lane that contains its start.
    for p in phases[:2000]:
        parent = [s for s in by_lane[(p["pid"], p["tid"])] if s[0] <= p["ts"] < s[1] or s[0] == p["ts"]]
        assert parent and p["ts"] + p["dur"] <= parent[0][1] + 1e-6
    first = spans[0]
    assert {"sector", "size_bytes", "size_class", "locality", "sync_mode", "region"} <= set(first["args"])
    assert trace["metadata"]["mobiperf_run"] == "syn"


def test_in_flight_counter_matches_the_requests(run, tmp_path):
    out = tmp_path / "t.json.gz"
    write_trace(run, out)
    counter = [e for e in _load(out)["traceEvents"] if e["ph"] == "C" and e["pid"] == 1]
    assert counter and counter[-1]["args"]["requests"] == 0
    bio = run.read_table("block_io").filter(pl.col("rep") == 0)
    peak = 0
    for t in bio["issue_ts"].to_list():
        peak = max(peak, bio.filter((pl.col("issue_ts") <= t) & (pl.col("complete_ts") > t)).height)
    assert max(e["args"]["requests"] for e in counter) == peak


def test_syscall_and_fuse_tracks():
    calls = pl.DataFrame({"rep": [0, 0], "ts": [1000, 5000], "dur": [2000, 100], "pid": [7, 7], "comm": ["app"] * 2,
                          "syscall": ["pwrite64", "fsync"], "path": ["/d/a.db", "/d/a.db"], "size_bytes": [4096, 0],
                          "sync_mode": ["buffered", "fsync"]})
    ev = list(syscall_events(calls, 0))
    spans = [e for e in ev if e["ph"] == "X"]
    assert [(e["name"], e["ts"], e["dur"], e["tid"]) for e in spans] == [("pwrite64", 1.0, 2.0, 7), ("fsync", 5.0, 0.1, 7)]
    assert spans[0]["args"]["path"] == "/d/a.db"
    fuse = pl.DataFrame({"rep": [0, 0, 0], "send_ts": [0, 10, 20], "end_ts": [30, 15, None], "opcode_name":
                         ["FUSE_WRITE", "FUSE_WRITE", "FUSE_FSYNC"], "len_bytes": [4096, 4096, 0], "unique": [1, 2, 3],
                         "error": [0, 0, 0], "comm": ["app"] * 3})
    spans = [e for e in fuse_events(fuse, 0) if e["ph"] == "X"]
    assert [(e["name"], e["tid"]) for e in spans] == [("WRITE", 0), ("WRITE", 1), ("FSYNC", 1)]


def test_cli_export_and_missing_table(run, tmp_path):
    out = tmp_path / "x.json"
    r = subprocess.run([sys.executable, "-m", "mobiperf", "export", str(run.path), "--perfetto", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "3,000 block" in r.stdout and "12,000 block.phase" in r.stdout
    empty = tmp_path / "empty"
    make_synthetic_run(empty, n_requests=10, repetitions=1, analyze=False)
    r = subprocess.run([sys.executable, "-m", "mobiperf", "export", str(empty), "--perfetto", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "no block_io result table to export" in r.stderr
