"""`mobiperf query RUNDIR "SQL"` over a run's tables (a golden fixture, analyzed offline)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mobiperf.orchestration import pipeline
from mobiperf.commands.query import run_query
from mobiperf.core.errors import UsageError
from mobiperf.core.runstore import RunDir

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "golden"


@pytest.fixture(scope="module")
def rundir(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("query") / "run"
    shutil.copytree(GOLDEN / "rand4k-fsync", dest, ignore=shutil.ignore_patterns("expected"))
    for sub in ("tables", "results"):
        (dest / sub).mkdir(exist_ok=True)
    pipeline.analyze(RunDir.open(dest), reparse=True)
    return dest


def test_query_groups_block_io_by_region(rundir):
    df = run_query(rundir, "SELECT region, count(*) AS n, sum(size_bytes) AS bytes FROM block_io "
                           "WHERE op = 'write' GROUP BY region ORDER BY region")
    by = {r["region"]: r for r in df.iter_rows(named=True)}
    assert set(by) >= {"data", "journal"}
    assert by["data"]["bytes"] >= 512 * 1024  # the 512 KiB of random 4 KiB writes reached the device


def test_query_joins_event_and_result_tables(rundir):
    df = run_query(rundir, "SELECT count(*) AS n FROM block_rq r JOIN block_io b ON r.sector = b.sector "
                           "AND r.issue_ts = b.issue_ts")
    n_rq = run_query(rundir, "SELECT count(*) AS n FROM block_rq")["n"][0]
    assert df["n"][0] == n_rq


def test_query_errors_name_the_tables(rundir):
    with pytest.raises(UsageError) as e:
        run_query(rundir, "SELECT * FROM no_such_table")
    assert "block_io" in str(e.value) and "tables:" in str(e.value)


def test_query_cli_csv_and_json(rundir):
    cli = [sys.executable, "-m", "mobiperf", "query", str(rundir)]
    out = subprocess.run(cli + ["SELECT op, count(*) AS n FROM block_io GROUP BY op ORDER BY op", "--format",
                                "csv"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[0] == "op,n" and any(line.startswith("flush,") for line in lines)
    out = subprocess.run(cli + ["SELECT count(*) AS n FROM latency_summary", "--format", "json"],
                         capture_output=True, text=True, timeout=120)
    assert json.loads(out.stdout)[0]["n"] > 0
    out = subprocess.run(cli + ["--tables"], capture_output=True, text=True, timeout=120)
    assert "block_io:" in out.stdout and "size_class" in out.stdout
