"""mobiperf.core.stats against known distributions: shifted samples are detected, identical ones are not, at the
stated error rates; plus the guard rails (too few repetitions, dispersion, minimum effect, direction)."""

import math

import numpy as np
import pytest

from mobiperf.core import stats


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
    assert c.test == "exact Mann-Whitney U" and c.significant and c.floor_reached
    assert c.verdict == stats.REGRESSION and c.is_regression
    assert c.warnings == []


def test_below_minimum_effect_is_not_significant_and_says_why():
    base = [100.0, 100.1, 100.2, 100.3, 100.4]
    new = [101.0, 101.1, 101.2, 101.3, 101.4]  # +1 %, perfectly separated
    c = stats.compare_samples(base, new, direction=stats.LOWER, min_effect=0.05)
    assert c.p_value < 0.05
    assert c.verdict == stats.NOT_SIGNIFICANT
    assert "below the minimum effect 5%" in c.reason


def test_three_against_three_can_never_be_significant_and_says_why():
    assert stats.smallest_mwu_p(3, 3) == pytest.approx(0.1)
    c = stats.compare_samples([1, 1.1, 1.2], [5, 5.1, 5.2], direction=stats.LOWER)
    assert c.verdict == stats.NOT_SIGNIFICANT and not c.floor_reached
    assert c.p_value == pytest.approx(0.1) and c.reason == "n=3 vs 3 cannot reach alpha 0.05"
    assert "smallest possible two-sided Mann-Whitney p-value is 0.1" in stats.cannot_be_significant(3, 3, 0.05)
    assert stats.cannot_be_significant(5, 5, 0.05) is None


@pytest.mark.parametrize("n_base,n_new", [(3, 3), (3, 4), (2, 6), (2, 5), (4, 3)])  # floors 0.1 .. 0.057
def test_no_sample_below_the_floor_is_ever_significant_even_with_ties(n_base, n_new):
    """The old normal approximation called 3 vs 3 with ties significant (p=0.047); the exact test never can."""
    rng = np.random.default_rng(n_base * 10 + n_new)
    for _ in range(200):
        base = rng.integers(0, 4, n_base).astype(float)          # heavy ties
        new = rng.integers(3, 8, n_new).astype(float)
        c = stats.compare_samples(base, new, direction=stats.HIGHER, min_effect=0.0)
        assert c.verdict not in (stats.IMPROVEMENT, stats.REGRESSION, stats.CHANGED)
        assert math.isnan(c.p_value) or c.p_value >= stats.smallest_mwu_p(n_base, n_new) - 1e-12


# Fixed samples: without ties the p-value is scipy's exact Mann-Whitney; with ties it is scipy's exact
# permutation test of the same statistic (every split enumerated).
FIXED = [
    ([10.1, 11.3, 12.0, 10.5, 11.6], [15.2, 16.0, 14.1, 15.5, 17.3]),     # complete separation
    ([1.0, 2.0, 3.0, 4.0, 5.5], [2.5, 3.5, 5.0, 6.0, 7.0]),                # overlapping
    ([3.1, 2.9, 3.3, 3.0, 3.2, 3.4], [3.05, 3.15, 3.5, 3.6, 3.7, 3.8, 3.9]),
    ([1, 2, 2, 3, 4], [2, 3, 5, 6, 6]),                                   # ties
    ([906, 906, 907, 906, 906], [906, 906, 906, 905, 906]),               # a counter: nearly all tied
    ([4.4, 4.5, 4.3], [39.2, 40.1, 38.3]),
]


@pytest.mark.parametrize("base,new", FIXED)
def test_p_values_are_scipys_exact_ones(base, new):
    from scipy import stats as sp

    c = stats.compare_samples(base, new)
    pooled = np.concatenate([base, new])
    if len(np.unique(pooled)) == len(pooled):
        expected = sp.mannwhitneyu(base, new, alternative="two-sided", method="exact").pvalue
        assert c.test == "exact Mann-Whitney U"
    else:
        def u(x, y, axis=-1):
            return sp.mannwhitneyu(x, y, axis=axis, method="asymptotic").statistic
        expected = sp.permutation_test((np.array(base, float), np.array(new, float)), u, vectorized=True,
                                       permutation_type="independent", n_resamples=np.inf).pvalue
        assert c.test == "exact permutation test of U (ties)"
    assert c.p_value == pytest.approx(min(1.0, expected), rel=1e-12)


def test_exact_values_by_hand():
    # 5 vs 5 completely separated: 2 of the C(10, 5) = 252 splits are as extreme; ties [1,2,2,3,4] vs [2,3,5,6,6]:
    # 30 of the 252 splits have a U at least as far from 12.5 as the observed 4.5 (counted by enumeration below).
    from itertools import combinations

    assert stats.mann_whitney([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]).p_value == pytest.approx(2 / 252)
    pooled = [1, 2, 2, 3, 4, 2, 3, 5, 6, 6]
    from scipy.stats import rankdata
    ranks = rankdata(pooled)
    observed = abs(sum(ranks[:5]) - 15 - 12.5)
    extreme = sum(abs(sum(ranks[list(c)]) - 15 - 12.5) >= observed - 1e-9 for c in combinations(range(10), 5))
    assert stats.mann_whitney(pooled[:5], pooled[5:]).p_value == pytest.approx(extreme / 252)


def test_large_tied_samples_use_seeded_random_splits_and_say_so():
    base, new = [1, 2, 2, 3] * 3, [2, 3, 3, 4] * 3
    a, b = stats.mann_whitney(base, new), stats.mann_whitney(base, new)
    assert a == b and a.method == "permutation test of U, 20,000 random splits (ties)"
    from scipy.stats import mannwhitneyu
    assert a.p_value == pytest.approx(mannwhitneyu(base, new, method="asymptotic").pvalue, abs=0.01)


def test_confidence_intervals_say_why_they_are_points_or_absent():
    point = stats.ratio_ci([4096.0] * 5, [8192.0] * 5)
    assert (point.low, point.high) == (2.0, 2.0) and "every repetition gave the same value on both sides" in point.note
    one_sided = stats.ratio_ci([100.0] * 5, [101, 103, 99, 102, 100])
    assert one_sided.low < one_sided.high and "BASE gave the same value in every repetition" in one_sided.note
    zero = stats.ratio_ci([0, 1, 2, 3, 4], [1, 2, 3, 4, 5])
    assert math.isnan(zero.low) and "a BASE repetition is 0" in zero.note
    coarse = stats.ratio_ci([1, 1.1, 1.2], [5, 5.1, 5.2])
    assert coarse.low < coarse.high and "coarse" in coarse.note
    assert stats.ratio_ci([1.0, 1.1, 1.2, 1.05, 1.15], [2.0, 2.2, 2.1, 2.05, 2.15]).note == ""
    # A tiny ratio is shown with significant digits, not rounded to a point ([0.008, 0.008]).
    c = stats.compare_samples([100, 101, 99, 102, 98], [0.81, 0.83, 0.82, 0.85, 0.84])
    assert c.ci_low < c.ratio < c.ci_high and c.ci_low != c.ci_high


def test_median_interval_is_distribution_free_and_says_when_it_needs_more_values():
    ci = stats.median_ci(list(range(1, 11)), confidence=0.95)
    assert (ci.low, ci.high) == (2, 9)  # order statistics 2 and 9 of 10: coverage 1 - 2 * P(Bin(10, .5) <= 1) = 97.9%
    few = stats.median_ci([1, 2, 3, 4, 5], confidence=0.95)
    assert math.isnan(few.low) and "needs at least 6" in few.note


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
    ("amplification.block", "lower"), ("latency.syscall.p99", "lower"),
])
def test_metric_direction(name, direction):
    assert stats.metric_direction(name) == direction


def test_bootstrap_median_ci_is_seeded_bounded_and_absent_below_two_values():
    values = [10.0, 11.0, 12.0, 30.0]
    ci = stats.bootstrap_median_ci(values, seed=3)
    assert ci == stats.bootstrap_median_ci(values, seed=3)   # the same values and seed, the same interval
    # a resampled median of 4 values lies between the smallest and the largest pair mean
    assert 10.0 <= ci.low <= 11.5 <= ci.high <= 30.0
    assert stats.bootstrap_median_ci([5.0, 5.0, 5.0]) == stats.Interval(5.0, 5.0, 0.95)
    lone = stats.bootstrap_median_ci([7.0])
    assert math.isnan(lone.low) and math.isnan(lone.high) and "fewer than 2" in lone.note


def test_mann_whitney_rows_gives_mann_whitneys_p_values_row_by_row_ties_or_not():
    rng = np.random.default_rng(7)
    for n_base, n_new in ((2, 2), (3, 4), (5, 5), (4, 9), (8, 8)):
        base = rng.integers(0, 4, (10, n_base)).astype(float)   # few values: many ties, and rows all equal
        new = rng.integers(0, 6, (10, n_new)).astype(float)
        base[0], new[0] = 1.0, 1.0
        base[1], new[1] = np.arange(n_base), np.arange(n_base, n_base + n_new)   # complete separation
        got = stats.mann_whitney_rows(base, new)
        want = [stats.mann_whitney(b, n).p_value for b, n in zip(base, new)]
        assert got == pytest.approx(want, abs=1e-12)
        assert got[0] == 1.0 and got[1] == pytest.approx(stats.smallest_mwu_p(n_base, n_new))


def test_mann_whitney_rows_beyond_exact_enumeration_is_a_seeded_monte_carlo_of_the_same_test():
    rng = np.random.default_rng(8)
    base, new = rng.normal(0, 1, (12, 12)), rng.normal(0.8, 1, (12, 12))   # C(24, 12) > 20,000 splits
    got = stats.mann_whitney_rows(base, new)
    want = np.array([stats.mann_whitney(b, n).p_value for b, n in zip(base, new)])
    assert np.abs(got - want).max() < 0.02   # an estimate from 20,000 splits (SE <= 0.0035) against the exact p
    assert (stats.mann_whitney_rows(base, new) == got).all()   # seeded


def test_shift_ci_of_medians_in_the_values_unit():
    ci = stats.shift_ci([10, 11, 12, 13, 14], [20, 21, 22, 23, 24])
    assert ci.low == pytest.approx(7) and ci.high == pytest.approx(13) and ci.note == ""
    assert "fewer than 2" in stats.shift_ci([1], [2, 3]).note
    assert "coarse" in stats.shift_ci([1, 2, 3], [4, 5, 6]).note
