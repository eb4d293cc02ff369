"""Latency percentiles per block phase (btt's Q2G, G2I, I2D, D2C, Q2C) and direction."""

from __future__ import annotations

import polars as pl

PHASES = ("q2g", "g2i", "i2d", "d2c", "q2c")


def summarize_block_latency(block_io: pl.DataFrame) -> pl.DataFrame:
    frames = []
    for phase in PHASES:
        col = pl.col(f"{phase}_ns")
        frames.append(
            block_io.filter(col.is_not_null() & (pl.col("op").is_in(["read", "write", "flush"])))
            .group_by("rep", "op")
            .agg(count=pl.len().cast(pl.Int64), mean_ns=col.mean(), p50_ns=col.quantile(0.5, "linear"),
                 p90_ns=col.quantile(0.9, "linear"), p99_ns=col.quantile(0.99, "linear"),
                 max_ns=col.max().cast(pl.Float64))
            .with_columns(layer=pl.lit("block"), phase=pl.lit(phase)))
    out = pl.concat(frames, how="vertical")
    return out.select("rep", "layer", "phase", "op", "count", "mean_ns", "p50_ns", "p90_ns", "p99_ns", "max_ns") \
        .sort("rep", "phase", "op")
