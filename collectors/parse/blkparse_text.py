"""blkparse text output -> block_event rows, the same rows parse_blktrace makes of the binary records.

The default format (blkparse_fmt.c, process_default) is a header `%D %2c %8s %5T.%9t %5p %2a %3d ` (device
`maj,min`, cpu, sequence, seconds.nanoseconds since the first record, pid, action, rwbs) and a body per action:
  Q D I B    `sector + n [comm]`, `[comm]` (no sectors), with -t `sector + n (elapsed) [comm]`;
             passthrough (BLK_TC_PC) `bytes (cdb) [comm]`
  M F G S    `sector + n [comm]` or `[comm]`
  C R        `sector + n [error]`, `sector [error]` (no sectors), with -t `... (elapsed) [error]`
  P          `[comm]`          U UT  `[comm] nr_requests`
  X          `sector / new_sector [comm]`
  A          `sector + n <- (maj,min) from_sector`   (counted, no row: the binary parser makes none either)
  m          message text                            (a trace_marker row)
The summary blkparse prints at the end (`CPU0 (8,0):`, `Total (8,0):`, `Throughput ...`) is not events.

Custom formats (`blkparse -f FMT`): the format string is turned into a pattern with a group per specifier
(%a action, %c cpu, %C comm, %d rwbs, %D device, %e error, %M/%m major/minor, %n sectors, %N bytes, %p pid,
%s sequence, %S sector, %T.%t seconds.nanoseconds, %u elapsed µs, %U unplug count, %z wall clock); widths and
`-` are allowed. It needs %a and the time (%T, with %t for sub-seconds); what it lacks is unknown in the rows
(no device: 0,0 with a warning; no sectors: the event has none). Per-action formats (-F) are not read.

Differences from the binary records, all from what the text does not print: times are relative to the first
record (the same offset for every row, so every latency is the same); a request without sectors prints no
sector (-1 here; pairing keys such requests by device alone either way, except completions, which print it);
comm of C/R rows (which print the error instead) is the comm the same pid has on other lines; sizes are sectors *
512 (blktrace stores bytes; the same for every block request); a name blkparse could not find prints `(null)`,
read as "".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from mobiperf.core.errors import ParseError, UsageError
from mobiperf.core.schema import BLOCK_EVENT, TRACE_MARKER

HEADER = (r"^\s*(?P<major>\d+),(?P<minor>\d+)\s+(?P<cpu>\d+)\s+(?P<seq>\d+)\s+(?P<secs>\d+)\.(?P<frac>\d+)\s+"
          r"(?P<pid>\d+)\s+(?P<act>[A-Za-z]{1,2})\s+(?P<rwbs>[A-Z]+)\s(?P<rest>.*?)\r?$")
BODY = (r"^\s*(?:(?P<lead>\d+)(?: \+ (?P<nr>\d+))?(?: / (?P<new>\d+))? )?(?:\(\s*(?P<paren>[^)]*)\) )?"
        r"\[(?P<bracket>.*)\](?: (?P<nr_rq>\d+))?\s*$")
SUMMARY_START = r"^(?:CPU\d+ \(|Total \(|Throughput \(|Events \(|Skips:|No Stats)"
ACTION_EVENT = {"Q": "block_bio_queue", "M": "block_bio_backmerge", "F": "block_bio_frontmerge",
                "G": "block_getrq", "S": "block_sleeprq", "R": "block_rq_requeue", "D": "block_rq_issue",
                "C": "block_rq_complete", "P": "block_plug", "U": "block_unplug", "T": "block_unplug",
                "I": "block_rq_insert", "X": "block_split"}
NO_ROW = {"A": "remap", "B": "bounce"}
DEFAULT_FORMAT = "%D %2c %8s %5T.%9t %5p %2a %3d "
SPEC_PATTERN = {
    "a": r"(?P<act>[A-Za-z]{1,2})", "c": r"(?P<cpu>\d+)", "C": r"(?P<comm>.*?)", "d": r"(?P<rwbs>[A-Z]+)",
    "D": r"(?P<major>\d+),\s*(?P<minor>\d+)", "e": r"(?P<error>-?\d+)", "M": r"(?P<major>\d+)",
    "m": r"(?P<minor>\d+)", "n": r"(?P<nr>\d+)", "N": r"(?P<bytes>\d+)", "p": r"(?P<pid>\d+)",
    "s": r"(?P<seq>-?\d+)", "S": r"(?P<lead>\d+)", "t": r"(?P<frac>\d+)", "T": r"(?P<secs>\d+)",
    "u": r"(?P<elapsed>\d+)", "U": r"(?P<nr_rq>\d+)", "z": r"(?P<wall>\d\d:\d\d:\d\d\.\d+)",
    "P": r"(?P<pdu>[0-9a-f .]*?)", "g": r"\S+",
}


@dataclass
class BlkparseTables:
    block_event: pl.DataFrame
    trace_marker: pl.DataFrame
    lines: int = 0
    events: int = 0
    unparsed: int = 0
    skipped_actions: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def summary(self) -> dict:
        return {"lines": self.lines, "events": self.events, "unparsed": self.unparsed,
                "skipped": self.skipped_actions}


def format_pattern(fmt: str) -> str:
    """The pattern of the lines blkparse -f FMT writes (one line per event: the format's `\\n` ends it)."""
    fmt = fmt.replace("\\n", "\n").split("\n", 1)[0]
    out, i, seen = ["^\\s*"], 0, set()
    while i < len(fmt):
        c = fmt[i]
        if c == "%":
            m = re.match(r"%(-?)(\d*)(.)", fmt[i:])
            if not m:
                raise UsageError(f"blkparse format {fmt!r}: a % without a specifier at the end")
            minus, width, spec = m.groups()
            i += m.end()
            if spec == "%":
                out.append("%")
                continue
            if spec not in SPEC_PATTERN:
                raise UsageError(f"blkparse format {fmt!r}: unknown specifier %{spec}")
            pat = SPEC_PATTERN[spec]
            for name in re.findall(r"\?P<(\w+)>", pat):
                if name in seen:  # a field printed twice: only the first is captured
                    pat = pat.replace(f"?P<{name}>", "?:")
                seen.add(name)
            out.append(("\\s*" if width and not minus else "") + pat + ("\\s*" if minus else ""))
        elif c in " \t":
            while i < len(fmt) and fmt[i] in " \t":
                i += 1
            out.append("\\s+")
        elif c == "\\" and i + 1 < len(fmt):
            out.append(re.escape({"t": "\t", "r": "\r", "b": "\b"}.get(fmt[i + 1], fmt[i + 1])))
            i += 2
        else:
            out.append(re.escape(c))
            i += 1
    missing = [s for s, name in (("%a", "act"), ("%T", "secs")) if name not in seen]
    if missing:
        raise UsageError(f"blkparse format {fmt!r} lacks {' and '.join(missing)}: the action and the time are "
                         "needed to pair block events")
    return "".join(out) + "\\s*$"


def parse_blkparse_text(path: Path, rep: int = 0, fmt: str | None = None) -> BlkparseTables:
    """block_event and trace_marker rows of one blkparse text file (default format, or the -f format fmt)."""
    try:
        text = Path(path).read_bytes().decode("utf-8", errors="replace")
    except OSError as e:
        raise ParseError(path, 0, f"cannot read: {e.strerror}") from None
    lines = pl.Series("line", text.split("\n"), dtype=pl.Utf8)
    df = lines.to_frame().with_row_index("line_no").filter(pl.col("line").str.strip_chars() != "")
    # everything from the first summary line on is blkparse's statistics, not events
    summary_at = df.filter(pl.col("line").str.contains(SUMMARY_START))["line_no"]
    if len(summary_at):
        df = df.filter(pl.col("line_no") < summary_at[0])
    custom = fmt is not None and fmt.replace("\\n", "") != DEFAULT_FORMAT
    head = df.with_columns(pl.col("line").str.extract_groups(format_pattern(fmt) if custom else HEADER)
                           .alias("h")).unnest("h")
    parsed = head.filter(pl.col("act").is_not_null())
    n_lines, unparsed = len(df), len(df) - len(parsed)
    if n_lines and not len(parsed):
        raise ParseError(path, int(df["line_no"][0]) + 1, f"not blkparse output: {df['line'][0][:80]!r}")
    act = pl.col("act").str.slice(0, 1)
    warnings = []
    if custom and "major" not in parsed.columns:
        warnings.append(f"{path}: the blkparse format has no device (%D or %M,%m): events are put on device 0,0")
    if custom:
        parsed = _custom_columns(parsed)
    else:
        body = parsed["rest"].str.extract_groups(BODY).struct.unnest()
        parsed = pl.concat([parsed.drop("rest"), body, parsed.select("rest")], how="horizontal")
    skipped = {f"{NO_ROW[a]} ({a})": n for a, n in parsed.group_by(act.alias("a")).len().iter_rows()
               if a in NO_ROW}
    markers = parsed.filter(pl.col("act") == "m")
    events = parsed.filter(act.is_in(list(ACTION_EVENT)) & (pl.col("act") != "m"))
    if not custom:  # a default-format line of a sector event must have its body
        bad = events.filter(pl.col("bracket").is_null())
        unparsed += len(bad)
        events = events.filter(pl.col("bracket").is_not_null())
    block = _block_rows(events, rep, custom)
    marker_rows = markers.select(pl.lit(rep, pl.Int32).alias("rep"), _ts().alias("ts"),
                                 pl.col("pid").cast(pl.Int32, strict=False).alias("pid"),
                                 pl.col("rest" if "rest" in markers.columns else "comm").str.strip_chars()
                                 .alias("text"))
    if unparsed:
        warnings.append(f"{path}: {unparsed} lines are not blkparse events and were skipped")
    return BlkparseTables(block_event=BLOCK_EVENT.validate(block), trace_marker=TRACE_MARKER.validate(marker_rows),
                          lines=n_lines, events=len(block), unparsed=unparsed, skipped_actions=skipped,
                          warnings=warnings)


def _custom_columns(df: pl.DataFrame) -> pl.DataFrame:
    """The columns a custom format left out, as unknown (null), named as the default format's are."""
    want = ("major", "minor", "cpu", "pid", "rwbs", "lead", "nr", "new", "paren", "bracket", "nr_rq", "comm",
            "error", "bytes", "frac")
    return df.with_columns([pl.lit(None, pl.Utf8).alias(c) for c in want if c not in df.columns])


def _ts() -> pl.Expr:
    frac = pl.col("frac").fill_null("0").str.pad_end(9, "0").str.slice(0, 9)
    return pl.col("secs").cast(pl.Int64) * 1_000_000_000 + frac.cast(pl.Int64)


def _block_rows(ev: pl.DataFrame, rep: int, custom: bool) -> pl.DataFrame:
    act = pl.col("act").str.slice(0, 1)
    is_done = act.is_in(["C", "R"])
    num = lambda c: pl.col(c).cast(pl.Int64, strict=False)  # noqa: E731
    if custom:
        comm = pl.col("comm").fill_null("")
        error = num("error").fill_null(0)
        nr = pl.when(num("nr").is_not_null()).then(num("nr")).otherwise(num("bytes") // 512)
        size = pl.when(num("bytes").is_not_null()).then(num("bytes")).otherwise(nr * 512)
        sector = num("lead")
    else:
        # [comm] on most lines, [error] on C/R: their comm is the pid's name from its other lines
        comm = pl.when(is_done).then(pl.lit(None, pl.Utf8)).otherwise(pl.col("bracket"))
        error = pl.when(is_done).then(num("bracket")).otherwise(0)
        passthrough = act.is_in(["D", "I", "Q", "B"]) & pl.col("nr").is_null() & pl.col("paren").is_not_null() \
            & pl.col("lead").is_not_null()
        nr = pl.when(passthrough).then(0).otherwise(num("nr"))
        size = pl.when(passthrough).then(num("lead")).otherwise(nr * 512)
        sector = pl.when(passthrough).then(None).otherwise(num("lead"))
    split = act == "X"
    no_sectors = act.is_in(["P", "U", "T"])
    rows = ev.select(
        pl.lit(rep, pl.Int32).alias("rep"), _ts().alias("ts"),
        num("cpu").cast(pl.Int32).fill_null(0).alias("cpu"), num("pid").cast(pl.Int32).fill_null(0).alias("pid"),
        comm.alias("comm"), act.replace_strict(ACTION_EVENT, return_dtype=pl.Utf8).alias("event"),
        num("major").fill_null(0).cast(pl.Int32).alias("dev_major"),
        num("minor").fill_null(0).cast(pl.Int32).alias("dev_minor"),
        pl.when(no_sectors).then(-1).otherwise(sector.fill_null(-1)).alias("sector"),
        pl.when(no_sectors).then(-1).when(split).then(num("new") - num("lead")).otherwise(nr.fill_null(0))
        .alias("nr_sector"),
        pl.when(no_sectors).then(-1).when(split).then((num("new") - num("lead")) * 512)
        .otherwise(size.fill_null(0)).alias("size_bytes"),
        pl.col("rwbs").fill_null(""), error.cast(pl.Int32).alias("error"),
    )
    # a pid's comm from the lines that print it; blkparse prints `(null)` for a pid it has no name for
    known = rows.filter(pl.col("comm").is_not_null()).with_columns(
        pl.when(pl.col("comm") == "(null)").then(pl.lit("")).otherwise("comm").alias("comm"))
    names = known.group_by("pid").agg(pl.col("comm").last().alias("_name"))
    rows = rows.join(names, on="pid", how="left", maintain_order="left").with_columns(
        comm=pl.coalesce(pl.when(pl.col("comm") != "(null)").then("comm"), "_name", pl.lit(""))).drop("_name")
    return rows
