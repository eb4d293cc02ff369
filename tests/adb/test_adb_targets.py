"""Targets over adb: the device list through the real client, Android facts, root detection, and pushing the
reference binaries, against loopback devices (tests/support/adbd_loopback.py) and canned output of real phones."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import tempfile
import time
from pathlib import Path

import pytest

pytest_plugins = ["adb_fixtures"]  # adb_server, loopback_device, start_loopback
from mobiperf.core.errors import TargetError
from mobiperf.target.adb import from_target_spec, list_adb_devices
from mobiperf.target.adb_client import parse_devices_l
from mobiperf.core.binaries import reference_bin_dir
from mobiperf.target.android import (android_facts, parse_android_facts, push_reference_binaries,
                                     reference_binary_path, run_facts)
from mobiperf.target.transport import LocalTransport

SHELL_UID = 2000  # the "shell" user of a phone


@pytest.fixture
def shared_tmp():
    """A directory the loopback's unprivileged shell user can use (pytest's tmp_path lives under a 0700 dir)."""
    d = Path(tempfile.mkdtemp(prefix="mobiperf-adbtest-"))
    d.chmod(0o777)
    yield d
    shutil.rmtree(d, ignore_errors=True)


# -- the device list -------------------------------------------------------------------------------------------------

def test_devices_listed_through_the_real_client(adb_server, start_loopback):
    phone = start_loopback("--model", "Pixel_Loop", "--product", "loopy", "--prop", "ro.build.version.release=15")
    plain = start_loopback()
    gone = start_loopback()
    gone.kill()
    listed = {d["serial"]: d for d in list_adb_devices(adb_server.adb, adb_server.port)}

    p = listed[phone.serial]
    assert (p["state"], p["model"], p["product"], p["device"]) == ("device", "Pixel_Loop", "loopy", "loopback")
    assert p["android_version"] == "15"
    assert p["kernel"] == os.uname().release
    assert p["root"] is True and p["root_method"] == "adbd"
    assert listed[plain.serial]["model"] == "Loopback" and listed[plain.serial]["android_version"] == "14"
    g = listed[gone.serial]
    assert g["state"] == "offline" and g["android_version"] is None and g["root"] is False


def test_devices_l_parsing_keeps_odd_states():
    text = ("* daemon not running; starting now at tcp:5037\n"
            "List of devices attached\n"
            "0B191JEC216417         device usb:1-4 product:panther model:Pixel_7 device:panther transport_id:3\n"
            "emulator-5554          unauthorized transport_id:4\n"
            "R58M12345AB            no permissions (missing udev rules? user is in the plugdev group); see "
            "[http://developer.android.com/tools/device.html] usb:1-2 transport_id:5\n\n")
    got = parse_devices_l(text)
    assert [(d["serial"], d["state"], d["model"], d["transport_id"]) for d in got] == [
        ("0B191JEC216417", "device", "Pixel_7", "3"),
        ("emulator-5554", "unauthorized", None, "4"),
        ("R58M12345AB", "no permissions (missing udev rules? user is in the plugdev group); see "
                        "[http://developer.android.com/tools/device.html]", None, "5"),
    ]
    assert got[0]["usb"] == "1-4"


# -- Android facts ---------------------------------------------------------------------------------------------------

def test_facts_of_the_loopback_are_this_hosts_facts(loopback_device):
    over_adb = android_facts(loopback_device.transport())
    local = android_facts(LocalTransport())
    # Other users of this machine mount and unmount all the time: compare the mount tables on the root only.
    # The loopback puts its getprop (and su) first on the shell's PATH.
    assert over_adb.pop("path").endswith(":" + local.pop("path"))
    root_mount = [m for m in over_adb.pop("mounts") if m["mountpoint"] == "/"]
    assert root_mount == [m for m in local.pop("mounts") if m["mountpoint"] == "/"] and len(root_mount) >= 1
    assert over_adb == local
    assert over_adb["is_android"] is False and over_adb["android_version"] is None and over_adb["sdk"] is None
    assert over_adb["kernel"] == os.uname().release
    assert over_adb["abi"] == {"x86_64": "x86_64", "aarch64": "arm64-v8a"}.get(os.uname().machine)
    assert over_adb["default_workdir"] == "/tmp/mobiperf"
    assert over_adb["sdcard_path"] is None and over_adb["sdcard_layer"] is None
    if os.path.exists("/sys/kernel/tracing/trace") and os.geteuid() == 0:
        assert over_adb["tracefs_path"] == "/sys/kernel/tracing"
    assert over_adb["root"] is (os.geteuid() == 0)
    # The work dir's mount and block device, checked against what this process sees of /tmp.
    st = os.stat("/tmp")
    block = Path(f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}")
    if block.exists():
        assert over_adb["workdir_mount"]["block_devices"][0] == block.resolve().name


def test_facts_as_the_shell_user(start_loopback):
    facts = android_facts(start_loopback("--uid", str(SHELL_UID)).transport())
    assert (facts["uid"], facts["root"], facts["is_android"]) == (SHELL_UID, False, False)


PIXEL_14 = """\
@@uid
0
@@uname
5.10.157-android13-4-00001-g5c1d8ecb1b47-ab9762829
aarch64
@@android
yes
@@props
ro.build.version.release=14
ro.build.version.sdk=34
ro.product.cpu.abi=arm64-v8a
ro.product.model=Pixel 7
ro.build.type=user
persist.sys.fuse.passthrough.enable=true
@@tracefs
/sys/kernel/tracing
/sys/kernel/tracing instances
@@selinux
Enforcing
@@sdcard
/storage/emulated/0
@@mounts
/dev/block/dm-6 / erofs ro,seclabel,relatime 0 0
tmpfs /dev tmpfs rw,seclabel,nosuid,relatime,mode=755 0 0
/dev/block/dm-48 /data f2fs rw,lazytime,seclabel,nosuid,nodev,noatime,background_gc=on,discard 0 0
/dev/fuse /storage/emulated fuse rw,lazytime,nosuid,nodev,noexec,noatime,user_id=0,group_id=0,allow_other 0 0
/dev/block/dm-48 /storage/emulated/0/Android/data f2fs rw,lazytime,seclabel,nosuid,nodev,noatime 0 0
@@mountinfo
21 1 253:6 / / ro,relatime shared:1 - erofs /dev/block/dm-6 ro,seclabel
22 21 0:6 / /dev rw,nosuid,relatime shared:2 - tmpfs tmpfs rw,seclabel,mode=755
120 21 253:48 / /data rw,nosuid,nodev,noatime shared:60 - f2fs /dev/block/dm-48 rw,lazytime,seclabel
300 21 0:90 / /storage/emulated rw,nosuid,nodev,noexec,noatime shared:200 - fuse /dev/fuse rw,user_id=0
@@block
dm-48|253:48||  dm-5
dm-5|253:5|| sda34
dm-6|253:6|| sda12
sda|8:0||
sda12|8:12|sda|
sda34|8:34|sda|
loop0|7:0||
@@schedulers
/sys/block/sda/queue/scheduler [mq-deadline] kyber bfq none
/sys/block/dm-48/queue/scheduler none
/sys/block/loop0/queue/scheduler [none] mq-deadline
@@end
"""

ANDROID_9_SDCARDFS = """\
@@uid
2000
@@uname
4.9.112-perf+
aarch64
@@android
yes
@@props
ro.build.version.release=9
ro.build.version.sdk=28
ro.product.cpu.abi=arm64-v8a
ro.product.model=Moto G7
ro.build.type=user
persist.sys.fuse.passthrough.enable=
@@tracefs
/sys/kernel/debug/tracing
/sys/kernel/debug/tracing instances
@@selinux
Permissive
@@sdcard
/storage/emulated/0
@@mounts
/dev/root / ext4 ro,seclabel,relatime,data=ordered 0 0
/dev/block/bootdevice/by-name/userdata /data ext4 rw,seclabel,nosuid,nodev,noatime,noauto_da_alloc,data=ordered 0 0
/data/media /mnt/runtime/default/emulated sdcardfs rw,nosuid,nodev,noexec,noatime,fsuid=1023,fsgid=1023,gid=1015 0 0
/data/media /storage/emulated sdcardfs rw,nosuid,nodev,noexec,noatime,fsuid=1023,fsgid=1023,gid=1015 0 0
@@mountinfo
1 0 179:40 / / ro,relatime - ext4 /dev/root ro,seclabel
40 1 179:50 / /data rw,nosuid,nodev,noatime - ext4 /dev/block/bootdevice/by-name/userdata rw,seclabel
@@block
mmcblk0|179:0||
mmcblk0p40|179:40|mmcblk0|
mmcblk0p50|179:50|mmcblk0|
@@schedulers
/sys/block/mmcblk0/queue/scheduler noop [cfq]
@@end
"""


def test_facts_of_a_fuse_era_phone():
    f = parse_android_facts(PIXEL_14)
    assert (f["is_android"], f["android_version"], f["sdk"], f["model"], f["abi"]) == \
        (True, "14", 34, "Pixel 7", "arm64-v8a")
    assert (f["tracefs_path"], f["tracefs_instances"], f["selinux"]) == ("/sys/kernel/tracing", True, "enforcing")
    assert (f["sdcard_path"], f["sdcard_fstype"], f["sdcard_layer"], f["fuse_passthrough"]) == \
        ("/storage/emulated/0", "fuse", "fuse", True)
    assert (f["data_fstype"], f["data_source"]) == ("f2fs", "/dev/block/dm-48")
    assert f["data_block_devices"] == ["dm-48", "dm-5", "sda34", "sda"]  # two dm layers, the partition, the disk
    w = f["workdir_mount"]
    assert (w["mountpoint"], w["fstype"], w["disks"]) == ("/data", "f2fs", ["sda"])
    assert f["schedulers"] == {
        "sda": {"current": "mq-deadline", "available": ["mq-deadline", "kyber", "bfq", "none"]},
        "dm-48": {"current": None, "available": ["none"]},
    }
    assert f["default_workdir"] == "/data/local/tmp/mobiperf" and f["root"] is True
    assert {m["fstype"] for m in f["mounts"]} == {"erofs", "f2fs", "fuse"}
    assert f["sdcard_implementation"] == "fuse-passthrough"


def test_run_facts_say_who_else_traces_and_how_sdcard_is_served():
    # A Pixel with Perfetto's daemons up: tracefs belongs to root:readtracefs (3012), traced_probes holds it.
    text = PIXEL_14.replace("@@mounts", "@@fusefeatures\nfuse_bpf\nfuse_passthrough\n@@tracefsowner\n0:3012 664\n"
                            "@@tracers\n1289 traced_probes\n1290 traced\n@@mounts")
    f = run_facts(parse_android_facts(text))
    assert f["tracefs_owner"] == "0:3012 664"
    assert f["tracefs_users"] == [{"pid": 1289, "name": "traced_probes"}, {"pid": 1290, "name": "traced"}]
    assert (f["sdcard_implementation"], f["kernel_fuse_features"]) == ("fuse-passthrough",
                                                                       ["fuse_bpf", "fuse_passthrough"])
    assert (f["selinux"], f["abi"], f["android_version"]) == ("enforcing", "arm64-v8a", "14")
    older = run_facts(parse_android_facts(ANDROID_9_SDCARDFS))
    assert (older["sdcard_implementation"], older["tracefs_users"]) == ("sdcardfs", [])


def test_facts_of_an_sdcardfs_era_phone():
    f = parse_android_facts(ANDROID_9_SDCARDFS)
    assert (f["android_version"], f["sdk"], f["uid"], f["root"]) == ("9", 28, 2000, False)
    assert (f["tracefs_path"], f["selinux"]) == ("/sys/kernel/debug/tracing", "permissive")
    assert (f["sdcard_fstype"], f["sdcard_layer"], f["fuse_passthrough"]) == ("sdcardfs", "sdcardfs", None)
    assert (f["data_fstype"], f["data_source"]) == ("ext4", "/dev/block/bootdevice/by-name/userdata")
    assert f["data_block_devices"] == ["mmcblk0p50", "mmcblk0"]
    assert f["schedulers"]["mmcblk0"] == {"current": "cfq", "available": ["noop", "cfq"]}


# -- root ---------------------------------------------------------------------------------------------------------------

def test_root_when_adbd_runs_as_root(loopback_device):
    t = loopback_device.transport()
    assert (t.root_method, t.is_root) == ("adbd", True)


def test_no_root_for_the_shell_user(start_loopback, shared_tmp):
    t = start_loopback("--uid", str(SHELL_UID)).transport()
    assert t.root_method is None and t.run(["id", "-u"]).text.strip() == str(SHELL_UID)
    private = shared_tmp / "private"
    private.mkdir(mode=0o700)
    with pytest.raises(TargetError, match="Permission denied"):
        t.write_file(str(private / "knob"), b"1")


def test_root_through_aosp_su(start_loopback):
    t = start_loopback("--uid", str(SHELL_UID), "--su", "aosp").transport()
    assert t.root_method == "su 0"
    done = t.run(["sh", "-c", "id -u; echo 'it''s' \"$0\" >&2; exit 5"])
    assert (done.returncode, done.text, done.stderr) == (5, "0\n", b"its sh\n")


def test_root_through_su(start_loopback, shared_tmp):
    device = start_loopback("--uid", str(SHELL_UID), "--su", "magisk")
    t = device.transport()
    assert t.root_method == "su -c"
    assert t.run(["id", "-u"]).text.strip() == "0"
    private = shared_tmp / "private"
    private.mkdir(mode=0o700)
    t.write_file(str(private / "knob"), b"1")
    assert (private / "knob").read_bytes() == b"1"
    p = t.start(["sleep", "30"])
    with open(f"/proc/{p.pid}/status") as f:
        assert next(line for line in f if line.startswith("Uid:")).split()[1] == "0"
    assert p.kill() == -15
    never = device.transport(root="never")
    assert never.root_method is None and never.run(["id", "-u"]).text.strip() == str(SHELL_UID)


def test_a_su_waiting_for_a_tap_does_not_stall_the_probe(start_loopback):
    t = start_loopback("--uid", str(SHELL_UID), "--su", "hang").transport(root_probe_timeout=0.5)
    t0 = time.monotonic()
    assert t.root_method is None
    assert time.monotonic() - t0 < 3  # one timed-out su, not one per su syntax
    assert t.run(["id", "-u"]).text.strip() == str(SHELL_UID)


def test_require_root_uses_adb_root_and_close_undoes_it(start_loopback):
    device = start_loopback("--uid", str(SHELL_UID), "--root-restarts")
    t = device.transport(root="require")
    assert t.root_method == "adb root"
    assert t.run(["id", "-u"]).text.strip() == "0"
    t.close()
    assert device.transport(root="never").run(["id", "-u"]).text.strip() == str(SHELL_UID)


def test_require_root_on_a_production_build_is_a_clear_error(start_loopback):
    t = start_loopback("--uid", str(SHELL_UID)).transport(root="require")
    with pytest.raises(TargetError, match="cannot run as root in production builds"):
        t.root_method


# -- reference binaries ---------------------------------------------------------------------------------------------

@pytest.fixture
def fake_bin(tmp_path) -> Path:
    """A reference-impl/bin layout with a tiny 'binary' (a script) for the native ABI and none for arm64."""
    d = tmp_path / "bin"
    d.mkdir()
    tool = d / "fakegen"
    tool.write_text('#!/bin/sh\necho "fakegen $*"\n')
    (d / "aarch64").mkdir()
    return d


def native_abi() -> str:
    return {"x86_64": "x86_64", "aarch64": "arm64-v8a"}[os.uname().machine]


def test_push_reference_binaries_runs_them_and_cleans_up(start_loopback, fake_bin, shared_tmp):
    t = start_loopback("--uid", str(SHELL_UID)).transport()
    abi = android_facts(t)["abi"]
    workdir = str(shared_tmp / "work dir; 'x'")
    with push_reference_binaries(t, ["fakegen"], abi, workdir, bin_dir=fake_bin) as remote:
        assert remote == {"fakegen": f"{workdir}/fakegen"}
        mode = os.stat(remote["fakegen"]).st_mode
        assert stat.S_IMODE(mode) == 0o755 and os.stat(remote["fakegen"]).st_uid == SHELL_UID
        assert t.run([remote["fakegen"], "a b"]).text == "fakegen a b\n"
    assert not os.path.exists(workdir)  # the binary and the workdir it created are gone


def test_push_reference_binaries_keep_and_cleanup_on_error(loopback_device, fake_bin, shared_tmp):
    t = loopback_device.transport()
    (shared_tmp / "existing").mkdir()
    kept_dir = str(shared_tmp / "existing")
    with push_reference_binaries(t, ["fakegen"], native_abi(), kept_dir, keep=True, bin_dir=fake_bin) as remote:
        pass
    assert os.path.exists(remote["fakegen"])
    for interruption in (RuntimeError("workload failed"), KeyboardInterrupt()):  # a failure, and Ctrl-C
        with pytest.raises(type(interruption)):
            with push_reference_binaries(t, ["fakegen"], native_abi(), kept_dir, bin_dir=fake_bin) as again:
                assert os.path.exists(again["fakegen"])
                raise interruption
        assert not os.path.exists(remote["fakegen"]) and os.path.isdir(kept_dir)  # a workdir it found stays


def test_push_reference_binaries_for_an_unbuilt_abi(loopback_device, fake_bin):
    with pytest.raises(TargetError, match=r"not built .* run `make -C reference-impl ARCH=aarch64`"):
        with push_reference_binaries(loopback_device.transport(), ["fakegen"], "arm64-v8a", "/tmp/x",
                                     bin_dir=fake_bin):
            pass
    with pytest.raises(TargetError, match=r"no reference builds for ABI 'mips': the Makefile builds "
                                          r"`make -C reference-impl ARCH=aarch64` \(arm64-v8a\)"):
        reference_binary_path("fakegen", "mips", fake_bin)
    assert reference_binary_path("mobibench", "arm64-v8a") == reference_bin_dir() / "aarch64" / "mobibench"


def test_the_real_generator_runs_on_the_device_and_its_result_comes_back(start_loopback, shared_tmp):
    local = reference_bin_dir() / "mobibench"
    if not local.is_file():
        pytest.skip("reference-impl/bin/mobibench is not built (make -C reference-impl)")
    t = start_loopback("--uid", str(SHELL_UID)).transport()
    workdir = str(shared_tmp / "mobiperf work")
    out = shared_tmp / "host" / "stdout"
    out.parent.mkdir()
    with push_reference_binaries(t, ["mobibench"], android_facts(t)["abi"], workdir) as remote:
        pushed = Path(remote["mobibench"])
        assert hashlib.sha256(pushed.read_bytes()).digest() == hashlib.sha256(local.read_bytes()).digest()
        run = t.start([remote["mobibench"], "-p", f"{workdir}/data", "-f", "256", "-r", "4", "-a", "0", "-y", "2",
                       f"--json={workdir}/result.json"], stdout_path=out)
        assert run.wait(60) == 0
        t.pull(f"{workdir}/result.json", shared_tmp / "host" / "result.json")
        t.run(["rm", "-rf", f"{workdir}/data", f"{workdir}/result.json"]).check()
    result = json.loads((shared_tmp / "host" / "result.json").read_text())
    assert (result["config"]["file_kb"], result["config"]["io_count"], result["config"]["sync_mode"]) == (256, 64, 2)
    assert result["results"]["latency_ns"]["count"] == 64
    assert "Messurement Result" in out.read_text()  # the original's spelling, streamed from the device
    assert not pushed.exists() and not os.path.exists(workdir)


# -- the lead's probe over adb, and target specs ---------------------------------------------------------------------

def test_probe_over_adb_matches_the_local_probe(loopback_device):
    from mobiperf.target.probe import probe

    over_adb = probe(loopback_device.transport()).as_dict()
    local = probe(LocalTransport()).as_dict()
    assert over_adb.pop("target") == f"adb:{loopback_device.serial}" and local.pop("target") == "local"
    assert over_adb == local


def test_target_spec_selects_the_device_and_server(loopback_device, monkeypatch):
    monkeypatch.setenv("ANDROID_ADB_SERVER_PORT", str(loopback_device.server_port))
    t = from_target_spec(f"adb:{loopback_device.serial}", adb=loopback_device.server.adb)
    assert (t.serial, t.server_port, t.name) == (loopback_device.serial, loopback_device.server_port,
                                                 f"adb:{loopback_device.serial}")
    assert t.run(["echo", "ok"]).text == "ok\n"
    with pytest.raises(ValueError):
        from_target_spec("local")


def test_no_serial_with_several_devices_is_a_clear_error(adb_server, loopback_device, start_loopback):
    other = start_loopback()
    with pytest.raises(TargetError, match=f"several adb devices.*{other.serial}"):
        from_target_spec("adb", adb=adb_server.adb, server_port=adb_server.port)
