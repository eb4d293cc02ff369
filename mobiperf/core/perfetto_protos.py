"""Perfetto's trace protos, as the `perfetto` PyPI package ships them compiled (perfetto_trace_pb2): the one place
that loads them, for the trace reader (collectors/parse/perfetto_schema.py), the recorder's TraceConfig
(collectors/perfetto.py) and the exporter's TrackEvents (reports/perfetto_track.py)."""

from __future__ import annotations


def trace_protos():
    """The perfetto_trace_pb2 module (protos/perfetto/trace/*.proto compiled)."""
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2

    return perfetto_trace_pb2


def message_class(name: str):
    """A message class of the trace protos (TracePacket, TraceConfig, ProcessTree, ...)."""
    return getattr(trace_protos(), name)
