"""`mobiperf sweep --cluster`: units routed by Dask worker resources to the worker that reaches their target.

A real `dask scheduler` and `dask worker`s run as subprocesses on 127.0.0.1; the workers offer fake adb targets
as resources, the way a host with phones attached would (`--resources "adb:SERIAL1=1,adb:SERIAL2=1"`). The one
fake is the cell runner: the sweep's real machinery (sweep.cluster.run_unit_task: attempt claim, child process in
its own session with SIGINT on the worker's death, unit_metrics) starts `FAKE -m mobiperf run ... -t TARGET`,
where FAKE stands in for the Python interpreter and records which process ran it, for which target, and when.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("distributed")

from mobiperf.orchestration import sweep  # noqa: E402
from mobiperf.orchestration.sweep.cluster import run_sweep_on_cluster  # noqa: E402
from store_fixtures import DaskProcesses  # noqa: E402

FAKE_RUN = '''#!{python}
"""Stands in for `python -m mobiperf run`: a run directory whose workload took a while, and a record of it."""
import json, os, signal, sys, time
args = sys.argv[1:]
assert args[:3] == ["-m", "mobiperf", "run"], args
opts = args[3:]   # the sweep hands its child a request file: -t, --request FILE, -o
request = json.load(open(opts[opts.index("--request") + 1]))
out = opts[opts.index("-o") + 1]
target = opts[opts.index("-t") + 1] if "-t" in opts else "local"
sweep_dir = os.path.dirname(os.path.dirname(out))
config = json.load(open(os.path.join(sweep_dir, "fake.json")))

def record(**kw):
    with open(os.path.join(sweep_dir, "fake-runs.jsonl"), "a") as f:
        f.write(json.dumps(dict(run=os.path.basename(out), target=target, pid=os.getpid(), ppid=os.getppid(),
                                t=time.time(), **kw)) + "\\n")

def meta(status, reps):
    tmp = os.path.join(out, ".run.json.tmp")
    with open(tmp, "w") as f:
        json.dump(dict(format="mobiperf-run", version=1, status=status, id=os.path.basename(out),
                       target=dict(target=target), stack="ext4", command=request["command"],
                       repetitions=reps), f)
    os.replace(tmp, os.path.join(out, "run.json"))

def interrupted(signum, frame):
    record(event="interrupted")
    sys.exit(130)

signal.signal(signal.SIGINT, interrupted)
os.makedirs(os.path.join(out, "raw", "rep0"))
meta("incomplete", [])
record(event="start")
t0 = time.monotonic_ns()
time.sleep(config["sleep"].get(target, config["default_sleep"]))
elapsed = time.monotonic_ns() - t0
meta("complete", [dict(index=0, exit_code=0, workload_ns=elapsed, counters=dict())])
record(event="end", workload_ns=elapsed)
'''


@pytest.fixture
def dask_processes(tmp_path):
    procs = DaskProcesses(tmp_path)
    try:
        yield procs
    finally:
        procs.stop()


@pytest.fixture
def fake_run(tmp_path) -> str:
    path = tmp_path / "fake-python"
    path.write_text(FAKE_RUN.format(python=sys.executable))
    path.chmod(0o755)
    return str(path)


def _sweep(out: Path, targets: list[str], sleeps: dict[str, float], repeat: int = 2, default_sleep: float = 0.3):
    out.mkdir()
    (out / "fake.json").write_text(json.dumps({"sleep": sleeps, "default_sleep": default_sleep}))
    cells = sweep.grid_cells(sweep.parse_grid([f"target={','.join(targets)}", "sync=fsync,fdatasync",
                                               "file_size=4m", "record=4k", "access=rand-write"]))
    return sweep.SweepDefinition(cells=cells, repeat=repeat, seed=1, timeout_s=120, name=out.name)


def _records(out: Path) -> list[dict]:
    path = out / "fake-runs.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _intervals(records: list[dict]) -> dict[str, list[tuple[float, float, str]]]:
    """Per target, the (start, end, run) of every fake run that ended."""
    starts = {r["run"]: r["t"] for r in records if r["event"] == "start"}
    out: dict[str, list] = {}
    for r in records:
        if r["event"] == "end":
            out.setdefault(r["target"], []).append((starts[r["run"]], r["t"], r["run"]))
    return {t: sorted(v) for t, v in out.items()}


def _target_of(data: dict, unit: dict) -> str:
    return next(c for c in data["cells"] if c["id"] == unit["cell"])["params"]["target"]


def test_each_unit_runs_on_the_worker_offering_its_target(tmp_path, dask_processes, fake_run):
    from distributed import Client

    address = dask_processes.start_scheduler()
    two_phones = dask_processes.start_worker("host-a", "adb:SERIAL1=1,adb:SERIAL2=1", nthreads=2)
    one_phone = dask_processes.start_worker("host-b", "adb:SERIAL3=1")
    out = tmp_path / "sw"
    definition = _sweep(out, ["adb:SERIAL1", "adb:SERIAL2", "adb:SERIAL3"], {})
    with Client(address, timeout=30) as client:
        data = run_sweep_on_cluster(out, definition, client, python=fake_run)
    assert len(data["units"]) == 12 and {u["status"] for u in data["units"]} == {"done"}, data["units"]
    host_of = {"adb:SERIAL1": "host-a", "adb:SERIAL2": "host-a", "adb:SERIAL3": "host-b"}
    pid_of = {"host-a": two_phones.pid, "host-b": one_phone.pid}
    records = {r["run"]: r for r in _records(out) if r["event"] == "end"}
    for unit in data["units"]:
        target = _target_of(data, unit)
        assert unit["worker"] == host_of[target] and unit["attempts"] == 1
        run = records[Path(unit["run"]).name]
        assert run["target"] == target and run["ppid"] == pid_of[host_of[target]]   # the worker process ran it
        assert json.loads((out / unit["run"] / "run.json").read_text())["status"] == "complete"
        assert unit["metrics"]["run.workload_time"] == pytest.approx(run["workload_ns"])
        assert unit["metrics"]["run.throughput"] == pytest.approx(4 * 2**20 / (run["workload_ns"] / 1e9))
    for target, spans in _intervals(_records(out)).items():   # one unit per phone at a time
        assert len(spans) == 4
        for (s0, e0, r0), (s1, e1, r1) in zip(spans, spans[1:]):
            assert s1 >= e0, f"{target}: {r1} started before {r0} ended"
    assert data.get("finished")
    # The manifest stays resumable: nothing is left to do, and resuming on one host changes nothing.
    again = sweep.run_sweep(out, None, python=fake_run)
    assert [u["run"] for u in again["units"]] == [u["run"] for u in data["units"]]


def test_a_killed_worker_has_its_unit_run_again_and_the_manifest_stays_right(tmp_path, dask_processes, fake_run):
    from distributed import Client

    address = dask_processes.start_scheduler()
    dask_processes.start_worker("phone1-host", "adb:SERIAL1=1")
    dask_processes.start_worker("phone2-host", "adb:SERIAL2=1")
    out = tmp_path / "sw"
    definition = _sweep(out, ["adb:SERIAL1", "adb:SERIAL2"], {"adb:SERIAL1": 3.0}, repeat=1)
    result: dict = {}

    def run() -> None:
        with Client(address, timeout=30) as client:
            try:
                result["data"] = run_sweep_on_cluster(out, definition, client, python=fake_run)
            except BaseException as e:  # noqa: BLE001 - handed to the test thread
                result["error"] = e

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not any(r["event"] == "start" and r["target"] == "adb:SERIAL1" for r in _records(out)):
        assert time.monotonic() < deadline, "no unit of adb:SERIAL1 started"
        time.sleep(0.1)
    victim = next(r for r in _records(out) if r["event"] == "start" and r["target"] == "adb:SERIAL1")
    dask_processes.kill("phone1-host")
    while not any(r["event"] == "interrupted" and r["run"] == victim["run"] for r in _records(out)):
        assert time.monotonic() < deadline, "the dead worker's child was not interrupted"
        time.sleep(0.1)
    dask_processes.start_worker("phone1-host-again", "adb:SERIAL1=1")   # the phone, on a new worker
    thread.join(timeout=180)
    assert not thread.is_alive() and "error" not in result, result
    data = result["data"]
    assert {u["status"] for u in data["units"]} == {"done"}, data["units"]
    cell, rep = victim["run"].rsplit("-a", 1)[0].split("-r")
    unit = next(u for u in data["units"] if u["cell"] == cell and u["rep"] == int(rep))
    assert unit["attempts"] == 2 and unit["run"] == f"runs/{cell}-r{rep}-a2"
    assert unit["worker"] == "phone1-host-again"
    assert json.loads((out / "runs" / victim["run"] / "run.json").read_text())["status"] == "incomplete"
    assert json.loads((out / unit["run"] / "run.json").read_text())["status"] == "complete"
    for other in data["units"]:
        target = _target_of(data, other)
        assert other["worker"] in ({"phone1-host", "phone1-host-again"} if target == "adb:SERIAL1"
                                   else {"phone2-host"})
        if other is not unit:
            assert other["attempts"] == 1 or other["worker"] == "phone1-host-again"
    on_disk = json.loads((out / "sweep.json").read_text())
    assert [(u["status"], u["attempts"], u["run"]) for u in on_disk["units"]] == \
        [(u["status"], u["attempts"], u["run"]) for u in data["units"]]


def test_a_target_no_worker_offers_stays_pending_with_the_reason(tmp_path, dask_processes, fake_run):
    from distributed import Client

    address = dask_processes.start_scheduler()
    dask_processes.start_worker("host-a", "adb:SERIAL1=1")
    out = tmp_path / "sw"
    definition = _sweep(out, ["adb:SERIAL1", "adb:GONE"], {}, repeat=1, default_sleep=0.1)
    with Client(address, timeout=30) as client:
        data = run_sweep_on_cluster(out, definition, client, python=fake_run)
    by_target = {}
    for u in data["units"]:
        by_target.setdefault(_target_of(data, u), []).append(u)
    assert {u["status"] for u in by_target["adb:SERIAL1"]} == {"done"}
    for u in by_target["adb:GONE"]:
        assert u["status"] == "pending" and u["attempts"] == 0
        assert u["error"].startswith("no worker offers target adb:GONE as a resource; workers offer: "
                                     "adb:SERIAL1 (host-a)")


def test_target_parameter_reaches_the_child_run():
    plan = sweep.plan_cell(sweep.check_params({"target": "adb:XY12"}))
    argv = sweep.unit_argv(plan, Path("/tmp/r"), 60, "py")
    assert argv[argv.index("-t") + 1] == "adb:XY12"
    assert "-t" not in sweep.unit_argv(sweep.plan_cell({}), Path("/tmp/r"), 60, "py")
    with pytest.raises(Exception, match="local, adb or adb:SERIAL"):
        sweep.check_params({"target": "ssh:box"})
