"""Re-dispatched block requests: the same (device, sector, size) issued again before it completed, with no requeue
event (blk-mq puts a request the driver refused back on its dispatch list; atrace "disk" captures hold only
block_rq_issue and block_rq_complete). Such an issue is the same request again: counted once, its D2C measured from
the last dispatch, its dispatch count and first dispatch kept (pairing.py docstring).

The property: adding re-dispatches to a trace never changes the requests, their bytes or their completions; only
issue_ts (the last dispatch), first_issue_ts and dispatches move. All three pairings agree. (Where requests in
flight share sectors, the simulator's `overlap`, a re-dispatch of one may be taken for one of the same range
ending at the same sector, e.g. the rest of a partial completion: order is all that tells them apart.)"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mobiperf.collectors.parse.pairing import pair_block_requests_compiled, pair_block_requests_vectorized
from pairing_oracle import pair_block_requests_oracle
from mobiperf.core.schema import BLOCK_EVENT

sys.path.insert(0, str(Path(__file__).parent))
from test_pairing_properties import simulate_block_layer  # noqa: E402

PAIRINGS = (pair_block_requests_compiled, pair_block_requests_vectorized, pair_block_requests_oracle)
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
S = 1_858_816


def events(rows: list[tuple]) -> pl.DataFrame:
    """(ts, event, sector, nr_sector, rwbs) -> block_event rows on device 93:32 (bytes 0 in issues, as 3.x)."""
    full = [(0, ts, 1, 3714, "nand-dev-rw", event, 93, 32, sector, nr, nr * 512, rwbs, 0)
            for ts, event, sector, nr, rwbs in rows]
    return BLOCK_EVENT.validate(pl.DataFrame(full, schema=list(BLOCK_EVENT.columns), orient="row"))


@pytest.mark.parametrize("pair", PAIRINGS, ids=lambda f: f.__name__)
def test_a_second_issue_of_a_request_in_flight_is_a_redispatch(pair):
    rq, stats = pair(events([
        (1_000, "block_rq_issue", S, 256, "W"),
        (1_500, "block_rq_issue", S + 256, 8, "R"),      # another request in flight meanwhile
        (2_000, "block_rq_issue", S, 256, "W"),          # re-dispatch: no new request
        (2_100, "block_rq_complete", S + 256, 8, "R"),
        (2_350, "block_rq_issue", S, 256, "W"),          # and again
        (2_400, "block_rq_complete", S, 256, "W"),
        (3_000, "block_rq_issue", S, 256, "W"),          # completed before: a new request to the same range
        (3_300, "block_rq_complete", S, 256, "W"),
    ]))
    got = rq.sort("first_issue_ts").select("sector", "size_bytes", "first_issue_ts", "issue_ts", "complete_ts",
                                           "dispatches")
    assert got.rows() == [(S, 131072, 1_000, 2_350, 2_400, 3), (S + 256, 4096, 1_500, 1_500, 2_100, 1),
                          (S, 131072, 3_000, 3_000, 3_300, 1)]
    assert stats.requests == 3 and stats.redispatches == 2 and not stats.unmatched


@pytest.mark.parametrize("pair", PAIRINGS, ids=lambda f: f.__name__)
def test_flushes_and_other_sizes_are_not_redispatches(pair):
    """Two sectorless flushes in flight are two requests (3.x: pre- and post-flush of one FUA write, whose
    completions the kernel does not trace); an issue of another size at the same sector is another request."""
    rq, stats = pair(events([
        (1_000, "block_rq_issue", -1, 0, "FWS"),
        (2_000, "block_rq_issue", S, 8, "WS"),
        (2_100, "block_rq_complete", S, 8, "WS"),
        (2_200, "block_rq_issue", -1, 0, "FWS"),
        (2_300, "block_rq_complete", S, 0, "WS"),        # the end of the flush sequence, not a request
        (3_000, "block_rq_issue", S + 64, 8, "R"),
        (3_100, "block_rq_issue", S + 64, 16, "R"),
        (3_200, "block_rq_complete", S + 64, 8, "R"),
        (3_300, "block_rq_complete", S + 64, 16, "R"),
    ]))
    assert stats.redispatches == 0 and stats.requests == 5
    # `FWS` of no data is a flush on 3.x kernels, not a write of 0 bytes
    assert rq.group_by("op").len().sort("op").rows() == [("flush", 2), ("read", 2), ("write", 1)]
    flushes = rq.filter(pl.col("op") == "flush")
    assert flushes["size_bytes"].to_list() == [0, 0] and not flushes["is_preflush"].any()
    assert stats.ignored == {"flush_sequence_end": 1}


def with_redispatches(ev: pl.DataFrame, seed: int, share: float) -> tuple[pl.DataFrame, dict[int, list[int]]]:
    """ev with re-dispatches added: after some sized issues, copies of the issue row at later points before
    the next event at that (device, sector), if that is the request's whole completion or its requeue, each with
    the time of the row it follows. Returns the new events and, per original issue row, the times of its
    re-dispatches."""
    rnd = random.Random(seed)
    rows = ev.rows()
    col = {c: i for i, c in enumerate(ev.columns)}
    insert_after: dict[int, list[int]] = {}
    added: dict[int, list[int]] = {}
    for i, r in enumerate(rows):
        if r[col["event"]] != "block_rq_issue" or r[col["nr_sector"]] <= 0 or rnd.random() > share:
            continue
        key = (r[col["dev_minor"]], r[col["sector"]])
        j = i + 1
        while j < len(rows) and (rows[j][col["dev_minor"]], rows[j][col["sector"]]) != key:
            j += 1
        if (j == len(rows) or rows[j][col["event"]] not in ("block_rq_complete", "block_rq_requeue")
                or rows[j][col["nr_sector"]] != r[col["nr_sector"]]):
            continue  # only while the request is surely in flight: up to its own completion or requeue
        for at in sorted(rnd.sample(range(i, j), min(j - i, rnd.randint(1, 3)))):
            insert_after.setdefault(at, []).append(i)
            added.setdefault(i, []).append(rows[at][col["ts"]])
    out = []
    for k, r in enumerate(rows):
        out.append(r)
        for i in insert_after.get(k, []):
            again = list(rows[i])
            again[col["ts"]] = r[col["ts"]]
            out.append(tuple(again))
    return BLOCK_EVENT.validate(pl.DataFrame(out, schema=ev.schema, orient="row")), added


def issue_complete_only(ev: pl.DataFrame) -> pl.DataFrame:
    """What an atrace "disk" capture holds: block_rq_issue and block_rq_complete."""
    return ev.filter(pl.col("event").is_in(["block_rq_issue", "block_rq_complete"]))


def check_redispatches_change_nothing_else(before: pl.DataFrame, after: pl.DataFrame, n_added: int, stats_before,
                                          stats):
    keys = ["rep", "dev_minor", "sector", "size_bytes", "op", "complete_ts"]
    assert len(after) == len(before)
    assert after["size_bytes"].sum() == before["size_bytes"].sum()
    assert after.sort(keys, nulls_last=True).select(keys).equals(before.sort(keys, nulls_last=True).select(keys))
    assert int(after["dispatches"].sum()) == int(before["dispatches"].sum()) + n_added
    assert stats.redispatches == stats_before.redispatches + n_added
    # the first dispatch stays, the issue time is the last dispatch: D2C never grows
    joined = before.sort(keys, nulls_last=True).with_columns(after.sort(keys, nulls_last=True)
                                                               .select(pl.all().name.suffix("_r")))
    assert (joined["first_issue_ts_r"] == joined["first_issue_ts"]).all()
    assert (joined["issue_ts_r"] >= joined["issue_ts"]).all()


@FAST
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 120), devices=st.integers(1, 2))
def test_redispatches_never_change_requests_or_bytes_of_issue_complete_traces(seed, n, devices):
    ev = issue_complete_only(simulate_block_layer(seed, n, devices=devices, overlap=False))
    again, added = with_redispatches(ev, seed, 0.3)
    before, stats_before = pair_block_requests_compiled(ev)
    after, stats = pair_block_requests_compiled(again)
    n_added = sum(len(v) for v in added.values())
    check_redispatches_change_nothing_else(before, after, n_added, stats_before, stats)
    # D2C from the last dispatch: a request whose last issue got re-dispatches now has its last one as issue_ts
    last = {(ev["dev_minor"][i], ev["sector"][i], ev["ts"][i]): max(ts) for i, ts in added.items()}
    keys = ["rep", "dev_minor", "sector", "size_bytes", "complete_ts"]
    joined = before.sort(keys, nulls_last=True).with_columns(
        after.sort(keys, nulls_last=True).select(pl.col("issue_ts").alias("issue_ts_after")))
    moved = {(d, s, t): a for d, s, t, a in joined.select("dev_minor", "sector", "issue_ts", "issue_ts_after")
             .iter_rows() if (d, s, t) in last}
    assert moved == last
    for pair in PAIRINGS[1:]:
        other, other_stats = pair(again)
        assert other.equals(after) and other_stats.as_dict() == stats.as_dict(), pair.__name__


@FAST
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 120))
def test_redispatches_never_change_requests_or_bytes_of_full_traces(seed, n):
    """Traces with queue, merge, insert, requeue and flush events (no two requests in flight share sectors)."""
    ev = simulate_block_layer(seed, n, overlap=False)
    again, added = with_redispatches(ev, seed, 0.3)
    before, stats_before = pair_block_requests_compiled(ev)
    after, stats = pair_block_requests_compiled(again)
    check_redispatches_change_nothing_else(before, after, sum(len(v) for v in added.values()), stats_before, stats)
    assert stats.matched_share == 1.0 and not stats.unmatched, stats.as_dict()
    for pair in PAIRINGS[1:]:
        other, other_stats = pair(again)
        assert other.equals(after) and other_stats.as_dict() == stats.as_dict(), pair.__name__
