"""The file layer of a phone: every android_fs read and write, with its file type, size and locality.

Android kernels trace file data IO with the file's path (collectors/parse/android_fs.py): reads where the page
cache misses, writes where they enter it. That attributes IO to files on a phone without strace, and it is the
layer between the system calls and the block requests:
  one row per start event (android_fs_dataread_start / datawrite_start), with
  dur        start -> the first end event of the same (op, inode, offset) after it (null when none was seen)
  pid/comm   the task's tgid and command line as the event records them (the thread's pid and comm if absent)
  tid/thread the thread that did the IO (the event's own pid and comm): the file layer's span in io_span
  file_type  from the path (file_type.py: db, db-journal, db-wal, db-shm, media, other; unknown when the kernel
             could not name the file)
  size_class, size_log2_bytes, locality (strict and tolerant per (process, file) in time order; global per
             process) as at the syscall layer; sync_mode `-` (the events do not say how the file was opened)
Limits: a read's size is what missed the page cache (readahead included), not what the application asked for;
buffered writes are counted as they enter the page cache, not when writeback sends them to the device.
"""

from __future__ import annotations

import polars as pl

from mobiperf.analyzers.file_type import file_type_of_path
from mobiperf.analyzers.locality import classify_locality
from mobiperf.analyzers.size import size_class, size_log2_bucket

PAIR_KEYS = ["rep", "op", "ino", "offset_bytes"]


def classify_file_io(android_fs_event: pl.DataFrame) -> pl.DataFrame:
    ev = android_fs_event.with_row_index("_row")
    starts = ev.filter(pl.col("phase") == "start").sort("ts", maintain_order=True)
    ends = ev.filter(pl.col("phase") == "end").select(*PAIR_KEYS, pl.col("ts").alias("end_ts")).sort("end_ts")
    paired = starts.join_asof(ends, left_on="ts", right_on="end_ts", by=PAIR_KEYS, strategy="forward",
                              check_sortedness=False)
    path = pl.when(pl.col("path").is_in(["<unknown>", ""])).then(None).otherwise(pl.col("path"))
    df = paired.with_columns(
        dur=pl.col("end_ts") - pl.col("ts"), tid=pl.col("pid"), thread=pl.col("comm"),
        pid=pl.coalesce(pl.col("task_pid"), pl.col("pid")),
        comm=pl.coalesce(pl.col("cmdline"), pl.col("comm")),
        path=path,
    ).with_columns(
        file_type=file_type_of_path(pl.col("path")),
        size_class=size_class(pl.col("size_bytes")),
        size_log2_bytes=size_log2_bucket(pl.col("size_bytes")),
        sync_mode=pl.lit("-"),
        _file=pl.coalesce(pl.col("path"), pl.col("ino").cast(pl.Utf8)),
    )
    df = classify_locality(df, stream=["rep", "pid", "_file", "op"], global_stream=["rep", "pid"],
                           order_by=["rep", "ts", "_row"], start=pl.col("offset_bytes"),
                           length=pl.col("size_bytes"))
    return df.sort("rep", "ts", "_row").select(
        "rep", "ts", "dur", "pid", "comm", "op", "path", "file_type", "size_bytes", "offset_bytes", "size_class",
        "size_log2_bytes", "locality", "locality_tolerant", "locality_global", "sync_mode", "ino", "tid", "thread")
