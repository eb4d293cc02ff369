"""Export a run's classified IOs and layer spans as a trace the Perfetto UI (ui.perfetto.dev) opens.

Format: the Chrome JSON trace format ("Trace Event Format"), which Perfetto imports natively. It is chosen over
Perfetto's protobuf format because it needs no dependency and no generated code, is greppable, and carries
everything shown here (nested spans, per-track names, counters, arguments); the price is size (about 250 bytes
per span; write FILE.json.gz to compress, Perfetto opens gzip directly) and microsecond timestamps (given with
three decimals, so nanoseconds survive).

What is exported, per repetition (one Perfetto "process" per repetition and layer):
  block   every block request as a span from queue to completion (or issue to completion when the queue was not
          seen), named by direction, size class and locality, with its btt phases Q2G, G2I, I2D, D2C as nested
          child spans and its classification (region, file type, sync mode, path, issuer) as arguments. Spans
          overlap when the device has several requests in flight, so they are laid out on "lanes" (threads):
          a request goes to the first lane free at its start, so no two spans of a lane overlap.
          A counter track gives the number of requests in flight at the device (issue -> complete).
  syscall every classified system call (syscall_class) as a span on its process's thread, when the run has them.
  fuse    every FUSE request (fuse_req) from send to end, laid out on lanes like block requests.
Timestamps are the trace clock of the run (CLOCK_MONOTONIC for ftrace); strace-sourced system calls are on the
wall clock and then sit apart in time, which the syscall process's name says.
"""

from __future__ import annotations

import gzip
import heapq
import json
from pathlib import Path
from typing import IO, Iterable, Iterator

import polars as pl

from mobiperf.core.errors import MissingTableError
from mobiperf.core.runstore import RunDir

PHASES = (("Q2G", "q2g_ns"), ("G2I", "g2i_ns"), ("I2D", "i2d_ns"), ("D2C", "d2c_ns"))
MAX_COUNTER_REQUESTS = 500_000  # beyond this the in-flight counter is left out (it doubles the event count)
PID_STRIDE = 10  # pid = rep * PID_STRIDE + layer index


def _us(ns: int) -> float:
    return round(ns / 1000, 3)


def assign_lanes(starts: Iterable[int], ends: Iterable[int]) -> list[int]:
    """Lane of each interval (given in start order): the lowest-numbered lane free at its start."""
    free: list[int] = []            # lanes free again, as a heap of lane numbers
    busy: list[tuple[int, int]] = []  # (end, lane) heap
    lanes, n_lanes = [], 0
    for start, end in zip(starts, ends):
        while busy and busy[0][0] <= start:
            heapq.heappush(free, heapq.heappop(busy)[1])
        if free:
            lane = heapq.heappop(free)
        else:
            lane, n_lanes = n_lanes, n_lanes + 1
        lanes.append(lane)
        heapq.heappush(busy, (max(end, start), lane))
    return lanes


def _meta(pid: int, name: str, tid: int | None = None, sort: int | None = None) -> Iterator[dict]:
    if tid is None:
        yield {"ph": "M", "pid": pid, "name": "process_name", "args": {"name": name}}
        if sort is not None:
            yield {"ph": "M", "pid": pid, "name": "process_sort_index", "args": {"sort_index": sort}}
    else:
        yield {"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": name}}


def block_events(block_io: pl.DataFrame, rep: int) -> Iterator[dict]:
    """Spans, nested phases and the in-flight counter of one repetition's block requests."""
    pid = rep * PID_STRIDE + 1
    rows = block_io.filter(pl.col("rep") == rep).with_columns(
        _start=pl.coalesce("queue_ts", "issue_ts", "complete_ts"), _end=pl.coalesce("complete_ts", "issue_ts",
                                                                                   "queue_ts"))
    rows = rows.filter(pl.col("_start").is_not_null()).sort("_start")
    yield from _meta(pid, f"rep {rep} · block requests", sort=pid)
    lanes = assign_lanes(rows["_start"].to_list(), rows["_end"].to_list())
    for lane in range(max(lanes) + 1 if lanes else 0):
        yield from _meta(pid, f"lane {lane}", tid=lane)
    arg_cols = [c for c in ("sector", "size_bytes", "rwbs", "size_class", "locality", "sync_mode", "region",
                            "file_type", "path", "comm", "pid", "dev_major", "dev_minor") if c in rows.columns]
    for lane, r in zip(lanes, rows.iter_rows(named=True)):
        size = r["size_bytes"]
        label = (r["op"] if not size
                 else f"{r['op']} {size // 1024 if size >= 1024 else size}{'k' if size >= 1024 else 'B'}")
        if r.get("locality") in ("sequential", "random"):
            label += f" {r['locality'][:3]}"
        args = {c: r[c] for c in arg_cols if r[c] is not None and r[c] != ""}
        start, end = r["_start"], r["_end"]
        yield {"ph": "X", "cat": "block", "name": label, "pid": pid, "tid": lane, "ts": _us(start),
               "dur": _us(max(0, end - start)), "args": args}
        # Phases laid end to end from the queue time (Q2C = Q2G + G2I + I2D + D2C); a phase whose events were
        # not seen is skipped, and D2C always ends at completion.
        t = r["queue_ts"] if r.get("queue_ts") is not None else r.get("issue_ts")
        for name, col in PHASES:
            d = r.get(col)
            if d is None or t is None or d < 0:
                continue
            if name == "D2C" and r.get("issue_ts") is not None:
                t = r["issue_ts"]
            yield {"ph": "X", "cat": "block.phase", "name": name, "pid": pid, "tid": lane, "ts": _us(t),
                   "dur": _us(d)}
            t += d
    if "issue_ts" in rows.columns and len(rows) <= MAX_COUNTER_REQUESTS:
        issued = rows.filter(pl.col("issue_ts").is_not_null() & pl.col("complete_ts").is_not_null())
        changes = pl.concat([issued.select(ts=pl.col("issue_ts"), d=pl.lit(1)),
                             issued.select(ts=pl.col("complete_ts"), d=pl.lit(-1))]).sort("ts", "d")
        depth = changes.with_columns(pl.col("d").cum_sum().alias("depth")).group_by("ts", maintain_order=True).last()
        for ts, _, d in depth.iter_rows():
            yield {"ph": "C", "pid": pid, "name": "in flight at the device", "ts": _us(ts), "args": {"requests": d}}


def syscall_events(syscall_class: pl.DataFrame, rep: int) -> Iterator[dict]:
    pid = rep * PID_STRIDE + 2
    rows = syscall_class.filter((pl.col("rep") == rep) & pl.col("dur").is_not_null()).sort("ts")
    if not len(rows):
        return
    yield from _meta(pid, f"rep {rep} · system calls", sort=pid)
    for tid, comm in rows.select("pid", "comm").unique("pid").iter_rows():
        yield from _meta(pid, f"{comm} {tid}", tid=tid)
    cols = [c for c in ("path", "file_type", "size_bytes", "offset_bytes", "size_class", "locality", "sync_mode",
                        "fd") if c in rows.columns]
    for r in rows.iter_rows(named=True):
        yield {"ph": "X", "cat": "syscall", "name": r["syscall"], "pid": pid, "tid": r["pid"], "ts": _us(r["ts"]),
               "dur": _us(r["dur"]), "args": {c: r[c] for c in cols if r[c] is not None and r[c] != ""}}


def fuse_events(fuse_req: pl.DataFrame, rep: int) -> Iterator[dict]:
    pid = rep * PID_STRIDE + 3
    rows = fuse_req.filter((pl.col("rep") == rep) & pl.col("send_ts").is_not_null()).with_columns(
        _end=pl.coalesce("end_ts", "send_ts")).sort("send_ts")
    if not len(rows):
        return
    yield from _meta(pid, f"rep {rep} · FUSE requests", sort=pid)
    lanes = assign_lanes(rows["send_ts"].to_list(), rows["_end"].to_list())
    for lane in range(max(lanes) + 1):
        yield from _meta(pid, f"lane {lane}", tid=lane)
    for lane, r in zip(lanes, rows.iter_rows(named=True)):
        yield {"ph": "X", "cat": "fuse", "name": str(r["opcode_name"]).removeprefix("FUSE_"), "pid": pid,
               "tid": lane, "ts": _us(r["send_ts"]), "dur": _us(r["_end"] - r["send_ts"]),
               "args": {"len_bytes": r["len_bytes"], "unique": r["unique"], "error": r["error"],
                        "comm": r["comm"]}}


def trace_events(run: RunDir) -> Iterator[dict]:
    """Every event of the run's trace, repetition by repetition."""
    if not run.has_table("block_io"):
        raise MissingTableError(f"{run.path}: no block_io result table to export (run `mobiperf analyze "
                                f"{run.path}` first)")
    block_io = run.read_table("block_io")
    syscalls = run.read_table("syscall_class") if run.has_table("syscall_class") else None
    fuse = run.read_table("fuse_req") if run.has_table("fuse_req") else None
    for rep in sorted(block_io["rep"].unique().to_list()):
        yield from block_events(block_io, rep)
        if syscalls is not None:
            yield from syscall_events(syscalls, rep)
        if fuse is not None:
            yield from fuse_events(fuse, rep)


def write_trace(run: RunDir, path: Path) -> dict:
    """Write the run as a Chrome JSON trace to `path` (gzip-compressed when it ends in .gz); returns counts."""
    path = Path(path)
    meta = run.read_meta()
    counts: dict[str, int] = {}
    tmp = path.with_name(f".{path.name}.tmp")
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(tmp, "wt", encoding="utf-8") as f:
        _write(f, trace_events(run), counts, {
            "mobiperf_run": meta.get("id"), "stack": meta.get("stack"), "status": meta.get("status"),
            "command": " ".join(meta.get("command", [])), "clock": "trace clock (ns / 1000)"})
    tmp.replace(path)
    return counts


def _write(f: IO[str], events: Iterable[dict], counts: dict[str, int], metadata: dict) -> None:
    f.write('{"displayTimeUnit": "ns", "metadata": ' + json.dumps(metadata) + ', "traceEvents": [\n')
    first = True
    for e in events:
        if not first:
            f.write(",\n")
        first = False
        f.write(json.dumps(e, separators=(",", ":"), default=str))
        key = e.get("cat") or e["ph"]
        counts[key] = counts.get(key, 0) + 1
    f.write("\n]}\n")
