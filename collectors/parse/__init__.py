"""Parsers: raw trace files -> typed tables. Pure functions of their input files; they never touch a device.

parse_raw_dir() reads whatever one repetition's raw directory holds and returns its event tables;
derive_tables() then builds the tables that combine events (one row per block request) for all repetitions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import polars as pl


@dataclass
class ParsedRaw:
    tables: dict[str, pl.DataFrame] = field(default_factory=dict)
    summary: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def parse_raw_dir(raw: Path, rep: int) -> ParsedRaw:
    from mobiperf.collectors.parse.ftrace_text import parse_ftrace_text

    out = ParsedRaw()
    trace = raw / "ftrace.txt"
    if trace.exists():
        parsed = parse_ftrace_text(trace, rep)
        out.tables.update(block_event=parsed.block_event, trace_marker=parsed.trace_marker)
        out.summary["ftrace"] = {"lines": parsed.lines, "unparsed": parsed.unparsed_by_event,
                                 "other_events": parsed.other_events}
        out.warnings += parsed.warnings
    return out


def derive_tables(tables: dict[str, pl.DataFrame]) -> tuple[dict[str, pl.DataFrame], dict]:
    """Tables built from the event tables of all repetitions, with a summary for run.json."""
    from mobiperf.collectors.parse.block_requests import pair_block_requests

    derived, summary = {}, {}
    if "block_event" in tables:
        derived["block_rq"], pairing = pair_block_requests(tables["block_event"])
        summary["block_pairing"] = pairing.as_dict()
    return derived, summary
