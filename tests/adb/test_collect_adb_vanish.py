"""The device disappears mid-run (the loopback adbd is killed while the workload runs and ftrace streams):
`mobiperf run` ends with an error instead of hanging, the partial run is kept, marked incomplete, and can be
re-analysed offline from what was streamed before the device went away. When the device is back, `mobiperf
doctor --fix` undoes what the run left on it (its undo journal is on the device)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path


from conftest import needs_root

pytest_plugins = ["adb_fixtures"]
pytestmark = needs_root
MOBIPERF = [sys.executable, "-m", "mobiperf"]
INSTANCES = Path("/sys/kernel/tracing/instances")


def _instances() -> set[str]:
    return set(os.listdir(INSTANCES)) if INSTANCES.is_dir() else set()


def test_device_vanishes_mid_run(start_loopback, tmp_path):
    device = start_loopback()
    before = _instances()
    base = tmp_path / "device-storage"
    base.mkdir()
    out = tmp_path / "vanished"
    env = dict(os.environ, ANDROID_ADB_SERVER_PORT=str(device.server_port))
    proc = subprocess.Popen([*MOBIPERF, "run", "-t", f"adb:{device.serial}", "--stack", f"dir:{base}", "-o",
                             str(out), "--", "sh", "-c", "dd if=/dev/zero of=f bs=4k count=64 oflag=direct; "
                             "sync; sleep 39.5"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        trace = out / "raw" / "rep0" / "ftrace.txt"
        deadline = time.monotonic() + 120
        # (all of dd's 64 writes streamed: under load the first completions come well before the last)
        while not (trace.exists() and trace.read_bytes().count(b"block_rq_complete") >= 64):
            assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read()
            time.sleep(0.2)
        device.kill()
        _, stderr = proc.communicate(timeout=180)  # every adb call has a timeout: no hang
        # The device comes back (the same "device": this host): what the run left there, written in its undo
        # journal on the device, is found and undone.
        back = start_loopback()
        doctor = subprocess.run([*MOBIPERF, "doctor", "-t", f"adb:{back.serial}", "--fix"], capture_output=True,
                                text=True, timeout=300, env=dict(env, ANDROID_ADB_SERVER_PORT=str(back.server_port)))
        assert doctor.returncode == 0, doctor.stdout + doctor.stderr
        assert f"mobiperf: leftovers of mobiperf pid {proc.pid}" in doctor.stderr
        assert "tracefs instance /sys/kernel/tracing/instances/mobiperf-" in doctor.stderr
        assert not [n for n in _instances() if n.startswith(f"mobiperf-{proc.pid}-")]
        assert list(base.iterdir()) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        # If the doctor failed: what the vanished device kept (its tracefs instance) is removed here, as a phone
        # would drop it at its next boot.
        for name in _instances() - before:
            if name.startswith(f"mobiperf-{proc.pid}-"):
                subprocess.run(["rmdir", str(INSTANCES / name)], timeout=30)
    assert proc.returncode != 0 and "Traceback" not in stderr, stderr[-2000:]
    meta = json.loads((out / "run.json").read_text())
    assert meta["status"] == "incomplete"
    # Re-analysable offline from the streamed part of the trace.
    done = subprocess.run([*MOBIPERF, "analyze", str(out), "--format", "json"], capture_output=True, text=True,
                          timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    import polars as pl

    events = pl.read_parquet(out / "tables" / "block_event.parquet")
    assert len(events.filter(pl.col("event") == "block_rq_complete")) >= 64
