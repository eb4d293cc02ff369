"""The fleet page: a store's headline metrics across runs, grouped by run facts, every group against BASE.

One self-contained HTML page: the groups (runs per group, the facts they share), a table of each headline
metric's median per group with the verdict of each group against BASE (compare's statistics: one value per run),
the verdict tables of compare, and one strip chart per headline metric with every run's value, so a group's
spread is seen next to its median.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import plotly.graph_objects as go

from mobiperf.compare.formats import method_description
from mobiperf.compare.fleet import Fleet
from mobiperf.core.metrics import format_quantity
from mobiperf.reports import figures
from mobiperf.reports.compare_figures import fig_changes
from mobiperf.reports.compare_page import CONTEXT_HEADERS, context_row
from mobiperf.reports.html import esc, figure_div, page, sortable_table

MAX_FIGURES = 24


def fig_metric_by_group(fleet: Fleet, key: str) -> go.Figure:
    """Every run's value of one metric, one strip per group, the group's median as a bar behind it."""
    fig = go.Figure()
    unit = next((g.units[key] for g in fleet.groups if key in g.units), "")
    scale, suffix = (1e-6, " (ms)") if unit == "ns" else (1.0, f" ({unit})" if unit else "")
    labels = [g.label for g in fleet.groups]
    medians = [np.median(g.samples[key]) * scale if g.samples.get(key) else None for g in fleet.groups]
    fig.add_bar(x=labels, y=medians, name="median", marker_color="#cfd8dc",
                hovertemplate="median %{y:.4g}<extra></extra>")
    for g in fleet.groups:
        values = [v * scale for v in g.samples.get(key, [])]
        fig.add_scatter(x=[g.label] * len(values), y=values, mode="markers", name=g.label, showlegend=False,
                        marker=dict(size=6, opacity=0.6, color="#37474f"),
                        customdata=fleet.run_ids[g.label], hovertemplate="%{customdata}: %{y:.4g}<extra></extra>")
    return figures._layout(fig, key, height=320, yaxis_title=key + suffix, showlegend=False)


def _verdict_table(pair, i: int) -> str:
    """Every metric of one group against BASE, the primary first, sortable like the compare page's context."""
    rows = [context_row(pair.new.label, r, False) for r in pair.rows]
    return sortable_table(f"verdicts-{i}", CONTEXT_HEADERS, rows)


def _summary_table(fleet: Fleet) -> str:
    """Rows: headline metrics; columns: each group's median (n runs), and its verdict against BASE."""
    keys = sorted({k for g in fleet.groups for k in g.samples})
    rows_by_pair = {}
    if fleet.result:
        for pair in fleet.result.pairs:
            rows_by_pair[pair.new.label] = {r.key: r for r in pair.rows}
    head = "<tr><th>metric</th>" + "".join(
        f"<th>{'BASE ' if i == 0 else ''}{esc(g.label)}</th>" for i, g in enumerate(fleet.groups)) + "</tr>"
    body = []
    for key in keys:
        cells = []
        for i, g in enumerate(fleet.groups):
            values = g.samples.get(key)
            if not values:
                cells.append("<td>-</td>")
                continue
            median = format_quantity(float(np.median(values)), g.units.get(key, ""))
            text = f"{esc(median)} <small>n={len(values)}</small>"
            row = rows_by_pair.get(g.label, {}).get(key) if i else None
            if row is not None:
                c = row.result
                change = "" if math.isnan(c.change) else f" {100 * c.change:+.1f}%"
                text += (f"<br><small class='{c.verdict.replace(' ', '-')}'>{esc(c.verdict)}{change}</small>")
            cells.append(f"<td class='num'>{text}</td>")
        body.append(f"<tr><td>{esc(key)}</td>{''.join(cells)}</tr>")
    return f"<div class='scroll'><table>{head}{''.join(body)}</table></div>"


def render_fleet(fleet: Fleet, store_name: str) -> str:
    n_runs = sum(len(v) for v in fleet.run_ids.values())
    parts = [f"<h1>Fleet: {esc(store_name)}</h1>",
             f"<p class='sub'>{n_runs} runs in {len(fleet.groups)} groups by {esc(', '.join(fleet.by))}; "
             "each run counts once (its median over its repetitions); "
             + (esc(method_description(fleet.result.options)) if fleet.result else "one group: nothing compared")
             + "</p>"]
    if fleet.left_out:
        items = "".join(f"<li>{esc(x)}</li>" for x in fleet.left_out[:50])
        more = f"<li>... and {len(fleet.left_out) - 50} more</li>" if len(fleet.left_out) > 50 else ""
        parts.append(f"<div class='banner'>{len(fleet.left_out)} runs left out:<ul>{items}{more}</ul></div>")
    groups = "".join(f"<tr><th>{'BASE' if i == 0 else ''}</th><td>{esc(g.label)}</td>"
                     f"<td class='num'>{len(fleet.run_ids[g.label])}</td><td>{esc(g.stack)}</td></tr>"
                     for i, g in enumerate(fleet.groups))
    parts.append("<section id='groups'><h2>Groups</h2><table><tr><th></th><th>group</th><th>runs</th>"
                 f"<th>stacks</th></tr>{groups}</table></section>")
    parts.append("<section id='summary'><h2>Headline metrics by group</h2>" + _summary_table(fleet) + "</section>")
    if fleet.result:
        parts.append("<section id='verdicts'><h2>Verdicts against BASE</h2>")
        for i, pair in enumerate(fleet.result.pairs):
            parts.append(f"<h3>{esc(fleet.groups[0].label)} → {esc(pair.new.label)}</h3>"
                         + _verdict_table(pair, i))
        parts.append(figure_div(fig_changes(fleet.result), "fig-changes") + "</section>")
    keys = sorted({k for g in fleet.groups for k in g.samples})[:MAX_FIGURES]
    figs = "".join(figure_div(fig_metric_by_group(fleet, k), f"fig-metric-{i}") for i, k in enumerate(keys))
    parts.append(f"<section id='figures'><h2>Every run, by group</h2><div class='grid'>{figs}</div></section>")
    nav = [("groups", "Groups"), ("summary", "Summary"), ("verdicts", "Verdicts"), ("figures", "Runs")]
    return page(f"mobiperf fleet: {store_name}", nav, "".join(parts), None)


def write_fleet_page(fleet: Fleet, store_name: str, path: Path) -> Path:
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(render_fleet(fleet, store_name))
    os.replace(tmp, path)
    return path
