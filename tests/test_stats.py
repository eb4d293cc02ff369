"""mobiperf.stats against known distributions: shifted samples are detected, identical ones are not, at the
stated error rates; plus the guard rails (too few repetitions, dispersion, minimum effect, direction)."""

import math

import numpy as np
import pytest

from mobiperf import stats


def _trials(n_trials, draw, **kw):
    verdicts = []
    for i in range(n_trials):
        rng = np.random.default_rng(1000 + i)
        base, new = draw(rng)
        verdicts.append(stats.compare_samples(base, new, bootstrap_seed=i, **kw).verdict)
    return verdicts


def test_identical_distributions_false_positive_rate_is_at_most_alpha():
    # 400 trials of N(100, 5) vs N(100, 5), n = 10 each, alpha 0.05, no minimum effect: a calibrated test is
    # significant in ~5 % of trials; 8 % is 2.7 binomial standard deviations above 5 %.
    verdicts = _trials(400, lambda r: (r.normal(100, 5, 10), r.normal(100, 5, 10)), direction=stats.LOWER,
                       min_effect=0.0)
    false_positive = sum(v in (stats.REGRESSION, stats.IMPROVEMENT) for v in verdicts) / len(verdicts)
    assert false_positive <= 0.08, false_positive


def test_shift_of_two_sigma_is_detected_with_power_above_95_percent():
    # N(100, 5) vs N(110, 5), n = 10, no minimum effect: the Mann-Whitney power for a 2 sigma shift is ~0.98.
    verdicts = _trials(200, lambda r: (r.normal(100, 5, 10), r.normal(110, 5, 10)), direction=stats.LOWER,
                       min_effect=0.0)
    detected = verdicts.count(stats.REGRESSION) / len(verdicts)
    assert detected >= 0.95, detected
    assert stats.IMPROVEMENT not in verdicts


def test_bootstrap_method_detects_a_shift_and_rarely_flags_identical_samples():
    shifted = _trials(100, lambda r: (r.lognormal(0, 0.05, 12), r.lognormal(0.2, 0.05, 12)),
                      direction=stats.HIGHER, method="bootstrap")
    assert shifted.count(stats.IMPROVEMENT) / len(shifted) >= 0.95
    same = _trials(200, lambda r: (r.lognormal(0, 0.05, 12), r.lognormal(0, 0.05, 12)),
                   direction=stats.HIGHER, method="bootstrap", min_effect=0.0)
    # The percentile bootstrap of a median is somewhat liberal on small samples: allow 12 %.
    assert sum(v != stats.NOT_SIGNIFICANT for v in same) / len(same) <= 0.12


def test_bootstrap_ci_covers_the_true_ratio():
    rng = np.random.default_rng(7)
    lo, hi = stats.bootstrap_ratio_ci(rng.normal(100, 3, 30), rng.normal(150, 3, 30))
    assert lo < 1.5 < hi
    assert hi - lo < 0.05


def test_exact_numbers_on_a_small_clear_regression():
    c = stats.compare_samples([10, 11, 12, 10.5, 11.5], [15, 16, 14, 15.5, 17], direction=stats.LOWER)
    assert (c.base_median, c.new_median) == (11, 15.5)
    assert c.ratio == pytest.approx(15.5 / 11)
    assert c.p_value == pytest.approx(2 / math.comb(10, 5))  # complete separation: the exact floor
    assert c.verdict == stats.REGRESSION and c.is_regression
    assert c.warnings == []


def test_below_minimum_effect_is_not_significant_and_says_why():
    base = [100.0, 100.1, 100.2, 100.3, 100.4]
    new = [101.0, 101.1, 101.2, 101.3, 101.4]  # +1 %, perfectly separated
    c = stats.compare_samples(base, new, direction=stats.LOWER, min_effect=0.05)
    assert c.p_value < 0.05
    assert c.verdict == stats.NOT_SIGNIFICANT
    assert "below the minimum effect 5%" in c.reason


def test_three_against_three_can_never_be_significant_and_warns():
    assert stats.smallest_mwu_p(3, 3) == pytest.approx(0.1)
    c = stats.compare_samples([1, 1.1, 1.2], [5, 5.1, 5.2], direction=stats.LOWER)
    assert c.verdict == stats.NOT_SIGNIFICANT
    assert any("smallest possible p-value is 0.1" in w for w in c.warnings)


def test_single_repetition_is_undecided_not_a_verdict():
    c = stats.compare_samples([1.0], [2.0], direction=stats.LOWER)
    assert c.verdict == stats.UNDECIDED
    assert any("no test possible" in w for w in c.warnings)


def test_dispersed_sample_warns():
    c = stats.compare_samples([100, 50, 160, 90, 140], [100, 101, 99, 100, 102])
    assert any(w.startswith("BASE is dispersed") for w in c.warnings)
    assert not any(w.startswith("NEW") for w in c.warnings)


def test_neutral_metric_changes_without_being_a_regression():
    c = stats.compare_samples([0.1] * 3 + [0.11, 0.12], [0.5, 0.52, 0.51, 0.5, 0.53], direction=stats.NEUTRAL)
    assert c.verdict == stats.CHANGED


def test_identical_constant_samples_are_not_significant():
    c = stats.compare_samples([4096.0] * 5, [4096.0] * 5, direction=stats.LOWER)
    assert c.p_value == 1.0 and c.verdict == stats.NOT_SIGNIFICANT and c.ratio == 1.0


@pytest.mark.parametrize("name,direction", [
    ("latency.d2c.p99", "lower"), ("workload.elapsed", "lower"), ("workload.throughput", "higher"),
    ("workload.iops", "higher"), ("workload.tps", "higher"), ("block.sequential_share", "none"),
    ("block.size_class_share", "none"), ("block.requests", "lower"), ("run.workload_time", "lower"),
    ("something.unknown", "none"), ("sqlite.fsync_per_txn", "lower"), ("sqlite.journal_meta_share", "none"),
    ("amplification.block", "lower"), ("latency.syscall.syscall.p99", "lower"),
])
def test_metric_direction(name, direction):
    assert stats.metric_direction(name) == direction
