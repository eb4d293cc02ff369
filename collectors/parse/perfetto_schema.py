"""What the Perfetto trace protos say, as plain tables: field numbers, names and types, taken at import from the
protos the `perfetto` PyPI package ships (perfetto.protos.perfetto.trace.perfetto_trace_pb2, the compiled
descriptors of perfetto's protos/perfetto/trace/*.proto). Nothing is fetched and no number is written by hand:
a newer package with new ftrace events gives their decoders too.

  ftrace_event_types()   FtraceEvent's event field number -> MessageLayout (event name, fields by name)
  packet_field(name)     a TracePacket field number (ftrace_events, process_tree, clock_snapshot, ...)
  MessageLayout          a message's fields: number, proto type, repeated; the slots decode_fields() fills

Dynamic (v50+ "denser generic") events describe themselves with a serialised DescriptorProto in their bundle;
layout_from_descriptor() makes the same MessageLayout of one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from mobiperf.collectors.parse.perfetto_wire import KIND_INT, KIND_STR
from mobiperf.core.perfetto_protos import message_class, trace_protos

# google.protobuf FieldDescriptor types (descriptor.proto's FieldDescriptorProto.Type)
TYPE_STRING, TYPE_BYTES, TYPE_MESSAGE = 9, 12, 11
TYPE_SINT32, TYPE_SINT64, TYPE_SFIXED32, TYPE_FIXED32, TYPE_INT32, TYPE_BOOL = 17, 18, 15, 7, 5, 8
REPEAT_SLOTS = 6  # occurrences of a repeated scalar kept (sys_enter's args: the kernel's six arguments)


@dataclass(frozen=True)
class FieldLayout:
    name: str
    number: int
    type: int
    repeated: bool = False

    @property
    def is_string(self) -> bool:
        return self.type in (TYPE_STRING, TYPE_BYTES)


@dataclass(eq=False)  # hashed by identity: one object per distinct layout
class MessageLayout:
    """One event message: its name, fields, and the slot plan of perfetto_wire.decode_fields()."""
    name: str
    fields: dict[str, FieldLayout] = field(default_factory=dict)
    group: str = ""  # the tracefs system where known (dynamic events name it)

    @property
    def plan(self) -> tuple:
        """(slot_of by field number, slot kinds, slot repeats, slot columns, int columns, string columns, first
        slot by field name): the arguments of perfetto_wire.decode_fields()."""
        if getattr(self, "_plan", None) is None:
            kinds, repeats, cols, first = [], [], [], {}
            n_int = n_str = 0
            for f in self.fields.values():
                if f.type == TYPE_MESSAGE:
                    continue
                reps = REPEAT_SLOTS if f.repeated and not f.is_string else 1
                first[f.name] = len(kinds)
                kinds += [KIND_STR if f.is_string else KIND_INT] * reps
                repeats += [reps] + [0] * (reps - 1)
                if f.is_string:
                    cols.append(n_str)
                    n_str += 1
                else:
                    cols += [n_int + k for k in range(reps)]
                    n_int += reps
            slot_of = np.full(max([self.fields[n].number for n in first] or [0]) + 1, -1, np.int64)
            for name, slot in first.items():
                slot_of[self.fields[name].number] = slot
            self._plan = (slot_of, np.array(kinds, np.int64), np.array(repeats, np.int64), np.array(cols, np.int64),
                          n_int, n_str, first)
        return self._plan

    def only(self, names) -> "MessageLayout":
        """The same message with only these fields decoded (the others are skipped on the wire)."""
        key = tuple(sorted(names))
        cache = self.__dict__.setdefault("_only", {})
        if key not in cache:
            cache[key] = MessageLayout(self.name, {n: f for n, f in self.fields.items() if n in names}, self.group)
        return cache[key]


def _message_layout(descriptor, name: str | None = None) -> MessageLayout:
    layout = MessageLayout(name or descriptor.name)
    for f in descriptor.fields:
        layout.fields[f.name] = FieldLayout(f.name, f.number, f.type, bool(f.is_repeated))
    return layout


@lru_cache(maxsize=1)
def _pb2():
    return trace_protos()


@lru_cache(maxsize=1)
def ftrace_event_types() -> dict[int, MessageLayout]:
    """FtraceEvent's typed events by field number: the oneof `event` (block_rq_issue, print, generic, ...)."""
    desc = _pb2().FtraceEvent.DESCRIPTOR
    out = {}
    for f in desc.fields:
        if f.type == TYPE_MESSAGE and f.containing_oneof is not None:
            out[f.number] = _message_layout(f.message_type, f.name)
    return out


@lru_cache(maxsize=None)
def packet_field(name: str) -> int:
    return _pb2().TracePacket.DESCRIPTOR.fields_by_name[name].number


@lru_cache(maxsize=1)
def wire_numbers() -> np.ndarray:
    """The field numbers perfetto_wire.scan_trace() walks by, in its order."""
    pb = _pb2()
    packet, bundle, event = (pb.TracePacket.DESCRIPTOR.fields_by_name, pb.FtraceEventBundle.DESCRIPTOR.fields_by_name,
                             pb.FtraceEvent.DESCRIPTOR.fields_by_name)
    names = [(packet, "timestamp"), (packet, "ftrace_events"), (packet, "previous_packet_dropped"), (bundle, "cpu"),
             (bundle, "event"), (bundle, "lost_events"), (bundle, "ftrace_clock"),
             (bundle, "generic_event_descriptors"), (event, "timestamp"), (event, "pid")]
    return np.array([fields[name].number for fields, name in names], np.int64)


@lru_cache(maxsize=1)
def generic_numbers() -> np.ndarray:
    """GenericFtraceEvent's event_name and field, its Field's name, str_value, int_value, uint_value."""
    pb = _pb2()
    event = pb.GenericFtraceEvent.DESCRIPTOR.fields_by_name
    field = pb.GenericFtraceEvent.Field.DESCRIPTOR.fields_by_name
    return np.array([event["event_name"].number, event["field"].number, field["name"].number,
                     field["str_value"].number, field["int_value"].number, field["uint_value"].number], np.int64)


@lru_cache(maxsize=1)
def trace_packet_number() -> int:
    return _pb2().Trace.DESCRIPTOR.fields_by_name["packet"].number


@lru_cache(maxsize=None)
def event_field(name: str) -> int:
    """The FtraceEvent field number of an event name (KeyError for events the protos do not type)."""
    return _pb2().FtraceEvent.DESCRIPTOR.fields_by_name[name].number


def decode_message(name: str, data: bytes):
    """One message of the trace protos (ProcessTree, ClockSnapshot ...) from its bytes; None if they do not
    parse (a corrupt packet is then left out, never an exception)."""
    from google.protobuf.message import DecodeError

    cls = message_class(name) if "." not in name else _nested(name)
    try:
        return cls.FromString(data)
    except (DecodeError, ValueError):
        return None


def _nested(name: str):
    outer, inner = name.split(".", 1)
    return getattr(message_class(outer), inner)


def layout_from_descriptor(data: bytes, group: str = "") -> MessageLayout | None:
    """The layout of a dynamic event from its serialised google.protobuf.DescriptorProto (None if corrupt)."""
    from google.protobuf import descriptor_pb2
    from google.protobuf.message import DecodeError

    try:
        proto = descriptor_pb2.DescriptorProto.FromString(data)
    except DecodeError:
        return None
    layout = MessageLayout(proto.name, group=group)
    for f in proto.field:
        layout.fields[f.name] = FieldLayout(f.name, f.number, f.type, f.label == f.LABEL_REPEATED)
    return layout


def int_values(raw: np.ndarray, f: FieldLayout) -> np.ndarray:
    """A field's int64 column from the wire bits: zigzag for sint types, sign for 32-bit signed fixed and int32
    (a negative int32 is sent as a 10-byte varint, already right as int64)."""
    if f.type in (TYPE_SINT32, TYPE_SINT64):
        u = raw.view(np.uint64)
        return ((u >> np.uint64(1)) ^ (np.uint64(0) - (u & np.uint64(1)))).view(np.int64)
    if f.type == TYPE_SFIXED32:
        return raw.astype(np.int32).astype(np.int64)
    if f.type == TYPE_INT32:
        return raw.astype(np.int32).astype(np.int64)
    return raw
