"""The order between threads a replay must keep: what a call waited for in the recording (hfplayer, FAST '17:
replays that ignore it reorder IO and lose their accuracy; replays that keep orders the recording does not
need couple independent threads and lose it too).

A thread's calls keep their order by themselves. Across threads, a call C of thread T waits (the generator's
`@U:K`: until thread U has finished K calls) for
  - the open (or dup) that made its handle, when another thread made it (a descriptor is used after it exists);
  - the latest ordering call of another thread U that had returned when C started: fsync and fdatasync (a call
    that started after another thread's fsync completed waits for it), and the calls that change which files
    exist or what they hold (open, dup, rename, unlink, mkdir, rmdir, ftruncate, fallocate), and a write to
    /proc/sys/vm/drop_caches (every file's cached pages: in every mode, as global as it gets). Which of them, by
    mode:
      all   (the default) every other thread's, whatever the file: the order of syncs and namespace changes the
            trace shows. It matters beyond the files: concurrent fsyncs share one journal commit, so threads that
            drift apart in a replay commit (and flush) more often than they did (a 4-thread random fsync workload
            recorded with 339 flushes was replayed with 339 +- 5% keeping this order, with 456 to 507 without it).
      file  those on C's file, on a directory above it, or on a file below C's directory: only the order the file
            system's state needs (a write after another thread's fsync of that file; an open after another
            thread's rename to its name, or its mkdir of the directory; a directory fsync after another thread
            created a file in it). Threads on different files are free to drift.
      none  none: only the handles' own waits.
"Had returned" is the other call's end strictly before C's start on the trace clock (ftrace text ticks in
microseconds: a tie is no evidence of an order, and keeping it could make two zero-length calls wait on each
other). Only the first (related) call of T after such an event carries the wait (the later ones follow it in T's
order), and of several events of U only the latest. No cycle can arise: every wait, and a thread's own order,
points to a call that started earlier. The opens a replay adds (for a phone's file events, for descriptors opened
before the recording) are no events of the recording: nothing waits for them but their own handle's users.
Limits: data dependencies (a read of what another thread wrote without a sync in between) are not kept; nor are
waits the recording does not show (a lock held across calls, a message between processes).
"""

from __future__ import annotations

import polars as pl

from mobiperf.analyzers.replay.paths import DROP_CACHES, parents

ORDERING = ("fsync", "fdatasync", "open", "dup", "rename", "unlink", "mkdir", "rmdir", "ftruncate", "fallocate")
MODES = ("all", "file", "none")
WAIT_COLUMNS = {"thread": pl.Int64, "index": pl.Int64, "wait_thread": pl.Int64, "wait_count": pl.Int64}


def cross_thread_waits(calls: pl.DataFrame, mode: str = "all") -> pl.DataFrame:
    """(thread, index, wait_thread, wait_count): call `index` of `thread` waits until `wait_thread` has finished
    `wait_count` calls. calls: thread, index, start_ns, end_ns, op, path, path2, handle, handle2."""
    if mode not in MODES:
        raise ValueError(f"dependency mode {mode!r}: one of {', '.join(MODES)}")
    threads = calls["thread"].unique()
    if len(threads) < 2:
        return pl.DataFrame(schema=WAIT_COLUMNS)
    parts = [_on_handles(calls)]
    if mode == "all":
        parts.append(_after_any_event(calls, threads))
    elif mode == "file":
        parts.append(_after_related_event(calls))
        parts.append(_after_any_event(calls, threads, only=_drops_caches()))
    waits = pl.concat([p.cast(WAIT_COLUMNS) for p in parts])
    return waits.group_by("thread", "index", "wait_thread").agg(pl.col("wait_count").max()) \
        .sort("thread", "index", "wait_thread")


def _events(calls: pl.DataFrame) -> pl.DataFrame:
    made_up = pl.col("is_synthetic").fill_null(False) if "is_synthetic" in calls.columns else pl.lit(False)
    return calls.filter((pl.col("op").is_in(ORDERING) | _drops_caches()) & ~made_up)


def _drops_caches() -> pl.Expr:
    """A write to drop_caches: every file's cached pages, a state as global as a sync's."""
    return (pl.col("op") == "write") & (pl.col("path") == DROP_CACHES)


def _after_any_event(calls: pl.DataFrame, threads: pl.Series, only: pl.Expr | None = None) -> pl.DataFrame:
    events = _events(calls) if only is None else _events(calls).filter(only)
    events = events.select(pl.col("thread").alias("wait_thread"), (pl.col("index") + 1).alias("wait_count"),
                           pl.col("end_ns").alias("_t"))
    pairs = events.join(pl.DataFrame({"thread": threads}), how="cross").filter(
        pl.col("thread") != pl.col("wait_thread"))
    starts = calls.select("thread", "index", pl.col("start_ns").alias("_s"))
    return _first_after(pairs, starts, ["thread"])


def _after_related_event(calls: pl.DataFrame) -> pl.DataFrame:
    """Waits on the events of other threads on the same file, a directory above it, or a file below it."""
    events = _events(calls)
    events = pl.concat([events.select("thread", "index", "end_ns", "path"),
                        events.filter(pl.col("op") == "rename").select("thread", "index", "end_ns",
                                                                       pl.col("path2").alias("path"))])
    events = events.select(pl.col("thread").alias("wait_thread"), (pl.col("index") + 1).alias("wait_count"),
                           pl.col("end_ns").alias("_t"), "path")
    starts = calls.filter(pl.col("path").fill_null("") != "").select("thread", "index", pl.col("start_ns").alias("_s"),
                                                                      "path")
    threads = calls.select("thread").unique()
    found = []
    # the event's file is the call's, or a directory above it: key the calls by every directory above them too
    above = _with_ancestors(starts, "path", "_key")
    pairs = events.join(threads, how="cross").filter(pl.col("thread") != pl.col("wait_thread")) \
        .with_columns(_key=pl.col("path"))
    found.append(_first_after(pairs, above, ["thread", "_key"]))
    # the call is on a directory above the event's file: key the events by their directories
    below = _with_ancestors(events, "path", "_key", include_self=False).join(threads, how="cross").filter(
        pl.col("thread") != pl.col("wait_thread"))
    found.append(_first_after(below, starts.with_columns(_key=pl.col("path")), ["thread", "_key"]))
    return pl.concat(found)


def _with_ancestors(df: pl.DataFrame, col: str, key: str, include_self: bool = True) -> pl.DataFrame:
    """df with one row per path and each directory above it (the root `.` included) in `key`."""
    distinct = df[col].unique().to_list()
    table = pl.DataFrame({col: distinct, key: [([p] if include_self else []) + ([] if p == "." else ["."])
                                                 + parents(p) for p in distinct]},
                         schema={col: pl.Utf8, key: pl.List(pl.Utf8)})
    return df.join(table, on=col, how="left").explode(key).filter(pl.col(key).is_not_null())


def _first_after(pairs: pl.DataFrame, starts: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """For every (event, thread) pair, the first call of that thread (matching `by`) starting after the event."""
    hit = pairs.sort("_t").join_asof(starts.select(*by, "index", "_s").sort("_s"), left_on="_t", right_on="_s",
                                     by=by, strategy="forward", allow_exact_matches=False, check_sortedness=False)
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
