"""Enough repetitions, automatically: add repetitions until the primary metric is known precisely enough.

`mobiperf run -n auto` (and `mobiperf compare --until`) looks at the primary metric at a fixed schedule of
repetition counts, decided before the first repetition: 5, 8, 12, 18, 27, ... (x1.5; a single run starts at 8)
up to the limit, which is always the last look. At each look it computes a confidence interval; it stops as soon
as the interval is narrower than the minimum effect (relative width (high - low) / estimate), or at the limit.

Looking repeatedly and stopping when the data look good inflates the error rate of a single look, so the
error alpha is spent over the looks (Lan-DeMets, Pocock-type spending alpha(t) = alpha * ln(1 + (e - 1) t), t the
share of the limit reached): look k uses confidence 1 - (alpha(t_k) - alpha(t_{k-1})). The increments add up to
alpha, so by the union bound the interval reported at whichever look stopped covers the truth with probability
at least 1 - alpha whatever the stopping rule did. Pocock-type spending, rather than O'Brien-Fleming, because the
rule stops for precision, and early looks must be able to stop a stable workload.

The interval: for one run, the distribution-free order-statistic interval of the median (stats.median_ci; it is
unbounded until there are enough repetitions for its confidence, e.g. 7 at 99 %); for a comparison, the
bootstrap interval of the ratio of medians (stats.ratio_ci).

A comparison also stops when its verdict is settled, however wide the interval: when the interval of the ratio
lies wholly beyond the minimum effect (every ratio it holds is a change of at least the minimum effect, in one
direction: a clear but noisy effect, 2x +- 40 %, needs no more repetitions to be called) or wholly within it (no
ratio it holds is a change of the minimum effect: no change, settled). The same alpha spending covers these
stops: the interval of the look that stopped holds the true ratio with probability at least 1 - alpha.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Sequence

from mobiperf.core.errors import UsageError

DEFAULT_LIMIT = 20
FIRST_LOOK = 5          # a comparison: the smallest n per side at which Mann-Whitney can reach 0.05 (2/252)
FIRST_LOOK_ONE_RUN = 8  # one run: 7 values are the fewest that bound a median at 97.4 %, the first look's share
GROWTH = 1.5
MAX_REPEAT = 100


def look_schedule(limit: int, first: int = FIRST_LOOK) -> tuple[int, ...]:
    """The repetition counts at which the interval is looked at: first, x1.5 each time, ending at `limit` (a look
    closer than x1.25 to the limit is dropped, so the last look gets its share of alpha)."""
    if limit <= first:
        return (limit,)
    looks = [first]
    while math.ceil(looks[-1] * GROWTH) < limit:
        looks.append(math.ceil(looks[-1] * GROWTH))
    if limit / looks[-1] < 1.25 and len(looks) > 1:
        looks.pop()
    return (*looks, limit)


def spent_alpha(t: float, alpha: float) -> float:
    """Pocock-type Lan-DeMets spending function: the share of alpha spent by information time t in [0, 1]."""
    return alpha * math.log(1 + (math.e - 1) * min(1.0, max(0.0, t)))


def look_alphas(looks: Sequence[int], alpha: float) -> tuple[float, ...]:
    """The alpha each look uses: the increments of the spending function; they add up to alpha."""
    spent = [spent_alpha(n / looks[-1], alpha) for n in looks]
    return tuple(b - a for a, b in zip([0.0, *spent[:-1]], spent))


@dataclass
class Look:
    n: int                  # repetitions per side at this look
    confidence: float
    estimate: float         # the median (one run) or the ratio of medians (comparison)
    low: float
    high: float
    relative_width: float   # (high - low) / |estimate|; inf when the interval is unbounded
    note: str = ""


@dataclass
class Plan:
    """A sequential plan: the metric it watches, the looks, the minimum effect; and what happened."""

    metric: str
    limit: int
    min_effect: float
    alpha: float = 0.05
    first: int = FIRST_LOOK
    looks: tuple[int, ...] = ()
    history: list[Look] = field(default_factory=list)
    stopped: bool = False
    reason: str = ""

    def __post_init__(self) -> None:
        if not 2 <= self.limit <= MAX_REPEAT:
            raise UsageError(f"the repetition limit {self.limit} is outside 2..{MAX_REPEAT}")
        if not 0 < self.min_effect < 1:
            raise UsageError(f"the minimum effect must be a fraction in (0, 1), not {self.min_effect}")
        self.looks = self.looks or look_schedule(self.limit, self.first)
        self._alphas = dict(zip(self.looks, look_alphas(self.looks, self.alpha)))

    def wants_look(self, n: int) -> bool:
        return n in self._alphas

    def look_one(self, values: Sequence[float]) -> Look:
        """The look after `len(values)` repetitions of one run: the interval of the median."""
        import numpy as np  # numpy and stats where a look is taken: the CLI imports this module at every start

        from mobiperf.core import stats

        n = len(values)
        conf = 1 - self._alphas[n]
        ci = stats.median_ci(values, confidence=conf)
        med = float(np.median(np.asarray(values, dtype=float))) if n else math.nan
        return self._record(Look(n, conf, med, ci.low, ci.high, ci.relative_width(med), ci.note))

    def look_two(self, base: Sequence[float], new: Sequence[float], *, seed: int = 0) -> Look:
        """The look after `min(len(base), len(new))` repetitions per side: the interval of the ratio."""
        import numpy as np

        from mobiperf.core import stats

        n = min(len(base), len(new))
        conf = 1 - self._alphas[n]
        ci = stats.ratio_ci(base, new, confidence=conf, seed=seed)
        mb = float(np.median(base))
        ratio = float(np.median(new)) / mb if mb else math.nan
        look = self._record(Look(n, conf, ratio, ci.low, ci.high, ci.relative_width(ratio), ci.note))
        settled = self.settled(look)
        if settled and not (self.stopped and "narrower" in self.reason):
            self.stopped = True
            self.reason = (f"after {look.n} repetitions per side the verdict is settled: the {_pct(look.confidence)} "
                           f"interval of the ratio of {self.metric} [{look.low:.4g}, {look.high:.4g}] lies wholly "
                           f"{settled} the minimum effect {_pct(self.min_effect)}")
        return look

    def settled(self, look: Look) -> str:
        """'beyond' or 'within' when the interval of a ratio lies wholly beyond or wholly within the minimum effect
        (module docstring), else ''. A coarse interval (too few repetitions to trust it) never settles."""
        if not (math.isfinite(look.low) and math.isfinite(look.high)) or "coarse" in look.note:
            return ""
        lo, hi = 1 - self.min_effect, 1 + self.min_effect
        if look.low >= hi or look.high <= lo:
            return "beyond"
        if look.low > lo and look.high < hi:
            return "within"
        return ""

    def _record(self, look: Look) -> Look:
        self.history.append(look)
        if look.relative_width < self.min_effect:
            self.stopped = True
            self.reason = (f"after {look.n} repetitions the {_pct(look.confidence)} interval of {self.metric} "
                           f"[{look.low:.4g}, {look.high:.4g}] is {_pct(look.relative_width)} wide, narrower than "
                           f"the minimum effect {_pct(self.min_effect)}")
        elif look.n >= self.limit:
            self.stopped = True
            width = ("unbounded" if math.isinf(look.relative_width) else f"still {_pct(look.relative_width)} wide")
            self.reason = (f"reached the limit of {self.limit} repetitions; the {_pct(look.confidence)} interval "
                           f"of {self.metric} is {width} (minimum effect {_pct(self.min_effect)})"
                           + (f": {look.note}" if look.note else ""))
        return look

    def describe(self) -> str:
        """How the plan works, in one line."""
        return (f"-n auto: looks at {', '.join(map(str, self.looks))} repetitions; stops when the interval of "
                f"{self.metric} is narrower than {_pct(self.min_effect)}"
                + (", or, against a baseline, lies wholly beyond or within it" if self.first == FIRST_LOOK else "")
                + f" (alpha {self.alpha:g} spent over the looks, Pocock-type)")

    def as_dict(self) -> dict:
        out = {k: v for k, v in asdict(self).items() if k != "history"}
        out["history"] = [{k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                           for k, v in asdict(look).items()} for look in self.history]
        out["looks"] = list(self.looks)
        return out


def parse_repeat(text: str | int, *, allow_auto: bool = True) -> int | tuple[str, int]:
    """`-n` for every subcommand: N in 1..100, or (run, compare --until) `auto` / `auto:LIMIT`. Returns N or
    ("auto", LIMIT)."""
    s = str(text).strip().lower()
    if allow_auto and (s == "auto" or s.startswith("auto:")):
        limit = s.partition(":")[2] or str(DEFAULT_LIMIT)
        if not limit.isdigit() or not 2 <= int(limit) <= MAX_REPEAT:
            raise UsageError(f"-n {text}: the limit of auto must be a whole number in 2..{MAX_REPEAT}")
        return ("auto", int(limit))
    if not s.isdigit() or not 1 <= int(s) <= MAX_REPEAT:
        also = ", or auto[:LIMIT]" if allow_auto else ""
        raise UsageError(f"-n {text}: repetitions must be a whole number in 1..{MAX_REPEAT}{also}")
    return int(s)


def _pct(x: float) -> str:
    return f"{100 * x:.3g}%"
