"""Property tests of block request pairing: the vectorized pairing equals the event-at-a-time oracle on
simulated block layers (merges, splits, requeues, partial completions, flush machinery, lost events), and on
clean traces every request is fully matched with non-negative, additive phases."""

from __future__ import annotations

import random

import numpy as np
import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mobiperf.collectors.parse.fifo import CONSUMER, PEEK, PRODUCER, fifo_match
from mobiperf.collectors.parse.pairing import pair_block_requests_compiled, pair_block_requests_vectorized
from pairing_oracle import pair_block_requests_oracle
from mobiperf.core.schema import BLOCK_EVENT


def simulate_block_layer(seed: int, n_bios: int, lost: float = 0.0, devices: int = 1,
                         overlap: bool = True) -> pl.DataFrame:
    """Block events of a plausible blk-mq run: bios queued, merged into or getting requests, inserted or
    issued directly, requeued now and then, completed whole or in parts; PREFLUSH/FUA writes with their flush
    requests; a fraction `lost` of the events dropped (ring buffer overruns). Without `overlap`, no two requests
    in flight share sectors (real block layers rarely have them; pairing then tells them apart only by order)."""
    rnd = random.Random(seed)
    rows: list[tuple] = []
    ts = 1_000_000
    pending: list[dict] = []   # requests not yet issued
    issued: list[dict] = []

    def emit(event, dev, sector, nr, rwbs, size=None, error=0, pid=100, comm="app"):
        nonlocal ts
        ts += rnd.choice((0, 1000, 1000, 2000, 5000))
        if lost and rnd.random() < lost:
            return
        rows.append((0, ts, 0, pid, comm, event, 7, dev, sector, nr,
                     size if size is not None else max(nr, 0) * 512, rwbs, error))

    def issue(req):
        pending.remove(req)
        if rnd.random() < 0.5:
            emit("block_rq_insert", req["dev"], req["s"], req["n"], req["rwbs"])
        emit("block_rq_issue", req["dev"], req["s"], req["n"], req["rwbs"])
        issued.append(req)

    def complete(req):
        issued.remove(req)
        if rnd.random() < 0.1:  # requeued once, then re-issued
            emit("block_rq_requeue", req["dev"], req["s"], req["n"], req["rwbs"])
            emit("block_rq_issue", req["dev"], req["s"], req["n"], req["rwbs"])
        if req["n"] >= 16 and rnd.random() < 0.2:  # completed in two parts
            half = req["n"] // 2
            emit("block_rq_complete", req["dev"], req["s"], half, req["rwbs"])
            emit("block_rq_complete", req["dev"], req["s"] + half, req["n"] - half, req["rwbs"])
        else:
            emit("block_rq_complete", req["dev"], req["s"], req["n"], req["rwbs"])

    for _ in range(n_bios):
        dev = rnd.randrange(devices)
        n = rnd.choice((8, 8, 16, 64, 256))
        rwbs = rnd.choice(("W", "WS", "R", "WSM", "RA"))
        tail = [r for r in pending if r["dev"] == dev and r["rwbs"] == rwbs]
        if tail and rnd.random() < 0.4:  # back merge into the newest pending request
            req = tail[-1]
            s = req["s"] + req["n"]
            emit("block_bio_queue", dev, s, n, rwbs)
            emit("block_bio_backmerge", dev, s, n, rwbs)
            req["n"] += n
        elif (tail and rnd.random() < 0.1 and tail[-1]["s"] >= n
              and (overlap or not [r for r in pending + issued if r["dev"] == dev
                                   and r["s"] < tail[-1]["s"] and tail[-1]["s"] - n < r["s"] + r["n"]])):
            # front merge
            req = tail[-1]
            s = req["s"] - n
            emit("block_bio_queue", dev, s, n, rwbs)
            emit("block_bio_frontmerge", dev, s, n, rwbs)
            req["s"], req["n"] = s, req["n"] + n
        else:
            s = rnd.choice((rnd.randrange(0, 1 << 20, 8), rnd.randrange(0, 64, 8)))  # some sectors recur
            busy = [r for r in pending + issued if r["dev"] == dev and r["s"] < s + n + 8 and s < r["s"] + r["n"] + 8]
            if busy and not overlap:
                s = (1 << 22) + rnd.randrange(0, 1 << 20, 8) * 64
            emit("block_bio_queue", dev, s, n, rwbs)
            if n >= 64 and rnd.random() < 0.3:  # split in two requests
                half = n // 2
                emit("block_split", dev, s, half, rwbs, size=half * 512)
                for part_s in (s, s + half):
                    emit("block_getrq", dev, part_s, half, rwbs)
                    pending.append({"dev": dev, "s": part_s, "n": half, "rwbs": rwbs})
            else:
                emit("block_getrq", dev, s, n, rwbs)
                pending.append({"dev": dev, "s": s, "n": n, "rwbs": rwbs})
        if rnd.random() < 0.05:  # a PREFLUSH+FUA journal commit block with its flush machinery
            s = rnd.randrange(1 << 21, 1 << 22, 8)
            emit("block_bio_queue", dev, s, 8, "FWFSM", pid=50, comm="jbd2/loop0-8")
            emit("block_getrq", dev, s, 8, "FWFSM", pid=50, comm="jbd2/loop0-8")
            emit("block_rq_issue", dev, 0, 0, "FF", size=0)
            emit("block_rq_complete", dev, -1, 0, "FF", size=0)
            emit("block_rq_insert", dev, s, 8, "WSM")
            emit("block_rq_issue", dev, s, 8, "WSM")
            emit("block_rq_complete", dev, s, 8, "WSM")
            emit("block_rq_complete", dev, s, 0, "WSM", size=0)  # end of the flush sequence
        while pending and rnd.random() < 0.5:
            issue(pending[0] if rnd.random() < 0.8 else pending[-1])
        while issued and rnd.random() < 0.4:
            complete(issued[0])
    while pending:
        issue(pending[0])
    while issued:
        complete(issued[0])
    return BLOCK_EVENT.validate(pl.DataFrame(rows, schema=list(BLOCK_EVENT.columns), orient="row"))


FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 120), lost=st.sampled_from([0.0, 0.0, 0.02, 0.2]),
       devices=st.integers(1, 2))
def test_compiled_and_vectorized_pairing_equal_the_oracle(seed, n, lost, devices):
    events = simulate_block_layer(seed, n, lost, devices)
    slow, slow_stats = pair_block_requests_oracle(events)
    for pair in (pair_block_requests_compiled, pair_block_requests_vectorized):
        fast, fast_stats = pair(events)
        assert fast.equals(slow), (pair.__name__, fast, slow)
        assert fast_stats.as_dict() == slow_stats.as_dict(), pair.__name__


@FAST
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 120))
def test_clean_traces_match_fully_with_additive_phases(seed, n):
    events = simulate_block_layer(seed, n, overlap=False)
    rq, stats = pair_block_requests_compiled(events)
    assert stats.matched_share == 1.0 and not stats.unmatched, stats.as_dict()
    bios = int((events["event"] == "block_bio_queue").sum())
    assert int(rq["nr_bios"].sum()) + int((rq["op"] == "flush").sum()) >= bios  # every bio in one request
    q, g, i, d, c = (rq[f"{p}_ts"] for p in ("queue", "getrq", "insert", "issue", "complete"))
    for a, b in ((q, g), (g, i), (i, d), (d, c), (q, c)):
        delta = (b - a).drop_nulls()
        assert (delta >= 0).all()
    full = rq.filter(pl.all_horizontal(pl.col(f"{p}_ts").is_not_null()
                                       for p in ("queue", "getrq", "insert", "issue", "complete")))
    q2c = full["complete_ts"] - full["queue_ts"]
    parts = ((full["getrq_ts"] - full["queue_ts"]) + (full["insert_ts"] - full["getrq_ts"])
             + (full["issue_ts"] - full["insert_ts"]) + (full["complete_ts"] - full["issue_ts"]))
    assert (q2c == parts).all()


@FAST
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 80), shuffle_seed=st.integers(0, 1000))
def test_pairing_independent_of_row_order(seed, n, shuffle_seed):
    """Rows may come in any order: pairing sorts by time. (Rows with equal timestamps are in trace order, the
    order the parsers emit; here every event gets its own timestamp.)"""
    events = simulate_block_layer(seed, n).with_row_index("_i").with_columns(
        ts=pl.col("ts") * 1000 + pl.col("_i").cast(pl.Int64)).drop("_i")
    shuffled = events.sample(fraction=1.0, shuffle=True, seed=shuffle_seed)
    assert pair_block_requests_compiled(shuffled)[0].equals(pair_block_requests_compiled(events)[0])


def test_stale_queue_entries_expire():
    """A Q never retired (its G was lost) must not be matched by a request to the same sector much later."""
    rows = [(0, 1_000, 0, 1, "a", "block_bio_queue", 7, 0, 800, 8, 4096, "W", 0),
            (0, 20_000_000_000, 0, 1, "a", "block_bio_queue", 7, 0, 800, 8, 4096, "W", 0),
            (0, 20_000_001_000, 0, 1, "a", "block_getrq", 7, 0, 800, 8, 4096, "W", 0),
            (0, 20_000_002_000, 0, 1, "a", "block_rq_issue", 7, 0, 800, 8, 4096, "W", 0),
            (0, 20_000_003_000, 0, 1, "a", "block_rq_complete", 7, 0, 800, 8, 4096, "W", 0)]
    events = BLOCK_EVENT.validate(pl.DataFrame(rows, schema=list(BLOCK_EVENT.columns), orient="row"))
    for pair in (pair_block_requests_compiled, pair_block_requests_vectorized, pair_block_requests_oracle):
        rq, stats = pair(events)
        assert rq["queue_ts"].to_list() == [20_000_000_000]
        assert rq["q2c" if "q2c" in rq.columns else "complete_ts"][0] - rq["queue_ts"][0] == 3000
        assert stats.unmatched["stale queue"] == 1


@settings(max_examples=200, deadline=None)
@given(ops=st.lists(st.tuples(st.integers(0, 3), st.sampled_from([PRODUCER, CONSUMER, PEEK]),
                              st.integers(0, 50)), max_size=60),
       stale=st.sampled_from([None, 20]))
def test_fifo_match_equals_a_queue(ops, stale):
    keys = np.array([k for k, _, _ in ops], np.int64)
    roles = np.array([r for _, r, _ in ops], np.int64)
    ts = np.cumsum([t for _, _, t in ops]).astype(np.int64) if ops else np.empty(0, np.int64)
    match, front, _ = fifo_match(keys, np.arange(len(ops), dtype=np.int64), roles, ts, stale)
    queues: dict[int, list[int]] = {}
    for i, (k, r, _) in enumerate(ops):
        q = queues.setdefault(k, [])
        if r == PRODUCER:
            q.append(i)
        elif r == CONSUMER:
            while q and stale is not None and ts[i] - ts[q[0]] > stale:
                q.pop(0)
            assert match[i] == (q.pop(0) if q else -1)
        else:
            assert front[i] == (q[0] if q else -1) or stale is not None
