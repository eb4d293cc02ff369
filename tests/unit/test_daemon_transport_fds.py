"""The layer under FUSE holds the daemon's calls into the lower file system, not those that carry the FUSE protocol
(analyzers/syscall.py daemon_syscalls): its reads and splices of /dev/fuse, and the reads of the pipes a splicing
daemon moves each request through (libfuse reads the request's header from its thread's pipe; bfuse's request log
tees it into a pipe of its own and reads it there).

The capture (tests/fixtures/kernels/host618-bfuse, this host's 6.18): 100 writes of 4 KiB each followed by
fdatasync through bFUSE with splice. Counted from its syscalls.txt by hand: the daemon's four worker threads
spliced 215 requests from /dev/fuse (fd 4) into their pipes (write ends 6, 8, 16, 20), read 527 times from pipe read
ends (5, 7, 9, 11, 15, 17, 19, 21: libfuse's and the log's), answered by 213 writevs of fd 4, and reached the
lower file (fd 13) with 101 pwritevs, 100 fdatasyncs and 2 fsyncs. Before the daemon's pipes were known, those 527
reads were the lower file system's: about 2 "fs reads" per FUSE WRITE.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from mobiperf.analyzers.syscall import daemon_syscalls
from mobiperf.collectors.parse import parse_raw_dir
from mobiperf.collectors.parse.tasks import task_roles

RAW = Path(__file__).resolve().parents[1] / "fixtures" / "kernels" / "host618-bfuse" / "raw" / "rep0"
PIPES = [5, 6, 7, 8, 9, 10, 11, 12, 15, 16, 17, 18, 19, 20, 21, 22]


@pytest.fixture(scope="module")
def calls(tmp_path_factory) -> pl.DataFrame:
    raw = tmp_path_factory.mktemp("bfuse") / "rep0"
    shutil.copytree(RAW, raw)
    return parse_raw_dir(raw, 0).tables["syscall_io"]


def roles(with_pipes: bool) -> pl.DataFrame:
    tasks = json.loads((RAW / "tasks.json").read_text())
    if with_pipes:  # what tasks.json says since the collector lists the daemon's descriptors after the workload
        tasks["fuse_daemons"][0]["pipe_fds"] = PIPES
    return task_roles(tasks, 0)


def test_a_splice_names_its_source_descriptor(calls):
    splices = calls.filter(pl.col("syscall") == "splice")
    assert len(splices) == 215 and set(splices["fd"]) == {4}


def test_the_daemons_pipes_and_dev_fuse_are_not_the_lower_file_system(calls):
    under = daemon_syscalls(calls, roles(with_pipes=True), None)
    counts = dict(under.filter(pl.col("fd") >= 0).group_by("syscall").len().iter_rows())
    assert counts.get("read", 0) == 0 and counts.get("splice", 0) == 0 and counts.get("writev", 0) == 0
    assert (counts["pwritev"], counts["fdatasync"], counts["fsync"]) == (101, 100, 2)
    assert set(under.filter(pl.col("syscall").is_in(["pwritev", "fdatasync"]))["fd"]) == {13}


def test_a_run_that_knew_no_pipes_keeps_their_reads_as_it_did(calls):
    """Run directories made before (tasks.json without pipe_fds) analyse as they did: /dev/fuse alone is left out."""
    under = daemon_syscalls(calls, roles(with_pipes=False), None)
    assert len(under.filter(pl.col("syscall") == "read")) == 527
    assert len(under.filter(pl.col("syscall") == "splice")) == 0
