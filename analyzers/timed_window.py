"""Block requests inside the workload's own timed window.

Window: per repetition, from the first `timed_start` trace marker to the last `timed_end` (the Mobibench-compatible
generator writes them around what it times, so creating the file before and the report after fall outside; the
papers' throughput is over this window). A repetition without both markers has no window and no rows.

Inside: a block request issued at or after the start and completed at or before the end (both seen). Per
repetition and op (read, write, flush, ...): requests, bytes, device time D2C (issue -> complete: mean, median,
sum) and block-layer time Q2C (queue -> complete, over the requests whose queue was seen: mean, median; null when
none was). window_ns is the window's length.

Limits: a request issued before the start and completed inside it (or issued inside, completed after the end) is
not counted, so a window shorter than a request's device time counts nothing; the window is the generator's
statement of what it timed, not checked against its own clock.
"""

from __future__ import annotations

import polars as pl

COLUMNS = {"rep": pl.Int32, "op": pl.Utf8, "window_ns": pl.Int64, "requests": pl.Int64, "bytes": pl.Int64,
           "d2c_mean_ns": pl.Float64, "d2c_p50_ns": pl.Float64, "d2c_sum_ns": pl.Float64,
           "q2c_mean_ns": pl.Float64, "q2c_p50_ns": pl.Float64}


def timed_windows(trace_marker: pl.DataFrame) -> dict[int, tuple[int, int]]:
    """{rep: (start_ts, end_ts)} of the repetitions whose markers hold a timed window."""
    out = {}
    for (rep,), marks in trace_marker.group_by(["rep"]):
        start = marks.filter(pl.col("text").str.contains("timed_start"))["ts"]
        end = marks.filter(pl.col("text").str.contains("timed_end"))["ts"]
        if start.len() and end.len():
            out[int(rep)] = (int(start.min()), int(end.max()))
    return out


def block_in_timed_window(block_rq: pl.DataFrame, trace_marker: pl.DataFrame) -> pl.DataFrame:
    """window_block: per repetition and op, the block requests inside the timed window (module docstring)."""
    rows = []
    for rep, (start, end) in sorted(timed_windows(trace_marker).items()):
        rq = block_rq.filter(
            (pl.col("rep") == rep) & pl.col("issue_ts").is_not_null() & pl.col("complete_ts").is_not_null()
            & (pl.col("issue_ts") >= start) & (pl.col("complete_ts") <= end))
        for (op,), group in sorted(rq.group_by(["op"]), key=lambda g: str(g[0][0])):
            d2c = (group["complete_ts"] - group["issue_ts"]).cast(pl.Float64)
            queued = group.filter(pl.col("queue_ts").is_not_null())
            q2c = (queued["complete_ts"] - queued["queue_ts"]).cast(pl.Float64)
            rows.append({"rep": rep, "op": op, "window_ns": end - start, "requests": group.height,
                         "bytes": int(group["size_bytes"].sum()), "d2c_mean_ns": float(d2c.mean()),
                         "d2c_p50_ns": float(d2c.median()), "d2c_sum_ns": float(d2c.sum()),
                         "q2c_mean_ns": float(q2c.mean()) if queued.height else None,
                         "q2c_p50_ns": float(q2c.median()) if queued.height else None})
    return pl.DataFrame(rows, schema=COLUMNS)
