"""Whose is a flush the block layer's flush machinery issued: the write it was issued for.

A write with REQ_PREFLUSH or REQ_FUA on a device with a volatile cache becomes a flush sequence (block/blk-flush.c):
the machinery issues a pre-flush after the write is queued and, where the device has no FUA, a post-flush right
after the write's data completed; these flush requests have no bio of their own (no block_bio_queue: they are
issued from a kworker, which is what the trace names as their task). Such a flush belongs to the latest write (or
empty pre-flush with a bio) queued on its device before it was issued, when it was issued no later than
POST_FLUSH_NS after that write completed. Used by the layer model (io_span.py: the flush nests under that write)
and by block_io (the flush takes that write's scope: an f2fs checkpoint's or a jbd2 commit's commit block brings
its flushes into the workload's figures with it).
"""

from __future__ import annotations

import polars as pl

POST_FLUSH_NS = 1_000_000


def machine_flush_owners(rows: pl.DataFrame, *, key: str, start: str, end: str, no_bio: pl.Expr) -> pl.DataFrame:
    """(rep, flush, owner) of `key` values: every flush without a bio (no_bio) and the write it was issued for.
    rows: rep, dev_major, dev_minor, op, issue_ts, and the key, start (the request's first time) and end
    (its completion) columns."""
    marked = rows.with_columns(_no_bio=no_bio)
    flush = marked.filter(pl.col("_no_bio") & (pl.col("op") == "flush") & pl.col("issue_ts").is_not_null())
    if not flush.height:
        return pl.DataFrame(schema={"rep": rows.schema["rep"], "flush": rows.schema[key], "owner": rows.schema[key]})
    writes = marked.filter(~pl.col("_no_bio") & pl.col("op").is_in(["write", "flush"])).select(
        "rep", "dev_major", "dev_minor", pl.col(start).alias("_w0"), pl.col(end).alias("_w1"),
        pl.col(key).alias("owner")).filter(pl.col("_w0").is_not_null()).sort("_w0")
    m = flush.select("rep", "dev_major", "dev_minor", pl.col("issue_ts").alias("_x"), pl.col(key).alias("flush")) \
        .sort("_x").join_asof(writes, left_on="_x", right_on="_w0", by=["rep", "dev_major", "dev_minor"],
                              strategy="backward", check_sortedness=False)
    return m.filter(pl.col("owner").is_not_null() & (pl.col("_x") <= pl.col("_w1") + POST_FLUSH_NS)).select(
        "rep", "flush", "owner")
