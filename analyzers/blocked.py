"""Blocked time: per thread, the time it slept uninterruptibly (D state), split by what it waited on.

A blocked interval of a thread starts where sched_switch takes it off the CPU with prev_state D (uninterruptible
sleep: IO, a lock taken uninterruptibly, a FUSE reply) and ends where it is woken (its first sched_waking or
sched_wakeup after that; without wake-up events in the trace, where sched_switch puts it back on a CPU, which adds
the time it waited runnable). An interval still open at the end of the trace is left out.

What it waited on comes from the nest (analyzers/io_span.py): the spans of the thread's own nests (its calls, its
file operations, and everything they caused: the FUSE request and the daemon's work, the journal commit its sync
waited for, the block requests and their device time, span_owner.py) that were active during the interval. At
each instant the deepest active one is what the thread waited on, as the exclusive times of the waterfall are
counted:
  fuse      a FUSE request was in flight and its daemon in none of the layers below
  file      an android_fs read or write, nothing below it active
  fs        the lower file system (the daemon's call, a sync_file), nothing below
  journal   a journal commit the thread's sync waited for, none of its block requests in flight
  block     a block request of the nest in flight (queued or on the device)
  call      inside one of the thread's calls, none of the layers below active (a lock, a page fault, readahead
            of another task's)
Time in D outside every nest of the thread goes to the kernel function it blocked in where Android's
sched_blocked_reason names it (the event of that thread between the switch and the thread's return to a CPU; the
function without its offset, after `io:` when the kernel counted the wait as IO wait (iowait=1: io_schedule),
else after `caller:`), else `unknown`. count is the number of intervals that spent time
on that cause; blocked_ns the time. The causes of one thread add up to its time in D.
"""

from __future__ import annotations

import polars as pl

from mobiperf.analyzers.intervals import merged
from mobiperf.analyzers.io_span import LAYERS, RANK
from mobiperf.analyzers.scope import with_scope
from mobiperf.analyzers.task_identity import thread_identities

WAITED_ON = {"syscall": "call", "fuse": "fuse", "file": "file", "fs": "fs", "journal": "journal", "block": "block",
             "device": "block"}
KEY = ["rep", "tid"]


def summarize_blocked(sched_switch: pl.DataFrame, sched_wakeup: pl.DataFrame | None = None,
                      sched_blocked_reason: pl.DataFrame | None = None, io_span: pl.DataFrame | None = None,
                      span_owner: pl.DataFrame | None = None, task: pl.DataFrame | None = None,
                      android_fs_event: pl.DataFrame | None = None, task_role: pl.DataFrame | None = None,
                      syscall_io: pl.DataFrame | None = None) -> pl.DataFrame:
    """blocked: (rep, scope, process, pid, thread, tid, waited_on, count, blocked_ns) (module docstring)."""
    iv = blocked_intervals(sched_switch, sched_wakeup)
    parts = _split_by_nest(iv, io_span, span_owner)
    rest = _outside_nests(parts, sched_blocked_reason)
    every = pl.concat([parts.filter(pl.col("waited_on") != "_outside"), rest], how="vertical_relaxed")
    per = every.filter(pl.col("blocked_ns") > 0).group_by(*KEY, "waited_on").agg(
        count=pl.col("interval").n_unique().cast(pl.Int64), blocked_ns=pl.col("blocked_ns").sum().cast(pl.Int64))
    names = sched_switch.select("rep", pl.col("prev_tid").alias("tid"), pl.col("prev_comm").alias("thread")) \
        .filter(pl.col("thread") != "<...>")
    who = thread_identities(task, android_fs_event, names.group_by(KEY).agg(pl.col("thread").last()))
    out = per.join(who, on=KEY, how="left").with_columns(process=pl.coalesce("process", "thread"))
    out = with_scope(out, task_role, syscall_io, pid="tid", comm="thread", process="pid")
    return out.select("rep", "scope", "process", "pid", "thread", "tid", "waited_on", "count", "blocked_ns").sort(
        "rep", "blocked_ns", "tid", "waited_on", descending=[False, True, False, False])


def blocked_intervals(sched_switch: pl.DataFrame, sched_wakeup: pl.DataFrame | None) -> pl.DataFrame:
    """(rep, tid, interval, start, end, back): each time a thread left the CPU in D, until its wake-up (end) and
    its return to a CPU (back); intervals with no end in the trace are left out."""
    sw = sched_switch.sort("rep", "ts")
    out = sw.filter(pl.col("prev_state").str.split("|").list.contains("D")).select(
        "rep", pl.col("prev_tid").alias("tid"), pl.col("ts").alias("start"))
    back = sw.select("rep", pl.col("next_tid").alias("tid"), pl.col("ts").alias("back"))
    iv = out.sort("start").join_asof(back.sort("back"), left_on="start", right_on="back", by=KEY,
                                     strategy="forward", allow_exact_matches=False, check_sortedness=False)
    if sched_wakeup is not None and len(sched_wakeup):
        woken = sched_wakeup.select("rep", "tid", pl.col("ts").alias("woken")).sort("woken")
        iv = iv.join_asof(woken, left_on="start", right_on="woken", by=KEY, strategy="forward",
                          check_sortedness=False)
        end = pl.when(pl.col("woken").is_not_null() & (pl.col("woken") <= pl.col("back").fill_null(pl.col("woken"))))\
            .then(pl.col("woken")).otherwise(pl.col("back"))
    else:
        end = pl.col("back")
    iv = iv.with_columns(end=end).filter(pl.col("end").is_not_null())
    return iv.with_row_index("interval").select("rep", "tid", pl.col("interval").cast(pl.Int64), "start", "end",
                                                pl.col("back").fill_null(pl.col("end")))


def _split_by_nest(iv: pl.DataFrame, io_span: pl.DataFrame | None, span_owner: pl.DataFrame | None) -> pl.DataFrame:
    """(rep, tid, interval, start, back, waited_on, blocked_ns): each interval's time by the deepest layer of the
    thread's nests active then; waited_on `_outside` for its time outside every nest."""
    total = iv.with_columns(blocked_ns=pl.col("end") - pl.col("start"))
    if io_span is None or span_owner is None or not len(io_span):
        return total.with_columns(waited_on=pl.lit("_outside")).drop("end")
    spans = io_span.select("rep", "span_id", "layer", "ts", "end_ts").join(
        span_owner.select("rep", "span_id", "tid"), on=["rep", "span_id"]).filter(pl.col("end_ts") > pl.col("ts"))
    spans = spans.join(iv.select(KEY).unique(), on=KEY)  # only the threads that blocked
    spans = spans.with_columns(_rank=pl.col("layer").replace_strict(RANK, default=-1))
    # cover(>= rank) only changes at the ranks the trace has: compute those, the others take the next one up
    present = sorted(set(spans["_rank"].unique().to_list()) - {-1})
    by_rank = {rank: _covered(iv, _union(spans.filter(pl.col("_rank") >= rank))) for rank in present}
    none = pl.Series([0] * iv.height, dtype=pl.Int64)
    covered = {rank: next((by_rank[r] for r in present if r >= rank), none) for rank in range(len(LAYERS) + 1)}
    parts = [total.with_columns(waited_on=pl.lit("_outside"), blocked_ns=pl.col("blocked_ns") - covered[0])]
    for rank, layer in enumerate(LAYERS):
        parts.append(total.with_columns(waited_on=pl.lit(WAITED_ON[layer]),
                                        blocked_ns=covered[rank] - covered[rank + 1]))
    return pl.concat(parts).drop("end")


def _union(spans: pl.DataFrame) -> pl.DataFrame:
    """(rep, tid, s, e, before): the union of the spans per thread as disjoint intervals, with the covered length
    before each."""
    joined = merged(spans, KEY).sort(*KEY, "s")
    return joined.with_columns(before=(pl.col("e") - pl.col("s")).cum_sum().shift(1, fill_value=0).over(KEY))


def _covered(iv: pl.DataFrame, merged: pl.DataFrame) -> pl.Series:
    """Per interval (in iv's order): how long the union covers of [start, end]."""
    def upto(col: str) -> pl.Series:
        pts = iv.select(*KEY, "interval", pl.col(col).alias("x")).sort("x")
        m = pts.join_asof(merged.sort("s"), left_on="x", right_on="s", by=KEY, strategy="backward",
                          check_sortedness=False)
        got = m.select("interval", (pl.col("before") + (pl.min_horizontal("x", "e") - pl.col("s")).clip(0))
                       .fill_null(0).alias("f"))
        return iv.select("interval").join(got, on="interval", how="left")["f"].fill_null(0)

    if not merged.height:
        return pl.Series([0] * iv.height, dtype=pl.Int64)
    return upto("end") - upto("start")


def _outside_nests(parts: pl.DataFrame, sched_blocked_reason: pl.DataFrame | None) -> pl.DataFrame:
    """The time outside every nest, named by the interval's sched_blocked_reason where the trace has one."""
    outside = parts.filter(pl.col("waited_on") == "_outside")
    if sched_blocked_reason is None or not len(sched_blocked_reason):
        return outside.with_columns(waited_on=pl.lit("unknown"))
    reasons = sched_blocked_reason.select(
        "rep", "tid", pl.col("ts").alias("at"),
        (pl.when(pl.col("is_io_wait")).then(pl.lit("io:")).otherwise(pl.lit("caller:"))
         + pl.col("caller").str.replace(r"\+0x[0-9a-f]+/0x[0-9a-f]+$", "")).alias("_why"))
    named = outside.sort("start").join_asof(reasons.sort("at"), left_on="back", right_on="at", by=KEY,
                                            strategy="backward", check_sortedness=False)
    return named.with_columns(waited_on=pl.when(pl.col("at") >= pl.col("start")).then(pl.col("_why"))
                              .otherwise(pl.lit("unknown"))).drop("at", "_why")
