"""`mobiperf compare` on fixed run directories (tests/fixtures/runs, made by make_fixtures.py): golden text
output, the verdict on the primary metric and the guards, exit status with --fail-on-regression, json/csv content,
loud warnings for a run compared with itself and for different workloads, incomplete runs, pooled groups and bad
input. Real runs compared: tests/system/test_compare_real.py.

Regenerate the golden files with MOBIPERF_REGEN_GOLDEN=1 pytest tests/unit/test_compare.py, then review the diff.
"""

import csv
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

RUNS = Path(__file__).parents[1] / "fixtures" / "runs"
EXPECTED = RUNS / "expected"


def mobiperf_process(*args, cwd=RUNS):
    """The real command, for exit statuses and error messages exactly as a CI job sees them."""
    return subprocess.run([sys.executable, "-m", "mobiperf", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def mobiperf(*args):
    """In-process (fast): stdout, stderr and the exit status of the compare command."""
    from click.testing import CliRunner

    from mobiperf.cli import cli
    from mobiperf.commands import register_all

    register_all(cli)
    old = os.getcwd()
    os.chdir(RUNS)
    try:
        result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    finally:
        os.chdir(old)
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)


def flat(text: str) -> str:
    """The text with its wrapped lines joined, to look for a phrase wherever the 120-column wrap broke it."""
    return " ".join(text.split())


def assert_golden(name: str, text: str):
    path = EXPECTED / name
    if os.environ.get("MOBIPERF_REGEN_GOLDEN"):
        EXPECTED.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"no golden file {path}; run with MOBIPERF_REGEN_GOLDEN=1"
    assert text == path.read_text()


@pytest.mark.parametrize("new", ["same", "regressed", "other-workload", "incomplete"])
def test_golden_text(new):
    r = mobiperf("compare", "base", new)
    assert r.returncode == 0, r.stderr
    assert_golden(f"compare-base-{new}.txt", r.stdout)


def test_text_fits_120_columns_and_leads_with_the_verdict():
    r = mobiperf("compare", "base", "regressed", "other-workload", "incomplete", "--guard", "latency.d2c.p99")
    lines = r.stdout.splitlines()
    assert max(len(line) for line in lines) <= 120, max(lines, key=len)
    first_verdict = next(i for i, line in enumerate(lines) if line.startswith("VERDICT:"))
    first_context = next(i for i, line in enumerate(lines) if line.startswith("context (never gates)"))
    assert first_verdict < first_context
    # Warnings come before any verdict, at the top.
    assert all(i < first_verdict for i, line in enumerate(lines) if line.startswith("!! WARNING"))


def test_no_significant_change_passes_ci_gate():
    r = mobiperf_process("compare", "base", "same", "--fail-on-regression")
    assert r.returncode == 0, r.stderr
    assert "VERDICT: NO CHANGE: workload.throughput is" in r.stdout
    assert ("summary: verdict no change (workload.throughput); context: 0 regressions, 0 improvements, 0 changed, "
            "6 not significant, 0 undecided") in flat(r.stdout)


def test_primary_regression_fails_ci_gate_with_status_3():
    r = mobiperf_process("compare", "base", "regressed", "--fail-on-regression")
    assert r.returncode == 3, r.stderr
    verdict = next(line for line in r.stdout.splitlines() if line.startswith("VERDICT:"))
    assert verdict.startswith("VERDICT: REGRESSION: workload.throughput is 0.802x BASE (-19.8%")  # 32.1 / 40.0
    assert "p=0.0079" in verdict  # complete separation of 5 vs 5: 2 / C(10, 5)
    assert "gate failed: significant regression of workload.throughput" in r.stderr
    # Context regressions (p99 latency, wall time) are shown, not gating.
    line = next(line for line in r.stdout.splitlines() if line.strip().startswith("latency.d2c.p99{op=write}"))
    assert "+30.3%" in line and "0.0079" in line and "REGRESSION (lower is better)" in line
    # Without the flag a regression is reported, not turned into a failure.
    assert mobiperf("compare", "base", "regressed").returncode == 0


def test_context_regression_does_not_gate_but_a_guard_does():
    r = mobiperf("compare", "base", "regressed", "--primary", "latency.d2c.p50", "--fail-on-regression")
    assert r.returncode == 0, r.stdout  # p50 unchanged; p99 and throughput are context now
    assert "VERDICT: NO CHANGE: latency.d2c.p50{op=write} is" in r.stdout
    r = mobiperf("compare", "base", "regressed", "--primary", "latency.d2c.p50", "--guard",
                 "latency.d2c.p99{op=write}:10%", "--fail-on-regression")
    assert r.returncode == 3
    guard = next(line for line in r.stdout.splitlines() if line.strip().startswith("latency.d2c.p99{op=write}"))
    assert guard.split() == ["latency.d2c.p99{op=write}", "10%", "+30.3%", "0.0079", "5/5", "FAILED"]
    # A guard with room for the change passes.
    r = mobiperf("compare", "base", "regressed", "--primary", "latency.d2c.p50", "--guard",
                 "latency.d2c.p99{op=write}:40%", "--fail-on-regression")
    assert r.returncode == 0 and "guards 1 ok, 0 failed" in r.stdout


def test_a_run_compared_with_itself_warns_at_the_top_and_shows_no_change():
    r = mobiperf_process("compare", "base", "base", "--fail-on-regression")
    assert r.returncode == 0
    lines = r.stdout.splitlines()
    assert lines[2].startswith("!! WARNING: BASE and NEW base are THE SAME RUN")
    assert any(line.startswith("VERDICT: NO CHANGE: workload.throughput is 1.00x BASE (+0.0%") for line in lines)


def test_three_against_three_says_once_that_nothing_can_be_significant():
    r = mobiperf("compare", "three-fuse", "three-bfuse", "--format", "json")
    data = json.loads(r.stdout)
    v = data["verdict"]
    assert v["metric"] == "workload.throughput" and v["direction"] == "no change" and v["significant"] is False
    assert v["p_value"] == pytest.approx(0.1) and v["n_a"] == v["n_b"] == 3 and v["ratio"] == pytest.approx(39.2 / 4.4)
    assert all(row["verdict"] in ("not significant", "undecided") for row in data["rows"])
    text = flat(mobiperf("compare", "three-fuse", "three-bfuse").stdout)
    assert text.count("no change can be significant at alpha=0.05") == 1
    assert "smallest possible two-sided Mann-Whitney p-value is 0.1" in text
    assert "REGRESSION" not in text and "IMPROVEMENT" not in text.replace("NO CHANGE", "")
    # The bootstrap cannot decide on 3 values per side either, and says so instead of a verdict.
    boot = json.loads(mobiperf("compare", "three-fuse", "three-bfuse", "--method", "bootstrap",
                               "--format", "json").stdout)
    assert boot["verdict"]["significant"] is False
    assert any("bootstrap cannot decide" in n for n in boot["notes"])
    assert "coarse" in boot["verdict"]["ci_note"]


def test_json_output_has_a_top_level_verdict_and_every_row():
    r = mobiperf("compare", "base", "regressed", "--format", "json", "--guard", "latency.d2c.p99:10%")
    data = json.loads(r.stdout)
    v = data["verdict"]
    assert {"metric", "direction", "significant", "ratio", "ci", "p_value", "n_a", "n_b"} <= set(v)
    assert v["metric"] == "workload.throughput" and v["direction"] == "regression" and v["significant"] is True
    assert v["ratio"] == pytest.approx(32.1 / 40.0) and v["n_a"] == v["n_b"] == 5
    assert v["ci"][0] < v["ratio"] < v["ci"][1] < 1
    assert v["p_value"] == pytest.approx(2 / 252)
    assert v["guards"] == [{"metric": "latency.d2c.p99{op=write}", "max_regression": 0.1, "failed": True,
                            "change": pytest.approx(6.2 / 4.76 - 1), "p_value": pytest.approx(2 / 252),
                            "verdict": "regression"}]
    assert data["has_regression"] is True
    rows = {m["metric"]: m for m in data["rows"]}
    assert "workload.throughput" not in rows  # the verdict is not repeated among the rows
    p99 = rows["latency.d2c.p99{op=write}"]
    assert p99["role"] == "guard" and p99["layer"] == "block"
    assert p99["base_median"] == 4_760_000 and p99["new_median"] == 6_200_000
    assert p99["values_a"] == [4_700_000, 4_810_000, 4_760_000, 4_900_000, 4_650_000]
    assert p99["n_base"] == 5 and p99["direction"] == "lower" and p99["verdict"] == "regression"
    assert p99["ci_low"] > 1.2 and p99["ci_high"] < 1.4
    assert rows["run.workload_time"]["role"] == "context" and rows["run.workload_time"]["layer"] == "workload"
    assert data["comparisons"][0]["settings"] == [{"kind": "stack", "name": "stack", "base": "ext4",
                                                   "new": "ext4+fuse"}]


def test_csv_output():
    r = mobiperf("compare", "base", "regressed", "--format", "csv", "--metric", "latency.*")
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert [(row["metric"], row["role"]) for row in rows] == [
        ("workload.throughput", "primary"), ("latency.d2c.p50{op=write}", "context"),
        ("latency.d2c.p99{op=write}", "context")]
    assert rows[2]["verdict"] == "regression" and float(rows[2]["ratio"]) == pytest.approx(6.2 / 4.76)
    assert rows[2]["test"] == "exact Mann-Whitney U"


def test_bootstrap_method_and_min_effect_option():
    r = mobiperf("compare", "base", "regressed", "--method", "bootstrap", "--min-effect", "40%", "--format", "json")
    rows = {m["metric"]: m for m in json.loads(r.stdout)["rows"]}
    p99 = rows["latency.d2c.p99{op=write}"]
    assert p99["verdict"] == "not significant" and "below the minimum effect 40%" in p99["reason"]


def test_different_workloads_warn_loudly_naming_each_setting():
    r = mobiperf("compare", "base", "other-workload", "--format", "json")
    assert "DIFFERENT WORKLOADS OR TARGETS" in r.stderr
    for setting in ("command count: 300 -> 600", "command oflag: direct,dsync -> direct",
                    "kernel: 6.18.44 -> 6.1.0"):
        assert setting in r.stderr
    text = mobiperf("compare", "base", "other-workload").stdout
    assert "!!   command count: 300 -> 600" in text


def test_incomplete_run_is_labelled_and_failed_repetition_left_out():
    text = flat(mobiperf("compare", "base", "incomplete").stdout)
    assert "NEW incomplete (2 repetitions, stack ext4, INCOMPLETE)" in text
    assert "repetition 1 failed (exit status 1) and is left out" in text
    assert "VERDICT: NO CHANGE can be shown" in text and "6 undecided" in text
    assert text.count("no test is possible") == 1


def test_group_of_runs_pools_repetitions(tmp_path):
    group = tmp_path / "group"
    group.mkdir()
    for name in ("a", "b"):
        shutil.copytree(RUNS / "base", group / name)
    data = json.loads(mobiperf("compare", str(group), "same", "--format", "json").stdout)
    assert data["base"]["repetitions"] == 10
    p99 = next(m for m in data["rows"] if m["metric"] == "latency.d2c.p99{op=write}")
    assert p99["n_base"] == 10
    assert data["verdict"]["n_a"] == 10 and data["verdict"]["n_b"] == 5


def test_several_new_runs_compare_each_against_base():
    data = json.loads(mobiperf("compare", "base", "same", "regressed", "--format", "json").stdout)
    assert [c["new"]["label"] for c in data["comparisons"]] == ["same", "regressed"]
    assert data["has_regression"] is True


def test_html_page_from_run_json_only_says_why_figures_are_missing(tmp_path):
    out = tmp_path / "cmp.html"
    r = mobiperf("compare", "base", "incomplete", "other-workload", "-o", str(out))
    assert r.returncode == 0, r.stderr
    page = out.read_text()
    assert "<title>[INCOMPLETE] mobiperf compare: base</title>" in page
    assert 'id="run-status">INCOMPLETE<' in page
    assert "NEW incomplete is INCOMPLETE" in page
    assert "ran DIFFERENT WORKLOADS OR TARGETS" in page and "command count: 300 → 600" in page
    assert "have no io_class/block_io result tables" in page


def usage_error(*args) -> str:
    """In-process: the UsageError message the command stops with (exit status 2 in the CLI)."""
    from click.testing import CliRunner

    from mobiperf.cli import cli
    from mobiperf.commands import register_all
    from mobiperf.core.errors import UsageError

    register_all(cli)
    old = os.getcwd()
    os.chdir(RUNS)
    try:
        result = CliRunner().invoke(cli, list(args))
    finally:
        os.chdir(old)
    assert isinstance(result.exception, UsageError), (result.exception, result.output)
    return str(result.exception)


def test_bad_input_is_an_error_not_a_verdict(tmp_path):
    r = mobiperf_process("compare", "base", str(tmp_path / "nope"))  # as a CI job sees it: status 2, one line
    assert r.returncode == 2 and "no such run directory" in r.stderr and r.stdout == ""
    assert "no metric matches nothing.*" in usage_error("compare", "base", "same", "--metric", "nothing.*")
    assert "not a number or percentage" in usage_error("compare", "base", "same", "--min-effect", "lots")
    r = mobiperf("compare", "base", "same", "--primary", "latency.d2c.p99")
    assert r.returncode == 0 and "VERDICT: NO CHANGE: latency.d2c.p99{op=write}" in r.stdout
    assert "--primary latency.nothing: no such metric in both BASE and NEW" in usage_error(
        "compare", "base", "same", "--primary", "latency.nothing")
    assert "has no better direction" in usage_error("compare", "base", "same", "--primary", "block.sequential_share")
    assert "'lots' is not a percentage" in usage_error("compare", "base", "same", "--guard", "latency.d2c.p99:lots")
    assert "one NEW" in usage_error("compare", "base", "same", "regressed", "--until", "8")


def test_each_metric_prefix_has_its_group_and_layer_times_are_not_other():
    """replay's what-if reads `layer.time{layer=...}` rows: they group as time by layer, not under [other]."""
    from mobiperf.compare.verdict import LAYER_ORDER, LAYER_PREFIXES, metric_layer

    assert metric_layer("layer.time") == "time by layer"
    assert metric_layer("latency.syscall.p50") == "syscall" and metric_layer("nothing.known") == "other"
    assert {layer for _, layer in LAYER_PREFIXES} <= set(LAYER_ORDER)
