"""fsx-style random operations on bFUSE mounts, compared with a reference model and with the native file.

Default run: 10,000 operations with the buffer on, plus shorter runs of the other configurations. Soak: set
BFUSE_FSX_OPS (e.g. 100000) to run the buffered configurations that long.
"""

from __future__ import annotations

import os

import pytest

from conftest import needs_fuse
from fsx_model import run_fsx
from bfuse_mounts import bfuse_mount, bfuse_binary  # noqa: F401  (fixtures)

pytestmark = needs_fuse

SOAK_OPS = int(os.environ.get("BFUSE_FSX_OPS", "0"))


KIB = 1024
SMALL = (64 * KIB, 512 * KIB)        # fsx_model's defaults: max_op, max_len
# writes up to 768 KiB in a 4 MiB file: 512 KiB requests, kept in their receive buffers (adopted) and coalesced
LARGE = (768 * KIB, 4096 * KIB)


@pytest.mark.parametrize("options, ops, seed, sizes", [
    ("preset=bfuse", 10_000, 1, SMALL),
    ("preset=bfuse", 2_000, 8, LARGE),                 # spliced in, read from the pipe into pool buffers
    ("preset=bfuse,splice=0", 2_000, 12, LARGE),       # fusecore's loop: receive buffers adopted
    ("preset=bfuse,splice=0", 3_000, 13, SMALL),
    # 128 KiB requests (receive buffers of 136 KiB: writes >= 68 KiB are adopted), 256 KiB entries cut at
    # 64 KiB mod 256 KiB, a 1 ms management thread: flushes race with every other operation
    ("preset=bfuse,splice=0,io_unit=128k,entry=256k,buffer=1M,flush_ms=1,entry_phase=64k", 3_000, 9,
     (256 * KIB, 1024 * KIB)),
    # small entries and a 1 ms management thread: flushes race with every other operation
    ("preset=bfuse,io_unit=64k,entry=64k,buffer=256k,flush_ms=1", 5_000, 2, SMALL),
    ("preset=bfuse,splice=0,own_loop=0", 2_000, 10, LARGE),   # libfuse's loop: large writes copied
    ("preset=bfuse,writeback_cache=1", 3_000, 3, SMALL),
    ("preset=bfuse,threads=1", 2_000, 5, SMALL),
    ("preset=legacy", 2_000, 6, SMALL),
    ("preset=zerocopy", 2_000, 7, SMALL),
])
def test_fsx_against_the_model(bfuse_mount, options, ops, seed, sizes):
    if SOAK_OPS and "preset=bfuse" in options:
        # large operations move ~25x the bytes each: a fifth of the operations still covers many GiB
        ops = SOAK_OPS if sizes == SMALL else SOAK_OPS // 5
    max_op, max_len = sizes
    mount = bfuse_mount(options)
    result = run_fsx(mount.mountpoint, ops=ops, seed=seed, native_dir=mount.source, max_op=max_op, max_len=max_len)
    assert result.failure == "", result.summary()
    assert result.miscompares == 0
    assert result.ops_done == ops
    assert result.op_counts["write"] > 0 and result.op_counts["mmap_write"] > 0
    counters = mount.unmount()["counters"]
    assert counters["deferred_write_errors"] == 0
    if "preset=bfuse" in options:
        assert counters["buffered_writes"] > 0
    if sizes != SMALL and "preset=bfuse" in options and "writeback_cache" not in options:
        kept = counters["adopted_writes"] if "splice=0" in options and "own_loop=0" not in options \
            else counters["copied_writes"]
        assert kept > 0, "no large write took the segment path"
