"""Record -> replay on the same stack -> the replay's own fidelity table (mobiperf replay, replay_fidelity): the
SQLite workload of `make demo`, a sequential fio workload and a 4-thread random fsync workload, on an emulated
eMMC (the device model: its timing, not the shared host disk's) whose store lives in a tmpfs (MOBIPERF_WORKROOT),
so the two runs meet the same device. Real loop devices, ext4, tracefs, strace; the runs stay in tmp_path."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import polars as pl
import pytest

from conftest import needs_root

pytestmark = needs_root
MOBIPERF = [sys.executable, "-m", "mobiperf"]
RECORD = ["--source", "ftrace", "--source", "syscalls", "--source", "strace", "--source", "layout",
          "--source", "facts"]


@pytest.fixture
def tmpfs_stacks(monkeypatch):
    """Stacks (and the device model's store) in /dev/shm: the host disk, shared with everything else on this
    machine, is then no part of either run."""
    root = Path(f"/dev/shm/mobiperf-test-{os.getpid()}-{uuid.uuid4().hex[:6]}")
    monkeypatch.setenv("MOBIPERF_WORKROOT", str(root))
    yield root
    shutil.rmtree(root, ignore_errors=True)


def mobiperf(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([*MOBIPERF, *args], capture_output=True, text=True, timeout=timeout)


def record_and_replay(tmp_path: Path, command: list[str], *replay_args: str) -> tuple[Path, Path, str]:
    original, replay = tmp_path / "original", tmp_path / "replay"
    done = mobiperf("run", "--stack", "ext4", "--device", "emmc-2012", *RECORD, "--no-report", "-o",
                    str(original), "--", *command)
    assert done.returncode == 0, done.stderr[-3000:]
    done = mobiperf("replay", str(original), "-o", str(replay), "--no-report", *replay_args)
    assert done.returncode == 0, done.stderr[-3000:]
    return original, replay, done.stdout


def fidelity(replay: Path) -> pl.DataFrame:
    return pl.read_parquet(replay / "results" / "replay_fidelity.parquet")


def assert_faithful(replay: Path, stdout: str) -> pl.DataFrame:
    table = fidelity(replay)
    failed = table.filter(pl.col("ok") == False)  # noqa: E712
    assert failed.height == 0, f"{stdout}\n{failed}"
    assert "fidelity: all" in stdout and "FIDELITY FAILED" not in stdout
    return table


def test_a_small_sqlite_round_trip_is_faithful(tmp_path, tmpfs_stacks, clean_machine):
    """In the closed loop: every call, byte, sync and flush, but not the elapsed time, which a loaded machine moves
    by more than the 10 % bound between two runs a minute apart (the open loop's bound: the slow tests below)."""
    original, replay, stdout = record_and_replay(tmp_path, ["mobibench", "-p", ".", "-d", "0", "-n", "10", "-j", "1"],
                                                 "--timing", "closed")
    table = assert_faithful(replay, stdout)
    by = {r["metric"]: r for r in table.iter_rows(named=True)}
    # ten TRUNCATE-mode inserts: 5 fdatasyncs each (journal, directory, journal header, database, journal),
    # and the setup's: every one replayed, every byte written again
    assert by["calls.fdatasync"]["original"] == by["calls.fdatasync"]["replay"] >= 50
    assert by["syscall.write_bytes"]["ratio"] == 1.0 and by["block.write_bytes"]["tolerance"] == 0.05
    meta = json.loads((replay / "run.json").read_text())
    assert meta["replay"]["same_stack"] and meta["replay"]["timing"] == "closed" and by["elapsed"]["ok"] is None
    assert by["block.flushes"]["tolerance"] == by["fs.syncs"]["tolerance"] == 0.05
    assert meta["stack"] == "ext4" and meta["device"] == "emmc-2012"   # the recording's stack and device model
    assert meta["command"][:4] == ["mobibench", "-p", ".", "-g"] and (replay / "replay.script").exists()
    assert "strace" not in meta["sources"]


@pytest.mark.slow
@pytest.mark.parametrize("name,command", [
    ("sqlite-demo", ["mobibench", "-p", ".", "-d", "0", "-n", "200", "-j", "1"]),
    ("sequential", ["fio", "--name=seq", "--rw=write", "--bs=512k", "--size=64m", "--ioengine=psync",
                    "--end_fsync=1", "--filename=seq.dat"]),
    ("random-fsync-4-threads", ["mobibench", "-p", ".", "-f", "2048", "-r", "4", "-a", "1", "-y", "2", "-t", "4"]),
])
def test_round_trip_within_the_bounds(tmp_path, tmpfs_stacks, clean_machine, name, command):
    original, replay, stdout = record_and_replay(tmp_path, command)
    table = assert_faithful(replay, stdout)
    held = set(table.filter(pl.col("tolerance").is_not_null())["metric"].to_list())
    assert {"block.write_bytes", "block.flushes", "elapsed", "syscall.write_bytes"} <= held


def test_a_hostile_trace_writes_nothing_outside_the_stack(tmp_path, tmpfs_stacks, clean_machine):
    """Paths that climb out (`..`, absolute ones) are replayed inside the stack's directory, where the run's
    layout snapshot finds them; the places they named outside stay untouched."""
    target = Path(f"/tmp/mobiperf-evil-{uuid.uuid4().hex[:8]}")
    log = tmp_path / "hostile.strace"
    log.write_text("\n".join([
        f'1 openat(AT_FDCWD, "/../../..{target}", O_WRONLY|O_CREAT) = 3',
        '1 pwrite64(3, "x"..., 4096, 0) = 4096',
        '1 fsync(3) = 0',
        f'1 openat(AT_FDCWD, "../../../..{target}-2", O_WRONLY|O_CREAT) = 4',
        '1 write(4, "x", 1) = 1',
        '1 close(4) = 0']) + "\n")
    out = tmp_path / "replay"
    done = mobiperf("replay", str(log), "--stack", "ext4", "-o", str(out), "--no-report")
    assert done.returncode == 0, done.stderr[-2000:]
    assert not target.exists() and not Path(f"{target}-2").exists()
    extents = pl.read_parquet(out / "tables" / "file_extent.parquet").filter(pl.col("region") == "file")
    # the layout snapshot names files relative to the stack's directory: /tmp/... became tmp/... in it
    assert sorted(extents["path"].to_list()) == [f"{target}".lstrip("/"), f"{target}-2".lstrip("/")]
    table = fidelity(out)
    assert table.filter(pl.col("tolerance").is_not_null())["ok"].all()
