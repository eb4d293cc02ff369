"""The Android-shaped test device itself (tests/support/android_device.py), through the real adb client: what makes it
look like a phone to mobiperf, and what a phone does not have."""

from __future__ import annotations

import os
import time

from android_device import AndroidDevice
from conftest import needs_root
from mobiperf.target.android import android_facts

pytest_plugins = ["adb_fixtures", "android_device"]
pytestmark = needs_root


def test_it_looks_like_a_phone(android_device: AndroidDevice):
    said = android_device.shell("id -u; echo $PATH; uname -m; getprop ro.product.cpu.abi; readlink -f /sdcard; "
                                "command -v fusermount3 fusermount; ls /bin /tmp 2>&1 | wc -l").stdout.split("\n")
    uid, path, machine, abi, sdcard = said[:5]
    assert uid == "2000" and path.split(":")[4:6] == ["/system/bin", "/system/xbin"]
    assert (machine, abi, sdcard) == ("x86_64", "arm64-v8a", "/storage/emulated/0")  # uname -m is not the ABI
    assert said[5] == "2"   # no fusermount (the host's setuid one must not leak in), no /bin, no /tmp: 2 errors
    assert android_device.shell("readlink /system/bin/sh; echo $KSH_VERSION").stdout.split()[0] == "mksh"


def test_its_su_is_a_userdebug_builds(android_device: AndroidDevice):
    assert android_device.shell("su 0 id -u").stdout.strip() == "0"
    refused = android_device.shell("su -c 'id -u'")
    assert refused.returncode == 1 and "unknown user -c" in refused.stderr   # Magisk's style is not this su's


def test_shared_storage_is_noexec_and_data_local_tmp_is_the_shells(android_device: AndroidDevice):
    done = android_device.shell("cp /system/bin/mksh /sdcard/t && /sdcard/t -c true; echo rc=$?; rm /sdcard/t; "
                                "cp /system/bin/mksh /data/local/tmp/t && /data/local/tmp/t -c true; echo rc=$?; "
                                "rm /data/local/tmp/t")
    assert done.stdout.split() == ["rc=126", "rc=0"]   # binaries cannot run from /sdcard


def test_aarch64_binaries_run_through_qemu_and_pidof_cannot_find_them(android_device: AndroidDevice):
    from mobiperf.core.binaries import reference_bin_dir

    generator = reference_bin_dir() / "aarch64" / "mobibench"
    assert generator.exists(), "not built: make -C reference-impl ARCH=aarch64 (make setup does)"
    pushed = android_device.server.client("-s", android_device.serial, "push", str(generator), "/data/local/tmp/mb")
    assert pushed.returncode == 0, pushed.stderr
    started = time.monotonic()
    done = android_device.shell(
        # two SQLite inserts 1.5 s apart (-i): alive for the checks whatever the machine's speed
        "mkdir -p /data/local/tmp/mbd; /data/local/tmp/mb -p /data/local/tmp/mbd -d 0 -n 2 -i 1500 --no-drop-caches "
        ">/dev/null 2>&1 & p=$!; sleep 0.3; echo \"pidof=$(pidof mb)\"; cat /proc/$p/comm; ls -l /proc/$p/exe; "
        "wait $p; echo rc=$?; rm -rf /data/local/tmp/mbd /data/local/tmp/mb")
    lines = done.stdout.splitlines()
    assert time.monotonic() - started < 60 and lines[-1] == "rc=0", done.stdout + done.stderr
    # The kernel runs it through qemu (the process's exe), under its own name, and pidof does not see it:
    # mobiperf tracks its daemons by pid file.
    assert lines[0] == "pidof=" and lines[1] == "mb" and lines[2].endswith("-> /usr/bin/qemu-aarch64-static")


def test_two_devices_each_have_their_own_root_and_su(start_android):
    one, two = start_android(), start_android()
    assert one.root != two.root and one.namespace != two.namespace
    for device in (one, two):
        facts = android_facts(device.transport())
        assert (facts["is_android"], facts["uid"], facts["root"]) == (True, 0, True)   # through each one's su 0
    one.stop()
    assert android_facts(two.transport())["root"] is True   # the other's su still works
    assert not one.root.exists() and not os.path.exists(one.image)
