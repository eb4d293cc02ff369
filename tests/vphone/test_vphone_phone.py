"""The virtual phone itself (tests/support/vphone), through the real adb client: a kernel of its own, Android 14's
userland, /data on f2fs, /sdcard served by a FUSE daemon that is not mobiperf's, adbd reached only through the
port QEMU forwards on 127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from vphone_fixtures import PhoneDevice

pytest_plugins = ["adb_fixtures", "vphone_fixtures"]


def test_it_is_android_14_on_a_kernel_of_its_own(vphone: PhoneDevice):
    said = vphone.shell("uname -r; getprop ro.build.version.release; getprop ro.build.version.sdk; "
                        "getprop ro.product.cpu.abi; id -u; readlink /system/bin/sh; echo $KSH_VERSION").stdout
    kernel, release, sdk, abi, uid, sh, ksh = said.split("\n")[:7]
    assert kernel == vphone.kernel and kernel.startswith("6.1.") and kernel != os.uname().release
    assert (release, sdk, abi, uid, sh) == ("14", "34", "x86_64", "2000", "mksh") and "MIRBSD KSH" in ksh


def test_its_su_is_a_userdebug_builds_and_it_has_no_fusermount(vphone: PhoneDevice):
    assert vphone.shell("su 0 id -u").stdout.strip() == "0"
    refused = vphone.shell("su -c 'id -u'")
    assert refused.returncode == 1 and "unknown user -c" in refused.stderr
    assert vphone.shell("command -v fusermount fusermount3; echo $?").stdout.strip() == "1"


def test_data_is_f2fs_and_sdcard_a_fuse_daemon_over_data_media(vphone: PhoneDevice):
    mounts = {line.split()[1]: line.split() for line in vphone.shell("cat /proc/mounts").stdout.splitlines()}
    assert mounts["/data"][2] == "f2fs" and mounts["/"][2] == "erofs" and "ro" in mounts["/"][3].split(",")
    assert mounts["/storage/emulated"][2] == "fuse" and "noexec" in mounts["/storage/emulated"][3].split(",")
    assert vphone.shell("readlink -f /sdcard").stdout.strip() == "/storage/emulated/0"
    # A file written through /sdcard lands in /data/media/0, owned by media_rw as MediaProvider's files are.
    done = vphone.shell("echo hello > /sdcard/t.txt && su 0 stat -c '%u:%g %s' /data/media/0/t.txt; "
                        "cp /system/bin/mksh /sdcard/t && /sdcard/t -c true; echo rc=$?; rm /sdcard/t /sdcard/t.txt")
    assert done.stdout.split() == ["1023:1023", "6", "rc=126"]    # and nothing runs from shared storage
    # The daemon holding /dev/fuse is Debian's bindfs, not a mobiperf daemon.
    holders = vphone.shell("su 0 sh -c 'for p in /proc/[0-9]*; do ls -l $p/fd 2>/dev/null | grep -q /dev/fuse "
                           "&& cat $p/comm; done'").stdout.split()
    assert holders == ["bindfs"]


def test_adbd_is_reached_only_through_qemus_port_on_the_loopback_address(vphone: PhoneDevice):
    pid = vphone.phone.process.pid
    inodes = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
    listening = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in open(table).read().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and f"socket:[{fields[9]}]" in inodes:   # LISTEN, QEMU's own socket
                listening.append(fields[1])
    assert listening == [f"0100007F:{vphone.phone.port:04X}"]     # 127.0.0.1:PORT and nothing else


def test_probe_says_what_the_phone_has(vphone: PhoneDevice):
    env = dict(os.environ, ANDROID_ADB_SERVER_PORT=str(vphone.server_port))
    done = subprocess.run([sys.executable, "-m", "mobiperf", "probe", "-t", f"adb:{vphone.serial}", "--format",
                           "json"], capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr
    caps = json.loads(done.stdout)
    assert caps["kernel"] == vphone.kernel and caps["is_root"] and caps["tracefs_writable"]
    assert "fuse" not in caps["events"] and "f2fs_sync_file_enter" in caps["events"]["f2fs"]
    android = caps["android"]
    assert (android["android_version"], android["sdk"], android["abi"]) == ("14", 34, "x86_64")
    assert (android["data_fstype"], android["sdcard_implementation"], android["selinux"]) == \
        ("f2fs", "fuse", "disabled")
