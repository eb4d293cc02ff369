"""The verdict of a comparison: one primary metric decides, guards can veto, every other metric is context.

- The primary metric is, by default, the workload's own throughput when it reports one (workload.throughput,
  then workload.tps, workload.iops), else its elapsed time (workload.elapsed, then run.workload_time, the wall
  time mobiperf measured around the workload; lower is better). `--primary METRIC` overrides it.
- A guard (`--guard METRIC[:MAX]`) fails when its metric regresses significantly by more than MAX (default: the
  minimum effect). A metric without a better direction fails its guard when it changes by more than MAX.
- The verdict is the primary's: "improvement", "regression" or "no change", with `significant` true only when
  the change is statistically significant at alpha AND at least the minimum effect.
- The gate (`--fail-on-regression`) fails when the primary regresses or a guard fails. Context metrics never
  gate: with dozens of them, some differ by chance (about alpha x their number) and some differ by design (FUSE
  request latency grows with the request size a faster FUSE layer sends).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable

from mobiperf.core import stats
from mobiperf.core.errors import UsageError

PRIMARY_CANDIDATES = ("workload.throughput", "workload.tps", "workload.iops", "workload.elapsed",
                      "run.workload_time")
IMPROVEMENT, REGRESSION, NO_CHANGE = "improvement", "regression", "no change"

# Which layer a metric describes, for grouping context rows: first matching prefix wins.
LAYER_PREFIXES = (("workload.", "workload"), ("run.", "workload"), ("layer.", "time by layer"), ("sqlite.", "sqlite"),
                  ("latency.syscall.", "syscall"), ("syscall.", "syscall"), ("latency.fs.", "file system"),
                  ("latency.fuse.", "FUSE"), ("fuse.", "FUSE"), ("bfuse.", "FUSE"), ("fjord.", "FUSE"),
                  ("latency.", "block"), ("block.", "block"), ("window.block.", "block"),
                  ("amplification.", "amplification"), ("device.", "device"), ("journal_device.", "device"))
LAYER_ORDER = ("workload", "time by layer", "sqlite", "syscall", "file system", "FUSE", "block", "amplification",
               "device", "other")


def metric_layer(name: str) -> str:
    for prefix, layer in LAYER_PREFIXES:
        if name.startswith(prefix):
            return layer
    return "other"


@dataclass(frozen=True)
class Guard:
    metric: str                        # a metric key or a name (resolved against the samples)
    max_regression: float | None = None  # None: the minimum effect

    def __str__(self) -> str:
        limit = "" if self.max_regression is None else f":{100 * self.max_regression:g}%"
        return f"{self.metric}{limit}"


def parse_guard(text: str) -> Guard:
    """`METRIC` or `METRIC:MAX` with MAX a percentage or fraction (latency.d2c.p99{op=write}:10%)."""
    head, sep, tail = text.rpartition(":")
    if sep and head and not tail.endswith("}"):
        try:
            value = float(tail[:-1]) / 100 if tail.endswith("%") else float(tail)
        except ValueError:
            raise UsageError(f"--guard {text}: {tail!r} is not a percentage (METRIC[:MAX], e.g. "
                             "latency.d2c.p99{op=write}:10%)") from None
        if not 0 <= value < 10:
            raise UsageError(f"--guard {text}: the largest regression allowed must be between 0% and 1000%")
        return Guard(head, value)
    return Guard(text, None)


def resolve_metric(wanted: str, keys: Iterable[str], names: dict[str, tuple[str, dict]], what: str) -> str:
    """The metric key `wanted` refers to: itself, or the only key with that name. Usage error otherwise."""
    keys = sorted(keys)
    if wanted in keys:
        return wanted
    matches = [k for k in keys if names.get(k, (k, {}))[0] == wanted]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise UsageError(f"{what} {wanted} is ambiguous: {', '.join(matches)}; name one with its labels")
    near = [k for k in keys if wanted.split("{")[0].split(".")[0] in k][:8]
    raise UsageError(f"{what} {wanted}: no such metric in both BASE and NEW"
                     + (f" (similar: {', '.join(near)})" if near else "")
                     + "; `mobiperf show RUN` lists the metrics")


def default_primary(keys: Iterable[str]) -> str | None:
    keys = set(keys)
    return next((k for k in PRIMARY_CANDIDATES if k in keys), None)


@dataclass
class GuardCheck:
    guard: Guard
    key: str
    limit: float
    result: stats.Comparison

    @property
    def failed(self) -> bool:
        c = self.result
        if not c.significant or math.isnan(c.change) or abs(c.change) <= self.limit:
            return False
        if c.direction == stats.NEUTRAL:
            return True
        return c.verdict == stats.REGRESSION

    @property
    def status(self) -> str:
        return "FAILED" if self.failed else "ok"


@dataclass
class Verdict:
    """The answer for one NEW against BASE, decided on the primary metric."""

    metric: str
    result: stats.Comparison
    unit: str
    alpha: float
    min_effect: float
    guards: list[GuardCheck] = field(default_factory=list)
    method: str = "mwu"

    @property
    def direction(self) -> str:
        return {stats.IMPROVEMENT: IMPROVEMENT, stats.REGRESSION: REGRESSION}.get(self.result.verdict, NO_CHANGE)

    @property
    def significant(self) -> bool:
        return self.direction in (IMPROVEMENT, REGRESSION)

    @property
    def gate_failed(self) -> bool:
        return self.direction == REGRESSION or any(g.failed for g in self.guards)

    def sentence(self) -> str:
        """The verdict in one sentence a storage engineer can act on."""
        c = self.result
        if math.isnan(c.ratio):
            return f"NO VERDICT on {self.metric}: {c.reason}."
        ci = (f", {100 * (1 - self.alpha):g}% CI {_x(c.ci_low)} to {_x(c.ci_high)}" if not math.isnan(c.ci_low)
              else "")
        p = "" if math.isnan(c.p_value) else f"; p={c.p_value:.2g}"
        facts = f"{self.metric} is {_x(c.ratio)} BASE ({100 * c.change:+.1f}%{ci}{p}, n={c.n_base} vs {c.n_new})"
        better = f"{c.direction} is better"
        if self.direction == IMPROVEMENT:
            return f"IMPROVEMENT: {facts}, {better}."
        if self.direction == REGRESSION:
            return f"REGRESSION: {facts}, {better}."
        if not c.floor_reached:
            why = (stats.cannot_be_significant(c.n_base, c.n_new, self.alpha)
                   if self.method == "mwu" and min(c.n_base, c.n_new) >= 2 else None)
            return f"NO CHANGE can be shown: {facts}; " + (why or f"{c.reason}; use -n 5 or more (or -n auto)") + "."
        if c.significant:
            return (f"NO CHANGE beyond the minimum effect: {facts}; significant, but smaller than the minimum "
                    f"effect {100 * self.min_effect:g}%.")
        return f"NO CHANGE: {facts}; not significant at alpha {self.alpha:g}."

    def as_dict(self) -> dict:
        c = self.result
        num = (lambda v: None if v is None or (isinstance(v, float) and math.isnan(v)) else v)  # noqa: E731
        return {"metric": self.metric, "direction": self.direction, "significant": self.significant,
                "ratio": num(c.ratio), "change": num(c.change), "ci": [num(c.ci_low), num(c.ci_high)],
                "ci_confidence": 1 - self.alpha, "ci_note": c.ci_note, "p_value": num(c.p_value), "test": c.test,
                "n_a": c.n_base, "n_b": c.n_new, "median_a": num(c.base_median), "median_b": num(c.new_median),
                "unit": self.unit, "better": c.direction, "alpha": self.alpha, "min_effect": self.min_effect,
                "reason": c.reason, "sentence": self.sentence(), "gate_failed": self.gate_failed,
                "guards": [{"metric": g.key, "max_regression": g.limit, "failed": g.failed,
                            "change": num(g.result.change), "p_value": num(g.result.p_value),
                            "verdict": g.result.verdict} for g in self.guards]}


def _x(ratio: float) -> str:
    """A ratio as a multiplier with 3 significant digits (0.00812x, 1.04x, 8.91x)."""
    if ratio is None or math.isnan(ratio):
        return "-"
    text = f"{ratio:#.3g}" if 1e-3 <= abs(ratio) < 1e4 else f"{ratio:.3g}"
    return text.rstrip(".") + "x"
