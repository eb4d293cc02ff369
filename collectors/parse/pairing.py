"""Block events -> one row per block request (the `block_rq` table).

Three implementations of one definition: pair_block_requests_compiled runs the compiled state machine
(pairing_kernel.py, numba; with the table work around it ~5 M events/s of CPU here), pair_block_requests_vectorized
matches every FIFO at once with numpy (pairing_vectorized.py, fifo.py; for traces under COMPILED_MIN_EVENTS events,
where starting numba would cost more than the pairing, and where numba is missing), and tests/support/pairing_oracle.py
is the obvious event-at-a-time Python; tests hold all three equal. pair_block_requests picks by size.

The definitions (events, rules, limits) are block_requests.py's docstring.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from mobiperf.collectors.parse.block_requests import (C, KINDS, STALE_AFTER_NS, PairingStats, finish_requests,
                                                      ordered_events, rwbs_flush_op)
from mobiperf.core.schema import BLOCK_RQ


def _event_arrays(block_event: pl.DataFrame, stats: PairingStats):
    """The events in trace order and the arrays pairing reads; kind is -1 for rows pairing does not use
    (other events, and events without a device: plug/unplug in ftrace, counted as ignored). For the compiled
    pairing: dev and span come from pairing_kernel, and is_flush_op is decided only where the kernel reads it."""
    from mobiperf.collectors.parse.pairing_kernel import device_ids, sector_span

    ev = ordered_events(block_event)
    kind_names = list(KINDS)  # one hash pass: names not among them cast to null
    lut = np.array([KINDS[name] for name in kind_names] + [-1], np.int8)  # 1 byte a row: fresh memory is dear
    kind = lut[ev["event"].cast(pl.Enum(kind_names), strict=False).to_physical().fill_null(len(kind_names))
               .to_numpy()]
    major = ev["dev_major"].to_numpy()
    deviceless = major < 0
    if deviceless.any():
        names = ev["event"].filter(pl.Series(deviceless)).value_counts()
        for name, n in names.iter_rows():
            stats.ignored["deviceless " + name] += n
        kind[deviceless] = -1
    ts = ev["ts"].cast(pl.Int64).to_numpy()
    sector = ev["sector"].cast(pl.Int64).to_numpy()
    nr = ev["nr_sector"].cast(pl.Int64).to_numpy()
    dev, _ = device_ids(ev["rep"].to_numpy(), major, ev["dev_minor"].to_numpy())
    # the kernel asks whether the request is a flush only of zero-length completions at a sector
    asked = np.flatnonzero((kind == C) & (nr == 0) & (sector >= 0))
    is_flush_op = np.zeros(len(ev), bool)
    is_flush_op[asked] = rwbs_flush_op(ev["rwbs"].gather(asked))
    return ev, kind, ts, sector, nr, dev, is_flush_op, sector_span(sector, nr)


_STAT_NAMES = ("stale queue", "stale open end", "stale pending request", "stale issued request",
               "getrq without queue", "backmerge", "frontmerge", "request merge", "requeue",
               "complete without issue")


# Below this many events the vectorized pairing runs (about 0.6 µs of CPU an event here): starting numba for the
# compiled one costs about a second of CPU and 90 MB, more than pairing half a million events with numpy.
COMPILED_MIN_EVENTS = 500_000


def pair_block_requests(block_event: pl.DataFrame, *, stale_after_ns: int = STALE_AFTER_NS
                        ) -> tuple[pl.DataFrame, PairingStats]:
    """block_rq rows and pairing statistics: the compiled state machine for COMPILED_MIN_EVENTS events or more,
    the vectorized pairing below (the same rows: tests hold them equal)."""
    if len(block_event) < COMPILED_MIN_EVENTS:
        return pair_block_requests_vectorized(block_event, stale_after_ns=stale_after_ns)
    return pair_block_requests_compiled(block_event, stale_after_ns=stale_after_ns)


def pair_block_requests_compiled(block_event: pl.DataFrame, *, stale_after_ns: int = STALE_AFTER_NS
                                 ) -> tuple[pl.DataFrame, PairingStats]:
    """block_rq rows and pairing statistics; the compiled state machine (pairing_kernel.py)."""
    try:
        from mobiperf.collectors.parse.pairing_kernel import NULL, pair_events
    except ImportError:  # no numba on this host
        return pair_block_requests_vectorized(block_event, stale_after_ns=stale_after_ns)

    stats = PairingStats()
    ev, kind, ts, sector, nr, dev, is_flush_op, span = _event_arrays(block_event, stats)
    if not (kind >= 0).any():
        return BLOCK_RQ.empty(), stats
    (n_req, queue_ts, getrq_ts, insert_ts, issue_ts, complete_ts, issued_ev, inserted_ev, rwbs_ev, pid_ev,
     error_ev, bio_sector, bio_sectors, nr_bios, has_req, into, first_issue_ts, dispatches, counts) = pair_events(
        kind, dev, sector, nr, ts, is_flush_op, stale_after_ns, span)
    for name, count in zip(_STAT_NAMES, counts[:10].tolist()):
        stats.unmatched[name] += count
    stats.ignored["flush_sequence_end"] += int(counts[10])
    stats.redispatches = int(counts[11])
    keep = np.flatnonzero(has_req[:n_req] & (into[:n_req] < 0))
    src = np.where(issued_ev[keep] >= 0, issued_ev[keep], inserted_ev[keep])

    def gather(col: str, idx: np.ndarray) -> pl.Series:
        vals = ev[col].gather(np.maximum(idx, 0))
        return pl.select(pl.when(pl.Series(idx >= 0)).then(vals)).to_series()

    def nullable(a: np.ndarray) -> pl.Series:
        return pl.select(pl.when(pl.Series(a != NULL)).then(pl.Series(a))).to_series()

    who = pid_ev[keep]
    bio_sec = bio_sector[keep]
    # gathered in a select: a constant column (rep, comm of a blktrace without process notes) is then never
    # expanded to one value per event
    submitter = ev.select(pl.col("rep", "dev_major", "dev_minor", "pid", "comm").gather(who))
    out = pl.DataFrame({
        "rep": submitter["rep"], "dev_major": submitter["dev_major"], "dev_minor": submitter["dev_minor"],
        "sector": pl.select(pl.coalesce(gather("sector", src),
                                        pl.Series(np.where(bio_sec == NULL, -1, bio_sec)))).to_series(),
        "size_bytes": pl.select(pl.coalesce(gather("size_bytes", src),
                                            pl.Series(bio_sectors[keep] * 512))).to_series(),
        "rwbs": pl.select(pl.coalesce(gather("rwbs", src), gather("rwbs", rwbs_ev[keep]), pl.lit(""))).to_series(),
        "queue_ts": nullable(queue_ts[keep]), "getrq_ts": nullable(getrq_ts[keep]),
        "insert_ts": nullable(insert_ts[keep]), "issue_ts": nullable(issue_ts[keep]),
        "complete_ts": nullable(complete_ts[keep]), "first_issue_ts": nullable(first_issue_ts[keep]),
        "dispatches": dispatches[keep],
        "nr_bios": np.maximum(nr_bios[keep], 1), "pid": submitter["pid"], "comm": submitter["comm"],
        "error": pl.select(gather("error", error_ev[keep]).fill_null(0)).to_series(),
    })
    return finish_requests(out, stats)


def pair_block_requests_vectorized(block_event: pl.DataFrame, *, stale_after_ns: int = STALE_AFTER_NS
                                   ) -> tuple[pl.DataFrame, PairingStats]:
    """The same pairing without a compiler: every FIFO matched at once with numpy (pairing_vectorized.py)."""
    from mobiperf.collectors.parse.pairing_vectorized import pair_vectorized

    return pair_vectorized(block_event, stale_after_ns=stale_after_ns)



PHASE_EVENTS = (("queue", "queue_ts"), ("issue", "issue_ts"), ("complete", "complete_ts"))


def summarize_pairing(block_rq: pl.DataFrame) -> pl.DataFrame:
    """pairing_summary: per repetition, the requests, how many were matched for what the trace could match
    them for, and how many lack each phase.

    A trace holds the phases its events give: an atrace "disk" capture has issues and completions only, so its
    requests can be matched for D2C and nothing more. A request is matched when it has every phase (queue, issue,
    completion) of which its device's trace holds any event (the flush requests of the kernel's flush machinery
    need no queue: they have no bio); matched_for names those phases. fully_matched counts requests with all
    three (is_complete_match), whatever the trace holds."""
    flush_internal = (pl.col("op") == "flush") & pl.col("getrq_ts").is_null()
    dev = ["rep", "dev_major", "dev_minor"]
    held = block_rq.with_columns([pl.col(ts).is_not_null().any().over(dev).alias(f"_has_{name}")
                                  for name, ts in PHASE_EVENTS])
    needs = [~pl.col(f"_has_{name}") | pl.col(ts).is_not_null() | (flush_internal if name == "queue" else False)
             for name, ts in PHASE_EVENTS]
    phases = pl.concat_str([pl.when(pl.col(f"_has_{name}")).then(pl.lit(name)) for name, _ in PHASE_EVENTS],
                           separator="+", ignore_nulls=True)
    held = held.with_columns(_matched=pl.all_horizontal(needs), _phases=phases)
    return held.group_by("rep").agg(
        requests=pl.len().cast(pl.Int64), fully_matched=pl.col("is_complete_match").sum().cast(pl.Int64),
        matched=pl.col("_matched").sum().cast(pl.Int64),
        matched_for=pl.col("_phases").unique().sort().str.join(" | "),
        no_queue=(pl.col("queue_ts").is_null() & ~flush_internal).sum().cast(pl.Int64),
        no_issue=pl.col("issue_ts").is_null().sum().cast(pl.Int64),
        no_complete=pl.col("complete_ts").is_null().sum().cast(pl.Int64),
    ).with_columns(matched_share=pl.col("matched") / pl.col("requests")).select(
        "rep", "requests", "matched", "matched_for", "matched_share", "fully_matched", "no_queue", "no_issue",
        "no_complete").sort("rep")
