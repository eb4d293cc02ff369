"""The raw ftrace fixture (a capture seen as text and as binary pages) and the comparisons of a binary-decoded table
with the text parser's: row for row, timestamps as the text rounds them, durations within the text's rounding."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from polars.testing import assert_frame_equal

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "ftrace" / "raw-6.18-rawdec.tar.gz"


def _text_ts(df: pl.DataFrame) -> pl.DataFrame:
    """The text's view of a binary table: µs timestamps rounded as the kernel prints them (ns2usecs adds 500)."""
    return df.with_columns(((pl.col("ts") + 500) // 1000 * 1000).alias("ts")) if "ts" in df.columns else df


def assert_same_rows(got: pl.DataFrame, want: pl.DataFrame) -> None:
    """Row for row; where a table is sorted by ts after its event families were stacked (fsync, jbd2 commits,
    fuse), rows of one microsecond are in family order in the text and in true (ns) order in the binary: those
    may differ in order, nothing else (both are sorted by ts, so a full sort only permutes within a µs)."""
    try:
        assert_frame_equal(got, want)
        return
    except AssertionError:
        pass
    assert got["ts"].is_sorted() and want["ts"].is_sorted()
    assert_frame_equal(got.sort(got.columns, nulls_last=True), want.sort(want.columns, nulls_last=True))


def assert_same_durations(got: pl.DataFrame, want: pl.DataFrame) -> None:
    """dur of the binary within 1 µs of the text's (a difference of two rounded µs timestamps), null alike; rows
    aligned as assert_same_rows() does (where the order differs within a µs, by every other column, then dur:
    calls equal in all of them may then pair across, 3 µs at most)."""
    key = [c for c in got.columns if c != "dur"]
    tolerance = 1000
    if not got.drop("dur").equals(want.drop("dur")):
        got, want = got.sort([*key, "dur"], nulls_last=True), want.sort([*key, "dur"], nulls_last=True)
        tolerance = 3000
    assert (got["dur"].is_null() == want["dur"].is_null()).all()
    assert ((got["dur"] - want["dur"]).abs().drop_nulls() < tolerance).all()
