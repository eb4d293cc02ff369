"""time_profile (analyzers/time_profile.py): each instant of a call to one span, on nests whose answer is counted
by hand, and on the synthetic workloads of tests/support/profile_synthetic.py whose self times are given."""

from __future__ import annotations

import polars as pl
import pytest

from mobiperf.analyzers.time_profile import kernel_process_name, profile_span_time
from mobiperf.analyzers.waterfall import build_waterfall
from mobiperf.core.schema import IO_SPAN, TIME_PROFILE
from support.profile_synthetic import CallKind, synthetic_io_span


def spans(rows: list[tuple]) -> pl.DataFrame:
    """io_span from (span_id, parent_id, call_id, layer, name, ts, end_ts, tid, comm[, path, size, primary])."""
    cols = ("span_id", "parent_id", "call_id", "layer", "name", "ts", "end_ts", "tid", "comm", "path", "size_bytes",
            "is_primary")
    full = [r + ("", 0, True)[len(r) - 9:] for r in rows]
    df = pl.DataFrame(full, schema=list(cols), orient="row")
    return IO_SPAN.validate(df.with_columns(rep=pl.lit(0), **{c: pl.lit(None) for c in IO_SPAN.columns
                                                             if c not in cols and c != "rep"}))


def time_of(profile: pl.DataFrame, **where) -> int:
    sub = profile
    for k, v in where.items():
        sub = sub.filter(pl.col(k) == v)
    return int(sub["time_ns"].sum())


def test_two_block_requests_in_flight_together_share_the_time_they_overlap():
    # call [0, 100]: block A [10, 60] with device [30, 50], block B [20, 80]. Deepest layer by instant:
    # 0-10 call; 10-20 A; 20-30 A+B (5 each); 30-50 device; 50-60 A+B (5 each); 60-80 B; 80-100 call.
    p = profile_span_time(spans([
        (0, None, 0, "syscall", "fsync", 0, 100, 1, "app"),
        (1, 0, 0, "block", "write", 10, 60, 1, "app"),
        (2, 0, 0, "block", "flush", 20, 80, 1, "app"),
        (3, 1, 0, "device", "write", 30, 50, 1, "app"),
    ]))
    assert time_of(p, layer="syscall") == 30
    assert time_of(p, layer="block", name="write") == 10 + 5 + 5
    assert time_of(p, layer="block", name="flush") == 5 + 5 + 20
    assert time_of(p, layer="device") == 20
    assert p["time_ns"].sum() == 100  # the call's duration, every instant once


def test_a_sync_file_inside_the_daemons_fsync_gets_its_own_time_not_half_of_it():
    # FUSE_FSYNC [10, 90] > daemon fsync [20, 80] > ext4_sync_file [25, 75] > commit [30, 70]
    p = profile_span_time(spans([
        (0, None, 0, "syscall", "fsync", 0, 100, 1, "app"),
        (1, 0, 0, "fuse", "FUSE_FSYNC", 10, 90, 1, "app"),
        (2, 1, 0, "fs", "fsync", 20, 80, 7, "daemon"),
        (3, 2, 0, "fs", "ext4_sync_file", 25, 75, 7, "daemon"),
        (4, 3, 0, "journal", "jbd2_commit", 30, 70, 9, "jbd2/loop3-8"),
    ]))
    assert time_of(p, name="fsync", layer="fs") == 10
    assert time_of(p, name="ext4_sync_file") == 10
    assert time_of(p, layer="journal") == 40
    assert time_of(p, layer="fuse") == 20 and time_of(p, layer="syscall") == 20
    assert p.filter(pl.col("layer") == "journal")["process"].to_list() == ["jbd2/loop*-*"]


def test_count_and_bytes_count_a_shared_commit_once_but_charge_each_waiter_its_wait():
    p = profile_span_time(spans([
        (0, None, 0, "syscall", "fsync", 0, 100, 1, "app", "a.db", 0, True),
        (1, 0, 0, "journal", "jbd2_commit", 40, 100, 9, "jbd2/loop0-8", "", 0, True),
        (2, None, 1, "syscall", "fsync", 50, 120, 2, "app", "b.db", 0, True),
        (3, 2, 1, "journal", "jbd2_commit", 50, 100, 9, "jbd2/loop0-8", "", 0, False),
    ]))
    journal = p.filter(pl.col("layer") == "journal")
    assert journal["count"].sum() == 1 and journal["time_ns"].sum() == 60 + 50
    # the commit's file is the file of the call that waited for it
    assert sorted(journal["path"].to_list()) == ["a.db", "b.db"]


def test_threads_are_numbered_by_first_appearance_and_kernel_threads_lose_their_numbers():
    p = profile_span_time(spans([
        (0, None, 0, "syscall", "write", 0, 10, 42, "app"),
        (1, None, 1, "syscall", "write", 20, 30, 17, "app"),
        (2, None, 2, "syscall", "write", 40, 50, 42, "app"),
    ]))
    assert dict(zip(p["thread"], p["time_ns"])) == {"app #1": 20, "app #2": 10}
    names = pl.select(kernel_process_name(pl.Series(["jbd2/loop12-8", "kworker/3:1H", "mobibench", "bfuse"]))
                      .alias("n"))["n"].to_list()
    assert names == ["jbd2/loop*-*", "kworker/*:*H", "mobibench", "bfuse"]


def test_synthetic_workload_self_times_are_the_given_ones_and_layers_equal_waterfalls():
    fs = ("bfuse", 2000)
    kinds = [CallKind("write", 300, {"syscall": 3000, "fuse": 8000, "fs": 5000, "block": 700, "device": 20000},
                      names={"fuse": "FUSE_WRITE", "fs": "pwrite64"}, comm={"fs": fs, "block": fs, "device": fs}),
             CallKind("fsync", 7, {"syscall": 1000, "fuse": 2000, "fs": 4000, "journal": 30000, "block": 500,
                                   "device": 50000}, names={"fuse": "FUSE_FSYNC", "journal": "jbd2_commit"},
                      comm={"journal": ("jbd2/loop0-8", 77), "block": ("jbd2/loop0-8", 77)})]
    io_span = synthetic_io_span(kinds, reps=2, noise=0)
    p = TIME_PROFILE.validate(profile_span_time(io_span))
    for kind in kinds:
        for layer, ns in kind.self_ns.items():
            got = p.filter((pl.col("rep") == 1) & (pl.col("layer") == layer)
                           & (pl.col("name") == kind.names.get(layer, kind.syscall)))
            assert got["time_ns"].sum() == pytest.approx(kind.count * ns, abs=kind.count)
    wf = build_waterfall(io_span)
    for layer in ("syscall", "fuse", "fs", "journal", "block", "device"):
        by_rep = p.filter(pl.col("layer") == layer).group_by("rep").agg(pl.col("time_ns").sum()).sort("rep")
        expected = wf.group_by("rep").agg(pl.col(f"{layer}_self_ns").sum()).sort("rep")
        assert by_rep["time_ns"].to_list() == expected[f"{layer}_self_ns"].to_list(), layer


def test_no_call_no_rows_and_background_io_is_left_out():
    p = profile_span_time(spans([(0, None, None, "block", "write", 0, 100, 5, "kworker/u8:1")]))
    assert p.height == 0 and p.columns == list(TIME_PROFILE.columns)


def test_with_span_owner_every_span_is_its_owners_and_names_the_owners_file():
    """span_owner (issue 24) says whose each span is, by causality: the app's for the daemon's and jbd2's work."""
    io = spans([
        (0, None, 0, "syscall", "fsync", 0, 100, 42, "app", "/sdcard/a.db", 0, True),
        (1, 0, 0, "fuse", "FUSE_FSYNC", 10, 90, 42, "app"),
        (2, 1, 0, "fs", "fsync", 20, 80, 7, "daemon"),
        (3, 2, 0, "journal", "jbd2_commit", 30, 70, 9, "jbd2/loop3-8"),
    ])
    owner = pl.DataFrame({"rep": [0] * 4, "span_id": [0, 1, 2, 3], "scope": ["workload"] * 4,
                          "process": ["com.app"] * 4, "pid": [40] * 4, "thread": ["app"] * 4, "tid": [42] * 4,
                          "path": ["/sdcard/a.db"] * 4, "file_type": ["db"] * 4, "path_from": ["syscall"] * 4})
    p = profile_span_time(io, owner)
    assert set(p["process"]) == {"com.app"} and set(p["thread"]) == {"app #1"} and set(p["file_type"]) == {"db"}
    assert dict(zip(p["layer"], p["time_ns"])) == {"syscall": 20, "fuse": 20, "fs": 20, "journal": 40}
    without = profile_span_time(io)   # a run analysed before span_owner: who ran the span
    assert dict(zip(without["layer"], without["process"]))["journal"] == "jbd2/loop*-*"
