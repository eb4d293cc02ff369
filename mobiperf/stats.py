"""Statistics for before/after comparisons: is NEW different from BASE, by how much, and is that believable?

Every repetition is kept; a comparison looks at two samples (one value per repetition) of one metric:

- the medians of each side and their ratio NEW/BASE (medians, because one slow repetition must not move the
  headline figure);
- a significance test: the two-sided Mann-Whitney U test (rank based, no normality assumption; exact p-values
  for small samples without ties), or a percentile bootstrap confidence interval of the ratio of medians
  (significant when it excludes 1);
- a minimum effect: a change smaller than it is "not significant" whatever the p-value says, because a 0.5 %
  change measured on a shared phone is not a finding;
- a direction per metric (lower is better for latencies and elapsed times, higher for throughput) to call a
  significant change an improvement or a regression; metrics without a direction are only "changed".

Warnings say when the answer cannot be trusted: too few repetitions for the test to ever reach `alpha`
(with 3 vs 3 repetitions the smallest possible two-sided Mann-Whitney p-value is 0.1), or repetitions so
dispersed (robust coefficient of variation, 1.4826 * MAD / median) that the minimum effect drowns in noise.
"""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
from scipy import stats as scipy_stats

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
    """The smallest two-sided p-value the exact Mann-Whitney U test can give for these sample sizes."""
    if n_base < 1 or n_new < 1:
        return 1.0
    return min(1.0, 2.0 / math.comb(n_base + n_new, n_base))


def mann_whitney_p(base: Sequence[float], new: Sequence[float]) -> float:
    """Two-sided Mann-Whitney U p-value; 1.0 when every value is equal (no evidence of a shift)."""
    a, b = np.asarray(base, dtype=float), np.asarray(new, dtype=float)
    if np.all(np.concatenate([a, b]) == a[0]):
        return 1.0
    return float(scipy_stats.mannwhitneyu(a, b, alternative="two-sided", method="auto").pvalue)


def bootstrap_ratio_ci(base: Sequence[float], new: Sequence[float], *, confidence: float = 0.95,
                       n_boot: int = 4000, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of median(new) / median(base), resampling each side
    independently. Seeded, so the same samples always give the same interval. (nan, nan) when a resampled
    base median can be 0."""
    a, b = np.asarray(base, dtype=float), np.asarray(new, dtype=float)
    rng = np.random.default_rng(seed)
    med_a = np.median(a[rng.integers(0, len(a), size=(n_boot, len(a)))], axis=1)
    med_b = np.median(b[rng.integers(0, len(b), size=(n_boot, len(b)))], axis=1)
    if np.any(med_a == 0):
        return math.nan, math.nan
    ratios = med_b / med_a
    tail = (1 - confidence) / 2
    lo, hi = np.quantile(ratios, [tail, 1 - tail])
    return float(lo), float(hi)


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
    p_value: float               # Mann-Whitney, two-sided (nan when not computable)
    ci_low: float                # bootstrap CI of the ratio (nan when not computed)
    ci_high: float
    verdict: str
    reason: str
    warnings: list[str] = field(default_factory=list)

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
                          direction, nan, nan, nan, UNDECIDED, f"no values in {side}")
    mb, mn = float(np.median(base_v)), float(np.median(new_v))
    ratio = mn / mb if mb != 0 else (1.0 if mn == 0 else nan)
    change = ratio - 1 if not math.isnan(ratio) else nan
    warnings: list[str] = []
    for side, values in (("BASE", base_v), ("NEW", new_v)):
        cv = robust_cv(values)
        if cv > max_dispersion:
            warnings.append(f"{side} is dispersed (robust CV {_pct(cv)} > {_pct(max_dispersion)})")
    if len(base_v) < 2 or len(new_v) < 2:
        warnings.append(f"too few repetitions ({len(base_v)} vs {len(new_v)}): no test possible; use -n 5 or more")
        return Comparison(mb, mn, len(base_v), len(new_v), ratio, change, direction, nan, nan, nan, UNDECIDED,
                          "too few repetitions", warnings)
    floor = smallest_mwu_p(len(base_v), len(new_v))
    if method == "mwu" and floor >= alpha:
        warnings.append(f"too few repetitions ({len(base_v)} vs {len(new_v)}): the smallest possible p-value is "
                        f"{floor:.3g} >= alpha {alpha:g}, so no change can be significant; use -n 5 or more")
    p = mann_whitney_p(base_v, new_v)
    lo, hi = bootstrap_ratio_ci(base_v, new_v, confidence=1 - alpha, seed=bootstrap_seed)
    if method == "mwu":
        significant, evidence = p < alpha, f"p={p:.3g}"
    else:
        significant = not math.isnan(lo) and (lo > 1 or hi < 1)
        evidence = f"{_pct(1 - alpha)} CI of ratio [{lo:.3f}, {hi:.3f}]"
    if math.isnan(change):
        verdict, reason = UNDECIDED, "BASE median is 0: no ratio"
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
    return Comparison(mb, mn, len(base_v), len(new_v), ratio, change, direction, p, lo, hi, verdict, reason,
                      warnings)


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%" if abs(100 * x - round(100 * x)) < 1e-9 else f"{100 * x:.1f}%"


def _signed_pct(x: float) -> str:
    return f"{100 * x:+.1f}%"
