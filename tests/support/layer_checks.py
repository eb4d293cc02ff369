"""What every call of a synchronous 4 KiB write workload must show layer by layer, on any target: shared by the
virtual phone's run tests (tests/vphone) so that each kernel is held to the same answers.

The workload: `mobibench -p . -f 400 -r 4 -a 0 -y 8`, 100 sequential 4 KiB writes each followed by fdatasync (and
one final fsync) on a FUSE daemon over a directory of /data. Known per fdatasync: it sent its sync to the daemon
as a FUSE request (FUSE inclusive <= the call), the daemon's call into the lower file system is inside that request
(lower fs <= FUSE), the block requests it waited for are inside the lower file system's time (block <= fs), its own
4 KiB data write is among them, and the layers' exclusive times add up to the call (shares sum to 1).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import polars as pl
import pytest

WORKLOAD = ["mobibench", "-p", ".", "-f", "400", "-r", "4", "-a", "0", "-y", "8"]
WRITES = 100
SELF = ["syscall_self_ns", "fuse_self_ns", "fs_self_ns", "journal_self_ns", "block_self_ns", "device_self_ns"]


def results_of(run: Path) -> dict[str, pl.DataFrame]:
    return {p.stem: pl.read_parquet(p) for p in (run / "results").glob("*.parquet")}


def tables_of(run: Path) -> dict[str, pl.DataFrame]:
    return {p.stem: pl.read_parquet(p) for p in (run / "tables").glob("*.parquet")}


def check_calls(run: Path) -> pl.DataFrame:
    """The workload's calls are all there: 100 writes of 4 KiB, 100 fdatasyncs; returns the fdatasyncs'
    waterfall rows."""
    wf = results_of(run)["waterfall"]
    writes = wf.filter((pl.col("syscall").is_in(["write", "pwrite64"])) & (pl.col("size_bytes") == 4096))
    syncs = wf.filter(pl.col("syscall") == "fdatasync")
    assert (len(writes), len(syncs)) == (WRITES, WRITES), (len(writes), len(syncs))
    assert wf.select((pl.sum_horizontal(SELF) == pl.col("dur_ns")).all()).item()   # exclusive times add up
    return syncs


def daemon_side_source_exists() -> bool:
    """Whether this mobiperf can make the FUSE layer without FUSE events (the bundled daemons' request logs, issue 23
    part kernel-quirks): the FUSE assertions on a kernel without FUSE events need it."""
    return importlib.util.find_spec("mobiperf.collectors.parse.fuse_daemon_log") is not None


def check_fuse_nest(run: Path, *, kernel_has_fuse_events: bool) -> None:
    """Per fdatasync: its FUSE request inside it, the lower fs inside that, the block requests inside that, its own
    4 KiB data write charged to it, every call type's shares summing to 1 +- 0.01."""
    if not kernel_has_fuse_events and not daemon_side_source_exists():
        pytest.xfail("this kernel has no FUSE events and this mobiperf no daemon-side FUSE source yet")
    syncs = check_calls(run)
    results = results_of(run)
    assert (syncs["fuse_requests"] >= 1).all(), f"{int((syncs['fuse_requests'] == 0).sum())} syncs without FUSE"
    assert (syncs["fuse_ns"] <= syncs["dur_ns"]).all() and (syncs["fuse_ns"] > 0).all()
    assert (syncs["fs_ns"] <= syncs["fuse_ns"]).all() and (syncs["fs_ns"] > 0).mean() >= 0.95
    assert (syncs.filter(pl.col("fs_ns") > 0).select((pl.col("block_ns") <= pl.col("fs_ns")).all()).item())
    assert (syncs["device_ns"] <= syncs["block_ns"]).all()
    own = syncs.filter(pl.col("data_bytes") >= 4096)
    assert len(own) == WRITES, f"{len(own)} of the {WRITES} fdatasyncs were charged their 4 KiB data write"
    shares = results["layer_breakdown"].group_by("rep", "syscall", "sync_mode").agg(pl.col("share").sum())
    assert len(shares) and ((shares["share"] - 1).abs() <= 0.01).all(), shares
