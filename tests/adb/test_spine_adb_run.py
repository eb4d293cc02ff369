"""`mobiperf targets`, `probe` and a traced `mobiperf run` through the real adb client, on the plain loopback device
(tests/support/adbd_loopback.py: the device side of the adb protocol on 127.0.0.1, running commands on this host as
root) and on the Android-shaped one (tests/support/android_device.py: mksh, toybox, uid 2000 and su, an arm64-v8a ABI
whose binaries run through qemu-user)."""

from __future__ import annotations

import json
import os
import time

import polars as pl

from android_device import AndroidDevice, mobiperf_via, pushed_leftovers, storage_dir
from conftest import needs_root

pytest_plugins = ["adb_fixtures", "android_device"]  # adb_server, loopback_device, android_device, adb_device


def test_targets_lists_the_device(adb_device):
    done = mobiperf_via(adb_device, "targets", "--format", "json")
    rows = {r["target"]: r for r in json.loads(done.stdout)}
    row = rows[f"adb:{adb_device.serial}"]
    assert row["kind"] == "adb" and row["state"] == "device" and row["model"]
    assert row["kernel"] == os.uname().release  # both devices are this host's kernel
    if isinstance(adb_device, AndroidDevice):
        # The ABI is the property's, though `uname -m` on the device says x86_64.
        assert (row["model"], row["android_version"], row["abi"]) == ("Android_Shaped", "14", "arm64-v8a")
        assert row["root"] is True and row["root_method"] == "su 0"   # the shell is uid 2000; its su is AOSP's
        assert "Android 14, arm64-v8a" in row["description"]


def test_probe_over_adb_is_android_aware(adb_device):
    done = mobiperf_via(adb_device, "probe", "-t", f"adb:{adb_device.serial}", "--format", "json")
    caps = json.loads(done.stdout)
    assert caps["target"] == f"adb:{adb_device.serial}" and caps["kernel"] == os.uname().release
    android = caps["android"]
    assert android["tracefs_path"] == caps["tracefs_path"]
    text = mobiperf_via(adb_device, "probe", "-t", f"adb:{adb_device.serial}").stdout
    if not isinstance(adb_device, AndroidDevice):
        assert android["is_android"] is False and android["default_workdir"] == "/tmp/mobiperf"
        assert "android     no" in text and "workdir     /tmp/mobiperf" in text
        return
    assert (android["is_android"], android["android_version"], android["sdk"]) == (True, "14", 34)
    assert (android["abi"], android["machine"]) == ("arm64-v8a", "x86_64")
    assert android["default_workdir"] == "/data/local/tmp/mobiperf"
    assert (android["sdcard_path"], android["sdcard_implementation"]) == ("/storage/emulated/0", "direct ext4")
    assert caps["is_root"] is True and caps["fusermount"] is None   # root through su; no fusermount on a phone
    assert "android     14  model: Android_Shaped  abi: arm64-v8a" in text
    assert "workdir     /data/local/tmp/mobiperf" in text and "/sdcard: direct ext4" in text


@needs_root
def test_traced_run_pushes_the_generator_and_leaves_nothing(adb_device, tmp_path, clean_machine):
    base = storage_dir(adb_device, tmp_path)
    out = tmp_path / "adbrun"
    started = time.monotonic()
    done = mobiperf_via(adb_device, "run", "-t", f"adb:{adb_device.serial}", "--stack", f"dir:{base}",
                        "-o", str(out), "--", "mobibench", "-p", ".", "-f", "4096", "-r", "4", "-a", "1", "-y", "2")
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 120   # through qemu too: a small workload stays small
    meta = json.loads((out / "run.json").read_text())
    assert meta["status"] == "complete" and meta["target"]["target"].startswith("adb:")
    names = {m["name"] for m in meta["metrics"]}
    assert {"workload.iops", "workload.throughput", "block.requests"} <= names
    stdout = (out / "raw" / "rep0" / "stdout.txt").read_text()
    assert "[Messurement Result]" in stdout and "IO count : 1024" in stdout
    # 1024 random 4 KiB writes, each followed by fsync, reached the traced disk through the device's shell.
    io = pl.read_parquet(out / "results" / "block_io.parquet")
    assert len(io.filter((pl.col("comm") == "mobibench") & (pl.col("op") == "write"))) >= 1024
    target = meta["repetitions"][0]["facts"]["target"]
    assert target["is_android"] is isinstance(adb_device, AndroidDevice)
    left = adb_device.server.client("-s", adb_device.serial, "shell", f"ls -A {base}").stdout
    assert left.split() == [] and pushed_leftovers(adb_device, done.pid) == []  # the run's directory, the binary
