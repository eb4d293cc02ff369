"""The run store: its index (incremental, damaged runs kept with their reason), SQL across runs with DuckDB equal
to the same question asked of the runs' tables concatenated with Polars, lazy Polars frames, fsspec stores."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from mobiperf.core.runstore import RunDir
from mobiperf.core.store import Store, discover_runs, update_index
from mobiperf.core.store_query import load_store, query_store
from store_fixtures import link_or_copy, make_store

N = 16


@pytest.fixture(scope="module")
def analysed(tmp_path_factory) -> Path:
    """A store of 16 runs analysed serially, never modified by the tests (they copy it)."""
    from mobiperf.orchestration.cluster import analyze_store

    root = tmp_path_factory.mktemp("store") / "runs"
    make_store(root, N)
    assert [o["error"] for o in analyze_store(root)] == [None] * N
    (root / "index.parquet").unlink()
    return root


@pytest.fixture
def store(analysed, tmp_path) -> Path:
    dest = tmp_path / "runs"
    shutil.copytree(analysed, dest, copy_function=link_or_copy)   # files are replaced, never written in place
    return dest


def concatenated(root: Path, table: str) -> pl.DataFrame:
    """The table of every run, read run by run with RunDir (not through the store), with the run's facts."""
    frames = []
    for run_dir in sorted(p for p in root.iterdir() if (p / "run.json").exists()):
        run = RunDir.open(run_dir)
        if not run.has_table(table):
            continue
        meta = run.read_meta()
        frames.append(run.read_table(table).with_columns(
            run_id=pl.lit(run_dir.name), target=pl.lit(meta["target"]["target"]),
            kernel=pl.lit(meta["target"]["kernel"]), stack=pl.lit(meta["stack"])))
    return pl.concat(frames, how="diagonal_relaxed")


def replace_file(path: Path, data: bytes) -> None:
    """Write a new file in place of `path` (the store copies share their files by hard links)."""
    path.unlink()
    path.write_bytes(data)


def _sorted(df: pl.DataFrame) -> pl.DataFrame:
    return df.sort(df.columns, nulls_last=True)


def test_duckdb_grouped_query_equals_polars_over_the_concatenated_tables(store):
    df, notes = query_store(Store.open(store), """
        SELECT kernel, stack, target, op, count(*) AS n, sum(size_bytes)::BIGINT AS bytes,
               quantile_disc(d2c_ns, 0.5) AS d2c_p50
        FROM block_io GROUP BY ALL""")
    want = (concatenated(store, "block_io").group_by("kernel", "stack", "target", "op")
            .agg(n=pl.len(), bytes=pl.col("size_bytes").sum(), d2c_p50=pl.col("d2c_ns").quantile(0.5, "lower")))
    assert notes == []
    assert df.height == want.height > 4
    assert _sorted(df.cast({"n": pl.Int64, "bytes": pl.Int64, "d2c_p50": pl.Int64})).equals(
        _sorted(want.select(df.columns).cast({"n": pl.Int64, "bytes": pl.Int64, "d2c_p50": pl.Int64})))


def test_every_row_of_every_run_is_visible_with_its_facts(store):
    s = Store.open(store)
    for table in ("io_class", "block_rq", "latency_summary"):
        want = concatenated(store, table)
        got, _ = query_store(s, f"SELECT * FROM {table}")
        assert got.height == want.height
        assert got.columns[:5] == ["run_id", "target", "kernel", "stack", "workload"]
        cols = [c for c in want.columns if c in got.columns]
        assert _sorted(got.select(cols)).equals(_sorted(want.select(cols)))
        assert "rep" in got.columns   # the repetition within its run


def test_runs_and_metric_views_hold_run_json(store):
    s = Store.open(store)
    runs, _ = query_store(s, "SELECT run_id, kernel, target, block_bytes_write, run_workload_time FROM runs "
                             "ORDER BY run_id")
    metric, _ = query_store(s, "SELECT run_id, value FROM metric WHERE key = 'block.bytes{op=write}' "
                               "ORDER BY run_id")
    assert runs.height == N
    for row, m in zip(runs.iter_rows(named=True), metric.iter_rows(named=True)):
        meta = json.loads((store / row["run_id"] / "run.json").read_text())
        want = next(x["value"] for x in meta["metrics"]
                    if x["name"] == "block.bytes" and x["labels"] == {"op": "write"})
        assert row["block_bytes_write"] == m["value"] == want
        assert row["kernel"] == meta["target"]["kernel"] and row["target"] == meta["target"]["target"]
        assert row["run_workload_time"] == meta["repetitions"][0]["workload_ns"]


def test_load_store_frames_equal_the_duckdb_views(store):
    import mobiperf

    frames = mobiperf.load_store(store)
    s = Store.open(store)
    for table in ("io_class", "fs_latency"):
        got = frames[table].collect()
        want, _ = query_store(s, f"SELECT * FROM {table}")
        assert got.columns == want.columns
        assert _sorted(got).equals(_sorted(want.cast(got.schema)))
    lazy = frames["block_io"].group_by("stack").agg(pl.col("size_bytes").sum()).sort("stack").collect()
    sql, _ = query_store(s, "SELECT stack, sum(size_bytes)::BIGINT AS size_bytes FROM block_io GROUP BY 1 ORDER BY 1")
    assert lazy.cast({"size_bytes": pl.Int64}).equals(sql)
    assert frames["metric"].filter(pl.col("name") == "block.requests").collect().height == \
        query_store(s, "SELECT * FROM metric WHERE name = 'block.requests'")[0].height


def test_index_is_rebuilt_incrementally(store):
    s = Store.open(store)
    first = update_index(s)
    assert (first.runs, first.read, first.removed) == (N, N, 0)
    assert update_index(s).read == 0                             # nothing changed: nothing read
    run = RunDir.open(store / "run-003")
    run.update_meta(stack="f2fs")                                # run.json rewritten (atomic rename)
    shutil.rmtree(store / "run-005")
    again = update_index(s)
    assert (again.runs, again.read, again.removed) == (N - 1, 1, 1)
    stacks = dict(zip(again.index["run_id"], again.index["stack"]))
    assert stacks["run-003"] == "f2fs" and "run-005" not in stacks


def test_runs_two_levels_down_are_found(store):
    (store / "night-2").mkdir()
    os.rename(store / "run-001", store / "night-2" / "run-001")
    found = discover_runs(Store.open(store))
    assert "night-2/run-001" in found and len(found) == N
    df, _ = query_store(Store.open(store), "SELECT DISTINCT run_id FROM io_class WHERE run_id LIKE 'night-2/%'")
    assert df["run_id"].to_list() == ["night-2/run-001"]


def test_damaged_runs_are_skipped_with_their_reason(store):
    replace_file(store / "run-002" / "run.json", b"{ not json")
    io_class = store / "run-006" / "results" / "io_class.parquet"
    replace_file(io_class, io_class.read_bytes()[:100])              # truncated before indexing
    s = Store.open(store)
    df, notes = query_store(s, "SELECT run_id, count(*) AS n FROM io_class GROUP BY 1")
    assert set(df["run_id"]) == {f"run-{i:03d}" for i in range(N)} - {"run-002", "run-006"}
    assert any(n.startswith("skipped run-002: run-002/run.json is corrupt") for n in notes)
    assert any(n.startswith("skipped run-006: run-006/results/io_class.parquet is damaged") for n in notes)
    # damaged after it was indexed: found by the query that reads it, marked, and the query still answers
    block_io = store / "run-009" / "results" / "block_io.parquet"
    replace_file(block_io, b"PAR1" + b"\0" * 64 + b"PAR1")
    df, notes = query_store(s, "SELECT run_id, sum(size_bytes) FROM block_io GROUP BY 1")
    assert "run-009" not in set(df["run_id"]) and df.height == N - 3
    assert any(n.startswith("skipped run-009: run-009/results/block_io.parquet is damaged") for n in notes)
    errors = dict(zip(*update_index(s).index.select("run_id", "error").to_dict(as_series=False).values()))
    assert errors["run-009"] and errors["run-000"] is None      # remembered in the index


def test_query_cli_tells_a_store_from_a_run(store):
    out = subprocess.run([sys.executable, "-m", "mobiperf", "query", str(store), "SELECT stack, count(*) AS runs "
                          "FROM runs GROUP BY 1 ORDER BY 1", "--format", "json"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [{"stack": "ext4", "runs": 14}, {"stack": "ext4+fuse", "runs": 2}]
    one = subprocess.run([sys.executable, "-m", "mobiperf", "query", str(store / "run-000"),
                          "SELECT count(*) AS n FROM io_class", "--format", "json"], capture_output=True, text=True,
                         timeout=120)
    assert json.loads(one.stdout) == [{"n": RunDir.open(store / "run-000").read_table("io_class").height}]
    bad = subprocess.run([sys.executable, "-m", "mobiperf", "query", str(store), "SELECT * FROM nope"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "tables:" in bad.stderr and "io_class" in bad.stderr


def test_a_store_at_an_fsspec_url(analysed):
    """The memory filesystem stands for any fsspec one: index, query and re-analysis go through fsspec only."""
    import fsspec

    from mobiperf.orchestration.cluster import analyze_store

    fs = fsspec.filesystem("memory")
    for run in ("run-000", "run-001", "run-003"):
        for path in sorted((analysed / run).rglob("*")):
            if path.is_file() and "results" not in path.parts:     # results come from analysing it there
                fs.pipe_file(f"/lab/{run}/{path.relative_to(analysed / run)}", path.read_bytes())
    s = Store.open("memory://lab")
    assert not s.is_local
    outcomes = analyze_store("memory://lab")
    assert [o["error"] for o in outcomes] == [None] * 3
    df, _ = query_store(s, "SELECT run_id, count(*) AS n FROM io_class GROUP BY 1 ORDER BY 1")
    want = [RunDir.open(analysed / r).read_table("io_class").height for r in ("run-000", "run-001", "run-003")]
    assert df["n"].to_list() == want
    assert load_store("memory://lab")["io_class"].collect().height == sum(want)
    fs.rm("/lab", recursive=True)


def test_without_cluster_dask_is_not_imported(tmp_path):
    make_store(tmp_path / "runs", 2)
    code = ("import sys\nfrom mobiperf.cli import main\nsys.argv = ['mobiperf', 'analyze', sys.argv[1]]\n"
            "try:\n    main()\nfinally:\n"
            "    print('dask imported' if {'dask', 'distributed'} & set(sys.modules) else 'no dask')")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "runs")], capture_output=True, text=True,
                         timeout=300)
    assert out.stdout.splitlines()[-2:] == ["2 of 2 runs analysed; 0 failed", "no dask"], out.stdout + out.stderr
