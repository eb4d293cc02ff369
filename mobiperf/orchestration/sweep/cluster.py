"""A sweep on a Dask cluster: every unit (cell x repetition) a task that needs its cell's target as a resource.

A worker declares the targets it reaches as Dask worker resources: `dask worker tcp://SCHED:8786 --resources
"adb:SERIAL1=1,adb:SERIAL2=1"` for a host with two phones, `local=1` for a host that runs emulated stacks. A
unit's task asks for {target: 1} (the sweep parameter `target`, default local), so Dask runs it only on a worker
offering that target, and one unit per target at a time, since the worker has one of it. The task runs the child
`mobiperf run --request` a sweep on one host runs (plan.unit_child; runner's supervision: its own session, SIGINT
when the
worker dies) into SWEEP/runs/<cell>-r<rep>-a<attempt>, reads its metrics there (metrics.unit_metrics), and the
client writes the manifest.

The manifest means what it means on one host: a unit is `running`, with its worker and run directory, from the
moment its task starts (the task says so on a Dask event topic), then done or failed. When a worker dies, Dask
runs its unit again on a worker offering the same target (up to distributed's allowed-failures); the new attempt
gets a new run directory and the dead one's is left, labelled incomplete. Ctrl-C on the client asks the running
tasks to stop their child (a Dask Event) and leaves unfinished units pending: resuming the sweep, with or
without --cluster, runs them again.

Limits: the sweep directory must be the same path on every worker (a shared filesystem); a unit whose target no
connected worker offers is not sent and stays pending, with the reason; the filesystems a cell may use are
checked on the client when the sweep is created, and again on the worker when its unit runs.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from mobiperf.orchestration.cluster import worker_name
from mobiperf.orchestration.sweep.manifest import SweepDefinition, SweepDir, lock_sweep
from mobiperf.orchestration.sweep.metrics import manifest_figures, unit_outcome
from mobiperf.orchestration.sweep.params import DEFAULTS
from mobiperf.orchestration.sweep.plan import plan_cell, unit_child
from mobiperf.orchestration.sweep.runner import Progress, die_with_parent, stop_child

STOP_POLL_S = 1.0


def claim_attempt(runs: Path, cell: str, rep: int, at_least: int) -> int:
    """The next attempt number of a unit, claimed by creating its log file exclusively, so that a unit run again
    after its worker died never reuses the run directory of the attempt that died."""
    pattern = re.compile(rf"^{re.escape(cell)}-r{rep}-a(\d+)(?:\.log)?$")
    taken = [int(m.group(1)) for p in runs.iterdir() if (m := pattern.match(p.name))]
    attempt = max([at_least - 1, *taken]) + 1
    while True:
        try:
            (runs / f"{cell}-r{rep}-a{attempt}.log").open("x").close()
            return attempt
        except FileExistsError:
            attempt += 1


def run_unit_task(sweep_path: str, cell: str, rep: int, params: dict[str, str], at_least: int, timeout_s: int,
                  python: str, topic: str, stop_name: str) -> dict[str, Any]:
    """One task, on the worker: run one unit as a child `mobiperf run` and read its figures. Announces its start
    on `topic`; stops the child when the Event `stop_name` is set. Never raises for a failed unit."""
    from distributed import Event, get_worker

    plan = plan_cell(params)
    out: dict[str, Any] = {"cell": cell, "rep": rep, "worker": worker_name(), "metrics": {}, "notes": [],
                           "error": None, "status": "failed", "attempt": at_least, "run": None}
    if plan.skip:
        return {**out, "error": f"cannot run on worker {out['worker']}: {plan.skip}"}
    runs = Path(sweep_path) / "runs"
    runs.mkdir(exist_ok=True)
    attempt = claim_attempt(runs, cell, rep, at_least)
    name = f"{cell}-r{rep}-a{attempt}"
    run_path, log = runs / name, runs / f"{name}.log"
    argv = unit_child(plan, run_path, timeout_s, python)
    out.update(attempt=attempt, run=f"runs/{name}", argv=argv)
    get_worker().log_event(topic, {"cell": cell, "rep": rep, "attempt": attempt, "run": out["run"],
                                   "worker": out["worker"], "argv": argv})
    started = time.time()
    stop = Event(stop_name)
    with open(log, "wb") as f:
        child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT,
                                 start_new_session=True, preexec_fn=die_with_parent())
        code = _wait_child(child, stop, started + timeout_s + 300)
    out["elapsed_s"] = round(time.time() - started, 3)
    if code is None:
        return {**out, "status": "pending", "error": "interrupted; runs again when the sweep is resumed"}
    out["status"], metrics, out["notes"], out["error"] = unit_outcome(run_path, plan, log, code)
    out["metrics"], out["units"] = manifest_figures(metrics)   # plain data: the result crosses to the client
    return out


def _wait_child(child: subprocess.Popen, stop, deadline: float) -> int | None:
    """The child's exit status; None when the sweep was stopped (the child got SIGINT, then SIGKILL if it hung)."""
    while True:
        try:
            return child.wait(timeout=STOP_POLL_S)
        except subprocess.TimeoutExpired:
            pass
        if time.time() > deadline or stop.is_set():
            stop_child(child)
            return None if stop.is_set() else child.wait()


# --- the client -----------------------------------------------------------------------------------------------

def offered_targets(client: Any) -> dict[str, list[str]]:
    """{resource name: [worker names]} of the workers connected now."""
    out: dict[str, list[str]] = {}
    for addr, info in client.scheduler_info(n_workers=-1)["workers"].items():
        for resource, amount in (info.get("resources") or {}).items():
            if amount >= 1:
                out.setdefault(resource, []).append(str(info.get("name", addr)))
    return out


def run_sweep_on_cluster(path: Path, definition: SweepDefinition | None, client: Any, *,
                         retry_failed: bool = False, progress: Progress | None = None,
                         python: str = sys.executable, grow: bool = False) -> dict:
    """Run (or continue) the sweep in `path` with every unit a task on the client's cluster; returns the
    manifest. KeyboardInterrupt stops the running units (their children get SIGINT) and propagates."""
    from distributed import Event, as_completed

    sdir = SweepDir(path)
    data = sdir.create_or_resume(definition, grow=grow)
    lock = lock_sweep(sdir)
    progress = progress or Progress()
    cells = {c["id"]: c for c in data["cells"]}
    todo = [u for u in data["units"] if u["status"] in ("pending", "running")
            or (retry_failed and u["status"] == "failed")]
    token = uuid.uuid4().hex[:12]
    topic, stop = f"mobiperf-sweep-{token}", Event(f"mobiperf-sweep-stop-{token}", client=client)
    state = _ClientState(sdir, data, progress, len(todo))
    client.subscribe_topic(topic, state.on_started)
    futures = {}
    try:
        offered = offered_targets(client)
        for unit in todo:
            params = cells[unit["cell"]]["params"]
            target = params.get("target", DEFAULTS["target"])
            if target not in offered:
                state.not_offered(unit, target, offered)
                continue
            future = client.submit(
                run_unit_task, str(sdir.path.resolve()), unit["cell"], unit["rep"], params, unit["attempts"] + 1,
                int(data.get("timeout_s", 1800)), python, topic, stop.name, resources={target: 1}, pure=False,
                key=f"mobiperf-sweep-{unit['cell']}-r{unit['rep']}-{token}")
            futures[future] = unit
        for future in as_completed(list(futures)):
            state.finished(futures[future], future)
    except BaseException:
        stop.set()
        client.cancel(list(futures))
        state.interrupted(futures.values())
        raise
    finally:
        client.unsubscribe_topic(topic)
        lock.close()
    with state.lock:
        data["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
        sdir.write(data)
    return data


class _ClientState:
    """The manifest on the client: task starts arrive on the event thread, results on the main thread."""

    def __init__(self, sdir: SweepDir, data: dict, progress: Progress, total: int):
        self.sdir, self.data, self.progress, self.total = sdir, data, progress, total
        self.lock = threading.Lock()
        self.started = self.done = 0

    def _unit(self, cell: str, rep: int) -> dict:
        return next(u for u in self.data["units"] if u["cell"] == cell and u["rep"] == rep)

    def on_started(self, event: tuple[float, dict]) -> None:
        msg = event[1]
        with self.lock:
            unit = self._unit(msg["cell"], msg["rep"])
            if unit["status"] in ("done", "failed") and unit.get("attempts", 0) >= msg["attempt"]:
                return  # a late event of an attempt already recorded
            unit.update(status="running", attempts=max(unit["attempts"], msg["attempt"]), run=msg["run"],
                        worker=msg["worker"], argv=msg["argv"], error=None, notes=[], pid=None, started=time.time())
            self.sdir.write(self.data)
            self.started += 1
            n = self.started
        self.progress.unit_started(unit, n, self.total)

    def finished(self, unit: dict, future: Any) -> None:
        try:
            result = future.result()
        except Exception as e:  # noqa: BLE001 - Dask gave up on the task (KilledWorker after repeated deaths)
            result = {"status": "failed", "error": f"{type(e).__name__}: {e}", "metrics": {}, "notes": [],
                      "attempt": unit["attempts"], "run": unit.get("run"), "worker": unit.get("worker")}
        with self.lock:
            unit.pop("started", None)
            unit.update(status=result["status"], error=result["error"], metrics=result["metrics"],
                        units=result.get("units", {}),
                        notes=result["notes"], run=result["run"], worker=result["worker"], pid=None,
                        attempts=max(unit["attempts"], result["attempt"]))
            if "elapsed_s" in result:
                unit["elapsed_s"] = result["elapsed_s"]
            self.sdir.write(self.data)
            self.done += 1
            n = self.done
        self.progress.unit_finished(unit, n, self.total)

    def not_offered(self, unit: dict, target: str, offered: dict[str, list[str]]) -> None:
        what = ", ".join(f"{r} ({', '.join(w)})" for r, w in sorted(offered.items())) or "nothing"
        with self.lock:
            unit.update(status="pending", error=f"no worker offers target {target} as a resource; workers "
                        f"offer: {what} (start one with `dask worker --resources \"{target}=1\"`)")
            self.sdir.write(self.data)

    def interrupted(self, units) -> None:
        with self.lock:
            for unit in units:
                if unit["status"] in ("pending", "running"):
                    unit.update(status="pending", pid=None,
                                error="interrupted; runs again when the sweep is resumed")
            self.sdir.write(self.data)
