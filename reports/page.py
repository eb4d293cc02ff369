"""The report page: one self-contained HTML file (plotly.js inlined once, no network), built from result tables.

Sections appear only when their tables exist; a missing table is named with the reason instead of a figure.
"""

from __future__ import annotations

import html
from datetime import datetime, timezone
from typing import Any

import plotly.io as pio
import polars as pl

from mobiperf.metrics import metric_key
from mobiperf.reports import figures
from mobiperf.units import format_duration_ns, format_size

STYLE = """
body { font-family: system-ui, -apple-system, 'Segoe UI', sans-serif; margin: 0 auto; max-width: 1200px;
       padding: 1em 2em; color: #222; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; } h2 { border-bottom: 1px solid #ddd; padding-bottom: 0.2em; }
.banner { background: #fff3cd; border: 1px solid #e0c068; padding: 0.6em 1em; border-radius: 4px; }
.failed { background: #f8d7da; border-color: #d9959c; }
table { border-collapse: collapse; font-size: 0.9em; } td, th { padding: 0.25em 0.8em; text-align: left; }
tr:nth-child(even) { background: #f6f6f6; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(520px, 1fr)); gap: 1em; }
.missing { color: #8a6d3b; font-style: italic; }
"""


def render_report(meta: dict[str, Any], tables: dict[str, pl.DataFrame]) -> str:
    """The HTML page of a run, from run.json and the result tables that exist."""
    parts = [f"<h1>mobiperf report: {html.escape(str(meta.get('stack', '?')))}</h1>",
             f"<p>{html.escape(' '.join(meta.get('command', [])))}</p>"]
    status = meta.get("status")
    if status != "complete":
        cls = "banner failed" if status == "failed" else "banner"
        parts.append(f'<p class="{cls}"><b>This run is {html.escape(str(status))}.</b> '
                     f'{html.escape(_status_reason(meta))}</p>')
    for w in meta.get("warnings", []):
        parts.append(f'<p class="banner">{html.escape(w)}</p>')
    parts.append(_summary_section(meta))
    figs_html = []
    include_js = True
    for title, table, build in (("IO size", "io_class", figures.fig_size_distribution),
                                ("Locality", "io_class", figures.fig_locality),
                                ("Latency", "block_io", figures.fig_latency_cdf),
                                ("Access pattern", "block_io", figures.fig_lba_scatter)):
        if table not in tables:
            figs_html.append(f'<div class="missing">{title}: no {table} table in this run '
                             f'(it needs the block trace events)</div>')
            continue
        fig = build(tables[table])
        figs_html.append(pio.to_html(fig, full_html=False, include_plotlyjs=include_js,
                                     config={"displaylogo": False}))
        include_js = False
    parts.append('<h2>Block IO</h2><div class="grid">' + "".join(figs_html) + "</div>")
    if "latency_summary" in tables:
        parts.append(_latency_table(tables["latency_summary"]))
    parts.append(_metadata_section(meta))
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>mobiperf: {html.escape(str(meta.get('id')))}"
            f"</title><style>{STYLE}</style></head><body>{''.join(parts)}"
            f"<footer><p><small>generated {generated} by mobiperf</small></p></footer></body></html>")


def _status_reason(meta: dict[str, Any]) -> str:
    if meta.get("status") == "failed":
        codes = [r.get("exit_code") for r in meta.get("repetitions", [])]
        return f"The workload exited with status {codes}; its figures describe a failed run."
    return "It was interrupted before all stages finished; figures cover what was collected."


def _summary_section(meta: dict[str, Any]) -> str:
    rows = []
    wanted = ("block.requests", "block.bytes", "block.sequential_share", "latency.d2c.p50", "latency.d2c.p99",
              "latency.q2c.p99")
    for m in sorted(meta.get("metrics", []), key=metric_key):
        if m["name"] in wanted or m["name"].startswith("workload."):
            rows.append(f"<tr><td>{html.escape(metric_key(m))}</td><td class='num'>{_fmt(m)}</td></tr>")
    return "<h2>Summary</h2><table>" + "".join(rows) + "</table>" if rows else ""


def _fmt(m: dict[str, Any]) -> str:
    v, unit = m["value"], m["unit"]
    if unit == "ns":
        return format_duration_ns(v)
    if unit == "B":
        return format_size(v)
    if unit == "ratio":
        return f"{100 * v:.1f} %"
    if unit == "count":
        return f"{v:,.0f}"
    return f"{v:,.2f} {html.escape(unit)}"


def _latency_table(lat: pl.DataFrame) -> str:
    agg = lat.group_by("phase", "op").agg(pl.col("count").sum(), pl.col("p50_ns").median(),
                                          pl.col("p90_ns").median(), pl.col("p99_ns").median(),
                                          pl.col("max_ns").max()).sort("phase", "op")
    head = "<tr><th>phase</th><th>op</th><th>count</th><th>p50</th><th>p90</th><th>p99</th><th>max</th></tr>"
    body = "".join(
        f"<tr><td>{r['phase'].upper()}</td><td>{r['op']}</td><td class='num'>{r['count']:,}</td>"
        + "".join(f"<td class='num'>{format_duration_ns(r[c])}</td>" for c in ("p50_ns", "p90_ns", "p99_ns", "max_ns"))
        + "</tr>" for r in agg.iter_rows(named=True))
    return f"<h2>Block latency by phase (btt definitions)</h2><table>{head}{body}</table>"


def _metadata_section(meta: dict[str, Any]) -> str:
    target = meta.get("target", {})
    items = {"run": meta.get("id"), "created": meta.get("created"), "status": meta.get("status"),
             "target": target.get("target"), "kernel": target.get("kernel"), "stack": meta.get("stack"),
             "scheduler": meta.get("scheduler"), "repetitions": len(meta.get("repetitions", []))}
    rows = "".join(f"<tr><td>{k}</td><td>{html.escape(str(v))}</td></tr>" for k, v in items.items())
    return f"<h2>Run</h2><table>{rows}</table>"
