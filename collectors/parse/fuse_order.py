"""FUSE sends that carry no request id, paired with their ends by connection and order.

Debian's 6.12 kernel fires fuse_request_send before the request has its unique id (fs/fuse/dev.c: fuse_send_one
traces the request, then the queue gives it `unique` under fiq->lock), so every send says `req 0` while
fuse_request_end carries the id. A connection hands out ids in the order sends take that lock (FORGETs and
INTERRUPTs take ids too, but send no event), so the k-th request sent is the k-th one ended once ends are sorted
by id, except where the trace lacks some: ends of requests sent before tracing began, sends still waiting when it
stopped.

pair_by_order keeps that order and finds the gaps: of all pairings that keep it, the one with the most pairs in
which every pair is possible: the end after the send, and the reply fitting the request. Fitting means, from the
end event alone, a reply length its opcode can have (fuse_protocol.reply_fits); with the daemon's request log
(the bundled daemons', fuse_daemon_log.py), the request the end's id names: same opcode, and the same requesting
thread where the log knows it (in.h.pid is 0 for requests the kernel sends on its own, e.g. RELEASE). Ties go
to pairing rather than skipping. The search is a dynamic program over the diagonals near (number of ends - number
of sends): an end may stand at most BAND places off its send's rank, which covers every gap seen in practice; a
pairing that would need more is cut short and said.

What order alone cannot tell: which of two neighbouring requests of one kind (two WRITEs) lost its end, where
one was interrupted or never answered: the two may swap (tests/unit/test_fuse_order.py). The daemon's log names
each end's request and leaves no such doubt.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from mobiperf.collectors.parse.fuse_protocol import REPLY_BODY_BYTES, OUT_HEADER_BYTES

BAND = 64
MATCH, SKIP_SEND, SKIP_END = 1, 2, 3
_MAX_OPCODE = 64   # opcodes at or above (CUSE_INIT) have no fixed reply


def _reply_sizes() -> tuple[np.ndarray, np.ndarray]:
    """Per opcode: the reply lengths (header included) a success may have (-1 = unused), and whether any fits."""
    sizes = np.full((_MAX_OPCODE, 2), -1, np.int64)
    anylen = np.ones(_MAX_OPCODE, np.bool_)
    for op, bodies in REPLY_BODY_BYTES.items():
        anylen[op] = False
        for k, b in enumerate(bodies[:2]):
            sizes[op, k] = OUT_HEADER_BYTES + b
    return sizes, anylen


def pair_by_order(send_ts: np.ndarray, send_op: np.ndarray, send_pid: np.ndarray, end_ts: np.ndarray,
                  end_err: np.ndarray, end_len: np.ndarray, end_op: np.ndarray | None = None,
                  end_pid: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, bool]:
    """(send index, end index) of each pair, and whether the band was too narrow. Sends in time order, ends in id
    order; end_op/end_pid (from the daemon's log; -1 where unknown) make the fit exact."""
    n, m = len(send_ts), len(end_ts)
    if not n or not m:
        return np.empty(0, np.int64), np.empty(0, np.int64), False
    unknown = np.full(m, -1, np.int64)
    sizes, anylen = _reply_sizes()
    lo = min(0, m - n) - BAND
    hi = max(0, m - n) + BAND
    moves = _align(np.asarray(send_ts, np.int64), np.asarray(send_op, np.int64), np.asarray(send_pid, np.int64),
                   np.asarray(end_ts, np.int64), np.asarray(end_err, np.int64), np.asarray(end_len, np.int64),
                   unknown if end_op is None else np.asarray(end_op, np.int64),
                   unknown if end_pid is None else np.asarray(end_pid, np.int64), sizes, anylen, lo, hi)
    si, ej, cut = _trace_back(moves, n, m, lo)
    return si, ej, cut


@njit(cache=True)
def _fits(op, err, length, sizes, anylen):
    if err != 0:
        return length == 16
    if op < 0 or op >= sizes.shape[0] or anylen[op]:
        return True
    return length == sizes[op, 0] or length == sizes[op, 1]


# One function for the whole table: numba compiles loops, and the score rows are local to it.
@njit(cache=True)
def _align(s_ts, s_op, s_pid, e_ts, e_err, e_len, e_op, e_pid, sizes, anylen, lo, hi):
    """moves[i, d]: how the best pairing of the first i sends and first i + lo + d ends ends (MATCH, SKIP_SEND,
    SKIP_END; 0 outside the table)."""
    n, m = len(s_ts), len(e_ts)
    w = hi - lo + 1
    neg = -(1 << 40)
    prev = np.full(w, neg, np.int64)
    cur = np.full(w, neg, np.int64)
    moves = np.zeros((n + 1, w), np.int8)
    for d in range(w):   # no send yet: any number of ends skipped scores 0
        if 0 <= lo + d <= m:
            prev[d] = 0
            moves[0, d] = SKIP_END
    for i in range(1, n + 1):
        for d in range(w):
            j = i + lo + d
            cur[d] = neg
            if j < 0 or j > m:
                continue
            best, move = neg, 0
            if d + 1 < w and prev[d + 1] > neg:          # (i - 1, j): send i - 1 left unpaired
                best, move = prev[d + 1], SKIP_SEND
            if j > 0 and d >= 1 and cur[d - 1] >= best and cur[d - 1] > neg:   # (i, j - 1): end j - 1 unpaired
                best, move = cur[d - 1], SKIP_END
            if j > 0 and prev[d] > neg:                  # (i - 1, j - 1): paired, if possible
                a, b = i - 1, j - 1
                ok = e_ts[b] >= s_ts[a]
                if ok and e_op[b] >= 0:
                    ok = e_op[b] == s_op[a] and (e_pid[b] <= 0 or e_pid[b] == s_pid[a])
                elif ok:
                    ok = _fits(s_op[a], e_err[b], e_len[b], sizes, anylen)
                if ok and prev[d] + 1 >= best:
                    best, move = prev[d] + 1, MATCH
            cur[d] = best
            moves[i, d] = move
        prev, cur = cur, prev
    return moves


def _trace_back(moves: np.ndarray, n: int, m: int, lo: int) -> tuple[np.ndarray, np.ndarray, bool]:
    i, j = n, m
    pairs_s, pairs_e = [], []
    cut = False
    while i > 0 or j > 0:
        d = j - i - lo
        move = moves[i, d] if 0 <= d < moves.shape[1] else 0
        if move == MATCH:
            i, j = i - 1, j - 1
            pairs_s.append(i)
            pairs_e.append(j)
        elif move == SKIP_SEND:
            i -= 1
        elif move == SKIP_END:
            j -= 1
        else:   # outside the band: the rest cannot be paired within it
            cut = True
            break
    return np.array(pairs_s[::-1], np.int64), np.array(pairs_e[::-1], np.int64), cut
