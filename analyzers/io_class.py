"""Counts and bytes of block IO per class: the papers' IO characterisation (seed 000 Fig. 4)."""

from __future__ import annotations

import polars as pl


def count_io_classes(block_io: pl.DataFrame) -> pl.DataFrame:
    return (block_io.group_by("rep", "op", "size_class", "locality", "sync_mode")
            .agg(count=pl.len().cast(pl.Int64), bytes=pl.col("size_bytes").sum().cast(pl.Int64))
            .with_columns(layer=pl.lit("block"))
            .select("rep", "layer", "op", "size_class", "locality", "sync_mode", "count", "bytes")
            .sort("rep", "op", "size_class", "locality", "sync_mode"))
