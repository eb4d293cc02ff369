"""Analyzers: pure functions from event tables to result tables, registered with what they need and produce.

Installed as mobiperf.analyzers. The registry below is what `mobiperf analyze` runs, in order; an analyzer's
`needs` and `optional` tables decide which events `collect` enables (needed_tables(), through the events each
table is made of, mobiperf.core.trace_events.TABLE_EVENTS) and which table is reported missing when a run lacks
it.

Optional inputs: an analyzer that can use more when it is there (block_io uses the layout snapshot, the
waterfall the sync_file and FUSE events) lists those tables in `optional`; the pipeline passes each one that exists
as a keyword argument. Where one result can come from different sources (the syscall layer from strace or from
the ftrace clock, SQLite transactions from syscalls or from fsync events), each source is its own entry, fewest
inputs first: a later entry whose tables exist overwrites the earlier result, one whose tables are missing is
skipped with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import polars as pl

from mobiperf.core.trace_events import table_events

SYSCALL_SOURCES = ("the syscalls source (`--source syscalls`, on by default in `mobiperf run`)",
                   "strace (`--source strace`: adds paths, slows every call)")
# Tables no tracefs event makes; the others name their events (mobiperf.core.trace_events.TABLE_EVENTS, the list
# collect enables them from).
OTHER_SOURCES = {
    "syscall_io": SYSCALL_SOURCES,
    "file_extent": ("the layout snapshot (journal, metadata regions and FIEMAP extents of the workload's files)",),
    "trace_marker": ("ftrace (the generator writes its timed-window markers to trace_marker)",),
    "task_role": ("a `mobiperf run` (raw/tasks.json: the workload's root, the FUSE daemons, mobiperf)",),
    "inode_path": ("the layout snapshot's inode listing, or a recorded app's data directory listing",),
    "task": ("the trace's own thread identities (ftrace's tgid column, Perfetto's process tree, the task events, "
             "a run's raw/tasks.json and /proc snapshots)",),
}


@dataclass(frozen=True)
class Analyzer:
    name: str
    needs: tuple[str, ...]          # input tables (event tables or earlier results)
    produces: str                   # result table name
    run: Callable[..., pl.DataFrame]
    events: tuple[str, ...] = ()    # trace events that produce the needed tables (for error messages)
    optional: tuple[str, ...] = ()  # tables passed as keyword arguments when the run has them
    params: tuple[str, ...] = ()    # run parameters passed as keyword arguments (ANALYSIS_PARAMS)
    when: str | None = None         # a run parameter it needs set, else it is not for this run (not "skipped")


# Run parameters an analyzer may take, with their defaults (the pipeline reads them from run.json).
ANALYSIS_PARAMS = {"scope": "workload", "device_private": True, "sqlite_journal": None, "replay": None}


UPSTREAM = {"block_io": "block_rq", "syscall_class": "syscall_io", "io_span": "syscall_io",
            "time_profile": "syscall_io", "waterfall": "syscall_io", "sqlite_txn": "fsync_event",
            "file_io": "android_fs_event"}


def table_sources(tables) -> tuple[str, ...]:
    """The trace sources (events, collectors) that produce these tables, for messages about missing ones."""
    return _sources(tuple(tables))


def needed_tables() -> set[str]:
    """Every table an analyzer reads, needed or optional: what `collect` enables events for (collectors/plan.py)."""
    return {table for a in registry() for table in (*a.needs, *a.optional)}


def _sources(needs: tuple[str, ...]) -> tuple[str, ...]:
    out: list[str] = []
    for need in needs:
        need = UPSTREAM.get(need, need)
        for src in OTHER_SOURCES.get(need) or table_events(need):
            if src not in out:
                out.append(src)
    return tuple(out)


# Tables every ftrace capture has: naming their events beside a missing syscall or FUSE table only confuses.
_ALWAYS_THERE = ("block_event", "block_rq", "block_io", "trace_marker")


def _analyzer(name: str, needs: tuple[str, ...], produces: str, run: Callable,
              optional: tuple[str, ...] = (), params: tuple[str, ...] = (), when: str | None = None) -> Analyzer:
    rare = tuple(n for n in needs if UPSTREAM.get(n, n) not in _ALWAYS_THERE and n not in _ALWAYS_THERE)
    return Analyzer(name, needs, produces, run, events=_sources(rare) or _sources(needs), optional=optional,
                    params=params, when=when)


def registry() -> list[Analyzer]:
    from mobiperf.analyzers import (amplification, attribution, block_io, blocked, file_io, file_nest, io_by_file,
                                    io_by_owner, io_class, io_span, latency, sqlite_txn, syscall, time_profile,
                                    timed_window, waterfall)
    from mobiperf.analyzers.replay import fidelity
    from mobiperf.collectors.parse import pairing

    calls = ("trace_marker", "task_role", "fuse_req")
    return [
        _analyzer("pairing_summary", ("block_rq",), "pairing_summary", pairing.summarize_pairing),
        _analyzer("window_block", ("block_rq", "trace_marker"), "window_block", timed_window.block_in_timed_window),
        _analyzer("block_io", ("block_rq",), "block_io", block_io.classify_block_io,
                  optional=("file_extent", "task_role", "syscall_io", "f2fs_bio"),
                  params=("scope", "device_private")),
        _analyzer("syscall_class", ("syscall_io",), "syscall_class", syscall.classify_syscalls, optional=calls),
        _analyzer("file_io", ("android_fs_event",), "file_io", file_io.classify_file_io),
        _analyzer("io_class", ("block_io",), "io_class", io_class.count_io_classes,
                  optional=("syscall_class", "file_io")),
        _analyzer("io_share", ("block_io",), "io_share", io_class.share_io, optional=("syscall_class", "file_io")),
        _analyzer("latency_summary", ("block_io",), "latency_summary", latency.summarize_block_latency),
        _analyzer("syscall_latency", ("syscall_class",), "syscall_latency", latency.summarize_syscall_latency),
        _analyzer("fs_latency", ("fsync_event",), "fs_latency", latency.summarize_fsync_latency),
        _analyzer("fs_latency+jbd2", ("jbd2_run_stats",), "fs_latency", latency.summarize_jbd2_latency),
        _analyzer("fs_latency+sync_file+jbd2", ("fsync_event", "jbd2_run_stats"), "fs_latency",
                  latency.summarize_fs_latency),
        _analyzer("fuse_latency", ("fuse_req",), "fuse_latency", latency.summarize_fuse_latency),
        _analyzer("io_span", ("syscall_io",), "io_span", io_span.nest_calls,
                  optional=(*calls, "fsync_event", "jbd2_commit", "block_io", "f2fs_checkpoint", "file_io")),
        _analyzer("io_span+trace", ("block_io",), "io_span", file_nest.nest_device_trace,
                  optional=("file_io", "fsync_event", "jbd2_commit", "fuse_req", "syscall_io")),
        _analyzer("waterfall", ("io_span",), "waterfall", _waterfall_of_calls),
        _analyzer("layer_breakdown", ("waterfall",), "layer_breakdown", waterfall.break_down_layers),
        _analyzer("block_cause", ("io_span", "block_io"), "block_cause", waterfall.attribute_block_causes,
                  optional=("waterfall",)),
        _analyzer("io_background", ("io_span",), "io_background", waterfall.summarize_background,
                  optional=("task_role", "syscall_io")),
        _analyzer("span_owner", ("io_span",), "span_owner", attribution.attribute_spans,
                  optional=("task", "android_fs_event", "task_role", "syscall_io", "sched_switch", "inode_path")),
        _analyzer("io_by_file", ("io_span", "span_owner"), "io_by_file", io_by_file.sum_io_by_file),
        _analyzer("io_by_owner", ("io_span", "span_owner"), "io_by_owner", io_by_owner.sum_io_by_owner),
        _analyzer("blocked", ("sched_switch",), "blocked", blocked.summarize_blocked,
                  optional=("sched_wakeup", "sched_blocked_reason", "io_span", "span_owner", "task",
                            "android_fs_event", "task_role", "syscall_io")),
        _analyzer("time_profile", ("io_span",), "time_profile", time_profile.profile_span_time,
                  optional=("span_owner",)),
        _analyzer("amplification", ("syscall_class", "block_io"), "amplification",
                  amplification.measure_amplification, optional=("fuse_req",)),
        _analyzer("sqlite_txn", ("fsync_event", "block_io", "trace_marker"), "sqlite_txn",
                  sqlite_txn.transactions_from_syncs, params=("sqlite_journal",)),
        _analyzer("sqlite_txn+syscall", ("syscall_io", "block_io", "trace_marker"), "sqlite_txn",
                  sqlite_txn.sqlite_transactions, optional=("task_role", "fuse_req")),
        _analyzer("sqlite_summary", ("sqlite_txn",), "sqlite_summary", sqlite_txn.sqlite_summary,
                  optional=("syscall_io", "trace_marker"), params=("sqlite_journal",)),
        _analyzer("replay_fidelity", ("syscall_io", "trace_marker"), "replay_fidelity", fidelity.replay_fidelity,
                  optional=("block_io", "fsync_event", "task_role", "fuse_req"), params=("replay",), when="replay"),
    ]


def _waterfall_of_calls(io_span: pl.DataFrame) -> pl.DataFrame:
    """The waterfall, where the trace has calls (or a phone's file-layer or sync events) to start nests from: a
    trace of block events alone has only IO no call caused, and says which source would have given the calls."""
    from mobiperf.analyzers.waterfall import build_waterfall
    from mobiperf.core.errors import NotApplicable

    if not io_span.filter(pl.col("call_id").is_not_null()).height:
        raise NotApplicable(f"no syscall_io table; add {' or '.join(table_sources(['syscall_io']))} when collecting")
    return build_waterfall(io_span)


BREAKDOWNS = (
    ("pairing_summary", "Block request pairing (share of requests fully matched)"),
    ("io_class", "IO classes (block and syscall layers)"),
    ("io_share", "IO characterisation: share per dimension (seed 000 Fig. 4)"),
    ("latency_summary", "Latency by phase (block layer, btt definitions)"),
    ("syscall_latency", "Latency (syscall layer)"),
    ("fs_latency", "Latency (file system: sync_file, jbd2 commit phases)"),
    ("fuse_latency", "Latency (FUSE requests)"),
    ("layer_breakdown", "Time of the calls by layer, exclusive (seed 000 Fig. 3 / seed 004 Fig. 3)"),
    ("block_cause", "Block IO by the call that caused it"),
    ("io_background", "IO no call of the workload caused (by scope and task)"),
    ("amplification", "Amplification: bytes per layer"),
    ("sqlite_summary", "SQLite per transaction (seed 002)"),
)


WHO_TITLES = {"io_by_owner": "Who: IO time by process, thread and file (top 10, every repetition; the layer that "
                              "took most of it)",
              "blocked": "Who waited: time in uninterruptible sleep by thread (top 10; main: tid == pid; what most "
                         "of it waited on)"}


def who_tables(results: dict[str, pl.DataFrame], *, text: bool = False) -> dict[str, pl.DataFrame]:
    """The who tables (analyzers/who.py) of one analysis, by title: what `mobiperf analyze` prints first (text:
    names beside their ids, for a terminal)."""
    from mobiperf.analyzers.who import as_text, top_blocked, top_files

    out = {}
    if "io_by_owner" in results and len(results["io_by_owner"]):
        out[WHO_TITLES["io_by_owner"]] = top_files(results["io_by_owner"])
    if "blocked" in results and len(results["blocked"]):
        out[WHO_TITLES["blocked"]] = top_blocked(results["blocked"])
    return {title: as_text(df) for title, df in out.items()} if text else out


def breakdown_tables(results: dict[str, pl.DataFrame], *, text: bool = False) -> dict[str, pl.DataFrame]:
    """The tables `mobiperf analyze` prints, by title, from the results of one analysis: who first."""
    out = who_tables(results, text=text)
    out.update({title: results[name] for name, title in BREAKDOWNS if name in results})
    if "block_cause" in results:  # one row per request is for machines; print counts per cause
        out[dict(BREAKDOWNS)["block_cause"]] = results["block_cause"].group_by("rep", "op", "cause", "region").agg(
            count=pl.len(), bytes=pl.col("size_bytes").sum()).sort("rep", "op", "cause", "region")
    if "io_share" in results:  # the long table is for machines; print the main dimensions only
        out[dict(BREAKDOWNS)["io_share"]] = results["io_share"].filter(
            pl.col("dimension").is_in(["size_class", "locality", "sync_mode", "region", "file_type"]))
    return out


def headline_metrics(results: dict[str, pl.DataFrame], rep: int, window: tuple[int, int] | None = None) -> list:
    """The metrics of one repetition, from every analyzer family that has results; window: the generator's timed
    window of that repetition, if it marked one."""
    from mobiperf.analyzers import headline

    return headline.block_metrics(results, rep) + headline.layer_metrics(results, rep, window)
