"""Text columns written by one compiled pass: literal pieces, integer columns (printf's d i u x X o with the
flags - 0 # and a width) and string columns, concatenated row by row straight into Arrow (offsets, data)
buffers. The writer of print_fmt.render(); a part is a str (a literal), a tuple (values, unsigned, base, upper,
alt, zero, left, width) or a Utf8 Series.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa
from numba import njit


def concat_text(parts: list, n: int) -> pl.Series:
    """One Utf8 column of n rows: the parts of every row, in order."""
    if not n:
        return pl.Series("body", [], dtype=pl.Utf8)
    lit_bytes, kinds, lit_at, int_at, str_at = bytearray(), [], [], [], []
    ints, int_specs, str_offsets, str_datas = [], [], [], []
    for part in parts:
        if isinstance(part, str):
            raw = part.encode()
            kinds.append(0)
            lit_at.append((len(lit_bytes), len(lit_bytes) + len(raw)))
            lit_bytes += raw
            int_at.append(0)
            str_at.append(0)
        elif isinstance(part, tuple):
            kinds.append(1)
            lit_at.append((0, 0))
            int_at.append(len(ints))
            str_at.append(0)
            ints.append(part[0])
            int_specs.append([int(x) for x in part[1:]])
        else:
            arr = (part.fill_null("") if part.null_count() else part).to_arrow()
            if isinstance(arr, pa.ChunkedArray):
                arr = arr.combine_chunks()
            arr = arr.cast(pa.large_string())
            bufs = arr.buffers()
            offs = np.frombuffer(bufs[1], np.int64)[arr.offset:arr.offset + n + 1]
            data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
            kinds.append(2)
            lit_at.append((0, 0))
            int_at.append(0)
            str_at.append(len(str_offsets))
            str_offsets.append(offs)
            str_datas.append(data)
    int_matrix = np.stack(ints) if ints else np.zeros((0, n), np.int64)
    spec_matrix = np.array(int_specs, np.int64).reshape(-1, 7)
    str_base = np.cumsum([0] + [len(d) for d in str_datas]).astype(np.int64)
    str_data = np.concatenate(str_datas) if str_datas else np.zeros(0, np.uint8)
    str_offs = np.stack(str_offsets) if str_offsets else np.zeros((0, n + 1), np.int64)
    offsets, data = _write_rows(np.frombuffer(bytes(lit_bytes), np.uint8) if lit_bytes else np.zeros(0, np.uint8),
                                np.array(kinds, np.int64), np.array(lit_at, np.int64).reshape(-1, 2),
                                np.array(int_at, np.int64), np.array(str_at, np.int64), int_matrix, spec_matrix,
                                str_offs, str_data, str_base, n)
    arr = pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data))
    return pl.Series("body", pl.from_arrow(arr), dtype=pl.Utf8)


@njit(cache=True, nogil=True)
def _write_int(out, o, digits, value, unsigned, base, upper, alt, zero, left, width):
    neg = False
    if unsigned:
        u = np.uint64(value)
    elif value < 0:
        neg = True
        u = np.uint64(-(value + 1)) + np.uint64(1)  # |INT64_MIN| too
    else:
        u = np.uint64(value)
    nd = 0
    b = np.uint64(base)
    while True:
        d = np.int64(u % b)
        digits[nd] = (48 + d) if d < 10 else ((55 if upper else 87) + d)
        nd += 1
        u = u // b
        if u == 0:
            break
    prefix = 1 if neg else 0
    if alt and base == 16:
        prefix += 2
    elif alt and base == 8 and digits[nd - 1] != 48:
        prefix += 1
    pad = width - nd - prefix
    if pad > 0 and not left and not zero:
        for _ in range(pad):
            out[o] = 32
            o += 1
    if neg:
        out[o] = 45
        o += 1
    if alt and base == 16:
        out[o] = 48
        out[o + 1] = 88 if upper else 120
        o += 2
    elif alt and base == 8 and digits[nd - 1] != 48:
        out[o] = 48
        o += 1
    if pad > 0 and zero and not left:
        for _ in range(pad):
            out[o] = 48
            o += 1
    for k in range(nd - 1, -1, -1):
        out[o] = digits[k]
        o += 1
    if pad > 0 and left:
        for _ in range(pad):
            out[o] = 32
            o += 1
    return o


@njit(cache=True, nogil=True)
def _write_rows(lits, kinds, lit_at, int_at, str_at, ints, specs, str_offs, str_data, str_base, n):
    """Every row's text, piece after piece, into Arrow (offsets, data) buffers."""
    fixed = 0
    for p in range(len(kinds)):
        if kinds[p] == 0:
            fixed += lit_at[p, 1] - lit_at[p, 0]
        elif kinds[p] == 1:
            fixed += 24 + max(specs[int_at[p], 6], 0)
    total = fixed * n
    for p in range(len(kinds)):
        if kinds[p] == 2:
            total += str_offs[str_at[p], n] - str_offs[str_at[p], 0]
    out = np.empty(total, np.uint8)
    offsets = np.zeros(n + 1, np.int64)
    digits = np.empty(24, np.uint8)
    o = 0
    for i in range(n):
        for p in range(len(kinds)):
            k = kinds[p]
            if k == 0:
                for j in range(lit_at[p, 0], lit_at[p, 1]):
                    out[o] = lits[j]
                    o += 1
            elif k == 1:
                q = int_at[p]
                o = _write_int(out, o, digits, ints[q, i], specs[q, 0] != 0, specs[q, 1], specs[q, 2] != 0,
                               specs[q, 3] != 0, specs[q, 4] != 0, specs[q, 5] != 0, specs[q, 6])
            else:
                q = str_at[p]
                base = str_base[q]
                for j in range(str_offs[q, i], str_offs[q, i + 1]):
                    out[o] = str_data[base + j]
                    o += 1
        offsets[i + 1] = o
    return offsets, out[:o]
