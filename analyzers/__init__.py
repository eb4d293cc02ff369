"""Analyzers: pure functions from event tables to result tables, registered with what they need and produce.

Installed as mobiperf.analyzers. The registry below is what `mobiperf analyze` runs, in order; an analyzer's
`needs` decide which events `collect` enables and which table is reported missing when a run lacks it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import polars as pl


@dataclass(frozen=True)
class Analyzer:
    name: str
    needs: tuple[str, ...]          # input tables (event tables or earlier results)
    produces: str                   # result table name
    run: Callable[..., pl.DataFrame]
    events: tuple[str, ...] = ()    # trace events that produce the needed tables (for error messages)


def breakdown_tables(results: dict[str, pl.DataFrame]) -> dict[str, pl.DataFrame]:
    """The tables `mobiperf analyze` prints, by title, from the results of one analysis."""
    out = {}
    if "io_class" in results:
        out["IO classes (block layer)"] = results["io_class"]
    if "latency_summary" in results:
        out["Latency by phase (block layer)"] = results["latency_summary"]
    return out


def headline_metrics(results: dict[str, pl.DataFrame], rep: int) -> list:
    """The metrics of one repetition, from every analyzer family that has results."""
    from mobiperf.analyzers import headline

    return headline.block_metrics(results, rep)


def registry() -> list[Analyzer]:
    from mobiperf.analyzers import block_io, io_class, latency

    return [
        Analyzer("block_io", ("block_rq",), "block_io", block_io.classify_block_io,
                 events=("block:block_bio_queue", "block:block_rq_issue", "block:block_rq_complete")),
        Analyzer("io_class", ("block_io",), "io_class", io_class.count_io_classes),
        Analyzer("latency_summary", ("block_io",), "latency_summary", latency.summarize_block_latency),
    ]
