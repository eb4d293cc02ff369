"""ftrace text (the `trace` / `trace_pipe` format, and `trace-cmd report`) -> typed event tables.

Line layout (kernel/trace/trace_output.c): comm right-aligned in 16 columns, `-pid`, optional `(tgid)`, `[cpu]`,
an optional irq-info flags column (5 characters on 6.x, 4 on older kernels), `secs.usecs:`, `event_name:`, body.
comm may contain `-`, spaces and `:`; the pid is the `-digits` that the `[cpu]` column follows.

Two paths produce the same rows:
  fast   the numba byte scanners of ftrace_scan.py read every line header and every block event body;
  regex  Polars' regex over the few lines the fast path rejects (odd layouts, non-ASCII, newer body variants), and
         the bodies of the other events (ext4, jbd2, fuse, syscalls: see ftrace_events.py). The regex path alone
         (parse_ftrace_text_regex) is the correctness oracle the tests compare the fast path with.
Block bodies differ by kernel: 6.11+ prints an ioprio triple (`be,0,4`) before `[comm]`, trace-cmd prints it as
`0x2,0,4`, and 3.x kernels print bytes 0 for file system requests (the sector count is the truth there).
Lines that match no pattern are counted and reported by event name, never dropped silently. A file whose last
line is cut (no newline, not parseable) keeps every complete line and says so in a warning.
"""

from __future__ import annotations

import functools
import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from mobiperf.collectors.parse.ftrace_events import is_known_event, known_event_expr, parse_other_events
from mobiperf.core.errors import ParseError
from mobiperf.core.schema import BLOCK_EVENT, TASK, TRACE_MARKER

HEADER = (r"^\s*(?:\S+:\s+)?(?P<comm>.*)-(?P<pid>\d+)\s+(?:\(\s*(?P<tgid>[-\d]+)\)\s+)?\[(?P<cpu>\d+)\]\s+"
          r"(?:\S{1,8}\s+)?"
          r"(?P<secs>\d+)\.(?P<usecs>\d+):\s+(?P<event>\w+)(?P<sep>:\s*| |)(?P<body>.*?)\r?$")
_DEV = r"^(?P<major>\d+),(?P<minor>\d+) (?P<rwbs>\S+) "
_IOPRIO = r"(?: \S+,\S*,\S+)?"
BLOCK_BODIES = {
    # bio-level events: dev rwbs sector + nr [comm]
    "bio": _DEV + r"(?P<sector>\d+) \+ (?P<nr_sector>\d+) \[(?P<comm_>.*)\]$",
    # request insert/issue/merge: dev rwbs bytes (cmd) sector + nr [ioprio] [comm]
    "rq": _DEV + r"(?P<bytes>\d+) \((?P<cmd>[^)]*)\) (?P<sector>\d+) \+ (?P<nr_sector>\d+)" + _IOPRIO
          + r" \[(?P<comm_>.*)\]$",
    # request completion/requeue: dev rwbs (cmd) sector + nr [ioprio] [error]
    "rq_done": _DEV + r"\((?P<cmd>[^)]*)\) (?P<sector>\d+) \+ (?P<nr_sector>\d+)" + _IOPRIO
               + r" \[(?P<error>-?\d+)\]$",
    "split": _DEV + r"(?P<sector>\d+) / (?P<new_sector>\d+) \[(?P<comm_>.*)\]$",
    "plug": r"^\[(?P<comm_>.*)\]$",
    "unplug": r"^\[(?P<comm_>.*)\] (?P<nr_rq>\d+)$",
}
BLOCK_EVENT_BODY = {
    "block_bio_queue": "bio", "block_getrq": "bio", "block_bio_backmerge": "bio", "block_bio_frontmerge": "bio",
    "block_sleeprq": "bio", "block_bio_bounce": "bio",
    "block_rq_insert": "rq", "block_rq_issue": "rq", "block_rq_merge": "rq",
    "block_rq_complete": "rq_done", "block_rq_requeue": "rq_done", "block_rq_error": "rq_done",
    "block_rq_abort": "rq_done",
    "block_split": "split", "block_plug": "plug", "block_unplug": "unplug",
}
# `0` is what 3.x kernels print for a trace_marker write (`0: B|655|name`: the print event's ip, 0 for markers)
MARKER_EVENTS = ("tracing_mark_write", "print", "0")
SPLIT_EVENTS = [e for e, k in BLOCK_EVENT_BODY.items() if k == "split"]
RQ_EVENTS = [e for e, k in BLOCK_EVENT_BODY.items() if k == "rq"]
# sector_t is unsigned; flush requests may carry (sector_t)-1. Above this it is "no sector".
_MAX_SECTOR = (1 << 63) - 1
_EVENT_IN_LINE = re.compile(r"\]\s+(?:\S{1,8}\s+)?\d+\.\d+:\s+(\w+)(?::| ->|\()")
_HEAD_COLUMNS = ("line", "ts", "cpu", "pid", "comm", "event", "body")


@dataclass
class FtraceTables:
    block_event: pl.DataFrame
    trace_marker: pl.DataFrame
    events: dict[str, pl.DataFrame] = field(default_factory=dict)  # ext4, jbd2, fuse, syscall tables
    lines: int = 0
    unparsed_by_event: dict[str, int] = field(default_factory=dict)
    other_events: dict[str, int] = field(default_factory=dict)
    truncated_at: int | None = None  # byte offset of a cut last line
    lost_events: int = 0  # from `CPU:N [LOST n EVENTS]` lines (trace_pipe) / trace-cmd's `EVENTS DROPPED`
    span: tuple[int, int] | None = None  # first and last time of every event line, read by a table or not

    @property
    def warnings(self) -> list[str]:
        out = [f"{n} {ev} lines did not match the known formats and were skipped"
               for ev, n in sorted(self.unparsed_by_event.items())]
        if self.truncated_at is not None:
            out.append(f"the trace ends in a cut line at byte {self.truncated_at} (truncated file); "
                       "every complete line before it was kept")
        return out


def read_trace_bytes(path: Path) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise ParseError(path, 0, f"cannot read: {e.strerror}") from None


# Below this size the regex path parses the file (about 0.1 s of CPU per MB): starting numba for the compiled
# scanners costs about a second of CPU and 90 MB, more than a small trace's whole parse.
COMPILED_MIN_BYTES = 4 << 20
# The compiled path reads the file in pieces of whole lines: a 1 GB trace is never in memory at once.
CHUNK_BYTES = 16 << 20


def parse_ftrace_text(path: Path, rep: int = 0, *, compiled: bool | None = None) -> FtraceTables:
    """The event tables of one ftrace text file: the compiled scanners (streamed in CHUNK_BYTES pieces, regex
    for the lines they reject) when the file is COMPILED_MIN_BYTES or larger or `compiled` asks for them, else
    the regex path alone. Both give the same tables (tests hold them equal)."""
    if compiled is None:
        try:
            compiled = os.stat(path).st_size >= COMPILED_MIN_BYTES
        except OSError as e:
            raise ParseError(path, 0, f"cannot read: {e.strerror}") from None
    if not compiled:
        return parse_ftrace_text_regex(path, rep)
    return _parse_compiled(path, rep)


@dataclass
class _Pieces:
    """What the chunks of one file gave, gathered: rows, counts, and what the end of the file decides."""
    block: list = field(default_factory=list)
    head: list = field(default_factory=list)   # markers and the events ftrace_events.py reads, per chunk
    counts: dict = field(default_factory=dict)
    unparsed: dict = field(default_factory=dict)
    lines: int = 0
    bad: int = 0
    first_bad: tuple | None = None  # (line number, text) of the first line without a header
    lost: int = 0
    truncated_at: int | None = None
    slow: bool = False
    span: tuple[int, int] | None = None
    tgids: list = field(default_factory=list)  # (pid, tgid) pairs of the lines with a tgid column


def _chunks(path: Path):
    """(bytes offset, whole lines) pieces of the file, each about CHUNK_BYTES; the last may end in a cut line."""
    try:
        f = open(path, "rb")
    except OSError as e:
        raise ParseError(path, 0, f"cannot read: {e.strerror}") from None
    with f:
        carry, offset = b"", 0
        while True:
            try:
                data = f.read(CHUNK_BYTES)
            except OSError as e:
                raise ParseError(path, offset, f"cannot read: {e.strerror}") from None
            if not data:
                if carry:
                    yield offset, carry
                return
            data = carry + data
            cut = data.rfind(b"\n") + 1
            if cut == 0:  # one line longer than a chunk: read on
                carry = data
                continue
            yield offset, data[:cut]
            offset += cut
            carry = data[cut:]


def _parse_compiled(path: Path, rep: int) -> FtraceTables:
    got = _Pieces()
    line_base = 0
    for offset, chunk in _chunks(path):
        line_base += _parse_chunk(chunk, offset, line_base, rep, got)
    if got.lines and got.bad == got.lines:
        raise ParseError(path, got.first_bad[0] + 1, f"not ftrace text: {got.first_bad[1][:80]!r}")
    block = pl.concat(got.block, how="vertical_relaxed") if got.block else \
        BLOCK_EVENT.empty().with_columns(line=pl.lit(None, pl.Int64))
    if got.slow:
        block = block.sort("line")  # file order: events of one microsecond keep their order
    block = BLOCK_EVENT.validate(block)
    head = pl.concat(got.head, how="vertical_relaxed").sort("line") if got.head else \
        pl.DataFrame(schema={"line": pl.Int64, "ts": pl.Int64, "cpu": pl.Int32, "pid": pl.Int32, "comm": pl.Utf8,
                             "event": pl.Utf8, "body": pl.Utf8})
    markers = head.filter(pl.col("event").is_in(MARKER_EVENTS)).select(
        pl.lit(rep, pl.Int32).alias("rep"), "ts", "pid", _marker_text(pl.col("body")).alias("text"))
    events, event_unparsed = parse_other_events(head.filter(known_event_expr()), rep)
    got.unparsed.update(event_unparsed)
    _add_tgid_tasks(events, pl.concat(got.tgids) if got.tgids else None, rep)
    known = set(BLOCK_EVENT_BODY) | set(MARKER_EVENTS)
    return FtraceTables(block_event=block, trace_marker=TRACE_MARKER.validate(markers), events=events,
                        lines=got.lines, lost_events=got.lost, unparsed_by_event=got.unparsed,
                        other_events={e: n for e, n in got.counts.items()
                                      if e not in known and not is_known_event(e)},
                        truncated_at=got.truncated_at, span=got.span)


_CATEGORICAL = [c for c, t in BLOCK_EVENT.columns.items() if t == pl.Categorical()]


def _parse_chunk(data: bytes, offset: int, line_base: int, rep: int, got: _Pieces) -> int:
    """Rows of one chunk of whole lines (line numbers from line_base) into got; returns its number of lines."""
    buf = np.frombuffer(data, np.uint8)
    newlines = _scanner()[0].find_newlines(buf)
    n_lines, names, block_cols, text_cols, (bad, bad_s, bad_e), n_all = _scan(data, buf, newlines)
    if TGID_COLUMN.search(data[:TGID_PROBE_BYTES]):  # atrace's `comm-pid (tgid) [cpu]`: who is whose thread
        pids, tgids = _scanner()[0].scan_tgids(buf, newlines)
        got.tgids.append(pl.DataFrame({"tid": pids, "pid": tgids}).unique())
    if len(bad) and not data.endswith(b"\n") and bad_e[-1] >= len(data.rstrip(b"\r")):
        got.truncated_at = offset + int(bad_s[-1])  # a cut last line: keep everything before it, say so
        bad, bad_s, bad_e, n_lines = bad[:-1], bad_s[:-1], bad_e[:-1], n_lines - 1
    got.lines += n_lines
    got.bad += len(bad)
    if len(bad) and got.first_bad is None:
        got.first_bad = (line_base + int(bad[0]), data[bad_s[0]:bad_e[0]].decode("utf-8", errors="replace"))
    name_series = pl.Series("event", names, dtype=pl.Utf8)
    for name, n in zip(names, (np.bincount(block_cols[4], minlength=len(names))
                               + np.bincount(text_cols[6], minlength=len(names))).tolist()):
        got.counts[name] = got.counts.get(name, 0) + n
    fast_block = _fast_block_frame(buf, block_cols, name_series, rep).with_columns(pl.col("line") + line_base)
    # Everything else goes through the text path: rejected block lines, other events, markers, bad headers.
    head = _head_frame(buf, text_cols, name_series).with_columns(pl.col("line") + line_base)
    if len(bad):
        lines = pl.Series("line", [data[s:e].decode("utf-8", errors="replace") for s, e in zip(bad_s, bad_e)],
                          dtype=pl.Utf8)
        lines, lost = _drop_notes(lines)
        got.lost += lost
        slow = _regex_head(lines.drop_nulls()).with_columns(
            line=pl.Series(bad + line_base, dtype=pl.Int64).filter(lines.is_not_null()))
        n_bad = int(slow["event"].is_null().sum())
        if n_bad:
            got.unparsed["(no header)"] = got.unparsed.get("(no header)", 0) + n_bad
        slow = slow.filter(pl.col("event").is_not_null())
        for ev, n in slow.group_by("event").len().iter_rows():
            got.counts[ev] = got.counts.get(ev, 0) + n
        head = pl.concat([head, slow.select(_HEAD_COLUMNS)], how="vertical_relaxed")
    for ts in (fast_block["ts"], head["ts"]):
        got.span = _widen(got.span, ts.min(), ts.max())
    slow_block, slow_unparsed = _regex_block(head, rep)
    for ev, n in slow_unparsed.items():
        got.unparsed[ev] = got.unparsed.get(ev, 0) + n
    # strings as categoricals chunk by chunk: a big file's block events never exist as one string per row
    got.block.append(fast_block.with_columns(pl.col(_CATEGORICAL).cast(pl.Categorical())))
    if len(slow_block):
        got.block.append(slow_block.with_columns(pl.col(_CATEGORICAL).cast(pl.Categorical())))
        got.slow = True
    # only what the end of the file still reads: markers and the events of ftrace_events.py (not every body)
    got.head.append(head.filter(pl.col("event").is_in(MARKER_EVENTS) | known_event_expr()))
    return n_all


def parse_ftrace_text_regex(path: Path, rep: int = 0) -> FtraceTables:
    """The same tables through Polars regex alone: slow, simple, the oracle of the fast path."""
    data = read_trace_bytes(path)
    lines = pl.Series("line", data.decode("utf-8", errors="replace").splitlines(), dtype=pl.Utf8)
    truncated_at = None
    lines = lines.filter(~lines.str.strip_chars_start().str.starts_with("#") & (lines.str.strip_chars() != ""))
    n_lines = len(lines)  # notes (LOST events, trace-cmd's preamble) count as lines, as on the fast path
    lines, lost = _drop_notes(lines)
    lines = lines.drop_nulls()
    head = _regex_head(lines).with_row_index("line").with_columns(pl.col("line").cast(pl.Int64))
    if len(head) and head["event"][-1] is None and not data.endswith(b"\n"):
        truncated_at = len(data) - len(data.rsplit(b"\n", 1)[-1])
        head = head.head(len(head) - 1)
        n_lines -= 1
    unparsed: dict[str, int] = {}
    n_bad = int(head["event"].is_null().sum())
    if n_bad == len(head) and n_bad:
        raise ParseError(path, 1, "not ftrace text")
    if n_bad:
        unparsed["(no header)"] = n_bad
    head = head.filter(pl.col("event").is_not_null())
    span = _span(head["ts"])
    counts = dict(head.group_by("event").len().iter_rows())
    block, block_unparsed = _regex_block(head, rep)
    unparsed.update(block_unparsed)
    markers = head.filter(pl.col("event").is_in(MARKER_EVENTS)).select(
        pl.lit(rep, pl.Int32).alias("rep"), "ts", "pid", _marker_text(pl.col("body")).alias("text"))
    events, event_unparsed = parse_other_events(head.filter(known_event_expr()), rep)
    unparsed.update(event_unparsed)
    _add_tgid_tasks(events, head.select(pl.col("pid").alias("tid"), pl.col("tgid").cast(pl.Int64, strict=False)
                                        .alias("pid")).drop_nulls().unique(), rep)
    known = set(BLOCK_EVENT_BODY) | set(MARKER_EVENTS)
    return FtraceTables(block_event=BLOCK_EVENT.validate(block.sort("line")),
                        trace_marker=TRACE_MARKER.validate(markers), events=events, lines=n_lines,
                        lost_events=lost,
                        unparsed_by_event=unparsed,
                        other_events={e: n for e, n in counts.items() if e not in known and not is_known_event(e)},
                        truncated_at=truncated_at, span=span)


# A line header with a numeric tgid column, looked for in a chunk's first bytes before its tgids are scanned.
TGID_COLUMN = re.compile(rb"-\d+\s+\(\s*\d+\)\s+\[\d+\]")
TGID_PROBE_BYTES = 1 << 16


def _add_tgid_tasks(events: dict[str, pl.DataFrame], pairs: pl.DataFrame | None, rep: int) -> None:
    """The threads the tgid column names (each line's pid and its process's), as task rows of source trace,
    beside those the task events gave (task_newtask, sched.py)."""
    if pairs is None or not len(pairs):
        return
    rows = TASK.validate(pairs.unique().sort("tid", "pid").with_columns(
        rep=pl.lit(rep, pl.Int32), thread=pl.lit(None, pl.Utf8), process=pl.lit(None, pl.Utf8),
        source=pl.lit("trace")))
    events["task"] = pl.concat([events["task"], rows]) if "task" in events else rows


def _span(ts) -> tuple[int, int] | None:
    lo, hi = ts.min(), ts.max()
    return None if lo is None else (int(lo), int(hi))


def _widen(span: tuple[int, int] | None, lo, hi) -> tuple[int, int] | None:
    if lo is None:
        return span
    return (int(lo), int(hi)) if span is None else (min(span[0], int(lo)), max(span[1], int(hi)))


# --- fast path helpers ---

# Below this a file is scanned in one piece: starting threads costs more than it saves.
PARALLEL_MIN_BYTES = 8 << 20


def _scan(data: bytes, buf: np.ndarray, newlines: np.ndarray | None = None):
    """scan_trace over a buffer of whole lines, in one line range per CPU (the scanner releases the GIL), joined.

    Returns (n_lines, event names, block columns, text columns, bad lines, lines in the buffer): scan_trace's
    tables with the event ids of every range mapped to one numbering, in file order (n_lines leaves blank and
    comment lines out, the last count does not)."""
    scan, known_hash, known_kind = _scanner()
    newlines = scan.find_newlines(buf) if newlines is None else newlines
    total = scan.line_count(buf, newlines)
    parts = min(os.cpu_count() or 1, max(1, len(buf) // PARALLEL_MIN_BYTES), total) or 1
    bounds = [total * i // parts for i in range(parts + 1)]
    ranges = list(zip(bounds[:-1], bounds[1:]))
    if parts == 1:
        results = [scan.scan_trace(buf, newlines, 0, total, known_hash, known_kind)]
    else:
        with ThreadPoolExecutor(parts) as pool:
            results = list(pool.map(lambda r: scan.scan_trace(buf, newlines, r[0], r[1], known_hash, known_kind),
                                    ranges))
    names: dict[str, int] = {}
    block_parts, text_parts, bad_parts = [], [], []
    for counted, (ev_first, _), block, text, bad in results:
        # The same event gets different ids in different ranges: map them through its name.
        to_global = np.array([names.setdefault(_event_name(data, int(s)), len(names)) for s in ev_first] or [0],
                             np.int32)
        block_parts.append((*block[:4], to_global[block[4]], *block[5:]))
        text_parts.append((*text[:6], to_global[text[6]], *text[7:]))
        bad_parts.append(bad)
    n_lines = sum(r[0] for r in results)
    block = tuple(np.concatenate(cols) for cols in zip(*(b[:11] for b in block_parts)))
    comm = _join_arrow_strings([(b[11], b[12]) for b in block_parts])
    rwbs = _join_arrow_strings([(b[13], b[14]) for b in block_parts])
    ascii_only = all(b[15] for b in block_parts)
    text = tuple(np.concatenate(cols) for cols in zip(*text_parts))
    bad = tuple(np.concatenate(cols) for cols in zip(*bad_parts))
    return n_lines, list(names), (*block, *comm, *rwbs, ascii_only), text, bad, total


def _join_arrow_strings(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Concatenated Arrow string buffers: each part's offsets shifted past the data before it."""
    if len(parts) == 1:
        return parts[0]
    shifts = np.cumsum([0] + [int(off[-1]) for off, _ in parts[:-1]])
    offsets = np.concatenate([parts[0][0]] + [off[1:] + shift for (off, _), shift in zip(parts[1:], shifts[1:])])
    return offsets, np.concatenate([dat for _, dat in parts])


@functools.cache
def _scanner():
    """The compiled scanners (imported on first use: numba starts only for files that take the compiled path)
    and the hashes and body kinds of the block events they parse."""
    from mobiperf.collectors.parse import ftrace_scan as scan

    known_hash = np.array([scan.fnv1a(e) for e in BLOCK_EVENT_BODY], np.uint64)
    known_kind = np.array([scan.BODY_KINDS.index(k) for k in BLOCK_EVENT_BODY.values()], np.int64)
    return scan, known_hash, known_kind


def _strings(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, name: str) -> pl.Series:
    """A string column from byte spans, built as Arrow buffers (no Python object per row)."""
    offsets, chars, ascii_only = _scanner()[0].gather_spans(buf, np.ascontiguousarray(starts, np.int64),
                                                   np.ascontiguousarray(ends, np.int64))
    return _arrow_strings(offsets, chars, ascii_only, name)


def _arrow_strings(offsets: np.ndarray, chars: np.ndarray, ascii_only: bool, name: str) -> pl.Series:
    import pyarrow as pa  # the compiled path's strings only: the regex path never needs it

    arr = pa.LargeStringArray.from_buffers(len(offsets) - 1, pa.py_buffer(offsets), pa.py_buffer(chars))
    if not ascii_only:
        try:
            arr.validate(full=True)
        except pa.ArrowInvalid:  # not UTF-8: decode each string with replacement characters
            raw = bytes(chars)
            return pl.Series(name, [raw[offsets[i]:offsets[i + 1]].decode("utf-8", errors="replace")
                                    for i in range(len(offsets) - 1)], dtype=pl.Utf8)
    return pl.Series(name, pl.from_arrow(arr), dtype=pl.Utf8)


def _event_name(data: bytes, start: int) -> str:
    """The event name of the line at start (its header parsed, so `name:` follows the timestamp's `: `)."""
    end = data.find(b"\n", start)
    line = data[start:end if end >= 0 else len(data)].decode("ascii", errors="replace")
    m = _EVENT_IN_LINE.search(line)
    return m.group(1) if m else "?"


def _fast_block_frame(buf, cols, names: pl.Series, rep: int) -> pl.DataFrame:
    (line, ts, cpu, pid, ev, major, minor, sector, nr, size, err, c_off, c_dat, r_off, r_dat, ascii_only) = cols
    return pl.DataFrame({
        "line": line, "ts": ts, "cpu": cpu, "pid": pid,
        "comm": _arrow_strings(c_off, c_dat, ascii_only, "comm"), "event": names.gather(ev), "dev_major": major,
        "dev_minor": minor, "sector": sector, "nr_sector": nr, "size_bytes": size,
        "rwbs": _arrow_strings(r_off, r_dat, ascii_only, "rwbs"), "error": err,
    }).with_columns(rep=pl.lit(rep, pl.Int32))  # a constant stays a scalar column: no 4 bytes a row


def _head_frame(buf, cols, names: pl.Series) -> pl.DataFrame:
    line, ts, cpu, pid, cs, ce, ev, bs, be = cols
    return pl.DataFrame({
        "line": line, "ts": ts, "cpu": cpu, "pid": pid, "comm": _strings(buf, cs, ce, "comm"),
        "event": names.gather(ev), "body": _strings(buf, bs, be, "body"),
    }).with_columns(pl.col("body").str.strip_chars_end())


# --- regex path ---

LOST_LINE = r"^CPU:\s*\d+ \[(?:LOST (\d+) EVENTS|(\d+) EVENTS DROPPED)\]"
PREAMBLE_LINE = r"^(?:cpus=\d+|version = \d+|CPU \d+ is empty)\s*$"


def _drop_notes(lines: pl.Series) -> tuple[pl.Series, int]:
    """Lines with the kernel's lost-event notes and trace-cmd's preamble replaced by null; the events lost."""
    lost = lines.str.extract_groups(LOST_LINE).struct.unnest()
    n_lost = int(sum(lost[c].cast(pl.Int64, strict=False).fill_null(0).sum() for c in lost.columns))
    note = lines.str.contains(LOST_LINE) | lines.str.contains(PREAMBLE_LINE)
    return pl.select(pl.when(~note).then(lines)).to_series().alias("line"), n_lost


def _regex_head(lines: pl.Series) -> pl.DataFrame:
    head = lines.str.extract_groups(HEADER).struct.unnest()
    return head.with_columns(
        ts=pl.col("secs").cast(pl.Int64, strict=False) * 1_000_000_000 + _fraction_ns(pl.col("usecs")),
        pid=pl.col("pid").cast(pl.Int32, strict=False), cpu=pl.col("cpu").cast(pl.Int32, strict=False),
        comm=pl.col("comm").str.strip_chars(),
        # `event: body`, or the kernel's syscall lines `sys_write(args)` and `sys_write -> ret`.
        event=pl.when(pl.col("secs").cast(pl.Int64, strict=False).is_not_null()
                      & (pl.col("usecs").str.len_chars() <= 9)
                      & (pl.col("sep").str.starts_with(":")
                         | ((pl.col("sep") == " ") & pl.col("body").str.starts_with("->"))
                         | ((pl.col("sep") == "") & pl.col("body").str.starts_with("(")))).then(pl.col("event")),
    )


def _regex_block(head: pl.DataFrame, rep: int) -> tuple[pl.DataFrame, dict[str, int]]:
    frames, unparsed = [], {}
    for event, kind in BLOCK_EVENT_BODY.items():
        rows = head.filter(pl.col("event") == event)
        if not len(rows):
            continue
        body = rows["body"].str.extract_groups(BLOCK_BODIES[kind]).struct.unnest()
        parsed = pl.concat([rows.select("line", "ts", "cpu", "pid", "comm", "event"), body], how="horizontal")
        ok = parsed.filter(pl.all_horizontal(pl.col(c).is_not_null() for c in body.columns[:1]))
        ok = ok.filter(_numbers_fit(ok))
        if len(ok) < len(parsed):
            unparsed[event] = len(parsed) - len(ok)
        frames.append(_block_columns(ok, rep))
    empty = BLOCK_EVENT.empty().with_columns(line=pl.lit(None, pl.Int64))
    return (pl.concat(frames, how="vertical") if frames else empty), unparsed


def _numbers_fit(df: pl.DataFrame) -> pl.Expr:
    """Rows whose numbers fit their kernel types (u64 sectors, 32-bit counts); others are malformed."""
    cond = pl.lit(True)
    for name, dtype in (("sector", pl.UInt64), ("new_sector", pl.UInt64), ("nr_sector", pl.UInt32),
                        ("bytes", pl.UInt32), ("major", pl.UInt32), ("minor", pl.UInt32), ("error", pl.Int32),
                        ("nr_rq", pl.Int32)):
        if name in df.columns:
            cond = cond & (pl.col(name).is_null() | pl.col(name).cast(dtype, strict=False).is_not_null())
    return cond


def _marker_text(body: pl.Expr) -> pl.Expr:
    """What was written to trace_marker: trace-cmd shows `print: tracing_mark_write: text` (or `ip: text`)."""
    return body.str.strip_chars().str.replace(r"^(?:tracing_mark_write|0x[0-9a-f]+|[\w.]+\+0x[0-9a-f/]+): ", "")


def _fraction_ns(frac: pl.Expr) -> pl.Expr:
    """The fractional seconds column (6 digits in text, 9 in some converters) as nanoseconds."""
    return frac.str.pad_end(9, "0").str.slice(0, 9).cast(pl.Int64, strict=False)


def _u64_as_i64(col: str) -> pl.Expr:
    v = pl.col(col).cast(pl.UInt64, strict=False)
    return pl.when(v > _MAX_SECTOR).then(-1).otherwise(v.cast(pl.Int64, strict=False)).fill_null(-1)


def _block_columns(df: pl.DataFrame, rep: int) -> pl.DataFrame:
    def col_or(name: str, default, dtype):
        return pl.col(name).cast(dtype, strict=False) if name in df.columns else pl.lit(default, dtype)

    has_bytes = "bytes" in df.columns
    if "new_sector" in df.columns:  # block_split: the first part runs from sector to new_sector
        nr = pl.when((_u64_as_i64("new_sector") >= 0) & (_u64_as_i64("sector") >= 0)).then(
            _u64_as_i64("new_sector") - _u64_as_i64("sector")).otherwise(-1)
    elif "nr_sector" in df.columns:
        nr = _u64_as_i64("nr_sector")
    else:
        nr = pl.lit(-1, pl.Int64)
    return df.select(
        "line", pl.lit(rep, pl.Int32).alias("rep"), "ts", "cpu", "pid",
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
