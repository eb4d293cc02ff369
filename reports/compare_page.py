"""The compare page: BASE and every NEW run on one self-contained HTML page.

The verdict table per NEW run (medians, change, p-value, confidence interval, verdict), a chart of the changes,
the runs' figures overlaid (size distributions, latency CDFs, layer breakdowns), seed 000 Table 3's shape with
one column per run, and the settings that differ. Incomplete or failed runs and runs of different workloads are
labelled at the top and in the navigation bar.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import plotly.graph_objects as go
import polars as pl

from mobiperf import stats
from mobiperf.errors import MobiperfError
from mobiperf.compare import CompareResult, RunGroup
from mobiperf.compare_format import method_description, summary_line
from mobiperf.metrics import format_quantity
from mobiperf.reports import figures
from mobiperf.reports.html import esc, figure_div, missing, page, status_label
from mobiperf.reports.page import syscall_count_rows

VERDICT_ORDER = {stats.REGRESSION: 0, stats.IMPROVEMENT: 1, stats.CHANGED: 2, stats.UNDECIDED: 3,
                 stats.NOT_SIGNIFICANT: 4}
VERDICT_COLORS = {stats.REGRESSION: "#c62828", stats.IMPROVEMENT: "#2e7d32", stats.CHANGED: "#6a1b9a",
                  stats.NOT_SIGNIFICANT: "#9e9e9e", stats.UNDECIDED: "#d4a017"}


def group_tables(group: RunGroup, names: tuple[str, ...] = ("io_class", "block_io"),
                 problems: list[str] | None = None) -> dict[str, pl.DataFrame]:
    """The result tables of a group, concatenated over its runs; a table is left out if any run lacks it or has
    it in a form this mobiperf cannot read (an older analysis), which is added to `problems`."""
    out = {}
    for name in names:
        if not all(r.has_table(name) for r in group.runs):
            continue
        try:
            out[name] = pl.concat([r.read_table(name) for r in group.runs], how="vertical_relaxed")
        except MobiperfError as e:
            if problems is not None:
                problems.append(f"{group.label}: {e} (analysed by an older mobiperf? run `mobiperf analyze` on it)")
    return out


def fig_changes(result: CompareResult) -> go.Figure:
    """The change of every compared metric, NEW against BASE, coloured by verdict."""
    fig = go.Figure()
    for i, pair in enumerate(result.pairs):
        rows = [r for r in pair.rows if not math.isnan(r.result.change)]
        fig.add_bar(y=[r.key for r in rows], x=[100 * r.result.change for r in rows], orientation="h",
                    name=pair.new.label, marker_color=[VERDICT_COLORS[r.result.verdict] for r in rows],
                    marker_pattern_shape=["", "/", "x", "."][i % 4],
                    customdata=[[r.result.verdict, r.result.reason] for r in rows],
                    hovertemplate="%{y}: %{x:+.1f}%<br>%{customdata[0]}<br>%{customdata[1]}<extra>" + esc(
                        pair.new.label) + "</extra>")
    n = max((len(p.rows) for p in result.pairs), default=1)
    fig.add_vline(x=100 * result.options.min_effect, line_dash="dot", line_color="#999")
    fig.add_vline(x=-100 * result.options.min_effect, line_dash="dot", line_color="#999")
    return figures._layout(fig, "Change of each metric, NEW vs BASE", height=max(260, 90 + 22 * n * len(result.pairs)),
                           xaxis_title="change of the median (%)", yaxis=dict(autorange="reversed", automargin=True),
                           barmode="group", showlegend=len(result.pairs) > 1)


def _verdict_table(pair, result: CompareResult) -> str:
    head = ("<tr><th>metric</th><th>base median</th><th>new median</th><th>change</th><th>p</th>"
            "<th>CI of ratio</th><th>n</th><th>verdict</th><th>why</th></tr>")
    rows = []
    for r in sorted(pair.rows, key=lambda r: (VERDICT_ORDER[r.result.verdict], r.key)):  # findings first
        c = r.result
        change = "-" if math.isnan(c.change) else f"{100 * c.change:+.1f}%"
        p = "-" if math.isnan(c.p_value) else f"{c.p_value:.3g}"
        ci = "-" if math.isnan(c.ci_low) else f"[{c.ci_low:.3f}, {c.ci_high:.3f}]"
        cls = c.verdict.replace(" ", "-")
        warn = "".join(f"<br><small>⚠ {esc(w)}</small>" for w in c.warnings)
        rows.append(f"<tr><td>{esc(r.key)}</td><td class='num'>{esc(format_quantity(c.base_median, r.unit))}</td>"
                    f"<td class='num'>{esc(format_quantity(c.new_median, r.unit))}</td><td class='num'>{change}</td>"
                    f"<td class='num'>{p}</td><td class='num'>{ci}</td><td class='num'>{c.n_base}/{c.n_new}</td>"
                    f"<td class='{cls}'>{esc(c.verdict)}</td><td><small>{esc(c.reason)}</small>{warn}</td></tr>")
    return f"<div class='scroll'><table>{head}{''.join(rows)}</table></div><p>{esc(summary_line(pair))}</p>"


def _table3(groups: list[RunGroup], tables: list[dict[str, pl.DataFrame]]) -> str:
    per_group = []
    for g, t in zip(groups, tables):
        rows = syscall_count_rows(t)
        per_group.append({label: sorted(v.values())[len(v) // 2] for label, v in rows.items() if v})
    labels = list(dict.fromkeys(label for rows in per_group for label in rows))
    if not labels:
        return missing("Table 3", "none of the runs has block_io, syscall_class or fuse_latency tables")
    head = "<tr><th></th>" + "".join(f"<th>{esc(g.label)}</th>" for g in groups) + "</tr>"
    body = "".join(f"<tr><th>{esc(label)}</th>" + "".join(
        f"<td class='num'>{rows[label]:,.0f}</td>" if label in rows else "<td>-</td>" for rows in per_group)
        + "</tr>" for label in labels)
    return (f"<table>{head}{body}</table><p class='sub'>seed 000 Table 3's shape: medians over each run's "
            f"repetitions.</p>")


def render_compare(result: CompareResult) -> str:
    groups = [result.base] + [p.new for p in result.pairs]
    labels = [f"BASE {result.base.label}"] + [f"NEW {p.new.label}" for p in result.pairs]
    problems: list[str] = []
    tables = [group_tables(g, ("io_class", "block_io", "syscall_class", "fuse_latency", "waterfall"), problems)
              for g in groups]
    status = status_label(g.status for g in groups)
    parts = [f"<h1>Compare: {esc(result.base.label)} → {esc(', '.join(p.new.label for p in result.pairs))}</h1>",
             f"<p class='sub'>{esc(method_description(result.options))}</p>"]
    for g, label in zip(groups, labels):
        if g.status != "complete":
            cls = "banner failed" if g.status == "failed" else "banner"
            parts.append(f"<p class='{cls}'><b>{esc(label)} is {g.status.upper()}</b>: its figures and numbers cover "
                         f"only what was collected.</p>")
    for pair in result.pairs:
        if pair.incomparable:
            items = "".join(f"<li>{esc(s.name)}: {esc(s.base)} → {esc(s.new)}</li>" for s in pair.incomparable)
            parts.append(f"<div class='banner loud'>BASE and NEW {esc(pair.new.label)} ran DIFFERENT WORKLOADS OR "
                         f"TARGETS; differences may come from that, not from the change under study:<ul>{items}</ul>"
                         "</div>")
    for w in result.base.warnings + [w for p in result.pairs for w in p.new.warnings]:
        parts.append(f"<p class='banner'>{esc(w)}</p>")
    runs = "".join(f"<tr><th>{esc(label)}</th><td>{esc(g.stack)}</td><td class='num'>{g.repetitions}</td>"
                   f"<td>{esc(g.status)}</td><td>{esc(' '.join(g.metas[0].get('command', [])))}</td></tr>"
                   for g, label in zip(groups, labels))
    parts.append("<section id='runs'><h2>Runs</h2><table><tr><th></th><th>stack</th><th>repetitions</th>"
                 f"<th>status</th><th>workload</th></tr>{runs}</table>")
    for pair in result.pairs:
        studied = [s for s in pair.settings if s.kind == "stack"]
        if studied:
            parts.append("<p>changed under study: " + "; ".join(f"{esc(s.name)} {esc(s.base)} → {esc(s.new)}"
                                                               for s in studied) + "</p>")
    parts.append("</section><section id='verdicts'><h2>Verdicts</h2>")
    for pair in result.pairs:
        parts.append(f"<h3>{esc(result.base.label)} → {esc(pair.new.label)}</h3>" + _verdict_table(pair, result))
    parts.append(figure_div(fig_changes(result), "fig-changes") + "<p class='sub'>red: significant regression, "
                 "green: significant improvement, purple: changed (no better direction), grey: not significant, "
                 "yellow: undecided; dotted lines: the minimum effect.</p></section>")
    parts.append("<section id='figures'><h2>Figures, overlaid</h2>")
    with_io = {label: t["io_class"] for label, t in zip(labels, tables) if "io_class" in t}
    with_block = {label: t["block_io"] for label, t in zip(labels, tables) if "block_io" in t}
    figs = []
    if with_io:
        figs.append(figure_div(figures.fig_size_overlay(with_io), "fig-size-overlay"))
    if with_block:
        figs.append(figure_div(figures.fig_cdf_overlay(with_block, "d2c"), "fig-cdf-d2c"))
        figs.append(figure_div(figures.fig_cdf_overlay(with_block, "q2c"), "fig-cdf-q2c"))
        figs.append(figure_div(figures.fig_breakdown_overlay(with_block), "fig-breakdown-overlay"))
    with_waterfall = {label: t["waterfall"] for label, t in zip(labels, tables) if "waterfall" in t}
    if len(with_waterfall) == len(labels):
        figs.append(figure_div(figures.fig_layers_overlay(with_waterfall), "fig-layers-overlay"))
    parts_lba = ""
    if with_block:
        parts_lba = figure_div(figures.fig_lba_small_multiples(with_block), "fig-lba-runs")
    for problem in problems:
        parts.append(missing("A table", problem))
    lacking = [label for label, t in zip(labels, tables) if "block_io" not in t or "io_class" not in t]
    if lacking:
        parts.append(missing(f"The figures of {', '.join(lacking)}",
                             "their run directories have no io_class/block_io result tables (run `mobiperf analyze`"
                             " on them)"))
    parts.append("<div class='grid'>" + "".join(figs) + "</div>" + parts_lba + "</section>")
    parts.append("<section id='table3'><h2>System calls and IO requests (Table 3)</h2>"
                 + _table3(groups, tables) + "</section>")
    nav = [("runs", "Runs"), ("verdicts", "Verdicts"), ("figures", "Figures"), ("table3", "Table 3")]
    return page(f"mobiperf compare: {result.base.label}", nav, "".join(parts), status)


def write_compare_page(result: CompareResult, path: Path) -> Path:
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(render_compare(result))
    os.replace(tmp, path)
    return path
