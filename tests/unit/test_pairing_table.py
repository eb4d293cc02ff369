"""The pairing kernel's queue table (open addressing, backward-shift deletion, growth by doubling) against a
dict of deques: random pushes, pops from the front and expiring pops, from a table that starts small and grows
past a thousand live queues, keys that collide (multiples of the table size) included."""

from __future__ import annotations

import random
from collections import deque

import numpy as np
import pytest

pytest.importorskip("numba")
from mobiperf.collectors.parse.pairing_kernel import EMPTY, _pop_fresh, _pop_front, _push, _slot  # noqa: E402


@pytest.mark.parametrize("seed", range(6))
def test_queue_table_equals_dict_of_deques(seed):
    rnd = random.Random(seed)
    n_ops = 40_000
    tab = np.full((8, 3), EMPTY, np.int64)
    used = np.zeros(1, np.int64)
    node_next = np.full(n_ops, -1, np.int64)
    node_ts = np.zeros(n_ops, np.int64)
    stats = np.zeros(4, np.int64)
    free = np.full(3, -1, np.int64)  # expired nodes go onto the free list at free[0]
    model: dict[int, deque] = {}
    keys = [rnd.randrange(1 << 40) for _ in range(3000)] + [k * 1024 for k in range(200)]
    hot = keys[:50]
    n_nodes = 0
    expired = 0
    for step in range(n_ops):
        key = rnd.choice(hot if rnd.random() < 0.5 else keys)
        op = rnd.random()
        if op < 0.55:
            node = n_nodes
            n_nodes += 1
            node_next[node] = -1
            node_ts[node] = step
            tab = _push(tab, used, key, node, node_next)
            model.setdefault(key, deque()).append(node)
        elif op < 0.8:
            row = _slot(tab, key)
            if key in model:
                assert tab[row, 0] == key
                assert _pop_front(tab, used, row, node_next) == model[key].popleft()
                if not model[key]:
                    del model[key]
            else:
                assert tab[row, 0] == EMPTY
        else:  # nodes older than 500 steps expire
            got = _pop_fresh(tab, used, node_next, node_ts, key, step, 500, stats, 0, free)
            want = -1
            q = model.get(key, deque())
            while q:
                h = q.popleft()
                if step - node_ts[h] <= 500:
                    want = h
                    break
                expired += 1
            if key in model and not q:
                del model[key]
            assert got == want
        if step % 5000 == 0 or step == n_ops - 1:
            assert used[0] == len(model) == int((tab[:, 0] != EMPTY).sum())
            for k, q in model.items():  # every queue reachable, heads and tails right
                row = _slot(tab, k)
                assert (tab[row, 0], tab[row, 1], tab[row, 2]) == (k, q[0], q[-1])
    assert stats[0] == expired and len(tab) > 1024
    on_free_list, node = 0, free[0]
    while node >= 0:
        on_free_list, node = on_free_list + 1, node_next[node]
    assert on_free_list == expired
