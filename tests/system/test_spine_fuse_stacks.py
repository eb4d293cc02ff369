"""FUSE layers in the stack spec: the reference daemons mount the way Android mounts /sdcard over /data/media,
and their counters and the kernel's FUSE requests land in the run."""

from __future__ import annotations

import json
import subprocess
import sys

import polars as pl

from conftest import needs_fuse, needs_root

pytestmark = [needs_root, needs_fuse]
MOBIPERF = [sys.executable, "-m", "mobiperf"]


def run(out, stack: str, *command: str) -> dict:
    done = subprocess.run([*MOBIPERF, "run", "--stack", stack, "-o", str(out), "--", *command],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads((out / "run.json").read_text())


def test_legacy_fuse_splits_writes_into_4k_requests(tmp_path, reference_binary, clean_machine):
    reference_binary("bfuse")
    meta = run(tmp_path / "legacy", "ext4+fuse", "dd", "if=/dev/zero", "of=f", "bs=512k", "count=8", "conv=fsync")
    counters = meta["repetitions"][0]["counters"]["fuse-counters"]
    assert counters["preset"] == "legacy"
    assert counters["ops"]["write"] == {"requests": 1024, "bytes": 4 << 20}  # 4 MiB in 4 KiB FUSE writes
    fuse = pl.read_parquet(tmp_path / "legacy" / "tables" / "fuse_req.parquet")
    writes = fuse.filter(pl.col("opcode_name") == "FUSE_WRITE")
    assert len(writes) == 1024 and set(writes["len_bytes"]) == {4096 + 80}  # payload + the 80-byte header
    assert meta["repetitions"][0]["stack"]["workdir"].endswith("/sdcard")


def test_fjord_relaxes_fsync_in_its_whitelist(tmp_path, reference_binary, clean_machine):
    reference_binary("fjord")
    meta = run(tmp_path / "fjord", "ext4+fjord:preset=fjord-ram,whitelist=cache", "sh", "-c",
               "mkdir -p cache && mobibench -p cache -d 0 -n 50 -j 1 && mobibench -p critical -d 0 -n 50 -j 1")
    policy = meta["repetitions"][0]["counters"]["fjord-counters"]["policy"]
    assert policy["fjord_preset"] == "fjord-ram" and policy["config"]["whitelist"] == ["cache"]
    assert policy["fsyncs_relaxed"] >= 50 * 2   # the whitelisted database's journal and db syncs
    assert policy["fsyncs_honoured"] >= 50 * 2  # the critical one keeps full durability
