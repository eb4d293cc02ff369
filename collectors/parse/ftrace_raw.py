"""Binary ftrace: the per-CPU `trace_pipe_raw` pages -> the same tables as the text parser, exact ns timestamps.

Layout (specs/trace-formats.md section 2.4), read from the files saved with the trace:
  formats/header_page    the page header: u64 timestamp, local_t commit (data length in the low 27 bits, bit 31 =
                         events were lost before this page), data at offset 16 (page = 16 + its size field)
  events in a page       u32 header `type_len:5 | time_delta:27`; type_len 1..28: payload of 4*type_len bytes;
                         0: payload length - 4 in the next u32; 29 padding (time_delta 0: the page ends);
                         30 time extend (delta += array[0] << 27); 31 absolute timestamp
  payload                common header (u16 type @0, u8 flags, u8 preempt count, s32 pid @4), then the fields at
                         the offsets of formats/<system>/<event>/format, whose `ID:` is the type
The page walk is compiled (numba). Records are then grouped by event type, and each field of a type is read for
all its records at once (event_fields.py). Every event type that has a saved format is decoded:
  block events       block_event, the columns straight from the fields (rwbs and comm are char arrays; dev is the
                     kernel dev_t, major = dev >> 20), comm from the event where it has one, else saved_cmdlines
  ftrace print       trace_marker
  ext4, f2fs, jbd2, writeback, fuse, syscalls
                     the kernel's text body is rendered from the fields with the event's own print fmt
                     (print_fmt.py), and the rows go through the text path's parse_other_events(): fsync_event,
                     jbd2_run_stats, jbd2_commit, fuse_event, fs_event, syscall_io, identical to the text's tables
  every other event  counted in other_events, as the text parser does (raw field columns on request: keep_fields)
Where an argument of a print fmt cannot be reproduced (see print_fmt.py: %pS pointers, jiffies without the
kernel's HZ, enum flags the format file leaves unresolved) it is printed as its raw value in hex, the event is
named in `unrendered` with the reason, and its raw field columns are kept in `fields[event]` (the rest of the
body, dev and ino included, is the kernel's text). jbd2_run_stats holds jiffies in binary: without
ftrace_raw/kernel_hz (CONFIG_HZ) or hz= its *_ms columns cannot be had (its rows are then unparsed) and the raw
`wait`, `running`, ... columns (jiffies) are in fields["jbd2_run_stats"]. A format without a print fmt gives the
raw `field=value` pairs (as `trace-cmd report -R` prints them).
Differences from the text that are not errors: ts is exact ns (the text has µs); comm of events without a comm
field comes from saved_cmdlines read after the trace (pid 0 is <idle>, a pid it lacks is <...>), as the kernel's
own text output does when it is read.
Lost events: pages flagged "missed events" are counted, with the number the kernel stored after their data (the
per-CPU stats also say how many). Event types without a saved format are counted in `undecoded` by type id.
Byte order: little-endian (every Android and x86 target).
"""

from __future__ import annotations

import mmap
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl
from numba import njit

from mobiperf.collectors.parse.event_fields import decode_field, decode_int_fields, string_spans, strings
from mobiperf.collectors.parse.event_format import EventFormat, read_formats
from mobiperf.collectors.parse.ftrace_events import is_known_event, parse_other_events
from mobiperf.collectors.parse.ftrace_text import BLOCK_EVENT_BODY, MARKER_EVENTS
from mobiperf.collectors.parse.print_fmt import IntCol, Unrenderable, compile_print_fmt, render
from mobiperf.core.errors import ParseError
from mobiperf.core.schema import BLOCK_EVENT, TRACE_MARKER


@dataclass
class RawTables:
    block_event: pl.DataFrame
    trace_marker: pl.DataFrame
    events: dict[str, pl.DataFrame] = field(default_factory=dict)  # as FtraceTables.events (ext4, jbd2, ...)
    events_total: int = 0
    pages: int = 0
    pages_with_lost_events: int = 0
    lost_events: int = 0  # the counts the kernel stored after the data of such pages (at least one per page)
    undecoded: dict[str, int] = field(default_factory=dict)  # records whose type has no saved format
    other_events: dict[str, int] = field(default_factory=dict)  # decoded, but no table reads them (as the text)
    unrendered: dict[str, str] = field(default_factory=dict)  # event -> why its print fmt was not reproduced
    unparsed_by_event: dict[str, int] = field(default_factory=dict)  # rendered bodies the table parsers rejected
    fields: dict[str, pl.DataFrame] = field(default_factory=dict)  # event -> its raw field columns
    warnings: list[str] = field(default_factory=list)
    span: tuple[int, int] | None = None  # first and last record time (every event, read by a table or not)


@njit(cache=True, nogil=True)
def _read_u32(buf, p):
    return np.uint32(buf[p]) | (np.uint32(buf[p + 1]) << 8) | (np.uint32(buf[p + 2]) << 16) | \
        (np.uint32(buf[p + 3]) << 24)


@njit(cache=True, nogil=True)
def walk_pages(buf, data_off, data_size):
    """Every data event of every page: (ts, payload offset, payload length, type id); pages; pages flagged
    "missed events"; events lost (the kernel stores the count after the page's data when it fits, flag bit 30;
    a flagged page without it counts one)."""
    page_size = data_off + data_size
    n_pages = len(buf) // page_size
    cap = n_pages * (data_size // 8) + 1
    ts_out = np.empty(cap, np.int64)
    off_out = np.empty(cap, np.int64)
    len_out = np.empty(cap, np.int64)
    type_out = np.empty(cap, np.int32)
    k = 0
    lost_pages = 0
    lost_events = 0
    for pg in range(n_pages):
        base = pg * page_size
        ts = np.int64(0)
        for j in range(8):
            ts |= np.int64(buf[base + j]) << np.int64(8 * j)
        commit = _read_u32(buf, base + 8)
        length = np.int64(commit & np.uint32((1 << 27) - 1))
        if length > data_size:
            length = data_size
        if commit & np.uint32(1 << 31):
            lost_pages += 1
            missed = np.int64(1)
            if commit & np.uint32(1 << 30) and length + 8 <= data_size:
                q = base + data_off + length
                missed = np.int64(_read_u32(buf, q)) | (np.int64(_read_u32(buf, q + 4)) << np.int64(32))
            lost_events += max(missed, np.int64(1))
        p = base + data_off
        end = p + length
        while p + 4 <= end:
            h = _read_u32(buf, p)
            type_len = np.int64(h & np.uint32(31))
            delta = np.int64(h >> np.uint32(5))
            if type_len == 29:  # padding
                if delta == 0 or p + 8 > end:
                    break
                p += 4 + np.int64(_read_u32(buf, p + 4))  # a discarded event: its delta is not counted
                continue
            if type_len == 30:  # time extend
                if p + 8 > end:
                    break
                ts += (np.int64(_read_u32(buf, p + 4)) << np.int64(27)) + delta
                p += 8
                continue
            if type_len == 31:  # absolute time stamp
                if p + 8 > end:
                    break
                ts = (np.int64(_read_u32(buf, p + 4)) << np.int64(27)) | delta
                p += 8
                continue
            ts += delta
            if type_len == 0:
                if p + 8 > end:
                    break
                plen = np.int64(_read_u32(buf, p + 4)) - 4
                start = p + 8
            else:
                plen = type_len * 4
                start = p + 4
            if plen < 8 or start + plen > end:
                break  # a damaged page: keep what was read, drop the rest of it
            ts_out[k] = ts
            off_out[k] = start
            len_out[k] = plen
            type_out[k] = np.int32(buf[start]) | (np.int32(buf[start + 1]) << 8)
            k += 1
            p = start + ((plen + 3) // 4) * 4
    return ts_out[:k], off_out[:k], len_out[:k], type_out[:k], n_pages, lost_pages, lost_events


def saved_cmdlines(path: Path) -> dict[int, str]:
    comm = {}
    if path.exists():
        for line in path.read_text(errors="replace").splitlines():
            pid, _, name = line.partition(" ")
            if pid.isdigit():
                comm[int(pid)] = name
    return comm


def read_kernel_hz(path: Path) -> int | None:
    try:
        hz = int(path.read_text().strip())
    except (OSError, ValueError):
        return None
    return hz if hz > 0 else None


class CommTable:
    """The kernel's trace_find_cmdline() over a column of pids: pid 0 is <idle>, a pid the saved cmdlines lack
    is <...>. One sorted pid array, looked up with searchsorted (no dict per record)."""

    def __init__(self, cmdlines: dict[int, str]):
        table = {p: c.strip() for p, c in cmdlines.items() if p}
        self.pids = np.array(sorted(table), np.int64)
        self.names = pl.Series([table[p] for p in self.pids.tolist()] + ["<idle>", "<...>"], dtype=pl.Utf8)

    def lookup(self, pids: np.ndarray) -> pl.Series:
        pids = pids.astype(np.int64)
        n = len(self.pids)
        at = np.minimum(np.searchsorted(self.pids, pids), max(n - 1, 0))
        found = (self.pids[at] == pids) if n else np.zeros(len(pids), bool)
        idx = np.where(found, at, np.where(pids == 0, n, n + 1))
        return self.names.gather(pl.Series(idx))


@dataclass
class _Group:
    """The records of one event type: payload offsets/lengths, ts, cpu and their rank in the merged trace."""
    fmt: EventFormat
    offs: np.ndarray
    lens: np.ndarray
    ts: np.ndarray
    cpu: np.ndarray
    order: np.ndarray

    def __len__(self) -> int:
        return len(self.offs)


class _Columns:
    """Field columns of one group, decoded on first use (a print fmt reads only what it prints)."""

    def __init__(self, buf: np.ndarray, group: _Group):
        self.buf, self.g, self.cache = buf, group, {}

    def field(self, name: str):
        """A field by name, or an element `name[k]` of an integer array."""
        f = self.g.fmt.fields.get(name)
        if f is None and name.endswith("]") and "[" in name:
            base, _, index = name[:-1].partition("[")
            array = self.g.fmt.fields.get(base)
            f = array.element(int(index)) if array is not None and index.isdigit() else None
        return f

    def get(self, name: str):
        if name not in self.cache and not self.cache:  # first use: every int field at once (one pass)
            self.cache.update(decode_int_fields(self.buf, self.g.offs, self.g.lens, list(self.g.fmt.fields.values())))
        if name not in self.cache:
            f = self.field(name)
            if f is None:
                raise Unrenderable(f"no field {name}")
            if f.kind not in ("int", "string"):
                raise Unrenderable(f"field {name} is an array")
            self.cache[name] = decode_field(self.buf, self.g.offs, self.g.lens, f)
        return self.cache[name]

    def spans(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """[start, end) in the page buffer of a string field of every record."""
        f = self.g.fmt.fields[name]
        return string_spans(self.buf, self.g.offs, self.g.lens, f.offset, f.size, f.loc, f.relative)

    def int(self, name: str, default: int = -1) -> np.ndarray:
        f = self.g.fmt.fields.get(name)
        if f is None or f.kind != "int":
            return np.full(len(self.g), default, np.int64)
        return self.get(name)

    def field_value(self, name: str):
        """The print fmt's view of a field: an IntCol with the field's C width, or a string column."""
        value = self.get(name)
        if isinstance(value, pl.Series):
            return value
        f = self.field(name)
        return IntCol(value, 8 * f.size, not f.signed)

    def frame(self) -> dict[str, np.ndarray | pl.Series]:
        """Every field but the common header: ints, strings, and integer arrays element by element (`args[0]`)."""
        out = {}
        for name, f in self.g.fmt.fields.items():
            if name.startswith("common_"):
                continue
            if f.kind in ("int", "string"):
                out[name] = self.get(name)
            elif f.kind == "array" and f.element(0) is not None:
                out.update({f"{name}[{k}]": self.get(f"{name}[{k}]") for k in range(f.count)})
        return out


def _read_pages(files: list[Path], page_size: int) -> tuple[np.ndarray, list[tuple[int, int, int]], list[str]]:
    """All page files in one buffer (no copy per file): [(cpu, start, length)], warnings for cut pages."""
    sizes = [f.stat().st_size for f in files]
    # An anonymous mapping, not np.empty: numpy asks for huge pages on big arrays, and where the kernel compacts
    # memory for them on demand (THP defrag "madvise") filling the buffer took 2-5x longer here.
    buf = np.frombuffer(mmap.mmap(-1, sum(sizes)), np.uint8) if sum(sizes) else np.zeros(0, np.uint8)
    spans, warnings, pos = [], [], 0
    for f, size in zip(files, sizes):
        got = 0
        with open(f, "rb", buffering=0) as fh:  # straight into the buffer: one read() per chunk, no copies
            view = memoryview(buf[pos:pos + size])
            while got < size:
                n = fh.readinto(view[got:])
                if not n:
                    break
                got += n
        if size % page_size:
            warnings.append(f"{f}: {size % page_size} bytes of a cut page at byte offset {size - size % page_size} "
                            "(truncated file); every complete page was kept")
        spans.append((int(f.name[3:]), pos, got))
        pos += size
    return buf, spans, warnings


def parse_ftrace_raw(raw_dir: Path, formats: Path, rep: int = 0, hz: int | None = None,
                     keep_fields: bool = False) -> RawTables:
    """Every `cpuN` page file in raw_dir -> tables; formats is the formats/ directory saved with them.

    hz: the kernel's CONFIG_HZ (else read from raw_dir/kernel_hz) for jiffies fields. keep_fields: also return
    the raw field columns of every event that no table reads.
    """
    by_id, layout = read_formats(formats)
    if not by_id:
        raise ParseError(formats, 0, "no event format files (formats/<system>/<event>/format) to decode pages")
    hz = hz or read_kernel_hz(raw_dir / "kernel_hz")
    cmdlines = CommTable(saved_cmdlines(raw_dir / "saved_cmdlines"))
    files = sorted((p for p in raw_dir.iterdir() if re.fullmatch(r"cpu\d+", p.name)), key=lambda p: int(p.name[3:]))
    buf, spans, warnings = _read_pages(files, layout.page_size)
    rec = _Records.walk(buf, spans, layout)
    out = RawTables(block_event=BLOCK_EVENT.empty(), trace_marker=TRACE_MARKER.empty(), events_total=len(rec.ts),
                    pages=rec.pages, pages_with_lost_events=rec.lost, lost_events=rec.lost_events,
                    warnings=warnings, span=(int(rec.ts.min()), int(rec.ts.max())) if len(rec.ts) else None)
    # long_bits: local_t is a long, 4 bytes on 32-bit kernels
    decoding = _Decoding(buf, out, rep, hz, 8 * layout.commit_size, cmdlines, keep_fields)
    for type_id, group in rec.by_type():
        fmt = by_id.get(type_id)
        if fmt is None:
            out.undecoded[f"type {type_id}"] = out.undecoded.get(f"type {type_id}", 0) + len(group)
            continue
        decoding.add(_Group(fmt, rec.offs[group], rec.lens[group], rec.ts[group], rec.cpus[group],
                            rec.rank[group]))
    decoding.finish()
    if rec.lost:
        out.warnings.append(f"{rec.lost} trace pages say events were lost before them (ring buffer overrun): "
                            f"{rec.lost_events} events by the kernel's counts")
    out.warnings += [f"{n} {ev} records did not match the known formats and were skipped"
                     for ev, n in sorted(out.unparsed_by_event.items())]
    return out


@dataclass
class _Records:
    """Every record of the per-CPU page files: time, payload offset and length, event type and CPU, and its rank
    in the kernel's merged text order (by time, a tie to the lower CPU: the CPU files are concatenated in order)."""

    ts: np.ndarray
    offs: np.ndarray
    lens: np.ndarray
    types: np.ndarray
    cpus: np.ndarray
    pages: int
    lost: int          # pages that say events were lost before them
    lost_events: int   # the events lost, by the kernel's counts
    merged: np.ndarray = None
    rank: np.ndarray = None

    @classmethod
    def walk(cls, buf: np.ndarray, spans, layout) -> "_Records":
        cols, pages, lost, lost_events = [], 0, 0, 0
        for cpu, start, length in spans:
            ts, offs, lens, types, n_pages, n_lost, n_missed = walk_pages(buf[start:start + length],
                                                                          layout.data_offset, layout.data_size)
            lost_events += n_missed
            pages += n_pages
            lost += n_lost
            cols.append((ts, offs + start, lens, types, np.full(len(ts), cpu, np.int32)))
        if cols:
            ts, offs, lens, types, cpus = (np.concatenate([c[i] for c in cols]) for i in range(5))
        else:
            ts, offs, lens, cpus = (np.empty(0, np.int64),) * 3 + (np.empty(0, np.int32),)
            types = np.empty(0, np.int32)
        rec = cls(ts, offs, lens, types, cpus, pages, lost, lost_events)
        rec.merged = np.argsort(ts, kind="stable")
        rec.rank = np.empty(len(ts), np.int64)
        rec.rank[rec.merged] = np.arange(len(ts))
        return rec

    def by_type(self):
        """(type id, the indices of its records in merged order), type by type."""
        by_type = self.merged[np.argsort(self.types[self.merged], kind="stable")]
        bounds = np.flatnonzero(np.diff(self.types[by_type])) + 1
        for idx in np.split(by_type, bounds) if len(by_type) else []:
            yield int(self.types[idx[0]]), idx


@dataclass
class _Decoding:
    """The tables of one page parse as its groups are decoded: block events and trace markers straight into their
    tables, every other known event as a text head for parse_other_events, the rest counted (and kept as field
    columns when asked)."""

    buf: np.ndarray
    out: RawTables
    rep: int
    hz: int | None
    long_bits: int
    cmdlines: CommTable
    keep_fields: bool
    blocks: list = field(default_factory=list)
    markers: list = field(default_factory=list)
    heads: list = field(default_factory=list)

    def add(self, g: _Group) -> None:
        fmt, out, rep = g.fmt, self.out, self.rep
        c = _Columns(self.buf, g)
        if fmt.name in BLOCK_EVENT_BODY or (fmt.name in MARKER_EVENTS and "buf" in fmt.fields):
            try:
                if fmt.name in BLOCK_EVENT_BODY:
                    self.blocks.append((fmt.name, _block_rows(c)))
                else:
                    self.markers.append(pl.DataFrame({"order": g.order, "rep": np.full(len(g), rep, np.int32),
                                                      "ts": g.ts, "pid": c.int("common_pid").astype(np.int32),
                                                      "text": c.get("buf").str.strip_chars()}))
            except Unrenderable as e:  # a format file whose fields are not the kernel's (edited, damaged)
                out.unrendered[fmt.name] = f"its format file does not declare the fields it needs: {e}"
                out.unparsed_by_event[fmt.name] = out.unparsed_by_event.get(fmt.name, 0) + len(g)
                out.fields[fmt.name] = _field_frame(c, rep)
        elif is_known_event(fmt.name):
            body = _body(c, self.hz, out, self.long_bits)
            self.heads.append(pl.DataFrame({"order": g.order, "ts": g.ts, "cpu": g.cpu,
                                            "pid": c.int("common_pid").astype(np.int32),
                                            "comm": self.cmdlines.lookup(c.int("common_pid")),
                                            "event": pl.Series([fmt.name] * len(g), dtype=pl.Utf8), "body": body}))
            if fmt.name in out.unrendered:
                out.fields[fmt.name] = _field_frame(c, rep)
        else:
            out.other_events[fmt.name] = out.other_events.get(fmt.name, 0) + len(g)
            if self.keep_fields:
                out.fields[fmt.name] = _field_frame(c, rep)

    def finish(self) -> None:
        """The tables, each in the merged trace order."""
        out = self.out
        if self.blocks:
            out.block_event = BLOCK_EVENT.validate(_block_frame(self.buf, self.blocks, self.rep, self.cmdlines))
        if self.markers:
            out.trace_marker = TRACE_MARKER.validate(pl.concat(self.markers).sort("order"))
        if self.heads:
            head = pl.concat(self.heads).sort("order").drop("order")
            out.events, unparsed = parse_other_events(head, self.rep)
            out.unparsed_by_event.update(unparsed)


_COMPILED: dict[tuple[str, tuple[str, ...]], list] = {}


def _body(c: _Columns, hz: int | None, out: RawTables, long_bits: int = 64) -> pl.Series:
    """The kernel's text body of every record of the group, from its print fmt; raw `field=value` pairs where
    that cannot be reproduced."""
    fmt = c.g.fmt
    try:
        if fmt.print_format is None:
            raise Unrenderable("the format file has no print fmt")
        key = (fmt.print_format, tuple(fmt.print_args))
        if key not in _COMPILED:
            _COMPILED[key] = compile_print_fmt(fmt.print_format, fmt.print_args)
        body, reasons = render(_COMPILED[key], len(c.g), c.field_value, hz, long_bits)
        if reasons:
            out.unrendered[fmt.name] = "; ".join(dict.fromkeys(reasons))
        return body
    except Unrenderable as e:
        out.unrendered[fmt.name] = str(e)
    pairs = []
    for name, value in c.frame().items():
        text = value if isinstance(value, pl.Series) else pl.Series(value).cast(pl.Utf8)
        pairs.append(pl.lit(f"{name}=") + pl.lit(text))
    if not pairs:
        return pl.Series("body", [""] * len(c.g), dtype=pl.Utf8)
    return pl.select(pl.concat_str(pairs, separator=" ").alias("body")).to_series()


def _field_frame(c: _Columns, rep: int) -> pl.DataFrame:
    return pl.DataFrame({"rep": np.full(len(c.g), rep, np.int32), "ts": c.g.ts, "cpu": c.g.cpu,
                         "pid": c.int("common_pid").astype(np.int32), **c.frame()})


def _block_rows(c: _Columns) -> dict[str, np.ndarray]:
    """The block_event columns of one event type, as numpy columns in the group's order (strings as byte spans
    of the page buffer, built once for all types by _block_frame). size is bytes where the event has it (> 0),
    else nr_sector * 512; block_split's size is new_sector - sector; -1 where there is none."""
    f, n = c.g.fmt.fields, len(c.g)
    dev = c.int("dev")
    sector = c.int("sector")
    nr = c.int("nr_sector")
    if f.get("sector") is not None:
        sector = np.where(sector < 0, -1, sector)  # (sector_t)-1 and the like: "none"
    if "new_sector" in f:  # block_split: the first part runs from sector to new_sector
        new = c.int("new_sector")
        nr = np.where((new >= 0) & (sector >= 0), new - sector, -1)
    size = np.where(nr >= 0, nr * 512, -1)
    if "bytes" in f:  # rq insert/issue: real bytes on 4.x+, 0 for fs requests on 3.x
        nbytes = c.int("bytes")
        size = np.where(nbytes > 0, nbytes, size)
    none = np.full(n, -1, np.int64)
    comm_s, comm_e = c.spans("comm") if "comm" in f else (none, none)  # -1: the comm of saved_cmdlines
    rwbs_s, rwbs_e = c.spans("rwbs") if "rwbs" in f else (none, none)
    no_dev = dev < 0
    return {"order": c.g.order, "ts": c.g.ts, "cpu": c.g.cpu, "pid": c.int("common_pid"),
            "dev_major": np.where(no_dev, -1, dev >> 20), "dev_minor": np.where(no_dev, -1, dev & 0xFFFFF),
            "sector": sector, "nr_sector": nr, "size_bytes": size,
            "error": c.int("error", 0) if "error" in f else c.int("errors", 0),
            "comm_s": comm_s, "comm_e": comm_e, "rwbs_s": rwbs_s, "rwbs_e": rwbs_e}


def _block_frame(buf: np.ndarray, parts: list[tuple[str, dict]], rep: int, cmdlines: CommTable) -> pl.DataFrame:
    """One block_event table from the per-type columns: merged into trace order with numpy, the strings built
    once in that order (no sort of string columns)."""
    sizes = [len(p["ts"]) for _, p in parts]
    n = sum(sizes)
    # Each part's rows go straight to their places in trace order (one output array per column, no concat).
    place = np.empty(n, np.int64)
    place[np.argsort(np.concatenate([p["order"] for _, p in parts]), kind="stable")] = np.arange(n)
    cols = {k: np.empty(n, np.int32 if k in ("cpu", "pid", "dev_major", "dev_minor", "error") else np.int64)
            for k in parts[0][1] if k != "order"}
    code = np.empty(n, np.int64)
    at = 0
    for i, ((_, p), size) in enumerate(zip(parts, sizes)):
        where = place[at:at + size]
        for k, out in cols.items():
            out[where] = p[k]
        code[where] = i
        at += size
    names = pl.Series([name for name, _ in parts], dtype=pl.Utf8)
    comm = strings(buf, cols["comm_s"], cols["comm_e"])
    own = cols["comm_s"] >= 0
    if not own.all():
        comm = pl.select(pl.when(pl.Series(own)).then(comm).otherwise(cmdlines.lookup(cols["pid"]))).to_series()
    return pl.DataFrame({
        "rep": np.full(n, rep, np.int32), "ts": cols["ts"], "cpu": cols["cpu"], "pid": cols["pid"], "comm": comm,
        "event": names.gather(pl.Series(code)), "dev_major": cols["dev_major"], "dev_minor": cols["dev_minor"],
        "sector": cols["sector"], "nr_sector": cols["nr_sector"], "size_bytes": cols["size_bytes"],
        "rwbs": strings(buf, cols["rwbs_s"], cols["rwbs_e"]), "error": cols["error"],
    })
