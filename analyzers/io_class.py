"""Counts and bytes of IO per class at the block, syscall and file layers: the papers' IO characterisation
(seed 000 Fig. 4, seed 002's "IO characteristics of Android apps").

io_class: one row per combination of (layer, op, size class, strict locality, sync mode, region, file type).
io_share: the same in long form, one dimension at a time, with shares of count and bytes per (layer, op).
Locality shares are taken over sequential + random only (`first` and `none` have no predecessor or position:
their rows are kept, with a null share), so a contiguous stream is 100 % sequential.
"""

from __future__ import annotations

import polars as pl

DIMENSIONS = {"size_class": "size_class", "size_log2": "size_log2_bytes", "locality": "locality",
              "locality_tolerant": "locality_tolerant", "locality_global": "locality_global",
              "sync_mode": "sync_mode", "region": "region", "file_type": "file_type"}
_LOCALITY_DIMS = ("locality", "locality_tolerant", "locality_global")


def _with_region(df: pl.DataFrame) -> pl.DataFrame:
    return df if "region" in df.columns else df.with_columns(region=pl.lit("-"))


def count_io_classes(block_io: pl.DataFrame, syscall_class: pl.DataFrame | None = None,
                     file_io: pl.DataFrame | None = None) -> pl.DataFrame:
    frames = [_with_region(block_io).with_columns(layer=pl.lit("block"))]
    if syscall_class is not None:
        frames.append(_with_region(syscall_class).with_columns(layer=pl.lit("syscall")))
    if file_io is not None:
        frames.append(_with_region(file_io).with_columns(layer=pl.lit("file")))
    keys = ["rep", "layer", "op", "size_class", "locality", "sync_mode", "region", "file_type"]
    out = [f.group_by(keys).agg(count=pl.len().cast(pl.Int64), bytes=pl.col("size_bytes").sum().cast(pl.Int64))
           for f in frames]
    return pl.concat(out, how="vertical").sort(keys)


def share_by_dimension(classified: pl.DataFrame, layer: str) -> pl.DataFrame:
    df = _with_region(classified)
    frames = []
    for dim, col in DIMENSIONS.items():
        if col not in df.columns:
            continue
        g = (df.group_by("rep", "op", pl.col(col).cast(pl.Utf8).alias("value"))
             .agg(count=pl.len().cast(pl.Int64), bytes=pl.col("size_bytes").sum().cast(pl.Int64)))
        counted = ~pl.col("value").is_in(["first", "none"]) if dim in _LOCALITY_DIMS else pl.lit(True)
        total_c = pl.col("count").filter(counted).sum().over("rep", "op")
        total_b = pl.col("bytes").filter(counted).sum().over("rep", "op")
        g = g.with_columns(
            count_share=pl.when(counted & (total_c > 0)).then(pl.col("count") / total_c),
            bytes_share=pl.when(counted & (total_b > 0)).then(pl.col("bytes") / total_b),
            dimension=pl.lit(dim), layer=pl.lit(layer))
        frames.append(g)
    out = pl.concat(frames, how="vertical_relaxed")
    return out.select("rep", "layer", "op", "dimension", "value", "count", "bytes", "count_share",
                      "bytes_share").sort("rep", "layer", "op", "dimension", "value")


def share_io(block_io: pl.DataFrame, syscall_class: pl.DataFrame | None = None,
             file_io: pl.DataFrame | None = None) -> pl.DataFrame:
    """Shares per dimension at the block layer, and at the syscall and file layers when the run has them."""
    frames = [share_by_dimension(block_io, "block")]
    if syscall_class is not None:
        frames.append(share_by_dimension(syscall_class, "syscall"))
    if file_io is not None:
        frames.append(share_by_dimension(file_io, "file"))
    return pl.concat(frames)
