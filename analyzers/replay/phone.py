"""The replayable calls of a phone's file events: Android's android_fs reads and writes, and the file system's
sync_file events, when a trace has no system calls (a Perfetto or systrace capture of a phone).

  android_fs_datawrite_start   pwrite of its bytes at its offset (one event per page that entered the page cache,
                               or per direct IO: a write() of 16 KiB is four events, four replayed calls)
  android_fs_dataread_start    pread of its bytes at its offset (a page-cache miss, readahead included: what
                               reached the storage, not what the application asked for)
  ext4/f2fs_sync_file_enter    fsync, or fdatasync when its datasync flag (f2fs: the exit's) is set, on the file
                               with that inode (named by the android_fs events; an inode they never name is left
                               out and counted)
The thread is the event's task (its tid); `process` keeps the events of one process (its tgid, or a part of its
command line). A file the kernel could not name (`<unknown>`) is `unnamed/ino-N`. Every file existed: each thread
opens the files it uses before its first call on them (read-write if the trace writes to the file, else
read-only) and closes them after its last; these opens and closes are the replay's, not the recording's (counted
in the notes). A file's size is the i_size its first event recorded, or more where a read went further.
Times: a call from its start event to the first end event of the same (op, inode, offset) (file_io.py's
pairing); a sync from its enter to its exit.
"""

from __future__ import annotations

from collections import Counter

import polars as pl

from mobiperf.analyzers.replay.from_syscalls import CALL_COLUMNS
from mobiperf.analyzers.replay.paths import map_paths
from mobiperf.analyzers.replay.workload import ReplayWorkload, finish

PAIR_KEYS = ["op", "ino", "offset_bytes"]


def build_from_android_fs(android_fs_event: pl.DataFrame, fsync_event: pl.DataFrame | None, rep: int,
                          process: str | None = None, *, dependencies: str = "all") -> ReplayWorkload:
    """The replay of one repetition of a phone's file events (module docstring)."""
    data, left_out = _data_calls(android_fs_event.filter(pl.col("rep") == rep), process)
    names = data.group_by("ino").agg(pl.col("path").mode().first())
    syncs = _sync_calls(fsync_event.filter(pl.col("rep") == rep) if fsync_event is not None else None, names,
                        set(data["tid"].unique().to_list()) if process else None, left_out)
    calls = pl.concat([data.select(*CALL_COLUMNS, "_isize"), syncs.select(*CALL_COLUMNS, "_isize")]) \
        .sort("start_ns", maintain_order=True)
    calls, nhandles = _open_and_close(calls)
    left_out["opens and closes around each thread's use of a file (the replay's, not in the trace)"] += int(
        calls["is_synthetic"].sum())
    sizes = dict(calls.filter(pl.col("_isize").is_not_null()).group_by("path", maintain_order=True)
                 .agg(pl.col("_isize").first()).rows())
    return finish(calls.drop("_isize"), nhandles, left_out, known_sizes=sizes, all_exist=True,
                  dependencies=dependencies)


def _data_calls(events: pl.DataFrame, process: str | None) -> tuple[pl.DataFrame, Counter]:
    left_out: Counter = Counter()
    starts = events.filter(pl.col("phase") == "start").sort("ts", maintain_order=True)
    if process:
        mine = (pl.col("task_pid").cast(pl.Utf8) == process) | pl.col("cmdline").fill_null("").str.contains(
            process, literal=True) | pl.col("comm").fill_null("").str.contains(process, literal=True)
        left_out[f"file events of other processes than {process}"] += int(starts.filter(~mine).height)
        starts = starts.filter(mine)
    ends = events.filter(pl.col("phase") == "end").select(*PAIR_KEYS, pl.col("ts").alias("end_ts")).sort("end_ts")
    paired = starts.join_asof(ends, left_on="ts", right_on="end_ts", by=PAIR_KEYS, strategy="forward",
                              check_sortedness=False)
    path = pl.when(pl.col("path").fill_null("").is_in(["", "<unknown>"])).then(
        pl.lit("/unnamed/ino-") + pl.col("ino").cast(pl.Utf8)).otherwise(pl.col("path"))
    paired = paired.with_columns(_abs=path)
    where = map_paths(paired["_abs"], None)
    paired = paired.with_columns(_rel=where["rel"], _kind=where["kind"])
    for kind, n in paired.filter(pl.col("_kind") != "inside").group_by("_kind").len().rows():
        left_out[f"file events on {kind} paths"] += n
    paired = paired.filter(pl.col("_kind").is_in(["inside", "climbed"]))
    return paired.select(
        pl.col("pid").cast(pl.Int32).alias("tid"), pl.col("ts").alias("start_ns"),
        pl.coalesce("end_ts", "ts").alias("end_ns"),
        pl.when(pl.col("op") == "write").then(pl.lit("pwrite")).otherwise(pl.lit("pread")).alias("op"),
        pl.lit(None, pl.Int64).alias("fd"), pl.lit(None, pl.Int64).alias("new_fd"), pl.col("_rel").alias("path"),
        pl.lit("").alias("path2"), pl.lit("").alias("flags"), pl.col("offset_bytes").alias("offset"),
        pl.col("size_bytes").alias("size"), pl.col("size_bytes").alias("ret"), "ino",
        pl.col("i_size_bytes").alias("_isize")).cast(CALL_COLUMNS), left_out


def _sync_calls(fsync_event: pl.DataFrame | None, names: pl.DataFrame, tids: set[int] | None,
                left_out: Counter) -> pl.DataFrame:
    """The syncs of files the file events named (of the chosen process's threads when tids is given)."""
    empty = pl.DataFrame(schema={**CALL_COLUMNS, "_isize": pl.Int64})
    if fsync_event is None or not fsync_event.height:
        return empty
    enters = fsync_event.filter(pl.col("phase") == "enter").sort("ts")
    exits = fsync_event.filter(pl.col("phase") == "exit").select(
        "pid", "ino", pl.col("ts").alias("_end"), pl.col("datasync").alias("_ds")).sort("_end")
    syncs = enters.join_asof(exits, left_on="ts", right_on="_end", by=["pid", "ino"], strategy="forward",
                             check_sortedness=False).join(names, on="ino", how="left")
    unnamed = syncs.filter(pl.col("path").is_null())
    left_out["syncs of a file no android_fs event named"] += unnamed.height
    syncs = syncs.filter(pl.col("path").is_not_null())
    if tids is not None:
        syncs = syncs.filter(pl.col("pid").is_in(list(tids)))
    datasync = pl.coalesce("datasync", "_ds").fill_null(0) > 0
    return syncs.select(
        pl.col("pid").cast(pl.Int32).alias("tid"), pl.col("ts").alias("start_ns"),
        pl.coalesce("_end", "ts").alias("end_ns"),
        pl.when(datasync).then(pl.lit("fdatasync")).otherwise(pl.lit("fsync")).alias("op"),
        pl.lit(None, pl.Int64).alias("fd"), pl.lit(None, pl.Int64).alias("new_fd"), "path",
        pl.lit("").alias("path2"), pl.lit("").alias("flags"), pl.lit(None, pl.Int64).alias("offset"),
        pl.lit(None, pl.Int64).alias("size"), pl.lit(0, pl.Int64).alias("ret"), pl.lit(None, pl.Int64).alias("_isize"),
    ).cast({**CALL_COLUMNS, "_isize": pl.Int64})


def _open_and_close(calls: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """A handle per (thread, file), opened just before its first call and closed just after its last."""
    keys = calls.group_by("tid", "path").agg(
        pl.col("start_ns").min().alias("_first"), pl.col("end_ns").max().alias("_last"),
        (pl.col("op") == "pwrite").any().alias("_writes")).sort("_first", "tid", "path").with_row_index("handle")
    keys = keys.with_columns(pl.col("handle").cast(pl.Int64))
    calls = calls.join(keys.select("tid", "path", "handle"), on=["tid", "path"], how="left", maintain_order="left")
    base = {"fd": pl.lit(None, pl.Int64), "new_fd": pl.lit(None, pl.Int64), "path2": pl.lit(""),
            "offset": pl.lit(None, pl.Int64), "size": pl.lit(None, pl.Int64), "ret": pl.lit(None, pl.Int64),
            "_isize": pl.lit(None, pl.Int64), "is_synthetic": pl.lit(True)}
    opens = keys.select("tid", pl.col("_first").alias("start_ns"), pl.col("_first").alias("end_ns"),
                        pl.lit("open").alias("op"), "path", "handle",
                        pl.when("_writes").then(pl.lit("rdwr")).otherwise(pl.lit("rdonly")).alias("flags"),
                        pl.lit(0).alias("_o"), **base)
    closes = keys.select("tid", pl.col("_last").alias("start_ns"), pl.col("_last").alias("end_ns"),
                         pl.lit("close").alias("op"), "path", "handle", pl.lit("").alias("flags"),
                         pl.lit(2).alias("_o"), **base)
    calls = calls.with_columns(is_synthetic=pl.lit(False), _o=pl.lit(1))
    out = pl.concat([opens, calls, closes], how="diagonal_relaxed").with_row_index("_r")
    out = out.sort("start_ns", "_o", "_r").drop("_o", "_r")
    return out.with_columns(handle2=pl.lit(None, pl.Int64)), keys.height
