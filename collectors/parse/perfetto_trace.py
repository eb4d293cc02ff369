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
  tasks             who is whose thread (task table, source perfetto): process_tree packets' threads with their
                    tgid, processes with their command line's first word
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
from mobiperf.collectors.parse.perfetto_names import NameTimeline, process_tree_tasks
from mobiperf.collectors.parse.perfetto_sniff import trace_members
from mobiperf.collectors.parse.perfetto_tables import (BlockRows, clock_summary, head_frame, in_trace_order,
                                                      loss_summary, marker_frame, system_summary)
from mobiperf.collectors.parse.perfetto_schema import (MessageLayout, event_field, ftrace_event_types, int_values,
                                                      generic_numbers, layout_from_descriptor, packet_field,
                                                      trace_packet_number, wire_numbers)
from mobiperf.core.errors import ParseError
from mobiperf.core.schema import BLOCK_EVENT, GENERIC_EVENT, TASK, TRACE_MARKER

STORAGE_TABLES = ("block_event", "fsync_event", "jbd2_commit", "jbd2_run_stats", "fuse_event", "fs_event",
                  "syscall_io")
# TracePacket fields decoded whole (a few per trace) rather than scanned
CHUNK_BYTES = 8 << 20  # packets read per step: the index and decoded fields of one chunk are alive at a time
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


def parse_perfetto(path: Path, rep: int = 0, formats: Path | None = None, hz: int | None = None,
                   chunk_bytes: int = CHUNK_BYTES) -> PerfettoTables:
    """The tables of one Perfetto trace. formats: a formats/ directory of the traced kernel (exact bodies for
    every event); hz: its CONFIG_HZ (jbd2_run_stats holds jiffies; else read from formats/../kernel_hz).
    The packets are read in chunks of about chunk_bytes: a chunk's events become rows (strings interned) before
    the next is scanned, and a mapped file's pages are given back as they are done."""
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
    reader = _ChunkReader(out, *_formats(formats, hz), rep)
    reader.read(data, buf, offs, lens, chunk_bytes)
    inflated = reader.metas.pop("compressed_packets", [])
    if inflated:  # zlib'ed runs of packets, read the same way
        more = b"".join(_inflate(raw) for _, raw in inflated)
        more_buf = np.frombuffer(more, np.uint8)
        more_offs, more_lens, _ = wire.split_packets(more_buf, 0, len(more_buf), trace_packet_number())
        reader.read(more, more_buf, more_offs, more_lens, chunk_bytes)
        out.packets += len(more_offs)
    del buf, data
    reader.finish()
    _summarise(out, reader.bundles(), reader.metas)
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


def _meta_payloads(buf: np.ndarray, extras, pk_ts: np.ndarray) -> dict[str, list[tuple[int, bytes]]]:
    """Payload bytes of the wanted packet fields by field name: [(the packet's timestamp or -1, bytes)]; the
    bundles' generic event descriptors under "descriptors", with the bundle's index instead."""
    by_number = {packet_field(n): n for n in META_PACKETS}
    out: dict[str, list] = {}
    for pk, num, off, ln in zip(*(a.tolist() for a in extras)):
        name = "descriptors" if num == -11 else by_number.get(num)
        if name:
            when = pk if num == -11 else (int(pk_ts[pk]) if pk < len(pk_ts) else -1)
            out.setdefault(name, []).append((when, buf[off:off + ln].tobytes()))
    return out


def _inflate(raw: bytes) -> bytes:
    try:
        return zlib.decompress(raw)
    except zlib.error:
        return b""


class _ChunkReader:
    """Reads a trace's packets chunk by chunk into the tables' rows, and the packets decoded whole."""

    def __init__(self, out: PerfettoTables, fmts: dict[str, EventFormat], hz: int | None, rep: int):
        self.out, self.fmts, self.hz, self.rep = out, fmts, hz, rep
        self.blocks, self.names = BlockRows(), NameTimeline()
        self.markers: list[pl.DataFrame] = []
        self.heads: list[pl.DataFrame] = []
        self.generic: list[pl.DataFrame] = []
        self.metas: dict[str, list] = {}
        self.bundle_parts: list[tuple] = []
        self.wanted = np.zeros(256, np.int8)
        for name in META_PACKETS:
            self.wanted[packet_field(name)] = 1
        self.dropped = self.bad = 0

    def read(self, data, buf: np.ndarray, offs: np.ndarray, lens: np.ndarray, chunk_bytes: int) -> None:
        ends = np.cumsum(lens)
        first = 0
        while first < len(offs):
            last = int(np.searchsorted(ends, ends[first] - lens[first] + chunk_bytes, side="right"))
            last = max(last, first + 1)
            self._chunk(buf, offs[first:last], lens[first:last])
            _give_back(data, int(offs[first]), int(offs[last - 1] + lens[last - 1]))
            first = last

    def _chunk(self, buf, offs, lens) -> None:
        events, bundles, extras, pk_ts, dropped, bad = wire.scan_trace(buf, offs, lens, self.wanted, wire_numbers())
        self.dropped += dropped
        self.bad += bad
        metas = _meta_payloads(buf, extras, pk_ts)
        for name, items in metas.items():
            if name != "descriptors":  # bundle-relative: read by _event_groups through extras
                self.metas.setdefault(name, []).extend(items)
        self.names.add_trees(metas.get("process_tree", []))
        self.bundle_parts.append(bundles)
        base = self.out.events_total
        self.out.events_total += len(events[0])
        for g in _event_groups(buf, events, bundles, extras, self.out, base):
            self.names.add_task_events(g)
            self._route(g, buf)

    def _route(self, g: EventGroup, buf) -> None:
        out = self.out
        if g.name in BLOCK_EVENT_BODY:
            self.blocks.add(g, buf)
        elif g.name == "print":
            self.markers.append(marker_frame(g, self.rep))
        elif is_known_event(g.name):
            body, why = render_bodies(g.name, g.system, g.cols, self.fmts, self.hz)
            if why:
                out.unrendered[g.name] = why
            self.heads.append(head_frame(g, body))
        elif g.generic:
            self.generic.append(head_frame(g, field_pairs(g.cols)))
        else:
            out.other_events[g.name] = out.other_events.get(g.name, 0) + len(g)
        g.release()

    def bundles(self) -> tuple:
        return tuple(np.concatenate([b[k] for b in self.bundle_parts]) for k in range(4))

    def finish(self) -> None:
        """The tables, in the kernel's merged order, with every thread's name now known."""
        out, rep = self.out, self.rep
        out.summary["packets_dropped_before"] = self.dropped  # TracePacket.previous_packet_dropped
        if self.dropped:
            out.warnings.append(f"{self.dropped} packets say packets were dropped before them (traced's buffer or "
                                "a writer lost data); counts are low")
        if self.bad:
            out.warnings.append(f"{self.bad} packets or events did not decode (corrupt fields) and were left out")
        if self.blocks.n:
            out.block_event = BLOCK_EVENT.validate(self.blocks.finish(self.names, rep))
        if self.markers:
            out.trace_marker = TRACE_MARKER.validate(in_trace_order(pl.concat(self.markers)).drop("cpu"))
        if self.heads:
            out.events, unparsed = parse_other_events(self._named(self.heads), rep)
            for ev, n in unparsed.items():
                out.unparsed_by_event[ev] = out.unparsed_by_event.get(ev, 0) + n
        tasks = process_tree_tasks(self.metas.get("process_tree", []), rep)
        if tasks is not None:  # who is whose thread: beside what task_newtask/rename said (parse/sched.py)
            tasks = TASK.validate(tasks)
            out.events["task"] = pl.concat([out.events["task"], tasks]) if "task" in out.events else tasks
        if self.generic:
            out.events["generic_event"] = GENERIC_EVENT.validate(
                self._named(self.generic).with_columns(rep=pl.lit(rep, pl.Int32)))

    def _named(self, frames: list[pl.DataFrame]) -> pl.DataFrame:
        rows = in_trace_order(pl.concat(frames))
        comm = self.names.lookup(rows["pid"].to_numpy(), rows["ts"].to_numpy())
        return rows.select("ts", "cpu", "pid", comm.alias("comm"), "event", "body")


def _give_back(data, start: int, end: int) -> None:
    """Drop a mapped file's pages [start, end) from this process (the page cache keeps them for others)."""
    if not isinstance(data, mmap.mmap):
        return
    page = mmap.PAGESIZE
    lo, hi = (start + page - 1) // page * page, end // page * page
    if hi > lo and hasattr(mmap, "MADV_DONTNEED"):
        try:
            data.madvise(mmap.MADV_DONTNEED, lo, hi - lo)
        except (OSError, ValueError):
            pass


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
    """The events of one type: timestamp, pid (the thread), CPU, position in the file (order: where equal times
    and CPUs meet), and their fields, decoded on first use (events no table reads are never decoded) and released
    once their rows are built."""
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


def _event_groups(buf, events, bundles, extras, out: PerfettoTables, base: int = 0) -> list[EventGroup]:
    """The events of one chunk by type; base: the chunk's first event's position in the whole trace."""
    ts, pid, bundle, typ, off, ln = events
    cpu = bundles[0][bundle] if len(bundle) else np.empty(0, np.int32)

    def group(name, system, idx, cols, generic):
        return EventGroup(name, system, ts[idx], pid[idx], cpu[idx], base + idx.astype(np.int64), cols, generic)

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
        if f.is_string and block:  # BlockRows interns them: spans of the buffer until then
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


def _summarise(out: PerfettoTables, bundles, metas) -> None:
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
        read = [f"{name} ({len(t)} rows)" for name, t in out.events.items() if len(t)]  # sched, task ...
        out.warnings.append("the trace holds no storage events (block, ext4, f2fs, jbd2, fuse, syscalls); it has "
                            + (", ".join([*(f"{n} {e}" for e, n in top), *read]) or f"{out.events_total} other events"))
    if out.unrendered:
        out.warnings += [f"{ev}: text not reproduced exactly ({why})" for ev, why in sorted(out.unrendered.items())]
    out.warnings += [f"{n} {ev} events did not decode or match the known formats and were skipped"
                     for ev, n in sorted(out.unparsed_by_event.items())]
    if out.undecoded:
        out.warnings.append("events of unknown type (no proto, no descriptor): "
                            + ", ".join(f"{n} of {k}" for k, n in sorted(out.undecoded.items())))
