"""A real run on this machine under strace and the ftrace syscalls events at once: dd with oflag=dsync and with
oflag=direct (dd opens the file and dup2s it onto fd 1, so the flags must follow the dup), then rm. Both sources
must give the same sync modes to the same writes of the same processes."""

from __future__ import annotations

import subprocess
import sys

import polars as pl
import pytest

from conftest import needs_root

pytestmark = needs_root

WORKLOAD = "dd if=/dev/zero of=F1 bs=4k count=50 oflag=dsync && dd if=/dev/zero of=F2 bs=4k count=50 oflag=direct" \
           " && rm F1"


@pytest.fixture(scope="module")
def dd_run(tmp_path_factory):
    runs = tmp_path_factory.mktemp("runs")
    # -o relative to our directory, while strace runs in the stack's: its log must still land in the run
    done = subprocess.run([sys.executable, "-m", "mobiperf", "run", "--stack", "ext4", "--source", "strace",
                           "--source", "syscalls", "--no-report", "-o", "dd-sync-modes", "--", "sh", "-c", WORKLOAD],
                          capture_output=True, text=True, timeout=240, cwd=runs)
    out = runs / "dd-sync-modes"
    assert done.returncode == 0, done.stderr
    return out


def test_dsync_and_direct_writes_classified_by_both_sources(dd_run, clean_machine):
    from mobiperf.analyzers.syscall import classify_syscalls

    sc = pl.read_parquet(dd_run / "results" / "syscall_class.parquet")
    calls = pl.read_parquet(dd_run / "tables" / "syscall_io.parquet")
    dd_writes = pl.col("op").eq("write") & pl.col("size_bytes").eq(4096)
    # the run's syscall_class counts each call once: strace's record of it
    strace = sc.filter(dd_writes)
    assert strace["path"].str.contains("/F[12]$").all()
    ftrace = classify_syscalls(calls.filter(pl.col("source") == "ftrace")).filter(dd_writes)
    by_file = dict(strace.group_by(pl.col("path").str.extract(r"/(F\d)$")).agg(pl.col("sync_mode").unique())
                   .iter_rows())
    assert {k: sorted(v) for k, v in by_file.items()} == {"F1": ["o_dsync"], "F2": ["o_direct"]}
    assert len(strace) == 100
    # the ftrace syscalls source knows no paths, but the same processes' writes get the same modes
    strace_pids = dict(strace.group_by("pid").agg(pl.col("sync_mode").first(), pl.len()).select(
        "pid", pl.struct("sync_mode", "len")).iter_rows())
    ftrace_pids = dict(ftrace.group_by("pid").agg(pl.col("sync_mode").first(), pl.len()).select(
        "pid", pl.struct("sync_mode", "len")).iter_rows())
    assert ftrace_pids == strace_pids and sorted(v["sync_mode"] for v in ftrace_pids.values()) == [
        "o_direct", "o_dsync"] and {v["len"] for v in ftrace_pids.values()} == {50}
    flags = calls.filter(pl.col("syscall") == "openat").group_by("source").agg(pl.col("open_flags"))
    for source, opened in flags.iter_rows():
        assert "O_WRONLY|O_CREAT|O_TRUNC|O_DSYNC" in opened and "O_WRONLY|O_CREAT|O_TRUNC|O_DIRECT" in opened, source
    rm = calls.filter(pl.col("syscall") == "unlinkat").sort("source")
    assert rm["source"].to_list() == ["ftrace", "strace"]
    assert rm["path"][0] == "" and rm["path"][1].endswith("/data/F1") and rm["path"][1].startswith("/")
    assert rm["fd"].to_list() == [-100, -100] and rm["ret"].to_list() == [0, 0]


def _mobibench_calls(binary, tmp_path, *args: str) -> pl.DataFrame:
    """The generator under `strace -f -ttt -T -y` (the collector's options), classified at the syscall layer."""
    from mobiperf.analyzers.syscall import classify_syscalls
    from mobiperf.collectors.parse.strace import parse_strace
    from mobiperf.collectors.strace import STRACE_OPTIONS

    log = tmp_path / "strace.log"
    done = subprocess.run(["strace", *STRACE_OPTIONS, "-o", str(log), str(binary), "-q", "--no-drop-caches",
                           "-p", str(tmp_path / "w"), *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    parsed = parse_strace(log)
    assert parsed.unparsed == 0 and parsed.unpaired == 0
    return classify_syscalls(parsed.syscall_io).filter(pl.col("path").str.contains("/test.dat"))


def test_mobibench_o_sync_threads_and_o_sync_direct(reference_binary, tmp_path):
    mobibench = reference_binary("mobibench")
    # -y 1: O_SYNC, two threads (clone3 with CLONE_FILES), each opening its own file; the pre-creation write of
    # each file goes through an earlier plain O_RDWR|O_CREAT open and stays buffered
    calls = _mobibench_calls(mobibench, tmp_path, "-f", "256", "-r", "4", "-a", "0", "-y", "1", "-t", "2")
    writes = calls.filter(pl.col("op") == "write").group_by("path", "sync_mode", "size_bytes").len()
    assert sorted((p.rsplit("/", 1)[1], m, s, n) for p, m, s, n in writes.iter_rows()) == [
        ("test.dat0", "buffered", 131072, 1), ("test.dat0", "o_sync", 4096, 32),
        ("test.dat1", "buffered", 131072, 1), ("test.dat1", "o_sync", 4096, 32)]
    # -y 4: O_SYNC|O_DIRECT random writes: o_direct (one category per call; the direct path decides)
    calls = _mobibench_calls(mobibench, tmp_path, "-f", "256", "-r", "4", "-a", "1", "-y", "4")
    timed = calls.filter((pl.col("op") == "write") & (pl.col("size_bytes") == 4096))
    assert len(timed) == 64 and set(timed["sync_mode"]) == {"o_direct"}
