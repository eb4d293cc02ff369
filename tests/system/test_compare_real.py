"""`mobiperf compare` on real runs made here, where the answer is known: the same workload on the same legacy FUSE
stack, once with the phone scheduler model's wake-up delay of 1 ms per FUSE request (--fuse-wakeup 1ms: a 1 MiB
file in 4 KiB writes waits ~0.25 s more) and once without. The run without the delay is faster; the comparison
must say so, in both directions, and must say nothing of a run compared with itself.

Also here: `mobiperf run -n auto` on a workload whose time is known to be stable (a fixed sleep of 0.5 s and a
small write: even on a loaded machine its wall time varies by a few percent), which must stop by itself, within
its limit, and say why.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sp

from conftest import needs_fuse, needs_root

pytestmark = [needs_root, needs_fuse]
MOBIPERF = [sys.executable, "-m", "mobiperf"]
WORKLOAD = ["mobibench", "-p", ".", "-f", "1024", "-r", "4", "-a", "0"]


def mobiperf(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([*MOBIPERF, *args], capture_output=True, text=True, timeout=timeout)


def flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """(slow, fast): five repetitions each of the same workload, with and without the 1 ms FUSE wake-up."""
    d = tmp_path_factory.mktemp("real-compare")
    out = {}
    for name, extra in (("slow", ["--fuse-wakeup", "1ms"]), ("fast", [])):
        done = mobiperf("run", "--stack", "ext4+fuse", *extra, "-n", "5", "--no-report", "--source", "ftrace",
                        "--image-size", "128M", "-o", str(d / name), "--", *WORKLOAD)
        assert done.returncode == 0, done.stderr
        out[name] = d / name
    return out["slow"], out["fast"]


def test_known_faster_new_is_an_improvement_and_passes_the_gate(runs, clean_machine):
    slow, fast = runs
    r = mobiperf("compare", str(slow), str(fast), "--fail-on-regression")
    assert r.returncode == 0, r.stdout + r.stderr
    text = flat(r.stdout)
    assert "VERDICT: IMPROVEMENT: workload.throughput is" in text and "higher is better" in text
    assert "changed under study: FUSE wake-up ns: 1000000 -> default" in text
    assert "!! WARNING" not in r.stdout
    data = json.loads(mobiperf("compare", str(slow), str(fast), "--format", "json").stdout)
    v = data["verdict"]
    assert v["direction"] == "improvement" and v["significant"] is True and v["ratio"] > 2
    assert v["n_a"] == v["n_b"] == 5 and v["ci"][0] > 1
    assert v["p_value"] == pytest.approx(2 / 252)  # every fast repetition beats every slow one


def test_swapped_it_is_a_regression_and_fails_the_gate_with_status_3(runs):
    slow, fast = runs
    r = mobiperf("compare", str(fast), str(slow), "--fail-on-regression")
    assert r.returncode == 3, r.stdout + r.stderr
    assert "VERDICT: REGRESSION: workload.throughput is" in flat(r.stdout)
    assert "gate failed: significant regression of workload.throughput" in r.stderr


def test_a_run_against_itself_is_no_change_with_a_warning_at_the_top(runs):
    _, fast = runs
    r = mobiperf("compare", str(fast), str(fast), "--fail-on-regression")
    assert r.returncode == 0
    lines = r.stdout.splitlines()
    assert lines[2].startswith("!! WARNING: BASE and NEW") and "THE SAME RUN" in flat(r.stdout)
    assert "VERDICT: NO CHANGE: workload.throughput is 1.00x BASE (+0.0%" in flat(r.stdout)
    data = json.loads(mobiperf("compare", str(fast), str(fast), "--format", "json").stdout)
    assert data["verdict"]["direction"] == "no change" and data["verdict"]["p_value"] == 1.0
    # A metric a single repetition measured (say a CPU share the others printed as -nan) cannot be tested at all.
    for row in data["rows"]:
        testable = min(len([v for v in row[side] if v is not None]) for side in ("values_a", "values_b")) >= 2
        assert row["verdict"] == ("not significant" if testable else "undecided"), row


def test_every_p_value_of_real_runs_is_scipys_exact_one(runs):
    slow, fast = runs
    data = json.loads(mobiperf("compare", str(slow), str(fast), "--format", "json").stdout)
    checked = 0
    for row in data["comparisons"][0]["rows"]:
        # compare leaves out what a repetition did not measure (a workload's "-nan" CPU share is null here)
        a = np.array([v for v in row["values_a"] if v is not None], float)
        b = np.array([v for v in row["values_b"] if v is not None], float)
        pooled = np.concatenate([a, b])
        if row["p_value"] is None or min(len(a), len(b)) < 2 or np.all(pooled == pooled[0]):
            continue
        if len(np.unique(pooled)) == len(pooled):
            expected = sp.mannwhitneyu(a, b, method="exact").pvalue
        else:
            expected = sp.permutation_test((a, b), lambda x, y, axis: sp.mannwhitneyu(x, y, axis=axis).statistic,
                                           vectorized=True, n_resamples=np.inf).pvalue
        assert row["p_value"] == pytest.approx(min(1.0, expected), rel=1e-9), row["metric"]
        checked += 1
    assert checked >= 10


def _first_reps(run: Path, dest: Path, n: int) -> Path:
    """A copy of a real run keeping only its first n repetitions."""
    shutil.copytree(run, dest)
    meta = json.loads((dest / "run.json").read_text())
    meta["repetitions"] = meta["repetitions"][:n]
    meta["id"] = dest.name
    (dest / "run.json").write_text(json.dumps(meta))
    return dest


def test_three_against_three_never_shows_a_significant_row(runs, tmp_path):
    slow, fast = runs
    a, b = _first_reps(slow, tmp_path / "slow3", 3), _first_reps(fast, tmp_path / "fast3", 3)
    data = json.loads(mobiperf("compare", str(a), str(b), "--format", "json").stdout)
    assert data["verdict"]["significant"] is False and data["verdict"]["direction"] == "no change"
    assert data["verdict"]["ratio"] > 2  # the effect is there; 3 vs 3 cannot show it
    assert not [r["metric"] for r in data["rows"] if r["verdict"] in ("improvement", "regression", "changed")]
    text = flat(mobiperf("compare", str(a), str(b)).stdout)
    assert text.count("with n=3 vs 3 no change can be significant at alpha=0.05") == 1
    assert "IMPROVEMENT" not in text and "REGRESSION" not in text


def test_run_n_auto_stops_on_a_stable_workload_and_says_why(tmp_path, clean_machine):
    out = tmp_path / "auto"
    r = mobiperf("run", "--stack", "ext4", "-n", "auto:12", "--min-effect", "10%", "--no-report", "--source",
                 "ftrace", "--image-size", "128M", "-o", str(out), "--", "sh", "-c", "sleep 0.5; echo x > f")
    assert r.returncode == 0, r.stderr
    meta = json.loads((out / "run.json").read_text())
    auto = meta["auto_repeat"]
    n = len(meta["repetitions"])
    assert auto["metric"] == "run.workload_time" and auto["looks"] == [8, 12]
    assert n == auto["repetitions"] == 8 and auto["stopped"] is True  # the first look already suffices
    assert "narrower than the minimum effect 10%" in auto["reason"]
    assert f"repetitions: {n} of at most 12 (-n auto): after 8 repetitions the" in r.stdout
    assert "-n auto: look at 8 repetitions:" in r.stderr
    look = auto["history"][0]
    values = sorted(auto["values"])
    assert (look["low"], look["high"]) == (values[0], values[-1])  # 8 values at 96.2 %: the order statistics 1, 8
    assert all(0.5e9 < v < 1.5e9 for v in values)


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory):
    import os

    d = Path(os.environ.get("MOBIPERF_SCREENSHOT_DIR") or tmp_path_factory.mktemp("screenshots"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def test_compare_page_and_run_report_of_real_runs_in_chromium(runs, screenshots, tmp_path):
    from browser_check import check_page, chromium_available

    ok, why = chromium_available()
    if not ok:
        pytest.skip(why)
    slow, fast = runs
    page = tmp_path / "compare.html"
    r = mobiperf("compare", str(slow), str(fast), "--guard", "latency.d2c.p99{op=write}:50%", "-o", str(page))
    assert r.returncode == 0, r.stderr
    check = check_page(page, screenshots / "real-compare.png", tiles=2)
    print(f"\nscreenshots: {check.screenshot} and its tiles -0, -1")
    assert check.console_errors == []
    assert all(f["drawn"] and f["traces"] for f in check.figures)
    ids = [f["id"] for f in check.figures]
    # the verdict, then where the time moved (the differential icicle, the latency shifts), then guards, changes
    assert ids[:5] == ["fig-primary", "fig-icicle-0", "fig-latency-cdfs", "fig-guard-0", "fig-changes"]
    primary = check.figures[0]
    assert primary["on_first_screen"] and primary["points"] == 10
    lines = [line.strip() for line in check.text.splitlines() if line.strip()]
    sentence = lines[lines.index("Verdict", lines.index("Table 3") + 1) + 1]
    assert sentence.startswith("IMPROVEMENT: workload.throughput is ") and "n=5 vs 5" in sentence
    assert "changed under study: FUSE wake-up ns 1000000 → default" in check.text

    assert mobiperf("report", str(fast), "-o", str(tmp_path / "report.html")).returncode == 0
    report = check_page(tmp_path / "report.html", screenshots / "real-report.png", tiles=2)
    assert report.console_errors == [] and all(f["drawn"] for f in report.figures)
    assert {"fig-characterisation-block", "fig-layer-breakdown", "fig-latency-cdf", "fig-lba",
            "fig-throughput"} <= {f["id"] for f in report.figures}
    assert "median of 5; range" in report.text
    assert "Block access pattern by region (repetition 0 of 5," in report.text or \
        "(repetition 0 of 5," in json.dumps([f["title"] for f in report.figures])
    assert "every request of all 5 repetitions, pooled" in json.dumps([f["title"] for f in report.figures])


def test_analyze_of_a_real_run_fits_120_columns(runs):
    _, fast = runs
    r = mobiperf("analyze", str(fast))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert max(len(line) for line in lines) <= 120
    assert "== IO classes (block and syscall layers)" in lines and "┆" not in r.stdout
    # The notes of what was not computed are grouped by reason: one line per reason, not one per analysis.
    notes = [line for line in r.stderr.splitlines() if line.startswith("note: ") and " not computed: " in line]
    assert len(notes) >= 2 and len(notes) == len({line.split(" not computed: ")[1] for line in notes})
    # and the FUSE layer's source, in one line of its own (collectors/parse/fuse_layer.py)
    assert "note: FUSE layer: from fuse_request_send/end paired by request id: " in r.stderr
    data = json.loads(mobiperf("analyze", str(fast), "--format", "json").stdout)
    assert len(data["IO classes (block and syscall layers)"]) > 0


def test_compare_until_adds_repetitions_to_both_runs_and_says_why_it_stopped(runs, tmp_path, clean_machine):
    slow, fast = runs
    a, b = _first_reps(slow, tmp_path / "slow3", 3), _first_reps(fast, tmp_path / "fast3", 3)
    for run in (a, b):  # the copies keep only what their run.json says
        for rep in (3, 4):
            shutil.rmtree(run / "raw" / f"rep{rep}")
    r = mobiperf("compare", str(a), str(b), "--until", "5", "--primary", "run.workload_time", "--format", "json")
    assert r.returncode == 0, r.stderr
    assert "--until: looks at 5 repetitions" in r.stderr
    assert r.stderr.count("--until: BASE") == 2 and r.stderr.count("--until: NEW") == 2
    stop = [line for line in r.stderr.splitlines() if line.startswith("--until: ")][-1]  # why it stopped
    # the 1 ms wake-up makes the slow run more than twice as slow: the verdict is settled at the only look
    assert "the verdict is settled" in stop and "lies wholly beyond the minimum effect 5%" in stop, stop
    data = json.loads(r.stdout)
    assert data["verdict"]["n_a"] == data["verdict"]["n_b"] == 5
    assert data["verdict"]["metric"] == "run.workload_time" and data["verdict"]["direction"] == "improvement"
    for run in (a, b):
        meta = json.loads((run / "run.json").read_text())
        assert meta["status"] == "complete" and [r["index"] for r in meta["repetitions"]] == [0, 1, 2, 3, 4]
        assert all(r["metrics"] for r in meta["repetitions"])  # analysed again, every repetition
        assert meta["until"]["stopped"] is True and meta["until"]["looks"] == [5]
        assert meta["stack"] == "ext4+fuse"
    assert json.loads((a / "run.json").read_text())["fuse_wakeup_ns"] == 1_000_000
