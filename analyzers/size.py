"""IO size classes.

The papers' buckets (seed 000 Fig. 4, seed 002): 4 KB, 8-64 KB, 64-256 KB, > 256 KB. As intervals of bytes:
(0, 4 KiB], (4 KiB, 64 KiB], (64 KiB, 256 KiB], (256 KiB, inf); zero-length requests (flushes) are `none`.
The label of the first bucket is "<=4k" because sub-4 KiB IO (rare on a 4 KiB-block filesystem) belongs with it.
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
