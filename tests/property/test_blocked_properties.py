"""Blocked time (analyzers/blocked.py) on hand-made schedules whose answer is known: a thread's D intervals from
the switches and wake-ups, split by the deepest span of its own nests active then, the rest named by Android's
sched_blocked_reason; the causes of a thread add up to its time in D, whatever the schedule (checked over random
ones)."""

from __future__ import annotations

import random

import polars as pl
import pytest

from mobiperf.analyzers.blocked import blocked_intervals, summarize_blocked
from mobiperf.core.schema import BLOCKED, IO_SPAN, SCHED_BLOCKED_REASON, SCHED_SWITCH, SCHED_WAKEUP, SPAN_OWNER


def switches(rows):
    return SCHED_SWITCH.validate(pl.DataFrame(
        rows, schema=["ts", "prev_tid", "prev_state", "next_tid"], orient="row").with_columns(
        rep=pl.lit(0), cpu=pl.lit(0), prev_comm=pl.lit("t"), next_comm=pl.lit("t")))


def wakeups(rows):
    return SCHED_WAKEUP.validate(pl.DataFrame(rows, schema=["ts", "tid"], orient="row").with_columns(
        rep=pl.lit(0), cpu=pl.lit(0), comm=pl.lit("t"), waker_tid=pl.lit(0), waker_comm=pl.lit("w"),
        event=pl.lit("waking")))


def nest(spans):
    """io_span and span_owner of one nest owned by thread 10: (span_id, parent_id, layer, ts, end_ts)."""
    df = pl.DataFrame(spans, schema=["span_id", "parent_id", "layer", "ts", "end_ts"], orient="row")
    io_span = IO_SPAN.validate(df.with_columns(
        rep=pl.lit(0), call_id=pl.lit(0), name=pl.col("layer"), tid=pl.lit(10), comm=pl.lit("t"),
        size_bytes=pl.lit(0), is_primary=pl.lit(True), op=pl.lit(None), region=pl.lit(None), dev_major=pl.lit(8),
        dev_minor=pl.lit(0), sector=pl.lit(0), fuse_unique=pl.lit(None), path=pl.lit(None), sync_mode=pl.lit(None),
        file_type=pl.lit(None), source_row=pl.lit(0)))
    owner = SPAN_OWNER.validate(df.select("span_id").with_columns(
        rep=pl.lit(0), scope=pl.lit("workload"), process=pl.lit("app"), pid=pl.lit(10), thread=pl.lit("t"),
        tid=pl.lit(10), path=pl.lit("/f"), file_type=pl.lit("other"), path_from=pl.lit("syscall"), root_id=pl.lit(0)))
    return io_span, owner


def by_cause(blocked: pl.DataFrame, tid: int) -> dict[str, int]:
    return dict(blocked.filter(pl.col("tid") == tid).select("waited_on", "blocked_ns").iter_rows())


def test_an_fsync_s_wait_split_by_its_nest_and_the_rest_by_the_kernel_s_reason():
    # thread 10 sleeps in D from 100 to 400 (woken at 400, back on a CPU at 450) inside its fsync (call 50-500):
    # a block request 120-250, the journal commit 200-380 (its own block request 300-350 below it)
    sw = switches([(100, 10, "D", 0), (450, 0, "R", 10), (600, 10, "D", 0), (700, 0, "R", 10)])
    wk = wakeups([(400, 10)])  # the second sleep has no wake-up: it ends where the thread is back (700)
    io_span, owner = nest([(0, None, "syscall", 50, 500), (1, 0, "fs", 60, 490), (2, 1, "block", 120, 250),
                           (3, 1, "journal", 200, 380), (4, 3, "block", 300, 350)])
    reason = SCHED_BLOCKED_REASON.validate(pl.DataFrame({"rep": [0], "ts": [650], "tid": [10], "is_io_wait": [False],
                                                         "caller": ["mutex_lock+0x1c/0x40"]}))
    got = BLOCKED.validate(summarize_blocked(sw, wk, reason, io_span, owner))
    # 100-120 fs, 120-250 block, 250-300 journal, 300-350 block, 350-380 journal, 380-400 fs; 600-700 the mutex
    assert by_cause(got, 10) == {"fs": 40, "block": 180, "journal": 80, "caller:mutex_lock": 100}
    assert got.filter(pl.col("tid") == 10)["blocked_ns"].sum() == (400 - 100) + (700 - 600)


def test_an_interval_the_trace_never_ends_is_left_out():
    iv = blocked_intervals(switches([(100, 10, "D", 0)]), None)
    assert iv.height == 0


@pytest.mark.parametrize("seed", range(20))
def test_the_causes_add_up_to_the_time_in_d(seed):
    rng = random.Random(seed)
    t, rows, woken, in_d = 0, [], [], False
    for _ in range(40):
        t += rng.randrange(1, 50)
        if not in_d:
            rows.append((t, 10, rng.choice(["D", "S", "R+", "D|K"]), 0))
            in_d = rows[-1][2].startswith("D")
        else:
            if rng.random() < 0.7:
                woken.append((t, 10))
                t += rng.randrange(1, 20)
            rows.append((t, 0, "R", 10))
            in_d = False
    spans = [(0, None, "syscall", 0, t + 100)]
    for i in range(1, 12):
        a = rng.randrange(0, t + 50)
        spans.append((i, 0, rng.choice(["fuse", "fs", "journal", "block", "device"]), a, a + rng.randrange(1, 60)))
    io_span, owner = nest(spans)
    got = summarize_blocked(switches(rows), wakeups(woken) if woken else None, None, io_span, owner)
    iv = blocked_intervals(switches(rows), wakeups(woken) if woken else None)
    assert int(got["blocked_ns"].sum()) == int((iv["end"] - iv["start"]).sum())
    assert set(got["waited_on"]) <= {"fuse", "fs", "journal", "block", "call"}
