"""Every IO system call classified: op, size, locality, sync mode and file type.

Input: syscall_io (strace -f -ttt -T -y, or the ftrace syscalls:sys_enter/exit events). IO calls are
  read:  read, pread64, readv, preadv, preadv2          write: write, pwrite64, writev, pwritev, pwritev2
  sync:  fsync, fdatasync, msync, sync_file_range, syncfs, sync
Other calls (open, close, lseek...) are not IO; lseek only moves a file's position.

size_bytes is what the call transferred (its return value; the requested size when it failed or never
returned; 0 for syncs). The file offset is the call's own offset argument (p-variants), else the running
position of (process, fd): the last lseek's result (0 at the start) plus the bytes transferred since.
Locality (locality.py) runs per (process, file) and globally per process, in call order.

Sync mode: a sync call's own name (fsync, fdatasync, msync, sync_file_range; syncfs/sync count as fsync);
a read or write takes it from the `open_flags` of its fd, which the parsers follow through open, dup, fcntl,
fork and exec (collectors/parse/fd_flags.py): o_direct when O_DIRECT is set (also with O_SYNC/O_DSYNC: one
category per call, and the direct path is what decides how its data reaches the device), else o_sync for O_SYNC
(which strace prints for __O_SYNC|O_DSYNC: the name is matched, never the O_DSYNC bit inside it), else o_dsync,
else `buffered` — also where the fd's open was not traced (inherited fds, a run dir older than open_flags).

File type (file_type.py) comes from the path strace -y prints (unlink and rename: their path argument);
ftrace syscalls carry no path (`unknown`): the kernel prints only the user pointer of a file name.

Both sources in one table (a run with strace and the syscalls events): the calls are classified from strace
alone (it sees every call and the paths), so that each call is counted once in syscall_class and every table
built on it; the ftrace rows stay in syscall_io, and classify_syscalls(syscall_io.filter(source == "ftrace"))
classifies them on their own.

Clocks: strace stamps calls with the wall clock, the kernel's events with the trace clock. When the table holds
strace rows and the run has trace markers (the generator writes them through write(2) on trace_marker, which
strace sees too), align_to_trace_clock() shifts the strace times by the median difference between each marker
and the write call that made it (the k-th marker write of a repetition with its k-th marker), to within the
duration of one write. Without markers the times stay on the wall clock and cross-layer stitching is wrong.

Limits: mmap writes make no write calls (only msync is seen); a write through an fd whose open was not traced
counts as buffered even if it was opened O_SYNC/O_DIRECT (its block requests still show REQ_SYNC/FUA in
block_io); io_uring and AIO submissions are not IO calls here.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from mobiperf.analyzers.file_type import file_type_of_path
from mobiperf.analyzers.locality import classify_locality
from mobiperf.analyzers.size import size_class, size_log2_bucket

READS = ("read", "pread64", "readv", "preadv", "preadv2")
WRITES = ("write", "pwrite64", "writev", "pwritev", "pwritev2")
SYNCS = ("fsync", "fdatasync", "msync", "sync_file_range", "syncfs", "sync")
SYNC_MODE_OF_CALL = {"fsync": "fsync", "fdatasync": "fdatasync", "msync": "msync",
                     "sync_file_range": "sync_file_range", "syncfs": "fsync", "sync": "fsync"}


def _open_flag_mode(flags: pl.Expr) -> pl.Expr:
    # names between `|`: O_DIRECTORY is not O_DIRECT, O_DSYNC not O_SYNC
    f = pl.lit("|") + flags.fill_null("").str.to_uppercase() + pl.lit("|")
    return (pl.when(f.str.contains("|O_DIRECT|", literal=True)).then(pl.lit("o_direct"))
            .when(f.str.contains(r"\|(?:__)?O_SYNC\|")).then(pl.lit("o_sync"))
            .when(f.str.contains("|O_DSYNC|", literal=True)).then(pl.lit("o_dsync"))
            .otherwise(pl.lit("buffered")))


def trace_clock_offsets(syscall_io: pl.DataFrame, trace_marker: pl.DataFrame) -> dict[int, int]:
    """Per repetition: ns to add to strace times to put them on the trace clock (empty where unknown)."""
    calls = syscall_io.filter((pl.col("source") == "strace") & pl.col("syscall").is_in(["write", "pwrite64"])
                              & pl.col("path").fill_null("").str.contains("trace_marker"))
    out = {}
    for rep in sorted(set(calls["rep"].to_list())):
        writes = calls.filter(pl.col("rep") == rep).sort("ts")["ts"]
        marks = trace_marker.filter(pl.col("rep") == rep).sort("ts")["ts"]
        n = min(len(writes), len(marks))
        if n:  # integer median: float64 cannot hold wall-clock nanoseconds exactly
            d = np.sort((marks.head(n) - writes.head(n)).to_numpy())
            out[rep] = int(d[(n - 1) // 2] + (d[n // 2] - d[(n - 1) // 2]) // 2)
    return out


def align_to_trace_clock(syscall_io: pl.DataFrame, trace_marker: pl.DataFrame) -> pl.DataFrame:
    offsets = trace_clock_offsets(syscall_io, trace_marker)
    if not offsets:
        return syscall_io
    shift = pl.col("rep").replace_strict(offsets, default=0, return_dtype=pl.Int64)
    return syscall_io.with_columns(
        ts=pl.when(pl.col("source") == "strace").then(pl.col("ts") + shift).otherwise(pl.col("ts")))


def classify_syscalls_on_trace_clock(syscall_io: pl.DataFrame, trace_marker: pl.DataFrame) -> pl.DataFrame:
    return classify_syscalls(align_to_trace_clock(syscall_io, trace_marker))


def classify_syscalls(syscall_io: pl.DataFrame) -> pl.DataFrame:
    if syscall_io["source"].n_unique() > 1:  # one call, two records: keep strace's (see the module docstring)
        syscall_io = syscall_io.filter(pl.col("source") == "strace")
    calls = syscall_io.with_row_index("_row").sort(["rep", "ts", "_row"])
    is_lseek = pl.col("syscall").is_in(["lseek", "_llseek"])
    calls = calls.filter(pl.col("syscall").is_in([*READS, *WRITES, *SYNCS]) | is_lseek)
    op = (pl.when(pl.col("syscall").is_in(READS)).then(pl.lit("read"))
          .when(pl.col("syscall").is_in(WRITES)).then(pl.lit("write"))
          .when(pl.col("syscall").is_in(SYNCS)).then(pl.lit("sync")).otherwise(pl.lit("seek")))
    moved = pl.when(pl.col("ret") >= 0).then(pl.col("ret")).otherwise(0)
    calls = calls.with_columns(
        op=op,
        size_bytes=pl.when(op == "sync").then(0)
        .when(pl.col("ret").is_not_null() & (pl.col("ret") >= 0)).then(pl.col("ret"))
        .otherwise(pl.col("request_bytes").clip(lower_bound=0)).cast(pl.Int64))
    # the running position per (process, fd): segments start at each lseek
    calls = calls.with_columns(pl.col("source").fill_null("")) if "source" in calls.columns else \
        calls.with_columns(source=pl.lit(""))
    stream = ["rep", "source", "pid", "fd"]
    calls = calls.with_columns(_seg=is_lseek.cast(pl.Int64).cum_sum().over(stream))
    calls = calls.with_columns(
        _base=pl.when(is_lseek).then(moved).otherwise(None).first().over([*stream, "_seg"]).fill_null(0),
        _moved=pl.when(is_lseek | (op == "sync")).then(0).otherwise(moved))
    calls = calls.with_columns(
        _pos=pl.col("_base") + pl.col("_moved").cum_sum().over([*stream, "_seg"]) - pl.col("_moved"))
    calls = calls.filter(~is_lseek).with_columns(
        offset=pl.when(pl.col("offset_bytes") >= 0).then(pl.col("offset_bytes")).otherwise(pl.col("_pos")))
    has_flags = "open_flags" in calls.columns
    sync_mode = pl.when(op == "sync").then(pl.col("syscall").replace_strict(SYNC_MODE_OF_CALL, default="fsync"))
    sync_mode = sync_mode.otherwise(_open_flag_mode(pl.col("open_flags")) if has_flags else pl.lit("buffered"))
    calls = calls.with_columns(
        file_type=file_type_of_path(pl.col("path")), size_class=size_class(pl.col("size_bytes")),
        size_log2_bytes=size_log2_bucket(pl.col("size_bytes")), sync_mode=sync_mode,
        _file=pl.when(pl.col("path").fill_null("") != "").then(pl.col("path"))
        .otherwise(pl.lit("fd:") + pl.col("fd").cast(pl.Utf8)))
    calls = classify_locality(calls, stream=["rep", "source", "pid", "_file", "op"],
                              global_stream=["rep", "source", "pid", "op"],
                              order_by=["rep", "ts", "_row"], start=pl.col("offset"),
                              length=pl.when(op == "sync").then(0).otherwise(pl.col("size_bytes")))
    return calls.sort(["rep", "ts", "_row"]).select(
        "rep", "ts", "dur", "pid", "comm", "syscall", "op", "fd", pl.col("path").fill_null(""), "file_type",
        "size_bytes", pl.col("offset").alias("offset_bytes"), "size_class", "size_log2_bytes", "locality",
        "locality_tolerant", "locality_global", "sync_mode")
