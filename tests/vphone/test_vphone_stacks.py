"""The other FUSE daemons over the virtual phone's f2fs /data (`+fjord`, `+fuse`: Fjord and the legacy daemon),
the same 100 fdatasyncs of 4 KiB, every call's nest checked as bFUSE's is (tests/vphone/test_vphone_run.py), and
nothing left on the phone. A minute each under TCG: marked slow."""

from __future__ import annotations

import json

import pytest

from android_device import mobiperf_via
from layer_checks import WORKLOAD, check_fuse_nest
from vphone_fixtures import PhoneDevice

pytest_plugins = ["adb_fixtures", "vphone_fixtures"]


@pytest.mark.slow
@pytest.mark.parametrize("layer", ["fjord", "fuse"])
def test_each_daemon_nests_every_fdatasync_and_leaves_nothing(vphone: PhoneDevice, tmp_path, layer):
    out = tmp_path / layer
    done = mobiperf_via(vphone, "run", "-t", f"adb:{vphone.serial}", "--stack", f"dir:/data/local/tmp/s+{layer}",
                        "-o", str(out), "--no-report", "--", *WORKLOAD, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    meta = json.loads((out / "run.json").read_text())
    assert meta["repetitions"][0]["stack"]["layers"][0]["daemon"] == ("fjord" if layer == "fjord" else "bfuse")
    check_fuse_nest(out, events_fall_short="this kernel has no FUSE events")
    left = vphone.shell("su 0 sh -c 'ls -A /data/local/tmp; grep -c /data/local/tmp /proc/mounts'").stdout.split()
    assert left == ["0"], left
