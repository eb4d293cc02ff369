"""fuse_event rows -> one row per FUSE request (fuse_req): fuse_request_send paired with fuse_request_end.

A request is identified by (rep, connection, unique): the kernel gives each request of a connection a new
`unique`. send carries the opcode and the request length, end the reply length and error. The send event fires
in the requesting task, the end event in the daemon thread writing the reply to /dev/fuse: the pid of each tells
who asked and who served (daemon_tid), which is how analyzers/io_span.py nests the daemon's work in the request.

Data bytes (what moved between the page cache and the daemon) come from the message lengths minus the fixed
headers of the FUSE protocol (include/uapi/linux/fuse.h): a WRITE carries fuse_in_header (40 bytes) and
fuse_write_in (40) before its data; a READ's reply carries fuse_out_header (16) before the data read. A send without
an end
(still in flight when tracing stopped) keeps null end_ts and dur; an end without a send (sent before tracing
started) is counted, not kept.
"""

from __future__ import annotations

import polars as pl

from mobiperf.core.schema import FUSE_REQ

FUSE_READ, FUSE_WRITE = 15, 16
WRITE_HEADER_BYTES = 40 + 40   # fuse_in_header + fuse_write_in
REPLY_HEADER_BYTES = 16        # fuse_out_header


def pair_fuse_requests(events: pl.DataFrame) -> tuple[pl.DataFrame, dict]:
    key = ["rep", "connection", "unique"]
    send = events.filter(pl.col("phase") == "send").unique(key, keep="first", maintain_order=True)
    end = events.filter(pl.col("phase") == "end").unique(key, keep="first", maintain_order=True).select(
        *key, pl.col("ts").alias("end_ts"), pl.col("len_bytes").alias("reply_len_bytes"),
        pl.col("error").alias("end_error"), pl.col("pid").alias("daemon_tid"))
    joined = send.join(end, on=key, how="left")
    out = joined.select(
        "rep", "connection", "unique", "opcode", "opcode_name", pl.col("ts").alias("send_ts"), "end_ts",
        (pl.col("end_ts") - pl.col("ts")).alias("dur"), "len_bytes", "reply_len_bytes",
        pl.col("end_error").alias("error"), "pid", "comm", "daemon_tid", _data_bytes()).sort(["rep", "send_ts"])
    orphans = end.join(send.select(key), on=key, how="anti").height
    return FUSE_REQ.validate(out), {"requests": out.height, "unfinished": int(out["end_ts"].is_null().sum()),
                                    "ends_without_send": orphans}


def _data_bytes() -> pl.Expr:
    ok = pl.col("end_error").fill_null(-1) == 0
    return (pl.when((pl.col("opcode") == FUSE_WRITE) & ok)
            .then((pl.col("len_bytes") - WRITE_HEADER_BYTES).clip(lower_bound=0))
            .when((pl.col("opcode") == FUSE_READ) & ok)
            .then((pl.col("reply_len_bytes") - REPLY_HEADER_BYTES).clip(lower_bound=0))
            .otherwise(0).cast(pl.Int64).alias("data_bytes"))
