"""fusecore's request log (-o requests=PATH, reference-impl/fusecore/fc_reqlog.c) on real mounts, read back by
mobiperf's parser (collectors/parse/fuse_daemon_log.py): a workload whose requests are known, 8 writes of 4 KiB
each followed by fdatasync (`dd bs=4k count=8 oflag=dsync`), gives one WRITE of 4096 bytes at each offset and one
FSYNC after each, all from dd's thread (the header's pid), each read before it was answered; with libfuse's loop
and splice (preset bfuse: the header seen through tee), and with fusecore's own loop, one thread (preset legacy).
A dump on SIGUSR1 while mounted; a log path that cannot be written refused before mounting."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import polars as pl
import pytest

from conftest import needs_fuse, needs_root
from bfuse_mounts import bfuse_binary, bfuse_mount, start_bfuse  # noqa: F401  (fixtures)
from mobiperf.collectors.parse.fuse_daemon_log import parse_fuse_daemon_log

pytestmark = [needs_fuse, needs_root]


def _dsync_writes(mountpoint, n: int = 8) -> int:
    dd = subprocess.Popen(["dd", "if=/dev/zero", f"of={mountpoint}/f", "bs=4k", f"count={n}", "oflag=dsync"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert dd.wait(timeout=60) == 0
    return dd.pid


@pytest.mark.parametrize("preset", ["bfuse", "legacy", "own_loop"])
def test_each_request_once_with_its_ids_and_times(bfuse_mount, tmp_path, preset):
    log = tmp_path / f"{preset}-requests.tsv"
    options = {"bfuse": "preset=bfuse", "legacy": "preset=legacy",
               "own_loop": "preset=nobuf,own_loop=1,threads=1"}[preset]
    mount = bfuse_mount(f"{options},requests={log}", name=preset)
    dd = _dsync_writes(mount.mountpoint)
    counters = mount.unmount()
    df, summary, warnings = parse_fuse_daemon_log(log, 0, "bfuse")
    assert warnings == [] and summary["complete"] and summary["daemon"] == "bfuse"
    assert df.height == sum(op["requests"] for op in counters["ops"].values())   # every request it counted
    writes = df.filter(pl.col("opcode_name") == "FUSE_WRITE").sort("read_ts")
    assert writes["size_bytes"].to_list() == [4096] * 8
    assert writes["offset_bytes"].to_list() == [4096 * k for k in range(8)]
    assert set(writes["pid"]) == {dd} and set(writes["reply_len_bytes"]) == {24} and set(writes["error"]) == {0}
    fsyncs = df.filter(pl.col("opcode_name") == "FUSE_FSYNC")
    assert fsyncs.height == 8 and set(fsyncs["pid"]) == {dd}
    answered = df.filter(pl.col("reply_ts").is_not_null())
    assert (answered["reply_ts"] >= answered["read_ts"]).all() and (answered["reply_tid"] == answered["tid"]).all()
    assert df["unique"].n_unique() == df.height and df["unique"].min() > 0


def test_sigusr1_writes_the_log_while_mounted(bfuse_mount, tmp_path):
    log = tmp_path / "requests.tsv"
    mount = bfuse_mount(f"preset=legacy,requests={log}")
    _dsync_writes(mount.mountpoint, 2)
    mount.process.send_signal(signal.SIGUSR1)
    deadline = time.monotonic() + 10
    while not log.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    df, summary, warnings = parse_fuse_daemon_log(log, 0, "bfuse")
    assert summary["complete"] and df.filter(pl.col("opcode_name") == "FUSE_WRITE").height == 2
    mount.unmount()


def test_a_log_path_that_cannot_be_written_is_refused_before_mounting(bfuse_binary, tmp_path):
    with pytest.raises(RuntimeError) as refused:
        start_bfuse(bfuse_binary, tmp_path / "m", f"preset=legacy,requests={tmp_path}/no/such/dir/requests.tsv")
    assert "cannot write the request log to" in str(refused.value) and "No such file or directory" in str(
        refused.value)
    assert not os.path.ismount(tmp_path / "m" / "mnt")
