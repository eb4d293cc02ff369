"""Block request pairing without a compiler: every FIFO matched at once with numpy (fifo.py).

The definitions are pairing.py's; this is the version used where numba is missing, and the second oracle of the
compiled pairing (tests hold the compiled, vectorized and event-at-a-time pairings equal). Each queue of the
state machine is one fifo_match over all its producer and consumer rows; where a queue's outcome feeds back into
itself (split remainders, partial completions, re-dispatches) the pass is repeated until nothing changes.
Re-dispatches are decided by replaying, event at a time, only the issued queues of the (device, sector) keys
where an issue found no pending request (rare in full traces; every re-dispatch of an issue/complete-only one).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from mobiperf.collectors.parse.fifo import CONSUMER, NO_TAG, PEEK, PRODUCER, fifo_match
from mobiperf.collectors.parse.block_requests import (C, D, F, FLUSH_SECTOR, G, I, KINDS, M, Q, R, RM, STALE_AFTER_NS,
                                                      X, PairingStats, finish_requests, ordered_events, rwbs_flush_op)
from mobiperf.core.schema import BLOCK_RQ


def pair_vectorized(block_event: pl.DataFrame, *, stale_after_ns: int = STALE_AFTER_NS
                    ) -> tuple[pl.DataFrame, PairingStats]:
    """block_rq rows and pairing statistics, every FIFO matched at once (fifo.py): the bios to their queue events,
    then the pending requests, the issued requests and the open ends (back merges), each linking events to the
    request they belong to (a forest of parent links resolved to one root per request)."""
    stats = PairingStats()
    ev = ordered_events(block_event)
    deviceless = ev.filter((pl.col("dev_major") < 0) & pl.col("event").is_in(list(KINDS)).not_())
    for name, n in deviceless.group_by("event").len().iter_rows():
        stats.ignored["deviceless " + name] += n
    ev = ev.filter(pl.col("event").is_in(list(KINDS)) & (pl.col("dev_major") >= 0))
    if not len(ev):
        return BLOCK_RQ.empty(), stats
    t = _Trace.of(ev, stale_after_ns)
    stats.ignored["flush_sequence_end"] += int(t.flush_seq_end.sum())
    q_src = _match_bios(t, stats)
    parent = np.arange(t.n, dtype=np.int64)
    pend_match = _match_pending(t, parent, stats)
    is_partial, completing, redispatched = _match_issued(t, pend_match, parent, stats)
    end_match = _match_open_ends(t, parent, redispatched, stats)
    for name, expired in t.expired_by.items():
        if expired:
            stats.unmatched[f"stale {name}"] += expired
    root = _join_absorbed(_resolve(parent), t.kind, pend_match, end_match)
    return _request_rows(ev, t.kind, t.ts, q_src, root, is_partial, completing, stats)


@dataclass
class _Trace:
    """The block events pairing reads, as arrays in trace order, and the FIFO matching over them: a row of a FIFO
    is an event's key (device and a sector: its start, its end, or its front), its place in the trace (4 per
    event, so that one event's consumer row comes before its producer row) and its role."""

    kind: np.ndarray
    ts: np.ndarray
    sector: np.ndarray
    nr: np.ndarray
    dev: np.ndarray            # dense device ids (rep, major, minor)
    start: np.ndarray          # first sector, FLUSH_SECTOR for an event without sectors
    end: np.ndarray            # sector after the last, FLUSH_SECTOR likewise
    has_sectors: np.ndarray
    flush_seq_end: np.ndarray  # the completion that ends a flush sequence: no request of its own
    is_flush_op: np.ndarray
    order: np.ndarray
    span: int                  # keys stay compact so FIFO sorts can use one integer
    stale_after_ns: int
    key_of: dict[str, np.ndarray] = field(default_factory=dict)
    expired_by: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, ev: pl.DataFrame, stale_after_ns: int) -> "_Trace":
        kind = ev["event"].replace_strict(KINDS, return_dtype=pl.Int64).to_numpy()
        sector = ev["sector"].cast(pl.Int64).to_numpy()
        nr = ev["nr_sector"].cast(pl.Int64).to_numpy()
        rep, major, minor = (ev[c].to_numpy().astype(np.int64) for c in ("rep", "dev_major", "dev_minor"))
        composite = (rep << 40) | (major << 20) | minor
        devices = np.sort(pl.Series(composite).unique().to_numpy())
        is_flush_op = rwbs_flush_op(ev["rwbs"])
        has_sectors = (nr > 0) & (sector >= 0)
        end = np.where(has_sectors, sector + nr, FLUSH_SECTOR)
        t = cls(kind=kind, ts=ev["ts"].cast(pl.Int64).to_numpy(), sector=sector, nr=nr,
                dev=np.searchsorted(devices, composite).astype(np.int64),
                start=np.where(has_sectors, sector, FLUSH_SECTOR), end=end, has_sectors=has_sectors,
                flush_seq_end=(kind == C) & (nr == 0) & (sector >= 0) & ~is_flush_op, is_flush_op=is_flush_op,
                order=np.arange(len(ev), dtype=np.int64) * 4, span=int(end.max()) + 3 if len(ev) else 3,
                stale_after_ns=stale_after_ns)
        t.key_of = {"start": t.key(t.dev, t.start), "end": t.key(t.dev, t.end)}
        t.key_of["front"] = np.where(has_sectors, t.key_of["end"], t.key_of["start"])
        return t

    @property
    def n(self) -> int:
        return len(self.kind)

    def key(self, dev_ids: np.ndarray, s: np.ndarray) -> np.ndarray:
        return dev_ids * self.span + (s + 2)

    def is_kind(self, *kinds: int) -> np.ndarray:
        lut = np.zeros(10, bool)
        lut[list(kinds)] = True
        return lut[self.kind]

    def rows(self, mask: np.ndarray, where: str, role: int, sub: int):
        """A FIFO's rows of the events in `mask`, keyed by their `where` (start, end or front)."""
        idx = np.flatnonzero(mask)
        return idx, self.key_of[where][idx], self.order[idx] + sub, np.full(len(idx), role, np.int64)

    def run_fifo(self, parts: list, name: str, tags: list | None = None):
        """fifo_match over the rows of `parts` (each with its own timestamps, or its events'); the stale
        elements it dropped count for `name` (the last pass of an iterated FIFO is the one that counts)."""
        ev_idx = np.concatenate([p[0] for p in parts])
        k = np.concatenate([p[1] for p in parts])
        o = np.concatenate([p[2] for p in parts])
        role = np.concatenate([p[3] for p in parts])
        ts = np.concatenate([p[4] if len(p) > 4 else self.ts[p[0]] for p in parts])
        tag = np.concatenate(tags) if tags is not None else None
        match, front, expired = fifo_match(k, o, role, ts, self.stale_after_ns, tag)
        self.expired_by[name] = expired
        return ev_idx, role, match, front

    def matched(self, ev_idx: np.ndarray, role: np.ndarray, match: np.ndarray) -> np.ndarray:
        """Per event: the event whose element its consumer row took, else -1."""
        cons = np.flatnonzero((role == CONSUMER) & (match >= 0))
        out = np.full(self.n, -1, np.int64)
        out[ev_idx[cons]] = ev_idx[match[cons]]
        return out


def _match_bios(t: _Trace, stats: PairingStats) -> np.ndarray:
    """Bios: Q (and the remainders of its splits) popped by G, M, F; X peeks. Per event (G/M/F/X), the Q event
    whose bio it is, else -1. A split's remainder is a virtual producer standing for its Q, found by the peeks of
    the pass before: repeated until the remainders stop changing."""
    kind, dev, start, nr, order = t.kind, t.dev, t.start, t.nr, t.order
    q_src = np.full(t.n, -1, np.int64)
    virtual: tuple = (np.empty(0, np.int64),) * 2   # (split event, source Q event)
    for _ in range(64):
        v_ev, v_src = virtual
        v_part = (v_ev, t.key(dev[v_ev], start[v_ev] + nr[v_ev]), order[v_ev] + 2,
                  np.full(len(v_ev), PRODUCER, np.int64), t.ts[v_src])
        q_part = t.rows(kind == Q, "start", PRODUCER, 1)
        ev_idx, role, match, front = t.run_fifo([
            q_part, v_part,
            t.rows(t.is_kind(G, M, F), "start", CONSUMER, 0),
            t.rows((kind == X) & t.has_sectors, "start", PEEK, 0)], "queue")
        # a virtual producer row stands for the Q it copies
        src_of_row = ev_idx.copy()
        src_of_row[len(q_part[0]):len(q_part[0]) + len(v_ev)] = v_src
        got = np.flatnonzero(match >= 0)
        q_src[ev_idx[got]] = src_of_row[match[got]]
        peeks = np.flatnonzero(front >= 0)
        new_virtual = (ev_idx[peeks], src_of_row[front[peeks]])
        if np.array_equal(new_virtual[0], virtual[0]) and np.array_equal(new_virtual[1], virtual[1]):
            break
        virtual = new_virtual
    stats.unmatched["getrq without queue"] += int(((kind == G) & (q_src < 0)).sum())
    return q_src


def _match_pending(t: _Trace, parent: np.ndarray, stats: PairingStats) -> np.ndarray:
    """Pending requests, by start sector: G, I, F and R produce, I, F, D and rq_merge pop. Links each popping
    event to the request it found (in `parent`); returns per event the event it popped, else -1."""
    kind = t.kind
    pend_match = t.matched(*t.run_fifo([
        t.rows(kind == G, "start", PRODUCER, 1),
        t.rows(kind == I, "start", CONSUMER, 0), t.rows(kind == I, "start", PRODUCER, 1),
        t.rows(kind == F, "front", CONSUMER, 0), t.rows(kind == F, "start", PRODUCER, 1),
        t.rows(kind == R, "start", PRODUCER, 1),
        t.rows(kind == D, "start", CONSUMER, 0), t.rows(kind == RM, "start", CONSUMER, 0)],
        "pending request")[:3])
    linked = t.is_kind(I, F, D, RM) & (pend_match >= 0)
    parent[linked] = pend_match[linked]
    stats.unmatched["frontmerge"] += int(((kind == F) & (pend_match < 0)).sum())
    stats.unmatched["request merge"] += int(((kind == RM) & (pend_match < 0)).sum())
    return pend_match


def _match_issued(t: _Trace, pend_match: np.ndarray, parent: np.ndarray, stats: PairingStats):
    """Issued requests: D produces, C and R pop (preferring the exact size); a partial C re-produces the rest,
    tagged with the end of the issued range it belongs to; a sized D that found no pending request may be a
    re-dispatch of an issued request of its range (then it produces nothing). Repeated until the partial
    completions and re-dispatches stop changing. Links completions, requeues and re-dispatches (in `parent`);
    returns (is_partial, completing, redispatched) per event."""
    kind, dev, start, nr, end, order = t.kind, t.dev, t.start, t.nr, t.end, t.order
    partial: np.ndarray = np.empty(0, np.int64)
    partial_end: np.ndarray = np.empty(0, np.int64)
    completing = (kind == C) & ~t.flush_seq_end
    wanted_end = np.where(t.has_sectors, end, NO_TAG)
    maybe_again = (kind == D) & t.has_sectors & (pend_match < 0)
    again_of = np.full(t.n, -1, np.int64)  # a re-dispatch: the event whose issued element it found
    for _ in range(64):
        p_part = (partial, t.key(dev[partial], start[partial] + nr[partial]), order[partial] + 1,
                  np.full(len(partial), PRODUCER, np.int64))
        parts = [t.rows((kind == D) & (again_of < 0), "start", PRODUCER, 1), p_part,
                 t.rows(completing, "start", CONSUMER, 0), t.rows(kind == R, "start", CONSUMER, 0)]
        tags = [end[parts[0][0]], partial_end, wanted_end[parts[2][0]], wanted_end[parts[3][0]]]
        iss_match = t.matched(*t.run_fifo(parts, "issued request", tags)[:3])
        src_end = _issued_range_ends(kind, end, completing, iss_match)
        is_partial = completing & (iss_match >= 0) & t.has_sectors & (t.sector + nr < src_end)
        new_partial = np.flatnonzero(is_partial)
        new_again = _replay_redispatches(maybe_again, kind, completing, new_partial, src_end, start, nr, end,
                                         wanted_end, t.key, dev, order, t.ts, t.stale_after_ns)
        if (np.array_equal(new_partial, partial) and np.array_equal(src_end[new_partial], partial_end)
                and np.array_equal(new_again, again_of)):
            break
        partial, partial_end, again_of = new_partial, src_end[new_partial], new_again
    linked = t.is_kind(C, R) & (iss_match >= 0)
    parent[linked] = iss_match[linked]
    redispatched = again_of >= 0
    parent[redispatched] = again_of[redispatched]
    stats.redispatches = int(redispatched.sum())
    stats.unmatched["complete without issue"] += int((completing & (iss_match < 0)).sum())
    stats.unmatched["requeue"] += int(((kind == R) & (iss_match < 0)).sum())
    return is_partial, completing, redispatched


def _issued_range_ends(kind: np.ndarray, end: np.ndarray, completing: np.ndarray,
                       iss_match: np.ndarray) -> np.ndarray:
    """Per event: the end of the issued range a completion belongs to, partial completions followed back to
    their D (a D's own end; FLUSH_SECTOR for the rest)."""
    src_end = np.where(kind == D, end, FLUSH_SECTOR)
    chained = np.flatnonzero(completing & (iss_match >= 0))
    for _ in range(64):
        nxt = src_end[iss_match[chained]]
        if np.array_equal(nxt, src_end[chained]):
            break
        src_end[chained] = nxt
    return src_end


def _match_open_ends(t: _Trace, parent: np.ndarray, redispatched: np.ndarray, stats: PairingStats) -> np.ndarray:
    """Open ends, by end sector: G and M produce, M pops (back merge), D closes (a re-dispatch, or the re-issue of
    a requeued request, does not: its first D did), rq_merge finds its absorber. Links back merges (in `parent`);
    returns per event the event it popped, else -1."""
    kind, sized = t.kind, t.has_sectors
    so_far = _resolve(parent)  # a requeued request's chain D, R, (I,) D is linked by now
    reissued = (kind == D) & (_per_root(so_far, kind == D, t.n, last=False)[so_far] != np.arange(t.n))
    end_match = t.matched(*t.run_fifo([
        t.rows((kind == G) & sized, "end", PRODUCER, 1),
        t.rows((kind == M) & sized, "start", CONSUMER, 0), t.rows((kind == M) & sized, "end", PRODUCER, 1),
        t.rows((kind == D) & sized & ~redispatched & ~reissued, "end", CONSUMER, 0),
        t.rows((kind == RM) & sized, "start", CONSUMER, 0)],
        "open end")[:3])
    merged = (kind == M) & (end_match >= 0)
    parent[merged] = end_match[merged]
    stats.unmatched["backmerge"] += int(((kind == M) & (end_match < 0)).sum())
    return end_match


def _join_absorbed(root: np.ndarray, kind: np.ndarray, pend_match: np.ndarray, end_match: np.ndarray) -> np.ndarray:
    """Absorbed requests join their absorber (block_rq_merge): their roots linked, resolved again."""
    absorbed = np.flatnonzero((kind == RM) & (pend_match >= 0) & (end_match >= 0))
    if not len(absorbed):
        return root
    par = root.copy()
    a, b = root[absorbed], root[end_match[absorbed]]
    keep = a != b
    par[a[keep]] = b[keep]
    return _resolve(par)


def _range_open_before(kind, d, cons, dev, start, end, order) -> np.ndarray:
    """Per event: for issues, whether an earlier issue of the very same (device, sector, end) is still open when
    it comes, completions and requeues of that range closing them in order (one that finds none open closes
    nothing: the clipped running sum of fifo.py, m = c + min(0, cummin(d - c)))."""
    rows = np.concatenate([d, cons])
    is_d = np.concatenate([np.ones(len(d), np.int64), np.zeros(len(cons), np.int64)])
    perm = np.lexsort((order[rows], end[rows], start[rows], dev[rows]))
    rows, is_d = rows[perm], is_d[perm]
    out = np.zeros(len(kind), bool)
    if not len(rows):
        return out
    first = np.empty(len(rows), bool)
    first[0] = True
    first[1:] = (dev[rows[1:]] != dev[rows[:-1]]) | (start[rows[1:]] != start[rows[:-1]]) \
        | (end[rows[1:]] != end[rows[:-1]])
    group = np.cumsum(first) - 1
    starts = np.flatnonzero(first)

    def group_cumsum(x):
        cs = np.cumsum(x)
        return cs - (cs - x)[starts][group]

    issued, closed = group_cumsum(is_d), group_cumsum(1 - is_d)
    span = 4 * (len(rows) + 1)
    cm = np.minimum.accumulate((issued - closed) - group * span) + group * span
    open_now = issued - (closed + np.minimum(cm, 0))
    out[rows] = (is_d == 1) & (open_now - 1 > 0)
    return out


def _replay_redispatches(maybe, kind, completing, partial, src_end, start, nr, end, wanted_end, key, dev, order, ts,
                         stale_ns) -> np.ndarray:
    """Which of the issues that found no pending request (`maybe`) are re-dispatches, and of what: the issued
    queues of their (device, start sector) keys replayed event at a time, as the compiled state machine runs
    them (issues and partial-completion remainders push, completions and requeues expire the stale front and pop
    the oldest element of their exact end, else the front; an issue in `maybe` that finds a fresh element of its
    own end takes it for a re-dispatch and pushes nothing). Returns per event the event whose issued element a
    re-dispatch found (an issue, or the partial completion that left the rest issued), else -1."""
    out = np.full(len(kind), -1, np.int64)
    d = np.flatnonzero(kind == D)
    cons = np.flatnonzero(completing | (kind == R))
    # Only issues that can find an element of their own end are replayed: an earlier issue of the same (device,
    # sector, end) not yet taken by a completion or requeue of that range, or a partial completion's rest that
    # starts at their sector (an over-estimate: the replay decides). An atrace "disk" capture has no pending
    # requests, so every one of its issues is in `maybe`; this keeps the replay to the few re-dispatched ranges.
    rest_keys = np.unique(key(dev[partial], start[partial] + nr[partial]))
    cand = np.flatnonzero(maybe & (_range_open_before(kind, d, cons, dev, start, end, order)
                                   | np.isin(key(dev, start), rest_keys)))
    if not len(cand):
        return out
    row_ev = np.concatenate([d, partial, cons])
    row_key = np.concatenate([key(dev[d], start[d]), key(dev[partial], start[partial] + nr[partial]),
                              key(dev[cons], start[cons])])
    row_order = np.concatenate([order[d] + 1, order[partial] + 1, order[cons]])
    row_tag = np.concatenate([end[d], src_end[partial], wanted_end[cons]])
    row_push = np.concatenate([np.ones(len(d) + len(partial), bool), np.zeros(len(cons), bool)])
    keep = np.isin(row_key, np.unique(key(dev[cand], start[cand])))
    row_ev, row_key, row_order, row_tag, row_push = (a[keep] for a in (row_ev, row_key, row_order, row_tag, row_push))
    queues: dict[int, list[tuple[int, int, int]]] = {}  # key -> [(event, tag, ts)]
    for j in np.lexsort((row_order, row_key)).tolist():
        q = queues.setdefault(int(row_key[j]), [])
        e, tag, t = int(row_ev[j]), int(row_tag[j]), int(ts[row_ev[j]])
        if row_push[j]:
            if maybe[e] and kind[e] == D:
                found = next((el for el in q if el[1] == tag and t - el[2] <= stale_ns), None)
                if found is not None:
                    out[e] = found[0]
                    continue
            q.append((e, tag, t))
            continue
        while q and t - q[0][2] > stale_ns:
            q.pop(0)
        if q:
            at = next((k for k, el in enumerate(q) if tag != NO_TAG and el[1] == tag), 0)
            q.pop(at)
    return out


def _resolve(parent: np.ndarray) -> np.ndarray:
    """Pointer jumping: every element's root in a forest given by parent links."""
    root = parent
    for _ in range(64):
        nxt = root[root]
        if np.array_equal(nxt, root):
            return root
        root = nxt
    return root


def _per_root(root: np.ndarray, mask: np.ndarray, n: int, last: bool) -> np.ndarray:
    """For every root id: the index of the first (or last) event selected by mask with that root, else -1.
    Events are in trace order, so first/last are also the earliest/latest."""
    out = np.full(n, -1, np.int64)
    idx = np.flatnonzero(mask)
    if not len(idx):
        return out
    r = root[idx]
    perm = np.argsort(r, kind="stable")
    r, idx = r[perm], idx[perm]
    edge = np.empty(len(r), bool)
    if last:
        edge[-1] = True
        edge[:-1] = r[:-1] != r[1:]
    else:
        edge[0] = True
        edge[1:] = r[1:] != r[:-1]
    out[r[edge]] = idx[edge]
    return out


def _request_rows(ev: pl.DataFrame, kind, ts, q_src, root, is_partial, completing, stats) -> tuple:
    n = len(ev)
    sector = ev["sector"].to_numpy()
    nr = ev["nr_sector"].to_numpy()
    is_req = np.isin(kind, (G, I, D))
    roots = np.flatnonzero(_per_root(root, is_req, n, last=False) >= 0)
    first_req = _per_root(root, is_req, n, last=False)[roots]
    last_d = _per_root(root, kind == D, n, last=True)[roots]
    first_d = _per_root(root, kind == D, n, last=False)[roots]
    dispatches = np.bincount(root[kind == D], minlength=n)[roots]
    last_i = _per_root(root, kind == I, n, last=True)[roots]
    first_g = _per_root(root, kind == G, n, last=False)[roots]
    final_c = _per_root(root, completing & ~is_partial, n, last=True)[roots]
    bios = np.isin(kind, (G, M, F))
    nr_bios = np.bincount(root[bios], minlength=n)[roots]
    bio_sectors = np.bincount(root[bios], weights=np.maximum(nr[bios], 0), minlength=n)[roots].astype(np.int64)
    big = np.iinfo(np.int64).max
    q_ts = np.full(n, big, np.int64)
    bio_sector = np.full(n, big, np.int64)
    gf = np.flatnonzero(np.isin(kind, (G, F)))
    with_q = gf[q_src[gf] >= 0]
    np.minimum.at(q_ts, root[with_q], ts[q_src[with_q]])
    np.minimum.at(bio_sector, root[gf], sector[gf])
    q_ts, bio_sector = q_ts[roots], bio_sector[roots]
    # the submitter: the Q of the request's first bio, else its first request event
    who = np.where(q_src[first_req] >= 0, q_src[first_req], first_req)

    def gather(col: str, idx: np.ndarray) -> pl.Series:
        vals = ev[col].gather(np.maximum(idx, 0))
        return pl.select(pl.when(pl.Series(idx >= 0)).then(vals)).to_series()

    def gather_ts(idx: np.ndarray) -> pl.Series:
        return pl.select(pl.when(pl.Series(idx >= 0)).then(pl.Series(ts[np.maximum(idx, 0)]))).to_series()

    src = np.where(last_d >= 0, last_d, last_i)
    out = pl.DataFrame({
        "rep": ev["rep"].gather(first_req), "dev_major": ev["dev_major"].gather(first_req),
        "dev_minor": ev["dev_minor"].gather(first_req),
        "sector": pl.select(pl.coalesce(gather("sector", src),
                                        pl.Series(np.where(bio_sector == big, -1, bio_sector)))).to_series(),
        "size_bytes": pl.select(pl.coalesce(gather("size_bytes", src), pl.Series(bio_sectors * 512))).to_series(),
        "rwbs": pl.select(pl.coalesce(gather("rwbs", src), gather("rwbs", first_g), pl.lit(""))).to_series(),
        "queue_ts": pl.select(pl.when(pl.Series(q_ts != big)).then(pl.Series(q_ts))).to_series(),
        "getrq_ts": gather_ts(first_g), "insert_ts": gather_ts(last_i), "issue_ts": gather_ts(last_d),
        "complete_ts": gather_ts(final_c), "first_issue_ts": gather_ts(first_d), "dispatches": dispatches,
        "nr_bios": np.maximum(nr_bios, 1), "pid": ev["pid"].gather(who), "comm": ev["comm"].gather(who),
        "error": pl.select(gather("error", final_c).fill_null(0)).to_series(),
    })
    return finish_requests(out, stats)


