"""Perfetto traces (.pftrace, .perfetto-trace, .pb; gzip'ed; the trace inside a bugreport zip) -> the event tables
of every other source: block_event, trace_marker, fsync_event, jbd2_commit, jbd2_run_stats, fuse_event, fs_event,
syscall_io, and generic_event for events nothing else reads that the protos do not type.

What is read (field numbers from the perfetto package's protos, perfetto_schema.py; the wire walk is compiled,
perfetto_wire.py):
  ftrace_events     every FtraceEvent: typed events decoded field by field (block_*, ext4_*, f2fs_*,
                    android_fs_*, print, raw_syscalls sys_enter/sys_exit, task_*), generic events of both
                    encodings (GenericFtraceEvent name/value lists, and v50+ events that describe themselves with
                    a DescriptorProto in their bundle: jbd2, fuse, writeback, syscalls:sys_enter_* ...)
  block events      block_event straight from the fields (dev is the kernel dev_t: major = dev >> 20); comm from
                    the event where it has one, else the thread's name at that time (below)
  print             trace_marker (atrace's B|pid|name lines included, as written)
  other storage     their kernel text is written back (perfetto_bodies.py) and read by the text path's
                    parse_other_events(), so the tables are the text's, row for row
  names             a thread's name at each moment, from process_tree packets (threads' names, a process's
                    cmdline as comm), task_newtask (the child's comm) and task_rename (the new comm): the text's
                    header comm, which the kernel takes from its saved cmdlines; pid 0 is <idle>, unknown <...>
  losses            bundles flagged lost_events (the kernel ring buffer overran), ftrace_stats at the start and
                    end (overrun, dropped per CPU), trace_stats (traced's buffer: chunks overwritten/discarded),
                    packets flagged previous_packet_dropped
  clocks            clock_snapshot packets (BOOTTIME, MONOTONIC, REALTIME ... at one instant) and the bundles'
                    ftrace clock, kept in the summary; ts stays on the trace's ftrace clock (boot unless a bundle
                    says otherwise), as the kernel recorded it
Order: events by timestamp, ties by CPU then file order (the kernel's merged text order).
Damage: a trace whose packet framing breaks keeps every complete packet before it; `damage` is the ParseError
naming the byte offset (the caller reports it); a trace with no decodable packet at all raises it. Events whose
fields do not decode are counted and named in warnings.
"""

from __future__ import annotations

import gzip
import io
import mmap
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from mobiperf.collectors.parse import perfetto_wire as wire
from mobiperf.collectors.parse.event_fields import strings
from mobiperf.collectors.parse.event_format import EventFormat, read_formats
from mobiperf.collectors.parse.ftrace_events import is_known_event, parse_other_events
from mobiperf.collectors.parse.ftrace_text import BLOCK_EVENT_BODY
from mobiperf.collectors.parse.perfetto_bodies import FieldColumns, field_pairs, render_bodies
from mobiperf.collectors.parse.perfetto_names import NameTimeline
from mobiperf.collectors.parse.perfetto_schema import (MessageLayout, event_field, ftrace_event_types, int_values,
                                                      generic_numbers, layout_from_descriptor, packet_field,
                                                      trace_packet_number, wire_numbers)
from mobiperf.errors import ParseError
from mobiperf.schema import BLOCK_EVENT, GENERIC_EVENT, TRACE_MARKER

STORAGE_TABLES = ("block_event", "fsync_event", "jbd2_commit", "jbd2_run_stats", "fuse_event", "fs_event",
                  "syscall_io")
# TracePacket fields decoded whole (a few per trace) rather than scanned
META_PACKETS = ("process_tree", "clock_snapshot", "ftrace_stats", "trace_stats", "system_info",
                "compressed_packets", "trace_config")
FTRACE_CLOCKS = {0: "boot", 1: "unknown", 2: "global", 3: "local", 4: "mono_raw"}


@dataclass
class PerfettoTables:
    block_event: pl.DataFrame
    trace_marker: pl.DataFrame
    events: dict[str, pl.DataFrame] = field(default_factory=dict)  # as FtraceTables.events, and generic_event
    events_total: int = 0
    packets: int = 0
    other_events: dict[str, int] = field(default_factory=dict)  # typed events no table reads (sched_switch ...)
    undecoded: dict[str, int] = field(default_factory=dict)  # event field numbers with no proto or descriptor
    unrendered: dict[str, str] = field(default_factory=dict)  # event -> why its body is name=value pairs
    unparsed_by_event: dict[str, int] = field(default_factory=dict)
    lost_events: int = 0
    summary: dict = field(default_factory=dict)
    damage: ParseError | None = None
    warnings: list[str] = field(default_factory=list)


def read_trace_bytes(path: Path) -> bytes | mmap.mmap:
    """The protobuf bytes of a trace file: as is, gunzipped, or the largest Perfetto trace inside a zip (an
    Android bugreport keeps it under FS/data/misc/perfetto-traces/ or as *.pftrace / *.perfetto-trace)."""
    try:
        with open(path, "rb") as f:
            head = f.read(4)
            if head[:2] == b"\x1f\x8b":
                f.seek(0)
                try:
                    return gzip.GzipFile(fileobj=f).read()
                except (OSError, EOFError, zlib.error) as e:
                    raise ParseError(path, "offset 0", f"gzip data does not decompress: {e}") from None
            if head == b"PK\x03\x04":
                return _trace_in_zip(path)
            if len(head) < 4:
                return head
            # Mapped, not read: the pages are the page cache's (one copy, dropped by the kernel when it needs
            # them); read() of a large file doubled the peak while its buffer grew.
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as e:
        raise ParseError(path, "offset 0", f"cannot read: {e.strerror}") from None


def trace_members(zf: zipfile.ZipFile) -> list[zipfile.ZipInfo]:
    """The members of a zip that hold a Perfetto trace, by name (bugreports: perfetto-traces/, .pftrace ...)."""
    def looks(name: str) -> bool:
        low = name.lower()
        return low.endswith((".pftrace", ".perfetto-trace", ".perfetto", ".pb", ".pftrace.gz")) or \
            "perfetto-trace" in low
    return [m for m in zf.infolist() if not m.is_dir() and looks(m.filename) and m.file_size]


def _trace_in_zip(path: Path) -> bytes:
    try:
        with zipfile.ZipFile(path) as zf:
            members = trace_members(zf)
            if not members:
                raise ParseError(path, "offset 0", "a zip without a Perfetto trace in it (no *.pftrace, "
                                 "*.perfetto-trace or perfetto-traces/ member)")
            best = max(members, key=lambda m: m.file_size)
            data = zf.read(best)
    except zipfile.BadZipFile as e:
        raise ParseError(path, "offset 0", f"not a readable zip: {e}") from None
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def looks_like_perfetto(head: bytes) -> bool:
    """True if the bytes start like a Trace: a packet field (tag 0x0a) with a sane length whose content parses as
    protobuf fields (wire types 0, 1, 2, 5; lengths inside it) as far as head goes. Text that starts with a
    newline fails the second test at once."""
    if len(head) < 3 or head[0] != 0x0A:
        return False
    length, at = _varint_py(head, 1)
    if at < 0 or not 0 < length < 1 << 31:
        return False
    return _fields_parse(head, at, min(at + length, len(head)), complete=at + length <= len(head))


def _varint_py(data: bytes, at: int) -> tuple[int, int]:
    value = 0
    for shift in range(0, 70, 7):
        if at >= len(data):
            return 0, -1
        b = data[at]
        at += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, at
    return 0, -1


def _fields_parse(data: bytes, at: int, end: int, complete: bool) -> bool:
    fields = 0
    while at < end:
        tag, at = _varint_py(data, at)
        if at < 0 or tag >> 3 == 0:
            return not complete and fields > 0
        wire = tag & 7
        if wire == 0:
            _, at = _varint_py(data, at)
        elif wire in (1, 5):
            at += 8 if wire == 1 else 4
        elif wire == 2:
            n, at = _varint_py(data, at)
            at = at + n if at >= 0 else -1
        else:
            return False
        if at < 0 or (at > end and complete):
            return False
        fields += 1
    return fields > 0


def sniff_perfetto(path: Path) -> bool:
    """True for a Perfetto trace file: by its start (plain or gzip'ed), or a zip with a trace member."""
    try:
        with open(path, "rb") as f:
            head = f.read(1 << 16)
        if head[:2] == b"\x1f\x8b":
            head = gzip.GzipFile(fileobj=io.BytesIO(head)).read1(1 << 16) if len(head) else b""
        elif head[:4] == b"PK\x03\x04":
            with zipfile.ZipFile(path) as zf:
                return bool(trace_members(zf))
    except (OSError, EOFError, zlib.error, zipfile.BadZipFile):
        return False
    return looks_like_perfetto(head[:1 << 16])


def parse_perfetto(path: Path, rep: int = 0, formats: Path | None = None, hz: int | None = None) -> PerfettoTables:
    """The tables of one Perfetto trace. formats: a formats/ directory of the traced kernel (exact bodies for
    every event); hz: its CONFIG_HZ (jbd2_run_stats holds jiffies; else read from formats/../kernel_hz)."""
    data = read_trace_bytes(Path(path))
    buf = np.frombuffer(data, np.uint8)
    offs, lens, damage_at = wire.split_packets(buf, 0, len(buf), trace_packet_number())
    if not len(offs):
        what = "empty file" if not len(buf) else "not a Perfetto trace (no TracePacket at its start)"
        raise ParseError(path, f"offset {max(damage_at, 0)}", what)
    out = PerfettoTables(block_event=BLOCK_EVENT.empty(), trace_marker=TRACE_MARKER.empty(), packets=len(offs))
    if damage_at >= 0:
        out.damage = ParseError(path, f"offset {damage_at}", "the trace ends in a cut or corrupt packet (truncated "
                                f"file?); the {len(offs)} complete packets before it were kept")
        out.warnings.append(str(out.damage))
    wanted = np.zeros(256, np.int8)
    for name in META_PACKETS:
        wanted[packet_field(name)] = 1
    events, bundles, extras, pk_ts, dropped, bad = wire.scan_trace(buf, offs, lens, wanted, wire_numbers())
    metas = _meta_payloads(buf, extras)
    if metas.get("compressed_packets"):  # zlib'ed runs of packets: decoded after the rest, as their own buffer
        data, buf, events, bundles, extras, pk_ts, dropped, bad = _with_inflated(data, offs, lens, metas, wanted)
        metas = _meta_payloads(buf, extras)
    out.summary["packets_dropped_before"] = dropped  # TracePacket.previous_packet_dropped: traced lost packets
    if dropped:
        out.warnings.append(f"{dropped} packets say packets were dropped before them (traced's buffer or a "
                            "writer lost data); counts are low")
    if bad:
        out.warnings.append(f"{bad} packets or events did not decode (corrupt fields) and were left out")
    fmts, hz = _formats(formats, hz)
    groups = _event_groups(buf, events, bundles, extras, out)
    out.events_total = len(events[0])
    del events
    names = NameTimeline.from_packets(metas.get("process_tree", []), pk_ts)
    for g in groups:
        names.add_task_events(g)
    _build_tables(out, buf, groups, names, fmts, hz, rep)
    _summarise(out, bundles, metas)
    return out


def add_perfetto_tables(raw: Path, rep: int, add, out) -> None:
    """parse_raw_dir's step for raw/trace.pftrace: its tables through add(name, frame), its summary and
    warnings into out (a ParsedRaw); damage is a warning there, every complete packet kept."""
    from mobiperf.collectors.parse.ftrace_raw import read_kernel_hz

    parsed = parse_perfetto(raw / "trace.pftrace", rep, raw / "formats", read_kernel_hz(raw / "kernel_hz"))
    add("block_event", parsed.block_event)
    if len(parsed.trace_marker):
        add("trace_marker", parsed.trace_marker)
    for name, df in parsed.events.items():
        add(name, df)
    out.summary["perfetto"] = {"events": parsed.events_total, "packets": parsed.packets,
                               "other_events": parsed.other_events, "undecoded": parsed.undecoded,
                               "unparsed": parsed.unparsed_by_event, "unrendered": parsed.unrendered,
                               "damage": str(parsed.damage) if parsed.damage else None, **parsed.summary}
    # Lost events are said once, by parse_raw_dir's summary of every source.
    out.warnings += [f"trace.pftrace: {w}" for w in parsed.warnings if "events were lost" not in w]


def _meta_payloads(buf: np.ndarray, extras) -> dict[str, list[tuple[int, bytes]]]:
    """Payload bytes of the wanted packet fields by field name: [(packet index, bytes)]; descriptors by bundle."""
    by_number = {packet_field(n): n for n in META_PACKETS}
    out: dict[str, list] = {}
    for pk, num, off, ln in zip(*(a.tolist() for a in extras)):
        name = "descriptors" if num == -11 else by_number.get(num)
        if name:
            out.setdefault(name, []).append((pk, buf[off:off + ln].tobytes()))
    return out


def _with_inflated(data: bytes, offs, lens, metas, wanted):
    """The trace with its compressed_packets inflated and appended (each is a run of Trace packets)."""
    parts = [data]
    for _, raw in metas["compressed_packets"]:
        try:
            parts.append(zlib.decompress(raw))
        except zlib.error:
            continue
    data = b"".join(parts)
    buf = np.frombuffer(data, np.uint8)
    more_offs, more_lens, _ = wire.split_packets(buf, len(parts[0]), len(buf), trace_packet_number())
    all_offs, all_lens = np.concatenate([offs, more_offs]), np.concatenate([lens, more_lens])
    events, bundles, extras, pk_ts, dropped, bad = wire.scan_trace(buf, all_offs, all_lens, wanted, wire_numbers())
    return data, buf, events, bundles, extras, pk_ts, dropped, bad


def _formats(formats: Path | None, hz: int | None) -> tuple[dict[str, EventFormat], int | None]:
    if formats is None or not Path(formats).is_dir():
        return {}, hz
    by_id, _ = read_formats(Path(formats))
    if hz is None:
        try:
            hz = int((Path(formats).parent / "kernel_hz").read_text().strip()) or None
        except (OSError, ValueError):
            hz = None
    return {f.name: f for f in by_id.values()}, hz


@dataclass
class EventGroup:
    """The events of one type: timestamp, pid (the thread), CPU, rank in the merged trace order, and their fields,
    decoded on first use (events no table reads are never decoded) and released once their rows are built."""
    name: str
    system: str
    ts: np.ndarray
    pid: np.ndarray
    cpu: np.ndarray
    order: np.ndarray
    decoder: object  # () -> FieldColumns, or the FieldColumns themselves
    generic: bool = False

    def __len__(self) -> int:
        return len(self.ts)

    @property
    def cols(self) -> FieldColumns:
        if not isinstance(self.decoder, FieldColumns):
            self.decoder = self.decoder()
        return self.decoder

    def release(self) -> None:
        self.decoder = None


def _event_groups(buf, events, bundles, extras, out: PerfettoTables) -> list[EventGroup]:
    ts, pid, bundle, typ, off, ln = events
    cpu = bundles[0][bundle] if len(bundle) else np.empty(0, np.int32)
    # The kernel's merged order: by time, a tie to the lower CPU, then as recorded.
    rank = np.empty(len(ts), np.int64)
    rank[np.lexsort((cpu, ts))] = np.arange(len(ts))  # lexsort is stable: ties keep their file order

    def group(name, system, idx, cols, generic):
        return EventGroup(name, system, ts[idx], pid[idx], cpu[idx], rank[idx], cols, generic)

    typed = ftrace_event_types()
    dynamic = _dynamic_layouts(buf, extras)  # (bundle, field number) -> layout
    # One key per event type: a typed field number, or -(1 + index) of a dynamic layout
    keys = typ.astype(np.int64)
    if dynamic:
        layouts = list(dict.fromkeys(dynamic.values()))
        lookup = {k: -(1 + layouts.index(v)) for k, v in dynamic.items()}
        untyped = np.flatnonzero(~np.isin(typ, np.fromiter(typed, np.int64)))
        if len(untyped):
            pairs = bundle[untyped].astype(np.int64) << 32 | typ[untyped].astype(np.int64)
            uniq, inv = np.unique(pairs, return_inverse=True)
            mapped = np.array([lookup.get((int(u) >> 32, int(u) & 0xFFFFFFFF), int(u) & 0xFFFFFFFF) for u in uniq],
                              np.int64)
            keys[untyped] = mapped[inv]
    else:
        layouts = []
    order = np.argsort(keys, kind="stable")
    bounds = np.flatnonzero(np.diff(keys[order])) + 1
    groups = []
    generic_number = event_field("generic")
    for idx in np.split(order, bounds) if len(order) else []:
        key = int(keys[idx[0]])
        if key == generic_number:
            groups += [group(name, "", idx[rows], cols, True)
                       for name, rows, cols in _generic_groups(buf, off[idx], ln[idx], out)]
            continue
        layout = layouts[-key - 1] if key < 0 else typed.get(key)
        if layout is None:
            out.undecoded[f"ftrace event field {key}"] = len(idx)
            continue
        groups.append(group(layout.name, layout.group, idx, _lazy(buf, off[idx], ln[idx], layout, out), key < 0))
    return groups


def _dynamic_layouts(buf, extras) -> dict[tuple[int, int], MessageLayout]:
    """Self-described (v50+) generic events: each bundle's GenericEventDescriptor (field_id 1, descriptor 2,
    group 3), parsed once per distinct descriptor."""
    from mobiperf.collectors.parse.perfetto_schema import decode_message

    cache: dict[bytes, tuple] = {}
    out = {}
    for b, num, o, n in zip(*(a.tolist() for a in extras)):
        if num != -11:
            continue
        raw = buf[o:o + n].tobytes()
        if raw not in cache:
            d = decode_message("FtraceEventBundle.GenericEventDescriptor", raw)
            layout = layout_from_descriptor(d.event_descriptor, d.group_name) if d is not None else None
            cache[raw] = (d.field_id, layout) if layout is not None else None
        if cache[raw] is not None:
            out[(b, cache[raw][0])] = cache[raw][1]
    return out


def _lazy(buf, offs, lens, layout: MessageLayout, out: PerfettoTables):
    def decode() -> FieldColumns:
        cols, broken = _decode(buf, offs, lens, layout)
        if broken:
            out.unparsed_by_event[layout.name] = out.unparsed_by_event.get(layout.name, 0) + broken
        return cols
    return decode


BLOCK_FIELDS = ("dev", "sector", "nr_sector", "bytes", "rwbs", "comm", "error", "errors", "new_sector")
SIGNED_TYPES = (3, 5, 15, 16, 17, 18)  # int64 int32 sfixed32 sfixed64 sint32 sint64


def _decode(buf, offs, lens, layout: MessageLayout) -> tuple[FieldColumns, int]:
    block = layout.name in BLOCK_EVENT_BODY
    if block:  # the most frequent storage events: only what block_event holds
        layout = layout.only(BLOCK_FIELDS)
    slot_of, kinds, repeats, slot_col, n_int, n_str, first = layout.plan
    ints, starts, ends, broken = wire.decode_fields(buf, offs, lens.astype(np.int64), slot_of, kinds, repeats,
                                                    slot_col, n_int, n_str)
    cols = FieldColumns(len(offs), {}, {}, {}, list(first))
    for name, slot in first.items():
        f, col = layout.fields[name], slot_col[slot]
        if f.is_string and block:  # block_frame builds each string column once, in trace order
            cols.spans[name] = (starts[col], ends[col])
            continue
        if f.is_string:
            cols.strings[name] = strings(buf, starts[col], ends[col])
            continue
        for k in range(repeats[slot]):
            key = f"{name}[{k}]" if f.repeated else name
            cols.ints[key] = int_values(ints[col + k], f)
            cols.signed[key] = f.type in SIGNED_TYPES
    return cols, int(broken.sum())


def _generic_groups(buf, offs, lens, out: PerfettoTables) -> list[tuple[str, np.ndarray, FieldColumns]]:
    """GenericFtraceEvent messages grouped by event name: (name, their rows, fields pivoted to columns in the
    order the event lists them; a field missing from a message reads 0 / "")."""
    name_s, name_e, (msg, ns, ne, kind, ival, ss, se), broken = wire.flatten_generic(
        buf, offs, lens.astype(np.int64), generic_numbers())
    names = strings(buf, name_s, name_e)
    field_names = strings(buf, ns, ne)
    field_strs = strings(buf, ss, se)
    groups = []
    n = len(offs)
    for (event,), rows in pl.DataFrame({"event": names, "row": np.arange(n)}).group_by("event", maintain_order=True):
        row_ids = rows["row"].to_numpy()
        at = np.full(n, -1, np.int64)
        at[row_ids] = np.arange(len(row_ids))
        mine = np.flatnonzero(at[msg] >= 0)
        r_all = at[msg[mine]]
        fname_col = field_names.gather(pl.Series(mine))
        cols = FieldColumns(len(row_ids), {}, {}, {}, list(dict.fromkeys(fname_col.to_list())))
        for fname in cols.order:
            sel = (fname_col == fname).to_numpy()
            r, k = r_all[sel], mine[sel]
            if (kind[k] == wire.GENERIC_STR).any():
                s = np.full(len(row_ids), "", object)
                s[r] = field_strs.gather(pl.Series(k)).to_list()
                cols.strings[fname] = pl.Series(fname, s, dtype=pl.Utf8)
            else:
                v = np.zeros(len(row_ids), np.int64)
                v[r] = ival[k]
                cols.ints[fname] = v
                cols.signed[fname] = not (kind[k] == wire.GENERIC_UINT).any()
        groups.append((event or "?", row_ids, cols))
    if broken.any():
        out.unparsed_by_event["generic"] = int(broken.sum())
    return groups


def _build_tables(out: PerfettoTables, buf, groups: list[EventGroup], names: "NameTimeline",
                  fmts: dict[str, EventFormat], hz: int | None, rep: int) -> None:
    from mobiperf.collectors.parse.perfetto_tables import block_frame, head_frame, marker_frame

    blocks, markers, heads, generic = [], [], [], []
    for g in groups:
        if g.name in BLOCK_EVENT_BODY:
            blocks.append(g)
        elif g.name == "print":
            markers.append(g)
        elif is_known_event(g.name):
            body, why = render_bodies(g.name, g.system, g.cols, fmts, hz)
            g.release()
            if why:
                out.unrendered[g.name] = why
            heads.append(head_frame(g, names, body))
        elif g.generic:
            generic.append(head_frame(g, names, field_pairs(g.cols)))
        else:
            out.other_events[g.name] = out.other_events.get(g.name, 0) + len(g)
    if blocks:
        out.block_event = BLOCK_EVENT.validate(block_frame(blocks, names, rep, buf))
    if markers:
        out.trace_marker = TRACE_MARKER.validate(marker_frame(markers, rep))
    if heads:
        head = pl.concat(heads).sort("order").drop("order")
        out.events, unparsed = parse_other_events(head, rep)
        for ev, n in unparsed.items():
            out.unparsed_by_event[ev] = out.unparsed_by_event.get(ev, 0) + n
    if generic:
        rows = pl.concat(generic).sort("order").drop("order")
        out.events["generic_event"] = GENERIC_EVENT.validate(rows.with_columns(rep=pl.lit(rep, pl.Int32)))


def _summarise(out: PerfettoTables, bundles, metas) -> None:
    from mobiperf.collectors.parse.perfetto_tables import clock_summary, loss_summary, system_summary

    out.summary.update(loss_summary(bundles, metas))
    out.lost_events = out.summary["lost_events"]
    out.summary["clock"] = sorted({FTRACE_CLOCKS.get(int(c), str(c)) for c in np.unique(bundles[2])}) or ["boot"]
    out.summary.update(clock_summary(metas))
    out.summary.update(system_summary(metas))
    if out.lost_events or out.summary.get("bundles_with_lost_events"):
        out.warnings.append(f"{out.lost_events} ftrace events were lost (ring buffer overrun; "
                            f"{out.summary.get('bundles_with_lost_events', 0)} bundles flagged); counts are low")
    if out.summary.get("buffer_chunks_lost"):
        out.warnings.append(f"traced's buffer lost {out.summary['buffer_chunks_lost']} chunks (overwritten or "
                            "discarded: the buffer was too small); counts are low")
    if out.events_total and not any(len(t) for name, t in [("block_event", out.block_event), *out.events.items()]
                                    if name in STORAGE_TABLES):
        top = sorted(out.other_events.items(), key=lambda kv: -kv[1])[:5]
        out.warnings.append("the trace holds no storage events (block, ext4, f2fs, jbd2, fuse, syscalls); it has "
                            + (", ".join(f"{n} {e}" for e, n in top) or f"{out.events_total} other events"))
    if out.unrendered:
        out.warnings += [f"{ev}: text not reproduced exactly ({why})" for ev, why in sorted(out.unrendered.items())]
    out.warnings += [f"{n} {ev} events did not decode or match the known formats and were skipped"
                     for ev, n in sorted(out.unparsed_by_event.items())]
    if out.undecoded:
        out.warnings.append("events of unknown type (no proto, no descriptor): "
                            + ", ".join(f"{n} of {k}" for k, n in sorted(out.undecoded.items())))
