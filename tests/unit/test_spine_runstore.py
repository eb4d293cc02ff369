import json

import polars as pl
import pytest

from mobiperf.core.errors import MissingTableError, UsageError
from mobiperf.core.runstore import RunDir
from mobiperf.core.schema import BLOCK_RQ


def test_create_writes_versioned_incomplete_run(tmp_path):
    run = RunDir.create(tmp_path / "r", {"id": "r", "stack": "ext4"})
    meta = json.loads((tmp_path / "r" / "run.json").read_text())
    assert meta["format"] == "mobiperf-run" and meta["version"] == 1
    assert meta["status"] == "incomplete"
    assert sorted(p.name for p in run.path.iterdir()) == ["raw", "results", "run.json", "tables"]


def test_never_overwrites(tmp_path):
    RunDir.create(tmp_path / "r", {})
    with pytest.raises(UsageError, match="never overwritten"):
        RunDir.create(tmp_path / "r", {})


def test_nonexistent_dir(tmp_path):
    with pytest.raises(UsageError, match="no such run directory"):
        RunDir.open(tmp_path / "missing")


@pytest.mark.parametrize("content,message", [
    ("{not json", "corrupt"),
    ('{"format": "other"}', "not a mobiperf run"),
    ('{"format": "mobiperf-run", "version": 99, "status": "complete"}', "upgrade mobiperf"),
    ('{"format": "mobiperf-run", "version": 1, "status": "weird"}', "status"),
])
def test_bad_run_json(tmp_path, content, message):
    (tmp_path / "run.json").write_text(content)
    with pytest.raises(UsageError, match=message):
        RunDir.open(tmp_path)


def test_tables_round_trip_and_validate(tmp_path):
    run = RunDir.create(tmp_path / "r", {})
    with pytest.raises(MissingTableError, match="block_rq"):
        run.read_table("block_rq")
    run.write_table(BLOCK_RQ, BLOCK_RQ.empty())
    assert run.read_table("block_rq").columns == list(BLOCK_RQ.columns)
    with pytest.raises(Exception, match="missing columns"):
        run.write_table(BLOCK_RQ, pl.DataFrame({"rep": [0]}))
