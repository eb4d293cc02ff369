"""Statistics for before/after comparisons: is NEW different from BASE, by how much, and is that believable?

Every repetition is kept; a comparison looks at two samples (one value per repetition) of one metric:

- the medians of each side and their ratio NEW/BASE (medians, because one slow repetition must not move the
  headline figure);
- a significance test, two-sided, computed exactly: the Mann-Whitney U test (rank based, no normality
  assumption; scipy's exact distribution when no value is tied), or with ties the permutation test of the same
  U statistic over every way to split the pooled values (scipy.stats.permutation_test, exact enumeration up to
  20,000 splits, e.g. 8 vs 8; above that 20,000 seeded random splits, said so: the p-value's standard error is
  then at most 0.0016 near 0.05). Both give the same p-value
  when there is no tie. No normal approximation is used where it could claim what the exact test cannot;
- or (`method="bootstrap"`) a percentile bootstrap confidence interval of the ratio of medians (scipy.stats.
  bootstrap, each side resampled on its own; significant when the interval excludes 1);
- a minimum effect: a change smaller than it is "not significant" whatever the p-value says, because a 0.5 %
  change measured on a shared phone is not a finding;
- a direction per metric (lower is better for latencies and elapsed times, higher for throughput) to call a
  significant change an improvement or a regression; metrics without a direction are only "changed".

What cannot be trusted is said, once, with the reason: with 3 vs 3 repetitions the smallest possible two-sided
Mann-Whitney p-value is 2/C(6,3) = 0.1, so no change can be significant at alpha 0.05 (`smallest_mwu_p`); a
bootstrap interval that collapses to a point says why (every repetition gave the same value); a bootstrap of a
median from fewer than 5 values is coarse and is not used to decide; repetitions so dispersed (robust coefficient
of variation, 1.4826 * MAD / median) that the minimum effect drowns in noise are flagged.
"""

from __future__ import annotations

import fnmatch
import math
import warnings
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

LOWER, HIGHER, NEUTRAL = "lower", "higher", "none"

# First match wins; patterns are fnmatch patterns on the metric name (labels excluded).
DIRECTION_RULES: tuple[tuple[str, str], ...] = (
    ("*share*", NEUTRAL),            # a mix (size class, sequential share) is a description, not a score
    ("*throughput*", HIGHER), ("*bandwidth*", HIGHER), ("*.iops", HIGHER), ("*.tps", HIGHER),
    ("*.mbps", HIGHER), ("*per_s", HIGHER),
    ("latency.*", LOWER), ("*.latency*", LOWER), ("*elapsed*", LOWER), ("*_time", LOWER), ("*.time", LOWER),
    ("*.duration", LOWER),
    ("workload.cpu.idle", NEUTRAL), ("workload.cpu.*", LOWER), ("workload.ctx_switches*", LOWER),
    ("block.requests", LOWER), ("block.bytes", LOWER), ("*amplification*", LOWER), ("syscall.count*", LOWER),
    ("*.fsyncs", LOWER), ("*.count", LOWER), ("*journal*", LOWER), ("*metadata*", LOWER),
    ("sqlite.*_per_txn", LOWER),     # syncs, block writes and KiB per transaction: the cost of durability
)

METHODS = ("mwu", "bootstrap")
IMPROVEMENT, REGRESSION, CHANGED = "improvement", "regression", "changed"
NOT_SIGNIFICANT, UNDECIDED = "not significant", "undecided"

MAX_EXACT_SPLITS = 20_000       # C(16, 8) = 12,870: every split of 8 vs 8 is enumerated (~0.1 s)
MONTE_CARLO_SPLITS = 20_000
MIN_BOOTSTRAP_N = 5             # below this, a resampled median takes so few values that the CI undercovers
BOOTSTRAP_RESAMPLES = 9_999


def metric_direction(name: str, rules: Sequence[tuple[str, str]] = DIRECTION_RULES) -> str:
    """`lower`, `higher` or `none`: which way is better for the metric `name`."""
    for pattern, direction in rules:
        if fnmatch.fnmatchcase(name, pattern):
            return direction
    return NEUTRAL


def robust_cv(values: Sequence[float]) -> float:
    """1.4826 * MAD / |median|: the coefficient of variation of a normal sample, robust to one outlier.
    0 for constant samples, inf when the median is 0 but the values vary."""
    a = np.asarray(values, dtype=float)
    if len(a) < 2:
        return 0.0
    med = float(np.median(a))
    mad = float(np.median(np.abs(a - med)))
    if mad == 0:
        return 0.0
    return math.inf if med == 0 else 1.4826 * mad / abs(med)


def smallest_mwu_p(n_base: int, n_new: int) -> float:
    """The smallest two-sided p-value the exact Mann-Whitney U test can give for these sample sizes (complete
    separation, no ties: 2 / C(n_base + n_new, n_base)); ties only make it larger."""
    if n_base < 1 or n_new < 1:
        return 1.0
    return min(1.0, 2.0 / math.comb(n_base + n_new, n_base))


def cannot_be_significant(n_base: int, n_new: int, alpha: float) -> str | None:
    """The sentence saying that no difference can be significant with these sample sizes, or None."""
    floor = smallest_mwu_p(n_base, n_new)
    if floor < alpha:
        return None
    return (f"with n={n_base} vs {n_new} no change can be significant at alpha={alpha:g}: the smallest possible "
            f"two-sided Mann-Whitney p-value is {floor:.3g}; use -n 5 or more (or -n auto)")


def _rank_sum(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    """The rank sum of the first sample, given the pooled mid-ranks: U plus a constant, so the same test."""
    return np.sum(x, axis=axis)


def _scipy():
    """scipy.stats, imported when a test or interval is computed: it costs half a second, which every command
    that never compares (ingest, run, analyze) would otherwise pay at start-up."""
    from scipy import stats

    return stats


@dataclass(frozen=True)
class TestResult:
    p_value: float
    method: str      # how the p-value was computed, for the reader


def mann_whitney(base: Sequence[float], new: Sequence[float], *, seed: int = 0) -> TestResult:
    """Two-sided Mann-Whitney U test, exact (see the module docstring); p 1.0 when every value is equal."""
    a, b = np.asarray(base, dtype=float), np.asarray(new, dtype=float)
    pooled = np.concatenate([a, b])
    if np.all(pooled == pooled[0]):
        return TestResult(1.0, "every value equal")
    if len(np.unique(pooled)) == len(pooled):
        p = _scipy().mannwhitneyu(a, b, alternative="two-sided", method="exact").pvalue
        return TestResult(float(p), "exact Mann-Whitney U")
    splits = math.comb(len(pooled), len(a))
    exact = splits <= MAX_EXACT_SPLITS
    # Splitting the pooled mid-ranks is splitting the values: rank once, then each split is only a sum.
    ranks = _scipy().rankdata(pooled)
    res = _scipy().permutation_test(
        (ranks[:len(a)], ranks[len(a):]), _rank_sum, permutation_type="independent", vectorized=True,
        alternative="two-sided",
        n_resamples=np.inf if exact else MONTE_CARLO_SPLITS, rng=np.random.default_rng(seed))
    method = ("exact permutation test of U (ties)" if exact
              else f"permutation test of U, {MONTE_CARLO_SPLITS:,} random splits (ties)")
    return TestResult(float(min(1.0, res.pvalue)), method)


def mann_whitney_rows(base: np.ndarray, new: np.ndarray, *, seed: int = 0, chunk_cells: int = 4_000_000
                      ) -> np.ndarray:
    """The p-value of `mann_whitney` for every row of two matrices at once (the rows: many metrics, each with
    the same repetitions on each side), vectorized: the permutation test of the rank sum over every split of the
    pooled mid-ranks up to MAX_EXACT_SPLITS (the same p-values as mann_whitney, ties or not: scipy's exact
    two-sided rule, twice the smaller tail with its relative tolerance), else MONTE_CARLO_SPLITS seeded random
    splits shared by all rows (the same test; the draws differ from mann_whitney's). 1.0 for a row whose values
    are all equal, as mann_whitney says."""
    a, b = np.asarray(base, dtype=float), np.asarray(new, dtype=float)
    rows, n_a = a.shape
    n = n_a + b.shape[1]
    p = np.ones(rows)
    if rows == 0 or n_a == 0 or n == n_a:
        return p
    pooled = np.hstack([a, b])
    ranks = _scipy().rankdata(pooled, axis=1)
    observed = ranks[:, :n_a].sum(axis=1)
    if math.comb(n, n_a) <= MAX_EXACT_SPLITS:
        import itertools

        splits, adjustment = np.array(list(itertools.combinations(range(n), n_a))), 0
    else:
        rng = np.random.default_rng(seed)
        splits = np.argsort(rng.random((MONTE_CARLO_SPLITS, n)), axis=1)[:, :n_a]
        adjustment = 1   # a random sample of splits counts the observed one (scipy's rule)
    step = max(1, chunk_cells // (len(splits) * n_a))
    for at in range(0, rows, step):
        null = ranks[at:at + step][:, splits].sum(axis=2)
        t = observed[at:at + step, None]
        gamma = np.abs(1e-14 * t)   # scipy's tolerance: sums of mid-ranks that are equal compare equal
        less = ((null <= t + gamma).sum(axis=1) + adjustment) / (len(splits) + adjustment)
        greater = ((null >= t - gamma).sum(axis=1) + adjustment) / (len(splits) + adjustment)
        p[at:at + step] = np.clip(2 * np.minimum(less, greater), 0, 1)
    p[(pooled == pooled[:, :1]).all(axis=1)] = 1.0
    return p


def mann_whitney_p(base: Sequence[float], new: Sequence[float]) -> float:
    return mann_whitney(base, new).p_value


@dataclass(frozen=True)
class Interval:
    """A confidence interval; `note` says why it is a point, absent (nan) or not to be relied on."""

    low: float
    high: float
    confidence: float
    note: str = ""

    @property
    def usable(self) -> bool:
        return not (math.isnan(self.low) or math.isnan(self.high) or math.isinf(self.low)
                    or math.isinf(self.high))

    def excludes(self, value: float) -> bool:
        return self.usable and (self.low > value or self.high < value)

    def relative_width(self, centre: float) -> float:
        """(high - low) / |centre|: inf when the interval is absent or unbounded."""
        if not self.usable or centre == 0:
            return math.inf
        return (self.high - self.low) / abs(centre)


def _ratio_of_medians(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.median(y, axis=axis) / np.median(x, axis=axis)


def ratio_ci(base: Sequence[float], new: Sequence[float], *, confidence: float = 0.95,
             n_resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> Interval:
    """Percentile bootstrap confidence interval of median(new) / median(base), each side resampled on its own
    (scipy.stats.bootstrap); seeded, so the same samples always give the same interval."""
    a, b = np.asarray(base, dtype=float), np.asarray(new, dtype=float)
    if len(a) < 2 or len(b) < 2:
        return Interval(math.nan, math.nan, confidence, "no interval: a side has fewer than 2 repetitions")
    if np.any(a == 0):
        return Interval(math.nan, math.nan, confidence,
                        "no interval: a BASE repetition is 0, so a resampled BASE median can be 0")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # scipy warns on a degenerate bootstrap distribution; we say why below
        res = _scipy().bootstrap((a, b), _ratio_of_medians, paired=False, vectorized=True,
                                    confidence_level=confidence, n_resamples=n_resamples, method="percentile",
                                    rng=np.random.default_rng(seed))
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    note = ""
    constant = [side for side, v in (("BASE", a), ("NEW", b)) if np.all(v == v[0])]
    if lo == hi:
        note = ("a point: every repetition gave the same value on both sides, there is no spread to resample"
                if len(constant) == 2 else "a point: the resampled medians never moved")
    elif constant:
        note = f"{' and '.join(constant)} gave the same value in every repetition: only the other side varies"
    if min(len(a), len(b)) < MIN_BOOTSTRAP_N:
        note = (note + "; " if note else "") + (
            f"coarse: a bootstrap median of {min(len(a), len(b))} values takes at most that many values, the "
            f"interval covers less than {100 * confidence:g}% (not used to decide)")
    return Interval(lo, hi, confidence, note)


def median_ci(values: Sequence[float], *, confidence: float = 0.95) -> Interval:
    """Distribution-free confidence interval of the median from order statistics (scipy.stats.quantile_test,
    exact binomial coverage). Too few values for the confidence give (nan, nan) and say how many are needed."""
    a = np.asarray(values, dtype=float)
    if len(a) == 0:
        return Interval(math.nan, math.nan, confidence, "no values")
    ci = _scipy().quantile_test(a, q=float(np.median(a)), p=0.5).confidence_interval(confidence)
    lo, hi = float(ci.low), float(ci.high)
    if math.isnan(lo) or math.isnan(hi):
        need = next(n for n in range(1, 10_000) if 1 - 2 * 0.5 ** n >= confidence)
        return Interval(math.nan, math.nan, confidence,
                        f"{len(a)} values cannot bound a median at {100 * confidence:.4g}% confidence "
                        f"(needs at least {need})")
    note = "a point: the middle repetitions gave the same value" if lo == hi else ""
    return Interval(lo, hi, confidence, note)


def bootstrap_median_ci(values: Sequence[float], *, confidence: float = 0.95, n_resamples: int = 2000,
                        seed: int = 0) -> Interval:
    """Percentile bootstrap confidence interval of the median of one sample (seeded numpy resampling, so the same
    values always give the same interval): a sweep cell's figure. Below 2 values, (nan, nan). Unlike `median_ci`
    it gives an interval from 2 values on, one that undercovers below MIN_BOOTSTRAP_N values."""
    a = np.asarray(values, dtype=float)
    if len(a) < 2:
        return Interval(math.nan, math.nan, confidence, "no interval: fewer than 2 values")
    rng = np.random.default_rng(seed)
    boots = np.median(a[rng.integers(0, len(a), size=(n_resamples, len(a)))], axis=1)
    tail = (1 - confidence) / 2
    low, high = (float(x) for x in np.quantile(boots, [tail, 1 - tail]))
    return Interval(low, high, confidence)


def _difference_of_medians(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.median(y, axis=axis) - np.median(x, axis=axis)


def shift_ci(base: Sequence[float], new: Sequence[float], *, confidence: float = 0.95,
             n_resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> Interval:
    """Percentile bootstrap confidence interval of median(new) - median(base), each side resampled on its own (a
    shift in the values' own unit, where a ratio would mislead: a latency percentile that moves from 0)."""
    a, b = np.asarray(base, dtype=float), np.asarray(new, dtype=float)
    if len(a) < 2 or len(b) < 2:
        return Interval(math.nan, math.nan, confidence, "no interval: a side has fewer than 2 repetitions")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # a degenerate bootstrap distribution is said below
        res = _scipy().bootstrap((a, b), _difference_of_medians, paired=False, vectorized=True,
                                 confidence_level=confidence, n_resamples=n_resamples, method="percentile",
                                 rng=np.random.default_rng(seed))
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    note = "a point: every repetition gave the same value on both sides" if lo == hi else ""
    if min(len(a), len(b)) < MIN_BOOTSTRAP_N:
        note = (note + "; " if note else "") + (
            f"coarse: a bootstrap median of {min(len(a), len(b))} values covers less than {100 * confidence:g}%")
    return Interval(lo, hi, confidence, note)


def bootstrap_ratio_ci(base: Sequence[float], new: Sequence[float], *, confidence: float = 0.95,
                       n_boot: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> tuple[float, float]:
    """(low, high) of `ratio_ci`, for callers that need only the numbers."""
    ci = ratio_ci(base, new, confidence=confidence, n_resamples=n_boot, seed=seed)
    return ci.low, ci.high


@dataclass
class Comparison:
    """The comparison of one metric between two samples, with the verdict and why."""

    base_median: float
    new_median: float
    n_base: int
    n_new: int
    ratio: float                 # new / base; nan when base is 0
    change: float                # ratio - 1, or nan
    direction: str
    p_value: float               # two-sided, exact (nan when not computable)
    ci_low: float                # bootstrap CI of the ratio (nan when not computed)
    ci_high: float
    verdict: str
    reason: str
    warnings: list[str] = field(default_factory=list)
    test: str = ""               # how p_value was computed
    ci_note: str = ""            # why the CI is a point, absent or coarse ("" when it is none of these)
    significant: bool = False    # the test (or CI) rejects "no difference" at alpha, before the minimum effect
    floor_reached: bool = True   # False: these sample sizes cannot reach alpha at all (see cannot_be_significant)

    @property
    def is_regression(self) -> bool:
        return self.verdict == REGRESSION

    def as_dict(self) -> dict:
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in self.__dict__.items()}


def compare_samples(base: Sequence[float], new: Sequence[float], *, direction: str = NEUTRAL,
                    alpha: float = 0.05, min_effect: float = 0.05, method: str = "mwu",
                    max_dispersion: float = 0.25, bootstrap_seed: int = 0) -> Comparison:
    """Compare two samples of one metric; see the module docstring for the rules."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; use one of {METHODS}")
    base_v = [float(v) for v in base if v is not None and not math.isnan(float(v))]
    new_v = [float(v) for v in new if v is not None and not math.isnan(float(v))]
    nan = math.nan
    if not base_v or not new_v:
        side = "BASE" if not base_v else "NEW"
        return Comparison(nan if not base_v else float(np.median(base_v)),
                          nan if not new_v else float(np.median(new_v)), len(base_v), len(new_v), nan, nan,
                          direction, nan, nan, nan, UNDECIDED, f"no values in {side}", floor_reached=False)
    mb, mn = float(np.median(base_v)), float(np.median(new_v))
    ratio = mn / mb if mb != 0 else (1.0 if mn == 0 else nan)
    change = ratio - 1 if not math.isnan(ratio) else nan
    warnings_: list[str] = []
    for side, values in (("BASE", base_v), ("NEW", new_v)):
        cv = robust_cv(values)
        if cv > max_dispersion:
            warnings_.append(f"{side} is dispersed (robust CV {_pct(cv)} > {_pct(max_dispersion)})")
    if len(base_v) < 2 or len(new_v) < 2:
        warnings_.append(f"too few repetitions ({len(base_v)} vs {len(new_v)}): no test possible; use -n 5 or "
                         "more")
        return Comparison(mb, mn, len(base_v), len(new_v), ratio, change, direction, nan, nan, nan, UNDECIDED,
                          "too few repetitions", warnings_, floor_reached=False)
    test = mann_whitney(base_v, new_v, seed=bootstrap_seed)
    ci = ratio_ci(base_v, new_v, confidence=1 - alpha, seed=bootstrap_seed)
    if method == "mwu":
        floor_reached = smallest_mwu_p(len(base_v), len(new_v)) < alpha
        significant, evidence = test.p_value < alpha, f"p={test.p_value:.3g}"
    else:
        floor_reached = min(len(base_v), len(new_v)) >= MIN_BOOTSTRAP_N
        significant = floor_reached and ci.excludes(1.0)
        evidence = f"{_pct(1 - alpha)} CI of ratio [{ci.low:.3g}, {ci.high:.3g}]"
    if math.isnan(change):
        verdict, reason = UNDECIDED, "BASE median is 0: no ratio"
    elif not floor_reached:
        verdict, reason = NOT_SIGNIFICANT, (
            f"n={len(base_v)} vs {len(new_v)} cannot reach alpha {alpha:g}" if method == "mwu" else
            f"n={len(base_v)} vs {len(new_v)}: a bootstrap needs {MIN_BOOTSTRAP_N} repetitions per side")
    elif not significant:
        verdict, reason = NOT_SIGNIFICANT, f"{evidence} (alpha {alpha:g})"
    elif abs(change) < min_effect:
        verdict, reason = NOT_SIGNIFICANT, f"{_signed_pct(change)} is below the minimum effect {_pct(min_effect)}"
    elif direction == NEUTRAL:
        verdict, reason = CHANGED, f"{evidence}; no better direction for this metric"
    else:
        worse = change > 0 if direction == LOWER else change < 0
        verdict = REGRESSION if worse else IMPROVEMENT
        reason = f"{evidence}; {direction} is better"
    return Comparison(mb, mn, len(base_v), len(new_v), ratio, change, direction, test.p_value, ci.low, ci.high,
                      verdict, reason, warnings_, test=test.method, ci_note=ci.note, significant=significant,
                      floor_reached=floor_reached)


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%" if abs(100 * x - round(100 * x)) < 1e-9 else f"{100 * x:.1f}%"


def _signed_pct(x: float) -> str:
    return f"{100 * x:+.1f}%"
