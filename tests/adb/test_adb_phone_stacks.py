"""Phone stacks through the real adb client: the bundled bFUSE and Fjord daemons mounted over a directory of the
device's data partition (`dir:PATH+bfuse`, `dir:PATH+fjord:...`), traced, counted, and the device left as it was
found; a device lost midway; and the refusals (shared storage, a path off /data, no root, an ABI without a build,
the host's phone models).

Devices: the plain loopback (this host, as root: the host's bfuse) and the Android-shaped one (uid 2000 and su,
arm64-v8a binaries through qemu-user). Workloads are a few MiB written by dd: qemu is slow, and their true answers
are known (4 MiB in 512 KiB records: 8 FUSE_WRITE requests of 512 KiB + the 80-byte header each, one fsync).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import polars as pl
import pytest

from android_device import MOBIPERF, AndroidDevice, mobiperf_via, pushed_leftovers, storage_dir
from conftest import needs_root

pytest_plugins = ["adb_fixtures", "android_device"]
pytestmark = needs_root
MiB = 1 << 20
WRITE_4M = "dd if=/dev/zero of=f bs=512k count=8 conv=fsync 2>&1"
FUSE_WRITE, FUSE_FSYNC = 16, 20
INSTANCES = Path("/sys/kernel/tracing/instances")


def device_leftovers(device, base: str, pid: int) -> dict[str, list[str]]:
    """What a run may leave on the device: FUSE mounts under base, files under base (run directory, pid file,
    counters), pushed binaries."""
    root = "su 0 " if isinstance(device, AndroidDevice) else ""
    shell = (lambda script: device.server.client("-s", device.serial, "shell", f"{root}sh -c '{script}'").stdout)
    return {"mounts": [line for line in shell("cat /proc/self/mounts").splitlines() if f" {base}/" in line],
            "files": shell(f"find {base} -mindepth 1 2>/dev/null").split(),
            "pushed": pushed_leftovers(device, pid)}


def run_on(device, stack: str, script: str, out: Path) -> subprocess.CompletedProcess:
    started = time.monotonic()
    done = mobiperf_via(device, "run", "-t", f"adb:{device.serial}", "--stack", stack, "-o", str(out),
                        "--no-report", "--", "sh", "-c", script)
    done.elapsed = time.monotonic() - started
    return done


def fuse_requests(out: Path) -> pl.DataFrame:
    return pl.read_parquet(out / "tables" / "fuse_req.parquet")


# -- traced runs ------------------------------------------------------------------------------------------------------

def test_bfuse_over_data_is_traced_counted_and_leaves_nothing(adb_device, tmp_path, clean_machine):
    base = storage_dir(adb_device, tmp_path)
    out = tmp_path / "bfuse"
    done = run_on(adb_device, f"dir:{base}+bfuse", WRITE_4M, out)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.elapsed < 90, f"{done.elapsed:.0f} s for 4 MiB"   # qemu included
    assert "4194304 bytes" in (out / "raw" / "rep0" / "stdout.txt").read_text()
    meta = json.loads((out / "run.json").read_text())
    assert meta["status"] == "complete" and meta["stack"] == f"dir:{base}+bfuse"
    rep = meta["repetitions"][0]
    layer = rep["stack"]["layers"][0]
    android = isinstance(adb_device, AndroidDevice)
    host_abi = {"x86_64": "x86_64", "aarch64": "arm64-v8a"}[os.uname().machine]
    assert (layer["daemon"], layer["options"]["preset"]) == ("bfuse", "bfuse")
    assert layer["abi"] == ("arm64-v8a" if android else host_abi)
    assert layer["mountpoint"].startswith(f"{base}/mobiperf-") and layer["mountpoint"] == rep["stack"]["workdir"]
    assert layer["root_method"] == ("su 0" if android else "adbd") and layer["allow_other"] is False
    assert layer["binary"].startswith("/data/local/tmp/mobiperf/bin-" if android else "/tmp/mobiperf/bin-")
    # The kernel's FUSE requests, traced on the device: the file's 8 records of 512 KiB, and its fsync.
    reqs = fuse_requests(out)
    writes = reqs.filter(pl.col("opcode") == FUSE_WRITE)
    assert len(writes) == 8 and writes["len_bytes"].to_list() == [512 * 1024 + 80] * 8
    assert set(writes["comm"]) == {"dd"} and len(reqs.filter(pl.col("opcode") == FUSE_FSYNC)) == 1
    # What the daemon counted, brought back from the device: the same requests, and the buffer's few pwrites.
    counters = rep["counters"]["bfuse-counters"]
    assert counters["ops"]["write"] == {"requests": 8, "bytes": 4 * MiB}
    assert counters["counters"]["daemon_pwrite_bytes"] == 4 * MiB
    assert 2 <= counters["counters"]["daemon_pwrite_calls"] <= 4   # 2 MiB entries, cut at 1 MiB (entry_phase)
    target = rep["facts"]["target"]
    assert target["is_android"] is android and target["selinux"] == "disabled"
    assert isinstance(target["tracefs_users"], list) and target["tracefs_owner"].startswith("0:0")
    if android:
        assert (target["abi"], target["sdcard_implementation"]) == ("arm64-v8a", "direct ext4")
    assert device_leftovers(adb_device, base, done.pid) == {"mounts": [], "files": [], "pushed": []}


def test_fjord_with_a_whitelist_on_the_android_device(android_device, tmp_path, clean_machine):
    base = "/data/local/tmp/mp"
    out = tmp_path / "fjord"
    done = run_on(android_device, f"dir:{base}+fjord:preset=fjord-ram,whitelist=cache",
                  f"mkdir -p cache && cd cache && {WRITE_4M}", out)
    assert done.returncode == 0, done.stderr[-2000:]
    rep = json.loads((out / "run.json").read_text())["repetitions"][0]
    options = dict(rep["stack"]["layers"][0]["options"])
    assert options.pop("counters").endswith("/counters.json")
    assert options == {"preset": "fjord-ram", "whitelist": "cache"}
    reqs = fuse_requests(out)
    assert len(reqs.filter(pl.col("opcode") == FUSE_WRITE)) == 8
    assert len(reqs.filter(pl.col("opcode") == FUSE_FSYNC)) == 1
    policy = rep["counters"]["fjord-counters"]["policy"]
    # The whitelisted file's fsync is relaxed; 512 KiB writes bypass the RAM buffer (above its 64 KiB bound).
    assert (policy["fsyncs_relaxed"], policy["fsyncs_honoured"]) == (1, 0)
    assert (policy["writes_bypassed"], policy["bytes_native"]) == (8, 4 * MiB)
    assert device_leftovers(android_device, base, done.pid) == {"mounts": [], "files": [], "pushed": []}


def test_a_device_lost_mid_run_leaves_an_incomplete_analysable_run(start_android, tmp_path):
    device = start_android()
    before = set(os.listdir(INSTANCES)) if INSTANCES.is_dir() else set()
    out = tmp_path / "lost"
    env = dict(os.environ, ANDROID_ADB_SERVER_PORT=str(device.server_port))
    proc = subprocess.Popen([*MOBIPERF, "run", "-t", f"adb:{device.serial}", "--stack",
                             "dir:/data/local/tmp/mp+bfuse", "-o", str(out), "--no-report", "--", "sh", "-c",
                             f"{WRITE_4M}; sleep 60"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        trace = out / "raw" / "rep0" / "ftrace.txt"
        deadline = time.monotonic() + 120
        while not (trace.exists() and trace.read_bytes().count(b"fuse_request_end") >= 8):
            assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read()
            time.sleep(0.2)
        time.sleep(1)   # the fsync's block requests
        device.kill()
        _, stderr = proc.communicate(timeout=180)  # every adb call has a timeout: no hang
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        # The "device" is this host: what it kept (the run's tracefs instance) goes, as at a phone's next boot.
        for name in (set(os.listdir(INSTANCES)) if INSTANCES.is_dir() else set()) - before:
            if name.startswith("mobiperf"):
                subprocess.run(["rmdir", str(INSTANCES / name)], timeout=30)
    assert proc.returncode != 0 and "Traceback" not in stderr, stderr[-2000:]
    assert "went away" in stderr and "may be left" in stderr, stderr[-2000:]   # says what may be on the device
    assert json.loads((out / "run.json").read_text())["status"] == "incomplete"
    done = subprocess.run([*MOBIPERF, "analyze", str(out), "--format", "json"], capture_output=True, text=True,
                          timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    writes = fuse_requests(out).filter(pl.col("opcode") == FUSE_WRITE)
    assert len(writes) == 8 and writes["len_bytes"].sum() == 4 * MiB + 8 * 80


# -- refusals ---------------------------------------------------------------------------------------------------------

def test_shared_storage_and_paths_off_data_are_refused(android_device, tmp_path):
    for stack, said in (("dir:/sdcard/mp+bfuse", "shared storage"),
                        ("dir:/storage/emulated/0/mp+fjord:preset=fjord-ram", "shared storage"),
                        ("dir:/system/mp+fuse", "a directory of /data")):
        out = tmp_path / stack.split("+")[1].split(":")[0]
        done = run_on(android_device, stack, "true", out)
        assert done.returncode == 2, done.stderr
        message = done.stderr.strip()
        assert message.count("\n") == 0 and said in message and "Traceback" not in message, message
        assert not out.exists()   # refused before anything was created


def test_sdcard_refusal_says_why_and_what_to_use(android_device, tmp_path):
    done = run_on(android_device, "dir:/sdcard/mp+bfuse:preset=nobuf", "true", tmp_path / "x")
    assert done.returncode == 2
    assert "FUSE on FUSE" in done.stderr and "noexec" in done.stderr
    assert "dir:/data/local/tmp/mp+bfuse:preset=nobuf" in done.stderr   # the same stack on /data


def test_a_phone_without_root_says_which_step_needs_it(start_android, tmp_path):
    device = start_android(su=False)
    out = tmp_path / "noroot"
    done = run_on(device, "dir:/data/local/tmp/mp+bfuse", "true", out)
    assert done.returncode == 1 and not out.exists()
    message = done.stderr.strip()
    assert message.count("\n") == 0 and "Traceback" not in message
    assert "tracing (a tracefs instance of mobiperf's own) needs root" in message
    assert "cannot run as root in production builds" in message    # what `adb root` said
    assert "userdebug or eng build (adb root)" in message and "Magisk" in message
    # The daemon's mount, asked on its own, names its step.
    from mobiperf.stack.directory import plan_device_stack
    from mobiperf.core.errors import TargetError
    from mobiperf.stack.spec import parse_stack_spec
    from mobiperf.target.target import Target

    with pytest.raises(TargetError, match=r"mounting bfuse over /data/local/tmp/mp \(mount\(2\) on /dev/fuse\) "
                                          r"needs root, and the device gives none"):
        plan_device_stack(Target(device.transport()), parse_stack_spec("dir:/data/local/tmp/mp+bfuse"))
    assert device.shell("ls -A /data/local/tmp").stdout.split() == []   # nothing pushed, nothing made


def test_an_abi_without_a_build_names_the_make_command(start_android, tmp_path, monkeypatch):
    device = start_android(props={"ro.product.cpu.abi": "armeabi-v7a"})
    monkeypatch.setenv("MOBIPERF_BIN", str(tmp_path / "empty-bin"))
    from mobiperf.stack.directory import plan_device_stack
    from mobiperf.core.errors import StackError
    from mobiperf.stack.spec import parse_stack_spec
    from mobiperf.target.target import Target

    with pytest.raises(StackError, match=r"fjord for the device's ABI armeabi-v7a is not built \(.*/arm/fjord is "
                                         r"missing\): run `make -C reference-impl ARCH=arm`"):
        plan_device_stack(Target(device.transport()), parse_stack_spec("dir:/data/local/tmp/mp+fjord"))


def test_the_host_phone_models_are_refused_on_a_device_stack(loopback_device, tmp_path):
    out = tmp_path / "models"
    done = mobiperf_via(loopback_device, "run", "-t", f"adb:{loopback_device.serial}", "--phone", "galaxy-s3-2012",
                        "--stack", f"dir:{storage_dir(loopback_device, tmp_path)}+bfuse", "-o", str(out), "--", "true")
    assert done.returncode == 2 and not out.exists()
    assert "--device, --dirty-limit, --cpu, --fuse-wakeup (and --phone, which sets them) model a phone around an " \
           "emulated stack on this host" in done.stderr


def test_passthrough_is_refused_where_the_device_cannot_do_it(android_device, tmp_path):
    # The device's kernel is this host's (>= 6.9), but its arm64 daemon runs through qemu-user, which does not pass
    # FUSE_DEV_IOC_BACKING_OPEN through: the daemon says so right after FUSE_INIT, and nothing is left.
    out = tmp_path / "pt"
    done = run_on(android_device, "dir:/data/local/tmp/mp+bfuse:preset=passthrough", "true", out)
    assert done.returncode == 1, done.stderr
    assert "passthrough refused: FUSE_DEV_IOC_BACKING_OPEN is not available" in done.stderr
    assert "qemu-user" in done.stderr and "Function not implemented" in done.stderr
    assert device_leftovers(android_device, "/data/local/tmp/mp", done.pid) == {"mounts": [], "files": [],
                                                                                "pushed": []}
    # A phone kernel older than 6.9 is refused before anything is pushed.
    from mobiperf.stack.directory import check_passthrough_kernel
    from mobiperf.core.errors import StackError

    with pytest.raises(StackError, match=r"Linux 6\.9 or later\); this kernel is 5\.10\.157-android13"):
        check_passthrough_kernel("5.10.157-android13-4-00001-g5c1d8ecb1b47-ab9762829")
    check_passthrough_kernel("6.12.0-android16")


def test_a_daemon_that_leaves_its_mount_voids_the_run(loopback_device, tmp_path, clean_machine):
    # Unmounted under the workload (here by the workload itself, as a daemon that refuses or crashes after FUSE_INIT
    # does): what follows goes to the bare directory, so the run must not pass for a measurement of the daemon.
    base = storage_dir(loopback_device, tmp_path)
    out = tmp_path / "left"
    done = run_on(loopback_device, f"dir:{base}+bfuse", 'cd / && umount "$MOBIPERF_WORKDIR" && sleep 0.5 && '
                  f'cd "$MOBIPERF_WORKDIR" && {WRITE_4M}',
                  out)
    assert done.returncode == 1, done.stderr
    assert "the bfuse daemon left its mount during the run, so the workload ran on the bare directory" in done.stderr
    assert json.loads((out / "run.json").read_text())["status"] == "incomplete"
    assert device_leftovers(loopback_device, base, done.pid) == {"mounts": [], "files": [], "pushed": []}


def test_passthrough_on_a_phone_whose_kernel_has_it(start_android, tmp_path, clean_machine):
    # An x86_64 Android-shaped device: its static daemon runs natively (no qemu), on this host's kernel (>= 6.9):
    # the INIT and open replies are patched on the phone's side of adb, and no data request reaches the daemon.
    from mobiperf.core.binaries import reference_bin_dir

    if not (reference_bin_dir() / "x86_64" / "bfuse").exists():
        pytest.skip("needs the x86_64 phone build: make -C reference-impl ARCH=x86_64")
    device = start_android(props={"ro.product.cpu.abi": "x86_64", "ro.product.cpu.abilist": "x86_64"})
    out = tmp_path / "pt"
    done = run_on(device, "dir:/data/local/tmp/mp+bfuse:preset=passthrough", f"{WRITE_4M} && cat f > /dev/null", out)
    assert done.returncode == 0, done.stderr[-2000:]
    rep = json.loads((out / "run.json").read_text())["repetitions"][0]
    assert rep["stack"]["layers"][0]["binary"].startswith("/data/local/tmp/mobiperf/bin-")
    reqs = fuse_requests(out)
    assert reqs.filter(pl.col("opcode").is_in([15, FUSE_WRITE])).is_empty() and len(reqs) > 0
    counters = rep["counters"]["bfuse-counters"]
    assert "write" not in counters["ops"] and "read" not in counters["ops"]
    assert counters["counters"]["passthrough_opens"] >= 2 and counters["config"]["passthrough"] is True
    assert device_leftovers(device, "/data/local/tmp/mp", done.pid) == {"mounts": [], "files": [], "pushed": []}
