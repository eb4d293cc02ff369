"""fsx-style random operations through every Fjord preset, compared with a reference model (tests/support/fsx_model.py).

Critical files are also compared with the native file after every fsync/fdatasync (acknowledged data has left
Fjord's RAM) and after close. Whitelisted files (fjord-*) are checked through the mount only: their fsync is relaxed
by design. A short flush_ms keeps timed evictions racing with the operations. The >= 100k-operation soak per preset
is bench/fjord_bench.py --soak.
"""

from __future__ import annotations

import pytest

from conftest import needs_fuse, needs_root
from fsx_model import run_fsx
from test_fjord_mount import PRESETS, fjord_mount  # noqa: F401  (fixture)

pytestmark = [needs_root, needs_fuse]

OPS = 5000


@pytest.mark.parametrize("preset", PRESETS)
def test_fsx_through_each_preset(fjord_mount, preset):
    m = fjord_mount(preset, whitelist="cache", flush_ms=40, log_size="8M", checkpoint_ms=200)
    result = run_fsx(m.mountpoint, ops=OPS, seed=101, native_dir=m.source)
    assert result.miscompares == 0, result.summary()
    assert result.ops_done == OPS
    if preset.startswith("fjord-"):
        (m.mountpoint / "cache").mkdir()
        relaxed = run_fsx(m.mountpoint / "cache", ops=OPS // 2, seed=202)
        assert relaxed.miscompares == 0, relaxed.summary()
    policy = m.unmount()["policy"]
    assert policy["fsyncs_failed"] == 0
    if preset != "native":
        # the run exercised the mechanisms, not just the passthrough
        assert policy["writes_buffered"] + policy["writes_logged"] > 500
    if preset.startswith("fjord-"):
        assert policy["fsyncs_relaxed"] > 50
