"""Running a sweep on this host: every pending unit (cell x repetition) in the manifest's seeded order, each as a
child `mobiperf run` in a session of its own, so a crash of one stack cannot take the sweep down.

The child gets SIGINT when the sweep dies (PR_SET_PDEATHSIG), so even a SIGKILLed sweep leaves no mounted stack
behind: the child tears its stack down and exits. Ctrl-C or SIGTERM stops the running child the same way, marks
its unit pending again and propagates; re-running the sweep on the same directory waits for a child a killed sweep
left (its orphan), skips the units that are done and runs the others (a unit that was running when the sweep died
gets a new attempt and a new run directory). A failed unit is recorded with its error and the sweep goes on;
`retry_failed` runs failed units again.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from mobiperf.orchestration.sweep.manifest import SweepDefinition, SweepDir, lock_sweep
from mobiperf.orchestration.sweep.metrics import manifest_figures, unit_outcome
from mobiperf.orchestration.sweep.plan import plan_cell, unit_child
from mobiperf.stack.cpu_share import remove_stale_cgroups

CHILD_STOP_TIMEOUT_S = 90.0      # a child tearing its stack down after SIGINT (FUSE daemons flush, devmodel exits)


@dataclass
class Progress:
    """Callbacks for the CLI; the defaults say nothing."""

    unit_started: Callable[[dict, int, int], None] = lambda unit, i, n: None
    unit_finished: Callable[[dict, int, int], None] = lambda unit, i, n: None


def run_sweep(path: Path, definition: SweepDefinition | None = None, *, retry_failed: bool = False,
              progress: Progress | None = None, python: str = sys.executable, grow: bool = False) -> dict:
    """Run (or continue) the sweep in `path` until every unit is done, failed or skipped; returns the manifest.

    KeyboardInterrupt (Ctrl-C, SIGTERM) stops the running child cleanly, marks its unit pending again and
    propagates; the next call continues from there."""
    sweep = SweepDir(path)
    data = sweep.create_or_resume(definition, grow=grow)
    lock = lock_sweep(sweep)
    progress = progress or Progress()
    cells = {c["id"]: c for c in data["cells"]}
    _wait_for_orphans(data)
    remove_stale_cgroups()  # CPU shares of a `mobiperf run` that was SIGKILLed
    todo = [u for u in data["units"] if u["status"] in ("pending", "running")
            or (retry_failed and u["status"] == "failed")]
    restore = _sigterm_as_interrupt()
    try:
        for i, unit in enumerate(todo, 1):
            progress.unit_started(unit, i, len(todo))
            _run_unit(sweep, data, cells[unit["cell"]], unit, python)
            progress.unit_finished(unit, i, len(todo))
    finally:
        restore()
        lock.close()
    data["finished"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    sweep.write(data)
    return data


def _run_unit(sweep: SweepDir, data: dict, cell: dict, unit: dict, python: str) -> None:
    plan = plan_cell(cell["params"])
    unit["attempts"] += 1
    name = f"{cell['id']}-r{unit['rep']}-a{unit['attempts']}"
    run_path = sweep.path / "runs" / name
    run_path.parent.mkdir(exist_ok=True)
    argv = unit_child(plan, run_path, int(data.get("timeout_s", 1800)), python)
    unit.update(status="running", run=str(run_path.relative_to(sweep.path)), error=None, notes=[],
                started=time.time(), argv=argv)
    log = sweep.path / "runs" / f"{name}.log"
    with open(log, "wb") as out:
        child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                 start_new_session=True, preexec_fn=die_with_parent())
        unit["pid"] = child.pid
        sweep.write(data)
        try:
            code = child.wait(timeout=data.get("timeout_s", 1800) + 300)
        except BaseException:
            stop_child(child)
            unit.update(status="pending", pid=None, error="interrupted; runs again when the sweep is resumed")
            sweep.write(data)
            raise
    unit["pid"] = None
    unit["elapsed_s"] = round(time.time() - unit.pop("started"), 3)
    status, metrics, notes, error = unit_outcome(run_path, plan, log, code)
    values, units = manifest_figures(metrics)
    unit.update(status=status, metrics=values, units=units, notes=notes, error=error)
    sweep.write(data)


def stop_child(child: subprocess.Popen) -> None:
    """SIGINT (the child's `mobiperf run` tears its stack down), then SIGKILL if it hangs."""
    if child.poll() is not None:
        return
    try:
        child.send_signal(signal.SIGINT)
        child.wait(timeout=CHILD_STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait(timeout=10)
    except KeyboardInterrupt:  # a second Ctrl-C: stop waiting, the child still got its SIGINT
        pass


def die_with_parent() -> Callable[[], None]:
    """preexec_fn: SIGINT when the sweep dies (even by SIGKILL), so the child's stack comes down."""
    parent = os.getpid()

    def setup() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGINT, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died before prctl took effect
            os.kill(os.getpid(), signal.SIGINT)
    return setup


def _wait_for_orphans(data: dict) -> None:
    """A unit left `running` by a killed sweep: its child got SIGINT and is taking its stack down; wait for it
    so the resumed sweep does not compete with it."""
    for unit in data["units"]:
        pid = unit.get("pid")
        if unit["status"] != "running" or not pid:
            continue
        deadline = time.monotonic() + CHILD_STOP_TIMEOUT_S
        while time.monotonic() < deadline and _is_our_child_run(pid, unit.get("run") or ""):
            time.sleep(0.2)
        unit["pid"] = None


def _is_our_child_run(pid: int, run: str) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False
    return "mobiperf" in cmdline and run.split("/")[-1] in cmdline


def _sigterm_as_interrupt() -> Callable[[], None]:
    """SIGTERM stops a sweep the way Ctrl-C does (the child is stopped cleanly, the manifest saved)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def handler(signum, frame):
        from mobiperf.core.signals import Stopped

        raise Stopped(signum)
    old = signal.signal(signal.SIGTERM, handler)
    return lambda: signal.signal(signal.SIGTERM, old)
