"""The order between threads a replay must keep: what a call waited for in the recording (hfplayer, FAST '17:
replays that ignore it reorder IO and lose their accuracy).

A thread's calls keep their order by themselves. Across threads, a call C of thread T waits (the generator's
`@U:K`: until thread U has finished K calls) for
  - the latest ordering call of every other thread U that had returned when C started: fsync and fdatasync (a
    call that started after another thread's fsync completed waits for it), and the calls that change which files
    exist or what they hold (open, dup, rename, unlink, mkdir, rmdir, ftruncate, fallocate);
  - the open (or dup) that made its handle, when another thread made it (a descriptor is used after it exists).
The opens a replay adds (for a phone's file events, for descriptors opened before the recording) are no events of
the recording: nothing waits for them but their own handle's users.
"Had returned" is the other call's end strictly before C's start on the trace clock (ftrace text ticks in
microseconds: a tie is no evidence of an order, and keeping it could make two zero-length calls wait on each
other). Only the first call of T after such an event carries the wait (the later ones follow it in T's order),
and of several events of U only the latest. No cycle can arise: every wait, and a thread's own order, points to
a call that started earlier.
Limits: data dependencies (a read of what another thread wrote without a sync in between) are not kept; nor are
waits the recording does not show (a lock held across calls, a message between processes).
"""

from __future__ import annotations

import polars as pl

ORDERING = ("fsync", "fdatasync", "open", "dup", "rename", "unlink", "mkdir", "rmdir", "ftruncate", "fallocate")


def cross_thread_waits(calls: pl.DataFrame) -> pl.DataFrame:
    """(thread, index, wait_thread, wait_count): call `index` of `thread` waits until `wait_thread` has finished
    `wait_count` calls. calls: thread, index, start_ns, end_ns, op, handle, handle2."""
    schema = {"thread": pl.Int64, "index": pl.Int64, "wait_thread": pl.Int64, "wait_count": pl.Int64}
    threads = calls["thread"].unique()
    if len(threads) < 2:
        return pl.DataFrame(schema=schema)
    waits = pl.concat([_after_events(calls, threads), _on_handles(calls)]).cast(schema)
    return waits.group_by("thread", "index", "wait_thread").agg(pl.col("wait_count").max()) \
        .sort("thread", "index", "wait_thread")


def _after_events(calls: pl.DataFrame, threads: pl.Series) -> pl.DataFrame:
    made_up = pl.col("is_synthetic").fill_null(False) if "is_synthetic" in calls.columns else pl.lit(False)
    events = calls.filter(pl.col("op").is_in(ORDERING) & ~made_up).select(
        pl.col("thread").alias("wait_thread"), (pl.col("index") + 1).alias("wait_count"),
        pl.col("end_ns").alias("_t"))
    pairs = events.join(pl.DataFrame({"thread": threads}), how="cross").filter(
        pl.col("thread") != pl.col("wait_thread")).sort("_t")
    starts = calls.select("thread", "index", pl.col("start_ns").alias("_t")).sort("_t")
    hit = pairs.join_asof(starts.rename({"_t": "_s"}), left_on="_t", right_on="_s", by="thread",
                          strategy="forward", allow_exact_matches=False, check_sortedness=False)
    return hit.filter(pl.col("index").is_not_null()).select("thread", "index", "wait_thread", "wait_count")


def _on_handles(calls: pl.DataFrame) -> pl.DataFrame:
    makers = calls.filter(pl.col("op").is_in(["open", "dup"])).select(
        pl.col("handle").alias("_h"), pl.col("thread").alias("wait_thread"), (pl.col("index") + 1).alias("wait_count"))
    uses = pl.concat([
        calls.filter(~pl.col("op").is_in(["open", "dup"]) & pl.col("handle").is_not_null())
        .select("thread", "index", pl.col("handle").alias("_h")),
        calls.filter(pl.col("handle2").is_not_null()).select("thread", "index", pl.col("handle2").alias("_h"))])
    first = uses.join(makers, on="_h").filter(pl.col("thread") != pl.col("wait_thread")) \
        .group_by("thread", "_h").agg(pl.col("index").min(), pl.col("wait_thread").first(),
                                      pl.col("wait_count").first())
    return first.select("thread", "index", "wait_thread", "wait_count")
