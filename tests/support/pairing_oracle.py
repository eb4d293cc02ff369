"""The event-at-a-time reference for block request pairing: the test oracle of the vectorized pairing.

Same definitions as pairing.py (read its docstring), written the obvious way: one pass over the events in
trace order with a FIFO per (device, sector) for queued bios, open ends, pending and issued requests. It is
slow (pure Python, ~0.3 M events/s) and kept only to check the fast version on real and generated traces.
"""

from __future__ import annotations

from collections import defaultdict, deque

import polars as pl

from mobiperf.collectors.parse.block_requests import (C, D, F, FLUSH_SECTOR, G, I, KINDS, M, Q, R, RM, STALE_AFTER_NS,
                                                      X, SORT_KEYS, PairingStats, complete_match_expr, is_empty_flush,
                                                      with_rwbs_flags)
from mobiperf.core.schema import BLOCK_RQ


class _Req:
    __slots__ = ("rep", "dev", "sector", "size", "rwbs", "pid", "comm", "queue_ts", "getrq_ts", "insert_ts",
                 "issue_ts", "complete_ts", "nr_bios", "error", "bio_sector", "bio_sectors", "into", "has_req",
                 "issued_rwbs", "inserted", "first_issue_ts", "dispatches")

    def __init__(self, rep, dev):
        self.rep, self.dev = rep, dev
        self.sector = self.size = self.rwbs = None
        self.pid = self.comm = None
        self.queue_ts = self.getrq_ts = self.insert_ts = self.issue_ts = self.complete_ts = None
        self.nr_bios, self.error, self.bio_sector, self.bio_sectors = 0, 0, None, 0
        self.into = None
        self.has_req = False
        self.issued_rwbs = None
        self.inserted = None  # (sector, size, rwbs) of the latest insert
        self.first_issue_ts, self.dispatches = None, 0

    def find(self) -> "_Req":
        r = self
        while r.into is not None:
            r = r.into
        return r


def pair_block_requests_oracle(block_event: pl.DataFrame, *, stale_after_ns: int = STALE_AFTER_NS
                               ) -> tuple[pl.DataFrame, PairingStats]:
    stats = PairingStats()
    events = block_event.with_row_index("_row").sort(["rep", "ts", "_row"])
    queued, ends, pending, issued = (defaultdict(deque) for _ in range(4))
    made: list[_Req] = []

    def pop(queue: deque, ts: int, what: str):
        while queue:
            item = queue.popleft()
            if ts - item[0] <= stale_after_ns:
                return item
            stats.unmatched[f"stale {what}"] += 1
        return None

    def pop_issued(queue: deque, ts: int, end: int | None):
        """The issued request a requeue or completion ending at `end` takes: stale elements at the front
        expire, then the oldest whose issued range ends at `end` (exact size) is taken, else the front."""
        while queue and ts - queue[0][0] > stale_after_ns:
            queue.popleft()
            stats.unmatched["stale issued request"] += 1
        if end is not None:
            for at, item in enumerate(queue):
                if item[2] == end:
                    del queue[at]
                    return item
        return queue.popleft() if queue else None

    def new(rep, dev, pid, comm):
        r = _Req(rep, dev)
        r.pid, r.comm = pid, comm
        made.append(r)
        return r

    cols = ("rep", "ts", "pid", "comm", "event", "dev_major", "dev_minor", "sector", "nr_sector", "size_bytes",
            "rwbs", "error")
    for rep, ts, pid, comm, event, major, minor, sector, nr, size, rwbs, error in events.select(cols).iter_rows():
        kind = KINDS.get(event)
        if major < 0:
            stats.ignored["deviceless " + event] += 1
            continue
        if kind is None:
            continue
        dev = (rep, major, minor)
        sized = nr > 0 and sector >= 0
        s = sector if sized else FLUSH_SECTOR
        e = sector + nr if sized else FLUSH_SECTOR
        if kind == Q:
            queued[dev, s].append((ts, pid, comm))
        elif kind == X:
            if sized and queued[dev, s]:
                queued[dev, s + nr].append(queued[dev, s][0])
        elif kind == G:
            q = pop(queued[dev, s], ts, "queue")
            r = new(rep, dev, pid, comm)
            r.has_req, r.getrq_ts, r.nr_bios = True, ts, 1
            r.bio_sector, r.bio_sectors, r.rwbs = sector, max(nr, 0), rwbs
            if q is None:
                stats.unmatched["getrq without queue"] += 1
            else:
                r.queue_ts, r.pid, r.comm = q
            pending[dev, s].append((ts, r))
            if sized:
                ends[dev, e].append((ts, r))
        elif kind == M:
            pop(queued[dev, s], ts, "queue")
            hit = pop(ends[dev, s], ts, "open end") if sized else None
            if hit is None:  # merged into a request never seen; later bios may still merge behind it
                stats.unmatched["backmerge"] += 1
                if sized:
                    ends[dev, e].append((ts, new(rep, dev, None, None)))
                continue
            r = hit[1].find()
            r.nr_bios += 1
            r.bio_sectors += nr
            ends[dev, e].append((ts, hit[1]))
        elif kind == F:
            q = pop(queued[dev, s], ts, "queue")
            hit = pop(pending[dev, e if sized else FLUSH_SECTOR], ts, "pending request")
            if hit is None:  # the request it joined was never seen: a request starts here
                stats.unmatched["frontmerge"] += 1
                hit = (ts, new(rep, dev, None, None))
            r = hit[1].find()
            r.nr_bios += 1
            r.bio_sectors += max(nr, 0)
            r.bio_sector = sector if r.bio_sector is None else min(r.bio_sector, sector)
            if q is not None and (r.queue_ts is None or q[0] < r.queue_ts):
                r.queue_ts = q[0]
            pending[dev, s].append((ts, hit[1]))
        elif kind == RM:
            a = pop(pending[dev, s], ts, "pending request")
            b = pop(ends[dev, s], ts, "open end") if sized else None
            if a is None:
                stats.unmatched["request merge"] += 1
                continue
            if b is not None:
                ra, rb = a[1].find(), b[1].find()
                if ra is not rb:
                    _absorb(rb, ra)
        elif kind == I:
            hit = pop(pending[dev, s], ts, "pending request")
            r = hit[1] if hit else new(rep, dev, pid, comm)
            root = r.find()
            root.has_req = True
            if root.pid is None:
                root.pid, root.comm = pid, comm
            root.insert_ts = ts
            root.inserted = (sector, size, rwbs)
            pending[dev, s].append((ts, r))
        elif kind == D:
            hit = pop(pending[dev, s], ts, "pending request")
            if hit is None and sized:  # a re-dispatch of an issued request of this very range?
                again = next((item for item in issued[dev, s]
                              if item[2] == e and ts - item[0] <= stale_after_ns), None)
                if again is not None:
                    root = again[1].find()
                    root.issue_ts, root.dispatches = ts, root.dispatches + 1
                    root.sector, root.size, root.issued_rwbs = sector, size, rwbs
                    stats.redispatches += 1
                    continue
            r = hit[1] if hit else new(rep, dev, pid, comm)
            root = r.find()
            if sized and root.first_issue_ts is None:  # a re-issue after a requeue closed it the first time
                pop(ends[dev, e], ts, "open end")
            root.has_req = True
            if root.pid is None:
                root.pid, root.comm = pid, comm
            root.issue_ts, root.dispatches = ts, root.dispatches + 1
            if root.first_issue_ts is None:
                root.first_issue_ts = ts
            root.sector, root.size, root.issued_rwbs = sector, size, rwbs
            issued[dev, s].append((ts, r, e))
        elif kind == R:
            hit = pop_issued(issued[dev, s], ts, e if sized else None)
            if hit is None:
                stats.unmatched["requeue"] += 1
                r = new(rep, dev, None, None)
            else:
                r = hit[1]
            pending[dev, s].append((ts, r))
        elif kind == C:
            if nr == 0 and sector >= 0 and not is_empty_flush(rwbs):
                stats.ignored["flush_sequence_end"] += 1
                continue
            hit = pop_issued(issued[dev, s], ts, e if sized else None)
            if hit is None:
                stats.unmatched["complete without issue"] += 1
                continue
            _, r, issue_end = hit
            if sized and sector + nr < issue_end:
                issued[dev, sector + nr].append((ts, r, issue_end))
                continue
            root = r.find()
            root.complete_ts, root.error = ts, error
    rows = []
    for r in made:
        if r.into is not None or not r.has_req:
            continue
        if r.issue_ts is not None:
            sector, size, rwbs = r.sector, r.size, r.issued_rwbs
        elif r.inserted is not None:
            sector, size, rwbs = r.inserted
        else:
            sector, size, rwbs = r.bio_sector, r.bio_sectors * 512, r.rwbs
        rows.append({"rep": r.dev[0], "dev_major": r.dev[1], "dev_minor": r.dev[2],
                     "sector": -1 if sector is None or sector < 0 or not size else sector,
                     "size_bytes": max(size or 0, 0),
                     "rwbs": rwbs or "", "queue_ts": r.queue_ts, "getrq_ts": r.getrq_ts,
                     "insert_ts": r.insert_ts, "issue_ts": r.issue_ts, "complete_ts": r.complete_ts,
                     "first_issue_ts": r.first_issue_ts, "dispatches": r.dispatches,
                     "nr_bios": max(r.nr_bios, 1), "pid": r.pid, "comm": r.comm, "error": r.error or 0})
    if not rows:
        return BLOCK_RQ.empty(), stats
    times = ("queue_ts", "getrq_ts", "insert_ts", "issue_ts", "complete_ts", "first_issue_ts")
    out = pl.DataFrame(rows, schema_overrides={**{t: pl.Int64 for t in times}, "comm": pl.Utf8, "rwbs": pl.Utf8})
    out = with_rwbs_flags(out).with_columns(is_complete_match=complete_match_expr())
    out = out.sort(SORT_KEYS, nulls_last=True, maintain_order=True)
    stats.requests = len(out)
    stats.fully_matched = int(out["is_complete_match"].sum())
    return BLOCK_RQ.validate(out), stats


def _absorb(into: _Req, r: _Req) -> None:
    """Request r is merged into `into`: its bios, first queue and getrq times, and later events go there."""
    r.into = into
    into.nr_bios += r.nr_bios
    into.bio_sectors += r.bio_sectors
    into.has_req = into.has_req or r.has_req
    into.dispatches += r.dispatches
    for attr in ("queue_ts", "getrq_ts", "first_issue_ts"):
        a, b = getattr(into, attr), getattr(r, attr)
        if b is not None and (a is None or b < a):
            setattr(into, attr, b)
    for attr in ("insert_ts", "issue_ts", "complete_ts"):
        a, b = getattr(into, attr), getattr(r, attr)
        if b is not None and (a is None or b > a):
            setattr(into, attr, b)
