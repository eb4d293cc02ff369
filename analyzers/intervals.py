"""Unions of intervals per key, without window functions: the intervals of every key laid end to end on one line
(each key's times moved past the previous key's), so one running maximum over the sorted whole finds where each
merged interval starts. The nest's exclusive times (waterfall.py, io_by_owner.py) and the blocked time's split
(blocked.py) take unions per call, per nest and per thread, many times over a trace's hundreds of thousands of
spans; a running maximum per group (`over`) costs several times more.
"""

from __future__ import annotations

import polars as pl


def merged(spans: pl.DataFrame, key: list[str], start: str = "ts", end: str = "end_ts") -> pl.DataFrame:
    """(key..., s, e): the union of each key's [start, end) intervals as disjoint intervals, in order."""
    iv = spans.filter(pl.col(end) > pl.col(start)).select(*key, pl.col(start).alias("s"), pl.col(end).alias("e"))
    if not iv.height:
        return iv
    lo, hi = iv["s"].min(), iv["e"].max()
    width = hi - lo + 1
    keys = iv.select(key).unique().with_row_index("_k").with_columns(pl.col("_k").cast(pl.Int64))
    iv = iv.join(keys, on=key)
    iv = iv.with_columns(_s=(pl.col("s") - lo) + pl.col("_k") * width,
                         _e=(pl.col("e") - lo) + pl.col("_k") * width).sort("_s")
    iv = iv.with_columns(_reach=pl.col("_e").cum_max().shift(1))
    iv = iv.with_columns(_run=(pl.col("_reach").is_null() | (pl.col("_s") > pl.col("_reach"))).cum_sum())
    return iv.group_by("_run", maintain_order=True).agg(
        *[pl.col(k).first() for k in key], pl.col("s").min(), pl.col("e").max()).drop("_run")


def union_ns(spans: pl.DataFrame, key: list[str], start: str = "ts", end: str = "end_ts") -> pl.DataFrame:
    """(key..., _union): the length of the union of each key's intervals."""
    m = merged(spans, key, start, end)
    if not m.height:
        return pl.DataFrame(schema={**{k: spans.schema[k] for k in key}, "_union": pl.Int64})
    return m.group_by(key).agg((pl.col("e") - pl.col("s")).sum().alias("_union"))
