"""How faithfully a replay did what its recording did (analyzers/replay/fidelity.py): the same definitions on both
sides, the generator's markers deciding what counts, and the issue's bounds applied where they mean something."""

from __future__ import annotations

import polars as pl
import pytest

from replay_calls import call, fdatasyncs, syscall_io, workload

from mobiperf.analyzers.replay.fidelity import original_figures, replay_fidelity
from mobiperf.analyzers.replay.workload import build_from_syscalls

MS = 1_000_000


def marks(*pairs: tuple[str, int]) -> pl.DataFrame:
    return pl.DataFrame([{"rep": 0, "ts": ts, "pid": 1, "text": f"mobibench: {what}"} for what, ts in pairs],
                        schema={"rep": pl.Int32, "ts": pl.Int64, "pid": pl.Int32, "text": pl.Utf8})


def block(*rows: tuple[int, str, int]) -> pl.DataFrame:
    return pl.DataFrame([{"rep": 0, "ts": ts, "op": op, "size_bytes": size} for ts, op, size in rows],
                        schema={"rep": pl.Int32, "ts": pl.Int64, "op": pl.Utf8, "size_bytes": pl.Int64})


def syncs(*ts: int) -> pl.DataFrame:
    return pl.DataFrame([{"rep": 0, "ts": t, "phase": "enter"} for t in ts],
                        schema={"rep": pl.Int32, "ts": pl.Int64, "phase": pl.Utf8})


def replayed(n: int, start_us: float, pid: int = 7) -> list[dict]:
    """What the generator's worker does replaying fdatasyncs(n): the kernel's names, shifted into the window."""
    rows = fdatasyncs(n, "/x/mobiperf_replay/f")
    for r in rows:
        r.update(ts=r["ts"] + int(start_us * 1000), pid=pid, source="ftrace", path="")
    return rows


@pytest.fixture
def recording():
    w = build_from_syscalls(workload(fdatasyncs(10, "/w/data/f")), "/w/data")
    original = original_figures(w, block((1_000, "write", 10 << 20), (2_000, "flush", 0), (3_000, "read", 8192)),
                                syncs(*range(10)), 0)
    return original


def test_the_recordings_side(recording):
    assert recording == {"calls.close": 1.0, "calls.fdatasync": 10.0, "calls.open": 1.0, "calls.pwrite": 10.0,
                         "syscall.write_bytes": 40960.0, "syscall.read_bytes": 0.0, "block.write_bytes": 10 << 20,
                         "block.read_bytes": 8192.0, "block.flushes": 1.0, "fs.syncs": 10.0,
                         "elapsed": 10 * 50_000 + 10_000 + 1_000.0}


def test_a_faithful_replay_holds_every_bound(recording):
    calls = syscall_io(replayed(10, 10_000))
    window = marks(("replay_begin", 1 * MS), ("precreate_start", 2 * MS), ("precreate_end", 3 * MS),
                   ("timed_start", 9 * MS), ("timed_end", 20 * MS))
    blocks = block((1_500_000, "read", 4096),            # the root's metadata: counts (after replay_begin)
                   (2_500_000, "write", 1 << 20),        # the files that existed: not the recording's IO
                   (500_000, "write", 1 << 20),          # before the replay began: not counted
                   (12 * MS, "write", 10 << 20), (13 * MS, "flush", 0), (14 * MS, "read", 4096))
    table = replay_fidelity(calls, window, {"original": recording, "same_stack": True, "timing": "open"},
                            block_io=blocks, fsync_event=syncs(*range(10 * MS, 10 * MS + 10)))
    by = {r["metric"]: r for r in table.iter_rows(named=True)}
    assert by["calls.pwrite"]["replay"] == 10 and by["calls.open"]["replay"] == 1   # pwrite64, openat
    assert by["block.write_bytes"]["replay"] == 10 << 20 and by["block.read_bytes"]["replay"] == 8192
    assert by["elapsed"]["ratio"] == 1.0 and by["elapsed"]["tolerance"] == 0.10
    assert table["ok"].all() and table.height == 11


def test_outside_a_bound_is_not_ok_and_says_by_how_much(recording):
    calls = syscall_io(replayed(10, 10_000)[:-1])                 # the close never happened
    window = marks(("replay_begin", 1 * MS), ("timed_start", 9 * MS), ("timed_end", 20 * MS))
    blocks = block((12 * MS, "write", int((10 << 20) * 1.06)), (13 * MS, "flush", 0), (14 * MS, "read", 8192))
    table = replay_fidelity(calls, window, {"original": recording, "same_stack": True, "timing": "open"},
                            block_io=blocks, fsync_event=syncs(*range(10 * MS, 10 * MS + 10)))
    failed = table.filter(~pl.col("ok"))
    assert sorted(failed["metric"].to_list()) == ["block.write_bytes", "calls.close"]   # elapsed: 485 of 511 us
    row = failed.filter(pl.col("metric") == "block.write_bytes").row(0, named=True)
    assert row["ratio"] == pytest.approx(1.06, abs=1e-4) and row["tolerance"] == 0.05


def test_a_few_metadata_blocks_either_way_hold(recording):
    """64 KiB: which bitmaps and inode tables a fresh file system reads depends on the page cache (fidelity.py)."""
    calls = syscall_io(replayed(10, 10_000))
    window = marks(("timed_start", 9 * MS), ("timed_end", 20 * MS))
    for read, ok in ((8192 + 65536, True), (8192 + 65536 + 4096, False), (0, True)):
        table = replay_fidelity(calls, window, {"original": recording, "same_stack": True, "timing": "open"},
                                block_io=block((12 * MS, "write", 10 << 20), (13 * MS, "flush", 0),
                                               (14 * MS, "read", read)))
        assert table.filter(pl.col("metric") == "block.read_bytes")["ok"].to_list() == [ok]


def test_on_another_stack_or_in_a_closed_loop_only_what_is_comparable_is_held(recording):
    calls = syscall_io(replayed(10, 10_000))
    window = marks(("timed_start", 9 * MS), ("timed_end", 20 * MS))
    other = replay_fidelity(calls, window, {"original": recording, "same_stack": False, "timing": "open"},
                            block_io=block((12 * MS, "write", 1 << 30)), fsync_event=syncs())
    held = other.filter(pl.col("tolerance").is_not_null())["metric"].to_list()
    assert all(m.startswith(("calls.", "syscall.")) for m in held) and len(held) == 6
    assert other.filter(pl.col("tolerance").is_null())["ok"].is_null().all()
    closed = replay_fidelity(calls, window, {"original": recording, "same_stack": True, "timing": "closed"})
    assert closed.filter(pl.col("metric") == "elapsed").row(0, named=True)["tolerance"] is None


def test_rmdir_counts_as_unlink_on_both_sides():
    rows = [call(0, 1, "mkdir", path="/w/data/d"), call(1, 1, "rmdir", path="/w/data/d"),
            call(2, 1, "unlink", path="/w/data/f")]
    w = build_from_syscalls(workload(rows), "/w/data")
    original = original_figures(w, None, None, 0)
    assert original["calls.unlink"] == 2 and "calls.rmdir" not in original
    arm64 = syscall_io([dict(r, syscall=name, ts=r["ts"] + 10 * MS) for r, name in
                        zip(rows, ("mkdirat", "unlinkat", "unlinkat"))])
    table = replay_fidelity(arm64, marks(("timed_start", 9 * MS), ("timed_end", 20 * MS)),
                            {"original": original, "same_stack": True, "timing": "closed"})
    assert table.filter(pl.col("metric").str.starts_with("calls."))["ok"].all()
