"""Latency per layer and phase, in aggregate (percentiles per op).

  block    q2g, g2i, i2d, d2c, q2c per request (btt's definitions, see block_io.py), op read/write/flush...;
           redispatch (first to last dispatch) over the re-dispatched requests only, so its count is theirs
  syscall  enter -> exit of each IO call (syscall_class.dur), op the call name
  fs       sync_file: ext4_sync_file_enter -> exit (f2fs_sync_file likewise), paired per (process, inode) in
           order, op fsync or fdatasync (from the enter's datasync flag); jbd2: the commit phases jbd2_run_stats
           reports per transaction (wait, request_delay, running, locked, flushing, logging), op commit. The
           kernel prints those in ms (jiffies), so they are coarse.
  fuse     fuse_request_send -> fuse_request_end per request (fuse_req.dur), op the opcode name

Percentiles are linear-interpolated (polars `quantile(..., "linear")`); max is the largest value. Rows with a
null duration (never finished, or an event was lost) are left out and so not counted.
"""

from __future__ import annotations

import polars as pl

PHASES = ("q2g", "g2i", "i2d", "d2c", "q2c", "redispatch")
JBD2_PHASES = ("wait", "request_delay", "running", "locked", "flushing", "logging")


def _summary(df: pl.DataFrame, value: str, layer: str, phase: str, op: str | pl.Expr) -> pl.DataFrame:
    col = pl.col(value)
    op_expr = pl.lit(op) if isinstance(op, str) else op
    return (df.filter(col.is_not_null()).with_columns(op=op_expr).group_by("rep", "op")
            .agg(count=pl.len().cast(pl.Int64), mean_ns=col.mean().cast(pl.Float64),
                 p50_ns=col.quantile(0.5, "linear"), p90_ns=col.quantile(0.9, "linear"),
                 p99_ns=col.quantile(0.99, "linear"), max_ns=col.max().cast(pl.Float64))
            .with_columns(layer=pl.lit(layer), phase=pl.lit(phase))
            .select("rep", "layer", "phase", "op", "count", "mean_ns", "p50_ns", "p90_ns", "p99_ns", "max_ns"))


def _concat(frames: list[pl.DataFrame]) -> pl.DataFrame:
    out = pl.concat(frames, how="vertical_relaxed")
    return out.sort("rep", "layer", "phase", "op")


def summarize_block_latency(block_io: pl.DataFrame) -> pl.DataFrame:
    frames = [_summary(block_io, f"{p}_ns", "block", p, pl.col("op")) for p in PHASES]
    return _concat(frames)


def summarize_syscall_latency(syscall_class: pl.DataFrame) -> pl.DataFrame:
    return _concat([_summary(syscall_class, "dur", "syscall", "syscall", pl.col("syscall"))])


def sync_file_calls(fsync_event: pl.DataFrame) -> pl.DataFrame:
    """One row per sync_file call: enter paired with the next exit of the same (rep, pid, device, inode)."""
    ev = fsync_event.with_row_index("_row").sort(["rep", "ts", "_row"])
    key = ["rep", "pid", "dev_major", "dev_minor", "ino"]
    nxt = ev.select(pl.col("phase").shift(-1).over(key).alias("_next_phase"),
                    pl.col("ts").shift(-1).over(key).alias("_next_ts"))
    both = pl.concat([ev, nxt], how="horizontal")
    return both.filter((pl.col("phase") == "enter") & (pl.col("_next_phase") == "exit")).select(
        "rep", "ts", "pid", "comm", "fs", "dev_major", "dev_minor", "ino",
        (pl.col("_next_ts") - pl.col("ts")).alias("dur"),
        pl.when(pl.col("datasync") == 1).then(pl.lit("fdatasync")).otherwise(pl.lit("fsync")).alias("op"))


def summarize_fsync_latency(fsync_event: pl.DataFrame) -> pl.DataFrame:
    return _concat([_summary(sync_file_calls(fsync_event), "dur", "fs", "sync_file", pl.col("op"))])


def _jbd2_frames(jbd2_run_stats: pl.DataFrame) -> list[pl.DataFrame]:
    stats = jbd2_run_stats.with_columns([(pl.col(f"{p}_ms") * 1_000_000).alias(f"{p}_ns") for p in JBD2_PHASES])
    return [_summary(stats, f"{p}_ns", "jbd2", p, "commit") for p in JBD2_PHASES]


def summarize_fs_latency(fsync_event: pl.DataFrame, jbd2_run_stats: pl.DataFrame) -> pl.DataFrame:
    return _concat([_summary(sync_file_calls(fsync_event), "dur", "fs", "sync_file", pl.col("op")),
                    *_jbd2_frames(jbd2_run_stats)])


def summarize_jbd2_latency(jbd2_run_stats: pl.DataFrame) -> pl.DataFrame:
    return _concat(_jbd2_frames(jbd2_run_stats))


def summarize_fuse_latency(fuse_req: pl.DataFrame) -> pl.DataFrame:
    opcode = pl.col("opcode_name").str.to_lowercase().str.strip_prefix("fuse_")
    return _concat([_summary(fuse_req, "dur", "fuse", "request", opcode)])
