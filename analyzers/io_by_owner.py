"""Where each owner's IO time went: per process, thread, file and layer, the exclusive time of the layer.

Every nest of io_span (a call's, a phone's file operation's or sync's, and each nest of IO no call caused) has an
owner and a file (span_owner: the root's thread and the top-most path). Within a nest, the time goes at each
instant to the deepest layer active then (waterfall.py's exclusive time), so a nest's layers add up to its root's
duration; summed over an owner's nests on one file they add up to the time the owner's calls (or file
operations, or background requests) on that file took. That is what the report's icicle draws (process -> thread
-> file -> layer) and what `mobiperf analyze` ranks owners and files by.
  self_ns       the layer's exclusive time, summed over the owner's nests on the file
  nests         the nests that spent time in the layer
  block_bytes   the bytes of those nests' block requests (primary: a shared commit's once), on the block row only
A call that is neither IO nor on a file and caused nothing below it (wait4, futex, nanosleep) is left out.
Limits: a nest whose root has no path takes the top-most path below it (span_owner), so one call without a path
whose spans name two files is counted under the first.
"""

from __future__ import annotations

import polars as pl

from mobiperf.analyzers.io_span import LAYERS
from mobiperf.analyzers.waterfall import layer_times

OWNER = ["rep", "scope", "process", "pid", "thread", "tid", "path", "file_type"]


def sum_io_by_owner(io_span: pl.DataFrame, span_owner: pl.DataFrame) -> pl.DataFrame:
    spans = io_span.select("rep", "span_id", "parent_id", "layer", "ts", "end_ts", "size_bytes", "is_primary").join(
        span_owner.select("rep", "span_id", "root_id"), on=["rep", "span_id"])
    times = layer_times(spans, "root_id")
    block = pl.col("layer") == "block"
    moved = spans.filter(block & pl.col("is_primary").fill_null(True)).group_by("rep", "root_id").agg(
        pl.col("size_bytes").fill_null(0).sum().alias("_block_bytes"))
    # a call that is neither IO nor on a file and caused nothing (wait4, futex, nanosleep) is no IO time
    idle = io_span.filter((pl.col("layer") == "syscall") & (pl.col("path").fill_null("") == "")
                          & (pl.col("sync_mode").fill_null("none") == "none")).select("rep", "span_id")
    deep = spans.filter(pl.col("parent_id").is_not_null()).select("rep", pl.col("root_id").alias("span_id")).unique()
    idle = idle.join(deep, on=["rep", "span_id"], how="anti")
    roots = span_owner.filter(pl.col("span_id") == pl.col("root_id")).join(idle, on=["rep", "span_id"], how="anti")
    roots = roots.select(*OWNER, "root_id")
    per_nest = roots.join(times, on=["rep", "root_id"]).join(moved, on=["rep", "root_id"], how="left")
    long = pl.concat([per_nest.select(
        *OWNER, pl.lit(layer).alias("layer"), pl.col(f"{layer}_self").alias("self_ns"),
        (pl.col("_block_bytes").fill_null(0) if layer == "block" else pl.lit(0)).cast(pl.Int64).alias("block_bytes"))
        for layer in LAYERS])
    long = long.filter((pl.col("self_ns") > 0) | (pl.col("block_bytes") > 0))
    return long.group_by(*OWNER, "layer").agg(
        self_ns=pl.col("self_ns").sum().cast(pl.Int64), nests=(pl.col("self_ns") > 0).sum().cast(pl.Int64),
        block_bytes=pl.col("block_bytes").sum().cast(pl.Int64)).sort(
        "rep", "self_ns", "tid", "path", "layer", descending=[False, True, False, False, False], nulls_last=True)
