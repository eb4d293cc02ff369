"""Latency distributions per layer and op, BASE and every NEW overlaid (mobiperf.compare.latency_shift): one panel
per (layer, op) with the most time, each side's CDF of its spans pooled over its repetitions, on a log time axis;
the panel's title says the p50 and p99 shifts of the first NEW with their confidence intervals."""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from mobiperf.compare.latency_shift import LatencyComparison, ci_text
from mobiperf.compare.profile_format import call_name, signed_ns
from mobiperf.reports.figures import PALETTE, RUN_DASHES, _layout

PANELS = 6
COLUMNS = 2


def fig_latency_cdfs(lc: LatencyComparison) -> go.Figure:
    """The CDF panels (module docstring)."""
    ops = list(dict.fromkeys((s.layer, s.op) for s in lc.shifts[0]))[:PANELS] if lc.shifts else []
    rows = max(1, math.ceil(len(ops) / COLUMNS))
    titles = [_panel_title(lc, layer, op) for layer, op in ops]
    fig = make_subplots(rows=rows, cols=COLUMNS, subplot_titles=titles or ["no layer and op on both sides"],
                        vertical_spacing=0.14 if rows > 1 else 0.1, horizontal_spacing=0.08)
    sides = [("BASE " + lc.base.label, lc.base)] + [("NEW " + n.label, n) for n in lc.news]
    probs = np.linspace(0, 1, len(next(iter(lc.base.curves.values()), [0, 1])))
    for p, (layer, op) in enumerate(ops):
        row, col = p // COLUMNS + 1, p % COLUMNS + 1
        for i, (name, side) in enumerate(sides):
            curve = side.curves.get((layer, op))
            if curve is None:
                continue
            xs = np.maximum(curve, 1.0) / 1e3
            fig.add_scatter(x=xs, y=probs, mode="lines", name=name, legendgroup=name, showlegend=p == 0, row=row,
                            col=col, line=dict(color=PALETTE[i % len(PALETTE)], dash=RUN_DASHES[i % len(RUN_DASHES)],
                                               width=2),
                            hovertemplate="%{x:.4g} µs: %{y:.1%} of the spans<extra>" + name + "</extra>")
        fig.update_xaxes(type="log", title_text="µs (log)" if row == rows else None, row=row, col=col)
        fig.update_yaxes(range=[0, 1.01], title_text="fraction" if col == 1 else None, row=row, col=col)
    fig.update_annotations(font_size=12)
    return _layout(fig, "Latency by layer and op: CDFs of the spans, every side", height=260 * rows + 110,
                   legend=dict(orientation="h", y=-0.12 if rows > 1 else -0.25),
                   margin=dict(l=60, r=20, t=90, b=60))


def _panel_title(lc: LatencyComparison, layer: str, op: str) -> str:
    parts = []
    for s in lc.shifts[0]:
        if (s.layer, s.op) != (layer, op) or not math.isfinite(s.shift_ns):
            continue
        mark = " *" if s.result.verdict in ("improvement", "regression") else ""
        ci = f" {ci_text(s.ci.low, s.ci.high)}" if s.ci.usable else ""
        parts.append(f"{s.quantile} {signed_ns(s.shift_ns)}{ci}{mark}")
    return f"<b>{call_name(layer, op)}</b>  " + ", ".join(parts)
