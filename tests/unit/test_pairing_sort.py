"""sort_requests equals polars' full sort by SORT_KEYS (nulls last, stable) on frames full of ties and nulls."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from mobiperf.collectors.parse.block_requests import SORT_KEYS, sort_requests


@pytest.mark.parametrize("seed", range(20))
def test_sort_requests_equals_the_full_sort(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.choice([0, 1, 2, 5, 300, 3000]))

    def col(lo, hi, null_share):
        v = pl.Series(rng.integers(lo, hi, n), dtype=pl.Int64)
        return pl.select(pl.when(pl.Series(rng.random(n) >= null_share)).then(v)).to_series() if n else v

    df = pl.DataFrame({
        "rep": pl.Series(rng.integers(0, 3, n), dtype=pl.Int32), "issue_ts": col(0, 50, 0.2),
        "queue_ts": col(0, 5, 0.3), "getrq_ts": col(0, 4, 0.3), "sector": col(-1, 3, 0),
        "size_bytes": col(0, 3, 0), "complete_ts": col(0, 3, 0.3), "insert_ts": col(0, 3, 0.5),
        "dev_major": pl.Series(rng.integers(7, 9, n), dtype=pl.Int32),
        "dev_minor": pl.Series(rng.integers(0, 2, n), dtype=pl.Int32),
        "payload": np.arange(n)})  # tells rows that tie on every key apart: stability
    assert_frame_equal(sort_requests(df), df.sort(SORT_KEYS, nulls_last=True, maintain_order=True))


def test_unique_issue_times_need_no_second_sort():
    df = pl.DataFrame({k: pl.Series([3, 1, 2], dtype=pl.Int64) for k in SORT_KEYS})
    assert sort_requests(df)["issue_ts"].to_list() == [1, 2, 3]
