"""Every block request classified: size class, locality, sync mode, and its latency phases.

Latency phases follow btt's definitions: Q2G (queue -> get request), G2I (-> insert into the scheduler),
I2D (-> issue to the driver), D2C (issue -> complete: driver and device), Q2C (the whole life). A phase is null
when either of its events was not seen (e.g. blk-mq issues some requests directly without an insert).

Sync mode at the block layer comes from the request flags: `fua` (REQ_FUA), `preflush` (REQ_PREFLUSH), `flush`
(a flush request), `sync` (REQ_SYNC), else `async`. Which syscall caused a request is the syscall layer's job.
"""

from __future__ import annotations

import polars as pl

from mobiperf.analyzers.locality import classify_locality
from mobiperf.analyzers.size import size_class


def _phase(end: str, start: str) -> pl.Expr:
    return (pl.col(end) - pl.col(start)).cast(pl.Int64)


def classify_block_io(block_rq: pl.DataFrame) -> pl.DataFrame:
    df = block_rq.with_columns(
        ts=pl.coalesce("queue_ts", "getrq_ts", "insert_ts", "issue_ts", "complete_ts"),
        size_class=size_class(pl.col("size_bytes")),
        sync_mode=(pl.when(pl.col("op") == "flush").then(pl.lit("flush"))
                   .when(pl.col("is_fua")).then(pl.lit("fua"))
                   .when(pl.col("is_preflush")).then(pl.lit("preflush"))
                   .when(pl.col("is_sync")).then(pl.lit("sync"))
                   .otherwise(pl.lit("async"))),
        q2g_ns=_phase("getrq_ts", "queue_ts"), g2i_ns=_phase("insert_ts", "getrq_ts"),
        i2d_ns=_phase("issue_ts", "insert_ts"), d2c_ns=_phase("complete_ts", "issue_ts"),
        q2c_ns=_phase("complete_ts", "queue_ts"),
    )
    df = classify_locality(df)
    return df.select("rep", "ts", "dev_major", "dev_minor", "sector", "size_bytes", "op", "rwbs", "size_class",
                     "locality", "sync_mode", "is_meta", "q2g_ns", "g2i_ns", "i2d_ns", "d2c_ns", "q2c_ns",
                     "pid", "comm").sort(["rep", "ts"])
