"""A loop device keeps its IO scheduler and BDI dirty limits after `losetup -d`; mobiperf resets them before
using a loop device (and records what it found), and `mobiperf doctor` lists detached ones left changed."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import needs_root
from mobiperf.stack.queue_settings import loop_settings, reset_loop_device, stale_loop_devices
from mobiperf.target.transport import LocalTransport

pytestmark = needs_root


def _set(device: str) -> None:
    name = Path(device).name
    dev = Path(f"/sys/block/{name}/dev").read_text().strip()
    Path(f"/sys/block/{name}/queue/scheduler").write_text("bfq")
    Path(f"/sys/class/bdi/{dev}/max_ratio_fine").write_text("20000")
    Path(f"/sys/class/bdi/{dev}/min_ratio_fine").write_text("10000")
    Path(f"/sys/class/bdi/{dev}/strict_limit").write_text("1")


@pytest.fixture
def own_loop(tmp_path):
    image = tmp_path / "img"
    image.write_bytes(b"")
    subprocess.run(["truncate", "-s", "16M", str(image)], check=True)
    device = subprocess.run(["losetup", "--find", "--show", str(image)], capture_output=True, text=True,
                            check=True, timeout=30).stdout.strip()
    yield device
    subprocess.run(["losetup", "-d", device], timeout=30)


def test_reset_gives_a_loop_device_the_settings_of_a_fresh_one(own_loop):
    t = LocalTransport()
    _set(own_loop)
    found = reset_loop_device(t, own_loop)
    assert found == {"scheduler": "bfq", "strict_limit": "1", "min_ratio_fine": "10000",
                     "max_ratio_fine": "20000"}
    assert loop_settings(t, own_loop) == {"scheduler": "none", "min_ratio_fine": "0", "max_ratio_fine": "1000000",
                                          "strict_limit": "0"}
    assert reset_loop_device(t, own_loop) == {}   # fresh: nothing to reset, nothing to say


def test_stale_settings_of_a_detached_loop_device_are_listed(own_loop):
    t = LocalTransport()
    subprocess.run(["losetup", "-d", own_loop], check=True, timeout=30)
    try:
        _set(own_loop)
        stale = stale_loop_devices(t)
        if Path(f"/sys/block/{Path(own_loop).name}/loop/backing_file").exists():
            pytest.skip(f"another process attached {own_loop} meanwhile")
        assert stale[own_loop] == {"scheduler": "bfq", "strict_limit": "1", "min_ratio_fine": "10000",
                                   "max_ratio_fine": "20000"}
    finally:
        if not Path(f"/sys/block/{Path(own_loop).name}/loop/backing_file").exists():
            reset_loop_device(t, own_loop)
