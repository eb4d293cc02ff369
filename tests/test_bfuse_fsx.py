"""fsx-style random operations on bFUSE mounts, compared with a reference model and with the native file.

Default run: 10,000 operations with the buffer on, plus shorter runs of the other configurations. Soak: set
BFUSE_FSX_OPS (e.g. 100000) to run the buffered configurations that long.
"""

from __future__ import annotations

import os

import pytest

from conftest import needs_fuse
from fsx_model import run_fsx
from test_bfuse_mount import bfuse_mount, bfuse_binary  # noqa: F401  (fixtures)

pytestmark = needs_fuse

SOAK_OPS = int(os.environ.get("BFUSE_FSX_OPS", "0"))


@pytest.mark.parametrize("options, ops, seed", [
    ("preset=bfuse", 10_000, 1),
    # small entries and a 1 ms management thread: flushes race with every other operation
    ("preset=bfuse,io_unit=64k,entry=64k,buffer=256k,flush_ms=1", 5_000, 2),
    ("preset=bfuse,writeback_cache=1", 3_000, 3),
    ("preset=bfuse,splice=1", 3_000, 4),
    ("preset=bfuse,threads=1", 2_000, 5),
    ("preset=legacy", 2_000, 6),
    ("preset=zerocopy", 2_000, 7),
])
def test_fsx_against_the_model(bfuse_mount, options, ops, seed):
    if SOAK_OPS and "preset=bfuse" in options:
        ops = SOAK_OPS
    mount = bfuse_mount(options)
    result = run_fsx(mount.mountpoint, ops=ops, seed=seed, native_dir=mount.source)
    assert result.failure == "", result.summary()
    assert result.miscompares == 0
    assert result.ops_done == ops
    assert result.op_counts["write"] > 0 and result.op_counts["mmap_write"] > 0
    counters = mount.unmount()["counters"]
    assert counters["deferred_write_errors"] == 0
    if "preset=bfuse" in options:
        assert counters["buffered_writes"] > 0
