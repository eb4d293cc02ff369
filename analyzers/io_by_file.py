"""IO by process, thread, file, layer and op: the spans of io_span summed under their owners (span_owner).

One row per (rep, scope, process, pid, thread, tid, path, file_type, layer, op):
  requests   the spans counted once: a journal commit two syncs waited for counts for the first (is_primary)
  bytes      their size_bytes, by the same rule (what the call moved, what a FUSE request carried, what a block
             request wrote or read; 0 for syncs, commits and flushes)
  time_ns    the sum of the spans' durations as nested (each clipped to its parent): concurrent requests each
             count their own time, and every waiter of a shared commit its own wait
  op         the call's name (syscall layer), the FUSE opcode in lower case without `fuse_` (fuse), read or write
             (file), the daemon's call or fsync/fdatasync (fs), jbd2_commit (journal), read, write, flush or
             discard (block and device)
Calls that are neither IO nor on a file (getpid, futex, nanosleep: no path and no sync mode) are left out; what
they caused is not (a close's FUSE FLUSH request stays, under the closing thread). Background IO is included,
under its task and scope.
"""

from __future__ import annotations

import polars as pl

GROUP = ["rep", "scope", "process", "pid", "thread", "tid", "path", "file_type", "layer", "op"]


def sum_io_by_file(io_span: pl.DataFrame, span_owner: pl.DataFrame) -> pl.DataFrame:
    spans = io_span.select("rep", "span_id", "layer", "name", "op", "size_bytes", "is_primary", "ts", "end_ts",
                           "path", "sync_mode")
    spans = spans.join(span_owner.drop("path_from").rename({"path": "owner_path"}), on=["rep", "span_id"],
                       how="inner")
    not_io = (pl.col("layer") == "syscall") & (pl.col("path").fill_null("") == "") \
        & (pl.col("sync_mode").fill_null("none") == "none")
    op = pl.when(pl.col("layer").is_in(["syscall", "fs", "journal"])).then(pl.col("name")) \
        .otherwise(pl.coalesce(pl.col("op"), pl.col("name"))).fill_null("")
    op = pl.when(pl.col("layer") == "fuse").then(op.str.to_lowercase().str.replace(r"^fuse_", "")).otherwise(op)
    primary = pl.col("is_primary").fill_null(True)
    return (spans.filter(~not_io)
            .with_columns(op=op, path=pl.col("owner_path"))
            .group_by(GROUP)
            .agg(requests=primary.sum().cast(pl.Int64),
                 bytes=pl.col("size_bytes").fill_null(0).filter(primary).sum().cast(pl.Int64),
                 time_ns=(pl.col("end_ts") - pl.col("ts")).clip(lower_bound=0).sum().cast(pl.Int64))
            .sort(["rep", "time_ns", "bytes", "process", "tid", "path", "layer", "op"],
                  descending=[False, True, True, False, False, False, False, False], nulls_last=True))
