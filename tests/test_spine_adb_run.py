"""`mobiperf targets` and a traced `mobiperf run` through the real adb client, against the loopback device
(tests/adbd_loopback.py: the device side of the adb protocol on 127.0.0.1, running commands on this host)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from conftest import needs_root

pytest_plugins = ["adb_fixtures"]  # adb_server, loopback_device
MOBIPERF = [sys.executable, "-m", "mobiperf"]


def mobiperf_via(device, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, ANDROID_ADB_SERVER_PORT=str(device.server_port))
    return subprocess.run([*MOBIPERF, *args], capture_output=True, text=True, timeout=timeout, env=env)


def test_targets_lists_the_device(loopback_device):
    done = mobiperf_via(loopback_device, "targets", "--format", "json")
    rows = {r["target"]: r for r in json.loads(done.stdout)}
    row = rows[f"adb:{loopback_device.serial}"]
    assert row["kind"] == "adb" and row["state"] == "device" and row["model"]
    assert row["kernel"] == os.uname().release  # the loopback device is this host


def test_probe_over_adb_is_android_aware(loopback_device):
    done = mobiperf_via(loopback_device, "probe", "-t", f"adb:{loopback_device.serial}", "--format", "json")
    caps = json.loads(done.stdout)
    assert caps["target"] == f"adb:{loopback_device.serial}" and caps["kernel"] == os.uname().release
    android = caps["android"]
    assert android["is_android"] is False and android["default_workdir"] == "/tmp/mobiperf"
    assert android["tracefs_path"] == caps["tracefs_path"]
    text = mobiperf_via(loopback_device, "probe", "-t", f"adb:{loopback_device.serial}").stdout
    assert "android     no" in text and "workdir     /tmp/mobiperf" in text


@needs_root
def test_traced_run_pushes_the_generator_and_leaves_nothing(loopback_device, tmp_path, clean_machine):
    base = tmp_path / "device-storage"
    base.mkdir()
    out = tmp_path / "adbrun"
    done = mobiperf_via(loopback_device, "run", "-t", f"adb:{loopback_device.serial}", "--stack", f"dir:{base}",
                        "-o", str(out), "--", "mobibench", "-p", ".", "-f", "4096", "-r", "4", "-a", "1", "-y", "2")
    assert done.returncode == 0, done.stderr
    meta = json.loads((out / "run.json").read_text())
    assert meta["status"] == "complete" and meta["target"]["target"].startswith("adb:")
    names = {m["name"] for m in meta["metrics"]}
    assert {"workload.iops", "workload.throughput", "block.requests"} <= names
    stdout = (out / "raw" / "rep0" / "stdout.txt").read_text()
    assert "[Messurement Result]" in stdout and "IO count : 1024" in stdout
    # 1024 random 4 KiB writes, each followed by fsync, reached the traced disk through the device's shell.
    io = pl.read_parquet(out / "results" / "block_io.parquet")
    assert len(io.filter((pl.col("comm") == "mobibench") & (pl.col("op") == "write"))) >= 1024
    assert list(base.iterdir()) == []  # the run's directory and the pushed binary are gone
