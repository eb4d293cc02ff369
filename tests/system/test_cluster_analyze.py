"""Re-analysing a store of runs on Dask: a real distributed.LocalCluster (2 worker processes) and a real
`dask scheduler` with two `dask worker`s started as subprocesses; every run's results must equal a serial
analysis of the same inputs (tests/support/store_fixtures.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("distributed")

from mobiperf.orchestration.cluster import analyze_store, open_client, parse_cluster  # noqa: E402
from mobiperf.core.errors import MobiperfError, UsageError  # noqa: E402
from mobiperf.core.store import Store, update_index  # noqa: E402
from store_fixtures import (DaskProcesses, assert_same_analysis, free_port, make_store,  # noqa: E402
                                  serial_references)

N_RUNS = 200
# The default run analyses 40 runs on each kind of cluster (~10 s each); the 200 of the issue take ~40 s each
# on this shared 2-core machine and run with -m slow.
SIZES = [40, pytest.param(N_RUNS, marks=pytest.mark.slow)]


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    root = tmp_path_factory.mktemp("refs")
    from store_fixtures import run_facts

    return serial_references(root, [run_facts(i) for i in range(N_RUNS)])


@pytest.fixture
def dask_processes(tmp_path):
    procs = DaskProcesses(tmp_path)
    try:
        yield procs
    finally:
        procs.stop()


def _check_store(root, runs, outcomes, references):
    assert [o["run_id"] for o in outcomes] == [r["run_id"] for r in runs]
    assert [o for o in outcomes if o["error"]] == []
    for run in runs:
        assert_same_analysis(root / run["run_id"], references[(run["fixture"], run["scope"])])
    index = update_index(Store.open(root)).index
    assert index.height == len(runs) and index["error"].null_count() == len(runs)
    assert (index["status"] == "complete").all()


@pytest.mark.parametrize("n_runs", SIZES)
def test_local_cluster_analysis_equals_serial_analysis(tmp_path, references, n_runs):
    runs = make_store(tmp_path / "store", n_runs)
    with open_client(parse_cluster("local:2")) as client:
        workers = client.scheduler_info()["workers"]
        assert len(workers) == 2 and {w["nthreads"] for w in workers.values()} == {1}
        pids = set(client.run(os.getpid).values())
        outcomes = analyze_store(tmp_path / "store", client)
    assert len(pids) == 2 and os.getpid() not in pids           # processes, not threads of this one
    _check_store(tmp_path / "store", runs, outcomes, references)
    by_worker = {}
    for o in outcomes:
        by_worker[o["worker"]] = by_worker.get(o["worker"], 0) + 1
    assert len(by_worker) == 2 and min(by_worker.values()) > n_runs // 10, by_worker  # both did real work


@pytest.mark.parametrize("n_runs", SIZES)
def test_scheduler_subprocess_analysis_equals_serial_analysis(tmp_path, references, dask_processes, n_runs):
    runs = make_store(tmp_path / "store", n_runs)
    address = dask_processes.start_scheduler()
    dask_processes.start_worker("w1")
    dask_processes.start_worker("w2")
    out = subprocess.run([sys.executable, "-m", "mobiperf", "analyze", str(tmp_path / "store"), "--cluster", address,
                          "--format", "json"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    outcomes = json.loads(out.stdout)
    _check_store(tmp_path / "store", runs, outcomes, references)
    assert {o["worker"] for o in outcomes} == {"w1", "w2"}


def test_a_damaged_run_fails_alone(tmp_path, references):
    runs = make_store(tmp_path / "store", 6)
    trace = tmp_path / "store" / "run-002" / "raw" / "rep0" / "ftrace.txt"
    trace.unlink()   # a hard link to the golden fixture's: replaced, not written through
    trace.write_text("this is not a trace\n")
    (tmp_path / "store" / "run-004" / "run.json").write_text("{ not json")
    outcomes = {o["run_id"]: o for o in analyze_store(tmp_path / "store")}
    assert outcomes["run-004"]["error"].startswith("run-004/run.json is corrupt") or \
        "run.json is corrupt" in outcomes["run-004"]["error"]
    assert outcomes["run-002"]["error"]                      # no events: said, not raised
    for run in runs:
        if run["run_id"] not in ("run-002", "run-004"):
            assert outcomes[run["run_id"]]["error"] is None
            assert_same_analysis(tmp_path / "store" / run["run_id"], references[(run["fixture"], run["scope"])])
    index = update_index(Store.open(tmp_path / "store")).index
    errors = dict(zip(index["run_id"], index["error"]))
    assert "corrupt" in errors["run-004"] and errors["run-000"] is None


def test_unreachable_scheduler_is_one_clear_line(tmp_path):
    make_store(tmp_path / "store", 1)
    port = free_port()   # nothing listens there
    with pytest.raises(MobiperfError) as e:
        with open_client(parse_cluster(f"127.0.0.1:{port}"), connect_timeout_s=2):
            pass
    assert str(e.value) == (f"cannot reach the Dask scheduler at tcp://127.0.0.1:{port}: no answer within 2 s; "
                            "start it with `dask scheduler`, or use --cluster local")
    out = subprocess.run([sys.executable, "-m", "mobiperf", "analyze", str(tmp_path / "store"), "--cluster",
                          f"tcp://127.0.0.1:{port}"], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "MOBIPERF_CLUSTER_TIMEOUT": "2"})
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == [f"mobiperf: error: cannot reach the Dask scheduler at "
                                               f"tcp://127.0.0.1:{port}: no answer within 2 s; start it with "
                                               "`dask scheduler`, or use --cluster local"]
    assert not (tmp_path / "store" / "index.parquet").exists()   # nothing done, nothing left behind


@pytest.mark.parametrize("text,want", [("local:3", (None, 3)), ("local[2]", (None, 2)),
                                       ("10.0.0.5:8786", ("tcp://10.0.0.5:8786", None)),
                                       ("tcp://sched:8786", ("tcp://sched:8786", None))])
def test_parse_cluster(text, want):
    spec = parse_cluster(text)
    assert (spec.address, spec.workers) == want


def test_parse_cluster_rejects_nonsense():
    with pytest.raises(UsageError, match="local, local:N"):
        parse_cluster("yarn")
