"""The timed-window analyzer on requests whose answer is known: which are inside, and their D2C/Q2C."""

from __future__ import annotations

import polars as pl

from mobiperf.analyzers.timed_window import block_in_timed_window
from mobiperf.core.schema import WINDOW_BLOCK


def _requests(rows):
    cols = ("rep", "op", "size_bytes", "queue_ts", "issue_ts", "complete_ts")
    return pl.DataFrame([dict(zip(cols, r)) for r in rows], schema={
        "rep": pl.Int32, "op": pl.Utf8, "size_bytes": pl.Int64, "queue_ts": pl.Int64, "issue_ts": pl.Int64,
        "complete_ts": pl.Int64})


def test_only_requests_issued_and_completed_inside_the_window_count():
    markers = pl.DataFrame({"rep": [0, 0, 0, 1], "ts": [100, 1000, 1200, 5], "pid": [1, 1, 1, 1],
                            "text": ["mobibench: timed_start", "mobibench: timed_end", "other", "timed_start"]},
                           schema={"rep": pl.Int32, "ts": pl.Int64, "pid": pl.Int32, "text": pl.Utf8})
    rq = _requests([
        (0, "write", 4096, 150, 200, 300),     # inside: d2c 100, q2c 150
        (0, "write", 8192, None, 400, 700),    # inside: d2c 300, no queue seen
        (0, "write", 4096, 40, 50, 250),       # issued before the start: out
        (0, "write", 4096, 880, 900, 1100),    # completed after the end: out
        (0, "write", 4096, 300, None, 500),    # never seen issued: out
        (0, "flush", 0, None, 500, 600),       # inside
        (1, "write", 4096, 10, 20, 30),        # a repetition without a window: no rows
    ])
    table = WINDOW_BLOCK.validate(block_in_timed_window(rq, markers))
    assert table.rows(named=True) == [
        {"rep": 0, "op": "flush", "window_ns": 900, "requests": 1, "bytes": 0, "d2c_mean_ns": 100.0,
         "d2c_p50_ns": 100.0, "d2c_sum_ns": 100.0, "q2c_mean_ns": None, "q2c_p50_ns": None},
        {"rep": 0, "op": "write", "window_ns": 900, "requests": 2, "bytes": 12288, "d2c_mean_ns": 200.0,
         "d2c_p50_ns": 200.0, "d2c_sum_ns": 400.0, "q2c_mean_ns": 150.0, "q2c_p50_ns": 150.0},
    ]
    assert block_in_timed_window(rq, markers.filter(pl.col("rep") == 1)).is_empty()
