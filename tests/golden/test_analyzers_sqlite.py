"""The "journaling of journal" table of seed 002 on this machine's emulated stack: per SQLite transaction, the
syncs, block writes and bytes for DELETE / TRUNCATE / PERSIST / WAL, from the golden traces (mobibench -d 0
-n 10 -j J on ext4 over a loop device, captured by tests/fixtures/golden/capture.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest

from mobiperf.orchestration import pipeline
from mobiperf.analyzers.sqlite_txn import _sync_period
from mobiperf.core.runstore import RunDir

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "golden"
MODES = ("delete", "truncate", "persist", "wal")


@pytest.fixture(scope="module")
def per_mode(tmp_path_factory) -> pl.DataFrame:
    rows = []
    for mode in MODES:
        dest = tmp_path_factory.mktemp("sqlite") / mode
        shutil.copytree(GOLDEN / f"sqlite-{mode}", dest, ignore=shutil.ignore_patterns("expected"))
        for sub in ("tables", "results"):
            (dest / sub).mkdir(exist_ok=True)
        results = pipeline.analyze(RunDir.open(dest), reparse=True)
        summary = results["sqlite_summary"].row(0, named=True)
        rows.append({**summary, "journal_mode": mode})
    return pl.DataFrame(rows)


def test_sqlite_table_has_the_papers_ordering(per_mode, capsys):
    with capsys.disabled(), pl.Config(tbl_cols=10, tbl_width_chars=160, tbl_hide_dataframe_shape=True,
                                      float_precision=2):
        print("\nSQLite per transaction on ext4 (loop device), mobibench -d 0 -n 10 (seed 002's table):")
        print(per_mode.drop("rep"))
    by = {r["journal_mode"]: r for r in per_mode.iter_rows(named=True)}
    assert all(by[m]["transactions"] >= 9 for m in MODES)  # 10 inserts (WAL: + a checkpoint sync now and then)
    others = [m for m in MODES if m != "wal"]
    # WAL: the fewest syncs and the fewest bytes per transaction
    assert all(by["wal"]["fsync_per_txn"] < by[m]["fsync_per_txn"] for m in others)
    assert all(by["wal"]["block_kib_per_txn"] < by[m]["block_kib_per_txn"] for m in others)
    assert by["wal"]["fsync_per_txn"] == pytest.approx(1.0, abs=0.25)
    # PERSIST: the most syncs (with this SQLite, TRUNCATE syncs as often)
    assert all(by["persist"]["fsync_per_txn"] >= by[m]["fsync_per_txn"] for m in MODES)
    # journaling of journal: a large share of each transaction's block bytes is ext4 journal and metadata
    assert all(by[m]["journal_meta_share"] > 0.15 for m in MODES)


@pytest.mark.parametrize("inodes, period", [
    ([13, 2, 13, 12] * 5, 4),           # DELETE-mode rhythm: journal, directory, journal, database
    ([13] * 10, 1),                     # WAL: one sync of the WAL per commit
    ([13, 2, 13, 12, 13] * 4, 5),
    ([20, 12, 21, 12, 22, 12, 23, 12], 2),  # a journal created anew each time (new inode) still has rhythm 2
])
def test_sync_period(inodes, period):
    assert _sync_period(inodes) == period


@pytest.mark.slow
@pytest.mark.skipif(__import__("os").geteuid() != 0, reason="needs root (loop device, mount, tracefs)")
def test_sqlite_table_on_fresh_captures(tmp_path, capsys):
    """The same table from traces captured now (mobiperf run, ~10 s per journal mode)."""
    import sys

    sys.path.insert(0, str(GOLDEN))
    from capture import capture

    rows = []
    for mode in MODES:
        dest = capture(f"sqlite-{mode}", dest_root=tmp_path)
        for sub in ("tables", "results"):
            (dest / sub).mkdir(exist_ok=True)
        results = pipeline.analyze(RunDir.open(dest), reparse=True)
        rows.append({**results["sqlite_summary"].row(0, named=True), "journal_mode": mode})
    table = pl.DataFrame(rows)
    with capsys.disabled(), pl.Config(tbl_cols=10, tbl_width_chars=160, tbl_hide_dataframe_shape=True,
                                      float_precision=2):
        print("\nSQLite per transaction, fresh captures:")
        print(table.drop("rep"))
    by = {r["journal_mode"]: r for r in table.iter_rows(named=True)}
    assert all(by["wal"]["fsync_per_txn"] < by[m]["fsync_per_txn"] for m in MODES if m != "wal")
    assert all(by["wal"]["block_kib_per_txn"] < by[m]["block_kib_per_txn"] for m in MODES if m != "wal")
    assert all(by["persist"]["fsync_per_txn"] >= by[m]["fsync_per_txn"] for m in MODES)


def test_journal_mode_ignores_the_failed_probe_for_a_hot_wal():
    """Every journal mode first probes for a -wal file; only a -wal that was opened makes the mode wal."""
    from mobiperf.analyzers.sqlite_txn import infer_journal_mode
    from mobiperf.core.schema import SYSCALL_IO

    def call(syscall, path, ret, errno=""):
        return {"rep": 0, "ts": 0, "dur": 1, "pid": 1, "comm": "", "syscall": syscall, "fd": -100, "path": path,
                "request_bytes": -1, "offset_bytes": -1, "ret": ret, "errno": errno, "source": "strace",
                "open_flags": "", "new_path": ""}

    probe = call("openat", "/d/test.db-wal", -1, "ENOENT")
    delete = [probe, call("openat", "/d/test.db-journal", 3), call("unlinkat", "/d/test.db-journal", 0)]
    wal = [call("openat", "/d/test.db-wal", 4)]
    for calls, mode in ((delete, "delete"), (delete + wal, "wal")):
        table = pl.DataFrame(calls, schema=SYSCALL_IO.columns)
        assert infer_journal_mode(table)["journal_mode"].to_list() == [mode]
