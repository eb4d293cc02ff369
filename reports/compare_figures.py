"""Figures of the compare page: every repetition of the primary metric side by side, and the change of each
metric as a ratio on a log scale (a halving and a doubling are the same distance from 1; a +2295 % CPU idle share
no longer flattens every other bar)."""

from __future__ import annotations

import math

import plotly.graph_objects as go
import polars as pl
from plotly.subplots import make_subplots

from mobiperf.core import stats
from mobiperf.compare.runs import CompareResult, MetricRow
from mobiperf.analyzers.size import SIZE_CLASSES
from mobiperf.reports.figures import (PALETTE, PHASE_COLORS, PHASE_NAMES, REGION_COLORS, RUN_DASHES,
                                      WATERFALL_LAYERS, _cdf_points, _color, _layout, _shares, block_phase_means,
                                      region_column, thin_scatter, waterfall_layers)
from mobiperf.compare.verdict import LAYER_ORDER

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
    sides = [(f"BASE {_short(result.base.label)}", rows[0][1].base_values)] + [
        (f"NEW {_short(new)}", row.new_values) for new, row in rows]
    spread = [v for _, values in sides for v in values if v is not None and v > 0]
    log_y = bool(spread) and max(spread) / min(spread) > 10  # a 15x gain: both sides stay readable
    for i, (name, values) in enumerate(sides):
        ys = [v / scale for v in values if v is not None and not math.isnan(v)]
        fig.add_trace(go.Box(y=ys, name=f"{name} (n={len(ys)})", boxpoints="all", jitter=0.35, pointpos=0,
                             marker=dict(color=PALETTE[i % len(PALETTE)], size=9, opacity=0.85),
                             line=dict(width=1.5), boxmean=False, hovertemplate="%{y:.4g} " + label +
                             "<extra>%{x}</extra>"))
    axis = f"{label or rows[0][1].unit}{' (log scale)' if log_y else ''}"
    return _layout(fig, title, height=360, yaxis=dict(title=axis, type="log" if log_y else "linear"),
                   showlegend=False, margin=dict(l=70, r=20, t=50, b=60))


def _short(label: str) -> str:
    """A run's label for an axis: the last part of its path (the title and the tables name it in full)."""
    return label.rstrip("/").rsplit("/", 1)[-1] or label


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


# --- the runs' figures overlaid ---

def fig_size_overlay(io_classes: dict[str, pl.DataFrame]) -> go.Figure:
    """Request size distribution of each run side by side: % of writes and reads per size class."""
    fig = go.Figure()
    for i, (label, io_class) in enumerate(io_classes.items()):
        rows = io_class.filter(pl.col("op").is_in(["read", "write"]))
        if "layer" in rows.columns:
            rows = rows.filter(pl.col("layer") == "block")
        shares = _shares(rows, "size_class")
        for op in ("write", "read"):
            if not shares[op]:
                continue
            fig.add_bar(name=f"{label} {op}", x=list(SIZE_CLASSES),
                        y=[shares[op].get(c, (0, 0))[0] for c in SIZE_CLASSES],
                        text=[f"{shares[op].get(c, (0, 0))[1]:,}" for c in SIZE_CLASSES],
                        marker=dict(color=PALETTE[i % len(PALETTE)], pattern_shape="" if op == "write" else "/"))
    return _layout(fig, "Request size distribution by run", barmode="group", yaxis_title="% of requests",
                   xaxis_title="size class")


def fig_cdf_overlay(block_ios: dict[str, pl.DataFrame], phase: str = "d2c", op: str = "write") -> go.Figure:
    """The latency CDF of each run on one axis, one colour per run."""
    fig = go.Figure()
    col = f"{phase}_ns"
    for i, (label, block_io) in enumerate(block_ios.items()):
        values = block_io.filter((pl.col("op") == op) & pl.col(col).is_not_null() & (pl.col(col) > 0))[col]
        if not len(values):
            continue
        xs, ys = _cdf_points(values.to_numpy())
        fig.add_scatter(name=f"{label} (n={len(values):,})", x=xs / 1e3, y=ys, mode="lines",
                        line=dict(color=PALETTE[i % len(PALETTE)], dash=RUN_DASHES[i % len(RUN_DASHES)]))
    return _layout(fig, f"{phase.upper()} latency CDF of {op}s by run", xaxis_type="log",
                   xaxis_title="latency (µs, log)", yaxis_title="fraction of requests", yaxis_range=[0, 1.01])


def fig_breakdown_overlay(block_ios: dict[str, pl.DataFrame], op: str = "write") -> go.Figure:
    """Seed 000 Fig. 3 / seed 004 Fig. 3 across runs: mean block phase times per request, stacked, per run."""
    fig = go.Figure()
    labels = list(block_ios)
    means = {label: block_phase_means(df, op).group_by("phase").agg(
        (pl.col("mean_ns") * pl.col("count")).sum() / pl.col("count").sum()) for label, df in block_ios.items()}
    for phase in ("q2g", "g2i", "i2d", "d2c"):
        ys = []
        for label in labels:
            d = dict(means[label].iter_rows())
            ys.append((d.get(phase) or 0) / 1e3)
        fig.add_bar(name=PHASE_NAMES[phase], x=labels, y=ys, marker_color=PHASE_COLORS[phase],
                    text=[f"{y:.0f}" for y in ys], textposition="inside")
    return _layout(fig, f"Block latency breakdown of {op}s by run (mean per request)", barmode="stack",
                   yaxis_title="µs")


def fig_layers_overlay(waterfalls: dict[str, pl.DataFrame]) -> go.Figure:
    """Seed 000 Fig. 3 across runs: the mean exclusive time of a synchronous call (fsync, fdatasync, msync,
    O_SYNC/O_DSYNC/O_DIRECT writes) in each layer, stacked, one bar per run."""
    fig = go.Figure()
    labels = list(waterfalls)
    sync = pl.col("sync_mode").is_in(["fsync", "fdatasync", "msync", "sync_file_range", "o_sync", "o_dsync",
                                      "o_direct"])
    means = {label: waterfall_layers(df.filter(sync)).select([pl.col(n).mean() for n, _ in WATERFALL_LAYERS])
             .row(0, named=True) for label, df in waterfalls.items()}
    for name, color in WATERFALL_LAYERS:
        ys = [(means[label][name] or 0) / 1e3 for label in labels]
        fig.add_bar(name=name, x=labels, y=ys, marker_color=color, text=[f"{y:.0f}" for y in ys],
                    textposition="inside")
    return _layout(fig, "Time of a synchronous call by layer, by run (mean)", barmode="stack", yaxis_title="µs")


def fig_lba_small_multiples(block_ios: dict[str, pl.DataFrame], limit_per_run: int = 50_000) -> go.Figure:
    """Seed 000 Fig. 15: the block access pattern of each run side by side (first repetition, data requests,
    coloured by region), each thinned like fig_lba_scatter."""
    labels = list(block_ios)
    cols = min(3, len(labels))
    nrows = math.ceil(len(labels) / cols)
    fig = make_subplots(rows=nrows, cols=cols, subplot_titles=labels, horizontal_spacing=0.06,
                        vertical_spacing=0.12)
    shown: set[str] = set()
    for i, label in enumerate(labels):
        rows = block_ios[label].filter((pl.col("size_bytes") > 0) & (pl.col("sector") >= 0))
        if not len(rows):
            continue
        rows = rows.filter(pl.col("rep") == rows["rep"].min())
        rows = rows.with_columns(region=region_column(rows) if "region" not in rows.columns else pl.col("region"))
        t0 = int(rows["ts"].min())
        rows = thin_scatter(rows, "ts", "sector", "region", limit=limit_per_run)
        for region in sorted(rows["region"].unique().to_list()):
            sub = rows.filter(pl.col("region") == region)
            fig.add_trace(go.Scattergl(x=(sub["ts"] - t0).to_numpy() / 1e9, y=sub["sector"].to_numpy() * 512 / 2**20,
                                       mode="markers", name=region, legendgroup=region, showlegend=region not in shown,
                                       marker=dict(size=3, color=_color(REGION_COLORS, region), opacity=0.7)),
                          row=i // cols + 1, col=i % cols + 1)
            shown.add(region)
    fig.update_xaxes(title_text="time (s)")
    fig.update_yaxes(title_text="offset (MiB)", col=1)
    return _layout(fig, "Block access pattern by run (first repetition)", height=330 * nrows + 60)
