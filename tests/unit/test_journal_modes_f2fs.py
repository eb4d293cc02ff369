"""journal-modes on f2fs beside ext4 (mobiperf/orchestration/studies/journal_modes_f2fs.py): where each file
system's per-insert cells run, and the per-insert figures they give, on sweep results of known value."""

from __future__ import annotations

from mobiperf.orchestration.studies import journal_modes_f2fs as jmf
from mobiperf.orchestration.study import Config, Results, get_study, plan_study

N = 40


def test_cells_on_this_host_and_beside_a_phone():
    study = get_study("journal-modes")
    _, local = plan_study(study, Config(quick=True))
    assert {k: (v.get("fs"), v.get("target")) for k, v in local.items() if "count" in k} == {
        **{f"count/{m}": (None, None) for m in jmf.MODES}, **{f"f2fs/count/{m}": ("f2fs", None) for m in jmf.MODES}}
    _, phone = plan_study(study, Config(quick=True, target="adb:127.0.0.1:5641"))
    # the phone's /data takes the study's own cells; ext4 stays on this host, beside it
    assert {k: (v.get("fs"), v["target"]) for k, v in phone.items() if "count" in k} == {
        **{f"count/{m}": (None, "adb:127.0.0.1:5641") for m in jmf.MODES},
        **{f"ext4/count/{m}": ("ext4", "local") for m in jmf.MODES}}
    assert jmf.labels(Config(target="adb:x")) == {"ext4": "ext4/count", "f2fs": "count"}


def _results(labels: dict[str, dict], metrics: dict[str, dict[str, float]], skipped: dict[str, str]) -> Results:
    cells, units = [], []
    for i, (label, params) in enumerate(labels.items()):
        status = "skipped" if label in skipped else "done"
        cells.append({"id": i, "params": params, "status": status, **({"reason": skipped[label]} if status ==
                                                                      "skipped" else {})})
        if status == "done":
            units.append({"cell": i, "rep": 0, "status": "done", "metrics": metrics.get(label, {})})
    return Results({"cells": cells, "units": units}, labels)


def test_per_insert_rows_by_region_and_the_no_journal_check():
    config = Config(quick=True, target="adb:127.0.0.1:5641")
    _, labels = plan_study(get_study("journal-modes"), config)
    metrics = {}
    for mode in jmf.MODES:
        # ext4: per insert 2 data, 1 metadata, 3 journal blocks and 2 fsyncs; f2fs: 2 data, 2 node, no checkpoint
        metrics[f"ext4/count/{mode}"] = {"block.requests{op=write}": 6 * N, "syscall.fsync": 2 * N,
                                         "block.requests{op=write,region=data}": 2 * N,
                                         "block.requests{op=write,region=metadata}": N,
                                         "block.requests{op=write,region=journal}": 3 * N}
        metrics[f"count/{mode}"] = {"block.requests{op=write}": 4 * N, "syscall.fsync": N, "syscall.fdatasync": N,
                                    "block.requests{op=write,region=data}": 2 * N,
                                    "block.requests{op=write,region=node}": 2 * N}
    sections, checks = jmf.sections(_results(labels, metrics, {}), config, N)
    ext4, f2fs = ({r.label: r.ours for r in s.rows} for s in sections)
    assert ext4["WAL: block writes"] == 6 and ext4["WAL: journal"] == 3 and ext4["DELETE: metadata"] == 1
    assert ext4["TRUNCATE: fsync + fdatasync calls"] == 2
    assert f2fs["PERSIST: node"] == 2 and f2fs["PERSIST: checkpoint"] == 0 and f2fs["PERSIST: sit"] == 0
    assert f2fs["WAL: fsync + fdatasync calls"] == 2
    assert "127.0.0.1:5641's /data" in sections[1].source
    assert checks[0].passed is True and checks[0].detail.startswith("DELETE 4.0 vs 6.0")


def test_a_skipped_file_system_says_why_and_the_check_is_not_measured():
    config = Config(quick=True)
    _, labels = plan_study(get_study("journal-modes"), config)
    why = "this kernel has no f2fs (not in /proc/filesystems; modprobe f2fs or use a kernel with CONFIG_F2FS_FS)"
    skipped = {f"f2fs/count/{m}": why for m in jmf.MODES}
    metrics = {f"count/{m}": {"block.requests{op=write}": 6 * N} for m in jmf.MODES}
    sections, checks = jmf.sections(_results(labels, metrics, skipped), config, N)
    f2fs = {r.label: r for r in sections[1].rows}
    assert f2fs["WAL: block writes"].ours is None
    assert f2fs["WAL: block writes"].note.startswith("skipped: this kernel has no f2fs")
    assert checks[0].passed is None and "f2fs missing" in checks[0].detail
