"""IO size classes, at any layer.

The papers' buckets (seed 000 Fig. 4, seed 002): 4 KB, 8-64 KB, 64-256 KB, > 256 KB. As intervals of bytes:
(0, 4 KiB], (4 KiB, 64 KiB], (64 KiB, 256 KiB], (256 KiB, inf); zero-length IO (flushes, fsync) is `none`.
The label of the first bucket is "<=4k" because sub-4 KiB IO (SQLite's 512-byte journal headers, rare at the
block layer of a 4 KiB-block file system) belongs with it.

The log2 histogram: bucket b holds sizes in [2^b, 2^(b+1)) bytes and is labelled by its lower bound in bytes
(`size_log2_bytes`), so 4096 holds exactly-4 KiB IO and 4097..8191; zero-length IO has bucket 0.
"""

from __future__ import annotations

import polars as pl

SIZE_CLASSES = ("<=4k", "8k-64k", "64k-256k", ">256k")


def size_class(size_bytes: pl.Expr) -> pl.Expr:
    return (pl.when(size_bytes <= 0).then(pl.lit("none"))
            .when(size_bytes <= 4 << 10).then(pl.lit(SIZE_CLASSES[0]))
            .when(size_bytes <= 64 << 10).then(pl.lit(SIZE_CLASSES[1]))
            .when(size_bytes <= 256 << 10).then(pl.lit(SIZE_CLASSES[2]))
            .otherwise(pl.lit(SIZE_CLASSES[3])))


def size_log2_bucket(size_bytes: pl.Expr) -> pl.Expr:
    """The lower bound (a power of two, in bytes) of the log2 bucket of each size; 0 for zero-length IO."""
    exact = size_bytes.cast(pl.Float64).log(2).floor()
    return (pl.when(size_bytes <= 0).then(pl.lit(0, pl.Int64))
            .otherwise(pl.lit(2, pl.Int64).pow(exact.cast(pl.Int64)))).cast(pl.Int64)
