"""A real ftrace capture (binary per-CPU pages + the formats saved with them) written as a Perfetto trace, the
way traced_probes writes what it reads from the same pages: the oracle of the Perfetto reader's tests and the
trace the `perfetto` stand-in (tests/support/perfetto_standin.py) records.

to_perfetto(capture_dir) reads capture_dir/ftrace_raw/cpuN with capture_dir/formats (the layout of
tests/support/ftrace_raw_capture.py and of `mobiperf run --source ftrace_raw`) and returns the bytes of a trace built
with the perfetto package's TraceProtoBuilder and its protos:
  - one ftrace_events bundle per CPU and up to BUNDLE_EVENTS events, in each CPU's order, bundles of the CPUs
    interleaved by time (as traced_probes flushes them);
  - an event the protos type (block_*, ext4_sync_file_*, print, raw_syscalls ...) gets its typed message, with
    every kernel field of the same name (fields the proto lacks are lost, as they are in traced_probes);
  - any other event a generic one: GenericFtraceEvent name/value pairs (generic="list", before perfetto v50) or a
    self-described message with its DescriptorProto in the bundle (generic="descriptor", v53+'s default);
  - process_tree (the saved pid -> comm cache, as threads), ftrace_stats at the start and end (from the
    collector's per-CPU stats where saved), a clock_snapshot and system_info.
Same events, same timestamps (ns), same pids: what the tables must reproduce row for row.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import numpy as np

from mobiperf.collectors.parse.event_fields import decode_field, decode_int_fields
from mobiperf.collectors.parse.event_format import read_formats
from mobiperf.collectors.parse.ftrace_raw import saved_cmdlines, walk_pages
from mobiperf.collectors.parse.perfetto_schema import ftrace_event_types

BUNDLE_EVENTS = 500
DYNAMIC_FIELD_BASE = 100_000  # field numbers of self-described events: past every typed FtraceEvent field
TYPE_UINT64, TYPE_INT64, TYPE_STRING = 4, 3, 9


def _records(capture: Path):
    """Every record of every CPU as (cpu, ts, event name, system, {field: value}), per CPU in page order."""
    by_id, layout = read_formats(capture / "formats")
    raw = capture / "ftrace_raw"
    cpus = (p for p in raw.iterdir() if re.fullmatch(r"cpu\d+", p.name))
    for cpu_file in sorted(cpus, key=lambda p: int(p.name[3:])):
        buf = np.fromfile(cpu_file, np.uint8)
        ts, offs, lens, types, *_ = walk_pages(buf, layout.data_offset, layout.data_size)
        decoded: dict[int, list[dict]] = {}
        for type_id in np.unique(types).tolist():
            fmt = by_id.get(type_id)
            if fmt is None:
                continue
            sel = np.flatnonzero(types == type_id)
            ints = decode_int_fields(buf, offs[sel], lens[sel], list(fmt.fields.values()))
            cols = {k: v.tolist() for k, v in ints.items()}
            for f in fmt.fields.values():
                if f.kind == "string":
                    cols[f.name] = decode_field(buf, offs[sel], lens[sel], f).to_list()
                elif f.kind == "array" and f.element(0) is not None:
                    cols[f.name] = list(zip(*(decode_field(buf, offs[sel], lens[sel], f.element(k)).tolist()
                                              for k in range(f.count))))
            names = list(cols)
            decoded[type_id] = [dict(zip(names, row)) for row in zip(*(cols[n] for n in names))]
        cursor = {t: 0 for t in decoded}
        for t, stamp in zip(types.tolist(), ts.tolist()):
            if t not in decoded:
                continue
            row = decoded[t][cursor[t]]
            cursor[t] += 1
            fmt = by_id[t]
            yield int(cpu_file.name[3:]), stamp, fmt.name, fmt.system, row, fmt.fields


def _coerce(value, ftype: int):
    """A kernel field value as the proto field type takes it."""
    if ftype in (9, 12):
        return value if isinstance(value, str) else str(value)
    value = int(value)
    if ftype in (4, 6):  # uint64, fixed64
        return value & (1 << 64) - 1
    if ftype in (13, 7):  # uint32, fixed32
        return value & (1 << 32) - 1
    if ftype in (5, 17, 15):  # int32, sint32, sfixed32
        value &= (1 << 32) - 1
        return value - (1 << 32) if value >= 1 << 31 else value
    if ftype == 8:
        return bool(value)
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >= 1 << 63 else value


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _fill_event(ev, name: str, system: str, row: dict, fields, generic: str, dynamic: dict) -> None:
    typed = _typed_names()
    kernel = {k: v for k, v in row.items() if not k.startswith("common_")}
    if name in typed and name != "generic":
        msg = getattr(ev, name)
        layout = ftrace_event_types()[typed[name]]
        msg.SetInParent()
        for key, value in kernel.items():
            f = layout.fields.get(key)
            if f is None:
                continue
            if f.repeated:
                getattr(msg, key).extend(_coerce(v, f.type) for v in value)
            else:
                setattr(msg, key, _coerce(value, f.type))
        return
    items = [(k, v) for k, v in kernel.items() if not isinstance(v, tuple)]
    if generic == "list":
        g = ev.generic
        g.event_name = name
        for key, value in items:
            field = g.field.add()
            field.name = key
            if isinstance(value, str):
                field.str_value = value
            elif fields[key].signed:
                field.int_value = int(value)
            else:
                field.uint_value = int(value) & (1 << 64) - 1
        return
    number, _ = dynamic.setdefault((system, name), (DYNAMIC_FIELD_BASE + len(dynamic), items))
    payload = bytearray()
    for k, (key, value) in enumerate(items, 1):
        if isinstance(value, str):
            raw = value.encode()
            payload += _varint(k << 3 | 2) + _varint(len(raw)) + raw
        else:
            payload += _varint(k << 3) + _varint(int(value) & (1 << 64) - 1)
    ev.MergeFromString(_varint(number << 3 | 2) + _varint(len(payload)) + bytes(payload))


_TYPED: dict[str, int] = {}


def _typed_names() -> dict[str, int]:
    if not _TYPED:
        _TYPED.update({layout.name: number for number, layout in ftrace_event_types().items()})
    return _TYPED


def _descriptor(system: str, name: str, items, fields) -> bytes:
    from google.protobuf import descriptor_pb2

    d = descriptor_pb2.DescriptorProto(name=name)
    for k, (key, value) in enumerate(items, 1):
        t = TYPE_STRING if isinstance(value, str) else (TYPE_INT64 if fields[key].signed else TYPE_UINT64)
        d.field.add(name=key, number=k, type=t, label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    return d.SerializeToString()


def to_perfetto(capture: Path, generic: str = "descriptor", clock: int = 1) -> bytes:
    """The capture as Perfetto trace bytes; clock: the bundles' ftrace_clock (1 unknown: mobiperf's captures use
    the mono clock, which the FtraceClock enum has no name for; 0 boot, as traced_probes records)."""
    from perfetto.trace_builder.proto_builder import TraceProtoBuilder

    capture = Path(capture)
    builder = TraceProtoBuilder()
    stats = _stats(capture)
    info = builder.add_packet()
    info.system_info.utsname.sysname = "Linux"
    info.system_info.utsname.release = os.uname().release
    info.system_info.utsname.machine = os.uname().machine
    info.trusted_packet_sequence_id = 1
    snap = builder.add_packet()
    for clock_id, clk in ((6, time.CLOCK_BOOTTIME), (3, time.CLOCK_MONOTONIC), (1, time.CLOCK_REALTIME)):
        c = snap.clock_snapshot.clocks.add()
        c.clock_id, c.timestamp = clock_id, time.clock_gettime_ns(clk)
    snap.trusted_packet_sequence_id = 1
    tree = builder.add_packet()
    for pid, comm in sorted(saved_cmdlines(capture / "ftrace_raw" / "saved_cmdlines").items()):
        t = tree.process_tree.threads.add()
        t.tid, t.name = pid, comm.strip()
    tree.trusted_packet_sequence_id = 1
    _stats_packet(builder.add_packet(), 1, stats, "start")
    dynamic: dict = {}
    chunks = []  # (first ts, cpu, [records])
    current: dict[int, list] = {}
    for rec in _records(capture):
        cpu = rec[0]
        current.setdefault(cpu, []).append(rec)
        if len(current[cpu]) == BUNDLE_EVENTS:
            chunks.append((current[cpu][0][1], cpu, current.pop(cpu)))
    chunks += [(recs[0][1], cpu, recs) for cpu, recs in current.items()]
    for _, cpu, recs in sorted(chunks, key=lambda c: (c[0], c[1])):
        packet = builder.add_packet()
        packet.trusted_packet_sequence_id = 2 + cpu
        bundle = packet.ftrace_events
        bundle.cpu = cpu
        if clock:
            bundle.ftrace_clock = clock
        described = set()
        for _, stamp, name, system, row, fields in recs:
            ev = bundle.event.add()
            ev.timestamp = stamp
            ev.pid = row["common_pid"]
            _fill_event(ev, name, system, row, fields, generic, dynamic)
            key = (system, name)
            if key in dynamic and key not in described:
                number, items = dynamic[key]
                d = bundle.generic_event_descriptors.add()
                d.field_id, d.group_name = number, system
                d.event_descriptor = _descriptor(system, name, items, fields)
                described.add(key)
    _stats_packet(builder.add_packet(), 2, stats, "end")
    return builder.serialize()


def _stats(capture: Path) -> dict:
    path = capture / "ftrace_raw_stats.json"
    try:
        return json.loads(path.read_text()).get("per_cpu", {})
    except (OSError, ValueError):
        return {}


def _stats_packet(packet, phase: int, per_cpu: dict, which: str) -> None:
    packet.trusted_packet_sequence_id = 1
    packet.ftrace_stats.phase = phase
    for name, values in sorted(per_cpu.items()):
        c = packet.ftrace_stats.cpu_stats.add()
        c.cpu = int(name[3:]) if name[3:].isdigit() else 0
        if which == "end":
            c.overrun = int(values.get("overrun", 0))
            c.dropped_events = int(values.get("dropped events", 0))
            c.entries = int(values.get("entries", 0))


if __name__ == "__main__":
    import sys

    Path(sys.argv[2]).write_bytes(to_perfetto(Path(sys.argv[1]), *(sys.argv[3:4] or [])))
