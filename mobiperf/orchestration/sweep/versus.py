"""Every cell of a sweep (or a study's row) against a baseline cell, with compare's statistics: the change of the
median, the exact Mann-Whitney p-value over the repetitions, and the verdict (improvement, regression, changed,
not significant, undecided: mobiperf.core.stats.compare_samples, the metric's direction, compare's alpha and
minimum effect). A sweep's baseline is its first cell (the first value of every swept parameter) unless one is
named; a cell with too few repetitions on either side is `undecided`, and says why.

The cells are many comparisons at once: at alpha 0.05, about one in twenty cells that did not change can show as
changed by chance. Said under every matrix that shows them.
"""

from __future__ import annotations

import math
from typing import Sequence

from mobiperf.core import stats
from mobiperf.core.errors import UsageError

ALPHA = 0.05
MIN_EFFECT = 0.05


def baseline_cell(data: dict, wanted: str | None = None) -> str:
    """The id of the baseline cell: `wanted` as a cell id (c000) or as NAME=VALUE[,NAME=VALUE] matching exactly
    one cell's parameters; the first cell when None."""
    cells = data["cells"]
    if not wanted:
        return cells[0]["id"]
    if any(c["id"] == wanted for c in cells):
        return wanted
    want = dict(part.split("=", 1) for part in wanted.split(",") if "=" in part)
    if not want:
        raise UsageError(f"--baseline {wanted}: give a cell id (c000) or NAME=VALUE[,NAME=VALUE]")
    found = [c["id"] for c in cells if all(c["params"].get(k) == v for k, v in want.items())]
    if len(found) != 1:
        raise UsageError(f"--baseline {wanted}: matches {len(found)} cells ({', '.join(found) or 'none'}); name "
                         "one cell (its id or more parameters)")
    return found[0]


def compare_to_baseline(values: dict[str, list[float]], baseline: str, metric: str, *, alpha: float = ALPHA,
                        min_effect: float = MIN_EFFECT) -> dict[str, stats.Comparison]:
    """{cell: its comparison with the baseline's values} for every cell with values but the baseline (values:
    cell -> the metric's value per successful repetition)."""
    base = values.get(baseline, [])
    direction = stats.metric_direction(metric)
    return {cell: stats.compare_samples(base, v, direction=direction, alpha=alpha, min_effect=min_effect)
            for cell, v in values.items() if cell != baseline and v}


def verdict_text(c: stats.Comparison | None) -> str:
    """`+12.0% p=0.0079 IMPROVEMENT`, `-1.2% p=0.69 not significant`, `undecided (too few repetitions)`."""
    if c is None:
        return "baseline"
    change = "" if math.isnan(c.change) else f"{100 * c.change:+.1f}% "
    p = "" if math.isnan(c.p_value) else f"p={c.p_value:.2g} "
    label = c.verdict.upper() if c.verdict in (stats.IMPROVEMENT, stats.REGRESSION) else c.verdict
    why = f" ({c.reason})" if c.verdict == stats.UNDECIDED or not c.floor_reached else ""
    return f"{change}{p}{label}{why}"


def multiple_comparisons_note(comparisons: Sequence[stats.Comparison], alpha: float = ALPHA) -> str:
    n = sum(1 for c in comparisons if c.floor_reached)
    return (f"{len(comparisons)} cells compared with the baseline (Mann-Whitney U, alpha {alpha:g}, minimum effect "
            f"{100 * MIN_EFFECT:g}%), not corrected for multiple comparisons: about {alpha * n:.2g} of them can "
            "differ by chance alone") if comparisons else "no cell to compare with the baseline"
