"""Studies on a phone (`mobiperf study bfuse|fjord -t adb:SERIAL`): the seeds' experiments on the device's own
storage, with the paper's numbers beside. The plan is checked here without a device; the studies themselves run
on the Android-shaped device and on the virtual phone (`-m slow`: qemu makes them take minutes each)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from android_device import AndroidDevice
from conftest import needs_root
from mobiperf.orchestration.study import Config, get_study, plan_study
from mobiperf.orchestration.sweep import TARGET_DIR, plan_cell

pytest_plugins = ["adb_fixtures", "android_device", "vphone_fixtures"]
MOBIPERF = [sys.executable, "-m", "mobiperf"]


def test_a_phone_study_plans_the_phones_own_storage():
    definition, labels = plan_study(get_study("bfuse"), Config(target="adb:SERIAL1"))
    assert set(labels) == {"native", "legacy", "nobuf", "bfuse", "passthrough", "bfuse/1thread", "unit/16k",
                           "unit/64k", "unit/128k", "unit/512k", "flush/1ms", "flush/100ms", "buffer/2m", "buffer/32m"}
    plans = {label: plan_cell(params) for label, params in labels.items()}
    assert all(p.target == "adb:SERIAL1" and p.skip is None for p in plans.values())
    assert plans["native"].stack == f"dir:{TARGET_DIR}"
    assert plans["legacy"].stack == f"dir:{TARGET_DIR}+fuse"
    assert plans["passthrough"].stack == f"dir:{TARGET_DIR}+bfuse:preset=passthrough"
    assert plans["unit/64k"].stack == f"dir:{TARGET_DIR}+fuse:io_unit=64k"
    # None of the host's models: no device profile, phone, CPU share or scheduler on a phone.
    assert all((p.device, p.scheduler, p.cpu, p.dirty, p.fuse_wakeup) == (None, None, "host", "host", "0")
               for p in plans.values())
    fjord, fj_labels = plan_study(get_study("fjord"), Config(target="adb:SERIAL1", quick=True))
    assert fjord.cells and all(c["target"] == "adb:SERIAL1" and "device" not in c for c in fjord.cells)
    # A host-only parameter asked of a phone is a skipped cell with the reason, not a wrong measurement.
    skipped = plan_cell({"target": "adb:S", "layer": "bfuse", "scheduler": "bfq"})
    assert skipped.skip and "scheduler" in skipped.skip and "measured as it is" in skipped.skip


def test_host_models_are_refused_for_a_phone_study(tmp_path):
    done = subprocess.run([*MOBIPERF, "study", "bfuse", "-t", "adb:SERIAL1", "--phone", "galaxy-s3-2012", "-o",
                           str(tmp_path / "s")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and not (tmp_path / "s").exists()
    assert "-t adb:SERIAL1 measures the phone itself" in done.stderr


def study_on(device: AndroidDevice, name: str, out) -> tuple[subprocess.CompletedProcess, dict]:
    env = dict(os.environ, ANDROID_ADB_SERVER_PORT=str(device.server_port))
    done = subprocess.run([*MOBIPERF, "study", name, "--quick", "-n", "1", "-t", f"adb:{device.serial}", "-o",
                           str(out)], capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return done, json.loads((out / "study.json").read_text())


def rows(result: dict, title: str) -> dict[str, dict]:
    section = next(s for s in result["sections"] if s["title"].startswith(title))
    return {r["label"]: r for r in section["rows"]}


@needs_root
@pytest.mark.slow
def test_bfuse_study_on_the_android_shaped_device(android_device, tmp_path):
    done, result = study_on(android_device, "bfuse", tmp_path / "bfuse")
    assert f"measured on adb:{android_device.serial}" in done.stdout
    assert result["config"]["target"] == f"adb:{android_device.serial}" and result["config"]["device"] is None
    # Table 3 of the paper beside the phone's counts, scaled to its 512 MB: exact for the two unbuffered daemons.
    table3 = rows(result, "System calls of the FUSE daemon")
    assert (table3["pwrite(), legacy FUSE"]["ours"], table3["pwrite(), legacy FUSE"]["paper"]) == (131_072, 128_000)
    assert (table3["pwrite(), 512 KB no buffer"]["ours"], table3["pwrite(), 512 KB no buffer"]["paper"]) == (1024, 1000)
    assert table3["pwrite(), bFUSE"]["paper"] == 249 and 256 <= table3["pwrite(), bFUSE"]["ours"] <= 300
    layers = rows(result, "Layer overheads")
    assert layers["legacy FUSE over ext4, CFQ"]["paper"] == 7.0 and layers["legacy FUSE over ext4, CFQ"]["ours"] > 0
    # Passthrough needs an ioctl qemu-user does not pass through: the cell failed, and says why.
    note = layers["FUSE passthrough over ext4 (today's /sdcard)"]["note"]
    assert note.startswith("failed") and "FUSE_DEV_IOC_BACKING_OPEN" in note
    left = android_device.server.client("-s", android_device.serial, "shell", "su 0 sh -c 'ls -A /data/local/tmp; "
                                        "grep -c fuse /proc/self/mounts'").stdout.split()
    assert left == ["0"]   # nothing left on the device: no directory, binary or mount


@needs_root
@pytest.mark.slow
def test_fjord_study_on_the_android_shaped_device(android_device, tmp_path):
    done, result = study_on(android_device, "fjord", tmp_path / "fjord")
    tps = rows(result, "SQLite inserts per second")
    assert tps["(i) native"]["ours"] > 0 and tps["(m) fjord-ram"]["ours"] > 0
    written = rows(result, "Bytes written")
    assert written["(m) fjord-ram, daemon -> ext4"]["paper"] == 11e6
    # 50 whitelisted transactions whose fsync fjord-ram relaxes: its daemon writes a fraction of native's bytes.
    assert written["(m) fjord-ram, daemon -> ext4"]["ours"] < 0.5 * written["(i) native, daemon -> ext4"]["ours"]
    claim = next(c for c in result["checks"] if c["claim"].startswith("fjord-ram writes less than native"))
    assert claim["passed"] is True, claim


@pytest.mark.slow
def test_bfuse_study_on_the_virtual_phone(vphone, tmp_path):
    """The same study on a phone with a kernel of its own: f2fs /data, 6.1 (no FUSE passthrough), an emulated CPU."""
    done, result = study_on(vphone, "bfuse", tmp_path / "bfuse")
    assert f"measured on adb:{vphone.serial}" in done.stdout
    table3 = rows(result, "System calls of the FUSE daemon")
    assert (table3["pwrite(), legacy FUSE"]["ours"], table3["pwrite(), 512 KB no buffer"]["ours"]) == (131_072, 1024)
    # bFUSE's pwrites follow its flush thread's period against the emulated CPU: more, smaller flushes than on a
    # real CPU (304 here, 249 in the paper), never more than the unbuffered daemon's half
    assert 256 <= table3["pwrite(), bFUSE"]["ours"] <= 512
    note = rows(result, "Layer overheads")["FUSE passthrough over ext4 (today's /sdcard)"]["note"]
    assert note.startswith("failed") and "Linux 6.9 or later" in note   # 6.1 has none: said, not measured
    # the claims on counts hold; those on speed are measured and said, not held: the phone's CPU is emulated (TCG)
    counts = [c for c in result["checks"] if "MB/s" not in c["detail"]]
    assert counts and all(c["passed"] for c in counts), [c for c in counts if not c["passed"]]
    assert all(c["detail"] for c in result["checks"])
    left = vphone.shell("su 0 sh -c 'ls -A /data/local/tmp; grep -c /data/local/tmp /proc/mounts'").stdout.split()
    assert left == ["0"]   # nothing left on the phone: no directory, binary or mount
