"""The bodies of the scheduler's events read by a compiled scanner: a phone's trace holds hundreds of thousands of
sched_switch and sched_waking lines, and Polars' regular expressions over them cost seconds (parse/sched.py uses
these where the bodies are many, its patterns where they are few; tests hold the two equal).

scan_switch   `prev_comm=C prev_pid=P prev_prio=N prev_state=S ==> next_comm=C next_pid=P next_prio=N`: the
              fields found from the fixed markers (` prev_pid=`, ` prev_state=`, ` ==> next_comm=`, ` next_pid=`),
              the last of each where a comm repeats one (comm may hold spaces and `=`)
scan_wake     `comm=C pid=P prio=N [success=1 ]target_cpu=NNN`: comm and pid, from the last ` pid=`
Both read the Arrow buffers of a string column (offsets and bytes) and return, per row, the numbers and the byte
spans of the strings (start -1 where the row does not match), which ftrace_scan.gather_spans turns into columns.
"""

from __future__ import annotations

import numpy as np
from numba import njit


_SWITCH_HEAD = np.frombuffer(b"prev_comm=", np.uint8)
_PREV_PID = np.frombuffer(b" prev_pid=", np.uint8)
_PREV_STATE = np.frombuffer(b" prev_state=", np.uint8)
_ARROW = np.frombuffer(b" ==> next_comm=", np.uint8)
_NEXT_PID = np.frombuffer(b" next_pid=", np.uint8)
_WAKE_HEAD = np.frombuffer(b"comm=", np.uint8)
_PID = np.frombuffer(b" pid=", np.uint8)


@njit(cache=True, nogil=True)
def _starts_with(buf, lo, hi, pat):
    if hi - lo < len(pat):
        return False
    for k in range(len(pat)):
        if buf[lo + k] != pat[k]:
            return False
    return True


@njit(cache=True, nogil=True)
def _find_last(buf, lo, hi, pat):
    """The last position p in [lo, hi - len(pat)] where buf[p:p+len(pat)] == pat, else -1."""
    m = len(pat)
    p = hi - m
    while p >= lo:
        ok = True
        for k in range(m):
            if buf[p + k] != pat[k]:
                ok = False
                break
        if ok:
            return p
        p -= 1
    return -1


@njit(cache=True, nogil=True)
def _number(buf, p, hi):
    """(value, end) of a signed decimal at p; end == p when there is none."""
    neg = p < hi and buf[p] == 45
    q = p + 1 if neg else p
    v = np.int64(0)
    s = q
    while q < hi and 48 <= buf[q] <= 57:
        v = v * 10 + np.int64(buf[q] - 48)
        q += 1
    if q == s:
        return np.int64(0), p
    return (-v if neg else v), q


# One function per body: a per-byte walk from fixed markers, kept as one compiled loop each.
@njit(cache=True, nogil=True)
def scan_switch(buf, offsets, n):
    pids = np.full((n, 2), -1, np.int64)
    spans = np.full((n, 6), -1, np.int64)  # prev_comm, prev_state, next_comm: (start, end) each
    for i in range(n):
        lo, hi = offsets[i], offsets[i + 1]
        while hi > lo and (buf[hi - 1] == 32 or buf[hi - 1] == 10 or buf[hi - 1] == 13):
            hi -= 1
        if not _starts_with(buf, lo, hi, _SWITCH_HEAD):
            continue
        a = _find_last(buf, lo, hi, _ARROW)
        if a < 0:
            continue
        st = _find_last(buf, lo, a, _PREV_STATE)
        pp = _find_last(buf, lo, st if st >= 0 else a, _PREV_PID)
        q = _find_last(buf, a, hi, _NEXT_PID)
        if st < 0 or pp < 0 or q < 0:
            continue
        prev, e1 = _number(buf, pp + len(_PREV_PID), st)
        nxt, e2 = _number(buf, q + len(_NEXT_PID), hi)
        if e1 == pp + len(_PREV_PID) or e2 == q + len(_NEXT_PID):
            continue
        pids[i, 0] = prev
        pids[i, 1] = nxt
        spans[i, 0] = lo + len(_SWITCH_HEAD)
        spans[i, 1] = pp
        spans[i, 2] = st + len(_PREV_STATE)
        spans[i, 3] = a
        spans[i, 4] = a + len(_ARROW)
        spans[i, 5] = q
    return pids, spans


@njit(cache=True, nogil=True)
def scan_wake(buf, offsets, n):
    tids = np.full(n, -1, np.int64)
    spans = np.full((n, 2), -1, np.int64)  # comm (start, end)
    for i in range(n):
        lo, hi = offsets[i], offsets[i + 1]
        if not _starts_with(buf, lo, hi, _WAKE_HEAD):
            continue
        q = _find_last(buf, lo, hi, _PID)
        if q < 0:
            continue
        tid, e = _number(buf, q + len(_PID), hi)
        if e == q + len(_PID) or e >= hi or buf[e] != 32:
            continue
        tids[i] = tid
        spans[i, 0] = lo + len(_WAKE_HEAD)
        spans[i, 1] = q
    return tids, spans


# -- from Polars and back ------------------------------------------------------------------------------------------

def body_buffers(body) -> tuple[np.ndarray, np.ndarray]:
    """(bytes, offsets) of a Polars string Series, as its Arrow buffers (no copy of the strings)."""
    import pyarrow as pa

    arr = body.to_arrow()
    if arr.type != pa.large_string():
        arr = arr.cast(pa.large_string())
    arr = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    offsets = np.frombuffer(arr.buffers()[1], np.int64)[arr.offset:arr.offset + len(arr) + 1]
    data = arr.buffers()[2]
    return (np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)), offsets


def span_strings(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, name: str):
    """A Polars string Series of the byte spans (null where a span's start is < 0)."""
    import polars as pl
    import pyarrow as pa

    from mobiperf.collectors.parse.ftrace_scan import gather_spans

    offsets, data, ascii_only = gather_spans(buf, np.ascontiguousarray(starts), np.ascontiguousarray(ends))
    arr = pa.LargeStringArray.from_buffers(len(offsets) - 1, pa.py_buffer(offsets), pa.py_buffer(data))
    if not ascii_only:
        try:
            arr.validate(full=True)
        except pa.ArrowInvalid:
            raw = bytes(data)
            return pl.Series(name, [raw[offsets[i]:offsets[i + 1]].decode(errors="replace")
                                    for i in range(len(offsets) - 1)], dtype=pl.Utf8)
    out = pl.Series(name, pl.from_arrow(arr), dtype=pl.Utf8)
    return out.set(pl.Series(starts < 0), None) if (starts < 0).any() else out
