"""Every block request classified, once in each dimension, with its btt latency phases.

Dimensions (each module's docstring has the definition and its limits):
  size_class / size_log2_bytes   size.py: the papers' buckets and the log2 histogram bucket
  locality / locality_tolerant / locality_global   locality.py: strict and tolerant per (device, direction),
                                 strict over the device; in issue order
  sync_mode                      the request flags: `flush` (a flush request), else `fua` (REQ_FUA), `preflush`
                                 (REQ_PREFLUSH), `sync` (REQ_SYNC), `async`. Which syscall caused it is the
                                 waterfall's job (waterfall.py).
  region                         region.py: data, metadata, journal, none; on f2fs its areas and node/data
                                 (f2fs_region.py, from its bio events and layout)
  file_type / path               file_type.py (block layer: through the layout snapshot's extents)

Scope (scope.py): only the workload's requests are classified (a flush the block layer's machinery issued for a
write counts with that write: flush_owner.py) (its tree, its FUSE daemons and, on a device of
its own, the kernel threads writing back and journaling for it; with scope `all` every request); the rest is in
io_background. `scope` says which of these submitted each request.

Latency phases follow btt (trace-formats.md §1.5): Q2G (queue -> get request), G2I (-> insert), I2D (insert ->
issue), D2C (issue -> complete: driver and device), Q2C (the whole life). A phase is null when either of its
events was not seen (blk-mq issues many requests directly, with no insert). Unlike btt, a negative or zero delta
is kept as measured (ftrace text has microsecond timestamps, so 0 is common), never turned into 1 ns.
Q2C = Q2G + G2I + I2D + D2C holds whenever all five exist, by construction.
A re-dispatched request (issued again before it completed, pairing.py) has D2C from its last dispatch and its
wait between the first and the last dispatch as redispatch_ns (null for a request dispatched once): a part of
I2D, or of what precedes D2C when the trace has no insert.
"""

from __future__ import annotations

import polars as pl

from mobiperf.analyzers.file_type import attribute_files
from mobiperf.analyzers.flush_owner import machine_flush_owners
from mobiperf.analyzers.locality import classify_locality
from mobiperf.analyzers.region import classify_region
from mobiperf.analyzers.scope import counted, with_scope
from mobiperf.analyzers.size import size_class, size_log2_bucket

BLOCK_ORDER = ["rep", "dev_major", "dev_minor", "issue_ts", "queue_ts", "getrq_ts", "sector", "size_bytes", "op"]


def _phase(end: str, start: str) -> pl.Expr:
    return (pl.col(end) - pl.col(start)).cast(pl.Int64)


def _with_flush_owners(df: pl.DataFrame, column: str) -> pl.DataFrame:
    """A flush the block layer's flush machinery issued (no bio: a kworker's, by its task) takes `column` from the
    write it was issued for (flush_owner.py): it counts where that write counts."""
    rows = df.with_row_index("_r")
    owners = machine_flush_owners(rows, key="_r", start="queue_ts", end="complete_ts",
                                  no_bio=pl.col("queue_ts").is_null())
    if not owners.height:
        return df
    theirs = owners.join(rows.select(pl.col("_r").alias("owner"), pl.col(column).alias("_owner")), on="owner")
    return rows.join(theirs.select(pl.col("flush").alias("_r"), "_owner"), on="_r", how="left").with_columns(
        pl.coalesce("_owner", column).alias(column)).drop("_r", "_owner")


def classify_block_io(block_rq: pl.DataFrame, file_extent: pl.DataFrame | None = None,
                      task_role: pl.DataFrame | None = None, syscall_io: pl.DataFrame | None = None,
                      f2fs_bio: pl.DataFrame | None = None, *, scope: str = "workload",
                      device_private: bool = True) -> pl.DataFrame:
    df = with_scope(block_rq, task_role, syscall_io)
    # The workload's tree is known only from its traced calls: without them, only mobiperf's own IO is set apart.
    knows_tree = task_role is not None and syscall_io is not None and len(syscall_io) > 0
    df = _with_flush_owners(df.with_columns(
        _counted=counted(pl.col("scope"), mode=scope, device_private=device_private, has_roles=knows_tree,
                         comm=pl.col("comm")) & ((pl.col("scope") != "mobiperf") | pl.lit(scope == "all"))),
        "_counted")
    df = df.filter(pl.col("_counted")).drop("_counted")
    df = df.with_columns(
        ts=pl.coalesce("queue_ts", "getrq_ts", "insert_ts", "issue_ts", "complete_ts"),
        size_class=size_class(pl.col("size_bytes")),
        size_log2_bytes=size_log2_bucket(pl.col("size_bytes")),
        sync_mode=(pl.when(pl.col("op") == "flush").then(pl.lit("flush"))
                   .when(pl.col("is_fua")).then(pl.lit("fua"))
                   .when(pl.col("is_preflush")).then(pl.lit("preflush"))
                   .when(pl.col("is_sync")).then(pl.lit("sync"))
                   .otherwise(pl.lit("async"))),
        q2g_ns=_phase("getrq_ts", "queue_ts"), g2i_ns=_phase("insert_ts", "getrq_ts"),
        i2d_ns=_phase("issue_ts", "insert_ts"), d2c_ns=_phase("complete_ts", "issue_ts"),
        q2c_ns=_phase("complete_ts", "queue_ts"),
        redispatch_ns=pl.when(pl.col("dispatches") > 1).then(_phase("issue_ts", "first_issue_ts")),
    )
    # ordered through a narrow frame of the keys: sorting the whole table moves every column (and its memory)
    order = df.select(BLOCK_ORDER).with_row_index("_i").sort(BLOCK_ORDER, nulls_last=True,
                                                             maintain_order=True)["_i"]
    df = df[order]
    df = classify_locality(df, stream=["rep", "dev_major", "dev_minor", "op"],
                           global_stream=["rep", "dev_major", "dev_minor"], order_by=BLOCK_ORDER,
                           start=pl.col("sector") * 512, length=pl.col("size_bytes"))
    df = classify_region(df, file_extent, f2fs_bio)
    df = attribute_files(df, file_extent)
    return df.select("rep", "ts", "dev_major", "dev_minor", "sector", "size_bytes", "op", "rwbs", "size_class",
                     "size_log2_bytes", "locality", "locality_tolerant", "locality_global", "sync_mode", "region",
                     "file_type", "path", "is_meta", "queue_ts", "issue_ts", "complete_ts", "q2g_ns", "g2i_ns",
                     "i2d_ns", "d2c_ns", "q2c_ns", "nr_bios", "pid", "comm", "scope", "dispatches",
                     "redispatch_ns")
