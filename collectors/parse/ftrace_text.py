"""ftrace text (the `trace` / `trace_pipe` format) -> typed event tables.

Line layout (kernel/trace/trace_output.c): comm right-aligned in 16 columns, `-pid`, optional `(tgid)`, `[cpu]`,
an optional irq-info flags column (5 characters on 6.x, 4 on older kernels), `secs.usecs:`, `event_name:`, body.
comm may contain `-`, spaces and `:`, so the pid is the last `-digits` before the `[cpu]` column.

Parsing is vectorized (Polars' Rust regex over all lines at once): first the line header, then one body pattern
per event name. Block bodies differ by kernel: 6.11+ prints an ioprio triple (`be,0,4`) before `[comm]`, trace-cmd
prints it as `0x2,0,4`, and 3.x kernels print bytes 0 for file system requests; the patterns accept all of these.
Lines that match no pattern are counted and reported by event name, never dropped silently.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from mobiperf.errors import ParseError
from mobiperf.schema import BLOCK_EVENT, TRACE_MARKER

HEADER = (r"^\s*(?P<comm>.*)-(?P<pid>\d+)\s+(?:\(\s*[-\d]+\)\s+)?\[(?P<cpu>\d+)\]\s+(?:\S{4,5}\s+)?"
          r"(?P<secs>\d+)\.(?P<usecs>\d+):\s+(?P<event>\w+):\s?(?P<body>.*)$")
_DEV = r"(?P<major>\d+),(?P<minor>\d+) (?P<rwbs>\S+) "
_IOPRIO = r"(?: \S+,\d+,\d+)?"
BLOCK_BODIES = {
    # bio-level events: dev rwbs sector + nr [comm]
    "bio": _DEV + r"(?P<sector>\d+) \+ (?P<nr_sector>\d+) \[(?P<comm_>.*)\]$",
    # request insert/issue/merge: dev rwbs bytes (cmd) sector + nr [ioprio] [comm]
    "rq": _DEV + r"(?P<bytes>\d+) \((?P<cmd>.*?)\) (?P<sector>\d+) \+ (?P<nr_sector>\d+)" + _IOPRIO
          + r" \[(?P<comm_>.*)\]$",
    # request completion/requeue: dev rwbs (cmd) sector + nr [ioprio] [error]
    "rq_done": _DEV + r"\((?P<cmd>.*?)\) (?P<sector>\d+) \+ (?P<nr_sector>\d+)" + _IOPRIO
               + r" \[(?P<error>-?\d+)\]$",
    "split": _DEV + r"(?P<sector>\d+) / (?P<new_sector>\d+) \[(?P<comm_>.*)\]$",
    "plug": r"^\[(?P<comm_>.*)\]$",
    "unplug": r"^\[(?P<comm_>.*)\] (?P<nr_rq>\d+)$",
}
BLOCK_EVENT_BODY = {
    "block_bio_queue": "bio", "block_getrq": "bio", "block_bio_backmerge": "bio", "block_bio_frontmerge": "bio",
    "block_rq_insert": "rq", "block_rq_issue": "rq", "block_rq_merge": "rq",
    "block_rq_complete": "rq_done", "block_rq_requeue": "rq_done", "block_rq_error": "rq_done",
    "block_split": "split", "block_plug": "plug", "block_unplug": "unplug",
}
MARKER_EVENTS = ("tracing_mark_write", "print")
# sector_t is unsigned; flush requests may carry (sector_t)-1. Above this it is "no sector".
_MAX_SECTOR = (1 << 63) - 1


@dataclass
class FtraceTables:
    block_event: pl.DataFrame
    trace_marker: pl.DataFrame
    lines: int = 0
    unparsed_by_event: dict[str, int] = field(default_factory=dict)
    other_events: dict[str, int] = field(default_factory=dict)

    @property
    def warnings(self) -> list[str]:
        return [f"{n} {ev} lines did not match the known formats and were skipped"
                for ev, n in sorted(self.unparsed_by_event.items())]


def read_lines(path: Path) -> pl.Series:
    """The lines of a text file as a Series, with `#` comment lines of the `trace` file dropped."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise ParseError(path, 0, f"cannot read: {e.strerror}") from None
    text = data.decode("utf-8", errors="replace")
    lines = pl.Series("line", text.splitlines(), dtype=pl.Utf8)
    return lines.filter(~lines.str.starts_with("#") & (lines.str.strip_chars() != ""))


def parse_ftrace_text(path: Path, rep: int = 0) -> FtraceTables:
    lines = read_lines(path)
    head = lines.str.extract_groups(HEADER).struct.unnest()
    head = head.with_columns(lines.alias("line"))
    bad_header = head.filter(pl.col("event").is_null())
    if len(bad_header):
        first = bad_header["line"][0]
        if len(bad_header) == len(head):
            raise ParseError(path, 1, f"not ftrace text: {first[:80]!r}")
    head = head.filter(pl.col("event").is_not_null()).with_columns(
        ts=pl.col("secs").cast(pl.Int64) * 1_000_000_000 + _fraction_ns(pl.col("usecs")),
        pid=pl.col("pid").cast(pl.Int32), cpu=pl.col("cpu").cast(pl.Int32),
        comm=pl.col("comm").str.strip_chars(),
    )
    counts = dict(head.group_by("event").len().iter_rows())
    unparsed: dict[str, int] = {}
    if len(bad_header):
        unparsed["(no header)"] = len(bad_header)
    frames = []
    for event, kind in BLOCK_EVENT_BODY.items():
        rows = head.filter(pl.col("event") == event)
        if not len(rows):
            continue
        body = rows["body"].str.extract_groups(BLOCK_BODIES[kind]).struct.unnest()
        parsed = pl.concat([rows.select("ts", "cpu", "pid", "comm", "event"), body], how="horizontal")
        ok = parsed.filter(pl.all_horizontal(pl.col(c).is_not_null() for c in body.columns[:1]))
        if len(ok) < len(parsed):
            unparsed[event] = len(parsed) - len(ok)
        frames.append(_block_columns(ok, rep))
    block = pl.concat(frames, how="vertical") if frames else BLOCK_EVENT.empty()
    block = BLOCK_EVENT.validate(block.sort("ts", maintain_order=True))
    markers = head.filter(pl.col("event").is_in(MARKER_EVENTS)).select(
        pl.lit(rep, pl.Int32).alias("rep"), "ts", "pid", pl.col("body").str.strip_chars().alias("text"))
    known = set(BLOCK_EVENT_BODY) | set(MARKER_EVENTS)
    return FtraceTables(block_event=block, trace_marker=TRACE_MARKER.validate(markers), lines=len(lines),
                        unparsed_by_event=unparsed,
                        other_events={e: n for e, n in counts.items() if e not in known})


def _fraction_ns(frac: pl.Expr) -> pl.Expr:
    """The fractional seconds column (6 digits in text, 9 in some converters) as nanoseconds."""
    return frac.str.pad_end(9, "0").str.slice(0, 9).cast(pl.Int64)


def _u64_as_i64(col: str) -> pl.Expr:
    v = pl.col(col).cast(pl.UInt64, strict=False)
    return pl.when(v > _MAX_SECTOR).then(-1).otherwise(v.cast(pl.Int64, strict=False)).fill_null(-1)


def _block_columns(df: pl.DataFrame, rep: int) -> pl.DataFrame:
    def col_or(name: str, default, dtype):
        return pl.col(name).cast(dtype, strict=False) if name in df.columns else pl.lit(default, dtype)

    has_bytes = "bytes" in df.columns
    if "new_sector" in df.columns:  # block_split: the first part runs from sector to new_sector
        nr = _u64_as_i64("new_sector") - _u64_as_i64("sector")
    elif "nr_sector" in df.columns:
        nr = _u64_as_i64("nr_sector")
    else:
        nr = pl.lit(-1, pl.Int64)
    return df.select(
        pl.lit(rep, pl.Int32).alias("rep"), "ts", "cpu", "pid",
        (pl.col("comm_") if "comm_" in df.columns else pl.col("comm")).alias("comm"),
        "event",
        col_or("major", -1, pl.Int32).alias("dev_major"), col_or("minor", -1, pl.Int32).alias("dev_minor"),
        (_u64_as_i64("sector") if "sector" in df.columns else pl.lit(-1, pl.Int64)).alias("sector"),
        nr.alias("nr_sector"),
        # 3.x kernels print bytes 0 for file system requests: the sector count is the truth there.
        (pl.when(pl.col("bytes").cast(pl.Int64) > 0).then(pl.col("bytes").cast(pl.Int64))
         .otherwise(nr * 512) if has_bytes else pl.when(nr >= 0).then(nr * 512).otherwise(-1)).alias("size_bytes"),
        col_or("rwbs", "", pl.Utf8).alias("rwbs"),
        col_or("error", 0, pl.Int32).alias("error"),
    )
