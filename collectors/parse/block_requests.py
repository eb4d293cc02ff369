"""The block request: the rows of the `block_rq` table, the events and rules that make one, and how a request
row is finished; shared by the three pairings (pairing.py: compiled, vectorized; tests/support/pairing_oracle.py).

Definitions (every pairing implements these; tests hold the three equal):

  Q  block_bio_queue      a bio enters; queued under its start sector
  X  block_split          the remainder (at new_sector) inherits the queue time of the bio at the front of the
                          split sector's queue (peeked, not popped: the first part goes on to its own G)
  G  block_getrq          a request is born for a bio: pops the oldest Q at its sector (queue_ts, pid, comm);
                          the request is pending at its start sector and open to back merges at its end sector
  M  block_bio_backmerge  a bio joins the request whose open end is the bio's sector (pops its Q; the end moves)
  F  block_bio_frontmerge a bio joins the pending request that starts where the bio ends (the start moves)
     block_rq_merge       a pending request (at its start) is absorbed by the request whose open end it starts at
  I  block_rq_insert      the request at the front of its sector's pending queue enters the scheduler; it goes
                          to the back of that queue (a request's place is set by its latest event)
  D  block_rq_issue       pops the pending request at its sector (or starts one: direct issue, flush machinery);
                          closes the request's open end (its first D only); the request is now at the driver.
                          A D that finds no
                          pending request while an issued, uncompleted request of the same (device, sector, end)
                          is in flight is a re-dispatch of that request (blk-mq puts a request the driver refused
                          with BLK_STS_RESOURCE back on its dispatch list and issues it again, with no requeue
                          event; atrace "disk" captures hold only D and C): no new request, its dispatch count
                          grows, its issue time moves to the latest D
  R  block_rq_requeue     pops the issued request and puts it back into pending; the next D re-issues it
  C  block_rq_complete    pops the issued request; a partial completion (fewer sectors than remain) keeps the
                          rest issued under the sector after the completed part
     (R and C, exact size first: when the event has sectors, the oldest issued request at its sector whose
     issued range ends where the event ends (sector + nr_sector) is popped, even if it is not at the front; only
     when none does, the front. A requeued request re-issued behind another one at the same sector is thus still
     found by its own completion, not taken for a partial completion of the other. Partial completions and
     events without sectors (flushes) pop the front.)

Every queue is FIFO per (device, sector), and an element older than `stale_after_ns` when a later event looks
for it is expired instead of matched (btt matches by sector without expiry, so on long traces a never-retired Q
is matched by a much later request to a rewritten sector: bogus multi-second Q2G; trace-formats.md §1.5).
Requests with no sectors (flushes, empty preflush bios) share one key per device. A zero-length completion at a
real sector of a non-flush request is the end of a PREFLUSH/FUA flush sequence (blk-mq completes the original
request again after the post-flush); it is counted as `flush_sequence_end` and not matched.

Per request: queue_ts is the earliest Q among its bios (the bio that got the request and any front-merged bio);
getrq_ts the earliest G; insert_ts the latest I; issue_ts the latest D (after a requeue, the re-issue);
complete_ts the final, non-partial C; first_issue_ts the earliest D and dispatches the number of D (a requeued
request's re-issue and re-dispatches count; issue_ts - first_issue_ts is the wait between the first and the last
dispatch, a part of I2D); sector, size and rwbs from the latest D (else I, else the bios).
pid/comm are the submitter's (from the Q), nr_bios counts G, M and F events, absorbed requests included.
A request is fully matched when its queue, issue and completion were all seen (for the flush requests of
the kernel's flush machinery, which have no bio: issue and completion).

Limits: plug/unplug carry no device in ftrace and are not used; events lost by the ring buffer leave requests
with null phases (counted in the stats, never guessed); two requests in flight at the same start sector are
told apart by the size of a requeue or completion, else by order: a partial completion of one whose size
equals another in-flight request at that sector completes the other; two of the same size, and queued bios,
pending requests and open ends, are matched by order only. A re-dispatch while another request waits at the same
start sector is taken for that request's issue (pending requests come first); sectorless requests (flushes)
are never taken for re-dispatches, since two of them may well be in flight at once.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace

import numpy as np
import polars as pl

from mobiperf.collectors.parse.rwbs import decode_rwbs
from mobiperf.core.schema import BLOCK_RQ

STALE_AFTER_NS = 10_000_000_000
FLUSH_SECTOR = -2  # the shared key of sectorless requests
KINDS = {"block_bio_queue": 0, "block_split": 1, "block_getrq": 2, "block_bio_backmerge": 3,
         "block_bio_frontmerge": 4, "block_rq_merge": 5, "block_rq_insert": 6, "block_rq_issue": 7,
         "block_rq_requeue": 8, "block_rq_complete": 9, "block_rq_error": 9}
Q, X, G, M, F, RM, I, D, R, C = range(10)  # noqa: E741 - blktrace's action letters (I: insert)


@dataclass
class PairingStats:
    requests: int = 0
    fully_matched: int = 0
    unmatched: Counter = field(default_factory=Counter)
    ignored: Counter = field(default_factory=Counter)
    redispatches: int = 0  # issue events taken for a re-dispatch of a request in flight (no request of their own)

    @property
    def matched_share(self) -> float:
        return self.fully_matched / self.requests if self.requests else 1.0

    def as_dict(self) -> dict:
        return {"requests": self.requests, "fully_matched": self.fully_matched,
                "fully_matched_share": round(self.matched_share, 6),
                "redispatches": self.redispatches,
                "unmatched": {k: v for k, v in sorted(self.unmatched.items()) if v},
                "ignored": {k: v for k, v in sorted(self.ignored.items()) if v}}


def ordered_events(block_event: pl.DataFrame) -> pl.DataFrame:
    """Events in trace order: by repetition, then time, ties in input order (the parsers already emit this)."""
    rep, ts = block_event["rep"].to_numpy(), block_event["ts"].to_numpy()
    # comparisons, not np.diff: boolean temporaries instead of 8-byte ones
    if len(rep) < 2 or bool(np.all((rep[1:] > rep[:-1]) | ((rep[1:] == rep[:-1]) & (ts[1:] >= ts[:-1])))):
        return block_event
    return block_event.sort(["rep", "ts"], maintain_order=True)


def decode_request_rwbs(rwbs: str):
    """decode_rwbs, except that blkparse's `FN` (blktrace cannot tell a flush op from a pre-flush: both set
    BLK_TC_FLUSH, and a flush has no bytes, hence N) is a flush request, not a pre-flush of nothing."""
    d = decode_rwbs(rwbs)
    if d.is_preflush and d.op == "other":
        return replace(d, op="flush", is_preflush=False)
    return d


def is_empty_flush(rwbs: str) -> bool:
    """Whether a request (or completion) of no data with this rwbs is a flush: a flush op, or a pre-flush of
    nothing (3.x kernels and blktrace print an empty flush bio or flush request as `FWS` + 0: REQ_FLUSH on a
    write of no data). The flush machinery clears REQ_PREFLUSH on the request it completes at the end of a flush
    sequence, so that zero-length completion is not taken for one."""
    d = decode_request_rwbs(rwbs)
    return d.op == "flush" or d.is_preflush


def rwbs_flush_op(rwbs: pl.Series) -> np.ndarray:
    """is_empty_flush of each event (asked only of zero-length completions)."""
    uniq = rwbs.unique().to_list()
    flush = {s for s in uniq if s is not None and is_empty_flush(s)}
    return rwbs.is_in(list(flush)).fill_null(False).to_numpy() if flush else np.zeros(len(rwbs), bool)


SORT_KEYS = ["rep", "issue_ts", "queue_ts", "getrq_ts", "sector", "size_bytes", "complete_ts", "insert_ts",
             "dev_major", "dev_minor"]


def finish_requests(out: pl.DataFrame, stats: PairingStats) -> tuple[pl.DataFrame, PairingStats]:
    out = out.with_columns(size_bytes=pl.col("size_bytes").clip(lower_bound=0))
    out = out.with_columns(pl.when((pl.col("sector") < 0) | (pl.col("size_bytes") == 0)).then(-1)
                           .otherwise("sector").alias("sector"))
    out = with_rwbs_flags(out).with_columns(is_complete_match=complete_match_expr())
    out = sort_requests(out)
    stats.requests = len(out)
    stats.fully_matched = int(out["is_complete_match"].sum())
    stats.unmatched = Counter({k: v for k, v in stats.unmatched.items() if v})
    stats.ignored = Counter({k: v for k, v in stats.ignored.items() if v})
    return BLOCK_RQ.validate(out), stats


def sort_requests(out: pl.DataFrame) -> pl.DataFrame:
    """out.sort(SORT_KEYS, nulls_last=True, maintain_order=True), at a fraction of the cost: the first two keys
    (rep, issue_ts: a time, nearly unique) decide almost every pair, so rows are ordered by them with one numpy
    sort and only rows that tie there (unissued requests, equal issue times) are sorted by every key."""
    if len(out) < 2 or out["rep"].null_count():
        return out.sort(SORT_KEYS, nulls_last=True, maintain_order=True)
    rep = out["rep"].to_numpy()
    unissued = out["issue_ts"].is_null().to_numpy()
    issue = out["issue_ts"].fill_null(0).to_numpy()
    order = np.lexsort((issue, unissued, rep))  # stable: ties keep input order
    r, u, t = rep[order], unissued[order], issue[order]
    same = (r[1:] == r[:-1]) & (u[1:] == u[:-1]) & (t[1:] == t[:-1])
    if same.any():
        tied = np.zeros(len(out), bool)
        tied[1:] |= same
        tied[:-1] |= same
        at = np.flatnonzero(tied)  # tie groups are runs of `order`; each group's rows are in input order
        keys = out.select(SORT_KEYS)[order[at]].with_columns(pl.Series("_row", order[at]))
        order[at] = keys.sort(SORT_KEYS, nulls_last=True, maintain_order=True)["_row"].to_numpy()
    return out[order]


def complete_match_expr() -> pl.Expr:
    """Issue and completion seen, and the queue of its first bio too, except for the flush requests the
    kernel's flush machinery makes (PREFLUSH/FUA sequences): those have no bio, hence no Q or G."""
    internal_flush = (pl.col("op") == "flush") & pl.col("getrq_ts").is_null()
    return (pl.col("queue_ts").is_not_null() | internal_flush) & pl.col("issue_ts").is_not_null() \
        & pl.col("complete_ts").is_not_null()


def with_rwbs_flags(df: pl.DataFrame) -> pl.DataFrame:
    uniq = df["rwbs"].unique().to_list()
    decoded = {s: decode_request_rwbs(s) for s in uniq}
    flags = pl.DataFrame({
        "rwbs": uniq, "op": [decoded[s].op for s in uniq],
        "is_sync": [decoded[s].is_sync for s in uniq], "is_meta": [decoded[s].is_meta for s in uniq],
        "is_fua": [decoded[s].is_fua for s in uniq], "is_preflush": [decoded[s].is_preflush for s in uniq],
        "is_readahead": [decoded[s].is_readahead for s in uniq]},
        schema_overrides={"rwbs": pl.Utf8, "op": pl.Utf8, **{f: pl.Boolean for f in (
            "is_sync", "is_meta", "is_fua", "is_preflush", "is_readahead")}})  # typed when empty too
    df = df.join(flags, on="rwbs", how="left")
    # a pre-flush of no data is a flush request (3.x kernels: `FWS` + 0), not a write of 0 bytes
    empty_flush = pl.col("is_preflush") & (pl.col("size_bytes") == 0) & (pl.col("op") != "flush")
    return df.with_columns(op=pl.when(empty_flush).then(pl.lit("flush")).otherwise("op"),
                           is_preflush=pl.col("is_preflush") & ~empty_flush)
