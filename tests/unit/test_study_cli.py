"""`mobiperf study` without running anything: the list, bad names and options, and the bundled paper data."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mobiperf.orchestration import study
from mobiperf.orchestration import sweep
from mobiperf.orchestration.study import Config, plan_study

REPO = Path(__file__).resolve().parents[2]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mobiperf", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=60)


def test_list_and_unknown_study():
    listed = _cli("study", "--list")
    assert listed.returncode == 0
    for name in ("bfuse", "journal-modes", "fjord", "zero-copy", "layers"):
        assert name in listed.stdout, listed.stdout
    bad = _cli("study", "bfuse2")
    assert bad.returncode == 2
    assert "unknown study 'bfuse2'; studies: bfuse" in bad.stderr
    bad_device = _cli("study", "bfuse", "--device", "emmc-1999")
    assert bad_device.returncode == 2 and "valid profiles" in bad_device.stderr


@pytest.mark.parametrize("name", ["bfuse", "journal-modes", "fjord", "zero-copy", "layers"])
def test_every_study_plans_valid_cells_at_both_sizes(name):
    s = study.get_study(name)
    for quick in (True, False):
        definition, labels = plan_study(s, Config(quick=quick))
        assert definition.cells and set(map(str, labels.values())) <= set(map(str, definition.cells))
        assert definition.repeat >= (1 if quick else 2)
    quick, _ = plan_study(s, Config(quick=True))
    full, _ = plan_study(s, Config(quick=False))
    assert len(quick.cells) * quick.repeat < len(full.cells) * full.repeat


def test_bfuse_paper_numbers_are_bundled_with_their_source():
    from mobiperf.orchestration.studies import bfuse

    assert bfuse.PAPER["table3_pwrite"] == {"FUSE": 128_000, "Nobuf": 1_000, "bFUSE": 249}
    assert bfuse.PAPER["fig6_mbps"] == {"4k": 7.0, "512k": 30.0}
    assert bfuse.PAPER["fig17_share_of_raw"]["xfs"]["ICS"] == 0.99
    full, _ = plan_study(study.get_study("bfuse"), Config(quick=False))
    assert all(c.get("device") == "emmc-2012" for c in full.cells)


def test_full_bfuse_study_runs_every_cell_on_one_phone_profile():
    """One phone model for all cells (no per-configuration tuning); --phone none drops it; --quick has none."""
    from mobiperf.stack.phone import PHONES

    full, labels = plan_study(study.get_study("bfuse"), Config(quick=False))
    phone = PHONES["galaxy-s3-2012"]
    assert all(c.get("phone") == phone.name for c in full.cells)
    assert not any(k in c for c in full.cells for k in ("cpu", "dirty", "fuse_wakeup"))  # only via the profile
    plans = [sweep.plan_cell(c) for c in full.cells]
    assert {(p.device, p.dirty, p.cpu, p.fuse_wakeup) for p in plans if not p.skip} == {
        (phone.device, phone.dirty, phone.cpu, phone.fuse_wakeup)}
    assert labels["raw"]["fs"] == "raw" and sweep.plan_cell(labels["raw"]).stack == "raw"
    bare, _ = plan_study(study.get_study("bfuse"), Config(quick=False, phone="none"))
    assert not any("phone" in c for c in bare.cells)
    quick, _ = plan_study(study.get_study("bfuse"), Config(quick=True))
    assert not any("phone" in c for c in quick.cells)


def test_study_rows_get_compares_significance_against_their_sections_first_row(tmp_path):
    """bFUSE --quick with made-up unit results: legacy FUSE at a fifth of native's throughput in every one of 5
    repetitions is a significant regression against native; passthrough within 1 % of native is not."""
    s = study.get_study("bfuse")
    config = Config(quick=True, repeat=5)
    definition, labels = plan_study(s, config)
    data = sweep.SweepDir(tmp_path).create_or_resume(definition)
    mbps = {"native": 100, "legacy": 20, "nobuf": 60, "bfuse": 80, "passthrough": 100.5}
    cell_of = {json_key(p): label for label, p in labels.items()}
    by_id = {c["id"]: cell_of[json_key(c["params"])] for c in data["cells"]}
    for u in data["units"]:
        tput = mbps[by_id[u["cell"]]] * 1e6 * (1 + 0.002 * u["rep"])
        u.update(status="done", metrics={"workload.throughput": tput, "run.throughput": tput,
                                         "workload.ctx_switches": 1000.0 + u["rep"]})
    result = study.write_study_outputs(s, config, data, labels, tmp_path)
    text = study.format_study_text(result)
    layers = next(sec for sec in result["sections"] if "Layer overheads" in sec["title"])
    rows = {r["label"]: r for r in layers["rows"]}
    assert rows["ext4, NOOP (none)"]["verdict"] == "baseline"
    assert rows["legacy FUSE over ext4, CFQ"]["verdict"] == "regression"
    assert rows["legacy FUSE over ext4, CFQ"]["p_value"] == pytest.approx(2 / 252)
    assert rows["FUSE passthrough over ext4 (today's /sdcard)"]["verdict"] == "not significant"
    assert "vs ext4, NOOP (none): -80.0% p=0.0079 REGRESSION" in text
    page = (tmp_path / "study.html").read_text()
    assert "significance (compare&#x27;s test)" in page and "-80.0% p=0.0079 REGRESSION" in page


def json_key(params: dict) -> str:
    import json

    return json.dumps(params, sort_keys=True)
