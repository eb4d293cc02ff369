"""Recording a device as it is used: no stack, no workload of mobiperf's own, the whole device traced (`mobiperf
record`), then parsed, analysed and reported like a run.

What is traced (RECORD_SETS): the block layer of every device, the file systems' syncs and journal, FUSE,
Android's file layer (android_fs, where the kernel has it), the scheduler (who slept in D, and on what:
blocked.py) and the task events (who is whose thread); every event the kernel lacks is named in a note. Each
line carries its tgid (record-tgid, on tracefs), and /proc is read at the start and at the end (task table): every
process and thread is named.

With --app PACKAGE: the package's uid is looked up on the device (mobiperf/target/android_app.py); if none of its
processes runs, it is launched as the launcher does, between trace markers `timed_start` and `timed_end` (the
timed window: the launch, until a process of it runs); every thread of its processes (by uid, as zygote forks
them) is the run's workload (tasks.json `workload_tids`, task_role), everything else is background by process;
its data directory is listed at the end (`ls -iR`: the inodes the file systems' events name, inode_path).
The recording ends after --duration, or at Ctrl-C (the trace is kept and analysed, not marked incomplete); a
second signal stops mobiperf as any run is stopped (the run is kept, incomplete).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mobiperf.core.errors import TargetError
from mobiperf.core.run_facts import Repetition, RunMeta, new_run_meta
from mobiperf.core.run_stop import keep_incomplete
from mobiperf.core.runstore import RunDir

if TYPE_CHECKING:
    from mobiperf.target.target import Target

RECORD_SETS = ("ext4", "jbd2", "f2fs", "fuse", "android_fs", "sched", "task")
POLL_S = 0.2
TASK_LOOKS = ("tids_at_start", "tids_seen", "tids_at_end")  # when record looked for the app's tasks


@dataclass(frozen=True)
class RecordRequest:
    duration_s: float | None = None   # None: until Ctrl-C
    app: str | None = None            # a package whose processes are the workload
    recorder: str = "auto"            # auto, perfetto or tracefs (collectors/perfetto.py choose_recorder)
    report: bool = True


def record(target: Target, request: RecordRequest, out: Path) -> RunDir:
    """Record the device (module docstring); the run directory, analysed and reported."""
    from mobiperf.orchestration import pipeline
    from mobiperf.target.android_app import package_uid

    _check_can_record(target)
    uid = package_uid(target.transport, request.app) if request.app else None
    rundir = RunDir.create(Path(os.path.abspath(out)), _meta(target, request, out))
    where = {"stage": "record", "rep": 0}
    try:
        record_rep = _record(target, request, rundir, uid)
        rundir.update_meta(repetitions=[Repetition.from_dict(record_rep)])
        where = {"stage": "parse and analyze", "rep": None}
        pipeline.analyze(rundir, reparse=True)
        rundir.update_meta(status="complete")
        if request.report:
            where = {"stage": "report", "rep": None}
            pipeline.report(rundir)
    except BaseException as e:
        raise keep_incomplete(rundir, e, **where)
    return rundir


def record_events(target: Target, notes: list[str]) -> list:
    """The events of RECORD_SETS this kernel has (every device, every FUSE connection), block's first."""
    from mobiperf.collectors.ftrace import block_event_specs, event_set_specs

    events = block_event_specs([])
    lacking = []
    for name in RECORD_SETS:
        specs, missing = event_set_specs(name, target.caps.events, [])
        events += specs
        if not specs and name in ("ext4", "jbd2", "f2fs", "android_fs"):
            continue  # a file system (or Android's layer) this kernel does not have: no news
        lacking += missing
    if lacking:
        notes.append(f"record: this kernel lacks {', '.join(lacking)}")
    return events


def _record(target: Target, request: RecordRequest, rundir: RunDir, uid: int | None) -> dict:
    from mobiperf.collectors.plan import ftrace_recorder
    from mobiperf.collectors.proc_snapshot import ProcSnapshotCollector

    raw = rundir.raw_dir(0)
    notes: list[str] = []
    ftrace = ftrace_recorder(target, record_events(target, notes), raw, raw_pages=False, recorder=request.recorder)
    snapshot = ProcSnapshotCollector(target.transport, raw)
    app: dict = {}
    with ftrace:
        if getattr(ftrace, "root", None):  # tracefs: every line with its tgid (the instance's own option)
            target.transport.write_file(f"{ftrace.root}/options/record-tgid", b"1")
        snapshot.start()
        ftrace.start()
        t0 = time.monotonic_ns()
        ended_by = "duration"
        try:
            if request.app:
                app = _attach_or_launch(target, ftrace, request.app, uid)
            _wait(request.duration_s, t0, _app_watch(target, app) if request.app else None)
        except KeyboardInterrupt:  # Ctrl-C ends a recording: what was traced is kept and analysed
            ended_by = "interrupt"
        elapsed = time.monotonic_ns() - t0
        summaries = {"ftrace": ftrace.stop()}
    summaries["proc"] = snapshot.stop()
    if request.app:
        from mobiperf.target.android_app import app_tasks

        app["tids_at_end"] = app_tasks(target.transport, uid)
        _list_app_files(target, request.app, raw, notes)
    _write_tasks(raw / "tasks.json", app)
    return {"index": 0, "exit_code": 0, "workload_ns": elapsed, "ended_by": ended_by, "notes": notes,
            "stack": {"spec": "the device as it is"}, "app": _app_summary(app), **summaries}


def _list_app_files(target: Target, package: str, raw: Path, notes: list[str]) -> None:
    """raw/inodes/app.txt: `ls -iR` of the app's data directory, so the file systems' inodes name its files."""
    done = target.transport.run(["ls", "-iR", f"/data/data/{package}/"], timeout=60)
    if done.returncode != 0 and not done.stdout:
        notes.append(f"record: no listing of /data/data/{package}: {done.stderr.decode(errors='replace')[-200:]}")
        return
    (raw / "inodes").mkdir(exist_ok=True)
    (raw / "inodes" / "app.txt").write_bytes(done.stdout)


def _attach_or_launch(target: Target, ftrace, package: str, uid: int) -> dict:
    """The app's tasks now; launched between the timed-window markers if none of its processes runs."""
    from mobiperf.target.android_app import app_tasks, launch_app

    running = app_tasks(target.transport, uid)
    app = {"package": package, "uid": uid, "tids_at_start": running, "launched": None}
    if running:
        return app
    marker = getattr(ftrace, "marker_path", None)
    _mark(target, marker, "timed_start")
    app["launched"], app["tids_at_start"] = launch_app(target.transport, package, uid)
    _mark(target, marker, "timed_end")
    return app


def _mark(target: Target, marker: str | None, text: str) -> None:
    if marker:
        target.transport.write_file(marker, f"{text}\n".encode())


def _wait(duration_s: float | None, t0: int, every_second=None) -> None:
    from mobiperf.core.signals import raise_if_stopping

    last = 0.0
    while duration_s is None or time.monotonic_ns() - t0 < duration_s * 1e9:
        raise_if_stopping()
        if every_second is not None and time.monotonic() - last >= 1.0:
            every_second()
            last = time.monotonic()
        time.sleep(POLL_S)


def _app_watch(target: Target, app: dict):
    """A function that adds the app's tasks running now to app["tids_seen"]: its processes and threads come and
    go while it is used (a thread that lived between two looks is named by its task_newtask event)."""
    from mobiperf.target.android_app import app_tasks

    seen = app.setdefault("tids_seen", {})

    def look() -> None:
        for pid, tids in app_tasks(target.transport, app["uid"]).items():
            seen[pid] = sorted(set(seen.get(pid, [])) | set(tids))
    return look


def _write_tasks(path: Path, app: dict) -> None:
    """raw/tasks.json: the app's threads (every one record saw: at the start, each second, at the end) as the
    workload's."""
    tids = sorted({t for key in TASK_LOOKS for tids in app.get(key, {}).values() for t in tids})
    pids = sorted({int(p) for key in TASK_LOOKS for p in app.get(key, {})})
    path.write_text(json.dumps({"workload_tids": tids, "app_pids": pids, "device_private": False,
                                "package": app.get("package")}, indent=1) + "\n")


def _app_summary(app: dict) -> dict:
    if not app:
        return {}
    return {"package": app["package"], "uid": app["uid"], "launched": app["launched"],
            "processes": sorted({int(p) for key in TASK_LOOKS for p in app.get(key, {})})}


def _meta(target: Target, request: RecordRequest, out: Path) -> RunMeta:
    caps = target.caps.as_dict()
    if not target.is_local:
        caps["android"] = target.android
    return new_run_meta(Path(out).name, target=caps, stack="the device as it is",
                        command=["record", *(["--app", request.app] if request.app else [])],
                        scope="workload" if request.app else "all",
                        recorded={"app": request.app, "duration_s": request.duration_s}, warnings=[])


def _check_can_record(target: Target) -> None:
    caps = target.caps
    if (not caps.tracefs_path or not caps.tracefs_writable) and not target.is_local and not target.is_root:
        target.require_root("recording (a tracefs instance of mobiperf's own)")
        target.refresh()
        caps = target.caps
    if not caps.tracefs_path or not caps.tracefs_writable:
        raise TargetError("recording needs a writable tracefs: run as root (tracefs is mounted at "
                          "/sys/kernel/tracing when absent)")
