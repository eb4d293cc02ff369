"""Regression: two requests in flight at one start sector, one requeued and re-issued behind the other.

Request A (8 sectors) is issued at sector S, then request B (80 sectors) at S; A is requeued and re-issued, so
it now sits behind B in the issued FIFO of S. Its completion (S, 8) used to pop B (the front) as a partial
completion of B, and B's completion (S, 80) then completed A: B was left without a completion. Requeues and
completions with sectors now prefer the issued request of their exact size (pairing.py docstring)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mobiperf.collectors.parse.fifo import CONSUMER, NO_TAG, PRODUCER, fifo_match
from mobiperf.collectors.parse.pairing import pair_block_requests_compiled, pair_block_requests_vectorized
from pairing_oracle import pair_block_requests_oracle
from mobiperf.core.schema import BLOCK_EVENT

sys.path.insert(0, str(Path(__file__).parent))
from test_pairing_properties import simulate_block_layer  # noqa: E402

PAIRINGS = (pair_block_requests_compiled, pair_block_requests_vectorized, pair_block_requests_oracle)
S = 55_454_720


def events(rows: list[tuple]) -> pl.DataFrame:
    """(ts, event, sector, nr_sector, rwbs) -> block_event rows on device 7:0."""
    full = [(0, ts, 0, 100, "app", event, 7, 0, sector, nr, nr * 512, rwbs, 0)
            for ts, event, sector, nr, rwbs in rows]
    return BLOCK_EVENT.validate(pl.DataFrame(full, schema=list(BLOCK_EVENT.columns), orient="row"))


REQUEUE_BEHIND = [
    (1_000, "block_bio_queue", S, 8, "WSM"),
    (2_000, "block_getrq", S, 8, "WSM"),
    (3_000, "block_rq_issue", S, 8, "WSM"),        # A issued
    (4_000, "block_bio_queue", S, 80, "WS"),
    (5_000, "block_getrq", S, 80, "WS"),
    (6_000, "block_rq_insert", S, 80, "WS"),
    (7_000, "block_rq_issue", S, 80, "WS"),        # B issued: issued FIFO of S is [A, B]
    (8_000, "block_rq_requeue", S, 8, "WSM"),      # pops A: [B]
    (9_000, "block_rq_issue", S, 8, "WSM"),        # A re-issued: [B, A]
    (10_000, "block_rq_complete", S, 8, "WSM"),    # must complete A, not half of B
    (12_000, "block_rq_complete", S, 80, "WS"),
]


@pytest.mark.parametrize("pair", PAIRINGS, ids=lambda f: f.__name__)
def test_requeued_request_behind_another_at_its_sector_gets_its_own_completion(pair):
    rq, stats = pair(events(REQUEUE_BEHIND))
    got = rq.sort("size_bytes").select("sector", "size_bytes", "rwbs", "queue_ts", "issue_ts", "complete_ts")
    assert got.rows() == [(S, 4096, "WSM", 1_000, 9_000, 10_000), (S, 40960, "WS", 4_000, 7_000, 12_000)]
    assert stats.fully_matched == 2 and not stats.unmatched


@pytest.mark.parametrize("pair", PAIRINGS, ids=lambda f: f.__name__)
def test_partial_completions_still_pop_the_front(pair):
    """B (80 sectors, the front) completes in two parts while A (8) is behind it: (S, 40) has no exact match,
    so it is a partial completion of B; the rest (S+40, 40) ends B; then A completes."""
    rows = REQUEUE_BEHIND[:9] + [(10_000, "block_rq_complete", S, 40, "WS"),
                                 (11_000, "block_rq_complete", S + 40, 40, "WS"),
                                 (12_000, "block_rq_complete", S, 8, "WSM")]
    rq, stats = pair(events(rows))
    got = rq.sort("size_bytes").select("size_bytes", "issue_ts", "complete_ts")
    assert got.rows() == [(4096, 9_000, 12_000), (40960, 7_000, 11_000)]
    assert stats.fully_matched == 2 and not stats.unmatched


@pytest.mark.parametrize("pair", PAIRINGS, ids=lambda f: f.__name__)
def test_seed_of_the_reported_failure_matches_fully(pair):
    rq, stats = pair(simulate_block_layer(141355955, 60, overlap=False))
    assert stats.requests == 58 and stats.matched_share == 1.0 and not stats.unmatched, stats.as_dict()
    b = rq.filter((pl.col("sector") == S) & (pl.col("size_bytes") == 40960))
    assert b.select("issue_ts", "complete_ts").rows() == [(1_393_000, 1_486_000)]


def test_seed_of_the_reported_failure_equal_in_all_three():
    ev = simulate_block_layer(141355955, 60, overlap=False)
    slow, slow_stats = pair_block_requests_oracle(ev)
    for pair in PAIRINGS[:2]:
        fast, fast_stats = pair(ev)
        assert fast.equals(slow) and fast_stats.as_dict() == slow_stats.as_dict(), pair.__name__


@settings(max_examples=300, deadline=None)
@given(ops=st.lists(st.tuples(st.integers(0, 2), st.sampled_from([PRODUCER, CONSUMER]), st.integers(0, 3),
                              st.booleans(), st.integers(0, 30)), max_size=60),
       stale=st.sampled_from([None, 40]))
def test_fifo_match_with_tags_equals_a_queue(ops, stale):
    """Tagged consumers pop the oldest element of their tag, else the front (after expiring the front)."""
    keys = np.array([o[0] for o in ops], np.int64)
    roles = np.array([o[1] for o in ops], np.int64)
    tags = np.array([o[2] if o[1] == PRODUCER or o[3] else NO_TAG for o in ops], np.int64)
    ts = np.cumsum([o[4] for o in ops]).astype(np.int64) if ops else np.empty(0, np.int64)
    match, _, expired = fifo_match(keys, np.arange(len(ops), dtype=np.int64), roles, ts, stale, tags)
    queues: dict[int, list[int]] = {}
    want_expired = 0
    for i, (k, r, _, _, _) in enumerate(ops):
        q = queues.setdefault(k, [])
        if r == PRODUCER:
            q.append(i)
            continue
        while q and stale is not None and ts[i] - ts[q[0]] > stale:
            q.pop(0)
            want_expired += 1
        same = [j for j, p in enumerate(q) if tags[i] != NO_TAG and tags[p] == tags[i]]
        assert match[i] == (q.pop(same[0] if same else 0) if q else -1), i
    assert expired == want_expired
