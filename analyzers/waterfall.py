"""The waterfall: each synchronous system call stitched to the block requests it caused, and the per-layer
time split that falls out of it (seed 000 Fig. 3, seed 004 Fig. 3/4).

Which calls: fsync, fdatasync, msync, sync_file_range, and writes opened with O_SYNC, O_DSYNC or O_DIRECT (when
syscall_class knows the open flags). Their causality is knowable because the call waits for its IO.

Which requests a call caused: block requests queued (else issued) inside the call's [enter, exit] window that
were submitted by the calling process, or by the journal thread (comm `jbd2/...`), or are flushes. A journal or
flush request inside several concurrent calls' windows goes to the call that started last before it (so each
request is attributed at most once). Buffered writes are not stitched: their writeback happens later, from
other threads, and cannot be tied to one call.

Times per call: block_ns is the union of the caused requests' [queue, complete] intervals clipped to the window;
device_ns the union of their [issue, complete] (D2C) intervals; fs_ns the ext4/f2fs sync_file time of the same
process inside the window; fuse_ns the union of the process's FUSE requests in the window; other_ns = dur_ns -
block_ns - fuse_ns, the kernel and file-system time outside the block layer and FUSE.

block_cause lists every block request with the call that caused it (or `none`), which answers "which syscall
caused this block IO" where it can be known, and gives the share of block IO each kind of call causes.

layer_breakdown sums these per call type: device (D2C), block (queue and scheduler time outside the device),
fuse, fs+kernel (the rest).

Limits: the block IO a FUSE daemon does on behalf of a call runs under the daemon's pid and is not stitched
(it is inside fuse_ns); IO the call waits for but that was queued before it (earlier writeback) is not counted.
"""

from __future__ import annotations

import polars as pl

SYNC_WRITE_MODES = ("o_sync", "o_dsync", "o_direct")


def _sync_calls(syscall_class: pl.DataFrame) -> pl.DataFrame:
    calls = syscall_class.filter(
        ((pl.col("op") == "sync") | pl.col("sync_mode").is_in(SYNC_WRITE_MODES)) & pl.col("dur").is_not_null())
    return calls.with_row_index("call").with_columns(end_ts=pl.col("ts") + pl.col("dur"))


def _union_ns(df: pl.DataFrame, start: str, end: str, key: str = "call") -> pl.DataFrame:
    """Per key: the total length of the union of [start, end] intervals."""
    iv = df.filter(pl.col(start).is_not_null() & pl.col(end).is_not_null() & (pl.col(end) > pl.col(start))) \
        .select(key, pl.col(start).alias("_s"), pl.col(end).alias("_e")).sort(key, "_s")
    iv = iv.with_columns(_reach=pl.col("_e").cum_max().shift(1).over(key))
    return iv.group_by(key).agg(
        (pl.col("_e") - pl.max_horizontal("_s", pl.col("_reach").fill_null(pl.col("_s")))).clip(lower_bound=0)
        .sum().alias("_union"))


def _attribute(calls: pl.DataFrame, block_io: pl.DataFrame) -> pl.DataFrame:
    """block requests with the call that caused them (column `call`), only those attributed."""
    req = block_io.with_columns(_t=pl.coalesce("queue_ts", "issue_ts")).filter(pl.col("_t").is_not_null()) \
        .with_row_index("_req").sort("_t")
    c = calls.select("call", "rep", "pid", pl.col("ts").alias("_t"), "end_ts").sort("_t")
    own = req.join_asof(c, on="_t", by=["rep", "pid"], strategy="backward", check_sortedness=False) \
        .filter(pl.col("call").is_not_null() & (pl.col("_t") <= pl.col("end_ts")))
    shared = req.filter(pl.col("comm").fill_null("").str.starts_with("jbd2/") | (pl.col("op") == "flush"))
    shared = shared.join(own.select("_req"), on="_req", how="anti")
    shared = shared.join_asof(c.drop("pid"), on="_t", by="rep", strategy="backward", check_sortedness=False) \
        .filter(pl.col("call").is_not_null() & (pl.col("_t") <= pl.col("end_ts")))
    return pl.concat([own.drop("end_ts"), shared.drop("end_ts")], how="diagonal_relaxed")


def _clip(df: pl.DataFrame, calls: pl.DataFrame, start: str, end: str) -> pl.DataFrame:
    w = df.join(calls.select("call", pl.col("ts").alias("_w0"), pl.col("end_ts").alias("_w1")), on="call")
    return w.with_columns(pl.max_horizontal(start, "_w0").alias(start), pl.min_horizontal(end, "_w1").alias(end))


def build_waterfall(syscall_class: pl.DataFrame, block_io: pl.DataFrame, fsync_event: pl.DataFrame | None = None,
                    fuse_req: pl.DataFrame | None = None) -> pl.DataFrame:
    calls = _sync_calls(syscall_class)
    caused = _attribute(calls, block_io)
    per_call = caused.group_by("call").agg(
        block_requests=pl.len().cast(pl.Int64), block_bytes=pl.col("size_bytes").sum(),
        data_bytes=pl.col("size_bytes").filter(pl.col("region") == "data").sum(),
        journal_bytes=pl.col("size_bytes").filter(pl.col("region") == "journal").sum(),
        metadata_bytes=pl.col("size_bytes").filter(pl.col("region") == "metadata").sum(),
        flushes=(pl.col("op") == "flush").sum().cast(pl.Int64))
    block_ns = _union_ns(_clip(caused, calls, "queue_ts", "complete_ts"), "queue_ts", "complete_ts") \
        .rename({"_union": "block_ns"})
    device_ns = _union_ns(_clip(caused, calls, "issue_ts", "complete_ts"), "issue_ts", "complete_ts") \
        .rename({"_union": "device_ns"})
    out = calls.join(per_call, on="call", how="left").join(block_ns, on="call", how="left") \
        .join(device_ns, on="call", how="left")
    fs_ns = pl.DataFrame({"call": [], "fs_ns": []}, schema={"call": pl.UInt32, "fs_ns": pl.Int64})
    if fsync_event is not None and len(fsync_event):
        from mobiperf.analyzers.latency import sync_file_calls
        sf = sync_file_calls(fsync_event).with_columns(_end=pl.col("ts") + pl.col("dur")).sort("ts")
        m = sf.join_asof(calls.select("call", "rep", "pid", pl.col("ts").alias("_c0"), "end_ts").sort("_c0"),
                         left_on="ts", right_on="_c0", by=["rep", "pid"], strategy="backward", check_sortedness=False)
        m = m.filter(pl.col("call").is_not_null() & (pl.col("ts") <= pl.col("end_ts")))
        fs_ns = m.group_by("call").agg(fs_ns=(pl.min_horizontal("_end", "end_ts") - pl.col("ts")).sum())
    out = out.join(fs_ns, on="call", how="left")
    fuse_ns = pl.DataFrame({"call": [], "fuse_ns": []}, schema={"call": pl.UInt32, "fuse_ns": pl.Int64})
    if fuse_req is not None and len(fuse_req):
        fr = fuse_req.filter(pl.col("end_ts").is_not_null()).select("rep", "pid", pl.col("send_ts").alias("_t"),
                                                                    "end_ts").rename({"end_ts": "_fe"}).sort("_t")
        m = fr.join_asof(calls.select("call", "rep", "pid", pl.col("ts").alias("_t"), "end_ts").sort("_t"),
                         on="_t", by=["rep", "pid"], strategy="backward", check_sortedness=False)
        m = m.filter(pl.col("call").is_not_null() & (pl.col("_t") <= pl.col("end_ts")))
        m = _clip(m, calls, "_t", "_fe")
        fuse_ns = _union_ns(m, "_t", "_fe").rename({"_union": "fuse_ns"})
    out = out.join(fuse_ns, on="call", how="left")
    zero = ["block_requests", "block_bytes", "data_bytes", "journal_bytes", "metadata_bytes", "flushes",
            "block_ns", "device_ns", "fs_ns", "fuse_ns"]
    out = out.with_columns([pl.col(c).fill_null(0).cast(pl.Int64) for c in zero])
    out = out.with_columns(dur_ns=pl.col("dur").cast(pl.Int64)).with_columns(
        other_ns=(pl.col("dur_ns") - pl.col("block_ns") - pl.col("fuse_ns")).clip(lower_bound=0))
    return out.sort("rep", "ts", "call").select(
        "rep", "ts", "pid", "comm", "syscall", "path", "file_type", "sync_mode", "size_bytes", "dur_ns", "fs_ns",
        "fuse_ns", "block_requests", "block_bytes", "data_bytes", "journal_bytes", "metadata_bytes", "flushes",
        "block_ns", "device_ns", "other_ns")


def attribute_block_causes(syscall_class: pl.DataFrame, block_io: pl.DataFrame) -> pl.DataFrame:
    """block_cause: every block request with the synchronous call that caused it (the rules above), or cause
    `none` (writeback, readahead, other processes: not knowable from the trace)."""
    calls = _sync_calls(syscall_class)
    caused = _attribute(calls, block_io).join(
        calls.select("call", pl.col("syscall").alias("cause"), pl.col("sync_mode").alias("cause_mode"),
                     pl.col("ts").alias("call_ts"), pl.col("pid").alias("call_pid")), on="call")
    req = block_io.with_row_index("_req")
    out = req.join(caused.select("_req", "cause", "cause_mode", "call_ts", "call_pid"), on="_req", how="left")
    return out.with_columns(cause=pl.col("cause").fill_null("none"),
                            cause_mode=pl.col("cause_mode").fill_null("none")).select(
        "rep", "ts", "sector", "size_bytes", "op", "region", "sync_mode", "cause", "cause_mode", "call_ts",
        "call_pid").sort("rep", "ts", "sector")


def break_down_layers(waterfall: pl.DataFrame) -> pl.DataFrame:
    g = waterfall.group_by("rep", "syscall", "sync_mode").agg(
        count=pl.len().cast(pl.Int64), total_ns=pl.col("dur_ns").sum(),
        device=pl.col("device_ns").sum(), block=(pl.col("block_ns") - pl.col("device_ns")).sum(),
        fuse=pl.col("fuse_ns").sum(), **{"fs+kernel": pl.col("other_ns").sum()})
    long = g.unpivot(index=["rep", "syscall", "sync_mode", "count", "total_ns"],
                     on=["device", "block", "fuse", "fs+kernel"], variable_name="layer", value_name="time_ns")
    return long.with_columns(
        time_ns=pl.col("time_ns").cast(pl.Int64),
        share=pl.when(pl.col("total_ns") > 0).then(pl.col("time_ns") / pl.col("total_ns"))).sort(
        "rep", "syscall", "sync_mode", "layer")
