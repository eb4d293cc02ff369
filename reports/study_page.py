"""The HTML pages of sweeps and studies: a Plotly heatmap of one metric over the swept parameters, and tables with
confidence intervals; for a study, our figures beside the paper's and the qualitative checks.

One self-contained file: plotly.js is inlined once (no CDN), so a page works offline and can be mailed.
Figures are pure functions `fig_*(...) -> plotly.graph_objects.Figure`.
"""

from __future__ import annotations

import html
import math
import os
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio

from mobiperf.orchestration.sweep import DEFAULTS, CellSummary, metric_unit, summarize, varying_params

_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;max-width:1400px}
table{border-collapse:collapse;margin:0.6em 0 1.6em 0;font-size:0.9em}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:right}
th{background:#f3f3f3} td.l,th.l{text-align:left}
.ok{color:#176f2c;font-weight:600}.bad{color:#b00020;font-weight:600}.skip{color:#777}
.note{color:#555;font-size:0.9em}
"""


def _fmt(value: float, unit: str) -> str:
    from mobiperf.core.metrics import format_value

    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return format_value({"value": value, "unit": unit})


def _axes(data: dict) -> tuple[str | None, list[str]]:
    """The heatmap's x parameter (the last varying one) and the y parameters (the others)."""
    varying = varying_params(data)
    if not varying:
        return None, []
    return varying[-1], varying[:-1]


def _label(params: dict[str, str], names: list[str]) -> str:
    return " ".join(f"{n}={params.get(n, DEFAULTS.get(n, ''))}" for n in names) or "all"


def fig_matrix(summaries: list[CellSummary], x_param: str | None, y_params: list[str], metric: str,
               title: str = "") -> go.Figure:
    """Heatmap of the median of `metric` per cell; hover shows n and the 95 % CI; failed/skipped cells empty."""
    unit = metric_unit(metric)
    xs: list[str] = []
    ys: list[str] = []
    for s in summaries:
        x = s.params.get(x_param, DEFAULTS.get(x_param or "", "")) if x_param else "value"
        y = _label(s.params, y_params)
        if x not in xs:
            xs.append(x)
        if y not in ys:
            ys.append(y)
    z = [[None for _ in xs] for _ in ys]
    text = [["" for _ in xs] for _ in ys]
    for s in summaries:
        x = s.params.get(x_param, DEFAULTS.get(x_param or "", "")) if x_param else "value"
        i, j = ys.index(_label(s.params, y_params)), xs.index(x)
        st = s.stat(metric)
        if st["n"]:
            z[i][j] = st["median"]
            ci = ("" if math.isnan(st["ci_low"])
                  else f"<br>95% CI [{_fmt(st['ci_low'], unit)}, {_fmt(st['ci_high'], unit)}]")
            text[i][j] = f"{_fmt(st['median'], unit)}<br>n={st['n']}{ci}"
        else:
            text[i][j] = f"{s.status}: {(s.reason or '')[:80]}"
    fig = go.Figure(go.Heatmap(z=z, x=xs, y=ys, text=text, hoverinfo="text+x+y", texttemplate="%{text}",
                               colorscale="Viridis", colorbar={"title": unit}))
    fig.update_layout(title=title or f"median {metric}", xaxis_title=x_param or "", height=max(320, 60 * len(ys) + 160),
                      margin={"l": 260})
    fig.update_xaxes(type="category")
    fig.update_yaxes(type="category", autorange="reversed")
    return fig


def fig_ours_vs_paper(rows: list[dict[str, Any]], title: str, unit: str) -> go.Figure:
    """Grouped bars: our median (with its CI) beside the paper's figure, per configuration."""
    labels = [r["label"] for r in rows]
    ours = [r.get("ours") for r in rows]
    err_hi = [None if r.get("ci_high") is None or r.get("ours") is None else r["ci_high"] - r["ours"] for r in rows]
    err_lo = [None if r.get("ci_low") is None or r.get("ours") is None else r["ours"] - r["ci_low"] for r in rows]
    fig = go.Figure()
    fig.add_bar(name="ours (median)", x=labels, y=ours,
                error_y={"type": "data", "array": err_hi, "arrayminus": err_lo, "visible": True})
    if any(r.get("paper") is not None for r in rows):
        fig.add_bar(name="paper", x=labels, y=[r.get("paper") for r in rows])
    fig.update_layout(title=title, barmode="group", yaxis_title=unit, height=380)
    return fig


def _table(header: list[str], rows: list[list[str]], left: int = 1) -> str:
    head = "".join(f"<th class='l'>{html.escape(h)}</th>" if i < left else f"<th>{html.escape(h)}</th>"
                   for i, h in enumerate(header))
    body = []
    for r in rows:
        cells = "".join(f"<td class='l'>{c}</td>" if i < left else f"<td>{c}</td>" for i, c in enumerate(r))
        body.append(f"<tr>{cells}</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def matrix_table_html(data: dict, metric: str) -> str:
    unit = metric_unit(metric)
    names = varying_params(data) or sorted({k for c in data["cells"] for k in c["params"]})
    rows = []
    for s in summarize(data):
        st = s.stat(metric)
        cls = {"done": "ok", "failed": "bad", "skipped": "skip"}.get(s.status, "")
        status = f"<span class='{cls}'>{s.status}</span>" + (
            f" <span class='note'>{html.escape((s.reason or '')[:160])}</span>" if s.reason else "")
        ci = "–" if math.isnan(st["ci_low"]) else f"[{_fmt(st['ci_low'], unit)}, {_fmt(st['ci_high'], unit)}]"
        rows.append([s.cell, *(html.escape(s.params.get(n, DEFAULTS.get(n, ""))) for n in names), str(st["n"]),
                     _fmt(st["median"], unit), ci, f"{_fmt(st['min'], unit)} – {_fmt(st['max'], unit)}", status])
    return _table(["cell", *names, "n", f"median {metric}", "95% CI (bootstrap)", "range", "status"], rows,
                  left=1 + len(names))


class _Page:
    """Accumulates sections; the first figure carries plotly.js inline."""

    def __init__(self, title: str):
        self.title = title
        self.parts: list[str] = []
        self._js_done = False

    def h(self, text: str, level: int = 2) -> None:
        self.parts.append(f"<h{level}>{html.escape(text)}</h{level}>")

    def p(self, text_html: str) -> None:
        self.parts.append(f"<p>{text_html}</p>")

    def raw(self, text_html: str) -> None:
        self.parts.append(text_html)

    def fig(self, fig: go.Figure) -> None:
        self.parts.append(pio.to_html(fig, include_plotlyjs=not self._js_done, full_html=False,
                                      config={"displaylogo": False}))
        self._js_done = True

    def write(self, path: Path) -> Path:
        doc = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(self.title)}</title>"
               f"<style>{_CSS}</style></head><body><h1>{html.escape(self.title)}</h1>{''.join(self.parts)}"
               "</body></html>")
        path = Path(path)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(doc)
        os.replace(tmp, path)
        return path


def _sweep_sections(page: _Page, data: dict, metric: str) -> None:
    from mobiperf.orchestration.sweep import status_counts

    x, ys = _axes(data)
    counts = ", ".join(f"{v} {k}" for k, v in status_counts(data).items())
    page.p(f"{len(data['cells'])} cells × {data['repeat']} repetitions, seeded order (seed {data['seed']}); "
           f"units: {html.escape(counts)}. Confidence intervals: 95 % percentile bootstrap of the median.")
    page.fig(fig_matrix(summarize(data), x, ys, metric))
    page.raw(matrix_table_html(data, metric))


def write_matrix_page(data: dict, path: Path, *, metric: str | None = None) -> Path:
    metric = metric or data.get("metric") or "run.throughput"
    page = _Page(f"mobiperf sweep {data.get('name', '')}: {metric}")
    _sweep_sections(page, data, metric)
    return page.write(path)


def write_study_page(study_result: dict, data: dict, path: Path) -> Path:
    """The study's page: checks, ours-vs-paper tables (one per figure/table of the paper), then the raw matrix."""
    page = _Page(f"mobiperf study {study_result['name']}: {study_result['title']}")
    page.p(html.escape(study_result.get("description", "")))
    from mobiperf.orchestration.study import phone_note

    if phone_note(study_result.get("config") or {}):
        page.p(html.escape(phone_note(study_result["config"])))
    page.p("Machine: " + html.escape(study_result.get("machine_note", "")))
    checks = study_result.get("checks", [])
    if checks:
        page.h("Qualitative results of the paper, checked here")
        rows = []
        for c in checks:
            verdict = {True: "<span class='ok'>holds</span>", False: "<span class='bad'>does not hold</span>",
                       None: "<span class='skip'>not measured</span>"}[c["passed"]]
            rows.append([html.escape(c["claim"]), verdict, html.escape(c["detail"])])
        page.raw(_table(["claim (paper)", "here", "measured"], rows, left=1))
    for section in study_result.get("sections", []):
        page.h(section["title"])
        if section.get("source"):
            page.p(f"<span class='note'>Paper: {html.escape(section['source'])}</span>")
        unit = section.get("unit", "")
        rows = section["rows"]
        if any(r.get("ours") is not None for r in rows) and section.get("chart", True):
            page.fig(fig_ours_vs_paper(rows, section["title"], unit))
        table_rows = []
        for r in rows:
            ci = "–" if r.get("ci_low") is None else f"[{_fmt(r['ci_low'], unit)}, {_fmt(r['ci_high'], unit)}]"
            table_rows.append([html.escape(r["label"]), _fmt(r.get("ours"), unit), ci, str(r.get("n", "")),
                               _fmt(r.get("paper"), unit) if isinstance(r.get("paper"), (int, float))
                               else html.escape(str(r.get("paper") or "–")),
                               html.escape(r.get("note", ""))])
        page.raw(_table(["configuration", "ours (median)", "95% CI", "n", "paper", "note"], table_rows))
    page.h("All cells")
    _sweep_sections(page, data, data.get("metric") or "run.throughput")
    return page.write(path)
