"""A real sweep, interrupted for real: SIGINT and SIGKILL to the `mobiperf sweep` process, then the same command
again continues where it stopped; a failing cell (a file larger than its partition) is recorded and the sweep goes
on. Every unit is a real `mobiperf run` (loop device, ext4, tracefs instance); small files keep it quick."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import needs_root

REPO = Path(__file__).resolve().parents[2]
pytestmark = [needs_root]


def _sweep_argv(out: Path, *params: str) -> list[str]:
    return [sys.executable, "-m", "mobiperf", "sweep", "-o", str(out), "-n", "1", "--seed", "3",
            "-p", "image_size=128m", *(x for p in params for x in ("-p", p))]


def _manifest(out: Path) -> dict:
    try:
        return json.loads((out / "sweep.json").read_text())
    except (FileNotFoundError, ValueError):
        return {}


def _wait_until(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")


def _start(argv: list[str], log: Path) -> subprocess.Popen:
    # SIGINT back to its default: a test run started in the background (`make test &`, nohup) inherits it
    # ignored, and Python then installs no Ctrl-C handler, so the sweep would never see the SIGINT we send.
    return subprocess.Popen(argv, cwd=REPO, stdout=open(log, "wb"), stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _kill_all(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=30)


def _wait_orphans_gone(out: Path, timeout: float = 120) -> None:
    """The children of a killed sweep take their stacks down on their own (PR_SET_PDEATHSIG)."""
    def gone() -> bool:
        for unit in _manifest(out).get("units", []):
            pid = unit.get("pid")
            if pid and os.path.exists(f"/proc/{pid}"):
                return False
        return True
    _wait_until(gone, timeout, "the interrupted unit's `mobiperf run` to tear its stack down")


@pytest.mark.parametrize("how", ["SIGINT", "SIGKILL"])
def test_killed_sweep_continues_where_it_stopped(tmp_path, how, clean_machine):
    out = tmp_path / "sweep"
    argv = _sweep_argv(out, "file_size=2m,4m,6m")
    proc = _start(argv, tmp_path / "first.log")
    try:
        # kill while the second unit runs: one unit done, one in flight, one not started
        _wait_until(lambda: sum(u["status"] == "done" for u in _manifest(out).get("units", [])) == 1
                    and any(u["status"] == "running" for u in _manifest(out)["units"]), 180,
                    "one unit done and the next running")
        time.sleep(0.5)
        os.kill(proc.pid, getattr(signal, how))
        code = proc.wait(timeout=120)
    finally:
        _kill_all(proc)
    _wait_orphans_gone(out)
    first = _manifest(out)
    by_status = {}
    for u in first["units"]:
        by_status.setdefault(u["status"], []).append(u)
    assert len(by_status["done"]) == 1
    done_before = by_status["done"][0]
    if how == "SIGINT":
        assert code == 130
        assert "continues where it stopped" in (tmp_path / "first.log").read_text()
        assert len(by_status["pending"]) == 2
        interrupted = [u for u in by_status["pending"] if u["attempts"] == 1]
        assert len(interrupted) == 1 and "interrupted" in interrupted[0]["error"]
    else:
        assert code == -signal.SIGKILL
        assert len(by_status["running"]) == 1 and len(by_status["pending"]) == 1

    resumed = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=300)
    print(resumed.stdout)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    final = _manifest(out)
    assert [u["status"] for u in final["units"]] == ["done"] * 3
    # the unit done before the interruption was not run again; the interrupted one got a second attempt
    again = next(u for u in final["units"] if u["cell"] == done_before["cell"])
    assert again["attempts"] == 1 and again["run"] == done_before["run"]
    assert sorted(u["attempts"] for u in final["units"]) == [1, 1, 2]
    assert "[1/2]" in resumed.stderr and "[3/" not in resumed.stderr
    for u in final["units"]:
        assert json.loads((out / u["run"] / "run.json").read_text())["repetitions"][0]["exit_code"] == 0
        assert u["metrics"]["run.throughput"] > 0
    lines = [line.split() for line in resumed.stdout.splitlines() if line.startswith(("2m", "4m", "6m"))]
    assert [row[0] for row in lines] == ["2m", "4m", "6m"] and all(row[1] == "done" for row in lines)
    assert (out / "matrix.html").stat().st_size > 100_000


def test_a_failed_cell_is_recorded_and_the_sweep_goes_on(tmp_path, clean_machine):
    out = tmp_path / "sweep"
    # 200 MiB does not fit a 128 MiB partition: mobibench fails with ENOSPC
    done = subprocess.run(_sweep_argv(out, "file_size=200m,4m"), cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    print(done.stdout)
    assert done.returncode == 0, done.stderr[-2000:]
    units = {u["cell"]: u for u in _manifest(out)["units"]}
    assert units["c000"]["status"] == "failed"
    assert units["c000"]["error"].startswith("the workload failed (exit status ")
    assert units["c001"]["status"] == "done" and units["c001"]["metrics"]["run.throughput"] > 0
    assert "units: 1 done, 1 failed" in done.stdout or "units: 1 failed, 1 done" in done.stdout
    assert "failed: the workload failed (exit status" in done.stdout
    # resuming does not run the failed cell again unless asked
    again = subprocess.run(_sweep_argv(out, "file_size=200m,4m"), cwd=REPO, capture_output=True, text=True,
                           timeout=120)
    assert again.returncode == 0 and "[1/" not in again.stderr
    assert _manifest(out)["units"][0]["attempts"] == 1 or _manifest(out)["units"][1]["attempts"] == 1
