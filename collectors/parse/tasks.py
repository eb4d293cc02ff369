"""raw/tasks.json -> task_role: which tasks of a trace are mobiperf's, the workload's root, the FUSE daemons'.

The collector writes tasks.json when a repetition ends (mobiperf/orchestration/collect.py `write_task_roles`). One
row per (task, role): `workload` for the root process of the workload (for a recording, every thread of the app's
processes: `workload_tids`) (its tree is the tids of its traced calls, see analyzers/scope.py), `fuse_daemon` for
every thread of a stack's FUSE daemon (fuse_fd: one row per descriptor the daemon holds on /dev/fuse, fd_kind fuse,
and per pipe it holds, fd_kind pipe; -1 when it holds none), `mobiperf` for mobiperf's own process (with its comm:
the workload's root carries it until it execs). A run directory without tasks.json (older runs, ingested traces)
has no task_role table: scope is then the whole trace.

The same file holds the wall-clock readings (collectors/clock.py): wall_to_trace_clock() puts strace's realtime
stamps on the trace clock with them, interpolating between the readings before and after the workload.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from mobiperf.core.schema import TASK, TASK_ROLE


def read_tasks(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def task_roles(tasks: dict, rep: int) -> pl.DataFrame:
    rows = []
    if tasks.get("workload_pid"):
        rows.append((rep, int(tasks["workload_pid"]), "workload", -1, "", None, None))
    for tid in tasks.get("workload_tids", []):  # a recording's app: every thread of its processes (record.py)
        rows.append((rep, int(tid), "workload", -1, "", None, None))
    if tasks.get("mobiperf_pid"):
        rows.append((rep, int(tasks["mobiperf_pid"]), "mobiperf", -1, "", tasks.get("mobiperf_comm"), None))
    for daemon in tasks.get("fuse_daemons", []):
        for tid in sorted({int(daemon["pid"]), *map(int, daemon.get("tids", []))}):
            fds = [(fd, "fuse") for fd in daemon.get("fuse_fds") or []]
            fds += [(fd, "pipe") for fd in daemon.get("pipe_fds") or []]
            for fd, kind in fds or [(-1, None)]:
                rows.append((rep, tid, "fuse_daemon", int(fd), str(daemon.get("layer", "")), None, kind))
    return TASK_ROLE.validate(pl.DataFrame(
        rows, schema=["rep", "pid", "role", "fuse_fd", "layer", "comm", "fd_kind"], orient="row"))


def task_rows(tasks: dict, rep: int) -> pl.DataFrame:
    """task rows (source tasks.json): the workload's root and mobiperf as processes of their own, every thread of a
    FUSE daemon as the daemon's (its process named after the stack layer it serves), a recorded app's processes
    named after its package."""
    rows = []
    for key, name in (("workload_pid", None), ("mobiperf_pid", tasks.get("mobiperf_comm"))):
        if tasks.get(key):
            rows.append((rep, int(tasks[key]), int(tasks[key]), name, name))
    for daemon in tasks.get("fuse_daemons", []):
        for tid in sorted({int(daemon["pid"]), *map(int, daemon.get("tids", []))}):
            rows.append((rep, tid, int(daemon["pid"]), None, str(daemon.get("layer") or "") or None))
    rows += [(rep, int(pid), int(pid), None, tasks.get("package")) for pid in tasks.get("app_pids", [])]
    df = pl.DataFrame(rows, schema=["rep", "tid", "pid", "thread", "process"], orient="row")
    return TASK.validate(df.with_columns(source=pl.lit("tasks.json")))


def wall_to_trace_clock(syscall_io: pl.DataFrame, readings: list[dict]) -> pl.DataFrame:
    """strace rows moved from CLOCK_REALTIME to the trace clock (CLOCK_MONOTONIC), clock_error_ns set to how far
    off they may be: the readings' own error plus, between two readings, the wall clock's slew over the run."""
    readings = [r for r in readings if {"mono_ns", "realtime_minus_mono_ns", "error_ns"} <= set(r)]
    if not readings:
        return syscall_io
    first, last = readings[0], readings[-1]
    span = max(last["mono_ns"] - first["mono_ns"], 1)
    slew = last["realtime_minus_mono_ns"] - first["realtime_minus_mono_ns"]
    error = max(r["error_ns"] for r in readings) + abs(slew)
    # offset(t) linear between the readings; t is first found on the wall clock with the first offset
    approx_mono = pl.col("ts") - first["realtime_minus_mono_ns"]
    frac = ((approx_mono - first["mono_ns"]).clip(0, span) / span)
    offset = (pl.lit(first["realtime_minus_mono_ns"]) + (frac * slew).round().cast(pl.Int64))
    is_strace = pl.col("source") == "strace"
    return syscall_io.with_columns(
        ts=pl.when(is_strace).then(pl.col("ts") - offset).otherwise(pl.col("ts")),
        clock_error_ns=pl.when(is_strace).then(pl.lit(error, pl.Int64)).otherwise(pl.col("clock_error_ns")))
