"""One event's fields from the text of its lines' bodies, by a regular expression with named groups: the parse of
the events whose format is their kernel's TP_printk (ftrace_events.py, sched.py)."""

from __future__ import annotations

import polars as pl


def extract_fields(head: pl.DataFrame, event: str, pattern: str, unparsed: dict[str, int]) -> pl.DataFrame:
    """The rows of `event` in head (its `body` column dropped) with one column per named group of `pattern`;
    the lines it does not match are left out and counted in unparsed[event]."""
    rows = head.filter(pl.col("event") == event)
    groups = rows["body"].str.extract_groups(pattern).struct.unnest()
    got = pl.concat([rows.drop("body"), groups], how="horizontal")
    ok = got.filter(pl.col(groups.columns[0]).is_not_null())
    if len(ok) < len(got):
        unparsed[event] = unparsed.get(event, 0) + len(got) - len(ok)
    return ok
