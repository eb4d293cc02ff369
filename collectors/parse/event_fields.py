"""The fields of many binary ftrace records of one event type, as columns (one compiled pass per field).

Input: the page buffer, each record's payload offset and length (from the page walk), and the event's format
(event_format.py). Integers come out as int64 columns holding the field's bits (sign-extended for signed fields;
u64 values above 2**63 keep their bits, negative in int64), strings as Polars Utf8 columns built straight from
Arrow buffers. A field that runs past a short payload reads as 0 / "" for that record.

  char x[N]                a C string: up to the first NUL within N bytes
  __data_loc char[] x      u32 (length << 16 | offset): the bytes at offset, up to the first NUL within length
  __rel_loc char[] x       the same, the offset counted from the end of the u32
  char buf[] (size 0)      up to the first NUL before the payload's end (ftrace print)
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa
from numba import njit

from mobiperf.collectors.parse.event_format import FieldFormat
from mobiperf.collectors.parse.ftrace_scan import gather_spans


@njit(cache=True, nogil=True)
def read_ints(buf, offs, lens, field_off, size, signed):
    """A little-endian integer field of every record (0 where the payload is too short)."""
    out = np.zeros(len(offs), np.int64)
    for i in range(len(offs)):
        if field_off + size > lens[i]:
            continue
        p = offs[i] + field_off
        v = np.uint64(0)
        for j in range(size):
            v |= np.uint64(buf[p + j]) << np.uint64(8 * j)
        if signed and size < 8 and (v >> np.uint64(8 * size - 1)) & np.uint64(1):
            out[i] = np.int64(v) - (np.int64(1) << np.int64(8 * size))
        else:
            out[i] = np.int64(v)  # u64 above 2**63: the bits, read back with .view(np.uint64)
    return out


@njit(cache=True, nogil=True)
def read_int_fields(buf, offs, lens, field_offs, sizes, signed):
    """Several integer fields of every record in one pass (each record's bytes are read while in cache):
    row k of the result is field k, as read_ints() gives it."""
    out = np.zeros((len(field_offs), len(offs)), np.int64)
    for i in range(len(offs)):
        base = offs[i]
        for k in range(len(field_offs)):
            size = sizes[k]
            if field_offs[k] + size > lens[i]:
                continue
            p = base + field_offs[k]
            v = np.uint64(0)
            for j in range(size):
                v |= np.uint64(buf[p + j]) << np.uint64(8 * j)
            if signed[k] and size < 8 and (v >> np.uint64(8 * size - 1)) & np.uint64(1):
                out[k, i] = np.int64(v) - (np.int64(1) << np.int64(8 * size))
            else:
                out[k, i] = np.int64(v)
    return out


@njit(cache=True, nogil=True)
def string_spans(buf, offs, lens, field_off, size, loc, relative):
    """[start, end) of a C string field of every record; loc: a __data_loc/__rel_loc u32 gives its place."""
    starts = np.zeros(len(offs), np.int64)
    ends = np.zeros(len(offs), np.int64)
    for i in range(len(offs)):
        base = offs[i]
        limit = base + lens[i]
        if loc:
            if field_off + 4 > lens[i]:
                continue
            p = base + field_off
            word = np.int64(buf[p]) | (np.int64(buf[p + 1]) << 8) | (np.int64(buf[p + 2]) << 16) | \
                (np.int64(buf[p + 3]) << 24)
            s = base + (word & 0xFFFF) + (field_off + 4 if relative else 0)
            e = min(s + (word >> 16), limit)
        else:
            s = base + field_off
            e = limit if size == 0 else min(s + size, limit)
        if s >= e:
            continue
        k = s
        while k < e and buf[k] != 0:
            k += 1
        starts[i] = s
        ends[i] = k
    return starts, ends


def strings(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> pl.Series:
    """A Utf8 column of byte spans, through Arrow buffers (bytes that are not UTF-8 become U+FFFD)."""
    offsets, chars, ascii_only = gather_spans(buf, starts, ends)
    arr = pa.LargeStringArray.from_buffers(len(starts), pa.py_buffer(offsets), pa.py_buffer(chars))
    if not ascii_only:
        try:
            arr.validate(full=True)
        except pa.ArrowInvalid:
            raw = bytes(chars)
            return pl.Series([raw[offsets[i]:offsets[i + 1]].decode("utf-8", errors="replace")
                              for i in range(len(starts))], dtype=pl.Utf8)
    return pl.Series(pl.from_arrow(arr), dtype=pl.Utf8)


def decode_int_fields(buf: np.ndarray, offs: np.ndarray, lens: np.ndarray, fields: list[FieldFormat]) -> dict:
    """Every int field in fields, read in one pass over the records: name -> int64 column."""
    ints = [f for f in fields if f.kind == "int"]
    if not ints:
        return {}
    table = read_int_fields(buf, offs, lens, np.array([f.offset for f in ints], np.int64),
                            np.array([f.size for f in ints], np.int64), np.array([f.signed for f in ints], np.bool_))
    return {f.name: table[k] for k, f in enumerate(ints)}


def decode_field(buf: np.ndarray, offs: np.ndarray, lens: np.ndarray, f: FieldFormat):
    """One field of every record: an int64 numpy column (kind int) or a Utf8 Series (kind string)."""
    if f.kind == "int":
        return read_ints(buf, offs, lens, f.offset, f.size, f.signed)
    if f.kind == "string":
        s, e = string_spans(buf, offs, lens, f.offset, f.size, f.loc, f.relative)
        return strings(buf, s, e)
    raise ValueError(f"field {f.name} ({f.kind}) has no column form")

