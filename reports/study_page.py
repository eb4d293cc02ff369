"""The HTML pages of sweeps and studies: a Plotly heatmap of one metric over the swept parameters, and tables with
confidence intervals; for a study, our figures beside the paper's and the qualitative checks.

Input is a matrix, one row per cell (the sweep's summary builds it: mobiperf.orchestration.sweep.summary): `cell`,
one column per parameter (its value, defaults filled in), `status`, `reason`, and the statistics of one metric
over the cell's repetitions, `n`, `median`, `ci_low`, `ci_high`, `min`, `max` (NaN where there are none).

One self-contained file: plotly.js is inlined once (no CDN), so a page works offline and can be mailed.
Figures are pure functions `fig_*(...) -> plotly.graph_objects.Figure`.
"""

from __future__ import annotations

import html
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio
import polars as pl

from mobiperf.core.metrics import format_value


_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;max-width:1400px}
table{border-collapse:collapse;margin:0.6em 0 1.6em 0;font-size:0.9em}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:right}
th{background:#f3f3f3} td.l,th.l{text-align:left}
.ok{color:#176f2c;font-weight:600}.bad{color:#b00020;font-weight:600}.skip{color:#777}
.note{color:#555;font-size:0.9em}
"""


def _fmt(value: float, unit: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return format_value({"value": value, "unit": unit})


def _label(row: dict, names: list[str]) -> str:
    return " ".join(f"{n}={row[n]}" for n in names) or "all"


def fig_matrix(matrix: pl.DataFrame, x_param: str | None, y_params: list[str], metric: str, unit: str,
               title: str = "") -> go.Figure:
    """Heatmap of the median of `metric` per cell; hover shows n and the 95 % CI; failed/skipped cells empty."""
    rows = matrix.to_dicts()
    xs: list[str] = []
    ys: list[str] = []
    for r in rows:
        x = r[x_param] if x_param else "value"
        y = _label(r, y_params)
        if x not in xs:
            xs.append(x)
        if y not in ys:
            ys.append(y)
    z = [[None for _ in xs] for _ in ys]
    text = [["" for _ in xs] for _ in ys]
    for r in rows:
        i, j = ys.index(_label(r, y_params)), xs.index(r[x_param] if x_param else "value")
        if r["n"]:
            z[i][j] = r["median"]
            ci = ("" if math.isnan(r["ci_low"])
                  else f"<br>95% CI [{_fmt(r['ci_low'], unit)}, {_fmt(r['ci_high'], unit)}]")
            text[i][j] = f"{_fmt(r['median'], unit)}<br>n={r['n']}{ci}"
        else:
            text[i][j] = f"{r['status']}: {(r['reason'] or '')[:80]}"
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


def matrix_table_html(matrix: pl.DataFrame, names: list[str], metric: str, unit: str) -> str:
    rows = []
    for r in matrix.to_dicts():
        cls = {"done": "ok", "failed": "bad", "skipped": "skip"}.get(r["status"], "")
        status = f"<span class='{cls}'>{r['status']}</span>" + (
            f" <span class='note'>{html.escape((r['reason'] or '')[:160])}</span>" if r["reason"] else "")
        ci = "–" if math.isnan(r["ci_low"]) else f"[{_fmt(r['ci_low'], unit)}, {_fmt(r['ci_high'], unit)}]"
        versus = html.escape(r.get("versus") or "")
        versus = f"<span class='{_VERDICT_CLASS.get(r.get('verdict'), '')}'>{versus}</span>"
        rows.append([r["cell"], *(html.escape(r[n]) for n in names), str(r["n"]),
                     _fmt(r["median"], unit), ci, f"{_fmt(r['min'], unit)} – {_fmt(r['max'], unit)}", versus,
                     status])
    return _table(["cell", *names, "n", f"median {metric}", "95% CI (bootstrap)", "range", "vs baseline", "status"],
                  rows, left=1 + len(names))


_VERDICT_CLASS = {"improvement": "ok", "regression": "bad", "baseline": "skip", "undecided": "skip"}


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


@dataclass(frozen=True)
class Matrix:
    """A sweep's cells with the statistics of one metric (see the module docstring for the frame's columns)."""

    frame: pl.DataFrame
    metric: str
    unit: str
    varying: list[str]     # the parameters whose value differs between cells (the heatmap's axes), in order
    names: list[str]       # the parameters the table shows: the varying ones, else every one
    intro: str             # one line: cells, repetitions, the seed, the units by status


def _sweep_sections(page: _Page, matrix: Matrix) -> None:
    x, ys = (matrix.varying[-1], matrix.varying[:-1]) if matrix.varying else (None, [])
    page.p(html.escape(matrix.intro) + " Confidence intervals: 95 % percentile bootstrap of the median.")
    page.fig(fig_matrix(matrix.frame, x, ys, matrix.metric, matrix.unit))
    page.raw(matrix_table_html(matrix.frame, matrix.names, matrix.metric, matrix.unit))


def write_matrix_page(matrix: Matrix, path: Path, *, name: str = "") -> Path:
    page = _Page(f"mobiperf sweep {name}: {matrix.metric}")
    _sweep_sections(page, matrix)
    return page.write(path)


def write_study_page(study_result: dict, matrix: Matrix, path: Path, *, notes: list[str] = ()) -> Path:
    """The study's page: checks, ours-vs-paper tables (one per figure/table of the paper), then the raw matrix.
    notes: lines said under the description (the phone model the cells ran on)."""
    page = _Page(f"mobiperf study {study_result['name']}: {study_result['title']}")
    page.p(html.escape(study_result.get("description", "")))
    for note in notes:
        page.p(html.escape(note))
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
            versus = f"<span class='{_VERDICT_CLASS.get(r.get('verdict'), '')}'>{html.escape(r.get('versus') or '')}"
            table_rows.append([html.escape(r["label"]), _fmt(r.get("ours"), unit), ci, str(r.get("n", "")),
                               _fmt(r.get("paper"), unit) if isinstance(r.get("paper"), (int, float))
                               else html.escape(str(r.get("paper") or "–")),
                               html.escape(r.get("note", "")), versus + "</span>"])
        page.raw(_table(["configuration", "ours (median)", "95% CI", "n", "paper", "note",
                         "significance (compare's test)"], table_rows))
    page.h("All cells")
    _sweep_sections(page, matrix)
    return page.write(path)
