"""Sequential or random, at the block and the syscall layer.

Definitions, in the order the layer sees the IO (issue order at the block layer, call order at the syscall
layer), within a *stream*:
  strict     `sequential` when the IO starts exactly where the previous IO of its stream ended;
  tolerant   `sequential` when it starts within `window` bytes (default 128 KiB) after or at the previous end,
             or overlaps the previous IO (a rewrite of the block just written, as journals do); skips backwards
             and forward jumps beyond the window are `random`;
  `first`    the first IO of a stream has no predecessor: it is neither sequential nor random, and sequential
             shares are taken over sequential + random only, so a contiguous stream is 100 % sequential;
  `none`     zero-length IO (flushes, fsync) has no position and does not move its stream's position.
Streams: at the block layer a stream is (device, direction) and the *global* view is the device (reads and
writes interleaved); at the syscall layer a stream is (process, file) and the global view is the process.

Limits: several files written in turn on one device look random at the block layer even when each file is
written sequentially (that is what the device sees); the per-file view is the syscall layer's.
"""

from __future__ import annotations

import polars as pl

TOLERANT_WINDOW_BYTES = 128 << 10
LOCALITIES = ("sequential", "random", "first", "none")


def locality_expr(start: pl.Expr, length: pl.Expr, stream: list[str], strict: bool,
                  window_bytes: int = TOLERANT_WINDOW_BYTES) -> pl.Expr:
    """Locality of each row of a frame already sorted in the layer's order; start/length in bytes.
    Zero-length rows must be filtered out beforehand (they are `none`)."""
    prev_end = (start + length).shift(1).over(stream)
    prev_start = start.shift(1).over(stream)
    if strict:
        seq = start == prev_end
    else:
        seq = ((start >= prev_end) & (start <= prev_end + window_bytes)) | ((start < prev_end) & (start >= prev_start))
    return pl.when(prev_end.is_null()).then(pl.lit("first")).when(seq).then(pl.lit("sequential")) \
        .otherwise(pl.lit("random"))


def classify_locality(df: pl.DataFrame, stream: list[str], global_stream: list[str], order_by: list[str],
                      start: pl.Expr, length: pl.Expr, window_bytes: int = TOLERANT_WINDOW_BYTES) -> pl.DataFrame:
    """df with `locality` (strict, per stream), `locality_tolerant` (per stream) and `locality_global` (strict,
    global view) added; rows keep their order. The work runs on the few columns it reads (a million block
    requests: tens of MB moved instead of the whole table, sorted twice)."""
    keys = list(dict.fromkeys([*order_by, *stream, *global_stream]))
    narrow = df.select(*keys, _loc_start=start, _loc_len=length).with_row_index("_loc_row")
    has_data = pl.col("_loc_len") > 0
    data = narrow.filter(has_data).sort(order_by, nulls_last=True, maintain_order=True)
    s, n = pl.col("_loc_start"), pl.col("_loc_len")
    data = data.select("_loc_row",
                       locality=locality_expr(s, n, stream, True),
                       locality_tolerant=locality_expr(s, n, stream, False, window_bytes),
                       locality_global=locality_expr(s, n, global_stream, True))
    rest = narrow.filter(~has_data).select("_loc_row", locality=pl.lit("none"), locality_tolerant=pl.lit("none"),
                                           locality_global=pl.lit("none"))
    got = pl.concat([data, rest], how="vertical").sort("_loc_row").drop("_loc_row")
    return pl.concat([df, got], how="horizontal")


def sequential_share(localities: pl.Series) -> float | None:
    """Sequential / (sequential + random): `first` and `none` are left out; None when nothing is left."""
    seq = int((localities == "sequential").sum())
    rnd = int((localities == "random").sum())
    return seq / (seq + rnd) if seq + rnd else None
