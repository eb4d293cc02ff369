"""`mobiperf run` stopped mid-run by SIGTERM, SIGHUP or SIGKILL, on real stacks with the whole phone model
(--scheduler bfq --dirty-limit 64M --cpu 50%: a loop device's scheduler and BDI knobs, a CPU cgroup, a FUSE daemon).

SIGTERM and SIGHUP take Ctrl-C's path: teardown, the run kept and marked incomplete, exit 128+signal. SIGKILL
skips all of that; the next `mobiperf run` finds the dead run's undo journal, says what it left and undoes it.
In every case the test then looks at the machine itself (tests/support/leftover_checks.py): no mount, loop device,
tracefs instance, cgroup, directory or process of the run, every sysfs value back to its old value, and the run
directory analysable.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import needs_fuse, needs_root
from leftover_checks import owned_pids, remaining, wait_for_journal, wait_until_gone

pytestmark = [needs_root, needs_fuse]
MOBIPERF = [sys.executable, "-m", "mobiperf"]
PHONE = ["--scheduler", "bfq", "--dirty-limit", "64M", "--cpu", "50%"]
# Buffered writes through FUSE and fsync: block requests reach the trace; then the workload waits to be stopped.
WORKLOAD = ["sh", "-c", "dd if=/dev/zero of=f bs=64k count=160 conv=fsync 2>/dev/null; sleep 120"]
EVERY_KIND = {"dir", "loop", "sysfs", "bdi", "cgroup", "mount", "tracefs_instance"}


def run_env(journals: Path) -> dict[str, str]:
    """A journal directory of the test's own: no other mobiperf on the machine undoes (or sees) its runs' leftovers
    before the test's own next run does."""
    return dict(os.environ, MOBIPERF_PROGRESS="0", MOBIPERF_JOURNAL_DIR=str(journals))


def start_run(out: Path, stack: str, journals: Path) -> subprocess.Popen:
    env = run_env(journals)
    # start_new_session: a stop signal reaches mobiperf alone, as from `timeout` or a closed terminal
    return subprocess.Popen([*MOBIPERF, "run", "--stack", stack, *PHONE, "--image-size", "256M", "--no-report",
                             "-o", str(out), "--", *WORKLOAD], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, start_new_session=True)


def wait_until_traced(out: Path, proc: subprocess.Popen, timeout: float = 120) -> None:
    trace = out / "raw" / "rep0" / "ftrace.txt"
    deadline = time.monotonic() + timeout
    while not (trace.exists() and b"block_rq_complete" in trace.read_bytes()):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.2)


def analyse(out: Path) -> dict:
    done = subprocess.run([*MOBIPERF, "analyze", str(out), "--format", "json"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    return json.loads(done.stdout)


@pytest.fixture
def stopped_run(tmp_path):
    """Yields a starter; every run it started is SIGKILLed and its leftovers undone if the test failed."""
    started: list[subprocess.Popen] = []

    def start(stack: str) -> tuple[subprocess.Popen, Path, dict, list[dict]]:
        out = tmp_path / f"run{len(started)}"
        proc = start_run(out, stack, tmp_path / "journals")
        started.append(proc)
        header, entries = wait_for_journal(proc.pid, kinds=EVERY_KIND, proc=proc, directory=tmp_path / "journals")
        wait_until_traced(out, proc)
        return proc, out, header, entries

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=60)
    subprocess.run([*MOBIPERF, "doctor", "--fix"], capture_output=True, timeout=300, env=run_env(tmp_path / "journals"))


@pytest.mark.parametrize("stack, name", [("ext4+fuse", "SIGTERM"), ("ext4+bfuse", "SIGHUP"),
                                         pytest.param("ext4+bfuse", "SIGTERM", marks=pytest.mark.slow),
                                         pytest.param("ext4+fuse", "SIGHUP", marks=pytest.mark.slow)])
def test_a_stop_signal_tears_down_and_keeps_the_run(stopped_run, tmp_path, stack, name):
    sig = signal.Signals[name]
    proc, out, header, entries = stopped_run(stack)
    loop = next(e["device"] for e in entries if e["kind"] == "loop")
    assert any(e["kind"] == "sysfs" and e["path"].endswith(f"{Path(loop).name}/queue/scheduler")
               and e["old"] == "none" for e in entries)   # the loop device was reset, then set to bfq
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=180)
    assert proc.returncode == 128 + sig, stderr
    assert f"{name}: stopped; the partial run is kept at {out} (marked incomplete)" in stderr
    assert "Traceback" not in stderr
    assert wait_until_gone(header, entries) == []
    assert not list((tmp_path / "journals").glob(f"{proc.pid}-*"))  # nothing left to undo
    meta = json.loads((out / "run.json").read_text())
    assert meta["status"] == "incomplete"
    assert meta["stopped"]["stage"] == "collect rep 0" and meta["stopped"]["reason"] == f"stopped by {name}"
    rep = meta["repetitions"][0]
    assert rep["exit_code"] is None and rep["stopped"] == f"stopped by {name}" and "truncated" not in rep
    assert rep["counters"]["cpu-counters"]["counters"]["usage_s"] > 0   # the teardown ran and wrote its figures
    tables = analyse(out)
    assert tables and any(rows for rows in tables.values())
    meta = json.loads((out / "run.json").read_text())
    written = {m["name"]: m["value"] for m in meta["metrics"] if m.get("labels") == {"op": "write"}}
    assert written["block.bytes"] >= 160 * 64 * 1024   # dd's 10 MiB reached the traced device before the stop


@pytest.mark.parametrize("stack", ["ext4+bfuse", pytest.param("ext4+fuse", marks=pytest.mark.slow)])
def test_after_sigkill_the_next_run_reports_and_removes_the_leftovers(stopped_run, tmp_path, stack):
    proc, out, header, entries = stopped_run(stack)
    proc.kill()
    proc.communicate(timeout=60)
    deadline = time.monotonic() + 15
    while owned_pids(header["token"]) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = remaining(header, entries)
    # What SIGKILL leaves: the ext4 mount, the loop device with bfq and the dirty limit, the cgroup, the instance.
    # The helpers died with mobiperf: PR_SET_PDEATHSIG for those it started (the FUSE daemon, told by SIGTERM,
    # unmounted itself), its watchdog for their children (the workload's `sleep`).
    assert any(x.startswith("mount ") and x.endswith("/data") for x in left), left
    assert any(x.startswith("loop ") for x in left) and any("tracefs_instance" in x for x in left), left
    assert any("scheduler = 'bfq'" in x for x in left) and any("strict_limit = '1'" in x for x in left), left
    assert not [x for x in left if x.startswith("process ")], left
    nxt = subprocess.run([*MOBIPERF, "run", "--stack", "ext4", "--image-size", "64M", "--no-report", "-o",
                          str(tmp_path / "next"), "--", "true"], capture_output=True, text=True, timeout=300,
                         env=run_env(tmp_path / "journals"))
    assert nxt.returncode == 0, nxt.stderr[-3000:]
    assert f"mobiperf: leftovers of mobiperf pid {proc.pid} (killed or crashed" in nxt.stderr
    for kind in ("mount ", "loop device ", "/queue/scheduler (was 'none'): now 'bfq'", "tracefs instance ",
                 "cgroup "):
        assert kind in nxt.stderr, nxt.stderr
    assert "undone: " in nxt.stderr and "could not undo" not in nxt.stderr
    assert remaining(header, entries) == []
    # The killed run is analysable: its raw directory gets a record saying what is known.
    tables = analyse(out)
    assert any(rows for rows in tables.values())
    rep = json.loads((out / "run.json").read_text())["repetitions"][0]
    assert rep["exit_code"] is None and "killed" in rep["stopped"]
