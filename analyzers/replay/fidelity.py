"""How faithfully a replay reproduced its recording, measured from both traces (the result replay_fidelity).

The recording's figures are taken when the replay is built (original_figures) and kept in the replay run's
run.json (`replay.original`); the replay's are measured from the replay run's own tables (replay_fidelity, an
analyzer, so `mobiperf analyze` computes them again). The same definitions on both sides:

  calls.OP            replayed calls per generator op (OP: open, close, read, write, pread, ..., dup; rmdir counts
                      as unlink: an arm64 kernel has only unlinkat); recording: the script's calls (the replayed
                      ones and the opens the replay adds for descriptors opened before the recording or for a
                      phone's file events, which the notes count); replay: the workload's calls inside the
                      generator's timed window (its markers)
  syscall.write_bytes, syscall.read_bytes   what the write and read calls moved (their return values)
  block.write_bytes, block.read_bytes       the block requests of the run's device (block_io, the workload's
                      scope); replay: from the generator's `replay_begin` marker on (a fresh file system's first
                      file costs metadata reads, in the replay when it makes its root, as in the recording when
                      it made its first file), less those queued between `precreate_start` and `precreate_end`
                      (the files that existed before the recording); the writeback after the timed window counts
  block.flushes       block flush requests (op flush, as block.requests{op=flush}), counted the same way
  fs.syncs            the file system's sync_file calls (ext4/f2fs_sync_file_enter)
  elapsed             from the first replayed call's start to the last one's end, on the trace clock
Bounds (the issue's): calls and syscall bytes equal; block bytes, flushes and syncs within 5 %; elapsed within
10 %, in the open loop only (a closed loop does not keep time: informational). Block bytes also hold when they
differ by at most 64 KiB (BLOCK_SLACK_BYTES): which of a fresh file system's bitmaps, inode tables and directory
blocks a run reads depends on what the page cache held when it started, a handful of 4 KiB blocks either way (a
recording and a second recording of the same SQLite workload read 24 and 36 KiB), which 5 % of a small workload's
reads cannot absorb. They apply when the replay ran on
the stack it was recorded on (`replay.same_stack`); on another stack only the calls and bytes are held to them,
the rest is what the change did (tolerance and ok empty). ratio = replay / original (1 when both are 0).
"""

from __future__ import annotations

import polars as pl

from mobiperf.analyzers.replay.from_syscalls import OPS, READS, WRITES
from mobiperf.analyzers.timed_window import timed_windows

COLUMNS = {"rep": pl.Int32, "metric": pl.Utf8, "original": pl.Float64, "replay": pl.Float64, "ratio": pl.Float64,
           "tolerance": pl.Float64, "ok": pl.Boolean}
EXACT, BLOCK, ELAPSED = 0.0, 0.05, 0.10
BLOCK_SLACK_BYTES = 64 * 1024
FIDELITY_OP = {**OPS, "rmdir": "unlink"}


def fidelity_op(op: str) -> str:
    """The name a call is counted under (rmdir as unlink, module docstring)."""
    return "unlink" if op == "rmdir" else op


def original_figures(workload, block_io: pl.DataFrame | None, fsync_event: pl.DataFrame | None,
                     rep: int) -> dict[str, float]:
    """The recording's side of every metric, from the built workload and the source run's tables."""
    calls = workload.calls
    out = {f"calls.{op}": float(n) for op, n in _counts(calls["op"].to_list()).items()}
    out.update(_bytes(calls, "op"))
    out.update(_block(block_io, rep, None))
    if fsync_event is not None:
        out["fs.syncs"] = float(fsync_event.filter((pl.col("rep") == rep) & (pl.col("phase") == "enter")).height)
    if calls.height:
        out["elapsed"] = float(calls["end_ns"].max() - calls["start_ns"].min())
    return out


def replay_fidelity(syscall_io: pl.DataFrame, trace_marker: pl.DataFrame, replay: dict | None = None,
                    block_io: pl.DataFrame | None = None, fsync_event: pl.DataFrame | None = None,
                    task_role: pl.DataFrame | None = None, fuse_req: pl.DataFrame | None = None) -> pl.DataFrame:
    """replay_fidelity: per repetition of the replay run, every metric's original and replay figure (module
    docstring). replay: run.json's `replay` (original figures, timing, same_stack)."""
    from mobiperf.analyzers.syscall import workload_syscalls

    original = (replay or {}).get("original") or {}
    calls = workload_syscalls(syscall_io, trace_marker, task_role, fuse_req)
    rows = []
    for rep, (start, end) in sorted(timed_windows(trace_marker).items()):
        inside = calls.filter((pl.col("rep") == rep) & (pl.col("ts") >= start) & (pl.col("ts") <= end)
                              & pl.col("syscall").is_in(list(FIDELITY_OP)))
        inside = inside.with_columns(op=pl.col("syscall").replace_strict(FIDELITY_OP, return_dtype=pl.Utf8))
        measured = {f"calls.{op}": float(n) for op, n in _counts(inside["op"].to_list()).items()}
        measured.update(_bytes(inside.filter(pl.col("ret") >= 0), "op"))
        marks = _setup_marks(trace_marker, rep)
        measured.update(_block(block_io, rep, marks.get("replay_begin", start), marks.get("precreate_start"),
                               marks.get("precreate_end")))
        if fsync_event is not None:
            measured["fs.syncs"] = float(fsync_event.filter(
                (pl.col("rep") == rep) & (pl.col("phase") == "enter") & (pl.col("ts") >= start)).height)
        if inside.height:
            measured["elapsed"] = float((inside["ts"] + inside["dur"].fill_null(0)).max() - inside["ts"].min())
        rows += _compare(rep, original, measured, replay or {})
    return pl.DataFrame(rows, schema=COLUMNS)


def _counts(ops: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for op in ops:
        out[fidelity_op(op)] = out.get(fidelity_op(op), 0) + 1
    return out


def _bytes(calls: pl.DataFrame, op_col: str) -> dict[str, float]:
    moved = pl.col("ret").clip(lower_bound=0).fill_null(0)
    return {"syscall.write_bytes": float(calls.filter(pl.col(op_col).is_in(WRITES)).select(moved.sum()).item()),
            "syscall.read_bytes": float(calls.filter(pl.col(op_col).is_in(READS)).select(moved.sum()).item())}


def _setup_marks(trace_marker: pl.DataFrame, rep: int) -> dict[str, int]:
    """The generator's replay_begin, precreate_start and precreate_end markers of one repetition, by name."""
    marks = trace_marker.filter(pl.col("rep") == rep).with_columns(
        name=pl.col("text").str.extract(r"mobibench: (replay_begin|precreate_start|precreate_end)\s*$", 1))
    return dict(marks.filter(pl.col("name").is_not_null()).group_by("name").agg(pl.col("ts").min()).rows())


def _block(block_io: pl.DataFrame | None, rep: int, start: int | None = None, skip_from: int | None = None,
           skip_to: int | None = None) -> dict[str, float]:
    """The block figures of one repetition: from start on, less what was queued in [skip_from, skip_to]."""
    if block_io is None:
        return {}
    rows = block_io.filter(pl.col("rep") == rep)
    if start is not None:
        rows = rows.filter(pl.col("ts") >= start)
    if skip_from is not None and skip_to is not None:
        rows = rows.filter(~pl.col("ts").is_between(skip_from, skip_to))
    return {"block.write_bytes": float(rows.filter(pl.col("op") == "write")["size_bytes"].sum()),
            "block.read_bytes": float(rows.filter(pl.col("op") == "read")["size_bytes"].sum()),
            "block.flushes": float(rows.filter(pl.col("op") == "flush").height)}


def tolerance(metric: str, replay: dict) -> float | None:
    """The bound a metric is held to (module docstring), None when it is not held to one."""
    if metric.startswith(("calls.", "syscall.")):
        return EXACT
    if not replay.get("same_stack"):
        return None
    if metric == "elapsed":
        return ELAPSED if replay.get("timing", "open") == "open" else None
    return BLOCK


def _compare(rep: int, original: dict, measured: dict, replay: dict) -> list[dict]:
    rows = []
    for metric in sorted(set(original) | set(measured), key=_metric_order):
        a, b = float(original.get(metric, 0.0)), float(measured.get(metric, 0.0))
        ratio = 1.0 if a == b else (b / a if a else None)
        tol = tolerance(metric, replay)
        ok = None if tol is None else (a == b if tol == 0 else ratio is not None and abs(ratio - 1) <= tol)
        block_bytes = metric.startswith("block.") and metric.endswith("_bytes")
        if ok is False and block_bytes and abs(b - a) <= BLOCK_SLACK_BYTES:
            ok = True
        rows.append({"rep": rep, "metric": metric, "original": a, "replay": b, "ratio": ratio, "tolerance": tol,
                     "ok": ok})
    return rows


def _metric_order(metric: str) -> tuple:
    groups = ("calls.", "syscall.", "fs.", "block.", "elapsed")
    return next(i for i, g in enumerate(groups) if metric.startswith(g)), metric
