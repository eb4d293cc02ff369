"""The compiled core of the ftrace text parser: structural byte scans of whole files, no regex.

Two numba-compiled passes over the file's bytes (a numpy uint8 array):

  scan_trace      one pass over every line: comm span, pid, cpu, timestamp (ns), event name (span and hash) and
                  the start of the body (after `event:`, or the `(args)` / `-> ret` of the kernel's syscall lines).
                  The header is found structurally: the first `-digits` followed by
                  spaces, an optional `(tgid)` and `[cpu]`; then an optional flags column (irq-info, 4 or 5
                  characters, or trace-cmd's latency flags), `secs.frac:` (6 digits from the kernel, 9 from
                  trace-cmd -t or converters), `event:`.
  scan_block      the body of each block event, per body kind (see BODY_KINDS), into integer columns and the
                  spans of the rwbs and comm strings.

Every index is checked against the line's end before it is read: these functions run on arbitrary bytes
(they are fuzzed) and must never read out of bounds. A line the scanners reject is not an error here: the
caller sends it to the regex parser (the slow, obviously-correct path), which either parses or counts it.

Why numba: a per-byte state machine is what a text trace needs (comm may contain anything, fields vary by kernel),
and it runs 10-20x faster than regex captures; numba installs from PyPI as a wheel (no compiler, no network at
install time) and caches the compiled code next to this file.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# Body kinds of block events (the index is the kind number the scanner takes).
BODY_KINDS = ("bio", "rq", "rq_done", "split", "plug", "unplug")
KIND_BIO, KIND_RQ, KIND_RQ_DONE, KIND_SPLIT, KIND_PLUG, KIND_UNPLUG = range(6)

LINE_SKIP, LINE_OK, LINE_BAD = 0, 1, 2  # blank or `#` comment / parsed header / header not recognised
_MAX_I64 = np.uint64((1 << 63) - 1)
_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)


@njit(cache=True, nogil=True)
def _is_digit(c):
    return 48 <= c <= 57


@njit(cache=True, nogil=True)
def _parse_uint(buf, p, e, max_digits):
    """(value, end): the decimal number at p, or end == p if there is none (or it is too long)."""
    v = np.uint64(0)
    q = p
    while q < e and _is_digit(buf[q]):
        if q - p >= max_digits:
            return np.uint64(0), p
        v = v * np.uint64(10) + np.uint64(buf[q] - 48)
        q += 1
    return v, q


@njit(cache=True, nogil=True)
def _skip_spaces(buf, p, e):
    while p < e and buf[p] == 32:
        p += 1
    return p


@njit(cache=True, nogil=True)
def _match_header_tail(buf, q, e, out):
    """Match `-pid  [(tgid)] [cpu] [flags] secs.frac: event:` at q (the dash). Fills out[0..6]; False if no match.

    out: pid, cpu, ts_ns, event_start, event_end, body_start, and (where out has a 7th slot) the tgid, -1 when
    the line has none (no column, or atrace's `(-----)`).
    """
    pid, r = _parse_uint(buf, q + 1, e, 10)
    if r == q + 1 or r >= e or buf[r] != 32:
        return False
    r = _skip_spaces(buf, r, e)
    tgid = np.int64(-1)
    if r < e and buf[r] == 40:  # '(' tgid ')'
        r += 1
        while r < e and (buf[r] == 32 or buf[r] == 45 or _is_digit(buf[r])):
            if _is_digit(buf[r]):
                tgid = (tgid if tgid >= 0 else np.int64(0)) * 10 + np.int64(buf[r] - 48)
            r += 1
        if r >= e or buf[r] != 41:
            return False
        r = _skip_spaces(buf, r + 1, e)
    if len(out) > 6:
        out[6] = tgid
    if r >= e or buf[r] != 91:  # '['
        return False
    cpu, r2 = _parse_uint(buf, r + 1, e, 6)
    if r2 == r + 1 or r2 >= e or buf[r2] != 93:  # ']'
        return False
    r = r2 + 1
    if r >= e or buf[r] != 32:
        return False
    r = _skip_spaces(buf, r, e)
    # The timestamp, possibly after a flags column (a short token that is not itself a timestamp).
    for attempt in range(2):
        secs, t = _parse_uint(buf, r, e, 12)
        if t > r and t < e and buf[t] == 46:  # '.'
            frac, f = _parse_uint(buf, t + 1, e, 9)
            ndig = f - (t + 1)
            if ndig > 0 and f < e and buf[f] == 58:  # ':'
                scale = np.uint64(1)
                for _ in range(9 - ndig):
                    scale *= np.uint64(10)
                out[2] = np.int64(secs * np.uint64(1_000_000_000) + frac * scale)
                r = _skip_spaces(buf, f + 1, e)
                break
        if attempt == 1:
            return False
        # Skip the flags token (e.g. `d..2.`), at most 8 characters, then the spaces after it.
        s = r
        while r < e and buf[r] != 32:
            r += 1
        if r == s or r - s > 8 or r >= e:
            return False
        r = _skip_spaces(buf, r, e)
    ev = r
    while r < e and (_is_digit(buf[r]) or 65 <= buf[r] <= 90 or 97 <= buf[r] <= 122 or buf[r] == 95):
        r += 1
    if r == ev or r >= e:
        return False
    if buf[r] == 58:  # `event: body`
        body = _skip_spaces(buf, r + 1, e)
    elif buf[r] == 40:  # the kernel's own syscall output: `sys_write(fd: 1, ...)`
        body = r
    elif r + 2 < e and buf[r] == 32 and buf[r + 1] == 45 and buf[r + 2] == 62:  # `sys_write -> 0x5`
        body = r + 1
    else:
        return False
    out[0] = np.int64(pid)
    out[1] = np.int64(cpu)
    out[3] = ev
    out[4] = r
    out[5] = body
    return True


@njit(cache=True, nogil=True)
def _dev(buf, p, e, row, cols):
    """`major,minor rwbs ` at p: fills cols[row, 0..1] and the rwbs span; returns the position after, or -1."""
    major, q = _parse_uint(buf, p, e, 6)
    if q == p or q >= e or buf[q] != 44:
        return -1
    minor, r = _parse_uint(buf, q + 1, e, 8)
    if r == q + 1 or r >= e or buf[r] != 32:
        return -1
    r += 1
    w = r
    while r < e and buf[r] != 32:
        r += 1
    if r == w or r - w > 16 or r >= e:
        return -1
    cols[row, 0] = np.int64(major)
    cols[row, 1] = np.int64(minor)
    cols[row, 7] = w
    cols[row, 8] = r
    return r + 1


@njit(cache=True, nogil=True)
def _sector(buf, p, e):
    """A u64 sector as int64 (-1 for values above 2**63-1, e.g. (sector_t)-1 on flushes) and the end."""
    v, q = _parse_uint(buf, p, e, 20)
    if q == p:
        return np.int64(0), p
    if q - p == 20 and v < np.uint64(10_000_000_000_000_000_000):  # wrapped: beyond u64
        return np.int64(0), p
    if v > _MAX_I64:
        return np.int64(-1), q
    return np.int64(v), q


@njit(cache=True, nogil=True)
def _expect(buf, p, e, a, b, c):
    """p if the bytes at p are a, b, c (c < 0: only two), else -1."""
    if p + 1 >= e or buf[p] != a or buf[p + 1] != b:
        return -1
    if c < 0:
        return p + 2
    if p + 2 >= e or buf[p + 2] != c:
        return -1
    return p + 3


@njit(cache=True, nogil=True)
def _sector_range(buf, p, e, row, cols):
    """`sector + nr` at p; returns the position after nr, or -1."""
    sec, q = _sector(buf, p, e)
    if q == p:
        return -1
    q = _expect(buf, q, e, 32, 43, 32)  # ' + '
    if q < 0:
        return -1
    nr, r = _parse_uint(buf, q, e, 10)
    if r == q or nr > np.uint64(0xFFFFFFFF):
        return -1
    cols[row, 2] = sec
    cols[row, 3] = np.int64(nr)
    return r


@njit(cache=True, nogil=True)
def _bracket_tail(buf, p, e, row, cols, as_error):
    """` [comm]` (or ` [error]`) at p, ending the line; an ioprio token (`be,0,4`, `0x2,0,4`) may come first."""
    if p + 1 < e and buf[p] == 32 and buf[p + 1] != 91:
        q = p + 1
        comma = 0
        while q < e and buf[q] != 32:
            if buf[q] == 44:
                comma += 1
            q += 1
        if comma != 2:
            return False
        p = q
    if p + 1 >= e or buf[p] != 32 or buf[p + 1] != 91 or buf[e - 1] != 93 or e - 1 < p + 2:
        return False
    if as_error:
        neg = p + 2 < e and buf[p + 2] == 45
        start = p + 3 if neg else p + 2
        v, q = _parse_uint(buf, start, e, 10)
        if q == start or q != e - 1:
            return False
        cols[row, 6] = -np.int64(v) if neg else np.int64(v)
    else:
        cols[row, 9] = p + 2
        cols[row, 10] = e - 1
    return True


@njit(cache=True, nogil=True)
def _cmd(buf, p, e):
    """`(cmd) ` at p; returns the position after the space, or -1."""
    if p >= e or buf[p] != 40:
        return -1
    q = p + 1
    while q < e and buf[q] != 41:
        q += 1
    if q + 1 >= e or buf[q + 1] != 32:
        return -1
    return q + 2


@njit(cache=True, nogil=True)
def _block_body(buf, p, e, k, i, cols):
    """Parse one block event body [p, e) of kind k into cols[i]; False if it does not match.

    cols: major minor sector nr_sector bytes new_sector error rwbs_s rwbs_e comm_s comm_e
    (-1 where the event has no such field; comm -1 means "use the header's comm").
    """
    for c in range(11):
        cols[i, c] = -1
    cols[i, 6] = 0
    if k == KIND_PLUG:
        if e - p >= 2 and buf[p] == 91 and buf[e - 1] == 93:
            cols[i, 9] = p + 1
            cols[i, 10] = e - 1
            return True
        return False
    if k == KIND_UNPLUG:
        q = e
        while q > p and _is_digit(buf[q - 1]):
            q -= 1
        if q < e and e - q <= 10 and q - 2 > p and buf[q - 1] == 32 and buf[q - 2] == 93 and buf[p] == 91:
            cols[i, 9] = p + 1
            cols[i, 10] = q - 2
            return True
        return False
    r = _dev(buf, p, e, i, cols)
    if r < 0:
        return False
    if k == KIND_BIO:
        r = _sector_range(buf, r, e, i, cols)
        # bio events have no ioprio: the comm bracket must follow the sector count directly.
        return r >= 0 and r + 1 < e and buf[r + 1] == 91 and _bracket_tail(buf, r, e, i, cols, False)
    if k == KIND_RQ:
        nbytes, q = _parse_uint(buf, r, e, 10)
        if q == r or q >= e or buf[q] != 32 or nbytes > np.uint64(0xFFFFFFFF):
            return False
        cols[i, 4] = np.int64(nbytes)
        q = _cmd(buf, q + 1, e)
        if q < 0:
            return False
        q = _sector_range(buf, q, e, i, cols)
        return q >= 0 and _bracket_tail(buf, q, e, i, cols, False)
    if k == KIND_RQ_DONE:
        q = _cmd(buf, r, e)
        if q < 0:
            return False
        q = _sector_range(buf, q, e, i, cols)
        return q >= 0 and _bracket_tail(buf, q, e, i, cols, True)
    if k == KIND_SPLIT:
        sec, q = _sector(buf, r, e)
        if q == r:
            return False
        q = _expect(buf, q, e, 32, 47, 32)  # ' / '
        if q < 0:
            return False
        new, t = _sector(buf, q, e)
        if t == q:
            return False
        cols[i, 2] = sec
        cols[i, 5] = new
        return t + 1 < e and buf[t + 1] == 91 and _bracket_tail(buf, t, e, i, cols, False)
    return False


def line_count(buf, newlines) -> int:
    """Lines of the file: one per newline, and a last one if the file does not end in a newline."""
    return len(newlines) + (1 if len(buf) and buf[-1] != 10 else 0)


# One function on purpose: numba compiles it to a single loop over the buffer; split into calls, the per-line
# state (header fields, event id, block fields) would cross function boundaries numba does not inline.
@njit(cache=True, nogil=True)
def scan_trace(buf, newlines, first, stop, known_hash, known_kind):
    """One pass over lines [first, stop): event ids, the parsed block events, the header of every other line.

    newlines: the offsets of every b"\\n" in buf (see find_newlines). Lines are numbered from the file's start,
    and every offset is into buf, so the scans of disjoint line ranges (run on several threads: nogil) join
    by concatenation once their event ids are mapped to one numbering (see ftrace_text).
    known_hash/known_kind: FNV-1a hashes of the block event names and their body kinds (BODY_KINDS index).
    Returns (n_lines, events, block, text, bad), each table a tuple of equal-length column arrays:
      events: the byte offset of the first line of each event id, its kind (-1: not a block event)
      block:  line, ts, cpu, pid, event id, major, minor, sector, nr_sector, size_bytes, error,
              comm offsets, comm bytes, rwbs offsets, rwbs bytes, all ascii
                                                (block lines whose body parsed; the strings as Arrow buffers)
      text:   line, ts, cpu, pid, comm start, comm end, event id, body start, body end
                                                                (every other line with a header)
      bad:    line, start, end                                  (lines without a recognisable header)
    n_lines counts the lines that are neither blank nor `#` comments.
    """
    n = len(buf)
    nlines = stop - first
    s = newlines[first - 1] + 1 if first > 0 else 0
    chunk_end = s if stop <= first else (newlines[stop - 1] + 1 if stop <= len(newlines) else n)
    # Capacity for every line in each table: np.empty pages that are never written cost no memory.
    table_size = 4096  # open addressing: distinct event names of one trace are far fewer
    slot_hash = np.zeros(table_size, np.uint64)
    slot_id = np.full(table_size, -1, np.int32)
    ev_first = np.full(table_size, -1, np.int64)
    ev_kind = np.full(table_size, -1, np.int64)
    n_events = 0
    b_line = np.empty(nlines, np.int64)
    b_ts = np.empty(nlines, np.int64)
    b_cpu = np.empty(nlines, np.int32)
    b_pid = np.empty(nlines, np.int32)
    # Arrow string buffers, filled as the lines are read (no second pass over spans). The data buffers can
    # not outgrow the file: every string is a copy of some of its bytes.
    c_off = np.zeros(nlines + 1, np.int64)
    c_dat = np.empty(chunk_end - s, np.uint8)
    r_off = np.zeros(nlines + 1, np.int64)
    r_dat = np.empty(chunk_end - s, np.uint8)
    nc = 0
    nr_ = 0
    ascii_only = True
    b_ev = np.empty(nlines, np.int32)
    b_major = np.empty(nlines, np.int32)
    b_minor = np.empty(nlines, np.int32)
    b_sector = np.empty(nlines, np.int64)
    b_nr = np.empty(nlines, np.int64)
    b_size = np.empty(nlines, np.int64)
    b_err = np.empty(nlines, np.int32)
    nb = 0
    t_line = np.empty(nlines, np.int64)
    t_ts = np.empty(nlines, np.int64)
    t_cpu = np.empty(nlines, np.int32)
    t_pid = np.empty(nlines, np.int32)
    t_cs = np.empty(nlines, np.int64)
    t_ce = np.empty(nlines, np.int64)
    t_ev = np.empty(nlines, np.int32)
    t_bs = np.empty(nlines, np.int64)
    t_be = np.empty(nlines, np.int64)
    nt = 0
    x_line = np.empty(nlines, np.int64)
    x_s = np.empty(nlines, np.int64)
    x_e = np.empty(nlines, np.int64)
    nx = 0
    counted = 0
    cols = np.empty((1, 11), np.int64)
    out = np.zeros(6, np.int64)
    for li in range(first, stop):
        e = newlines[li] if li < len(newlines) else n
        if e > n or e < s:  # not the offsets of this buffer's newlines
            break
        nxt = e + 1
        if e > s and buf[e - 1] == 13:
            e -= 1
        p = _skip_spaces(buf, s, e)
        if p == e or buf[p] == 35:  # blank or '#'
            s = nxt
            continue
        counted += 1
        q = p
        while q < e:
            if buf[q] == 45 and q + 1 < e and _is_digit(buf[q + 1]) and _match_header_tail(buf, q, e, out):
                break
            q += 1
        ev = -1
        if q < e:
            h = _FNV_OFFSET
            for k in range(out[3], out[4]):
                h = (h ^ np.uint64(buf[k])) * _FNV_PRIME
            slot = np.int64(h & np.uint64(table_size - 1))  # a power of two: a mask, not a division
            while slot_id[slot] >= 0 and slot_hash[slot] != h:
                slot = (slot + 1) & (table_size - 1)
            if slot_id[slot] >= 0:
                ev = slot_id[slot]
            elif n_events < table_size - 1:  # a full table leaves the line to the regex path
                ev = n_events
                slot_id[slot] = ev
                slot_hash[slot] = h
                ev_first[ev] = s
                for j in range(len(known_hash)):
                    if known_hash[j] == h:
                        ev_kind[ev] = known_kind[j]
                n_events += 1
        if ev < 0:
            x_line[nx] = li
            x_s[nx] = s
            x_e[nx] = e
            nx += 1
            s = nxt
            continue
        c = q
        while c > p and buf[c - 1] == 32:
            c -= 1
        # trace-cmd report prefixes lines of an instance's buffer with `name: ` before the right-aligned comm.
        sp = p
        while sp < c and buf[sp] != 32:
            sp += 1
        if sp < c and sp > p and buf[sp - 1] == 58:
            p = _skip_spaces(buf, sp, c)
        kind = ev_kind[ev]
        if kind >= 0 and _block_body(buf, out[5], e, kind, 0, cols):
            b_line[nb] = li
            b_ts[nb] = out[2]
            b_cpu[nb] = np.int32(out[1])
            b_pid[nb] = np.int32(out[0])
            cs, ce = (cols[0, 9], cols[0, 10]) if cols[0, 9] >= 0 else (p, c)
            for k in range(cs, ce):
                ch = buf[k]
                if ch >= 128:
                    ascii_only = False
                c_dat[nc] = ch
                nc += 1
            c_off[nb + 1] = nc
            for k in range(cols[0, 7], cols[0, 8]):
                ch = buf[k]
                if ch >= 128:
                    ascii_only = False
                r_dat[nr_] = ch
                nr_ += 1
            r_off[nb + 1] = nr_
            b_ev[nb] = ev
            b_major[nb] = np.int32(cols[0, 0])
            b_minor[nb] = np.int32(cols[0, 1])
            sector = cols[0, 2]
            nr = cols[0, 3]
            if kind == KIND_SPLIT:  # the first part runs from sector to new_sector
                nr = cols[0, 5] - sector if cols[0, 5] >= 0 and sector >= 0 else -1
            b_sector[nb] = sector
            b_nr[nb] = nr
            size = nr * 512 if nr >= 0 else -1
            if kind == KIND_RQ and cols[0, 4] > 0:
                size = cols[0, 4]  # 3.x kernels print bytes 0 for fs requests: then the sectors tell
            b_size[nb] = size
            b_err[nb] = np.int32(cols[0, 6])
            nb += 1
        else:
            t_line[nt] = li
            t_ts[nt] = out[2]
            t_cpu[nt] = np.int32(out[1])
            t_pid[nt] = np.int32(out[0])
            t_cs[nt] = p
            t_ce[nt] = c
            t_ev[nt] = ev
            t_bs[nt] = out[5]
            t_be[nt] = e
            nt += 1
        s = nxt
    events = (ev_first[:n_events], ev_kind[:n_events])
    block = (b_line[:nb], b_ts[:nb], b_cpu[:nb], b_pid[:nb], b_ev[:nb], b_major[:nb], b_minor[:nb],
             b_sector[:nb], b_nr[:nb], b_size[:nb], b_err[:nb], c_off[:nb + 1], c_dat[:nc], r_off[:nb + 1],
             r_dat[:nr_], ascii_only)
    text = (t_line[:nt], t_ts[:nt], t_cpu[:nt], t_pid[:nt], t_cs[:nt], t_ce[:nt], t_ev[:nt], t_bs[:nt], t_be[:nt])
    bad = (x_line[:nx], x_s[:nx], x_e[:nx])
    return counted, events, block, text, bad


# One function: the same per-byte header walk as scan_trace's, kept in one compiled loop (see the module docstring).
@njit(cache=True, nogil=True)
def scan_tgids(buf, newlines):
    """(pid, tgid) of every line whose header has a numeric tgid column (`comm-pid (tgid) [cpu]`), in file order;
    the caller keeps the distinct pairs."""
    n = len(buf)
    pids = np.empty(len(newlines) + 1, np.int64)
    tgids = np.empty(len(newlines) + 1, np.int64)
    out = np.zeros(7, np.int64)
    k = 0
    s = 0
    for li in range(len(newlines) + 1):
        e = newlines[li] if li < len(newlines) else n
        nxt = e + 1
        q = _skip_spaces(buf, s, e)
        if q < e and buf[q] != 35:
            while q < e:
                if buf[q] == 45 and q + 1 < e and _is_digit(buf[q + 1]) and _match_header_tail(buf, q, e, out):
                    if out[6] >= 0:
                        pids[k] = out[0]
                        tgids[k] = out[6]
                        k += 1
                    break
                q += 1
        s = nxt
    return pids[:k], tgids[:k]


@njit(cache=True, nogil=True)
def find_newlines(buf):
    """Offsets of every b"\\n": like np.flatnonzero(buf == 10) without its file-sized boolean temporary."""
    count = 0
    for i in range(len(buf)):
        if buf[i] == 10:
            count += 1
    out = np.empty(count, np.int64)
    k = 0
    for i in range(len(buf)):
        if buf[i] == 10:
            out[k] = i
            k += 1
    return out


def fnv1a(name: str) -> int:
    """The 64-bit FNV-1a hash scan_trace computes for an event name."""
    h = int(_FNV_OFFSET)
    for ch in name.encode():
        h = ((h ^ ch) * int(_FNV_PRIME)) & 0xFFFFFFFFFFFFFFFF
    return h


@njit(cache=True, nogil=True)
def gather_spans(buf, starts, ends):
    """Arrow string buffers (offsets, data, all_ascii) of the byte spans [starts[i], ends[i]); empty where < 0."""
    m = len(starts)
    offsets = np.zeros(m + 1, np.int64)
    total = 0
    for i in range(m):
        s = starts[i]
        e = ends[i]
        if 0 <= s <= e <= len(buf):
            total += e - s
        offsets[i + 1] = total
    data = np.empty(total, np.uint8)
    ascii_only = True
    o = 0
    for i in range(m):
        s = starts[i]
        e = ends[i]
        if 0 <= s <= e <= len(buf):
            for k in range(s, e):
                c = buf[k]
                if c >= 128:
                    ascii_only = False
                data[o] = c
                o += 1
    return offsets, data, ascii_only
