"""Is a file a Perfetto trace? A look at its first bytes, cheap enough for every input `mobiperf ingest` sniffs:
no numba, no protos (collectors/parse/perfetto_trace.py reads the trace itself).

A Trace is a sequence of TracePacket fields (field 1, wire type 2: tag 0x0a); a file is taken for one when it
starts with such a field of a sane length whose content parses as protobuf fields as far as the head goes, when
it is a gzip of such bytes, or when it is a zip (a bugreport) with a member named like a Perfetto trace.
"""

from __future__ import annotations

import gzip
import io
import zipfile
import zlib
from pathlib import Path


def trace_members(zf: zipfile.ZipFile) -> list[zipfile.ZipInfo]:
    """The members of a zip that hold a Perfetto trace, by name (bugreports: perfetto-traces/, .pftrace ...)."""
    def looks(name: str) -> bool:
        low = name.lower()
        return low.endswith((".pftrace", ".perfetto-trace", ".perfetto", ".pb", ".pftrace.gz")) or \
            "perfetto-trace" in low
    return [m for m in zf.infolist() if not m.is_dir() and looks(m.filename) and m.file_size]


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
