"""Block events -> one row per block request (the `block_rq` table).

Matching, per device, in trace order:
  Q  block_bio_queue      a bio enters; remembered under its start sector (FIFO per sector)
  G  block_getrq          a request is allocated for a bio: takes the oldest Q at that sector
  M  block_bio_backmerge  a bio joins the end of a not-yet-issued request (found by its end sector)
  F  block_bio_frontmerge a bio joins the front of one (found by its start sector)
     block_rq_merge       a whole request is absorbed by its neighbour (blk-mq)
  I  block_rq_insert      the request enters the scheduler
  D  block_rq_issue       the driver takes it (requests that skipped G/I start here)
  R  block_rq_requeue     back from the driver; its next D restarts the clock
  C  block_rq_complete    done; a partial completion advances the start sector and keeps it open
  X  block_split          the remainder of a split bio inherits the queue time of the original

Matching is FIFO ("pop") per (device, sector), and a Q older than `stale_after_ns` is expired instead of matched:
btt's sector-only matching keeps never-retired Qs forever, and on long traces with rewritten sectors (journals,
SQLite) later requests match them, producing bogus multi-second Q2G. Flushes (no sectors) are matched FIFO by op.

Limits: plug/unplug carry no device in ftrace and are not used here; requests whose Q was lost keep a null
queue_ts; events before the trace started show up as unmatched completions, counted in the stats.
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass, field

import polars as pl

from mobiperf.collectors.parse.rwbs import decode_rwbs
from mobiperf.schema import BLOCK_RQ

STALE_AFTER_NS = 10_000_000_000
FLUSH_KEY = -2  # sector key shared by all sectorless requests of a device


@dataclass
class _Request:
    dev: tuple[int, int]
    start: int
    end: int
    rwbs: str
    pid: int
    comm: str
    queue_ts: int | None = None
    getrq_ts: int | None = None
    insert_ts: int | None = None
    issue_ts: int | None = None
    complete_ts: int | None = None
    size_bytes: int = 0
    nr_bios: int = 1
    error: int = 0


@dataclass
class PairingStats:
    requests: int = 0
    fully_matched: int = 0
    unmatched: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    @property
    def matched_share(self) -> float:
        return self.fully_matched / self.requests if self.requests else 1.0

    def as_dict(self) -> dict:
        return {"requests": self.requests, "fully_matched": self.fully_matched,
                "matched_share": round(self.matched_share, 6), "unmatched": dict(self.unmatched)}


class _DeviceState:
    def __init__(self):
        self.queued: dict[int, deque] = defaultdict(deque)      # sector -> (ts, nr, pid, comm) of waiting bios
        self.pending: dict[int, deque] = defaultdict(deque)     # start sector -> requests not yet issued
        self.by_end: dict[int, _Request] = {}                   # end sector -> request open to back merges
        self.issued: dict[int, deque] = defaultdict(deque)      # start sector -> requests at the driver


def pair_block_requests(block_event: pl.DataFrame, *, stale_after_ns: int = STALE_AFTER_NS
                        ) -> tuple[pl.DataFrame, PairingStats]:
    stats = PairingStats()
    done: list[_Request] = []
    frames: list[pl.DataFrame] = []
    for (rep,), events in block_event.sort(["rep", "ts"], maintain_order=True).group_by("rep", maintain_order=True):
        states: dict[tuple[int, int], _DeviceState] = defaultdict(_DeviceState)
        cols = ("ts", "pid", "comm", "event", "dev_major", "dev_minor", "sector", "nr_sector", "size_bytes",
                "rwbs", "error")
        for ts, pid, comm, event, major, minor, sector, nr, size, rwbs, error in events.select(cols).iter_rows():
            if major < 0:
                stats.unmatched["deviceless " + event] += 1
                continue
            st = states[(major, minor)]
            key = sector if nr > 0 else FLUSH_KEY
            handler = _HANDLERS.get(event)
            if handler is None:
                continue
            handler(st, (major, minor), key, ts, pid, comm, nr, size, rwbs, error, done, stats, stale_after_ns)
        for st in states.values():  # requests still open at the end of the trace
            for reqs in (*st.pending.values(), *st.issued.values()):
                done.extend(reqs)
        if done:
            frames.append(pl.DataFrame(_rows(done, rep), schema=BLOCK_RQ.columns, orient="row"))
            done.clear()
    table = pl.concat(frames) if frames else BLOCK_RQ.empty()
    table = table.sort(["rep", "issue_ts", "queue_ts"], nulls_last=True)
    stats.requests = len(table)
    stats.fully_matched = int(table["is_complete_match"].sum()) if len(table) else 0
    return BLOCK_RQ.validate(table), stats


def _take_queued(st: _DeviceState, key: int, ts: int, stats: PairingStats, stale_after_ns: int):
    waiting = st.queued.get(key)
    while waiting:
        q = waiting.popleft()
        if ts - q[0] <= stale_after_ns:
            return q
        stats.unmatched["stale queue"] += 1
    return None


def _on_queue(st, dev, key, ts, pid, comm, nr, size, rwbs, error, done, stats, stale):
    st.queued[key].append((ts, nr, pid, comm))


def _on_split(st, dev, key, ts, pid, comm, nr, size, rwbs, error, done, stats, stale):
    # The parser stores a split's first part as nr_sector (new_sector - sector). The remainder, which starts at
    # key + nr, inherits the queue time of the original bio unless it gets a Q of its own.
    waiting = st.queued.get(key)
    if waiting:
        st.queued[key + nr].append(waiting[0])


def _new_request(dev, key, nr, rwbs, pid, comm) -> _Request:
    return _Request(dev=dev, start=key, end=key + max(nr, 0), rwbs=rwbs, pid=pid, comm=comm,
                    size_bytes=max(nr, 0) * 512)


def _on_getrq(st, dev, key, ts, pid, comm, nr, size, rwbs, error, done, stats, stale):
    req = _new_request(dev, key, nr, rwbs, pid, comm)
    req.getrq_ts = ts
    q = _take_queued(st, key, ts, stats, stale)
    if q is not None:
        req.queue_ts, req.pid, req.comm = q[0], q[2], q[3]
    else:
        stats.unmatched["getrq without queue"] += 1
    st.pending[key].append(req)
    if key != FLUSH_KEY:
        st.by_end[req.end] = req


def _on_backmerge(st, dev, key, ts, pid, comm, nr, size, rwbs, error, done, stats, stale):
    _take_queued(st, key, ts, stats, stale)
    req = st.by_end.pop(key, None)
    if req is None or req.issue_ts is not None:
        stats.unmatched["backmerge"] += 1
        return
    req.end = key + nr
    req.size_bytes = (req.end - req.start) * 512
    req.nr_bios += 1
    st.by_end[req.end] = req


def _on_frontmerge(st, dev, key, ts, pid, comm, nr, size, rwbs, error, done, stats, stale):
    q = _take_queued(st, key, ts, stats, stale)
    waiting = st.pending.get(key + nr)
    if not waiting:
        stats.unmatched["frontmerge"] += 1
        return
    req = waiting.popleft()
    req.start = key
    req.size_bytes = (req.end - req.start) * 512
    req.nr_bios += 1
    if q is not None and (req.queue_ts is None or q[0] < req.queue_ts):
        req.queue_ts = q[0]
    st.pending[key].append(req)


def _on_rq_merge(st, dev, key, ts, pid, comm, nr, size, rwbs, error, done, stats, stale):
    waiting = st.pending.get(key)
    if not waiting:
        stats.unmatched["request merge"] += 1
        return
    absorbed = waiting.popleft()
    st.by_end.pop(absorbed.end, None)
    into = st.by_end.pop(absorbed.start, None)
    if into is not None and into.issue_ts is None:
        into.end = absorbed.end
        into.size_bytes = (into.end - into.start) * 512
        into.nr_bios += absorbed.nr_bios
        st.by_end[into.end] = into


def _pending_for(st, dev, key, nr, rwbs, pid, comm, stats, what) -> _Request:
    waiting = st.pending.get(key)
    if waiting:
        return waiting[0]
    req = _new_request(dev, key, nr, rwbs, pid, comm)
    st.pending[key].append(req)
    if key != FLUSH_KEY:
        st.by_end[req.end] = req
    return req


def _on_insert(st, dev, key, ts, pid, comm, nr, size, rwbs, error, done, stats, stale):
    req = _pending_for(st, dev, key, nr, rwbs, pid, comm, stats, "insert")
    req.insert_ts = ts
    req.rwbs = rwbs
    if size > 0:
        req.size_bytes = size


def _on_issue(st, dev, key, ts, pid, comm, nr, size, rwbs, error, done, stats, stale):
    req = _pending_for(st, dev, key, nr, rwbs, pid, comm, stats, "issue")
    st.pending[key].popleft()
    if not st.pending[key]:
        del st.pending[key]
    if key != FLUSH_KEY:
        st.by_end.pop(req.end, None)
    req.issue_ts = ts
    req.rwbs = rwbs
    if size > 0:
        req.size_bytes = size
    st.issued[key].append(req)


def _on_requeue(st, dev, key, ts, pid, comm, nr, size, rwbs, error, done, stats, stale):
    waiting = st.issued.get(key)
    if not waiting:
        stats.unmatched["requeue"] += 1
        return
    req = waiting.popleft()
    req.issue_ts = None
    st.pending[key].appendleft(req)


def _on_complete(st, dev, key, ts, pid, comm, nr, size, rwbs, error, done, stats, stale):
    waiting = st.issued.get(key)
    if not waiting:
        stats.unmatched["complete without issue"] += 1
        return
    req = waiting.popleft()
    if not waiting:
        del st.issued[key]
    if key != FLUSH_KEY and 0 < nr < req.end - req.start:
        # Partial completion: the rest of the request stays at the driver under its new start sector.
        req.start += nr
        st.issued[req.start].appendleft(req)
        return
    req.complete_ts = ts
    req.error = error
    done.append(req)


_HANDLERS = {
    "block_bio_queue": _on_queue, "block_split": _on_split, "block_getrq": _on_getrq,
    "block_bio_backmerge": _on_backmerge, "block_bio_frontmerge": _on_frontmerge, "block_rq_merge": _on_rq_merge,
    "block_rq_insert": _on_insert, "block_rq_issue": _on_issue, "block_rq_requeue": _on_requeue,
    "block_rq_complete": _on_complete, "block_rq_error": _on_complete,
}


def _rows(requests: list[_Request], rep: int) -> list[tuple]:
    rows = []
    for r in requests:
        flags = decode_rwbs(r.rwbs)
        start = r.start if r.start != FLUSH_KEY else -1
        complete = r.issue_ts is not None and r.complete_ts is not None and r.queue_ts is not None
        rows.append((rep, r.dev[0], r.dev[1], start, r.size_bytes, r.rwbs, flags.op, flags.is_sync, flags.is_meta,
                     flags.is_fua, flags.is_preflush, flags.is_readahead, r.queue_ts, r.getrq_ts, r.insert_ts,
                     r.issue_ts, r.complete_ts, r.nr_bios, r.pid, r.comm, r.error, complete))
    return rows
