"""`mobiperf run` over adb stopped mid-run by SIGTERM, SIGHUP or SIGKILL, against the loopback device
(tests/support/adbd_loopback.py: the device side of the adb protocol, running commands on this host).

On the device the run has a tracefs instance, a work directory with the pushed workload binary, background
commands (the trace reader, the workload) and its undo journal (/tmp/mobiperf-journal on a device without
/data/local/tmp). After a stop signal all of it is gone; after SIGKILL the next `mobiperf run` on that device
reports what the dead run left there and removes it. The run directory is analysable either way.
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

from conftest import needs_root
from leftover_checks import owned_pids, remaining, wait_for_journal, wait_until_gone

pytest_plugins = ["adb_fixtures"]
pytestmark = needs_root
MOBIPERF = [sys.executable, "-m", "mobiperf"]
# 4096 O_SYNC writes of 4 KiB (several seconds): block requests reach the trace while it runs.
WORKLOAD = ["mobibench", "-p", ".", "-f", "16384", "-r", "4", "-a", "0", "-y", "1"]


def mobiperf_via(device, *args: str, journals: Path, **kw):
    """mobiperf with journals of the test's own (on the device and on this host): no other mobiperf undoes the
    leftovers of the test's runs before the test's next run does."""
    env = dict(os.environ, ANDROID_ADB_SERVER_PORT=str(device.server_port), MOBIPERF_PROGRESS="0",
               MOBIPERF_DEVICE_JOURNAL_DIR=str(journals / "device"), MOBIPERF_JOURNAL_DIR=str(journals / "host"))
    return subprocess.Popen([*MOBIPERF, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, start_new_session=True, **kw)


def start_run(device, base: Path, out: Path, journals: Path) -> tuple[subprocess.Popen, dict, list[dict]]:
    proc = mobiperf_via(device, "run", "-t", f"adb:{device.serial}", "--stack", f"dir:{base}", "--no-report",
                        "-o", str(out), "--", *WORKLOAD, journals=journals)
    header, entries = wait_for_journal(proc.pid, kinds={"dir", "file", "tracefs_instance"},
                                       directory=journals / "device", proc=proc)
    trace = out / "raw" / "rep0" / "ftrace.txt"
    deadline = time.monotonic() + 120
    while not (trace.exists() and b"block_rq_complete" in trace.read_bytes()):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.2)
    return proc, header, entries


def device_side_left(header: dict, entries: list[dict], journals: Path) -> list[str]:
    """remaining() plus the journal's own files: the device journal, its pid files, the lock on this host."""
    left = remaining(header, entries)
    left += [str(p) for p in (journals / "device").glob(f"{header['owner']['pid']}-*")]
    left += [header["pid_dir"]] if os.path.exists(header["pid_dir"]) else []
    left += [header["lock"]] if os.path.exists(header["lock"]) else []
    return left


def analysable(out: Path) -> dict:
    done = subprocess.run([*MOBIPERF, "analyze", str(out), "--format", "json"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads((out / "run.json").read_text())


@pytest.mark.parametrize("name", ["SIGTERM", pytest.param("SIGHUP", marks=pytest.mark.slow)])
def test_a_stop_signal_cleans_the_device(start_loopback, tmp_path, name):
    device = start_loopback()
    base = tmp_path / "device-storage"
    base.mkdir()
    out = tmp_path / "run"
    proc, header, entries = start_run(device, base, out, tmp_path / "journals")
    pushed = next(e["path"] for e in entries if e["kind"] == "file")
    assert pushed.endswith("/mobibench") and "/mobiperf/bin-" in pushed and os.path.exists(pushed)  # the device's work dir
    assert any(n for n in owned_pids(header["token"]).values())   # the trace reader and the workload run
    proc.send_signal(signal.Signals[name])
    _, stderr = proc.communicate(timeout=180)
    assert proc.returncode == 128 + signal.Signals[name], stderr
    assert f"{name}: stopped; the partial run is kept at {out}" in stderr
    assert wait_until_gone(header, entries) == [] and device_side_left(header, entries, tmp_path / "journals") == []
    assert list(base.iterdir()) == []
    meta = analysable(out)
    assert meta["status"] == "incomplete" and meta["stopped"]["reason"] == f"stopped by {name}"


def test_after_sigkill_the_next_run_on_the_device_removes_the_leftovers(start_loopback, tmp_path):
    device = start_loopback()
    base = tmp_path / "device-storage"
    base.mkdir()
    out = tmp_path / "run"
    proc, header, entries = start_run(device, base, out, tmp_path / "journals")
    proc.kill()
    proc.communicate(timeout=60)
    deadline = time.monotonic() + 15
    while owned_pids(header["token"]) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = device_side_left(header, entries, tmp_path / "journals")
    # the adb clients died with mobiperf and the device hung their commands up; what stays is on the device
    assert any("tracefs_instance" in x for x in left) and any(x.startswith("dir ") for x in left), left
    assert any(x.startswith("file ") and x.endswith("mobibench") for x in left), left
    assert not [x for x in left if x.startswith("process ")], left
    nxt = mobiperf_via(device, "run", "-t", f"adb:{device.serial}", "--stack", f"dir:{base}", "--no-report", "-o",
                       str(tmp_path / "next"), "--", "sh", "-c", "echo hello > f; sync", journals=tmp_path / "journals")
    _, stderr = nxt.communicate(timeout=300)
    assert nxt.returncode == 0, stderr[-3000:]
    assert f"mobiperf: leftovers of mobiperf pid {proc.pid} (killed or crashed" in stderr
    assert "tracefs instance /sys/kernel/tracing/instances/mobiperf-" in stderr and "undone: " in stderr
    assert device_side_left(header, entries, tmp_path / "journals") == []
    assert list(base.iterdir()) == []
    meta = analysable(out)
    assert meta["repetitions"][0]["exit_code"] is None and "killed" in meta["repetitions"][0]["stopped"]


def test_the_processes_of_a_dead_owner_are_found_and_ended_on_the_device(start_loopback, tmp_path):
    """What a real phone keeps running after its adb clients are gone (adbd hangs up only the shell): found by the
    owner token in the environment and the pid files, and ended, through adb alone."""
    from mobiperf.target.undo_steps import end_owned_processes, owned_processes, pid_files

    t = start_loopback().transport()
    token = "999999-0badf00d"   # a dead owner's token: no watchdog of this host knows it
    pid_dir = str(tmp_path / f"{token}.pids")
    started = t.run(["sh", "-c", f"export MOBIPERF_OWNER={token}; mkdir -p {pid_dir}; "
                     f"nohup sh -c 'echo $$ > {pid_dir}/$$; sleep 300 & wait' >/dev/null 2>&1 & echo $!"])
    shell = int(started.text.split()[-1])
    deadline = time.monotonic() + 10
    while len(owned_processes(t, token)) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    found = owned_processes(t, token)
    assert shell in found and sorted(found.values()) == ["sh", "sleep"]
    assert pid_files(t, pid_dir) == [str(shell)]
    assert set(end_owned_processes(t, token, pid_dir)) == set(found)
    assert owned_processes(t, token) == {} and not os.path.exists(pid_dir)
