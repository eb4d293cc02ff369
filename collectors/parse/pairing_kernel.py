"""The block request pairing state machine, compiled with numba: one pass over the events in trace order.

Same definitions as pairing.py's docstring and the same steps as the Python oracle (pairing_oracle.py), on
arrays: every FIFO is a linked list in one node pool, found through a hash table from (queue kind, device,
sector) to its head and tail. Requests are rows of parallel arrays; a request absorbed by another
(block_rq_merge) points to it (`into`), and find() follows those links. About 12-15 M events/s of CPU time on
this machine (5 M events of the analyze bench in 0.33-0.5 s; 2 cores, wall time is longer when they are shared).
"""

from __future__ import annotations

import numpy as np
from numba import njit

Q, X, G, M, F, RM, I, D, R, C = range(10)  # noqa: E741 - blktrace's action letters (I: insert)
QUEUED, ENDS, PENDING, ISSUED = 0, 1, 2, 3
NULL = np.iinfo(np.int64).min
# stats slots
ST_STALE = 0            # + queue kind (0..3): expired elements per queue
ST_GETRQ_NO_Q = 4
ST_BACKMERGE = 5
ST_FRONTMERGE = 6
ST_RQ_MERGE = 7
ST_REQUEUE = 8
ST_COMPLETE_NO_ISSUE = 9
ST_FLUSH_SEQ_END = 10
ST_REDISPATCH = 11
N_STATS = 12


@njit(cache=True)
def device_ids(rep, major, minor):
    """Per event, the rank of its (rep, dev_major, dev_minor) among the distinct ones (sorted), and the number
    of them; a trace has a few devices, found by a linear search."""
    n = len(rep)
    seen = np.empty(16, np.int64)
    n_seen = 0
    ids = np.empty(n, np.int32)
    for i in range(n):
        c = (np.int64(rep[i]) << 40) | (np.int64(major[i]) << 20) | np.int64(minor[i])
        j = 0
        while j < n_seen and seen[j] != c:
            j += 1
        if j == n_seen:
            if n_seen == len(seen):
                grown = np.empty(2 * len(seen), np.int64)
                grown[:n_seen] = seen[:n_seen]
                seen = grown
            seen[n_seen] = c
            n_seen += 1
        ids[i] = j
    order = np.argsort(seen[:n_seen])
    if np.any(order != np.arange(n_seen)):  # first seen is not sorted order: renumber
        rank = np.empty(n_seen, np.int64)
        rank[order] = np.arange(n_seen)
        for i in range(n):
            ids[i] = rank[ids[i]]
    return ids, n_seen


@njit(cache=True)
def sector_span(sector, nr):
    """max(sector + max(nr, 0), 0) over the events, + 3: keys (device * span + sector + 2) stay distinct."""
    top = 0
    for i in range(len(sector)):
        v = sector[i] + max(nr[i], 0)
        if v > top:
            top = v
    return top + 3


@njit(cache=True)
def _find(into, r):
    while into[r] >= 0:
        r = into[r]
    return r


# The queues' heads and tails: an open-addressing table (linear probing, backward-shift deletion) of rows
# (key, head node, tail node), keys >= 0, EMPTY marks a free row. A typed Dict did the same 3-4x slower; the
# table grows by doubling and stays as small as the queues alive at once (a few thousand: cache-resident).
EMPTY = -1
HASH_MUL = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing


@njit(cache=True)
def _home(key, mask):
    return np.int64((np.uint64(key) * HASH_MUL) >> np.uint64(32)) & mask


@njit(cache=True)
def _slot(tab, key):
    """The row of key, or the free row where it would go (tab[row, 0] tells which)."""
    mask = len(tab) - 1
    i = _home(key, mask)
    while tab[i, 0] != key and tab[i, 0] != EMPTY:
        i = (i + 1) & mask
    return i


@njit(cache=True)
def _delete(tab, used, i):
    """Free row i, moving later rows of its probe run back so that every key stays reachable."""
    mask = len(tab) - 1
    used[0] -= 1
    while True:
        tab[i, 0] = EMPTY
        j = i
        while True:
            j = (j + 1) & mask
            if tab[j, 0] == EMPTY:
                return
            h = _home(tab[j, 0], mask)
            # the row at j may move to i unless its home lies cyclically in (i, j]
            if (i < j and (h <= i or h > j)) or (i > j and h <= i and h > j):
                break
        tab[i, 0], tab[i, 1], tab[i, 2] = tab[j, 0], tab[j, 1], tab[j, 2]
        i = j


@njit(cache=True)
def _push(tab, used, key, node, node_next):
    """Append node to the queue of key; returns the table (a new one when it had to grow)."""
    i = _slot(tab, key)
    if tab[i, 0] == key:
        node_next[tab[i, 2]] = node
        tab[i, 2] = node
        return tab
    tab[i, 0], tab[i, 1], tab[i, 2] = key, node, node
    used[0] += 1
    if 2 * used[0] <= len(tab):
        return tab
    grown = np.full((2 * len(tab), 3), EMPTY, np.int64)
    for r in range(len(tab)):
        if tab[r, 0] != EMPTY:
            g = _slot(grown, tab[r, 0])
            grown[g, 0], grown[g, 1], grown[g, 2] = tab[r, 0], tab[r, 1], tab[r, 2]
    return grown


@njit(cache=True)
def _pop_front(tab, used, i, node_next):
    """Unlink the front node of the queue at row i; returns it."""
    h = tab[i, 1]
    nx = node_next[h]
    if nx < 0:
        _delete(tab, used, i)
    else:
        tab[i, 1] = nx
    return h


@njit(cache=True)
def _pop_fresh(tab, used, node_next, node_ts, key, t, stale_ns, stats, stale_slot, free):
    """The oldest node of the queue `key` not older than stale_ns at time t, unlinked (-1 if none); the stale
    nodes in front of it are dropped (freed) and counted in stats[stale_slot]."""
    i = _slot(tab, key)
    while tab[i, 0] == key:
        h = _pop_front(tab, used, i, node_next)
        if t - node_ts[h] <= stale_ns:
            return h
        stats[stale_slot] += 1
        _free_node(free, node_next, h)
        i = _slot(tab, key)
    return -1


# Nodes are recycled: an unlinked node goes onto a free list (free[0], linked through node_next), so the pool's
# pages touched are those of the elements alive at once (thousands), not one per event (a 1 GB trace's 11 M).
# Nodes an event takes are read during that event: they join the free list (free[1], free[2]) at the next one.
@njit(cache=True)
def _free_node(free, node_next, node):
    node_next[node] = free[0]
    free[0] = node


@njit(cache=True)
def _alloc(free, node_next, n_nodes):
    """(a node to fill, the new count of nodes ever made): a recycled one when there is one."""
    if free[0] >= 0:
        node = free[0]
        free[0] = node_next[node]
        return node, n_nodes
    return n_nodes, n_nodes + 1


@njit(cache=True)
def _issued_with_end(tab, node_next, node_ts, node_aux, key, end, t, stale_ns):
    """The oldest issued element of queue `key` whose issued range ends at `end` and that is not older than
    stale_ns at time t (-1 if none). A search only: nothing is unlinked or expired."""
    row = _slot(tab, key)
    if tab[row, 0] != key:
        return -1
    node = tab[row, 1]
    while node >= 0:
        if node_aux[node] == end and t - node_ts[node] <= stale_ns:
            return node
        node = node_next[node]
    return -1


@njit(cache=True)
def _new_request(r, queue_ts, getrq_ts, insert_ts, issue_ts, complete_ts, issued_ev, inserted_ev, rwbs_ev, pid_ev,
                 error_ev, bio_sector, bio_sectors, nr_bios, has_req, into, first_issue_ts, dispatches):
    """Request r as it is before any event sets a field: no times, no events, no bios, no dispatches."""
    first_issue_ts[r] = NULL
    dispatches[r] = 0
    queue_ts[r] = NULL
    getrq_ts[r] = NULL
    insert_ts[r] = NULL
    issue_ts[r] = NULL
    complete_ts[r] = NULL
    issued_ev[r] = -1
    inserted_ev[r] = -1
    rwbs_ev[r] = -1
    pid_ev[r] = -1
    error_ev[r] = -1
    bio_sector[r] = NULL
    bio_sectors[r] = 0
    nr_bios[r] = 0
    has_req[r] = False
    into[r] = -1


# One function on purpose: the event state machine keeps its open-request tables in local arrays that numba
# holds in registers and cache; split, every event would pass them through calls.
@njit(cache=True)
def pair_events(kind, dev, sector, nr, ts, is_flush_op, stale_ns, span):
    """Arrays in, arrays out: per request (index < n_req) its times and the events its fields come from."""
    n = len(kind)
    # Capacities from what the events can create (a request: G, and M, F, I, D, R that find none; a queue
    # element: at most two per event), not from n: the arrays filled below would otherwise touch memory for
    # every event, plugs and all (first touches of fresh memory are slow, in VMs most of all).
    n_req_max = 0
    cap = 16
    for i in range(n):
        k = kind[i]
        if k == G or k == M or k == F or k == I or k == D or k == R:
            n_req_max += 1
        if k >= 0:
            cap += 2 if k == G else 1
    node_val = np.empty(cap, np.int64)   # Q event (QUEUED) or request id (others)
    node_aux = np.empty(cap, np.int64)   # issue end sector (ISSUED)
    node_ts = np.empty(cap, np.int64)    # the time the element entered (a split copy: its Q's time)
    node_next = np.empty(cap, np.int64)
    n_nodes = 0
    free = np.full(3, -1, np.int64)  # free list head; the nodes the previous event took (freed at the next)
    tab = np.full((1024, 3), EMPTY, np.int64)  # queue key -> head, tail node (see _slot)
    used = np.zeros(1, np.int64)
    stats = np.zeros(N_STATS, np.int64)

    # requests
    # np.empty: _new_request sets a request's fields when it is made, so only requests made touch memory
    queue_ts = np.empty(n_req_max, np.int64)
    getrq_ts = np.empty(n_req_max, np.int64)
    insert_ts = np.empty(n_req_max, np.int64)
    issue_ts = np.empty(n_req_max, np.int64)
    complete_ts = np.empty(n_req_max, np.int64)
    issued_ev = np.empty(n_req_max, np.int64)
    inserted_ev = np.empty(n_req_max, np.int64)
    rwbs_ev = np.empty(n_req_max, np.int64)
    pid_ev = np.empty(n_req_max, np.int64)
    error_ev = np.empty(n_req_max, np.int64)
    bio_sector = np.empty(n_req_max, np.int64)
    bio_sectors = np.empty(n_req_max, np.int64)
    nr_bios = np.empty(n_req_max, np.int64)
    has_req = np.empty(n_req_max, np.bool_)
    into = np.empty(n_req_max, np.int64)
    first_issue_ts = np.empty(n_req_max, np.int64)
    dispatches = np.empty(n_req_max, np.int64)
    n_req = 0

    for i in range(n):
        for slot in (1, 2):
            if free[slot] >= 0:
                _free_node(free, node_next, free[slot])
                free[slot] = -1
        k = kind[i]
        if k < 0:
            continue
        t = ts[i]
        sized = nr[i] > 0 and sector[i] >= 0
        s = sector[i] if sized else -2
        e = sector[i] + nr[i] if sized else -2
        base = dev[i] * span
        ks = (base + s + 2) * 4
        ke = (base + e + 2) * 4

        if k == C and nr[i] == 0 and sector[i] >= 0 and not is_flush_op[i]:
            stats[ST_FLUSH_SEQ_END] += 1
            continue

        # --- pops needed by this event (with expiry), written out per queue kind ---
        if k == Q:
            qk = ks + QUEUED
            node, n_nodes = _alloc(free, node_next, n_nodes)
            node_val[node] = i
            node_ts[node] = t
            node_next[node] = -1
            tab = _push(tab, used, qk, node, node_next)
            continue
        if k == X:
            if sized:
                qk = ks + QUEUED
                row = _slot(tab, qk)
                if tab[row, 0] == qk:
                    h = tab[row, 1]
                    nk = (base + s + nr[i] + 2) * 4 + QUEUED
                    node, n_nodes = _alloc(free, node_next, n_nodes)
                    node_val[node] = node_val[h]
                    node_ts[node] = node_ts[h]
                    node_next[node] = -1
                    tab = _push(tab, used, nk, node, node_next)
            continue

        q_node = -1
        if k == G or k == M or k == F:
            q_node = _pop_fresh(tab, used, node_next, node_ts, ks + QUEUED, t, stale_ns, stats, ST_STALE + QUEUED,
                                free)
            free[1] = q_node

        if k == G:
            r = n_req
            n_req += 1
            _new_request(r, queue_ts, getrq_ts, insert_ts, issue_ts, complete_ts, issued_ev, inserted_ev, rwbs_ev,
                         pid_ev, error_ev, bio_sector, bio_sectors, nr_bios, has_req, into, first_issue_ts,
                         dispatches)
            has_req[r] = True
            getrq_ts[r] = t
            nr_bios[r] = 1
            bio_sector[r] = sector[i]
            bio_sectors[r] = max(nr[i], 0)
            rwbs_ev[r] = i
            if q_node < 0:
                stats[ST_GETRQ_NO_Q] += 1
                pid_ev[r] = i
            else:
                queue_ts[r] = node_ts[q_node]
                pid_ev[r] = node_val[q_node]
            for qk, want in ((ks + PENDING, True), (ke + ENDS, sized)):
                if want:
                    node, n_nodes = _alloc(free, node_next, n_nodes)
                    node_val[node] = r
                    node_ts[node] = t
                    node_next[node] = -1
                    tab = _push(tab, used, qk, node, node_next)
            continue

        # the element this event takes from its request queue
        if k == M or k == RM:
            take_key = ks + ENDS
            take_kind = ENDS
            take = sized
        elif k == F:
            take_key = (ke if sized else (base + 0) * 4) + PENDING
            take_kind = PENDING
            take = True
        elif k == I or k == D:
            take_key = ks + PENDING
            take_kind = PENDING
            take = True
        else:  # R, C
            take_key = ks + ISSUED
            take_kind = ISSUED
            take = True
        hit = -1
        if k == RM:  # the absorbed request first (pending at its start), then its absorber's open end
            hit = _pop_fresh(tab, used, node_next, node_ts, ks + PENDING, t, stale_ns, stats, ST_STALE + PENDING,
                             free)
            free[1] = hit
        b_hit = -1
        if take_kind == ISSUED:
            # stale elements at the front expire; then the oldest issued request whose range ends where this
            # sized requeue/completion ends (exact size), else the front (partial completions, unsized events)
            row = _slot(tab, take_key)
            while tab[row, 0] == take_key and t - node_ts[tab[row, 1]] > stale_ns:
                _free_node(free, node_next, _pop_front(tab, used, row, node_next))
                stats[ST_STALE + ISSUED] += 1
                row = _slot(tab, take_key)
            if tab[row, 0] == take_key:
                h = tab[row, 1]
                prev = -1
                if sized:
                    node = h
                    while node >= 0 and node_aux[node] != e:
                        prev = node
                        node = node_next[node]
                    if node >= 0:
                        h = node
                    else:
                        prev = -1
                nx = node_next[h]
                if prev >= 0:  # unlink from the middle (or the tail) of the queue
                    node_next[prev] = nx
                    if nx < 0:
                        tab[row, 2] = prev
                else:
                    _pop_front(tab, used, row, node_next)
                b_hit = h
        elif take:
            b_hit = _pop_fresh(tab, used, node_next, node_ts, take_key, t, stale_ns, stats, ST_STALE + take_kind,
                               free)
        free[2] = b_hit
        if k == RM:
            if hit < 0:
                stats[ST_RQ_MERGE] += 1
            elif b_hit >= 0:
                ra = _find(into, node_val[hit])
                rb = _find(into, node_val[b_hit])
                if ra != rb:
                    into[ra] = rb
                    nr_bios[rb] += nr_bios[ra]
                    bio_sectors[rb] += bio_sectors[ra]
                    has_req[rb] = has_req[rb] or has_req[ra]
                    if queue_ts[ra] != NULL and (queue_ts[rb] == NULL or queue_ts[ra] < queue_ts[rb]):
                        queue_ts[rb] = queue_ts[ra]
                    if getrq_ts[ra] != NULL and (getrq_ts[rb] == NULL or getrq_ts[ra] < getrq_ts[rb]):
                        getrq_ts[rb] = getrq_ts[ra]
                    if insert_ts[ra] != NULL and insert_ts[ra] > insert_ts[rb]:
                        insert_ts[rb] = insert_ts[ra]
                    if issue_ts[ra] != NULL and issue_ts[ra] > issue_ts[rb]:
                        issue_ts[rb] = issue_ts[ra]
                    if first_issue_ts[ra] != NULL and (first_issue_ts[rb] == NULL
                                                       or first_issue_ts[ra] < first_issue_ts[rb]):
                        first_issue_ts[rb] = first_issue_ts[ra]
                    dispatches[rb] += dispatches[ra]
                    if complete_ts[ra] != NULL and complete_ts[ra] > complete_ts[rb]:
                        complete_ts[rb] = complete_ts[ra]
            continue

        push_key = -1
        push_aux = 0
        if k == M:
            if b_hit < 0:
                stats[ST_BACKMERGE] += 1
                if not sized:
                    continue
                r = n_req
                n_req += 1
                _new_request(r, queue_ts, getrq_ts, insert_ts, issue_ts, complete_ts, issued_ev, inserted_ev, rwbs_ev,
                             pid_ev, error_ev, bio_sector, bio_sectors, nr_bios, has_req, into, first_issue_ts,
                             dispatches)
            else:
                r = node_val[b_hit]
                root = _find(into, r)
                nr_bios[root] += 1
                bio_sectors[root] += nr[i]
            push_key = ke + ENDS
        elif k == F:
            if b_hit < 0:
                stats[ST_FRONTMERGE] += 1
                r = n_req
                n_req += 1
                _new_request(r, queue_ts, getrq_ts, insert_ts, issue_ts, complete_ts, issued_ev, inserted_ev, rwbs_ev,
                             pid_ev, error_ev, bio_sector, bio_sectors, nr_bios, has_req, into, first_issue_ts,
                             dispatches)
            else:
                r = node_val[b_hit]
            root = _find(into, r)
            nr_bios[root] += 1
            bio_sectors[root] += max(nr[i], 0)
            if bio_sector[root] == NULL or sector[i] < bio_sector[root]:
                bio_sector[root] = sector[i]
            if q_node >= 0 and (queue_ts[root] == NULL or node_ts[q_node] < queue_ts[root]):
                queue_ts[root] = node_ts[q_node]
            push_key = ks + PENDING
        elif k == I or k == D:
            if b_hit < 0 and k == D and sized:
                again = _issued_with_end(tab, node_next, node_ts, node_aux, ks + ISSUED, e, t, stale_ns)
                if again >= 0:  # a re-dispatch: the same request goes to the driver again, no new request
                    root = _find(into, node_val[again])
                    issue_ts[root] = t
                    issued_ev[root] = i
                    dispatches[root] += 1
                    stats[ST_REDISPATCH] += 1
                    continue
            if b_hit < 0:
                r = n_req
                n_req += 1
                _new_request(r, queue_ts, getrq_ts, insert_ts, issue_ts, complete_ts, issued_ev, inserted_ev, rwbs_ev,
                             pid_ev, error_ev, bio_sector, bio_sectors, nr_bios, has_req, into, first_issue_ts,
                             dispatches)
                pid_ev[r] = i
            else:
                r = node_val[b_hit]
            root = _find(into, r)
            if k == D and sized and first_issue_ts[root] == NULL:  # the request's open end closes (a re-issue
                # after a requeue closed it the first time)
                closed = _pop_fresh(tab, used, node_next, node_ts, ke + ENDS, t, stale_ns, stats, ST_STALE + ENDS,
                                    free)
                if closed >= 0:
                    _free_node(free, node_next, closed)
            has_req[root] = True
            if pid_ev[root] < 0:
                pid_ev[root] = i
            if k == I:
                insert_ts[root] = t
                inserted_ev[root] = i
                push_key = ks + PENDING
            else:
                if first_issue_ts[root] == NULL:
                    first_issue_ts[root] = t
                issue_ts[root] = t
                issued_ev[root] = i
                dispatches[root] += 1
                push_key = ks + ISSUED
                push_aux = e
        elif k == R:
            if b_hit < 0:
                stats[ST_REQUEUE] += 1
                r = n_req
                n_req += 1
                _new_request(r, queue_ts, getrq_ts, insert_ts, issue_ts, complete_ts, issued_ev, inserted_ev, rwbs_ev,
                             pid_ev, error_ev, bio_sector, bio_sectors, nr_bios, has_req, into, first_issue_ts,
                             dispatches)
            else:
                r = node_val[b_hit]
            push_key = ks + PENDING
        else:  # C
            if b_hit < 0:
                stats[ST_COMPLETE_NO_ISSUE] += 1
                continue
            r = node_val[b_hit]
            issue_end = node_aux[b_hit]
            if sized and sector[i] + nr[i] < issue_end:  # partial: the rest stays issued
                push_key = (base + sector[i] + nr[i] + 2) * 4 + ISSUED
                push_aux = issue_end
            else:
                root = _find(into, r)
                complete_ts[root] = t
                error_ev[root] = i
                continue
        node, n_nodes = _alloc(free, node_next, n_nodes)
        node_val[node] = r
        node_aux[node] = push_aux
        node_ts[node] = t
        node_next[node] = -1
        tab = _push(tab, used, push_key, node, node_next)

    return (n_req, queue_ts, getrq_ts, insert_ts, issue_ts, complete_ts, issued_ev, inserted_ev, rwbs_ev, pid_ev,
            error_ev, bio_sector, bio_sectors, nr_bios, has_req, into, first_issue_ts, dispatches, stats)
