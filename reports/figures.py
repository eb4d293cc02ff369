"""Figures: pure functions `fig_*(result table) -> plotly Figure`. No file or run-directory access here."""

from __future__ import annotations

import plotly.graph_objects as go
import polars as pl

from mobiperf.analyzers.size import SIZE_CLASSES

OP_COLORS = {"write": "#d62728", "read": "#1f77b4", "flush": "#7f7f7f", "discard": "#9467bd", "other": "#bcbd22"}
LOCALITY_COLORS = {"sequential": "#2ca02c", "random": "#ff7f0e", "none": "#c7c7c7"}
MAX_SCATTER_POINTS = 200_000


def _layout(fig: go.Figure, title: str, **kw) -> go.Figure:
    fig.update_layout(title=title, template="plotly_white", height=380, margin=dict(l=60, r=20, t=50, b=50),
                      legend=dict(orientation="h", y=-0.2), **kw)
    return fig


def fig_size_distribution(io_class: pl.DataFrame) -> go.Figure:
    """Request counts per size class, reads and writes side by side (seed 000 Fig. 4a)."""
    counts = (io_class.filter(pl.col("op").is_in(["read", "write"]))
              .group_by("op", "size_class").agg(pl.col("count").sum()))
    fig = go.Figure()
    for op in ("read", "write"):
        rows = dict(counts.filter(pl.col("op") == op).select("size_class", "count").iter_rows())
        fig.add_bar(name=op, x=list(SIZE_CLASSES), y=[rows.get(c, 0) for c in SIZE_CLASSES],
                    marker_color=OP_COLORS[op], text=[rows.get(c, 0) for c in SIZE_CLASSES])
    return _layout(fig, "Block requests by size", barmode="group", xaxis_title="request size",
                   yaxis_title="requests")


def fig_locality(io_class: pl.DataFrame) -> go.Figure:
    """Share of sequential and random requests per direction (seed 000 Fig. 4b)."""
    counts = (io_class.filter(pl.col("op").is_in(["read", "write"]) & (pl.col("locality") != "none"))
              .group_by("op", "locality").agg(pl.col("count").sum()))
    fig = go.Figure()
    for loc in ("sequential", "random"):
        rows = dict(counts.filter(pl.col("locality") == loc).select("op", "count").iter_rows())
        totals = dict(counts.group_by("op").agg(pl.col("count").sum()).iter_rows())
        ops = ["read", "write"]
        share = [100 * rows.get(op, 0) / totals[op] if totals.get(op) else 0 for op in ops]
        fig.add_bar(name=loc, x=ops, y=share, marker_color=LOCALITY_COLORS[loc],
                    text=[f"{s:.0f}% ({rows.get(op, 0)})" for s, op in zip(share, ops)])
    return _layout(fig, "Locality (issue order, per device and direction)", barmode="stack",
                   yaxis_title="% of requests", yaxis_range=[0, 100])


def fig_latency_cdf(block_io: pl.DataFrame, phase: str = "d2c") -> go.Figure:
    """CDF of one latency phase per direction, log-scaled time axis."""
    fig = go.Figure()
    col = f"{phase}_ns"
    for op in ("read", "write", "flush"):
        values = block_io.filter((pl.col("op") == op) & pl.col(col).is_not_null())[col].sort()
        if not len(values):
            continue
        step = max(1, len(values) // 5000)  # a CDF needs at most a few thousand points to look exact
        xs = values[::step].to_numpy() / 1e3
        ys = [(i * step + 1) / len(values) for i in range(len(xs))]
        fig.add_scatter(name=f"{op} (n={len(values)})", x=xs, y=ys, mode="lines", line_color=OP_COLORS[op])
    return _layout(fig, f"{phase.upper()} latency CDF", xaxis_title=f"{phase.upper()} (µs)", xaxis_type="log",
                   yaxis_title="fraction of requests", yaxis_range=[0, 1])


def fig_lba_scatter(block_io: pl.DataFrame) -> go.Figure:
    """Logical block address against time (seed 000 Fig. 12/15), WebGL, downsampled beyond 200k points."""
    rows = block_io.filter((pl.col("size_bytes") > 0) & (pl.col("sector") >= 0))
    if len(rows) > MAX_SCATTER_POINTS:
        rows = rows.gather_every(len(rows) // MAX_SCATTER_POINTS + 1)
    t0 = int(rows["ts"].min()) if len(rows) else 0
    fig = go.Figure()
    for op in ("read", "write"):
        sub = rows.filter(pl.col("op") == op)
        if not len(sub):
            continue
        fig.add_trace(go.Scattergl(
            name=op, x=(sub["ts"] - t0).to_numpy() / 1e9, y=sub["sector"].to_numpy() * 512 / (1 << 20),
            mode="markers", marker=dict(size=4, color=OP_COLORS[op], opacity=0.6),
            customdata=sub.select("size_bytes", "locality").to_numpy(),
            hovertemplate="t=%{x:.6f}s<br>offset=%{y:.3f} MiB<br>size=%{customdata[0]} B<br>%{customdata[1]}"))
    return _layout(fig, "Block access pattern", xaxis_title="time (s)", yaxis_title="device offset (MiB)")
