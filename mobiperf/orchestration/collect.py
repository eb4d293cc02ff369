"""Collecting one repetition: the stack up, the collectors around the workload, the stack down, and what the
repetition records in run.json (exit status, the workload's time, the stack's facts, counters, the collectors'
summaries). The pipeline (pipeline.py) calls it once per repetition; nothing here parses or analyses.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shlex
import time
from pathlib import Path
from typing import TYPE_CHECKING

from mobiperf.analyzers import needed_tables
from mobiperf.collectors.clock import read_clock_offset
from mobiperf.collectors.plan import plan_collectors, task_ids
from mobiperf.core.binaries import reference_bin_dir
from mobiperf.core.errors import TargetError
from mobiperf.core.run_stop import storage_full
from mobiperf.core.runstore import RunDir
from mobiperf.core.signals import raise_if_stopping, shielded
from mobiperf.stack import make_stack
from mobiperf.target.android import push_reference_binaries

if TYPE_CHECKING:
    from mobiperf.orchestration.run_request import RunRequest
    from mobiperf.target.target import Target
    from mobiperf.target.transport import Transport


def collect_repetition(target: Target, request: RunRequest, rundir: RunDir, rep: int) -> dict:
    """One repetition: the stack up, the collectors around the workload, the stack down; its record for run.json
    (exit code, workload time, the stack's facts, counters, the collectors' summaries)."""
    transport = target.transport
    raw = rundir.raw_dir(rep)
    with make_stack(target, request.stack, request.stack_options(counters_dir=raw)) as stack, \
            contextlib.ExitStack() as active:
        notes: list[str] = []
        collectors = plan_collectors(target, stack, raw, extra_events=request.extra_events,
                                     sources=request.sources, event_sets=request.event_sets, notes=notes,
                                     recorder=request.recorder, tables=needed_tables())
        argv, env = _workload_command(target, request.command, active)
        argv = stack.wrap_workload(argv)   # the phone's CPU share, innermost: collectors' wrappers stay outside
        env["MOBIPERF_WORKDIR"] = stack.workdir
        env["MOBIPERF_DEVICE"] = stack.device   # what a raw stack's workload writes
        for collector in collectors:
            active.enter_context(collector)
            env.update(collector.workload_env())
            argv = collector.wrap_command(argv)
        clock = [read_clock_offset()] if target.is_local else []
        for collector in collectors:
            collector.start()
        t0 = time.monotonic_ns()
        proc = None
        try:
            with shielded():  # started and known as one: the finally below must find it
                proc = transport.start(argv, stdout_path=raw / "stdout.txt", stderr_path=raw / "stderr.txt",
                                       cwd=stack.workdir, env=env)
            exit_code = _wait(proc, request.timeout_s, raw)
        finally:
            if proc is not None and proc.poll() is None:  # a stop, a timeout: the workload must not outlive its stack
                proc.kill()
        elapsed = time.monotonic_ns() - t0
        # Writeback of a buffered workload may still be in flight: let it reach the traced device.
        if transport.run(["sync", "-f", stack.workdir], timeout=120).returncode != 0:
            transport.run(["sync"], timeout=120)  # a sync without -f (older toybox)
        if clock:
            clock.append(read_clock_offset())
        write_task_roles(transport, raw / "tasks.json", stack, workload_pid=proc.pid, clock=clock)
        # Tracing stops first: the snapshots (layout, facts) read the device, and that is not the workload's IO.
        order = [c for c in reversed(collectors) if not c.snapshot] + [c for c in collectors if c.snapshot]
        summaries = {c.name: c.stop() for c in order}
    if storage_full(raw):  # the trace readers' writes failed: the traces end early
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(raw))
    # The FUSE daemons and the device model write their counters when the stack comes down.
    counters = {p.name.removesuffix(".json"): _read_json(p) for p in sorted(raw.glob("*counters*.json"))}
    layer_counters = counters_by_layer(stack, raw)
    notes += [f"counters: {layer} wrote none ({why})" for layer, why in layer_counters.items()
              if isinstance(why, str) and why != "ok"]
    return {"index": rep, "exit_code": exit_code, "workload_ns": elapsed, "stack": stack.as_dict(),
            "counters": counters, "layer_counters": layer_counters, "notes": notes, **summaries}


def counters_by_layer(stack, raw: Path) -> dict[str, str]:
    """Which counters each counting part of the stack left in raw/: "ok", or why there are none. The FUSE daemons
    write theirs at unmount, the device model and the CPU share theirs at teardown."""
    expected = {layer["layer"]: Path(layer["counters_path"]) for layer in stack.layers if layer.get("counters_path")}
    if stack.device_profile:
        expected["device"] = raw / "device-counters-userdata.json"
    if stack.cpu_share != "host":
        expected["cpu"] = raw / "cpu-counters.json"
    found = {}
    for part, path in expected.items():
        if not path.exists():
            log = raw / f"{part}-daemon.log"
            tail = log.read_text(errors="replace").strip().splitlines()[-1:] if log.exists() else []
            found[part] = f"missing {path.name}" + (f": {tail[0][:200]}" if tail else "")
        else:
            data = _read_json(path)
            found[part] = "ok" if isinstance(data, dict) and "error" not in data else f"unreadable {path.name}"
    return found


def write_task_roles(transport: Transport, path: Path, stack, *, workload_pid: int | None, clock: list[dict]) -> None:
    """raw/tasks.json: who is who in the trace (parse/task_role.py reads it). The workload's tree is known from
    its traced calls; here go its root, the stack's FUSE daemons (every thread, their /dev/fuse descriptors and
    pipes, the FUSE connection each serves), mobiperf itself, whether the device is the run's own (an emulated stack) or
    shared (a phone's /data), and the wall-clock readings that put strace on the trace clock (collectors/clock.py)."""
    from mobiperf.collectors.ftrace import fuse_connection
    from mobiperf.stack.facts import daemon_transport_fds

    daemons = []
    for layer in stack.fuse_daemons:
        now = daemon_transport_fds(transport, layer["daemon_pid"])  # the worker threads' clones and pipes too
        daemons.append({
            "layer": layer["layer"], "pid": layer["daemon_pid"], "tids": task_ids(transport, layer["daemon_pid"]),
            "fuse_fds": sorted({*layer.get("fuse_fds", []), *now["fuse"]}), "pipe_fds": now["pipe"],
            "mountpoint": layer.get("mountpoint"),
            "connection": fuse_connection(transport, layer["mountpoint"]) if layer.get("mountpoint") else None})
    path.write_text(json.dumps({
        "workload_pid": workload_pid, "mobiperf_pid": os.getpid(),
        "mobiperf_comm": Path("/proc/self/comm").read_text().strip(), "fuse_daemons": daemons,
        "device_private": not str(stack.spec).startswith("dir:"), "clock": clock}, indent=1) + "\n")


def _read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:
        return {"error": f"unreadable: {e}"}


def _workload_command(target: Target, command: list[str],
                      active: contextlib.ExitStack) -> tuple[list[str], dict[str, str]]:
    """The workload's argv and environment: the reference binaries on its PATH, pushed to the device when the
    target is remote (and removed afterwards). They go to the device's own work directory (/data/local/tmp/mobiperf
    on a phone), not to the stack's: a phone's shared storage is mounted noexec."""
    if target.is_local:
        return list(command), {"PATH": f"{reference_bin_dir()}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
    wanted = _reference_programs(command)
    if not wanted:
        return list(command), {}
    bindir = f"{target.scratch_dir()}/bin-{os.getpid()}-{time.monotonic_ns() % 10**8}"
    remote = active.enter_context(push_reference_binaries(target.transport, wanted, target.abi, bindir,
                                                          android=target.is_android))
    first = remote.get(Path(command[0]).name, command[0])
    path = target.android.get("path") or "/system/bin:/usr/bin:/bin"
    return [first, *command[1:]], {"PATH": f"{bindir}:{path}"}


def _reference_programs(command: list[str]) -> list[str]:
    """The reference binaries a workload runs: its program, or programs named in its `sh -c` script (a sweep's
    `sh -c 'mobibench ... && sync FILE'`)."""
    words = [Path(command[0]).name]
    if len(command) > 2 and Path(command[0]).name == "sh" and command[1] == "-c":
        try:
            words += shlex.split(command[2])
        except ValueError:
            pass
    return sorted({w for w in words if "/" not in w and w and (reference_bin_dir() / w).is_file()})


def _wait(proc, timeout_s: float | None, raw: Path) -> int:
    """The workload's exit status. It is stopped early when the time is up, and when the run directory's file
    system fills up: the traces can no longer be written, and the run would only go on for nothing."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    next_check = time.monotonic()
    while True:
        raise_if_stopping()   # a stop signal that landed where Python drops exceptions (mobiperf.core.signals)
        code = proc.poll()
        if code is not None:
            return code
        if deadline is not None and time.monotonic() > deadline:
            proc.kill()
            raise TargetError(f"the workload did not finish within {timeout_s:g} s and was killed")
        if time.monotonic() > next_check:
            next_check = time.monotonic() + 0.5
            if storage_full(raw):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(raw))
        time.sleep(0.02)
