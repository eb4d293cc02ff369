"""Where the workload's call time went, node by node: every instant of every call given to one span of io_span's
nest, and those spans summed per layer -> call type -> process -> thread -> file (the leaves of a profile tree,
which mobiperf.compare.profile compares between runs).

Definition. Within a call (analyzers/io_span.py: the call's span and every span it caused, each clipped to its
parent), at every instant the time goes to the deepest layer active then, as waterfall's exclusive (self) times
do; within that layer to its innermost active spans (a sync_file inside the daemon's fsync, a flush inside the
write it belongs to: the inner one), shared equally when several are active at once (block requests in flight
together). So the self times of a call's spans add up to the call's duration, and those of a layer, over a
repetition, to waterfall's `<layer>_self_ns`. (A commit two calls waited for is in each call's nest: each is
charged its own wait.)

time_profile, one row per (rep, layer, name, process, thread, file):
  layer, name   io_span's layer and name: the system call, the FUSE opcode, the daemon's call or the file
                system's sync, jbd2_commit, the block or device op
  process       whose the span is: span_owner's process (analyzers/attribution.py: by causality, the process of
                the call that caused it, for the FUSE daemon's and the jbd2 thread's work too); a run analysed
                before span_owner existed: the name (comm) of the thread that ran the span. Kernel threads'
                names lose the numbers after their `/` (jbd2/loop*-*, kworker/*:*H: the loop device and the CPU
                differ between runs), so that runs line up
  thread        its thread's name and rank among the process's threads of that name by first span in the
                repetition (`mobibench #2`): thread ids differ between runs, the order of their first work less
  path          span_owner's path (the top-most on the way down: the app's own name of the file), else the
                span's, else its call's ('' when none is known); file_type the same way (unknown without one)
  time_ns       the spans' self time (rounded once per row)
  count, bytes  spans and bytes (size_bytes) counted once: a journal commit two calls waited for costs each its
                wait, but counts (and its bytes) for the first waiter only (io_span's is_primary)
IO no call caused (call_id null: writeback, periodic commits) is not call time and is left out, as in waterfall.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from mobiperf.analyzers.io_span import LAYERS, RANK
from mobiperf.core.schema import TIME_PROFILE
from mobiperf.core.task_names import kernel_process_name

UNNAMED = "(unnamed)"
# The columns of io_span the profile reads (a caller reading io_span for it reads only these).
SPAN_COLUMNS = ("rep", "span_id", "parent_id", "call_id", "layer", "name", "ts", "end_ts", "tid", "comm",
                 "size_bytes", "is_primary", "path", "file_type")


def span_self_ns(call: np.ndarray, rank: np.ndarray, parent: np.ndarray, rel0: np.ndarray,
                 rel1: np.ndarray) -> np.ndarray:
    """The self time (float ns) of each span (module docstring). call: an index of the span's call (0..C-1);
    rank: its layer's rank (io_span.RANK; 0 the call itself, exactly one per call); parent: the row of its parent
    span (-1 for a call); rel0/rel1: its start and end in ns from any origin of its repetition (>= 0).

    A span nested in a span of its own layer (a sync_file in the daemon's fsync, a flush in the write it
    belongs to) ranks below its parent: the innermost gets the time, and the layer's total is unchanged. A call
    whose spans have at most one child each is a chain, where the innermost active span is the deepest: each span
    gets its duration less its child's. The other calls are swept (_sweep)."""
    n = len(rank)
    rel1 = np.maximum(rel1, rel0)
    dur = (rel1 - rel0).astype(np.float64)
    nested = parent >= 0
    kids = np.bincount(parent[nested], minlength=n)
    branching = np.zeros(int(call.max()) + 1, dtype=bool)
    branching[call[kids > 1]] = True
    swept = branching[call]
    chain = nested & ~swept
    out = dur - np.bincount(parent[chain], weights=dur[chain], minlength=n)
    below = np.flatnonzero(swept & nested)
    if len(below):
        level = 2 * rank[below].astype(np.int16) + (rank[parent[below]] == rank[below])
        out[below] = _sweep(call[below], level, rel0[below], rel1[below])
        roots = np.flatnonzero(swept & ~nested)
        charged = np.bincount(call[below], weights=out[below], minlength=len(branching))
        out[roots] = dur[roots] - charged[call[roots]]
    return np.maximum(out, 0.0)


def _sweep(call: np.ndarray, level: np.ndarray, t0: np.ndarray, t1: np.ndarray) -> np.ndarray:
    """The self time of spans below their calls: their 2n ends sorted by call and time, the count of active
    spans of each level (2 x rank, + 1 when nested in its own layer) is a running sum, the deepest level with a
    non-zero count owns each gap between two ends, shared equally by its active spans (no span active: the call
    itself owns it), and a span's share is a difference of running sums of its level's gaps between its ends."""
    n = len(level)
    order = _event_order(call, t0, t1)
    t = np.concatenate([t0, t1])[order]
    same_call = np.concatenate([call, call])[order]
    same_call = same_call[1:] == same_call[:-1]
    delta = np.where(order < n, 1, -1).astype(np.int32)
    ev_level = np.concatenate([level, level])[order]
    gap = np.zeros(2 * n, dtype=np.float64)
    gap[:-1] = np.where(same_call, t[1:] - t[:-1], 0)
    deepest = np.full(2 * n, -1, dtype=np.int16)
    active = np.zeros(2 * n, dtype=np.int32)
    levels = np.unique(level)
    for k in levels:
        count = np.cumsum(delta * (ev_level == k), dtype=np.int32)
        on = count > 0
        deepest[on], active[on] = k, count[on]
    share = np.divide(gap, active, out=gap, where=active > 0)
    position = np.empty(2 * n, dtype=np.int64)
    position[order] = np.arange(2 * n)
    out = np.zeros(n)
    for k in levels:
        mine = np.flatnonzero(level == k)
        running = np.concatenate([[0.0], np.cumsum(np.where(deepest == k, share, 0.0))])
        out[mine] = running[position[n + mine]] - running[position[mine]]
    return np.maximum(out, 0.0)


def _event_order(call: np.ndarray, t0: np.ndarray, t1: np.ndarray) -> np.ndarray:
    """The order of the 2n span ends by (call, time from the call's start): one int64 key when call and time fit
    in 63 bits together, else a two-key lexsort. Ends at the same instant may come in any order: the gap between
    them is empty."""
    t = np.concatenate([t0, t1])
    c = np.concatenate([call, call])
    time_bits = max(int(t.max()).bit_length(), 1)
    call_bits = max(int(c.max()).bit_length(), 1)
    if time_bits + call_bits <= 63:
        return np.argsort((c << time_bits) | t)
    return np.lexsort((t, c))


def profile_span_time(io_span: pl.DataFrame, span_owner: pl.DataFrame | None = None) -> pl.DataFrame:
    """time_profile from io_span (module docstring), its owners from span_owner when the run has it."""
    # Names as categories: the gathers and the grouping below move 4-byte codes, not strings (twice as fast).
    spans = io_span.lazy().select(SPAN_COLUMNS).filter(pl.col("call_id").is_not_null()).with_columns(
        [pl.col(c).cast(pl.Categorical) for c in ("name", "comm", "path", "file_type")],
        _rank=pl.col("layer").replace_strict(RANK, return_dtype=pl.Int8)).collect()
    if not spans.height:
        return TIME_PROFILE.empty()
    rep, rank = spans["rep"].to_numpy(), spans["_rank"].to_numpy()
    call = _call_index(rep, spans["call_id"].to_numpy())
    ts, end_ts = spans["ts"].to_numpy(), spans["end_ts"].to_numpy()
    origin = np.full(int(rep.max()) + 1, np.iinfo(np.int64).max)
    np.minimum.at(origin, rep, ts)  # each repetition's own: the times of one fit in fewer bits
    parent = _parent_rows(rep, spans["span_id"].to_numpy(), spans["parent_id"])
    self_ns = span_self_ns(call, rank, parent, ts - origin[rep], end_ts - origin[rep])
    spans = spans.with_columns(_self=pl.Series(self_ns))
    if span_owner is not None and span_owner.height:
        spans = _owned(spans, span_owner)
    else:
        call_row = np.full(int(call.max()) + 1, -1, dtype=np.int64)
        call_row[call[rank == 0]] = np.flatnonzero(rank == 0)
        of_call = pl.Series(call_row[call])  # each span's call's row: its file when the span has none of its own
        spans = spans.with_columns(_path=pl.col("path").gather(of_call), _type=pl.col("file_type").gather(of_call),
                                   process=pl.col("comm"))
    primary = pl.col("is_primary").fill_null(True)
    leaves = spans.lazy().group_by("rep", "_rank", "name", "process", "tid", "comm", "path", "file_type", "_path",
                                   "_type").agg(
        time=pl.col("_self").sum(), count=primary.sum().cast(pl.Int64),
        bytes=pl.col("size_bytes").fill_null(0).filter(primary).sum().cast(pl.Int64),
        _first=pl.col("ts").min()).collect()
    names = [pl.col(c).cast(pl.Utf8) for c in ("name", "process", "comm", "path", "file_type", "_path", "_type")]
    return _name_leaves(leaves.with_columns(names, layer=pl.col("_rank").replace_strict(
        dict(enumerate(LAYERS)), return_dtype=pl.Utf8)))


def _owned(spans: pl.DataFrame, span_owner: pl.DataFrame) -> pl.DataFrame:
    """The spans with span_owner's process, thread (its name in comm, its id in tid) and file in place of their
    own columns (issue 24's attribution: by causality, the call's for everything it caused)."""
    owner = span_owner.lazy().select(
        "rep", "span_id", process=pl.col("process").cast(pl.Categorical), _tid=pl.col("tid"),
        _comm=pl.col("thread").cast(pl.Categorical), _opath=pl.col("path").cast(pl.Categorical),
        _otype=pl.col("file_type").cast(pl.Categorical))
    return spans.lazy().join(owner, on=["rep", "span_id"], how="left").with_columns(
        tid=pl.coalesce("_tid", "tid"), comm=pl.coalesce("_comm", "comm"), process=pl.coalesce("process", "comm"),
        path=pl.col("_opath"), file_type=pl.col("_otype"), _path=pl.lit(None, pl.Categorical),
        _type=pl.lit(None, pl.Categorical)).drop("_tid", "_comm", "_opath", "_otype").collect()


def _parent_rows(rep: np.ndarray, span_id: np.ndarray, parent_id: pl.Series) -> np.ndarray:
    """The row of each span's parent (-1 for a call), found by (rep, span id): io_span numbers its spans from 0
    across the table, but a table put together from several may repeat them between repetitions."""
    parent = parent_id.fill_null(-1).to_numpy()
    width = int(max(span_id.max(), parent.max())) + 1
    if width <= 4 * len(span_id) + 1024:  # ids unique across the table (io_span's own): a direct lookup
        row_of = np.full(width, -1, dtype=np.int64)
        row_of[span_id] = np.arange(len(span_id))
        if (row_of[span_id] == np.arange(len(span_id))).all():
            return np.where(parent >= 0, row_of[np.maximum(parent, 0)], -1)
    key, parent_key = rep.astype(np.int64) * width + span_id, rep.astype(np.int64) * width + parent
    order = np.argsort(key)
    found = order[np.minimum(np.searchsorted(key, parent_key, sorter=order), len(order) - 1)]
    return np.where((parent >= 0) & (key[found] == parent_key), found, -1)


def _call_index(rep: np.ndarray, call_id: np.ndarray) -> np.ndarray:
    """A dense-enough index of each span's call: call ids count from 0 in each repetition (io_span), so each
    repetition's ids are offset by the calls of the repetitions before it."""
    size = np.zeros(int(rep.max()) + 1, dtype=np.int64)
    np.maximum.at(size, rep, call_id + 1)
    offset = np.concatenate([[0], np.cumsum(size)[:-1]])
    return offset[rep] + call_id


def _named(name: pl.Expr, otherwise: pl.Expr) -> pl.Expr:
    """The name, or `otherwise` where it is null or empty (a task the trace gives no name: strace before exec)."""
    return pl.when(name.fill_null("") != "").then(name).otherwise(otherwise)


def _name_leaves(leaves: pl.DataFrame) -> pl.DataFrame:
    """The leaves with process, thread, path and file type named (module docstring), summed per name: a thread is
    its name and its rank among the process's threads of that name by first span (`mobibench #2`)."""
    has_path = pl.col("path").fill_null("") != ""
    own_type = pl.col("file_type").is_not_null() & (pl.col("file_type") != "unknown")
    leaves = leaves.with_columns(
        path=pl.when(has_path).then(pl.col("path")).otherwise(pl.col("_path").fill_null("")),
        file_type=pl.when(own_type).then(pl.col("file_type")).otherwise(pl.col("_type")).fill_null("unknown"),
        process=kernel_process_name(_named(pl.col("process"), _named(pl.col("comm"), pl.lit(UNNAMED)))),
        comm=kernel_process_name(_named(pl.col("comm"), pl.lit(UNNAMED))))
    first = leaves.group_by("rep", "process", "comm", "tid").agg(pl.col("_first").min())
    first = first.with_columns(_nth=pl.col("_first").rank("ordinal").over("rep", "process", "comm").cast(pl.Int64))
    leaves = leaves.join(first.select("rep", "process", "comm", "tid", "_nth"), on=["rep", "process", "comm", "tid"],
                         how="left").with_columns(thread=pl.col("comm") + " #" + pl.col("_nth").cast(pl.Utf8))
    out = leaves.group_by("rep", "_rank", "layer", "name", "process", "thread", "path", "file_type").agg(
        time_ns=pl.col("time").sum().round().cast(pl.Int64), count=pl.col("count").sum(),
        bytes=pl.col("bytes").sum())
    return out.sort("rep", "_rank", "name", "process", "thread", "path").drop("_rank")
