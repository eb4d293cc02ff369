"""A replayable workload: per thread, its calls in order with their think times, the handles they use, the waits
between threads, and the state the recording started from.

Built from a run's system calls (build_from_syscalls: from_syscalls.py, handles.py) or from a phone's file events
(phone.py), then the same steps: initial_state.py, dependencies.py, and the timing below. script.py writes it for
the generator.

Timing: threads are numbered in the order they first appear. think_ns is the time from the end of the thread's
previous replayed call to this call's start (calls left out in between count as thinking: a replay skips a
workload's other work, not its time), and for a thread's first call the time from the first replayed call of
all. The generator's open loop waits it out; its closed loop ignores it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import polars as pl

from mobiperf.analyzers.replay.dependencies import cross_thread_waits
from mobiperf.analyzers.replay.from_syscalls import replayable_calls
from mobiperf.analyzers.replay.handles import assign_handles
from mobiperf.analyzers.replay.initial_state import InitialState, infer_initial_state, with_positions


@dataclass
class ReplayWorkload:
    calls: pl.DataFrame          # thread, index, tid, start_ns, end_ns, think_ns, op, handle, handle2, ...
    waits: pl.DataFrame          # thread, index, wait_thread, wait_count (dependencies.py)
    state: InitialState
    nhandles: int
    left_out: Counter = field(default_factory=Counter)   # reason -> calls
    remarks: list[str] = field(default_factory=list)      # what else the replay assumes, said as it is

    @property
    def nthreads(self) -> int:
        return int(self.calls["thread"].max()) + 1 if self.calls.height else 0

    def counts(self) -> dict[str, int]:
        """Calls per generator op, the replay's own opens and closes included (is_synthetic: a descriptor opened
        before the recording, the files of a phone's file events)."""
        return dict(sorted(self.calls.group_by("op").len().rows()))

    def notes(self) -> list[str]:
        """What the replay leaves out or assumes, one line per reason, largest first."""
        return self.remarks + [f"{n:,} {reason}" for reason, n in self.left_out.most_common() if n]


def build_from_syscalls(calls: pl.DataFrame, workdir: str | None, *, dependencies: str = "all") -> ReplayWorkload:
    """The replay of a run's workload calls (one repetition, workload_syscalls' columns); workdir: the stack's
    directory when the run was on one (its files are the replay's root), None for a trace from elsewhere;
    dependencies: which waits between threads (dependencies.py)."""
    kept, left_out = replayable_calls(calls, workdir)
    kept, nhandles, notes = assign_handles(kept)
    left_out.update(notes)
    return finish(kept, nhandles, left_out, dependencies=dependencies)


def finish(calls: pl.DataFrame, nhandles: int, left_out: Counter, *, known_sizes: dict[str, int] | None = None,
           all_exist: bool = False, dependencies: str = "all") -> ReplayWorkload:
    """Threads, think times, positions, the initial state and the waits of calls in replay order (known_sizes and
    all_exist: what a trace says of its files, initial_state.py)."""
    if "is_synthetic" not in calls.columns:
        calls = calls.with_columns(is_synthetic=pl.lit(False))
    calls = calls.with_columns(pl.col("is_synthetic").fill_null(False))
    calls = number_threads(calls)
    calls = with_positions(calls)
    state = infer_initial_state(calls, known_sizes=known_sizes, all_exist=all_exist)
    waits = cross_thread_waits(calls, dependencies)
    return ReplayWorkload(calls, waits, state, nhandles, left_out)


def number_threads(calls: pl.DataFrame) -> pl.DataFrame:
    """thread (0.. in order of first appearance), index within it, and think_ns (module docstring)."""
    order = calls.group_by("tid").agg(pl.col("start_ns").min().alias("_first")).sort("_first", "tid") \
        .with_row_index("thread").select(pl.col("thread").cast(pl.Int64), "tid")
    calls = calls.join(order, on="tid", how="left", maintain_order="left")
    t0 = calls["start_ns"].min() if calls.height else 0
    prev_end = pl.col("end_ns").shift(1).over("thread")
    return calls.with_columns(
        index=pl.int_range(pl.len()).over("thread").cast(pl.Int64),
        think_ns=(pl.col("start_ns") - prev_end.fill_null(t0)).clip(lower_bound=0))
