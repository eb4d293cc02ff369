"""The pieces every mobiperf HTML page shares: the page shell with plotly.js inlined once, the style, the status
banner (an incomplete or failed run is labelled at the top and in the sticky navigation bar of every page),
figures as divs, and tables of result rows."""

from __future__ import annotations

import html
import json
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any, Iterable

import plotly.io as pio
import polars as pl

from mobiperf.core.units import format_duration_ns, format_size

PLOTLY_CONFIG = {"displaylogo": False, "responsive": True,
                 "toImageButtonOptions": {"format": "svg", "scale": 1}}

STYLE = """
* { box-sizing: border-box; }
body { font-family: system-ui, -apple-system, 'Segoe UI', sans-serif; margin: 0; color: #222; background: #fafafa; }
nav { position: sticky; top: 0; z-index: 10; background: #263238; color: #eee; padding: 0.45em 1.5em;
      display: flex; flex-wrap: wrap; gap: 0.2em 1.1em; align-items: center; font-size: 0.9em; }
nav a { color: #cfd8dc; text-decoration: none; } nav a:hover { color: #fff; }
nav .brand { font-weight: 600; color: #fff; margin-right: 0.5em; }
nav .status { padding: 0.1em 0.6em; border-radius: 3px; font-weight: 700; background: #f0ad4e; color: #222; }
nav .status.failed { background: #d9534f; color: #fff; }
main { max-width: 1400px; margin: 0 auto; padding: 0.5em 1.5em 2em; }
h1 { font-size: 1.45em; margin: 0.6em 0 0.1em; } h2 { font-size: 1.2em; border-bottom: 1px solid #ddd;
      padding-bottom: 0.2em; margin-top: 1.6em; scroll-margin-top: 3em; }
.sub { color: #555; margin: 0 0 0.6em; font-size: 0.9em; overflow-wrap: anywhere; }
.banner { background: #fff3cd; border: 1px solid #e0c068; padding: 0.5em 1em; border-radius: 4px; margin: 0.4em 0; }
.banner.failed { background: #f8d7da; border-color: #d9959c; }
.banner.loud { background: #f8d7da; border: 2px solid #c9302c; font-weight: 600; }
table { border-collapse: collapse; font-size: 0.88em; background: #fff; margin: 0.4em 0; }
td, th { padding: 0.22em 0.7em; text-align: left; border-bottom: 1px solid #eee; vertical-align: top; }
th { background: #eceff1; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.cards { display: flex; flex-wrap: wrap; gap: 0.6em; margin: 0.6em 0; }
.card { background: #fff; border: 1px solid #e0e0e0; border-radius: 6px; padding: 0.45em 0.9em; min-width: 10em; }
.card .v { font-size: 1.3em; font-weight: 600; } .card .k { color: #666; font-size: 0.8em; }
.grid { display: grid; grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 0.8em; }
@media (max-width: 1150px) { .grid { grid-template-columns: minmax(0, 1fr); } }
.fig { background: #fff; border: 1px solid #e6e6e6; border-radius: 6px; padding: 0.2em; min-width: 0; }
.missing { color: #8a6d3b; background: #fcf8e3; border-left: 4px solid #e0c068; padding: 0.4em 0.8em; }
.scroll { max-height: 28em; overflow: auto; } .scroll.tall { max-height: 80vh; }
span[title] { text-decoration: underline dotted; cursor: help; }
table.sortable thead th { position: sticky; top: 0; z-index: 1; } table.sortable td.num { white-space: nowrap; }
.regression { color: #b71c1c; font-weight: 700; } .improvement { color: #1b5e20; font-weight: 700; }
.changed { color: #6a1b9a; } .undecided { color: #8a6d3b; }
footer { color: #888; font-size: 0.8em; text-align: center; padding: 1em; }
table.sortable th { cursor: pointer; user-select: none; white-space: nowrap; }
table.sortable th[data-sort=asc]::after { content: " ▲"; } table.sortable th[data-sort=desc]::after { content: " ▼"; }
.table-filter { display: flex; gap: 1em; align-items: center; margin: 0.4em 0; font-size: 0.9em; }
.table-filter input[type=search] { padding: 0.2em 0.5em; min-width: 18em; }
.verdict { font-size: 1.15em; font-weight: 600; padding: 0.6em 1em; border-radius: 6px; margin: 0.5em 0;
           border-left: 8px solid #9e9e9e; background: #f5f5f5; }
.verdict.improvement { border-color: #2e7d32; background: #e8f5e9; }
.verdict.regression { border-color: #c62828; background: #ffebee; }
.failed-guard { color: #b71c1c; font-weight: 700; } .ok-guard { color: #1b5e20; }
"""

# Sortable tables (click a header; numbers sort by their data-v value) and filters (text, layer, findings only),
# all in the page: no server, works from file://.
TABLE_JS = """
(function () {
  function cellValue(r, i) {
    var c = r.cells[i]; var v = c.getAttribute('data-v'); return v === null ? c.textContent.trim() : v;
  }
  document.querySelectorAll('table.sortable').forEach(function (t) {
    var ths = t.tHead.rows[0].cells;
    Array.prototype.forEach.call(ths, function (th, i) {
      th.title = 'click to sort';
      th.addEventListener('click', function () {
        var asc = th.getAttribute('data-sort') !== 'asc';
        Array.prototype.forEach.call(ths, function (h) { h.removeAttribute('data-sort'); });
        th.setAttribute('data-sort', asc ? 'asc' : 'desc');
        var body = t.tBodies[0], rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = cellValue(a, i), y = cellValue(b, i), nx = Number(x), ny = Number(y);
          var numbers = x !== '' && y !== '' && isFinite(nx) && isFinite(ny);
          var c = numbers ? nx - ny : x.localeCompare(y);
          return asc ? c : -c;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });
  document.querySelectorAll('.table-filter').forEach(function (box) {
    var t = document.getElementById(box.getAttribute('data-table'));
    function apply() {
      var q = box.querySelector('input[type=search]').value.toLowerCase();
      var sel = box.querySelector('select'), layer = sel ? sel.value : '';
      var only = box.querySelector('input[type=checkbox]'), findings = only && only.checked, shown = 0;
      Array.prototype.forEach.call(t.tBodies[0].rows, function (r) {
        var ok = (!q || r.textContent.toLowerCase().indexOf(q) >= 0) &&
                 (!layer || r.getAttribute('data-layer') === layer) &&
                 (!findings || r.getAttribute('data-finding') === '1');
        r.style.display = ok ? '' : 'none'; if (ok) shown++;
      });
      box.querySelector('.count').textContent = shown + ' of ' + t.tBodies[0].rows.length + ' rows';
    }
    box.addEventListener('input', apply); box.addEventListener('change', apply); apply();
  });
})();
"""


# Figures are drawn lazily: those on (or near) the screen first, as soon as the layout is final, then the others
# one by one while the browser is idle. A report with a dozen figures and a million requests is readable in the
# time the first screen takes, and the page never freezes while plotly draws what nobody looks at yet.
_DRAW_JS = """
(function () {
  var figs = Array.prototype.slice.call(document.querySelectorAll('.mp-fig'));
  var later = window.requestIdleCallback || function (f) { return setTimeout(f, 1); };
  function draw(div) {
    if (div.getAttribute('data-drawn')) return;
    div.setAttribute('data-drawn', '1');
    var spec = JSON.parse(document.getElementById(div.id + '-spec').textContent);
    Plotly.newPlot(div, spec.data, spec.layout, spec.config);
  }
  var seen = new IntersectionObserver(function (entries) {
    entries.forEach(function (e) { if (e.isIntersecting) { seen.unobserve(e.target); draw(e.target); } });
  }, {rootMargin: '400px'});
  figs.forEach(function (d) { seen.observe(d); });
  function drawNext() {
    for (var i = 0; i < figs.length; i++) {
      if (!figs[i].getAttribute('data-drawn')) { draw(figs[i]); later(drawNext); return; }
    }
  }
  window.addEventListener('load', function () { later(drawNext); });
})();
"""


@lru_cache(maxsize=1)
def plotly_js() -> str:
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


def esc(value: Any) -> str:
    return html.escape(str(value))


def figure_div(fig, div_id: str) -> str:
    """A plotly figure as an empty div of its final height plus its JSON spec; _DRAW_JS draws it."""
    spec = pio.to_json(fig, validate=False, pretty=False)
    spec = spec[:-1] + ',"config":' + json.dumps(PLOTLY_CONFIG) + "}"
    spec = spec.replace("</", "<\\/")  # a string in the data must not close the script element
    height = fig.layout.height or 380
    return (f'<div class="fig"><div id="{div_id}" class="mp-fig plotly-graph-div" style="height:{height}px;'
            f'width:100%"></div><script type="application/json" id="{div_id}-spec">{spec}</script></div>')


def status_label(statuses: Iterable[str | None]) -> str | None:
    """'FAILED' or 'INCOMPLETE' when any of the runs on a page is, else None."""
    statuses = set(statuses)
    if "failed" in statuses:
        return "FAILED"
    if statuses - {"complete"}:
        return "INCOMPLETE"
    return None


def page(title: str, nav: list[tuple[str, str]], body: str, status: str | None) -> str:
    """The whole page: head with style and plotly.js, sticky navigation (with the status badge), body."""
    badge = ""
    if status:
        badge = f'<span class="status {"failed" if status == "FAILED" else ""}" id="run-status">{status}</span>'
    links = "".join(f'<a href="#{anchor}">{esc(text)}</a>' for anchor, text in nav)
    prefix = f"[{status}] " if status else ""
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>{esc(prefix + title)}</title><style>{STYLE}</style>"
            f"<script>{plotly_js()}</script></head><body>"
            f"<nav><span class='brand'>mobiperf</span>{badge}{links}</nav><main>{body}</main>"
            f"<footer>generated {generated} by mobiperf; self-contained, works offline</footer>"
            f"<script>{_DRAW_JS}</script><script>{TABLE_JS}</script></body></html>")


def format_cell(column: str, value: Any) -> tuple[str, bool]:
    """(text, is_number) for a table cell, using the unit in the column name."""
    if value is None:
        return "", False
    if isinstance(value, bool):
        return ("yes" if value else "no"), False
    if isinstance(value, (int, float)):
        if isinstance(value, float) and value != value:
            return "", True
        if column.endswith("_ns") or column == "dur":
            return format_duration_ns(value), True
        if column.endswith("_ms"):
            return f"{value:,.0f} ms", True
        if column.endswith("_bytes") or column == "bytes":
            return format_size(value), True
        if column.endswith("_share") or column.endswith("_ratio"):
            return f"{100 * value:.1f}%", True
        if isinstance(value, float):
            return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}", True
        return f"{value:,}", True
    return esc(value), False


def table_html(df: pl.DataFrame, max_rows: int = 200, caption: str = "") -> str:
    """A result table as HTML, units formatted from the column names; long tables scroll and say so."""
    head = "".join(f"<th>{esc(c)}</th>" for c in df.columns)
    rows = []
    for r in df.head(max_rows).iter_rows():
        cells = []
        for c, v in zip(df.columns, r):
            text, num = format_cell(c, v)
            cells.append(f"<td class='num'>{text}</td>" if num else f"<td>{text}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    more = f"<p class='sub'>first {max_rows:,} of {len(df):,} rows</p>" if len(df) > max_rows else ""
    cap = f"<caption>{esc(caption)}</caption>" if caption else ""
    return f"<div class='scroll'><table>{cap}<tr>{head}</tr>{''.join(rows)}</table></div>{more}"


def sortable_table(table_id: str, headers: list[str], rows: list[list[tuple[str, Any]]],
                   row_attrs: list[dict[str, str]] | None = None) -> str:
    """A table sortable by any column: each cell is (html, sort value or None); numbers sort numerically."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = []
    for i, row in enumerate(rows):
        attrs = "".join(f' data-{k}="{esc(v)}"' for k, v in (row_attrs[i] if row_attrs else {}).items())
        cells = "".join(f"<td{'' if v is None else f' data-v={chr(34)}{esc(v)}{chr(34)}'}"
                        f"{' class=num' if isinstance(v, (int, float)) else ''}>{html_}</td>" for html_, v in row)
        body.append(f"<tr{attrs}>{cells}</tr>")
    return (f"<table class='sortable' id='{esc(table_id)}'><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table>")


def table_filter(table_id: str, layers: list[str] = (), findings: bool = False) -> str:
    """The filter bar of a sortable table: free text, optionally a layer and "findings only"."""
    select = ""
    if layers:
        select = ("<label>layer <select><option value=''>all</option>"
                  + "".join(f"<option>{esc(x)}</option>" for x in layers) + "</select></label>")
    only = "<label><input type='checkbox'> significant only</label>" if findings else ""
    return (f"<div class='table-filter' data-table='{esc(table_id)}'><input type='search' placeholder='filter rows'>"
            f"{select}{only}<span class='count sub'></span></div>")


def missing(title: str, reason: str) -> str:
    return f'<p class="missing">{esc(title)} is not shown: {esc(reason)}</p>'
