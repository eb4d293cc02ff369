"""Figures: pure functions `fig_*(result tables) -> plotly Figure`. No file or run-directory access here.

Each figure reproduces one of the seed papers' figures where one exists (named in its docstring) and stays
readable at a million requests: CDFs keep a few thousand quantile points, the access pattern keeps one point per
(time, address, colour) cell of a screen-sized grid, and throughput is binned.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import polars as pl
from plotly.subplots import make_subplots

from mobiperf.analyzers.size import SIZE_CLASSES, size_class

OP_COLORS = {"write": "#d62728", "read": "#1f77b4", "flush": "#7f7f7f", "discard": "#9467bd", "other": "#bcbd22"}
LOCALITY_COLORS = {"sequential": "#2ca02c", "random": "#ff7f0e", "none": "#c7c7c7"}
SYNC_COLORS = {"async": "#9ecae1", "buffered": "#9ecae1", "sync": "#3182bd", "fua": "#e6550d", "preflush": "#fd8d3c",
               "flush": "#7f7f7f", "o_sync": "#3182bd", "o_dsync": "#6baed6", "o_direct": "#31a354",
               "fsync": "#e6550d", "fdatasync": "#fd8d3c", "msync": "#fdae6b"}
FILE_TYPE_COLORS = {"db": "#9467bd", "db-journal": "#8c564b", "db-wal": "#e377c2", "db-shm": "#bcbd22",
                    "media": "#17becf", "other": "#7f7f7f", "unknown": "#c7c7c7"}
REGION_COLORS = {"data": "#1f77b4", "metadata": "#ff7f0e", "journal": "#2ca02c", "unknown": "#c7c7c7",
                 # f2fs's (analyzers/f2fs_region.py): node blocks in metadata's hue, the checkpoint in the journal's
                 "node": "#fdae6b", "checkpoint": "#2ca02c", "sit": "#9467bd", "nat": "#8c564b", "ssa": "#e377c2",
                 "superblock": "#7f7f7f", "main": "#aec7e8"}
REGION_ORDER = ["data", "metadata", "journal", "node", "checkpoint", "sit", "nat", "ssa", "superblock", "main"]
PHASE_COLORS = {"q2g": "#c6dbef", "g2i": "#6baed6", "i2d": "#2171b5", "d2c": "#d62728", "q2c": "#444444"}
PHASE_NAMES = {"q2g": "Q2G queue→get request", "g2i": "G2I →insert", "i2d": "I2D scheduler→driver",
               "d2c": "D2C driver+device"}
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf")
RUN_DASHES = ("solid", "dash", "dot", "dashdot", "longdash")

MAX_SCATTER_POINTS = 150_000      # per figure, after density-preserving thinning
SCATTER_GRID = (1600, 800)        # time bins x address bins: about one cell per screen pixel
MAX_CDF_POINTS = 2_000


# Every figure's template, given once as the default (a figure takes it when made): setting it per figure deep-copies
# the whole template again, about a tenth of a second each.
pio.templates.default = "plotly_white"


def _layout(fig: go.Figure, title: str, height: int = 380, **kw) -> go.Figure:
    kw.setdefault("legend", dict(orientation="h", y=-0.18))
    kw.setdefault("margin", dict(l=60, r=20, t=50, b=40))
    fig.update_layout(title=dict(text=title, font_size=15), height=height, **kw)
    return fig


def _color(mapping: dict[str, str], key: str, i: int = 0) -> str:
    return mapping.get(key, PALETTE[i % len(PALETTE)])


# --- IO characterisation (seed 000 Fig. 4) ---

def region_column(block_io: pl.DataFrame) -> pl.Expr | None:
    """The block type of each request: the analyzers' `region` where present, else metadata from rwbs `M`."""
    if "region" in block_io.columns:
        return pl.col("region")
    if "is_meta" in block_io.columns:
        return pl.when(pl.col("is_meta")).then(pl.lit("metadata")).otherwise(pl.lit("data"))
    return None


def _shares(df: pl.DataFrame, dim: str) -> dict[str, dict[str, tuple[float, int]]]:
    """{op: {category: (percent, count)}} for reads and writes."""
    out = {}
    for op in ("read", "write"):
        sub = df.filter(pl.col("op") == op).group_by(dim).agg(pl.col("count").sum())
        total = int(sub["count"].sum()) if len(sub) else 0
        out[op] = {str(k): (100 * v / total if total else 0.0, int(v)) for k, v in sub.iter_rows()}
    return out


NOT_A_CLASS = ("none", "first", "-", "", None)


def fig_io_characterisation(io_class: pl.DataFrame, block_io: pl.DataFrame | None = None,
                            layer: str = "block") -> go.Figure:
    """Seed 000 Fig. 4: (a) IO size, (b) locality, (c) IO mode, (d) block type (region), (e) file type, per read
    and write, as shares of the requests with their counts inside the bars. Locality leaves out a stream's
    first request and zero-length requests; block type falls back to rwbs `M` when the analyzers gave no region
    (journal writes then count as data). Panels without any classified request are left out."""
    rows = io_class.filter(pl.col("op").is_in(["read", "write"]))
    if "layer" in rows.columns:
        rows = rows.filter(pl.col("layer") == layer)
    note = ""
    if "region" not in rows.columns and block_io is not None and region_column(block_io) is not None:
        regions = (block_io.filter(pl.col("op").is_in(["read", "write"]))
                   .group_by("op", region_column(block_io).alias("region")).agg(count=pl.len()))
        note = " (rwbs M only)"
    else:
        regions = rows if "region" in rows.columns else None
    panels = [("(a) IO size", "size_class", list(SIZE_CLASSES), {}, rows),
              ("(b) locality", "locality", ["sequential", "random"], LOCALITY_COLORS, rows),
              ("(c) IO mode", "sync_mode", None, SYNC_COLORS, rows),
              (f"(d) block type{note}", "region", REGION_ORDER, REGION_COLORS, regions),
              ("(e) file type", "file_type", None, FILE_TYPE_COLORS, rows)]
    usable = []
    for title, dim, order, colors, data in panels:
        if data is None or dim not in data.columns:
            continue
        shares = _shares(data.filter(~pl.col(dim).is_in([c for c in NOT_A_CLASS if c is not None])
                                     & pl.col(dim).is_not_null()), dim)
        if any(shares[op] for op in shares):
            usable.append((title, dim, order, colors, shares))
    fig = make_subplots(rows=1, cols=max(1, len(usable)), subplot_titles=[u[0] for u in usable],
                        horizontal_spacing=0.05)
    size_colors = ("#fdd0a2", "#fd8d3c", "#d94801", "#7f2704")
    for col, (_, dim, order, colors, shares) in enumerate(usable, start=1):
        seen = {c for s in shares.values() for c in s}
        cats = [c for c in (order or []) if c in seen] + sorted(seen - set(order or []))
        for i, cat in enumerate(cats):
            color = size_colors[i % 4] if dim == "size_class" else _color(colors, cat, i + col)
            ops = ["read", "write"]
            counts = [shares[op].get(cat, (0, 0))[1] for op in ops]
            fig.add_bar(x=ops, y=[shares[op].get(cat, (0, 0))[0] for op in ops], name=cat, legendgroup=dim,
                        legendgrouptitle_text=dim.replace("_", " ") if i == 0 else None,
                        marker_color=color, row=1, col=col, text=[f"{c:,}" if c else "" for c in counts],
                        textposition="inside", insidetextanchor="middle",
                        hovertemplate=f"{cat}<br>%{{x}}: %{{y:.1f}}%<br>%{{text}} requests<extra></extra>")
    fig.update_yaxes(range=[0, 100], ticksuffix="%")
    fig.update_yaxes(title_text="% of requests (count inside)", row=1, col=1)
    return _layout(fig, f"IO characterisation ({layer} layer)", height=450, barmode="stack",
                   margin=dict(l=60, r=20, t=80, b=40),
                   legend=dict(orientation="h", y=-0.12, groupclick="toggleitem", font_size=11,
                               traceorder="grouped"))


# --- latency ---

def block_phase_means(block_io: pl.DataFrame, op: str = "write") -> pl.DataFrame:
    """Mean of each btt phase per size class for one direction: (size_class, phase, mean_ns, count)."""
    rows = block_io.filter((pl.col("op") == op) & (pl.col("size_bytes") > 0))
    frames = []
    for phase in ("q2g", "g2i", "i2d", "d2c"):
        frames.append(rows.group_by("size_class").agg(
            mean_ns=pl.col(f"{phase}_ns").fill_null(0).mean().cast(pl.Float64), count=pl.len().cast(pl.Int64))
            .with_columns(phase=pl.lit(phase)))
    return pl.concat(frames).select("size_class", "phase", "mean_ns", "count")


# The layers of a call's nest (analyzers/io_span.py), top to bottom, with their exclusive time's column.
MAX_WATERFALL_SPANS = 60  # a call's nest can hold hundreds of block requests; the first of each layer show
WATERFALL_LAYERS = (("syscall", "#9467bd"), ("fuse", "#ff7f0e"), ("file", "#bcbd22"), ("fs", "#2ca02c"),
                    ("journal", "#8c564b"), ("block", "#6baed6"), ("device", "#d62728"))


def waterfall_layers(waterfall: pl.DataFrame) -> pl.DataFrame:
    """Per call, the exclusive time of each layer (they add up to the call's duration), as the analyzers'
    waterfall defines them; `group` is the call's size class, or its name for calls that move no data."""
    self_ns = {name: pl.col(f"{name}_self_ns").fill_null(0) for name, _ in WATERFALL_LAYERS}
    if waterfall["syscall_self_ns"].is_null().all():  # a waterfall written before the nest: other_ns is the rest
        self_ns["syscall"] = pl.col("other_ns").fill_null(0)
    return waterfall.with_columns(
        **{name: expr.clip(0) for name, expr in self_ns.items()},
        group=pl.when(pl.col("size_bytes") > 0).then(size_class(pl.col("size_bytes")))
        .otherwise(pl.col("syscall")))


def present_layers(per_call: pl.DataFrame) -> list[tuple[str, str]]:
    """The layers (name, colour) a trace has: those with time in some call of waterfall_layers()'s table."""
    return [(name, color) for name, color in WATERFALL_LAYERS if per_call[name].sum() > 0] or list(WATERFALL_LAYERS)


def fig_layer_breakdown(block_io: pl.DataFrame, waterfall: pl.DataFrame | None = None) -> go.Figure:
    """Seed 004 Fig. 3: where an IO's time goes, stacked by layer, per IO size class.

    With the waterfall table the stack is the mean exclusive time per layer (syscall, FUSE, lower fs, journal,
    block queue, device) of the calls that went below the system call, per size class of the call (or the call's
    name for fsync and friends); otherwise the block layer's btt phases of writes and reads."""
    fig = go.Figure()
    if waterfall is not None and len(waterfall):
        per = waterfall_layers(waterfall)
        per = per.filter(pl.sum_horizontal([pl.col(n) for n, _ in WATERFALL_LAYERS[1:]]) > 0)
        agg = per.group_by("group").agg(pl.len().alias("n"), *[pl.col(name).mean() for name, _ in WATERFALL_LAYERS])
        layers = present_layers(per)
        groups = [c for c in SIZE_CLASSES if c in set(agg["group"])] + sorted(set(agg["group"]) - set(SIZE_CLASSES))
        rows = {r["group"]: r for r in agg.iter_rows(named=True)}
        labels = [_n_label(g, rows[g]["n"]) for g in groups]
        for name, color in layers:
            fig.add_bar(name=name, x=labels, y=[rows[g][name] / 1e3 for g in groups], marker_color=color,
                        marker_opacity=[_mean_opacity(rows[g]["n"]) for g in groups])
        totals = [sum(rows[g][name] for name, _ in WATERFALL_LAYERS) / 1e3 for g in groups]
        _keep_few_from_dominating(fig, labels, totals, [rows[g]["n"] for g in groups], "µs")
        return _layout(fig, "Call time by layer and IO size (mean, exclusive time of each layer)", barmode="stack",
                       yaxis_title="mean time per call (µs)")
    # Writes are the papers' subject (and reads, often a few cache misses, would dwarf them): writes when any.
    op = "write" if (block_io["op"] == "write").any() else "read"
    means = block_phase_means(block_io, op)
    present = [c for c in SIZE_CLASSES if c in set(means["size_class"])]
    counts = dict(means.filter(pl.col("phase") == "d2c").select("size_class", "count").iter_rows())
    labels = [_n_label(c, counts.get(c, 0)) for c in present]
    totals = [0.0] * len(present)
    for phase in ("q2g", "g2i", "i2d", "d2c"):
        vals = dict(means.filter(pl.col("phase") == phase).select("size_class", "mean_ns").iter_rows())
        ys = [vals.get(c, 0) / 1e3 for c in present]
        totals = [t + y for t, y in zip(totals, ys)]
        fig.add_bar(name=PHASE_NAMES[phase], x=labels, y=ys, marker_color=PHASE_COLORS[phase],
                    marker_opacity=[_mean_opacity(counts.get(c, 0)) for c in present],
                    hovertemplate=f"{phase.upper()} %{{y:.1f}} µs<extra></extra>")
    _keep_few_from_dominating(fig, labels, totals, [counts.get(c, 0) for c in present], "µs")
    return _layout(fig, f"Block latency of {op}s by phase and size (mean)", barmode="stack",
                   yaxis_title="mean latency (µs)")


MIN_MEAN_N = 5   # fewer requests than this make a mean that is an anecdote: drawn faded, never setting the scale


def _n_label(group: str, n: int) -> str:
    return f"{group} (n={n:,})" if n >= MIN_MEAN_N else f"{group} (n={n:,}: too few)"


def _mean_opacity(n: int) -> float:
    return 1.0 if n >= MIN_MEAN_N else 0.35


def _keep_few_from_dominating(fig: go.Figure, labels: list[str], totals: list[float], counts: list[int],
                              unit: str) -> None:
    """A mean of one or two requests must not set the scale of a bar chart of means: when such a bar is more
    than 1.5x the tallest well-populated one, the axis stops above the latter and the clipped bar says its
    value."""
    solid = [t for t, n in zip(totals, counts) if n >= MIN_MEAN_N]
    if not solid or max(solid) <= 0:
        return
    top = 1.25 * max(solid)
    clipped = [(x, t, n) for x, t, n in zip(labels, totals, counts) if n < MIN_MEAN_N and t > 1.5 * max(solid)]
    if not clipped:
        return
    fig.update_yaxes(range=[0, top])
    for x, t, n in clipped:
        fig.add_annotation(x=x, y=top, text=f"↑ {t:,.0f} {unit} (n={n}), off scale", showarrow=False,
                           yanchor="top", font=dict(size=11, color="#555"), bgcolor="rgba(255,255,255,0.8)")


def fig_layer_shares(layer_breakdown: pl.DataFrame) -> go.Figure:
    """Seed 000 Fig. 3: the share of each layer in the time of the calls, per call type (exclusive times: they
    add up to 100 %)."""
    agg = (layer_breakdown.group_by("syscall", "sync_mode", "layer").agg(pl.col("time_ns").sum())
           .with_columns(key=pl.col("syscall") + " (" + pl.col("sync_mode") + ")"))
    totals = dict(agg.group_by("key").agg(pl.col("time_ns").sum()).iter_rows())
    keys = sorted(totals)
    fig = go.Figure()
    for name, color in [(n, c) for n, c in WATERFALL_LAYERS if n in set(agg["layer"])]:
        vals = dict(agg.filter(pl.col("layer") == name).select("key", "time_ns").iter_rows())
        share = [100 * vals.get(k, 0) / totals[k] if totals[k] else 0 for k in keys]
        fig.add_bar(name=name, x=keys, y=share, marker_color=color, text=[f"{v:.0f}%" for v in share],
                    textposition="inside")
    return _layout(fig, "Share of each layer in the time of the calls (exclusive, sums to 100 %)", barmode="stack",
                   yaxis=dict(range=[0, 100], ticksuffix="%"))


def _cdf_points(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    values = np.sort(values)
    n = len(values)
    if n > MAX_CDF_POINTS:  # evenly spaced quantiles plus the exact tail: the CDF looks exact at any zoom
        idx = np.unique(np.concatenate([np.linspace(0, n - 1, MAX_CDF_POINTS).astype(int), np.arange(n - 50, n)]))
    else:
        idx = np.arange(n)
    return values[idx], (idx + 1) / n


def fig_latency_cdf(block_io: pl.DataFrame, phases: tuple[str, ...] = ("d2c", "q2c")) -> go.Figure:
    """CDFs of block latency phases per direction (D2C: driver+device, Q2C: the whole block layer), log time."""
    fig = go.Figure()
    for phase, dash in zip(phases, ("solid", "dash", "dot")):
        col = f"{phase}_ns"
        for op in ("read", "write", "flush"):
            values = block_io.filter((pl.col("op") == op) & pl.col(col).is_not_null() & (pl.col(col) > 0))[col]
            if not len(values):
                continue
            xs, ys = _cdf_points(values.to_numpy())
            fig.add_scatter(name=f"{phase.upper()} {op} (n={len(values):,})", x=xs / 1e3, y=ys, mode="lines",
                            line=dict(color=OP_COLORS[op], dash=dash))
    return _layout(fig, "Block latency CDF", xaxis_title="latency (µs, log)", xaxis_type="log",
                   yaxis_title="fraction of requests", yaxis_range=[0, 1.01])


def fig_syscall_cdf(syscall_class: pl.DataFrame) -> go.Figure:
    """CDFs of system call latency (enter -> exit) per call and sync mode, log time: the platform layer's view
    of the same IO (seed 004's application layer)."""
    fig = go.Figure()
    rows = syscall_class.filter(pl.col("dur").is_not_null() & (pl.col("dur") > 0))
    groups = (rows.group_by("syscall", "sync_mode").agg(pl.len().alias("n")).sort("n", descending=True).head(8))
    for i, (call, mode, n) in enumerate(groups.iter_rows()):
        values = rows.filter((pl.col("syscall") == call) & (pl.col("sync_mode") == mode))["dur"].to_numpy()
        xs, ys = _cdf_points(values)
        fig.add_scatter(name=f"{call} {mode} (n={n:,})", x=xs / 1e3, y=ys, mode="lines",
                        line=dict(color=PALETTE[i % len(PALETTE)]))
    return _layout(fig, "System call latency CDF", xaxis_title="latency (µs, log)", xaxis_type="log",
                   yaxis_title="fraction of calls", yaxis_range=[0, 1.01])


def fig_amplification(amplification: pl.DataFrame) -> go.Figure:
    """Seed 004 Fig. 4's "additional write" overhead: bytes at each layer for the application's bytes, writes
    and reads, the block layer split by region (median over repetitions)."""
    rows = amplification.filter(pl.col("op").is_in(["write", "read"]))
    rows = rows.filter((pl.col("layer") != "block") | (pl.col("region") != "all"))
    agg = rows.group_by("op", "layer", "region", "rep").agg(pl.col("bytes").sum()).group_by(
        "op", "layer", "region").agg(pl.col("bytes").median())
    fig = go.Figure()
    xs = [(op, layer) for op in ("write", "read") for layer in ("app", "fuse", "block")
          if len(agg.filter((pl.col("op") == op) & (pl.col("layer") == layer)))]
    order = ["all", *REGION_ORDER]
    regions = sorted(set(agg["region"].to_list()), key=lambda r: order.index(r) if r in order else len(order))
    for i, region in enumerate(regions):
        vals = {(r["op"], r["layer"]): r["bytes"] for r in agg.filter(pl.col("region") == region).iter_rows(named=True)}
        fig.add_bar(name=region if region != "all" else "all (app, FUSE)",
                    x=[[x[0] for x in xs], [x[1] for x in xs]], y=[vals.get(x, 0) / (1 << 20) for x in xs],
                    marker_color=REGION_COLORS.get(region, "#7f7f7f" if region == "all" else PALETTE[i]))
    return _layout(fig, "Bytes per layer (application, FUSE, block by region)", barmode="stack",
                   yaxis_title="MiB")


def fig_fuse_counts(fuse_latency: pl.DataFrame) -> go.Figure:
    """FUSE requests per opcode with their median latency, from the FUSE latency summary."""
    agg = (fuse_latency.with_columns(pl.col("op").str.replace("^fuse_", "").str.to_uppercase())
           .group_by("op").agg(pl.col("count").sum(), pl.col("p50_ns").median()).sort("count", descending=True))
    fig = make_subplots(rows=1, cols=2, subplot_titles=("requests per opcode", "median latency per opcode"))
    fig.add_bar(x=agg["op"].to_list(), y=agg["count"].to_list(), marker_color="#6baed6", name="requests",
                text=agg["count"].to_list(), textposition="outside", row=1, col=1)
    fig.add_bar(x=agg["op"].to_list(), y=(agg["p50_ns"] / 1e3).to_list(), marker_color="#ff7f0e",
                name="p50 (µs)", row=1, col=2)
    fig.update_yaxes(type="log", row=1, col=1)
    fig.update_yaxes(title_text="µs", row=1, col=2)
    return _layout(fig, "FUSE requests", height=400, showlegend=False)


def fig_io_waterfall(block_io: pl.DataFrame, waterfall: pl.DataFrame | None = None,
                     io_span: pl.DataFrame | None = None) -> go.Figure:
    """The life of selected IOs: the median, p90, p99 and slowest synchronous call (else call that went below the
    system call) by duration, or block write (or read) by Q2C; a menu selects the IO. With io_span each bar is a
    span of the call's nest at its own time (FUSE request, the daemon's calls, the sync, journal commits, block
    requests, device time), from the call's start; without it the block request's btt phases end to end."""
    fig = go.Figure()
    candidates: list[tuple[str, list[tuple[str, float, float, str]]]] = []
    if waterfall is not None and len(waterfall) and io_span is not None and len(io_span):
        calls = waterfall.filter(pl.col("dur_ns").is_not_null())
        sync = calls.filter(pl.col("sync_mode").is_in(["fsync", "fdatasync", "msync", "sync_file_range", "o_sync",
                                                       "o_dsync", "o_direct"]))
        deep = calls.filter(pl.col("syscall_self_ns").fill_null(0) < pl.col("dur_ns"))
        calls = (sync if len(sync) else deep if len(deep) else calls).sort("dur_ns")
        colors = dict(WATERFALL_LAYERS)
        n = len(calls)
        for label, q in (("median", 0.5), ("p90", 0.9), ("p99", 0.99), ("slowest", 1.0)):
            if not n:
                break
            r = calls.row(min(n - 1, int(q * (n - 1))), named=True)
            spans = io_span.filter((pl.col("rep") == r["rep"]) & (pl.col("call_id") == r["call_id"])).with_columns(
                _rank=pl.col("layer").replace_strict({name: i for i, (name, _) in enumerate(WATERFALL_LAYERS)},
                                                     default=9)).sort("_rank", "ts").head(MAX_WATERFALL_SPANS)
            bars = [(f"{sp['layer']}: {sp['name']}" + (f" {sp['region']}" if sp["layer"] in ("block", "device")
                                                      and sp["region"] not in (None, "none") else "")
                     + (f" #{k}" if k else ""), (sp["ts"] - r["ts"]) / 1e3,
                     max(sp["end_ts"] - sp["ts"], 0) / 1e3, colors.get(sp["layer"], "#7f7f7f"))
                    for k, sp in enumerate(spans.iter_rows(named=True))]
            candidates.append((f"{label} {r['syscall']}: {r['size_bytes'] or 0} B {r['file_type'] or ''}, "
                               f"{r['block_requests'] or 0} block requests, {(r['dur_ns']) / 1e3:.0f} µs", bars))
    else:
        rows = block_io.filter(pl.col("q2c_ns").is_not_null() & (pl.col("size_bytes") > 0))
        op = "write" if (rows["op"] == "write").any() else "read"
        rows = rows.filter(pl.col("op") == op).sort("q2c_ns")
        n = len(rows)
        for label, q in (("median", 0.5), ("p90", 0.9), ("p99", 0.99), ("slowest", 1.0)):
            if not n:
                break
            r = rows.row(min(n - 1, int(q * (n - 1))), named=True)
            bars, t = [], 0.0
            for phase in ("q2g", "g2i", "i2d", "d2c"):
                d = r[f"{phase}_ns"]
                if d is None:
                    continue
                bars.append((PHASE_NAMES[phase], t / 1e3, d / 1e3, PHASE_COLORS[phase]))
                t += d
            candidates.append((f"{label} {op}: {r['size_bytes'] // 1024} KiB at sector {r['sector']}, "
                               f"{r['locality']}, {r['sync_mode']}, Q2C {r['q2c_ns'] / 1e3:.0f} µs", bars))
    for i, (label, bars) in enumerate(candidates):
        fig.add_bar(y=[b[0] for b in bars], x=[b[2] for b in bars], base=[b[1] for b in bars], orientation="h",
                    marker_color=[b[3] for b in bars], visible=i == 0, name=label, showlegend=False,
                    text=[f"{b[2]:.1f} µs" for b in bars], textposition="auto",
                    hovertemplate="%{y}: starts %{base:.1f} µs, lasts %{x:.1f} µs<extra></extra>")
    buttons = [dict(label=label, method="update", args=[{"visible": [j == i for j in range(len(candidates))]}])
               for i, (label, _) in enumerate(candidates)]
    what = "call, layer by layer" if waterfall is not None and len(waterfall) and io_span is not None \
        else "block request"
    title = f"Waterfall of a selected {what}" if candidates else "Waterfall (no IO with all phases)"
    _layout(fig, title, height=400, yaxis=dict(autorange="reversed"), xaxis_title="time (µs)",
            margin=dict(l=60, r=20, t=90, b=40))
    if len(buttons) > 1:
        fig.update_layout(updatemenus=[dict(buttons=buttons, x=0, xanchor="left", y=1.04, yanchor="bottom",
                                            showactive=True, font_size=11)])
    return fig


# --- access pattern and throughput ---

def thin_scatter(df: pl.DataFrame, x: str, y: str, category: str,
                 grid: tuple[int, int] = SCATTER_GRID, limit: int = MAX_SCATTER_POINTS) -> pl.DataFrame:
    """At most `limit` rows: one per occupied (x, y, category) cell of a screen-sized grid, the grid coarsened
    by halves until the rows fit. A million requests draw as the same picture with a fraction of the points,
    and a rare request (a metadata or journal write) is never dropped, since each category keeps its cells."""
    if len(df) <= limit:
        return df
    lo_x, hi_x, lo_y, hi_y = df[x].min(), df[x].max(), df[y].min(), df[y].max()
    gx, gy = grid
    while True:
        thinned = (df.with_columns(_bx=((pl.col(x) - lo_x) * (gx - 1) // ((hi_x - lo_x) or 1)).cast(pl.Int64),
                                   _by=((pl.col(y) - lo_y) * (gy - 1) // ((hi_y - lo_y) or 1)).cast(pl.Int64))
                   .unique(subset=["_bx", "_by", category], keep="first", maintain_order=True)
                   .drop("_bx", "_by"))
        if len(thinned) <= limit or gx <= 8:
            break
        gx, gy = max(8, gx // 2), max(8, gy // 2)
    if len(thinned) > limit:
        thinned = thinned.gather_every(math.ceil(len(thinned) / limit))
    return thinned


def fig_lba_scatter(block_io: pl.DataFrame, color_by: str | None = None) -> go.Figure:
    """Seed 000 Fig. 12/15: device offset against time for every data request, WebGL, coloured by file type or
    region where the analyzers classified them (else by direction); thinned beyond 150k points."""
    rows = block_io.filter((pl.col("size_bytes") > 0) & (pl.col("sector") >= 0))
    if color_by is None:
        color_by = next((c for c in ("region", "file_type") if c in rows.columns), None)
    if color_by is None or color_by not in rows.columns:
        color_by = "op"
    if color_by == "region" and "region" not in rows.columns:
        rows = rows.with_columns(region=region_column(rows))
    which = ""
    if "rep" in rows.columns and rows["rep"].n_unique() > 1:
        reps = rows["rep"].n_unique()
        rows = rows.filter(pl.col("rep") == rows["rep"].min())  # repetitions overlap in time: show the first
        which = f"repetition {rows['rep'][0]} of {reps}, "
    total = len(rows)
    t0 = int(rows["ts"].min()) if total else 0
    rows = thin_scatter(rows, "ts", "sector", color_by)
    fig = go.Figure()
    colors = {"op": OP_COLORS, "region": REGION_COLORS, "file_type": FILE_TYPE_COLORS}.get(color_by, {})
    for i, cat in enumerate(sorted(rows[color_by].drop_nulls().unique().to_list())):
        sub = rows.filter(pl.col(color_by) == cat)
        fig.add_trace(go.Scattergl(
            name=f"{cat} ({len(sub):,})", x=(sub["ts"] - t0).to_numpy() / 1e9,
            y=sub["sector"].to_numpy() * 512 / (1 << 20), mode="markers",
            marker=dict(size=4, color=_color(colors, cat, i), opacity=0.7),
            customdata=np.stack([sub["size_bytes"].to_numpy(), sub["op"].to_numpy()], axis=1),
            hovertemplate="t=%{x:.6f} s<br>offset=%{y:.3f} MiB<br>%{customdata[1]} %{customdata[0]} B<extra></extra>"))
    shown = f"{len(rows):,} of {total:,} requests shown" if len(rows) < total else f"{total:,} requests"
    return _layout(fig, f"Block access pattern by {color_by.replace('_', ' ')} ({which}{shown})", height=420,
                   xaxis_title="time (s)", yaxis_title="device offset (MiB)")


def fig_throughput(block_io: pl.DataFrame, bins: int = 80) -> go.Figure:
    """Block throughput over time per direction (MiB/s in equal time bins), one line per repetition."""
    rows = block_io.filter((pl.col("size_bytes") > 0) & pl.col("op").is_in(["read", "write"]))
    fig = go.Figure()
    reps = sorted(rows["rep"].unique().to_list()) if "rep" in rows.columns else [None]
    for ri, rep in enumerate(reps[:5]):
        sub = rows if rep is None else rows.filter(pl.col("rep") == rep)
        if not len(sub):
            continue
        t0, t1 = int(sub["ts"].min()), int(sub["ts"].max())
        width = max(1, (t1 - t0) // bins + 1)
        for op in ("read", "write"):
            s = sub.filter(pl.col("op") == op)
            if not len(s):
                continue
            b = (s.group_by(((pl.col("ts") - t0) // width).alias("bin")).agg(pl.col("size_bytes").sum())
                 .sort("bin"))
            full = pl.DataFrame({"bin": np.arange(int(b["bin"].max()) + 1)}).join(b, on="bin", how="left")
            mibps = full["size_bytes"].fill_null(0).to_numpy() / (1 << 20) / (width / 1e9)
            fig.add_scatter(x=full["bin"].to_numpy() * width / 1e9, y=mibps, mode="lines",
                            name=f"{op}" + (f" rep {rep}" if len(reps) > 1 else ""),
                            line=dict(color=OP_COLORS[op], dash=RUN_DASHES[ri % len(RUN_DASHES)], shape="hv"))
    title = "Block throughput over time" + (f" (repetitions {reps[0]}-{reps[4]} of {len(reps)})" if len(reps) > 5
                                            else "")
    return _layout(fig, title, xaxis_title="time since first request (s)", yaxis_title="MiB/s")


# --- FUSE ---

def fig_fuse_requests(fuse_req: pl.DataFrame) -> go.Figure:
    """FUSE requests the daemon served: counts per opcode and, for reads and writes, the histogram of the data
    each moved (the 4 KiB splitting of seed 000 against bFUSE's 512 KiB units; protocol headers excluded)."""
    size_col = next(c for c in ("data_bytes", "len_bytes", "size_bytes") if c in fuse_req.columns
                    and not fuse_req[c].is_null().all())
    op_col = "opcode_name" if "opcode_name" in fuse_req.columns else "opcode"
    fig = make_subplots(rows=1, cols=2, subplot_titles=("requests per opcode", "READ/WRITE data per request (KiB)"),
                        column_widths=[0.4, 0.6])
    counts = fuse_req.group_by(op_col).agg(pl.len().alias("n")).sort("n", descending=True).head(15)
    fig.add_bar(x=counts[op_col].cast(pl.Utf8).to_list(), y=counts["n"].to_list(), name="requests",
                marker_color="#6baed6", text=counts["n"].to_list(), textposition="outside", row=1, col=1)
    fuse_req = fuse_req.with_columns(pl.col(op_col).cast(pl.Utf8).str.replace("^FUSE_", "").alias(op_col))
    data = fuse_req.filter(pl.col(op_col).str.to_lowercase().is_in(["read", "write"]) & (pl.col(size_col) > 0))
    for i, op in enumerate(sorted(data[op_col].cast(pl.Utf8).unique().to_list())):
        s = data.filter(pl.col(op_col).cast(pl.Utf8) == op)
        sizes = (s.group_by(size_col).agg(pl.len().alias("n")).sort(size_col))
        labels = [f"{v / 1024:g}" for v in sizes[size_col].to_list()]
        fig.add_bar(x=labels, y=sizes["n"].to_list(), name=op.lower(), marker_color=OP_COLORS.get(op.lower(),
                    PALETTE[i]), text=sizes["n"].to_list(), textposition="outside", row=1, col=2)
    fig.update_yaxes(type="log", title_text="requests (log)", row=1, col=1)
    fig.update_yaxes(type="log", row=1, col=2)
    fig.update_xaxes(type="category", title_text="KiB of data per request", row=1, col=2)
    return _layout(fig, "FUSE requests", height=400)


def _size_label(n: int) -> str:
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20}M"
    if n >= 1024 and n % 1024 == 0:
        return f"{n >> 10}k"
    return str(n)


def layer_throughput(syscall_class: pl.DataFrame, block_io: pl.DataFrame, op: str = "write") -> list[tuple[str, float]]:
    """Seed 004 Fig. 4: throughput "measured on each layer", MiB/s, as (label, value):
    application = app bytes / the summed duration of the IO calls; block (app IO) = app bytes / the summed D2C
    of the block requests; block (pure) = block bytes / the same D2C. The gap between the last two is the OS's
    additional writes (journal, metadata). Time is summed per request, i.e. as if the IOs ran one at a time."""
    calls = syscall_class.filter((pl.col("op") == op) & pl.col("dur").is_not_null())
    blocks = block_io.filter((pl.col("op") == op) & pl.col("d2c_ns").is_not_null())
    app_bytes, app_ns = float(calls["size_bytes"].sum()), float(calls["dur"].sum())
    blk_bytes, d2c_ns = float(blocks["size_bytes"].sum()), float(blocks["d2c_ns"].sum())
    mib = float(1 << 20)
    out = []
    if app_ns:
        out.append(("application (syscall)", app_bytes / mib / (app_ns / 1e9)))
    if d2c_ns:
        if app_bytes:
            out.append(("block, app IO", app_bytes / mib / (d2c_ns / 1e9)))
        out.append(("block, pure", blk_bytes / mib / (d2c_ns / 1e9)))
    return out


def fig_layer_throughput(syscall_class: pl.DataFrame, block_io: pl.DataFrame) -> go.Figure:
    """Seed 004 Fig. 4: write throughput as each layer measures it (see layer_throughput)."""
    fig = go.Figure()
    for op, color in (("write", OP_COLORS["write"]), ("read", OP_COLORS["read"])):
        rows = layer_throughput(syscall_class, block_io, op)
        if rows:
            fig.add_bar(name=op, x=[r[0] for r in rows], y=[r[1] for r in rows], marker_color=color,
                        text=[f"{r[1]:.1f}" for r in rows], textposition="outside")
    return _layout(fig, "Throughput measured at each layer (seed 004 Fig. 4)", barmode="group",
                   yaxis_title="MiB/s")
