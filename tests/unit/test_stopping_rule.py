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
