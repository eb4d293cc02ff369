"""How a run that cannot finish ends: kept, marked incomplete with the reason, and said in one line.

A run stops early for one of three kinds of reasons: a stop signal (Ctrl-C, SIGTERM, SIGHUP; mobiperf.core.signals), a
failure at a stage boundary that no retry fixes (the run directory's file system is full or failing: ENOSPC,
EDQUOT, EIO, EROFS; the device went away; the target refused something), or a bug. By the time the error reaches
the pipeline the stage's `with` blocks have taken the stack down and restored the target. `keep_incomplete`
then writes down in run.json what happened: the status stays "incomplete", `stopped` says at which stage and why,
and the repetition being collected is recorded as far as it got (exit_code None), with its traces marked
`truncated` when the file system filled up under them (the trace readers' writes failed: events are missing at
the end). A storage failure or a MobiperfError becomes one RunStopped error line; a stop signal goes on to the
CLI's 128+signal exit; a bug keeps its traceback.

A full file system cannot take run.json either: the run directory keeps a small reserve file
(RunDir.reserve_space) that is released here first.

A run whose mobiperf was killed (SIGKILL) says nothing: `add_missing_repetitions` gives its raw directories
without a record one when the run is analysed, so that its traces are analysed like the others.
"""

from __future__ import annotations

import errno
from datetime import datetime, timezone
from pathlib import Path

from mobiperf.core.errors import MobiperfError
from mobiperf.core.run_facts import Repetition, RunMeta
from mobiperf.core.signals import signal_name

STORAGE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS}
FULL_BYTES = 256 << 10   # a file system with less than this free (also for root) is full for a trace reader
TRACE_FILES = ("ftrace.txt", "syscalls.txt", "ftrace_raw", "strace.log", "blktrace")


class RunStopped(MobiperfError):
    """A run ended early at a stage boundary; it is kept, marked incomplete."""


def is_storage_error(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in STORAGE_ERRNOS


def stop_reason(exc: BaseException) -> str:
    if isinstance(exc, KeyboardInterrupt):
        return f"stopped by {signal_name(exc)}"
    if is_storage_error(exc):
        where = f" ({exc.filename})" if exc.filename else ""
        return f"{exc.strerror.lower()}{where}"
    if isinstance(exc, MobiperfError):
        return str(exc)
    return f"internal error: {type(exc).__name__}: {exc}"


def storage_full(path: Path) -> bool:
    """Whether the file system holding path has (almost) no room left, also for root."""
    import os

    try:
        st = os.statvfs(path)
    except OSError:
        return False
    return st.f_bfree * st.f_frsize < FULL_BYTES


def keep_incomplete(rundir, exc: BaseException, stage: str, rep: int | None = None) -> BaseException:
    """Record why the run stopped; returns the exception to raise (RunStopped for errors the user can act on)."""
    reason = stop_reason(exc)
    if is_storage_error(exc):
        rundir.release_reserve()
    try:
        meta = rundir.read_meta()
        meta["stopped"] = {"stage": stage, "reason": reason,
                           "at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        if rep is not None and not any(r.get("index") == rep for r in meta.get("repetitions", [])):
            meta.setdefault("repetitions", []).append(partial_record(rundir, rep, reason, exc))
        rundir.write_meta(meta)
        kept = f"the partial run is kept at {rundir.path} (marked incomplete)"
    except (OSError, MobiperfError) as e:
        kept = f"the partial run is at {rundir.path}, but its run.json could not say why ({e})"
    if isinstance(exc, KeyboardInterrupt) or not (is_storage_error(exc) or isinstance(exc, MobiperfError)):
        return exc
    stopped = RunStopped(f"{stage}: {reason}; {kept}")
    stopped.__cause__ = exc
    return stopped


def partial_record(rundir, rep: int, reason: str, exc: BaseException) -> dict:
    """The repetition that was being collected, as far as it got."""
    import json

    raw = rundir.path / "raw" / f"rep{rep}"
    counters = {}
    for path in sorted(raw.glob("*counters*.json")):
        try:
            counters[path.name.removesuffix(".json")] = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
    record = {"index": rep, "exit_code": None, "workload_ns": None, "stopped": reason, "counters": counters,
              "notes": []}
    if is_storage_error(exc) or storage_full(raw):
        record["truncated"] = {"traces": [n for n in TRACE_FILES if (raw / n).exists()],
                               "why": "the run directory's file system filled up: the traces end early"}
    return record


def add_missing_repetitions(meta: RunMeta, rundir) -> None:
    """A raw directory without a record (its mobiperf was killed before writing one) gets a record saying so."""
    if meta.status != "incomplete":
        return
    known = {r.index for r in meta.repetitions}
    for rep, raw in rundir.raw_dirs():
        if rep in known or not any(raw.iterdir()):
            continue
        meta.repetitions.append(Repetition.from_dict({
            "index": rep, "exit_code": None, "workload_ns": None, "counters": {}, "notes": [],
            "stopped": "unknown: the collecting mobiperf ended without a word (killed with SIGKILL?)"}))
    meta.repetitions.sort(key=lambda r: r.index)
