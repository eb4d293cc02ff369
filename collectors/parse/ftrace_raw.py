"""Binary ftrace: the per-CPU `trace_pipe_raw` pages -> block_event and trace_marker rows, exact ns timestamps.

Layout (specs/trace-formats.md section 2.4), read from the files saved with the trace:
  formats/header_page    the page header: u64 timestamp, local_t commit (data length in the low 27 bits, bit 31 =
                         events were lost before this page), data at offset 16 (page = 16 + its size field)
  events in a page       u32 header `type_len:5 | time_delta:27`; type_len 1..28: payload of 4*type_len bytes;
                         0: payload length - 4 in the next u32; 29 padding (time_delta 0: the page ends);
                         30 time extend (delta += array[0] << 27); 31 absolute timestamp
  payload                common header (u16 type @0, u8 flags, u8 preempt count, s32 pid @4), then the fields at
                         the offsets of formats/<system>/<event>/format, whose `ID:` is the type
The page walk is compiled (numba), field extraction is numpy over all events of a type at once. Decoded here: the
block events (same columns as the text parser; comm from the event where it has one, else from saved_cmdlines)
and ftrace print (trace_marker). Other event types are counted by name, not decoded: use the text collector for
them. Lost events: pages flagged "missed events" are counted (the per-CPU stats also say how many).
Byte order: little-endian (every Android and x86 target); a big-endian capture is refused with a ParseError.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl
from numba import njit

from mobiperf.collectors.parse.ftrace_scan import gather_spans
from mobiperf.collectors.parse.ftrace_text import BLOCK_EVENT_BODY
from mobiperf.errors import ParseError
from mobiperf.schema import BLOCK_EVENT, TRACE_MARKER

FIELD = re.compile(r"field:(?P<type>[^;]*?)\s*(?P<name>\w+)(?:\[\d*\])?;\s*offset:(?P<offset>\d+);\s*"
                   r"size:(?P<size>\d+);\s*signed:(?P<signed>\d)")


@dataclass
class EventFormat:
    name: str
    system: str
    id: int
    fields: dict[str, tuple[int, int, bool, str]]  # name -> (offset, size, signed, type text)


@dataclass
class RawTables:
    block_event: pl.DataFrame
    trace_marker: pl.DataFrame
    events: int = 0
    pages: int = 0
    pages_with_lost_events: int = 0
    undecoded: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def read_formats(formats: Path) -> tuple[dict[int, EventFormat], int, int]:
    """Event formats by ID, and the page's data offset and data size, from a saved formats/ directory."""
    header = (formats / "header_page").read_text(errors="replace") if (formats / "header_page").exists() else ""
    data_off, data_size = 16, 4080
    for m in FIELD.finditer(header):
        if m["name"] == "data":
            data_off, data_size = int(m["offset"]), int(m["size"])
    by_id: dict[int, EventFormat] = {}
    for path in formats.glob("*/*/format"):
        text = path.read_text(errors="replace")
        ident = re.search(r"^ID:\s*(\d+)", text, re.M)
        name = re.search(r"^name:\s*(\S+)", text, re.M)
        if not ident or not name:
            continue
        fields = {m["name"]: (int(m["offset"]), int(m["size"]), m["signed"] == "1", m["type"])
                  for m in FIELD.finditer(text)}
        by_id[int(ident[1])] = EventFormat(name[1], path.parent.parent.name, int(ident[1]), fields)
    return by_id, data_off, data_size


@njit(cache=True, nogil=True)
def _read_u32(buf, p):
    return np.uint32(buf[p]) | (np.uint32(buf[p + 1]) << 8) | (np.uint32(buf[p + 2]) << 16) | \
        (np.uint32(buf[p + 3]) << 24)


@njit(cache=True, nogil=True)
def walk_pages(buf, data_off, data_size):
    """Every data event of every page: (ts, payload offset, payload length, type id); pages; lost-flag pages."""
    page_size = data_off + data_size
    n_pages = len(buf) // page_size
    cap = n_pages * (data_size // 8) + 1
    ts_out = np.empty(cap, np.int64)
    off_out = np.empty(cap, np.int64)
    len_out = np.empty(cap, np.int64)
    type_out = np.empty(cap, np.int32)
    k = 0
    lost_pages = 0
    for pg in range(n_pages):
        base = pg * page_size
        ts = np.int64(0)
        for j in range(8):
            ts |= np.int64(buf[base + j]) << np.int64(8 * j)
        commit = _read_u32(buf, base + 8)
        if commit & np.uint32(1 << 31):
            lost_pages += 1
        length = np.int64(commit & np.uint32((1 << 27) - 1))
        if length > data_size:
            length = data_size
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
    return ts_out[:k], off_out[:k], len_out[:k], type_out[:k], n_pages, lost_pages


@njit(cache=True, nogil=True)
def _read_field(buf, offs, lens, field_off, size, signed):
    """A little-endian integer field of every event (0 where the payload is too short)."""
    out = np.zeros(len(offs), np.int64)
    for i in range(len(offs)):
        if field_off + size > lens[i]:
            continue
        v = np.uint64(0)
        for j in range(size):
            v |= np.uint64(buf[offs[i] + field_off + j]) << np.uint64(8 * j)
        if signed and size < 8 and (v >> np.uint64(8 * size - 1)) & np.uint64(1):
            out[i] = np.int64(v) - (np.int64(1) << np.int64(8 * size))
        elif v > np.uint64((1 << 63) - 1):
            out[i] = -1  # (sector_t)-1 and the like: "none"
        else:
            out[i] = np.int64(v)
    return out


@njit(cache=True, nogil=True)
def _cstring_spans(buf, offs, lens, field_off, size):
    """Spans of NUL-terminated char[size] fields (size 0: up to the payload's end, for char buf[])."""
    starts = np.empty(len(offs), np.int64)
    ends = np.empty(len(offs), np.int64)
    for i in range(len(offs)):
        s = offs[i] + field_off
        limit = offs[i] + lens[i] if size == 0 else min(s + size, offs[i] + lens[i])
        e = s
        while e < limit and buf[e] != 0:
            e += 1
        starts[i] = s
        ends[i] = max(e, s)
    return starts, ends


def _strings(buf, starts, ends) -> pl.Series:
    import pyarrow as pa

    offsets, chars, ascii_only = gather_spans(buf, starts, ends)
    arr = pa.LargeStringArray.from_buffers(len(starts), pa.py_buffer(offsets), pa.py_buffer(chars))
    if not ascii_only:
        raw = bytes(chars)
        return pl.Series([raw[offsets[i]:offsets[i + 1]].decode("utf-8", errors="replace")
                          for i in range(len(starts))], dtype=pl.Utf8)
    return pl.Series(pl.from_arrow(arr), dtype=pl.Utf8)


def saved_cmdlines(path: Path) -> dict[int, str]:
    comm = {}
    if path.exists():
        for line in path.read_text(errors="replace").splitlines():
            pid, _, name = line.partition(" ")
            if pid.isdigit():
                comm[int(pid)] = name
    return comm


def parse_ftrace_raw(raw_dir: Path, formats: Path, rep: int = 0) -> RawTables:
    """Every `cpuN` page file in raw_dir -> tables; formats is the formats/ directory saved with them."""
    by_id, data_off, data_size = read_formats(formats)
    if not by_id:
        raise ParseError(formats, 0, "no event format files (formats/<system>/<event>/format) to decode pages")
    cmdlines = saved_cmdlines(raw_dir / "saved_cmdlines")
    files = sorted((p for p in raw_dir.iterdir() if re.fullmatch(r"cpu\d+", p.name)), key=lambda p: int(p.name[3:]))
    parts, warnings, pages, lost = [], [], 0, 0
    bufs = []
    for cpu_file in files:
        data = cpu_file.read_bytes()
        buf = np.frombuffer(data, np.uint8)
        page = data_off + data_size
        if len(data) % page:
            warnings.append(f"{cpu_file}: {len(data) % page} bytes of a cut page at byte offset "
                            f"{len(data) - len(data) % page} (truncated file); every complete page was kept")
        ts, offs, lens, types, n_pages, n_lost = walk_pages(buf, data_off, data_size)
        pages += n_pages
        lost += n_lost
        bufs.append(buf)
        parts.append((int(cpu_file.name[3:]), len(bufs) - 1, ts, offs, lens, types))
    frames, markers, undecoded, n_events = [], [], {}, 0
    for cpu, bi, ts, offs, lens, types in parts:
        buf = bufs[bi]
        n_events += len(ts)
        for type_id in np.unique(types).tolist():
            fmt = by_id.get(type_id)
            sel = types == type_id
            if fmt is None:
                undecoded[f"type {type_id}"] = undecoded.get(f"type {type_id}", 0) + int(sel.sum())
                continue
            o, ln, t = offs[sel], lens[sel], ts[sel]
            if fmt.name in BLOCK_EVENT_BODY:
                frames.append(_block_rows(buf, fmt, o, ln, t, cpu, rep, cmdlines))
            elif fmt.name == "print" and "buf" in fmt.fields:
                off_buf, size_buf = fmt.fields["buf"][:2]
                s, e = _cstring_spans(buf, o, ln, off_buf, size_buf)
                pid = _read_field(buf, o, ln, 4, 4, True)
                markers.append(pl.DataFrame({"rep": np.full(len(o), rep, np.int32), "ts": t,
                                             "pid": pid.astype(np.int32),
                                             "text": _strings(buf, s, e).str.strip_chars()}))
            else:
                undecoded[fmt.name] = undecoded.get(fmt.name, 0) + len(o)
    block = (pl.concat(frames).sort("ts", maintain_order=True) if frames else BLOCK_EVENT.empty())
    marker = pl.concat(markers).sort("ts") if markers else TRACE_MARKER.empty()
    if lost:
        warnings.append(f"{lost} trace pages say events were lost before them (ring buffer overrun)")
    return RawTables(block_event=BLOCK_EVENT.validate(block), trace_marker=TRACE_MARKER.validate(marker),
                     events=n_events, pages=pages, pages_with_lost_events=lost, undecoded=undecoded,
                     warnings=warnings)


def _block_rows(buf, fmt: EventFormat, offs, lens, ts, cpu: int, rep: int, cmdlines: dict[int, str]):
    f = fmt.fields

    def num(name, default=-1):
        if name not in f:
            return np.full(len(offs), default, np.int64)
        off, size, signed, _ = f[name]
        return _read_field(buf, offs, lens, off, size, signed)

    def text(name):
        off, size, _, _ = f[name]
        s, e = _cstring_spans(buf, offs, lens, off, size)
        return _strings(buf, s, e)

    pid = num("common_pid")
    dev = num("dev")
    sector = num("sector")
    nr = num("nr_sector")
    if "new_sector" in f:  # block_split: the first part runs from sector to new_sector
        new = num("new_sector")
        nr = np.where((new >= 0) & (sector >= 0), new - sector, -1)
    size = np.where(nr >= 0, nr * 512, -1)
    if "bytes" in f:  # rq insert/issue: real bytes on 4.x+, 0 for fs requests on 3.x
        nbytes = num("bytes")
        size = np.where(nbytes > 0, nbytes, size)
    if "comm" in f:
        comm = text("comm")
    else:
        comm = pl.Series(pid).replace_strict(cmdlines, default="<...>", return_dtype=pl.Utf8) if cmdlines \
            else pl.Series(["<...>"] * len(offs), dtype=pl.Utf8)
    error = num("error", 0) if "error" in f else num("errors", 0)
    no_dev = dev < 0
    return pl.DataFrame({
        "rep": np.full(len(offs), rep, np.int32), "ts": ts, "cpu": np.full(len(offs), cpu, np.int32),
        "pid": pid.astype(np.int32), "comm": comm, "event": [fmt.name] * len(offs),
        "dev_major": np.where(no_dev, -1, dev >> 20).astype(np.int32),
        "dev_minor": np.where(no_dev, -1, dev & 0xFFFFF).astype(np.int32),
        "sector": sector if "sector" in f else np.full(len(offs), -1, np.int64),
        "nr_sector": nr, "size_bytes": size,
        "rwbs": text("rwbs") if "rwbs" in f else pl.Series([""] * len(offs), dtype=pl.Utf8),
        "error": error.astype(np.int32),
    })
