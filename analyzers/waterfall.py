"""Where each call's time went, layer by layer, from the nest of io_span (analyzers/io_span.py has the
definitions: what caused what, how spans are clipped, what a shared journal commit costs each call).

waterfall: one row per call of the workload (every traced call: reads, writes, syncs, and the opens, closes,
unlinks and renames that send FUSE requests or journal metadata), or, on a phone's trace without calls, per root
of its nests (an android_fs read or write, a sync_file: analyzers/file_nest.py; `syscall` then names it). Per call:
  dur_ns                   the call, enter -> exit
  fuse_ns, file_ns, fs_ns, journal_ns, block_ns, device_ns
                           inclusive time of each layer (file_ns: Android's android_fs spans): the union of its
                           spans (fs_ns is the lower file system's
                           time, the daemon's calls and the sync_file inside them on a FUSE stack, the call's own
                           sync_file on a native one; block_ns queue -> complete; device_ns issue -> complete)
  *_self_ns                exclusive time: the time that layer was the deepest one active. syscall_self_ns +
                           fuse_self_ns + file_self_ns + fs_self_ns + journal_self_ns + block_self_ns +
                           device_self_ns = dur_ns
  other_ns                 = syscall_self_ns (the name of an earlier version: the call's time outside deeper layers)
  block_requests, *_bytes, flushes, fuse_requests, fuse_data_bytes
                           what the call caused, each request counted once (a commit two calls waited for
                           counts for the first)
layer_breakdown: per call type, each layer's exclusive time summed over the calls, and its share of their total
time (shares add up to 1), beside the inclusive time (seed 000 Fig. 3, seed 004 Fig. 3). Call types whose calls
never reached below the system call (getpid, fstat...) are left out of it, and so are the layers no call of the
repetition reached (a trace without FUSE has no fuse rows).
block_cause: every block request of block_io with the call that caused it, or `none`.
io_background: the IO no call caused, by scope and task (analyzers/scope.py): never dropped, never charged.
"""

from __future__ import annotations

import polars as pl

from mobiperf.analyzers.f2fs_region import region_class
from mobiperf.analyzers.intervals import union_ns
from mobiperf.analyzers.io_span import LAYERS, RANK
from mobiperf.analyzers.scope import with_scope

COUNTS = ("block_requests", "block_bytes", "data_bytes", "journal_bytes", "metadata_bytes", "flushes",
          "fuse_requests", "fuse_data_bytes")


def _union_ns(spans: pl.DataFrame, key: list[str]) -> pl.DataFrame:
    """Per key: the length of the union of the spans' [ts, end_ts] intervals (column `_union`)."""
    return union_ns(spans, key)


def layer_times(spans: pl.DataFrame, nest: str = "call_id") -> pl.DataFrame:
    """Per nest (rep and the `nest` column: a call's call_id, or span_owner's root_id for every nest): inclusive
    (<layer>_incl) and exclusive (<layer>_self) ns of every layer."""
    key = ["rep", nest]
    spans = spans.with_columns(_rank=pl.col("layer").replace_strict(RANK, return_dtype=pl.Int8))
    out = spans.filter(pl.col("parent_id").is_null()).select(key).unique()
    covers = []
    for layer in LAYERS:
        rank = RANK[layer]
        cover = _union_ns(spans.filter(pl.col("_rank") >= rank), key).rename({"_union": f"_cover{rank}"})
        incl = _union_ns(spans.filter(pl.col("_rank") == rank), key).rename({"_union": f"{layer}_incl"})
        out = out.join(cover, on=key, how="left").join(incl, on=key, how="left")
        covers.append(pl.col(f"_cover{rank}").fill_null(0))
    out = out.with_columns([(covers[i] - (covers[i + 1] if i + 1 < len(covers) else 0)).alias(f"{layer}_self")
                            for i, layer in enumerate(LAYERS)])
    return out.with_columns([pl.col(f"{layer}_incl").fill_null(0) for layer in LAYERS]).drop(
        [f"_cover{RANK[layer]}" for layer in LAYERS])


def _caused_counts(spans: pl.DataFrame) -> pl.DataFrame:
    block = (pl.col("layer") == "block") & pl.col("is_primary")
    fuse = (pl.col("layer") == "fuse") & pl.col("is_primary")
    size = pl.col("size_bytes").fill_null(0)
    region = region_class(pl.col("region"))
    return spans.group_by("rep", "call_id").agg(
        block_requests=block.sum().cast(pl.Int64), block_bytes=size.filter(block).sum(),
        data_bytes=size.filter(block & (region == "data")).sum(),
        journal_bytes=size.filter(block & (region == "journal")).sum(),
        metadata_bytes=size.filter(block & (region == "metadata")).sum(),
        flushes=(block & (pl.col("op") == "flush")).sum().cast(pl.Int64),
        fuse_requests=fuse.sum().cast(pl.Int64), fuse_data_bytes=size.filter(fuse).sum())


def build_waterfall(io_span: pl.DataFrame) -> pl.DataFrame:
    spans = io_span.filter(pl.col("call_id").is_not_null())
    calls = spans.filter(pl.col("parent_id").is_null()).select(
        "rep", "call_id", "ts", pl.col("tid").alias("pid"), "comm", pl.col("name").alias("syscall"),
        pl.col("layer").alias("root_layer"), "path", "file_type",
        # a phone's roots (file_nest.py): a sync_file's fsync/fdatasync, `-` for file and FUSE roots
        pl.coalesce("sync_mode", "op", pl.lit("-")).alias("sync_mode"), "size_bytes",
        (pl.col("end_ts") - pl.col("ts")).alias("dur_ns"))
    out = calls.join(layer_times(spans), on=["rep", "call_id"], how="left") \
        .join(_caused_counts(spans), on=["rep", "call_id"], how="left")
    out = out.with_columns([pl.col(c).fill_null(0).cast(pl.Int64) for c in COUNTS])
    return out.sort("rep", "ts", "call_id").select(
        "rep", "call_id", "ts", "pid", "comm", "syscall", "path", "file_type", "sync_mode", "size_bytes", "dur_ns",
        pl.col("fs_incl").alias("fs_ns"), pl.col("fuse_incl").alias("fuse_ns"), "block_requests", "block_bytes",
        "data_bytes", "journal_bytes", "metadata_bytes", "flushes", pl.col("block_incl").alias("block_ns"),
        pl.col("device_incl").alias("device_ns"), pl.col("syscall_self").alias("other_ns"),
        pl.col("journal_incl").alias("journal_ns"), *[pl.col(f"{la}_self").alias(f"{la}_self_ns") for la in LAYERS],
        "fuse_requests", "fuse_data_bytes", pl.col("file_incl").alias("file_ns"), "root_layer")


def break_down_layers(waterfall: pl.DataFrame) -> pl.DataFrame:
    # below the call: any layer deeper than its root's (a system call, or a phone's file or sync_file root)
    rank = pl.col("root_layer").fill_null("syscall").replace_strict(RANK, default=0, return_dtype=pl.Int8)
    below = pl.any_horizontal([(pl.col(f"{la}_self_ns") > 0) & (rank < RANK[la]) for la in LAYERS])
    if "root_layer" not in waterfall.columns:  # a waterfall written before phone roots
        waterfall = waterfall.with_columns(root_layer=pl.lit("syscall"))
    reached = waterfall.with_columns(_below=below).group_by("rep", "syscall", "sync_mode").agg(pl.col("_below").any())
    wf = waterfall.join(reached.filter(pl.col("_below")), on=["rep", "syscall", "sync_mode"])
    g = wf.group_by("rep", "syscall", "sync_mode").agg(
        count=pl.len().cast(pl.Int64), total_ns=pl.col("dur_ns").sum(),
        **{f"time:{la}": pl.col(f"{la}_self_ns").sum() for la in LAYERS},
        **{f"incl:{la}": _inclusive(la).sum() for la in LAYERS})
    rows = []
    for la in LAYERS:
        rows.append(g.select("rep", "syscall", "sync_mode", "count", "total_ns", pl.lit(la).alias("layer"),
                             pl.col(f"time:{la}").alias("time_ns"), pl.col(f"incl:{la}").alias("inclusive_ns")))
    long = pl.concat(rows) if rows else pl.DataFrame()
    if long.height:  # the layers the trace has: one no call of the repetition reached is left out
        reached_layers = long.group_by("rep", "layer").agg(pl.col("inclusive_ns").sum() > 0)
        long = long.join(reached_layers.filter(pl.col("inclusive_ns")).select("rep", "layer"), on=["rep", "layer"])
    return long.with_columns(
        time_ns=pl.col("time_ns").cast(pl.Int64), inclusive_ns=pl.col("inclusive_ns").cast(pl.Int64),
        share=pl.when(pl.col("total_ns") > 0).then(pl.col("time_ns") / pl.col("total_ns"))).sort(
        "rep", "syscall", "sync_mode", "layer")


def _inclusive(layer: str) -> pl.Expr:
    """A call's inclusive time in the layer: its root's whole duration (a root's layer is the call itself)."""
    root = pl.col("root_layer").fill_null("syscall") == layer
    if layer == "syscall":
        return pl.when(root).then(pl.col("dur_ns")).otherwise(0)
    return pl.when(root).then(pl.col("dur_ns")).otherwise(pl.col(_incl(layer)))


def _incl(layer: str) -> str:
    return {"fuse": "fuse_ns", "file": "file_ns", "fs": "fs_ns", "journal": "journal_ns", "block": "block_ns",
            "device": "device_ns"}[layer]


def attribute_block_causes(io_span: pl.DataFrame, block_io: pl.DataFrame,
                           waterfall: pl.DataFrame | None = None) -> pl.DataFrame:
    """block_cause: every block request with the call that caused it (module docstring), or cause `none`."""
    caused = io_span.filter((pl.col("layer") == "block") & pl.col("call_id").is_not_null() & pl.col("is_primary"))
    calls = io_span.filter(pl.col("parent_id").is_null() & pl.col("call_id").is_not_null()).select(
        "rep", "call_id", pl.col("name").alias("cause"), pl.col("ts").alias("call_ts"), pl.col("tid").alias("call_pid"))
    caused = caused.select("rep", pl.col("source_row").alias("_req"), "call_id").join(calls, on=["rep", "call_id"])
    if waterfall is not None:
        caused = caused.join(waterfall.select("rep", "call_id", pl.col("sync_mode").alias("cause_mode")),
                             on=["rep", "call_id"], how="left")
    else:
        caused = caused.with_columns(cause_mode=pl.lit(None, pl.Utf8))
    req = block_io.with_row_index("_req").with_columns(pl.col("_req").cast(pl.Int64))
    out = req.join(caused.drop("rep").unique("_req"), on="_req", how="left")
    return out.with_columns(cause=pl.col("cause").fill_null("none"),
                            cause_mode=pl.col("cause_mode").fill_null("none")).select(
        "rep", "ts", "sector", "size_bytes", "op", "region", "sync_mode", "cause", "cause_mode", "call_ts",
        "call_pid").sort("rep", "ts", "sector")


def summarize_background(io_span: pl.DataFrame, task_role: pl.DataFrame | None = None,
                         syscall_io: pl.DataFrame | None = None) -> pl.DataFrame:
    """io_background: per (scope, task, layer, what), the spans no call caused: count, bytes, time."""
    bg = io_span.filter(pl.col("call_id").is_null() & pl.col("is_primary") & (pl.col("layer") != "device"))
    bg = with_scope(bg, task_role, syscall_io, pid="tid")
    return bg.group_by("rep", "scope", "tid", "comm", "layer", "name").agg(
        count=pl.len().cast(pl.Int64), bytes=pl.col("size_bytes").fill_null(0).sum().cast(pl.Int64),
        time_ns=(pl.col("end_ts") - pl.col("ts")).sum().cast(pl.Int64)).rename({"tid": "pid"}).sort(
        "rep", "scope", "layer", "bytes", "count", "pid", "comm", "name",
        descending=[False, False, False, True, True, False, False, False], nulls_last=True)  # one order, every time
