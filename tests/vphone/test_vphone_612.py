"""The second phone: the same Android userland on Debian's 6.12 kernel (Android 16's). Its FUSE events exist, but
its fuse_request_send fires before the request has its id (`req 0`): the FUSE layer needs more than the events
(pairing by order, or the daemon's request log). Another boot and run under TCG: marked slow."""

from __future__ import annotations

import json

import pytest

from android_device import mobiperf_via
from layer_checks import WORKLOAD, check_fuse_nest
from vphone_fixtures import PhoneDevice

pytest_plugins = ["adb_fixtures", "vphone_fixtures"]


@pytest.mark.slow
def test_the_612_phone_is_android_on_its_kernel_with_fuse_events(vphone_612: PhoneDevice):
    kernel = vphone_612.shell("uname -r").stdout.strip()
    assert kernel == vphone_612.kernel and kernel.startswith("6.12.")
    done = mobiperf_via(vphone_612, "probe", "-t", f"adb:{vphone_612.serial}", "--format", "json")
    caps = json.loads(done.stdout)
    assert {"fuse_request_send", "fuse_request_end"} <= set(caps["events"]["fuse"])
    assert caps["android"]["data_fstype"] == "f2fs" and caps["android"]["android_version"] == "14"


@pytest.mark.slow
def test_a_bfuse_run_on_612_nests_every_fdatasync(vphone_612: PhoneDevice, tmp_path):
    out = tmp_path / "bfuse612"
    done = mobiperf_via(vphone_612, "run", "-t", f"adb:{vphone_612.serial}", "--stack",
                        "dir:/data/local/tmp/x+bfuse", "-o", str(out), "--no-report", "--", *WORKLOAD, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    check_fuse_nest(out, events_fall_short="this kernel's fuse_request_send carries no request id")
