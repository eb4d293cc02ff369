"""fuse_event rows -> one row per FUSE request (fuse_req): fuse_request_send paired with fuse_request_end.

A request is identified by (rep, connection, unique): the kernel gives each request of a connection a new
`unique`. send carries the opcode and the request length, end the reply length and error. A send without an end
(still in flight when tracing stopped) keeps null end_ts and dur; an end without a send (sent before tracing
started) is counted, not kept.
"""

from __future__ import annotations

import polars as pl

from mobiperf.schema import FUSE_REQ


def pair_fuse_requests(events: pl.DataFrame) -> tuple[pl.DataFrame, dict]:
    key = ["rep", "connection", "unique"]
    send = events.filter(pl.col("phase") == "send").unique(key, keep="first", maintain_order=True)
    end = events.filter(pl.col("phase") == "end").unique(key, keep="first", maintain_order=True).select(
        *key, pl.col("ts").alias("end_ts"), pl.col("len_bytes").alias("reply_len_bytes"),
        pl.col("error").alias("end_error"))
    joined = send.join(end, on=key, how="left")
    out = joined.select(
        "rep", "connection", "unique", "opcode", "opcode_name", pl.col("ts").alias("send_ts"), "end_ts",
        (pl.col("end_ts") - pl.col("ts")).alias("dur"), "len_bytes", "reply_len_bytes",
        pl.col("end_error").alias("error"), "pid", "comm").sort(["rep", "send_ts"])
    orphans = end.join(send.select(key), on=key, how="anti").height
    return FUSE_REQ.validate(out), {"requests": out.height, "unfinished": int(out["end_ts"].is_null().sum()),
                                    "ends_without_send": orphans}
