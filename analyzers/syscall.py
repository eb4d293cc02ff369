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

Which calls are the workload's (workload_syscalls): the syscalls source also traces the stack's FUSE daemons (their
calls into the lower file system are the layer under FUSE, analyzers/io_span.py); their tasks (task_role, and
every thread that replied to a FUSE request) are taken out here, as are mobiperf's own, and the write(2) calls
that wrote a trace marker (the write that holds the marker's event in the same thread; the generator's
bookkeeping, not its IO) or, before the workload's exec, mobiperf's wrappers' writes to tracefs and cgroup.procs.

Clocks: the kernel's events are on the trace clock. strace stamps calls with the wall clock; the parse stage moves
them onto the trace clock where the run read both clocks (collectors/clock.py: exact to < 1 us, clock_error_ns).
Otherwise (a phone, an older run) place_on_trace_clock() shifts them by the median difference between each trace
marker and the write call that made it (the k-th marker write of a repetition with its k-th marker); its
uncertainty is the spread of those differences plus the longest such write (a marker lies somewhere inside its
write), and it is recorded in clock_error_ns. Without markers the strace times stay on the wall clock (timing
`wall`): such calls are classified but nested in nothing.

Kernel twins: with both strace and the syscalls events, each call has two records. strace's stamps are taken
when it sees the call stop at entry, before the kernel runs it, so the kernel's record of the same call (same
thread and name) starts after strace's stamp and before strace's stamp of the thread's next call. That twin
gives the call its kernel times (timing `kernel`), strace its path and flags; a call the syscalls events do not
cover keeps strace's times (timing `strace`). Each call is counted once.

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


def marker_clock_offsets(syscall_io: pl.DataFrame, trace_marker: pl.DataFrame) -> dict[int, tuple[int, int]]:
    """Per repetition: (ns to add to strace times to put them on the trace clock, its uncertainty in ns)."""
    calls = syscall_io.filter((pl.col("source") == "strace") & pl.col("syscall").is_in(["write", "pwrite64"])
                              & pl.col("path").fill_null("").str.contains("trace_marker"))
    out = {}
    for rep in sorted(set(calls["rep"].to_list())):
        writes = calls.filter(pl.col("rep") == rep).sort("ts")
        marks = trace_marker.filter(pl.col("rep") == rep).sort("ts")["ts"]
        n = min(len(writes), len(marks))
        if n:  # integer median: float64 cannot hold wall-clock nanoseconds exactly
            d = np.sort((marks.head(n) - writes["ts"].head(n)).to_numpy())
            median = int(d[(n - 1) // 2] + (d[n // 2] - d[(n - 1) // 2]) // 2)
            longest = int(writes["dur"].head(n).fill_null(0).max() or 0)
            out[rep] = (median, int(max(abs(d[0] - median), abs(d[-1] - median))) + longest + 1000)
    return out


def place_on_trace_clock(syscall_io: pl.DataFrame, trace_marker: pl.DataFrame | None) -> pl.DataFrame:
    """strace rows still on the wall clock (clock_error_ns null) moved by the markers, where the run has them."""
    if "clock_error_ns" not in syscall_io.columns:
        syscall_io = syscall_io.with_columns(clock_error_ns=pl.lit(None, pl.Int64))
    unplaced = (pl.col("source") == "strace") & pl.col("clock_error_ns").is_null()
    offsets = marker_clock_offsets(syscall_io.filter(unplaced), trace_marker) if trace_marker is not None else {}
    if not offsets:
        return syscall_io
    shift = pl.col("rep").replace_strict({r: o for r, (o, _) in offsets.items()}, default=None, return_dtype=pl.Int64)
    error = pl.col("rep").replace_strict({r: e for r, (_, e) in offsets.items()}, default=None,
                                         return_dtype=pl.Int64)
    return syscall_io.with_columns(
        ts=pl.when(unplaced & shift.is_not_null()).then(pl.col("ts") + shift).otherwise(pl.col("ts")),
        clock_error_ns=pl.when(unplaced).then(error).otherwise(pl.col("clock_error_ns")))


def align_to_trace_clock(syscall_io: pl.DataFrame, trace_marker: pl.DataFrame) -> pl.DataFrame:
    return place_on_trace_clock(syscall_io, trace_marker)


def merge_kernel_twins(syscall_io: pl.DataFrame) -> pl.DataFrame:
    """One row per call, with a `timing` column: strace rows take their kernel twin's ts/dur (module docstring)."""
    if "clock_error_ns" not in syscall_io.columns:
        syscall_io = syscall_io.with_columns(clock_error_ns=pl.lit(None, pl.Int64))
    src = pl.col("source").fill_null("")
    strace = syscall_io.filter(src == "strace").with_row_index("_s")
    kernel = syscall_io.filter(src != "strace")
    if not strace.height or not kernel.height:
        timing = (pl.when(src != "strace").then(pl.lit("kernel"))
                  .when(pl.col("clock_error_ns").is_not_null()).then(pl.lit("strace")).otherwise(pl.lit("wall")))
        return syscall_io.with_columns(timing=timing)
    strace = strace.sort("rep", "pid", "ts").with_columns(
        _next=pl.col("ts").shift(-1).over(["rep", "pid"]).fill_null(1 << 62))
    placed = strace.filter(pl.col("clock_error_ns").is_not_null())
    twins = kernel.with_row_index("_k").sort("ts").join_asof(
        placed.select("rep", "pid", "syscall", "_s", pl.col("ts").alias("_sts"), "_next", "clock_error_ns")
        .sort("_sts"), left_on="ts", right_on="_sts", by=["rep", "pid", "syscall"], strategy="backward",
        check_sortedness=False, tolerance=None)
    twins = twins.filter(pl.col("_s").is_not_null()
                         & (pl.col("ts") >= pl.col("_sts") - pl.col("clock_error_ns_right"))
                         & (pl.col("ts") < pl.col("_next") - pl.col("clock_error_ns_right")))
    twins = twins.sort("ts").unique("_s", keep="first")
    merged = strace.join(twins.select("_s", pl.col("ts").alias("_kts"), pl.col("dur").alias("_kdur"), "_k"),
                         on="_s", how="left")
    merged = merged.with_columns(
        timing=pl.when(pl.col("_k").is_not_null()).then(pl.lit("kernel"))
        .when(pl.col("clock_error_ns").is_not_null()).then(pl.lit("strace")).otherwise(pl.lit("wall")),
        ts=pl.coalesce("_kts", "ts"), dur=pl.when(pl.col("_k").is_not_null()).then(pl.col("_kdur"))
        .otherwise(pl.col("dur")))
    traced_by_strace = strace.select("rep", "pid").unique()
    rest = kernel.join(traced_by_strace, on=["rep", "pid"], how="anti").with_columns(timing=pl.lit("kernel"))
    cols = [*syscall_io.columns, "timing"]
    return pl.concat([merged.select(cols), rest.select(cols)])


def daemon_tids(task_role: pl.DataFrame | None, fuse_req: pl.DataFrame | None) -> pl.DataFrame:
    """(rep, pid) of every FUSE daemon thread: from task_role, and every thread that replied to a request."""
    frames = []
    if task_role is not None and len(task_role):
        frames.append(task_role.filter(pl.col("role") == "fuse_daemon").select("rep", "pid"))
    if fuse_req is not None and "daemon_tid" in fuse_req.columns:
        frames.append(fuse_req.filter(pl.col("daemon_tid").is_not_null())
                      .select("rep", pl.col("daemon_tid").alias("pid")))
    if not frames:
        return pl.DataFrame(schema={"rep": pl.Int32, "pid": pl.Int32})
    return pl.concat([f.cast({"rep": pl.Int32, "pid": pl.Int32}) for f in frames]).unique()


def workload_syscalls(syscall_io: pl.DataFrame, trace_marker: pl.DataFrame | None = None,
                      task_role: pl.DataFrame | None = None, fuse_req: pl.DataFrame | None = None) -> pl.DataFrame:
    """The workload's calls, each once, on the trace clock where possible (module docstring), with `timing`."""
    others = daemon_tids(task_role, fuse_req)
    if task_role is not None and len(task_role):
        others = pl.concat([others, task_role.filter(pl.col("role") == "mobiperf").select("rep", "pid")
                            .cast({"rep": pl.Int32, "pid": pl.Int32})])
    calls = syscall_io.join(others, on=["rep", "pid"], how="anti") if others.height else syscall_io
    calls = merge_kernel_twins(place_on_trace_clock(calls, trace_marker))
    return _without_bookkeeping(calls, trace_marker)


# mobiperf's wrappers, in the workload's process before it execs: they join the tracing pid list and the CPU share.
BOOKKEEPING_PATHS = r"^/sys/kernel/(?:debug/)?tracing/|/cgroup\.procs$"


def _without_bookkeeping(calls: pl.DataFrame, trace_marker: pl.DataFrame | None) -> pl.DataFrame:
    bookkeeping = pl.col("path").fill_null("").str.contains(BOOKKEEPING_PATHS)
    if trace_marker is None or not len(trace_marker):
        return calls.filter(~bookkeeping)
    writes = calls.with_row_index("_r").filter(pl.col("syscall").is_in(["write", "pwrite64"])
                                               & (pl.col("timing") == "kernel"))
    m = trace_marker.select("rep", "pid", pl.col("ts").alias("_mts")).sort("_mts").join_asof(
        writes.select("rep", "pid", "_r", pl.col("ts").alias("_w0"), "dur").sort("_w0"), left_on="_mts",
        right_on="_w0", by=["rep", "pid"], strategy="backward", check_sortedness=False)
    wrote = m.filter(pl.col("_r").is_not_null() & (pl.col("_mts") <= pl.col("_w0") + pl.col("dur"))).select("_r")
    return calls.with_row_index("_r").join(wrote, on="_r", how="anti").filter(~bookkeeping).drop("_r")


def daemon_syscalls(syscall_io: pl.DataFrame, task_role: pl.DataFrame | None,
                    fuse_req: pl.DataFrame | None) -> pl.DataFrame:
    """The FUSE daemons' calls into the file system under them: their traced calls, less those that carry the FUSE
    protocol: on /dev/fuse (a splice names its source), and the reads and writes of the pipes a splicing daemon
    moves each request through (libfuse reads the header there; bfuse's request log tees it into a pipe of its
    own). The pipes are listed once the workload has run (tasks.json), and a descriptor number may have been a
    file before: a call on one is the pipe's only after the daemon's last close of that number."""
    tids = daemon_tids(task_role, fuse_req)
    calls = syscall_io.filter(pl.col("source").fill_null("") != "strace").join(tids, on=["rep", "pid"])
    if task_role is not None and len(task_role):
        daemon_fds = task_role.filter((pl.col("role") == "fuse_daemon") & (pl.col("fuse_fd") >= 0))
        fuse = daemon_fds.filter(pl.col("fd_kind") == "fuse")["fuse_fd"].unique().to_list()
        calls = calls.filter(~pl.col("fd").is_in(fuse))  # threads share the daemon's descriptors
        calls = calls.filter(~_on_pipes(calls, daemon_fds.filter(pl.col("fd_kind") == "pipe")))
    return calls.filter(pl.col("dur").is_not_null())


def _on_pipes(calls: pl.DataFrame, pipes: pl.DataFrame) -> pl.Series:
    """Which of the daemons' calls read or write one of their pipes (daemon_syscalls)."""
    if not pipes.height:
        return pl.Series([False] * calls.height, dtype=pl.Boolean)
    pipe = pipes.select("rep", "pid", "layer", pl.col("fuse_fd").alias("fd"))
    closes = (calls.filter((pl.col("syscall") == "close") & (pl.col("ret") == 0)).join(pipe, on=["rep", "pid", "fd"])
              .group_by("rep", "layer", "fd").agg(pl.col("ts").max().alias("_last_close")))
    marked = (calls.with_row_index("_row").join(pipe, on=["rep", "pid", "fd"], how="left", maintain_order="left")
              .join(closes, on=["rep", "layer", "fd"], how="left", maintain_order="left").sort("_row"))
    return (marked["layer"].is_not_null() & marked["syscall"].is_in(["read", "readv", "write", "writev"])
            & (marked["_last_close"].is_null() | (marked["ts"] > marked["_last_close"])))


def timed_calls(calls: pl.DataFrame) -> pl.DataFrame:
    """The calls that can be nested (on the trace clock), with end_ts, `is_strace_timed` and `slack_ns`: how far
    outside strace's own [stamp, stamp + duration] the kernel may have run the call (analyzers/io_span.py)."""
    strace = pl.col("timing") == "strace"
    return calls.filter(pl.col("timing") != "wall").with_columns(
        end_ts=pl.col("ts") + pl.col("dur").fill_null(0), is_strace_timed=strace,
        slack_ns=pl.when(strace).then(pl.col("clock_error_ns").fill_null(0)).otherwise(0))


def classify_syscalls(syscall_io: pl.DataFrame, trace_marker: pl.DataFrame | None = None,
                      task_role: pl.DataFrame | None = None, fuse_req: pl.DataFrame | None = None) -> pl.DataFrame:
    return classify_calls(workload_syscalls(syscall_io, trace_marker, task_role, fuse_req))


def classify_calls(calls: pl.DataFrame, keep: tuple[str, ...] = ()) -> pl.DataFrame:
    """The IO calls among the workload's calls (workload_syscalls), classified; `keep` columns pass through."""
    calls = calls.with_row_index("_row").sort(["rep", "ts", "_row"])
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
        "locality_tolerant", "locality_global", "sync_mode", "timing", "clock_error_ns", *keep)
