"""Figures of the compare page: every repetition of the primary metric side by side, and the change of each
metric as a ratio on a log scale (a halving and a doubling are the same distance from 1; a +2295 % CPU idle share
no longer flattens every other bar)."""

from __future__ import annotations

import math

import plotly.graph_objects as go

from mobiperf import stats
from mobiperf.compare import CompareResult, MetricRow
from mobiperf.reports.figures import PALETTE, _layout
from mobiperf.verdict import LAYER_ORDER

VERDICT_COLORS = {stats.REGRESSION: "#c62828", stats.IMPROVEMENT: "#2e7d32", stats.CHANGED: "#6a1b9a",
                  stats.NOT_SIGNIFICANT: "#9e9e9e", stats.UNDECIDED: "#d4a017"}

# How a unit is drawn: (divide by, axis label)
DISPLAY_UNITS = {"ns": (1e6, "ms"), "B/s": (2 ** 20, "MiB/s"), "B": (2 ** 20, "MiB"), "ratio": (0.01, "%")}


def display_unit(unit: str) -> tuple[float, str]:
    return DISPLAY_UNITS.get(unit, (1.0, unit))


def fig_distributions(result: CompareResult, rows: list[tuple[str, MetricRow]], title: str) -> go.Figure:
    """Every repetition of one metric, one box with all its points per side (BASE, then each NEW), so a reader
    sees the spread and the overlap the verdict is about. `rows`: (NEW label, its row of that metric)."""
    fig = go.Figure()
    unit = rows[0][1].unit
    scale, label = display_unit(unit)
    sides = [(f"BASE {result.base.label}", rows[0][1].base_values)] + [
        (f"NEW {new}", row.new_values) for new, row in rows]
    spread = [v for _, values in sides for v in values if v is not None and v > 0]
    log_y = bool(spread) and max(spread) / min(spread) > 10  # a 15x gain: both sides stay readable
    for i, (name, values) in enumerate(sides):
        ys = [v / scale for v in values if v is not None and not math.isnan(v)]
        fig.add_trace(go.Box(y=ys, name=f"{name} (n={len(ys)})", boxpoints="all", jitter=0.35, pointpos=0,
                             marker=dict(color=PALETTE[i % len(PALETTE)], size=9, opacity=0.85),
                             line=dict(width=1.5), boxmean=False, hovertemplate="%{y:.4g} " + label +
                             "<extra>%{x}</extra>"))
    axis = f"{rows[0][1].key} ({label}{', log scale' if log_y else ''})" if label else rows[0][1].key
    return _layout(fig, title, height=360, yaxis=dict(title=axis, type="log" if log_y else "linear"),
                   showlegend=False, margin=dict(l=70, r=20, t=50, b=60))


def fig_changes(result: CompareResult, roles: tuple[str, ...] = ("guard", "context")) -> go.Figure:
    """A forest plot: NEW/BASE ratio of the median of each metric with its confidence interval, on a log axis,
    grouped by layer, coloured by verdict; 1 (no change) solid, the minimum effect dotted."""
    fig = go.Figure()
    n, undrawn = 0, 0
    for i, pair in enumerate(result.pairs):
        shown = [r for r in pair.rows if r.role in roles]
        rows = [r for r in shown if not math.isnan(r.result.ratio) and r.result.ratio > 0]
        undrawn = max(undrawn, len(shown) - len(rows))
        rows.sort(key=lambda r: (LAYER_ORDER.index(r.layer), r.key))
        n = max(n, len(rows))
        ys = [[r.layer for r in rows], [r.key for r in rows]]
        lo = [r.result.ratio - r.result.ci_low if _finite(r.result.ci_low) else 0 for r in rows]
        hi = [r.result.ci_high - r.result.ratio if _finite(r.result.ci_high) else 0 for r in rows]
        fig.add_trace(go.Scatter(
            x=[r.result.ratio for r in rows], y=ys, mode="markers", orientation="h", name=pair.new.label,
            marker=dict(color=[VERDICT_COLORS[r.result.verdict] for r in rows], size=9,
                        symbol=["circle", "diamond", "square", "triangle-up"][i % 4]),
            error_x=dict(type="data", symmetric=False, array=hi, arrayminus=lo, color="#888", thickness=1.2),
            customdata=[[100 * r.result.change, r.result.verdict, r.result.reason] for r in rows],
            hovertemplate="%{y}<br>ratio %{x:.3g} (%{customdata[0]:+.1f}%)<br>%{customdata[1]}: %{customdata[2]}"
                          "<extra>" + pair.new.label + "</extra>"))
    e = result.options.min_effect
    fig.add_vline(x=1, line_color="#444", line_width=1)
    for x in (1 - e, 1 + e):
        fig.add_vline(x=x, line_dash="dot", line_color="#999")
    title = "NEW / BASE ratio of each metric's median, with its CI (log scale)"
    if undrawn:  # a log scale has no 0: a metric that went to 0 (or from 0) is in the table only
        title += f"<br><sup>{undrawn} metric(s) with a ratio of 0 or none are in the table only</sup>"
    return _layout(fig, title, height=max(280, 130 + 20 * n),
                   xaxis=dict(type="log", title="NEW / BASE (log scale; 1 = no change)", side="top"),
                   yaxis=dict(autorange="reversed", automargin=True), showlegend=len(result.pairs) > 1,
                   margin=dict(l=60, r=20, t=110, b=30))


def _finite(x: float) -> bool:
    return x is not None and math.isfinite(x)
