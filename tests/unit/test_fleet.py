"""The fleet report: a store's runs grouped by facts, every group compared with BASE by compare's statistics,
on runs whose metrics are known (one value per run)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mobiperf.core import stats
from mobiperf.core.errors import UsageError
from mobiperf.compare.fleet import build_fleet
from mobiperf.core.store import Store, update_index

# p99 write latency (ms) of each run: kernel B's runs are about twice as slow, bytes written are the same
P99_MS = {"6.1-A": [10.0, 11.0, 12.0, 10.5, 11.5], "6.6-B": [20.0, 21.0, 22.0, 20.5, 21.5]}


def write_run(root: Path, run_id: str, *, kernel: str, stack: str, p99_ms: float, status: str = "complete") -> None:
    path = root / run_id
    (path / "results").mkdir(parents=True)
    metrics = [{"name": "latency.d2c.p99", "labels": {"op": "write"}, "value": p99_ms * 1e6, "unit": "ns"},
               {"name": "block.bytes", "labels": {"op": "write"}, "value": 4194304.0, "unit": "B"},
               {"name": "layer.share", "labels": {"layer": "fs", "syscall": "fsync"}, "value": 0.5, "unit": "ratio"}]
    meta = {"format": "mobiperf-run", "version": 1, "status": status, "id": run_id, "stack": stack,
            "target": {"target": "local", "kernel": kernel}, "command": ["mobibench", "-p", ".", "-f", "4096"],
            "repetitions": [{"index": 0, "exit_code": 0, "workload_ns": int(p99_ms * 1e7)}], "metrics": metrics}
    (path / "run.json").write_text(json.dumps(meta))


@pytest.fixture
def fleet_store(tmp_path) -> Path:
    root = tmp_path / "fleet"
    for kernel, values in P99_MS.items():
        for i, v in enumerate(values):
            write_run(root, f"{kernel}-{i}", kernel=kernel, stack="ext4" if i % 2 else "f2fs", p99_ms=v)
    write_run(root, "6.6-B-interrupted", kernel="6.6-B", stack="ext4", p99_ms=99.0, status="incomplete")
    (root / "broken").mkdir()
    (root / "broken" / "run.json").write_text("{")
    return root


def test_groups_compared_with_base_as_compare_would(fleet_store):
    fleet = build_fleet(update_index(Store.open(fleet_store)).index, ["kernel"])
    assert [g.label for g in fleet.groups] == ["kernel=6.1-A", "kernel=6.6-B"]
    assert len(fleet.run_ids["kernel=6.6-B"]) == 5                       # the incomplete run is left out
    assert sorted(fleet.left_out) == ["6.6-B-interrupted: status incomplete",
                                      "broken: damaged (broken/run.json is corrupt: Expecting property name "
                                      "enclosed in double quotes: line 1 column 2 (char 1))"]
    rows = {r.key: r.result for r in fleet.result.pairs[0].rows}
    p99 = rows["latency.d2c.p99{op=write}"]
    want = stats.compare_samples([v * 1e6 for v in P99_MS["6.1-A"]], [v * 1e6 for v in P99_MS["6.6-B"]],
                                 direction=stats.LOWER)
    assert (p99.verdict, p99.base_median, p99.new_median) == (stats.REGRESSION, 11e6, 21e6)
    assert p99.ratio == pytest.approx(21 / 11) and p99.p_value == pytest.approx(want.p_value)
    assert p99.p_value == pytest.approx(2 / 252)                          # exact MWU, 5 vs 5, fully separated
    assert rows["block.bytes{op=write}"].verdict == stats.NOT_SIGNIFICANT
    assert rows["run.workload_time"].verdict == stats.REGRESSION          # from the repetitions' wall times
    assert not any(k.startswith("layer.share") for k in rows)             # not a headline metric


def test_two_keys_and_a_chosen_base(fleet_store):
    index = update_index(Store.open(fleet_store)).index
    fleet = build_fleet(index, ["kernel", "stack"], base="kernel=6.6-B, stack=f2fs")
    assert fleet.groups[0].label == "kernel=6.6-B, stack=f2fs"
    assert sorted(g.label for g in fleet.groups[1:]) == ["kernel=6.1-A, stack=ext4", "kernel=6.1-A, stack=f2fs",
                                                         "kernel=6.6-B, stack=ext4"]
    with pytest.raises(UsageError, match="--by color"):
        build_fleet(index, ["color"])


def test_report_cli_writes_the_fleet_page(fleet_store, tmp_path):
    out = tmp_path / "fleet.html"
    done = subprocess.run([sys.executable, "-m", "mobiperf", "report", str(fleet_store), "--by", "kernel", "-o",
                           str(out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    html = out.read_text()
    for text in ("kernel=6.1-A", "kernel=6.6-B", "latency.d2c.p99{op=write}", "regression", "+90.9%",
                 "2 runs left out", "6.6-B-interrupted: status incomplete"):
        assert text in html, text
    assert "<script src=" not in html and "<link " not in html and "Plotly.newPlot" in html   # works offline
    asked = subprocess.run([sys.executable, "-m", "mobiperf", "report", str(fleet_store)], capture_output=True,
                           text=True, timeout=120)
    assert asked.returncode == 2 and "--by kernel,stack" in asked.stderr
    one = subprocess.run([sys.executable, "-m", "mobiperf", "report", str(fleet_store / "6.1-A-0"), "--by", "kernel"],
                         capture_output=True, text=True, timeout=120)
    assert one.returncode == 2 and "is one run directory" in one.stderr
