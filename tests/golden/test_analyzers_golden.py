"""Golden tests: small real traces captured on this machine's emulated stack (tests/fixtures/golden/*, see
capture.py there), re-parsed and re-analyzed offline, compared with their expected tables.

The expected tables are regenerated only on request: MOBIPERF_REGEN_GOLDEN=1 pytest
tests/golden/test_analyzers_golden.py (re-capture the raw traces first with `python tests/fixtures/golden/capture.py`,
as root). A diff in a pull request then shows exactly which numbers a change moved.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import polars as pl
import pytest

from mobiperf.orchestration import pipeline
from mobiperf.core.runstore import RunDir

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "golden"
FIXTURES = sorted(p.name for p in GOLDEN.iterdir() if (p / "run.json").exists())
# the tables pinned per fixture (when the fixture produces them)
PINNED = ("block_rq", "block_io", "io_class", "io_share", "latency_summary", "fs_latency", "fuse_latency",
          "sqlite_txn", "sqlite_summary", "syscall_class", "syscall_latency", "waterfall", "layer_breakdown",
          "block_cause", "io_background", "time_profile", "amplification")
REGEN = os.environ.get("MOBIPERF_REGEN_GOLDEN") == "1"


def _canonical_csv(df: pl.DataFrame) -> str:
    """CSV that is stable across runs: rows sorted by every column, floats to 6 significant digits."""
    df = df.with_columns([pl.col(c).map_elements(lambda v: float(f"{v:.6g}"), return_dtype=pl.Float64)
                          for c, t in df.schema.items() if t in (pl.Float32, pl.Float64)])
    return df.sort(df.columns, nulls_last=True).write_csv()


@pytest.fixture(scope="module")
def analyzed(tmp_path_factory):
    cache: dict[str, tuple[RunDir, dict]] = {}

    def get(name: str):
        if name not in cache:
            dest = tmp_path_factory.mktemp("golden") / name
            shutil.copytree(GOLDEN / name, dest, ignore=shutil.ignore_patterns("expected"))
            for sub in ("tables", "results"):
                (dest / sub).mkdir(exist_ok=True)
            run = RunDir.open(dest)
            results = pipeline.analyze(run, reparse=True)
            cache[name] = (run, results)
        return cache[name]

    return get


@pytest.mark.parametrize("name", FIXTURES)
def test_golden_tables(name, analyzed):
    run, results = analyzed(name)
    expected_dir = GOLDEN / name / "expected"
    produced = {t: run.read_table(t) for t in PINNED if run.has_table(t)}
    assert "block_rq" in produced and "block_io" in produced, f"{name}: block analysis did not run"
    if REGEN:
        shutil.rmtree(expected_dir, ignore_errors=True)
        expected_dir.mkdir()
        for table, df in produced.items():
            (expected_dir / f"{table}.csv").write_text(_canonical_csv(df))
        pytest.skip(f"regenerated {expected_dir}")
    expected = {p.stem for p in expected_dir.glob("*.csv")}
    assert expected == set(produced), f"{name}: tables produced {sorted(produced)} != pinned {sorted(expected)}"
    for table, df in produced.items():
        want = (expected_dir / f"{table}.csv").read_text()
        got = _canonical_csv(df)
        assert got == want, f"{name}/{table} differs from its golden copy (MOBIPERF_REGEN_GOLDEN=1 to accept)"


@pytest.mark.parametrize("name", FIXTURES)
def test_golden_pairing_is_complete(name, analyzed):
    """Real traces of this kernel pair completely: every request has its queue (or is a kernel flush), issue
    and completion, and the oracle agrees with the fast pairing row for row."""
    from mobiperf.collectors.parse.pairing import pair_block_requests_compiled, pair_block_requests_vectorized
    from pairing_oracle import pair_block_requests_oracle

    run, _ = analyzed(name)
    events = run.read_table("block_event")
    fast, stats = pair_block_requests_compiled(events)
    slow, oracle_stats = pair_block_requests_oracle(events)
    vec, vec_stats = pair_block_requests_vectorized(events)
    assert fast.equals(slow) and vec.equals(slow)
    assert stats.as_dict() == oracle_stats.as_dict() == vec_stats.as_dict()
    assert stats.matched_share == 1.0, stats.as_dict()
    assert not stats.unmatched


def test_golden_split_fixture_has_splits_and_inherits_queue_time(analyzed):
    run, _ = analyzed("split-4m-direct")
    events = run.read_table("block_event")
    splits = events.filter(pl.col("event") == "block_split")
    assert len(splits) >= 2
    queued = events.filter(pl.col("event") == "block_bio_queue").select(
        "sector", pl.col("ts").alias("q_ts")).unique("sector", keep="last")
    # the remainder of a split bio (a request at new_sector = sector + nr_sector) has the original bio's Q time
    remainders = splits.select((pl.col("sector") + pl.col("nr_sector")).alias("new"), "sector") \
        .join(queued, on="sector")
    rq = run.read_table("block_rq").select(pl.col("sector").alias("new"), "queue_ts", "is_complete_match")
    got = remainders.join(rq, on="new")
    assert len(got) == len(remainders)
    assert (got["queue_ts"] == got["q_ts"]).all()
    assert got["is_complete_match"].all()


def test_golden_sequential_buffered_writes_are_large_and_sequential(analyzed):
    run, _ = analyzed("seq512k-buffered")
    share = run.read_table("io_share").filter((pl.col("layer") == "block") & (pl.col("op") == "write"))
    seq = share.filter((pl.col("dimension") == "locality") & (pl.col("value") == "sequential"))
    assert seq["count_share"][0] > 0.5
    data = run.read_table("block_io").filter((pl.col("op") == "write") & (pl.col("region") == "data"))
    assert data["size_bytes"].sum() >= 8 << 20      # the 8 MiB file reached the device
    assert data["size_bytes"].max() >= 256 << 10    # merged into large requests


def test_golden_random_fsync_writes_are_small_synchronous_and_journalled(analyzed):
    run, _ = analyzed("rand4k-fsync")
    bio = run.read_table("block_io").filter(pl.col("op") == "write")
    data = bio.filter(pl.col("region") == "data")
    assert (data["size_bytes"] == 4096).mean() > 0.8
    assert (bio["region"] == "journal").sum() > 0
    assert run.read_table("block_io").filter(pl.col("op") == "flush").height > 0
    fs = run.read_table("fs_latency").filter(pl.col("phase") == "sync_file")
    assert fs["count"].sum() >= 128


def test_golden_fuse_latency(analyzed):
    run, _ = analyzed("fuse-seq512k")
    if not run.has_table("fuse_latency"):
        pytest.skip("the parser does not produce fuse_req yet")
    fuse = run.read_table("fuse_latency")
    write = fuse.filter(pl.col("op") == "write")
    assert write["count"][0] > 0 and write["p50_ns"][0] > 0


def test_golden_strace_sqlite_layers(analyzed):
    """Under strace the syscall layer is there: the SQLite cut by paths, the journal mode, the waterfall."""
    for name, mode, syncs in (("strace-sqlite-wal", "wal", 1.0), ("strace-sqlite-delete", "delete", 4.0)):
        run, results = analyzed(name)
        summary = results["sqlite_summary"].row(0, named=True)
        assert summary["journal_mode"] == mode and summary["transactions"] >= 10
        assert summary["fsync_per_txn"] == pytest.approx(syncs, abs=0.2)
        wf = results["waterfall"]
        commits = wf.filter(pl.col("file_type").is_in(["db", "db-wal", "db-journal"])
                            & pl.col("syscall").is_in(["fsync", "fdatasync"]))
        # the strace clock was aligned to the trace clock: the commits' block IO is found inside them
        assert (commits["block_requests"] > 0).mean() > 0.8
        assert (commits["journal_bytes"] > 0).mean() > 0.3  # fdatasync commits jbd2 only when metadata changed


def test_golden_strace_amplification(analyzed):
    run, results = analyzed("strace-rand4k-fsync")
    amp = results["amplification"].filter((pl.col("op") == "write") & (pl.col("region") == "all"))
    by = {r["layer"]: r for r in amp.iter_rows(named=True)}
    assert by["app"]["bytes"] >= 256 << 10
    assert by["block"]["ratio_to_app"] > 1.5   # data + journal + metadata for each 4 KiB write + fsync
