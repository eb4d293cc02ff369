"""Latency distributions per layer and op, BASE against each NEW: how far the median and the tail moved.

A span's latency is its interval in io_span's nest of the workload's calls (analyzers/io_span.py): a system
call's duration, a FUSE request's send -> reply, the daemon's call into the lower file system or a sync_file, a
journal commit as the call waited for it, a block request's queue -> complete, its device time issue ->
complete; each span clipped to the one that caused it, and counted once (is_primary: a commit two calls waited
for is one commit). The op is the span's name (the call, the FUSE opcode, the block op).

Per (layer, op) and repetition: the p50 and p99 of its spans. The shift of a percentile is the median over NEW's
repetitions less the median over BASE's, with a percentile bootstrap interval of that difference
(stats.shift_ci, repetitions resampled on each side: the repetition is the unit that repeats, the spans of one
are not independent), and compare's verdict on the per-repetition values (stats.compare_samples: Mann-Whitney,
minimum effect, lower is better). A percentile over fewer than P99_MIN_SPANS spans in a repetition is mostly
its largest value: such p99s are flagged.

For the picture, each side's spans of a (layer, op) pooled over its repetitions as a CDF (CDF_POINTS quantiles);
the panels are the (layer, op) pairs with the most time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import polars as pl

from mobiperf.core import stats
from mobiperf.core.errors import MissingTableError

QUANTILES = {"p50": 0.5, "p99": 0.99}
P99_MIN_SPANS = 100
CDF_POINTS = 400
MIN_SPANS = 3          # per repetition on average: fewer and the (layer, op) is left out
MAX_OPS = 12           # the (layer, op) pairs with the most time: each costs two tests and two bootstraps


@dataclass
class SideLatency:
    label: str
    per_rep: pl.DataFrame     # sample, layer, op, spans, time_ns, p50, p99
    curves: dict[tuple[str, str], np.ndarray]   # (layer, op) -> CDF_POINTS quantiles of the pooled spans (ns)
    samples: int


@dataclass
class Shift:
    layer: str
    op: str
    quantile: str
    base_values: list[float]
    new_values: list[float]
    shift_ns: float
    ci: stats.Interval
    result: stats.Comparison
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        num = (lambda v: None if v is None or not math.isfinite(v) else round(float(v), 3))  # noqa: E731
        return {"layer": self.layer, "op": self.op, "quantile": self.quantile,
                "base_ns": num(self.result.base_median), "new_ns": num(self.result.new_median),
                "shift_ns": num(self.shift_ns), "ci": [num(self.ci.low), num(self.ci.high)],
                "ci_confidence": self.ci.confidence, "ci_note": self.ci.note, "p_value": num(self.result.p_value),
                "verdict": self.result.verdict, "n_base": self.result.n_base, "n_new": self.result.n_new,
                "warnings": self.warnings}


def load_latency(group) -> SideLatency | None:
    """A side's latencies from its runs' io_span (compare.runs.RunGroup); None when a run has none."""
    per_rep, pooled, offset = [], [], 0
    for run, meta in zip(group.runs, group.metas):
        reps = [r["index"] for r in meta.get("repetitions", []) if r.get("exit_code", 0) == 0]
        try:
            spans = run.scan_table("io_span")
        except MissingTableError:
            return None
        lat = spans.filter(pl.col("call_id").is_not_null() & pl.col("is_primary").fill_null(True)
                           & pl.col("rep").is_in(reps)).select(
            "rep", "layer", op="name", dur=(pl.col("end_ts") - pl.col("ts")).cast(pl.Float64)).collect()
        sample = {rep: offset + i for i, rep in enumerate(reps)}
        lat = lat.with_columns(sample=pl.col("rep").replace_strict(sample, return_dtype=pl.Int64))
        per_rep.append(lat.group_by("sample", "layer", "op").agg(
            spans=pl.len(), time_ns=pl.col("dur").sum(),
            **{q: pl.col("dur").quantile(p, "linear") for q, p in QUANTILES.items()}))
        pooled.append(lat.select("layer", "op", "dur"))
        offset += len(reps)
    probs = np.linspace(0, 1, CDF_POINTS)
    curves = {}
    for (layer, op), g in pl.concat(pooled).group_by("layer", "op"):
        curves[(layer, op)] = np.quantile(g["dur"].to_numpy(), probs)
    return SideLatency(group.label, pl.concat(per_rep), curves, offset)


def shifts(base: SideLatency, new: SideLatency, *, alpha: float = 0.05, min_effect: float = 0.05) -> list[Shift]:
    """The p50 and p99 shifts of the MAX_OPS (layer, op) pairs both sides have with the most time, most first."""
    out = []
    for layer, op in _common_ops(base, new)[:MAX_OPS]:
        b = _values(base, layer, op)
        n = _values(new, layer, op)
        for q in QUANTILES:
            bv, nv = b[q], n[q]
            result = stats.compare_samples(bv, nv, direction=stats.LOWER, alpha=alpha, min_effect=min_effect)
            ci = stats.shift_ci(bv, nv, confidence=1 - alpha)
            warn = []
            if q == "p99" and min(b["spans"] + n["spans"]) < P99_MIN_SPANS:
                warn.append(f"a repetition has fewer than {P99_MIN_SPANS} spans: its p99 is nearly its maximum")
            shift = (float(np.median(nv)) - float(np.median(bv))) if bv and nv else math.nan
            out.append(Shift(layer, op, q, bv, nv, shift, ci, result, warn + result.warnings))
    return out


def _common_ops(base: SideLatency, new: SideLatency) -> list[tuple[str, str]]:
    def totals(side: SideLatency) -> dict:
        g = side.per_rep.group_by("layer", "op").agg(pl.col("time_ns").sum(), pl.col("spans").sum())
        return {(la, op): (t, n) for la, op, t, n in g.iter_rows() if n >= MIN_SPANS * max(side.samples, 1)}

    tb, tn = totals(base), totals(new)
    common = set(tb) & set(tn)
    return sorted(common, key=lambda k: -max(tb[k][0] / max(base.samples, 1), tn[k][0] / max(new.samples, 1)))


def _values(side: SideLatency, layer: str, op: str) -> dict[str, list]:
    rows = side.per_rep.filter((pl.col("layer") == layer) & (pl.col("op") == op)).sort("sample")
    return {"p50": rows["p50"].to_list(), "p99": rows["p99"].to_list(), "spans": rows["spans"].to_list()}


def compare_latency(base_group, new_groups: Sequence, *, alpha: float = 0.05,
                    min_effect: float = 0.05) -> "LatencyComparison | None":
    """Every NEW's shifts against BASE, with the sides' curves for the picture; None when a side has no io_span."""
    base = load_latency(base_group)
    news = [load_latency(g) for g in new_groups]
    if base is None or any(n is None for n in news):
        return None
    return LatencyComparison(base, news, [shifts(base, n, alpha=alpha, min_effect=min_effect) for n in news])


@dataclass
class LatencyComparison:
    base: SideLatency
    news: list[SideLatency]
    shifts: list[list[Shift]]      # per NEW


# --- as text and data ---

TEXT_OPS = 6


def shifts_text(lc: LatencyComparison, k: int = 0, top: int = TEXT_OPS) -> list[str]:
    """The k-th NEW's p50 and p99 shifts of the (layer, op) pairs with the most time, as aligned lines."""
    from mobiperf.compare.profile_format import call_name, signed_ns
    from mobiperf.compare.text_layout import table, wrap
    from mobiperf.core.units import format_duration_ns

    by_op: dict[tuple[str, str], dict[str, Shift]] = {}
    for s in lc.shifts[k]:
        by_op.setdefault((s.layer, s.op), {})[s.quantile] = s
    if not by_op:
        return ["latency by layer: no layer and op with spans on both sides"]
    rows = [("layer op", "p50 base -> new", "shift [CI]", "", "p99 base -> new", "shift [CI]", "")]
    for (layer, op), q in list(by_op.items())[:top]:
        row: list[str] = [call_name(layer, op)]
        for name in QUANTILES:
            s = q[name]
            c = s.result
            ci = "" if not s.ci.usable else f" {ci_text(s.ci.low, s.ci.high)}"
            row += [f"{format_duration_ns(c.base_median)} -> {format_duration_ns(c.new_median)}",
                    f"{signed_ns(s.shift_ns)}{ci}" if math.isfinite(s.shift_ns) else "-", _mark(c)]
        rows.append(tuple(row))
    conf = f"{100 * lc.shifts[k][0].ci.confidence:g}%" if lc.shifts[k] else "95%"
    head = wrap(f"latency by layer and op (each repetition's p50 and p99 of the spans; the shift NEW - BASE of their "
                 f"medians with its {conf} bootstrap CI; * beyond noise, ? undecided):")
    more = len(by_op) - min(top, len(by_op))
    return head + table(rows, "   ", left=(0, 3, 6)) + (
        [f"   {more} more layer/op pairs in --format json (latency_shifts) and the compare page (-o)"] if more else [])


def ci_text(low: float, high: float) -> str:
    """`[+3.64, +4.45 us]`: both bounds in the unit of the larger."""
    scale, unit = next(((f, u) for f, u in ((1e9, "s"), (1e6, "ms"), (1e3, "us"))
                        if max(abs(low), abs(high)) >= f), (1.0, "ns"))
    return f"[{low / scale:+.3g}, {high / scale:+.3g} {unit}]"


def _mark(c: stats.Comparison) -> str:
    if c.verdict in (stats.IMPROVEMENT, stats.REGRESSION):
        return "*"
    return "?" if c.verdict == stats.UNDECIDED or not c.floor_reached else ""


def shifts_json(lc: LatencyComparison, k: int = 0) -> list[dict]:
    return [s.as_dict() for s in lc.shifts[k]]
