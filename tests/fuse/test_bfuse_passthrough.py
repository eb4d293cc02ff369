"""bFUSE's `passthrough` preset: kernel FUSE passthrough (Linux >= 6.9) on fusecore's own loop, today's /sdcard.

A passthrough-opened file's data never reaches the daemon: it sees no READ and no WRITE request (its counters, and
the kernel's fuse_request_* events of a traced run), while the same workload on preset=nobuf sends it every byte.
Data goes through intact (written, read back, mmap'd, the same file opened twice at once: one backing file per
inode). Refused with the reason: with the writeback cache or splice, and on a kernel older than 6.9 (uname made
to say 2.6 by setarch). fsx against the model: a short run by default, 100,000 operations as a soak
(BFUSE_FSX_OPS=100000, `-m slow`).
"""

from __future__ import annotations

import json
import mmap
import os
import re
import subprocess
import sys

import polars as pl
import pytest

from conftest import needs_fuse, needs_root
from fsx_model import run_fsx
from bfuse_mounts import bfuse_binary, bfuse_mount, start_bfuse  # noqa: F401  (fixtures)

MiB = 1 << 20
FUSE_READ, FUSE_WRITE = 15, 16
SOAK_OPS = int(os.environ.get("BFUSE_FSX_OPS", "0")) or 100_000


def _kernel_has_passthrough() -> bool:
    m = re.match(r"(\d+)\.(\d+)", os.uname().release)
    return bool(m) and (int(m.group(1)), int(m.group(2))) >= (6, 9)


pytestmark = [needs_fuse, needs_root,
              pytest.mark.skipif(not _kernel_has_passthrough(), reason="FUSE passthrough needs Linux >= 6.9")]


def write_read_back(mountpoint, data: bytes) -> bytes:
    path = mountpoint / "f"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for off in range(0, len(data), 512 << 10):
            os.write(fd, data[off:off + (512 << 10)])
        os.fsync(fd)
    finally:
        os.close(fd)
    with open(path, "rb") as f:
        return f.read()


def test_the_daemon_sees_no_read_or_write_of_a_passthrough_file(bfuse_mount):
    data = os.urandom(4 * MiB)
    pt = bfuse_mount("preset=passthrough", name="pt")
    assert write_read_back(pt.mountpoint, data) == data
    assert (pt.source / "f").read_bytes() == data
    # Two descriptors of one inode at once share its backing file; mmap goes through it too.
    with open(pt.mountpoint / "f", "r+b") as a, open(pt.mountpoint / "f", "rb") as b:
        with mmap.mmap(a.fileno(), 0) as m:
            m[:5] = b"hello"
            m.flush()
        assert b.read(5) == b"hello"
    counters = pt.unmount()
    assert counters["config"]["passthrough"] is True and counters["config"]["own_loop"] is True
    assert "read" not in counters["ops"] and "write" not in counters["ops"]   # no request ever reached it
    c = counters["counters"]
    assert (c["daemon_pwrite_calls"], c["daemon_pread_calls"], c["passthrough_fallbacks"]) == (0, 0, 0)
    assert c["passthrough_opens"] == counters["ops"]["open"]["requests"] + counters["ops"]["create"]["requests"] >= 4
    assert (pt.source / "f").read_bytes()[:5] == b"hello"
    # The control: without passthrough the same workload sends the daemon every byte, both ways.
    nobuf = bfuse_mount("preset=nobuf", name="nobuf")
    assert write_read_back(nobuf.mountpoint, data) == data
    ops = nobuf.unmount()["ops"]
    assert ops["write"] == {"requests": 8, "bytes": 4 * MiB} and ops["read"]["bytes"] == 4 * MiB


def test_a_traced_host_stack_shows_no_fuse_data_requests(tmp_path, clean_machine):
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "mobiperf", "run", "--stack", "ext4+bfuse:preset=passthrough",
                           "--image-size", "128M", "-o", str(out), "--no-report", "--", "sh", "-c",
                           "dd if=/dev/urandom of=f bs=512k count=8 conv=fsync status=none && cat f > /dev/null"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    reqs = pl.read_parquet(out / "tables" / "fuse_req.parquet")
    assert len(reqs) > 0 and reqs.filter(pl.col("opcode").is_in([FUSE_READ, FUSE_WRITE])).is_empty()
    assert set(reqs["opcode_name"]) >= {"FUSE_CREATE", "FUSE_OPEN", "FUSE_FSYNC", "FUSE_RELEASE"}
    blocks = pl.read_parquet(out / "results" / "block_io.parquet").filter(pl.col("op") == "write")
    assert blocks["size_bytes"].sum() >= 4 * MiB   # the data went to ext4, not through the daemon
    counters = json.loads((out / "run.json").read_text())["repetitions"][0]["counters"]["bfuse-counters"]
    assert counters["counters"]["passthrough_opens"] >= 2 and "write" not in counters["ops"]


def test_refusals_say_why(bfuse_binary, tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "mnt").mkdir()
    for options, said in (("preset=passthrough,writeback_cache=1", "does not combine it with writeback_cache"),
                          ("preset=passthrough,splice=1", "splice=1 does not apply")):
        done = subprocess.run([str(bfuse_binary), "-f", "-o", options, str(tmp_path / "src"), str(tmp_path / "mnt")],
                              capture_output=True, text=True, timeout=30)
        assert done.returncode == 1 and said in done.stderr, done.stderr
    # A kernel older than 6.9: uname says 2.6.x under `setarch --uname-2.6`.
    done = subprocess.run(["setarch", os.uname().machine, "--uname-2.6", str(bfuse_binary), "-f", "-o",
                           "preset=passthrough", str(tmp_path / "src"), str(tmp_path / "mnt")],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 1
    assert re.search(r"passthrough needs FUSE passthrough .*Linux 6\.9 or later; this kernel is 2\.6\.", done.stderr)
    assert not os.path.ismount(tmp_path / "mnt")   # refused before anything was mounted


@pytest.mark.parametrize("ops, seed", [
    (2_000, 21),
    pytest.param(SOAK_OPS, 22, marks=pytest.mark.slow, id="soak"),
])
def test_fsx_against_the_model(bfuse_mount, ops, seed):
    mount = bfuse_mount("preset=passthrough")
    result = run_fsx(mount.mountpoint, ops=ops, seed=seed, native_dir=mount.source)
    assert result.failure == "", result.summary()
    assert result.miscompares == 0 and result.ops_done == ops
    assert result.op_counts["write"] > 0 and result.op_counts["mmap_write"] > 0
    counters = mount.unmount()
    assert "write" not in counters["ops"] and "read" not in counters["ops"]
    assert counters["counters"]["passthrough_opens"] > 0 and counters["counters"]["passthrough_fallbacks"] == 0
