"""run.json through one typed, versioned model (mobiperf/core/run_facts.py): old run directories load and are
written back as they were, keys the model does not know are kept, the old dict lookups still answer, and what is
wrong with a run.json is said in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mobiperf.core.errors import UsageError
from mobiperf.core.metrics import median_metrics, metric
from mobiperf.core.run_facts import FORMAT_VERSION, Metric, Repetition, RunMeta, new_run_meta
from mobiperf.core.runstore import RunDir

FIX = Path(__file__).parents[1] / "fixtures"
STORED_RUNS = sorted(FIX.rglob("run.json"))


@pytest.mark.parametrize("path", STORED_RUNS, ids=lambda p: str(p.relative_to(FIX)))
def test_stored_runs_load_and_write_back_unchanged(path):
    text = path.read_text()
    meta = RunMeta.from_json(text, path)
    assert meta.to_json() == json.loads(text)
    assert meta.repetitions and all(isinstance(r, Repetition) for r in meta.repetitions)
    assert meta.stack == json.loads(text)["stack"]


def test_there_are_stored_runs_to_check():
    assert len(STORED_RUNS) >= 20


def test_typed_fields_unknown_keys_and_the_old_lookups():
    meta = RunMeta.from_dict({"format": "mobiperf-run", "version": 1, "status": "complete", "stack": "ext4",
                              "command": ["dd"], "scope": "all", "newer": {"x": 1},
                              "repetitions": [{"index": 0, "exit_code": 0, "workload_ns": 5, "ftrace": {"lines": 3},
                                               "metrics": [{"name": "block.bytes", "labels": {"op": "write"},
                                                            "value": 4096, "unit": "B"}]}]})
    rep = meta.repetitions[0]
    assert (rep.index, rep.exit_code, rep.workload_ns, rep.extra) == (0, 0, 5, {"ftrace": {"lines": 3}})
    m = rep.metrics[0]
    assert (m.key, m.value, m.unit) == ("block.bytes{op=write}", 4096.0, "B")
    # code written against the dicts
    assert meta["stack"] == "ext4" and meta.get("scope") == "all" and meta["newer"] == {"x": 1}
    assert meta["repetitions"][0]["ftrace"]["lines"] == 3 and m["value"] == 4096.0
    assert "metrics" not in meta and meta.get("metrics") is None and meta.get("nothing", 7) == 7
    meta["status"] = "failed"
    meta.setdefault("warnings", []).append("w")
    assert meta.to_json()["status"] == "failed" and meta.to_json()["warnings"] == ["w"]
    assert list(meta.to_json())[:3] == ["format", "version", "status"] and meta.to_json()["newer"] == {"x": 1}


@pytest.mark.parametrize("text,said", [
    ("{", "is corrupt"),
    ('{"format": "other"}', "is not a mobiperf run description"),
    (json.dumps({"format": "mobiperf-run", "version": FORMAT_VERSION + 1, "status": "complete"}),
     f"has format version {FORMAT_VERSION + 1}; this mobiperf reads up to {FORMAT_VERSION}"),
    ('{"format": "mobiperf-run", "version": 1, "status": "done"}', "status 'done' is not one of"),
    ('{"format": "mobiperf-run", "version": 1, "status": "complete", "repetitions": [{"exit_code": 0}]}',
     "Repetition: Object missing required field `index`"),
    ('{"format": "mobiperf-run", "version": 1, "status": "complete", "command": "dd"}',
     "Expected `array`, got `str`"),
])
def test_what_is_wrong_with_a_run_json_is_said(text, said):
    with pytest.raises(UsageError, match=said):
        RunMeta.from_json(text, "x/run.json")


def test_a_new_runs_header_and_a_round_trip_through_the_run_directory(tmp_path):
    meta = new_run_meta("r1", target={"target": "local"}, stack="ext4", command=["dd", "bs=4k"], device="emmc-2012",
                        warnings=[])
    run = RunDir.create(tmp_path / "r1", meta)
    back = run.read_meta()
    assert (back.id, back.status, back.stack, back.command, back.get("device")) == (
        "r1", "incomplete", "ext4", ["dd", "bs=4k"], "emmc-2012")
    assert back.created and back.mobiperf and back.host
    back.repetitions.append(Repetition(index=0, exit_code=0, workload_ns=10,
                                       metrics=[metric("block.bytes", 4096, "B", op="write")]))
    run.write_meta(back)
    assert run.read_meta().repetitions[0].metrics[0] == Metric(name="block.bytes", labels={"op": "write"},
                                                               value=4096.0, unit="B")


def test_a_runs_metrics_are_the_medians_of_its_repetitions():
    per_rep = [[metric("x", v, "ns", op="read")] for v in (3, 1, 2)] + [[{"name": "x", "labels": {"op": "read"},
                                                                        "value": 10.0, "unit": "ns"}]]
    (m,) = median_metrics(per_rep)
    assert (m.key, m.value, m.unit, m.n) == ("x{op=read}", 2.5, "ns", 4)


def test_a_metric_stored_under_its_old_name_reads_under_todays():
    """latency.syscall.syscall.p99 (the layer said twice) is latency.syscall.p99 now; a run analysed before the
    rename compares with one analysed after it."""
    meta = RunMeta.from_dict({"format": "mobiperf-run", "version": 1, "status": "complete", "metrics": [
        {"name": "latency.syscall.syscall.p99", "labels": {"op": "pwrite64"}, "value": 5.0, "unit": "ns", "n": 3}]})
    (m,) = meta.metrics
    assert (m.key, m.value, m.n) == ("latency.syscall.p99{op=pwrite64}", 5.0, 3)


def test_an_old_sweeps_metric_keys_read_under_todays():
    from mobiperf.orchestration.sweep.summary import canonical_metric

    assert canonical_metric("latency.syscall.syscall.p50{op=write}") == "latency.syscall.p50{op=write}"
    assert canonical_metric("e2e.tps") == "run.tps" and canonical_metric("block.bytes{op=write}") == "block.bytes{op=write}"


def test_popping_keys_as_dict_code_does():
    rep = Repetition.from_dict({"index": 2, "exit_code": 0, "workload_ns": 7, "ftrace": {}})
    assert rep.pop("workload_ns", None) == 7 and "workload_ns" not in rep and rep.pop("workload_ns", None) is None
    assert rep.pop("ftrace") == {} and "ftrace" not in rep.to_json()
    m = Metric(name="x", labels={"op": "read"}, value=1.0, unit="ns")
    assert m.pop("labels") == {"op": "read"} and m.labels == {} and m.pop("unit") == "ns" and m.unit == ""


def test_a_killed_runs_repetition_gets_a_typed_record(tmp_path):
    """A raw directory without a record (its mobiperf was killed): add_missing_repetitions gives it a Repetition
    saying so, which run.json takes like any other."""
    from mobiperf.core.run_stop import add_missing_repetitions

    run = RunDir.create(tmp_path / "k", new_run_meta("k", target={}, stack="ext4", command=["dd"]))
    (run.raw_dir(1) / "ftrace.txt").write_text("x\n")
    meta = run.read_meta()
    meta.repetitions.append(Repetition(index=0, exit_code=0, workload_ns=5))
    add_missing_repetitions(meta, run)
    assert [(r.index, r.exit_code) for r in meta.repetitions] == [(0, 0), (1, None)]
    assert "killed with SIGKILL" in meta.repetitions[1]["stopped"] and meta.repetitions[1]["exit_code"] is None
    run.write_meta(meta)
    assert run.read_meta().repetitions[1].get("stopped") == meta.repetitions[1]["stopped"]
    # run.json says exit_code null (as it did when the record was a dict), not nothing
    written = json.loads((run.path / "run.json").read_text())["repetitions"][1]
    assert written["exit_code"] is None and written["workload_ns"] is None
