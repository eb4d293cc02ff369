"""`mobiperf replay -t adb:SERIAL`: a phone trace's file events replayed on a device's own directory and on bFUSE
over it, through the real adb client, the generator built for the device's ABI (arm64-v8a through qemu-user on the
Android-shaped device): the script pushed and removed, the replay's files removed, the fidelity measured from the
device's own trace, and the two stacks compared."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from android_device import mobiperf_via, pushed_leftovers, storage_dir
from conftest import needs_root

pytest_plugins = ["adb_fixtures", "android_device"]
pytestmark = needs_root
TRACE = Path(__file__).resolve().parents[1] / "fixtures" / "android" / "k4.14-android-fs.txt"


def device_files(device, base: str) -> list[str]:
    root = "su 0 " if device.__class__.__name__ == "AndroidDevice" else ""
    listing = device.server.client("-s", device.serial, "shell", f"{root}sh -c 'find {base} -mindepth 1'")
    return listing.stdout.split()


def test_a_phone_trace_replayed_on_a_device_and_bfuse_over_it(adb_device, tmp_path, clean_machine):
    base = storage_dir(adb_device, tmp_path)
    out = tmp_path / "what-if"
    done = mobiperf_via(adb_device, "replay", str(TRACE), "-t", f"adb:{adb_device.serial}", "--stack", f"dir:{base}",
                        "--stack", f"dir:{base}+bfuse", "-o", str(out), "--no-report", timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    runs = [out / f"1-dir-{base.strip('/').replace('/', '-')}", out / f"2-dir-{base.strip('/').replace('/', '-')}-bfuse"]
    for run in runs:
        meta = json.loads((run / "run.json").read_text())
        assert meta["status"] == "complete" and meta["replay"]["same_stack"] is False
        assert meta["command"][4].startswith("/") and meta["command"][4].endswith(".script")   # pushed there
        table = pl.read_parquet(run / "results" / "replay_fidelity.parquet")
        held = table.filter(pl.col("tolerance").is_not_null())
        # the fixture's 3 reads (208 KiB) and 4 writes (16 KiB), each thread's file opened and closed around them
        assert dict(held.select("metric", "replay").rows()) == {
            "calls.close": 5, "calls.open": 5, "calls.pread": 3, "calls.pwrite": 4,
            "syscall.read_bytes": 16384 + 131072 + 65536, "syscall.write_bytes": 4 * 4096}
        assert held["ok"].all()
    commands = [json.loads((run / "run.json").read_text())["command"] for run in runs]
    assert commands[0] == commands[1] and commands[0][-1].startswith("--replay-dir=mobiperf-replay-")
    assert "== dir:" in done.stdout and "time by layer" in done.stdout
    assert "DIFFERENT WORKLOADS" not in done.stdout
    assert device_files(adb_device, base) == [] and pushed_leftovers(adb_device, done.pid) == []


def test_a_replay_larger_than_the_devices_free_space_is_refused_before_it_starts(adb_device, tmp_path):
    base = storage_dir(adb_device, tmp_path)
    log = tmp_path / "big.strace"    # one 4 KiB write 100 GiB into a file: the file reaches 100 GiB
    log.write_text('1 openat(AT_FDCWD, "/data/big", O_WRONLY|O_CREAT) = 3\n'
                   f'1 pwrite64(3, ""..., 4096, {100 << 30}) = 4096\n')
    done = mobiperf_via(adb_device, "replay", str(log), "-t", f"adb:{adb_device.serial}", "--stack", f"dir:{base}",
                        "-o", str(tmp_path / "replay"))
    assert done.returncode == 2
    assert f"this replay writes up to 100.0 GiB but {base} has " in done.stderr and "nothing was replayed" in done.stderr
    assert not (tmp_path / "replay").exists() and device_files(adb_device, base) == []
