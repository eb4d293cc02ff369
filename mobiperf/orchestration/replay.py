"""Replaying a recording on a stack: what is replayed (a run's file-level record), the generator's script on the
target, and a run like `mobiperf run` whose run.json says what it replayed and what the recording did.

The replay run is an ordinary run (pipeline.run) of the Mobibench-compatible generator replaying a script
(`mobibench -p . -g SCRIPT [--replay-timing=closed]`), so it has the same tables, report and metrics; its
run.json's `replay` holds the source, the timing mode, whether it ran on the stack it was recorded on, the notes
(what was left out) and the recording's figures, from which its analysis computes replay_fidelity
(analyzers/replay/fidelity.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

import polars as pl

from mobiperf.analyzers.replay.fidelity import original_figures
from mobiperf.analyzers.replay.phone import build_from_android_fs
from mobiperf.analyzers.replay.script import write_script
from mobiperf.analyzers.replay.workload import ReplayWorkload, build_from_syscalls
from mobiperf.analyzers.syscall import workload_syscalls
from mobiperf.core.errors import UsageError
from mobiperf.core.runstore import RunDir
from mobiperf.core.units import format_size

if TYPE_CHECKING:
    from mobiperf.orchestration.run_request import RunRequest
    from mobiperf.target.target import Target

TIMINGS = ("open", "closed")
SCRIPT_NAME = "replay.script"


@dataclass
class ReplaySource:
    """What a replay replays: one repetition of a run directory, as a workload, with the recording's figures."""

    label: str                      # as the user named it (a run directory or a trace file)
    run: RunDir
    rep: int
    kind: str                       # syscalls | android_fs
    workload: ReplayWorkload
    original: dict[str, float]
    meta: dict
    dependencies: str = "all"      # which waits between threads (analyzers/replay/dependencies.py)

    @property
    def collected(self) -> bool:
        """Whether mobiperf collected it on a stack of its own (not an ingested trace)."""
        return self.meta.get("target", {}).get("target") != "ingested"

    def describe(self) -> str:
        w = self.workload
        return (f"{self.label} rep {self.rep} ({'system calls' if self.kind == 'syscalls' else 'file events'}): "
                f"{_n(w.calls.height, 'call')} in {_n(w.nthreads, 'thread')} on {_n(w.nhandles, 'open file')}, "
                f"{_n(len(w.state.files), 'file')} and {_n(len(w.state.dirs), 'directory', 'directories')} made "
                f"before, "
                f"{_n(w.waits.height, 'wait')} between threads, up to {format_size(w.state.need_bytes)}")


def _n(count: int, one: str, many: str | None = None) -> str:
    return f"{count:,} {one if count == 1 else many or one + 's'}"


def load_source(run: RunDir, label: str, *, rep: int | None = None, process: str | None = None,
                dependencies: str = "all") -> ReplaySource:
    """The replayable workload of a run directory; UsageError in one line when it has no file-level record."""
    meta = run.read_meta()
    rep = _repetition(meta, rep, label)
    kind = _record_kind(run, rep, label)
    notes = []
    if kind == "syscalls":
        syscall_io = run.read_table("syscall_io").filter(pl.col("rep") == rep)
        if syscall_io["ts"].is_null().all():  # strace without -t/-tt/-ttt: the calls' order, no time
            syscall_io = syscall_io.with_columns(ts=pl.int_range(pl.len(), dtype=pl.Int64) * 1000,
                                                 dur=pl.lit(0, pl.Int64))
            notes.append("the recording has no times: calls replayed in their order, 1 us apart (no think time)")
        calls = workload_syscalls(syscall_io, _table(run, "trace_marker"), _table(run, "task_role"),
                                  _table(run, "fuse_req"))
        workdir = None
        if meta.get("target", {}).get("target") != "ingested":
            reps = {r.get("index"): r for r in meta.get("repetitions", [])}
            workdir = (reps.get(rep, {}).get("stack") or {}).get("workdir")
        workload = build_from_syscalls(calls, workdir, dependencies=dependencies)
    else:
        workload = build_from_android_fs(run.read_table("android_fs_event"), _table(run, "fsync_event"), rep, process,
                                         dependencies=dependencies)
    if not workload.calls.height:
        raise UsageError(f"{label}: nothing to replay: none of its file-level calls is on a file the replay can make "
                         f"({'; '.join(workload.notes()) or 'no calls'})")
    workload.remarks += notes
    original = original_figures(workload, _table(run, "block_io"), _table(run, "fsync_event"), rep)
    return ReplaySource(label, run, rep, kind, workload, original, meta, dependencies)


def _table(run: RunDir, name: str) -> pl.DataFrame | None:
    return run.read_table(name) if run.has_table(name) else None


def _repetition(meta: dict, rep: int | None, label: str) -> int:
    reps = [r.get("index") for r in meta.get("repetitions", [])]
    if rep is not None:
        if reps and rep not in reps:
            raise UsageError(f"{label} has no repetition {rep} (it has {', '.join(map(str, reps))})")
        return rep
    good = [r.get("index") for r in meta.get("repetitions", []) if r.get("exit_code", 0) == 0]
    return (good or reps or [0])[0]


def _record_kind(run: RunDir, rep: int, label: str) -> str:
    """syscalls (with paths) or android_fs; a UsageError naming what is missing otherwise."""
    if run.has_table("syscall_io"):
        calls = run.scan_table("syscall_io").filter((pl.col("rep") == rep) & (pl.col("path") != "")).head(1).collect()
        if calls.height:
            return "syscalls"
    if run.has_table("android_fs_event"):
        return "android_fs"
    has = [t for t in ("block_rq", "fsync_event", "fuse_req", "syscall_io") if run.has_table(t)]
    if "syscall_io" in has:
        raise UsageError(f"{label}: nothing to replay: its system calls carry no file paths (the kernel's syscalls "
                         "events name no files); record with strace too (`--source strace`)")
    raise UsageError(f"{label}: nothing to replay: no file-level events (it has {', '.join(has) or 'no table'}; a "
                     "replay needs system calls with paths, from strace, or Android's android_fs events)")


def replay_command(script: str, timing: str, replay_dir: str | None = None) -> list[str]:
    """The generator replaying `script` (a path on the target) in the stack's directory (in a new directory of it
    with replay_dir)."""
    return (["mobibench", "-p", ".", "-g", script] + (["--replay-timing=closed"] if timing == "closed" else [])
            + ([f"--replay-dir={replay_dir}"] if replay_dir else []))


def replay_request(source: ReplaySource, base: RunRequest, *, timing: str) -> RunRequest:
    """The run request of a replay on base's stack (its command names the script once it is placed: run_replay)."""
    if timing not in TIMINGS:
        raise UsageError(f"--timing {timing}: choose open (as recorded) or closed (as fast as possible)")
    command = replay_command(SCRIPT_NAME, timing)
    replay = {"source": source.label, "source_run": str(source.run.path), "rep": source.rep, "kind": source.kind,
              "timing": timing, "dependencies": source.dependencies, "same_stack": same_stack(source, base),
              "calls": source.workload.calls.height,
              "made_before": {"files": len(source.workload.state.files), "dirs": len(source.workload.state.dirs),
                              "bytes": sum(size for _, size in source.workload.state.files)},
              "threads": source.workload.nthreads, "notes": source.workload.notes(), "script": SCRIPT_NAME,
              "original": source.original}
    return dataclasses.replace(base, command=command, replay=replay, workload_bytes=0, workload_transactions=0)


def same_stack(source: ReplaySource, request: RunRequest) -> bool:
    """Whether a replay runs where its recording ran: a collected run's stack, models and scheduler, unchanged."""
    if not source.collected:
        return False
    m = source.meta
    return (str(request.stack) == str(m.get("stack")) and request.scheduler == m.get("scheduler")
            and request.device == m.get("device") and request.dirty_limit == m.get("dirty_limit")
            and (request.cpu_share or "host") == (m.get("cpu_share") or "host")
            and int(request.fuse_wakeup_ns or 0) == int(m.get("fuse_wakeup_ns") or 0))


def check_space(target: Target, request: RunRequest, need: int) -> None:
    """Before anything starts: a replay that needs more than the target can hold is refused, saying both."""
    if request.stack.filesystem.name != "dir":
        room = int(request.image_size * 0.9)  # a fresh file system's own metadata and journal take the rest
        if need > room:
            raise UsageError(f"this replay writes up to {format_size(need)}, more than the stack's "
                             f"{format_size(request.image_size)} partition can hold (about {format_size(room)} "
                             "free once formatted); give --image-size larger")
        return
    path = request.stack.filesystem.options.get("path") or ""
    free = device_free_bytes(target, path)
    if free is not None and need > free:
        raise UsageError(f"this replay writes up to {format_size(need)} but {path} has {format_size(free)} free on "
                         f"{target.transport.name}; nothing was replayed")


def device_free_bytes(target: Target, path: str) -> int | None:
    """Free bytes of the file system holding path (its nearest existing parent) on the target, None if unknown."""
    script = (f"p={shlex.quote(path or '/')}; while [ ! -e \"$p\" ] && [ \"$p\" != / ]; do p=${{p%/*}}; "
              "[ -n \"$p\" ] || p=/; done; df -k \"$p\" | tail -n 1")
    done = target.transport.run(["sh", "-c", script], timeout=30)
    fields = done.text.split()
    try:
        return int(fields[3]) * 1024 if done.returncode == 0 and len(fields) >= 4 else None
    except ValueError:
        return None


@contextlib.contextmanager
def placed_script(target: Target, local: Path) -> Iterator[str]:
    """The script where the generator can read it: the local file itself, or a copy pushed to the device's work
    directory (journaled like the pushed binaries, removed afterwards)."""
    if target.is_local:
        yield str(local)
        return
    from mobiperf.target.pushed import pushed_file

    # one name per mobiperf process: the replays of a what-if then have the same command line (compare checks it)
    remote = f"{target.scratch_dir()}/replay-{os.getpid()}.script"
    with pushed_file(target.transport, local, remote) as path:
        yield path


def run_replay(target: Target, request: RunRequest, script: Path, out: Path, *, read_in_run: bool = False) -> RunDir:
    """One replay run (pipeline.run) with its script on the target, kept in the run directory (RUN/replay.script).
    script: a local file that stays while the run runs. On this host the generator reads it where it is, or, with
    read_in_run, the run directory's copy (made before the workload starts); a device reads a pushed copy."""
    from mobiperf.orchestration import pipeline

    request = dataclasses.replace(request, inputs={**request.inputs, SCRIPT_NAME: Path(script)})
    if read_in_run and target.is_local:
        script = Path(out) / SCRIPT_NAME
    # On a device's own directory the replay makes a directory of its own in it (whatever else is there), with or
    # without a FUSE layer, so that every stack of a what-if runs the same command line; as it is (no layer), that
    # directory is removed afterwards (a layer's directory goes with the layer).
    device = request.stack.filesystem.name == "dir"
    replay_dir = f"mobiperf-replay-{os.getpid()}" if device else None
    own = device and not request.stack.layers
    with placed_script(target, Path(script)) as where, \
            removed_after(target, f"{request.stack.filesystem.options['path']}/{replay_dir}" if own else None):
        request = dataclasses.replace(request, command=replay_command(where, request.replay["timing"], replay_dir))
        return pipeline.run(target, request, out)


@contextlib.contextmanager
def removed_after(target: Target, path: str | None) -> Iterator[None]:
    """The replay's files in a device's own directory (a dir: stack without a layer, which nothing else removes):
    journaled before the run (a killed mobiperf's are removed by the next run or `mobiperf doctor`), removed after
    it."""
    if path is None:
        yield
        return
    from mobiperf.target.undo_journal import journal_for

    journal = journal_for(target.transport)
    entry = journal.record("dir", path=path)
    try:
        yield
    finally:
        if target.transport.run(["rm", "-rf", "--", path], timeout=300).returncode == 0:
            journal.done(entry)


def write_replay_script(source: ReplaySource, path: Path) -> Path:
    return write_script(source.workload, path)


def fidelity_summary(rundir: RunDir) -> tuple[int, int, list[str]]:
    """(checks held, checks made, the failing ones as `metric: original -> replay`) of a replay run."""
    if not rundir.has_table("replay_fidelity"):
        return 0, 0, ["no replay_fidelity table (the replay run was not analysed)"]
    table = rundir.read_table("replay_fidelity").filter(pl.col("ok").is_not_null())
    failed = table.filter(~pl.col("ok"))
    lines = [f"{r['metric']} (rep {r['rep']}): {r['original']:,.0f} -> {r['replay']:,.0f}"
             for r in failed.iter_rows(named=True)]
    return table.height - failed.height, table.height, lines
