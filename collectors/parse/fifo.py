"""FIFO ("pop") matching of producer and consumer rows per key, vectorized with numpy.

The problem: rows arrive in a total order; each row belongs to a key (e.g. device and sector) and is a producer
(it puts one element into its key's queue), a consumer (it pops the oldest element, if there is one) or a peek
(it looks at the oldest element without popping it). A consumer that finds its queue empty stays unmatched and
does not disturb later rows. Elements older than `stale_ns` at the time a consumer arrives are expired, not
matched (btt's stale-match problem, specs/trace-formats.md §1.5).

Vectorized without a per-row loop: within a key, with d_t producers and c_t consumers seen up to row t, the
number of consumers that found an element is the clipped running sum m_t = min(m_{t-1} + [t is a consumer], d_t),
which unrolls to m_t = c_t + min(0, min_{s<=t}(d_s - c_s)): a cumulative minimum. A consumer is matched when
m_t grows, and then to the m_t-th producer of its key (pop order = push order). Expiry is a fixed point: the
first producer of each key matched more than `stale_ns` before its consumer is removed and the matching
recomputed; this equals "discard expired elements at the front before popping", because that producer was at
the front when its consumer came, and removing it never changes the matches of consumers before it. Each
round settles one expired element per key (rare in practice); after MAX_EXPIRY_ROUNDS the remaining stale
pairs are left unmatched.

Preferred elements (optional `tag`): a consumer with a tag pops the oldest element of its key carrying the same
tag, and the oldest element only when none does (block completions prefer the issued request of their exact
size). Expired elements are still discarded at the front first. Rows are matched as a plain FIFO first; a key
can only come out differently where a tagged consumer popped an element of another tag while its queue held
two elements or more (otherwise the front was the only candidate, or already of its tag). Only the rows of
such contested keys (rare: two requests in flight at one sector) are replayed one at a time in Python.
"""

from __future__ import annotations

import numpy as np

PRODUCER, CONSUMER, PEEK, IGNORED = 1, 0, 2, -1
MAX_EXPIRY_ROUNDS = 64
NO_TAG = np.iinfo(np.int64).min  # a consumer without a preference


def _group_cumsum(x: np.ndarray, starts: np.ndarray, group: np.ndarray) -> np.ndarray:
    cs = np.cumsum(x, dtype=np.int64)
    base = (cs - x)[starts]
    return cs - base[group]


def _match_once(key: np.ndarray, role: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(matched producer row or -1 per row, front producer row or -1 per peek row) for rows already sorted."""
    n = len(key)
    match = np.full(n, -1, np.int64)
    if n == 0:
        return match, match.copy()
    starts_mask = np.empty(n, bool)
    starts_mask[0] = True
    starts_mask[1:] = key[1:] != key[:-1]
    starts = np.flatnonzero(starts_mask)
    group = np.cumsum(starts_mask) - 1
    is_p = (role == PRODUCER).astype(np.int64)
    is_c = (role == CONSUMER).astype(np.int64)
    d = _group_cumsum(is_p, starts, group)
    c = _group_cumsum(is_c, starts, group)
    # cumulative minimum of d - c restarted per group: shift each later group strictly below earlier ones.
    span = 4 * (n + 1)
    shifted = (d - c) - group * span
    cm = np.minimum.accumulate(shifted) + group * span
    m = c + np.minimum(cm, 0)
    m_prev = np.empty(n, np.int64)
    m_prev[0] = 0
    m_prev[1:] = m[:-1]
    m_prev[starts] = 0
    producers = np.flatnonzero(is_p)
    prod_before = np.zeros(len(starts) + 1, np.int64)
    np.cumsum(np.bincount(group, weights=is_p, minlength=len(starts)).astype(np.int64), out=prod_before[1:])
    matched = (is_c == 1) & (m > m_prev)
    rows = np.flatnonzero(matched)
    match[rows] = producers[prod_before[group[rows]] + m[rows] - 1]
    front = np.full(n, -1, np.int64)
    peeks = np.flatnonzero((role == PEEK) & (d > m))
    front[peeks] = producers[prod_before[group[peeks]] + m[peeks]]
    return match, front


def _sort_rows(key: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Permutation sorting rows by (key, order). Keys and orders are non-negative; when both fit into one
    63-bit integer an unstable single-key sort does it (4x faster than a two-key lexsort)."""
    if len(key) == 0:
        return np.empty(0, np.int64)
    order_bits = int(order.max()).bit_length()
    if int(key.max()).bit_length() + order_bits <= 63:
        return np.argsort((key << order_bits) | order)
    return np.lexsort((order, key))


def _contested(k: np.ndarray, role: np.ndarray, match: np.ndarray, tag: np.ndarray) -> np.ndarray:
    """Mask of the sorted rows whose key a tag preference may change: some tagged consumer popped an element
    of another tag while its key held two elements or more (counting expired ones too: an over-estimate)."""
    n = len(k)
    starts_mask = np.empty(n, bool)
    starts_mask[0] = True
    starts_mask[1:] = k[1:] != k[:-1]
    starts = np.flatnonzero(starts_mask)
    group = np.cumsum(starts_mask) - 1
    matched = (match >= 0).astype(np.int64)
    produced = _group_cumsum((role == PRODUCER).astype(np.int64), starts, group)
    popped_before = _group_cumsum(matched, starts, group) - matched
    rows = np.flatnonzero((matched == 1) & (tag != NO_TAG))
    rows = rows[(tag[match[rows]] != tag[rows]) & (produced[rows] - popped_before[rows] >= 2)]
    if not len(rows):
        return np.zeros(n, bool)
    return np.isin(group, np.unique(group[rows]))


def _replay(k: np.ndarray, role: np.ndarray, t: np.ndarray, tag: np.ndarray, stale_ns: int | None,
            match: np.ndarray, front: np.ndarray) -> int:
    """One row at a time (rows sorted by key and order): fills match and front in place, returns the number
    of expired elements. Peeks see the front without expiring it."""
    expired = 0
    queue: list[int] = []
    for i in range(len(k)):
        if i and k[i] != k[i - 1]:
            queue = []
        if role[i] == PRODUCER:
            queue.append(i)
        elif role[i] == PEEK:
            front[i] = queue[0] if queue else -1
        elif role[i] == CONSUMER:
            while queue and stale_ns is not None and t[i] - t[queue[0]] > stale_ns:
                queue.pop(0)
                expired += 1
            at = 0
            if tag[i] != NO_TAG:
                at = next((j for j, p in enumerate(queue) if tag[p] == tag[i]), 0)
            match[i] = queue.pop(at) if queue else -1
    return expired


def fifo_match(key: np.ndarray, order: np.ndarray, role: np.ndarray, ts: np.ndarray,
               stale_ns: int | None = None, tag: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, int]:
    """For each row: the producer row it popped (consumers), the producer row at the front (peeks), else -1;
    and the number of producers expired as stale. Rows are indices into the given arrays. With `tag`, a
    consumer pops the oldest element whose tag equals its own, else the front (NO_TAG: always the front)."""
    n = len(key)
    if n == 0:
        empty = np.empty(0, np.int64)
        return empty, empty.copy(), 0
    perm = _sort_rows(key, order)
    k, r, t = key[perm], role[perm].copy(), ts[perm]
    expired = 0
    for _ in range(MAX_EXPIRY_ROUNDS):
        match, front = _match_once(k, r)
        if stale_ns is None:
            break
        rows = np.flatnonzero(match >= 0)
        stale = rows[t[rows] - t[match[rows]] > stale_ns]
        if not len(stale):
            break
        # Only the first stale pair of each key is certain: later ones may be shifted by it.
        _, first = np.unique(k[stale], return_index=True)
        stale = stale[first]
        r[match[stale]] = IGNORED
        expired += len(stale)
    else:  # pathological input: give up expiring, but never report a stale pair as a match
        rows = np.flatnonzero(match >= 0)
        match[rows[t[rows] - t[match[rows]] > stale_ns]] = -1
    if tag is not None:
        role_sorted, tg = role[perm], tag[perm]
        replay = _contested(k, role_sorted, match, tg)
        if replay.any():
            rows = np.flatnonzero(replay)
            expired -= int(((r[rows] == IGNORED) & (role_sorted[rows] == PRODUCER)).sum())
            sub_match = np.full(len(rows), -1, np.int64)
            sub_front = np.full(len(rows), -1, np.int64)
            expired += _replay(k[rows], role_sorted[rows], t[rows], tg[rows], stale_ns, sub_match, sub_front)
            match[rows] = np.where(sub_match >= 0, rows[np.maximum(sub_match, 0)], -1)
            front[rows] = np.where(sub_front >= 0, rows[np.maximum(sub_front, 0)], -1)
    out_match = np.full(n, -1, np.int64)
    out_front = np.full(n, -1, np.int64)
    has = match >= 0
    out_match[perm[has]] = perm[match[has]]
    has = front >= 0
    out_front[perm[has]] = perm[front[has]]
    return out_match, out_front, expired
