"""Sequential or random, at the block layer.

Definition (strict): a request is *sequential* when it starts exactly at the sector where the previous request of
the same stream ended, in the order the device received them (issue order). A stream is one device and one
direction (reads and writes interleave on a phone without breaking each other's runs). The first request of a
stream has no predecessor and is counted as *random*; zero-length requests (flushes) are `none` and do not move
the stream's position.

Limits: interleaved streams from several files on one device look random even if each file is written
sequentially; the per-file view belongs to the syscall layer.
"""

from __future__ import annotations

import polars as pl

STREAM = ("rep", "dev_major", "dev_minor", "op")


def classify_locality(df: pl.DataFrame, order_by: str = "issue_ts") -> pl.DataFrame:
    """df (rows with sector, size_bytes, op) with a `locality` column added."""
    has_data = (pl.col("size_bytes") > 0) & (pl.col("sector") >= 0)
    data = df.filter(has_data).sort([*STREAM, order_by], nulls_last=True)
    prev_end = (pl.col("sector") + pl.col("size_bytes") // 512).shift(1).over(list(STREAM))
    data = data.with_columns(
        locality=pl.when(pl.col("sector") == prev_end).then(pl.lit("sequential")).otherwise(pl.lit("random")))
    rest = df.filter(~has_data).with_columns(locality=pl.lit("none"))
    return pl.concat([data, rest], how="vertical")
