"""mobiperf.core.stopping_rule: the fixed look schedule, the alpha spent over the looks, and what matters in the end: the
interval reported when the rule stopped covers the true median at least 1 - alpha of the time, although the rule
looked several times (checked by simulation against a known distribution)."""

import math

import numpy as np
import pytest

from mobiperf.core import stopping_rule
from mobiperf.core.errors import UsageError


@pytest.mark.parametrize("limit,first,looks", [
    (20, 5, (5, 8, 12, 20)), (20, 8, (8, 12, 20)), (30, 5, (5, 8, 12, 18, 30)),  # 27 is too close to 30
    (5, 5, (5,)), (3, 5, (3,)), (100, 8, (8, 12, 18, 27, 41, 62, 100)),
])
def test_look_schedule(limit, first, looks):
    assert stopping_rule.look_schedule(limit, first) == looks


def test_the_looks_spend_exactly_alpha_pocock_style():
    looks = stopping_rule.look_schedule(20, 8)
    alphas = stopping_rule.look_alphas(looks, 0.05)
    assert sum(alphas) == pytest.approx(0.05)
    assert all(a > 0 for a in alphas)
    # Pocock-type: alpha(t) = alpha ln(1 + (e - 1) t); at t = 8/20 that is 0.05 ln(1.687) = 0.0262
    assert alphas[0] == pytest.approx(0.05 * math.log(1 + (math.e - 1) * 0.4))


def _simulate(rng, limit, min_effect, sigma):
    """One sequence of lognormal repetitions (true median 100): (stopping n, the reported interval)."""
    plan = stopping_rule.Plan("x", limit, min_effect, first=stopping_rule.FIRST_LOOK_ONE_RUN)
    values = list(100 * np.exp(rng.normal(0, sigma, limit)))
    for n in range(1, limit + 1):
        if plan.wants_look(n):
            look = plan.look_one(values[:n])
            if plan.stopped:
                return n, look
    raise AssertionError("the plan never stopped")


@pytest.mark.parametrize("sigma", [0.02, 0.05])
def test_the_interval_at_the_stop_covers_the_true_median_at_least_95_percent(sigma):
    rng = np.random.default_rng(42)
    trials = [_simulate(rng, 30, 0.08, sigma) for _ in range(400)]
    covered = sum(look.low <= 100 <= look.high for _, look in trials if look.relative_width != math.inf)
    bounded = sum(look.relative_width != math.inf for _, look in trials)
    assert bounded == len(trials)
    assert covered / bounded >= 0.95, covered / bounded
    assert all(n <= 30 for n, _ in trials)
    if sigma == 0.02:  # a stable workload mostly stops at the first look
        assert sum(n == 8 for n, _ in trials) / len(trials) >= 0.8


def test_a_noisy_workload_stops_at_the_limit_and_says_so():
    rng = np.random.default_rng(1)
    n, look = _simulate(rng, 12, 0.02, 0.5)
    assert n == 12
    plan = stopping_rule.Plan("workload.throughput", 12, 0.02, first=8)
    for k in (8, 12):
        plan.look_one(list(100 * np.exp(rng.normal(0, 0.5, k))))
    assert plan.stopped and plan.reason.startswith("reached the limit of 12 repetitions; the ")
    assert "interval of workload.throughput is still" in plan.reason


def test_too_few_values_for_the_confidence_are_unbounded_with_the_reason():
    plan = stopping_rule.Plan("x", 5, 0.05, first=8)   # one look at 5, confidence 95 %: a median needs 6 values
    look = plan.look_one([1.0, 1.01, 0.99, 1.0, 1.02])
    assert look.relative_width == math.inf and "needs at least 6" in look.note
    assert plan.stopped and "is unbounded" in plan.reason and "needs at least 6" in plan.reason


def test_two_sample_looks_use_the_ratio_of_medians():
    plan = stopping_rule.Plan("workload.throughput", 20, 0.10)
    rng = np.random.default_rng(3)
    base, new = 100 * np.exp(rng.normal(0, 0.01, 5)), 150 * np.exp(rng.normal(0, 0.01, 5))
    look = plan.look_two(base, new)
    assert look.n == 5 and look.low < 1.5 < look.high and plan.stopped


@pytest.mark.parametrize("text,expected", [("3", 3), ("100", 100), ("auto", ("auto", 20)), ("auto:30", ("auto", 30)),
                                           ("AUTO:2", ("auto", 2))])
def test_parse_repeat(text, expected):
    assert stopping_rule.parse_repeat(text) == expected


@pytest.mark.parametrize("text,allow_auto,message", [
    ("0", True, "whole number in 1..100, or auto[:LIMIT]"), ("101", False, "whole number in 1..100"),
    ("auto", False, "whole number in 1..100"), ("auto:1", True, "limit of auto must be a whole number in 2..100"),
    ("three", True, "whole number"),
])
def test_parse_repeat_rejects_with_the_valid_range(text, allow_auto, message):
    with pytest.raises(UsageError, match=message.replace("[", r"\[").replace("]", r"\]")):
        stopping_rule.parse_repeat(text, allow_auto=allow_auto)


def _compare_until_stop(rng, ratio, sigma, limit=20, min_effect=0.05):
    """Two sides of lognormal repetitions (medians 100 and 100 x ratio) looked at as compare --until does: (the
    stopping n per side, the look, the plan)."""
    plan = stopping_rule.Plan("workload.throughput", limit, min_effect)
    base = list(100 * np.exp(rng.normal(0, sigma, limit)))
    new = list(100 * ratio * np.exp(rng.normal(0, sigma, limit)))
    for n in plan.looks:
        look = plan.look_two(base[:n], new[:n])
        if plan.stopped:
            return n, look, plan
    raise AssertionError("the plan never stopped")


def test_a_clear_but_noisy_effect_stops_at_the_first_look_with_the_verdict_settled():
    rng = np.random.default_rng(5)
    trials = [_compare_until_stop(rng, 2.0, 0.25) for _ in range(40)]
    early = [t for t in trials if t[0] == 5]
    # 2x with 25 % noise: settled before the limit of 20, where only precision would have stopped it
    assert len(early) >= 0.7 * len(trials) and all(t[0] < 20 and "settled" in t[2].reason for t in trials)
    n, look, plan = early[0]
    assert look.relative_width > plan.min_effect   # not precise: only the verdict is settled
    assert look.low >= 1.05 and "the verdict is settled" in plan.reason and "wholly beyond" in plan.reason


def test_no_change_never_settles_beyond_more_often_than_alpha_and_the_stop_covers_the_truth():
    rng = np.random.default_rng(6)
    trials = [_compare_until_stop(rng, 1.0, 0.25, limit=12) for _ in range(150)]
    beyond = sum("wholly beyond" in plan.reason for _, _, plan in trials)
    assert beyond / len(trials) <= 0.05
    covered = sum(look.low <= 1.0 <= look.high for _, look, _ in trials)
    assert covered / len(trials) >= 0.95


def test_a_ratio_known_to_be_inside_the_minimum_effect_settles_as_no_change():
    plan = stopping_rule.Plan("workload.throughput", 20, 0.05)
    rng = np.random.default_rng(9)
    base, new = 100 * np.exp(rng.normal(0, 0.02, 5)), 101 * np.exp(rng.normal(0, 0.02, 5))
    look = plan.look_two(base, new)
    assert 0.95 < look.low and look.high < 1.05 and look.relative_width > 0.05 / 2
    assert plan.stopped and ("wholly within" in plan.reason or "narrower than" in plan.reason)


def test_run_n_auto_with_a_baseline_stops_when_the_verdict_against_it_is_settled(tmp_path):
    """`mobiperf run -n auto --baseline RUN`: BASE's 5 repetitions took ~1 s +- 20 %, the new run's take half as
    long with the same noise: after 5 repetitions the verdict is settled, long before the interval of the ratio is
    5 % wide."""
    import json

    from mobiperf.core.runstore import RunDir
    from mobiperf.orchestration.auto_repeat import AutoRepeat

    rng = np.random.default_rng(11)
    base = RunDir.create(tmp_path / "base", {"repetitions": [
        {"index": i, "exit_code": 0, "workload_ns": int(1e9 * np.exp(rng.normal(0, 0.2)))} for i in range(5)]})
    new = RunDir.create(tmp_path / "new", {"repetitions": []})
    said: list[str] = []
    auto = AutoRepeat(20, 0.05, baseline=base.path, say=said.append)
    assert auto.primary == "run.workload_time" and len(auto.baseline) == 5
    for i in range(20):
        if auto.after_repetition(new, {"index": i, "exit_code": 0,
                                       "workload_ns": int(0.5e9 * np.exp(rng.normal(0, 0.2)))}):
            break
    assert len(auto.values) in (5, 8) and "the verdict is settled" in auto.plan.reason
    assert "interval of the ratio of run.workload_time to the baseline's" in said[0]
    json.dumps(auto.as_dict())
    with pytest.raises(UsageError, match="no successful repetition"):
        AutoRepeat(20, 0.05, baseline=new.path)
