"""Faults on the virtual phone: the phone itself killed in the middle of a run (`python -m vphone up`, as `make
vphone` starts it), and mobiperf killed in the middle of a run on the phone. Each ends in one line, keeps what it
recorded, and leaves nothing that the next run or `mobiperf doctor` does not find and undo.

Both boot or use a phone for minutes: marked slow."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from android_device import MOBIPERF
from vphone_fixtures import PhoneDevice

pytest_plugins = ["adb_fixtures", "vphone_fixtures"]
SUPPORT = Path(__file__).resolve().parents[1] / "support"
LONG_WORKLOAD = ["mobibench", "-p", ".", "-f", "40000", "-r", "4", "-a", "0", "-y", "8"]   # 10,000 fdatasyncs


def private_env(tmp_path: Path, adb_port: int) -> dict[str, str]:
    """The adb server of the test session, and journals and phones of the test's own (no other mobiperf on the
    machine recovers them before the test looks)."""
    return dict(os.environ, ANDROID_ADB_SERVER_PORT=str(adb_port), MOBIPERF_JOURNAL_DIR=str(tmp_path / "journals"),
                MOBIPERF_VPHONE_RUN=str(tmp_path / "phones"), PYTHONPATH=str(SUPPORT))


def wait_for_syncs(trace: Path, proc: subprocess.Popen, count: int = 20, timeout: float = 600) -> None:
    """Until the run's trace holds `count` f2fs syncs: the workload is under way."""
    deadline = time.monotonic() + timeout
    while not (trace.exists() and trace.read_bytes().count(b"f2fs_sync_file_exit") >= count):
        assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        time.sleep(0.5)


def mobiperf(env: dict[str, str], *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([*MOBIPERF, *args], capture_output=True, text=True, env=env, timeout=timeout)


@pytest.mark.slow
def test_a_phone_killed_mid_run_ends_it_in_one_line_and_nothing_of_it_stays(adb_server, tmp_path):
    env = private_env(tmp_path, adb_server.port)
    up = subprocess.run([sys.executable, "-m", "vphone", "up"], capture_output=True, text=True, env=env, timeout=900)
    assert up.returncode == 0, up.stderr
    try:
        check_the_phone_killed_mid_run(adb_server, tmp_path, env, up.stdout.strip())
    finally:   # whatever failed: the phone down, its leftovers undone (nothing to do once the test passed)
        subprocess.run([sys.executable, "-m", "vphone", "down"], env=env, capture_output=True, timeout=120)


def check_the_phone_killed_mid_run(adb_server, tmp_path: Path, env: dict[str, str], serial: str) -> None:
    [state_file] = (tmp_path / "phones").glob("*/phone.json")
    state = json.loads(state_file.read_text())
    out = tmp_path / "run"
    proc = subprocess.Popen([*MOBIPERF, "run", "-t", f"adb:{serial}", "--stack", "dir:/data/local/tmp/k+bfuse",
                             "-o", str(out), "--no-report", "--", *LONG_WORKLOAD], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        wait_for_syncs(out / "raw" / "rep0" / "ftrace.txt", proc)
        os.kill(state["pid"], signal.SIGKILL)   # the phone dies: QEMU, with everything on it
        killed = time.monotonic()
        _, stderr = proc.communicate(timeout=600)   # every adb call has a timeout: no hang
        ended_after = time.monotonic() - killed
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    errors = [line for line in stderr.splitlines() if line.startswith("mobiperf: error")]
    assert proc.returncode != 0 and "Traceback" not in stderr and len(errors) == 1, stderr[-3000:]
    assert "went away" in errors[0] and f"kept at {out} (marked incomplete)" in errors[0], errors[0]
    meta = json.loads((out / "run.json").read_text())
    assert meta["status"] == "incomplete" and meta["stopped"]["stage"] == "collect rep 0"
    assert ended_after < 300, f"the run took {ended_after:.0f} s to notice"
    # What the dead phone left on the host: its run directory and adb connection (its journal says so). doctor
    # finds them; the next run (any mobiperf that recovers: here a probe of this host) undoes them; then nothing.
    said = mobiperf(env, "doctor")
    assert said.returncode == 1 and f"adb connection {serial}" in said.stdout + said.stderr, said.stdout + said.stderr
    assert str(state_file.parent) in said.stdout + said.stderr
    mobiperf(env, "probe", "-t", "local")
    clean = mobiperf(env, "doctor")
    assert clean.returncode == 0 and "no leftovers" in clean.stdout, clean.stdout + clean.stderr
    assert list((tmp_path / "journals").iterdir()) == [] and list((tmp_path / "phones").iterdir()) == []
    assert serial not in adb_server.client("devices").stdout and process_gone(state["pid"])


def process_gone(pid: int, timeout: float = 10) -> bool:
    """pid ended: no process, or a zombie its reaper has not collected yet (QEMU's parent is this VM's init,
    which reaps when it gets to it; a zombie holds nothing but its pid)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return True
        except (FileNotFoundError, ProcessLookupError, IndexError):
            return True
        time.sleep(0.2)
    return False


@pytest.mark.slow
def test_a_run_killed_on_the_phone_is_undone_there_and_its_trace_ingested(vphone: PhoneDevice, tmp_path):
    env = private_env(tmp_path, vphone.server_port)
    out = tmp_path / "killed"
    proc = subprocess.Popen([*MOBIPERF, "run", "-t", f"adb:{vphone.serial}", "--stack",
                             "dir:/data/local/tmp/kr+bfuse", "-o", str(out), "--no-report", "--", *LONG_WORKLOAD],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        wait_for_syncs(out / "raw" / "rep0" / "ftrace.txt", proc)
    finally:
        proc.kill()   # SIGKILL: no teardown at all
        proc.wait(30)
    found = mobiperf(env, "doctor", "-t", f"adb:{vphone.serial}")
    said = found.stdout + found.stderr
    assert found.returncode == 1 and "mount /data/local/tmp/kr/mobiperf-" in said, said
    assert "tracefs instance /sys/kernel/tracing/instances/mobiperf-" in said, said
    fixed = mobiperf(env, "doctor", "-t", f"adb:{vphone.serial}", "--fix")
    assert fixed.returncode == 0 and "clean now" in fixed.stdout, fixed.stdout + fixed.stderr
    left = vphone.shell("su 0 sh -c 'grep -c /data/local/tmp/kr /proc/mounts; ls /sys/kernel/tracing/instances; "
                        "ls -A /data/local/tmp; pidof bfuse mobibench'").stdout.split()
    assert left == ["0"], left     # no mount, no instance, nothing in /data/local/tmp, no daemon, no workload
    # What it recorded up to the kill is a trace like any other: ingested, the phone's f2fs syncs and block IO.
    ingested = tmp_path / "ingested"
    done = mobiperf(env, "ingest", str(out / "raw" / "rep0" / "ftrace.txt"), "-o", str(ingested))
    assert done.returncode == 0, done.stderr[-2000:]
    syncs = pl.read_parquet(ingested / "tables" / "fsync_event.parquet")
    assert len(syncs.filter(pl.col("comm") == "bfuse")) >= 20
    assert len(pl.read_parquet(ingested / "tables" / "block_event.parquet")) > 0
