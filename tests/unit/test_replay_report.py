"""A replay run's page: the Replay section beside the run's figures (what was replayed, how faithfully), a loud
banner at the top when a held check failed, nothing of it on other runs' pages."""

from __future__ import annotations

import polars as pl

from mobiperf.core.schema import REPLAY_FIDELITY
from mobiperf.reports.page import render_report

META = {"id": "r", "stack": "ext4", "command": ["mobibench", "-p", ".", "-g", "/x/replay.script"], "status": "complete",
        "repetitions": [{"index": 0, "exit_code": 0}], "metrics": [],
        "replay": {"source": "runs/app", "rep": 0, "kind": "syscalls", "timing": "open", "same_stack": True,
                   "calls": 1533, "threads": 2, "notes": ["28 outside the stack's directory"],
                   "made_before": {"files": 2, "dirs": 1, "bytes": 3 << 20}, "original": {}}}


def fidelity(ok_elapsed: bool) -> pl.DataFrame:
    return REPLAY_FIDELITY.validate(pl.DataFrame([
        {"rep": 0, "metric": "calls.pwrite", "original": 912.0, "replay": 912.0, "ratio": 1.0, "tolerance": 0.0,
         "ok": True},
        {"rep": 0, "metric": "block.write_bytes", "original": 4.5e6, "replay": 4.4e6, "ratio": 0.978,
         "tolerance": 0.05, "ok": True},
        {"rep": 0, "metric": "elapsed", "original": 6.2e8, "replay": 1.6e9 if not ok_elapsed else 6.3e8,
         "ratio": 2.58 if not ok_elapsed else 1.016, "tolerance": 0.1, "ok": ok_elapsed}]))


def test_a_faithful_replay_shows_its_table_and_no_banner():
    page = render_report(META, {"replay_fidelity": fidelity(True)})
    assert 'href="#replay"' in page and "REPLAY FIDELITY FAILED" not in page
    assert "1,533 in 2 thread(s)" in page and "open loop (each call after its recorded think time)" in page
    assert "28 outside the stack" in page
    assert "2 file(s) of 3 MiB in all" in page
    assert page.count("<td class='improvement'>yes</td>") == 3 and "±5%" in page and "equal" in page


def test_a_failed_check_is_said_at_the_top():
    page = render_report(META, {"replay_fidelity": fidelity(False)})
    banner = page.index("REPLAY FIDELITY FAILED: 1 check(s) outside their bounds (elapsed)")
    assert banner < page.index('id="summary"')
    assert "<td class='regression'>NO</td>" in page and "2.580" in page


def test_other_runs_have_no_replay_section():
    meta = {k: v for k, v in META.items() if k != "replay"}
    page = render_report(meta, {})
    assert 'href="#replay"' not in page and "REPLAY FIDELITY" not in page
