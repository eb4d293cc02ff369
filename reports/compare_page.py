"""The compare page: BASE and every NEW run on one self-contained HTML page, in the order a storage engineer asks.

1. The verdict: one sentence per NEW run on the primary metric, and every repetition of it side by side (box and
   points), with what makes the answer doubtful above it (a run compared with itself, different workloads);
   then where the time moved: the top movers and the differential icicle of each NEW (reports/profile_section.py).
2. The guards and whether they held.
3. Every other metric as context, grouped by layer, in a table sortable and filterable in the page (no server),
   and as NEW/BASE ratios with their confidence intervals on a log scale.
4. The runs and what differs between them; the runs' figures overlaid (size distributions, latency CDFs, layer
   breakdowns); seed 000 Table 3's shape with one column per run.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import polars as pl

from mobiperf.core import stats
from mobiperf.compare.runs import CompareResult, MetricRow, RunGroup
from mobiperf.compare.formats import method_description, row_verdict_text, summary_line
from mobiperf.core.errors import MobiperfError
from mobiperf.core.metrics import format_quantity
from mobiperf.reports import compare_figures
from mobiperf.reports.compare_figures import fig_changes, fig_distributions
from mobiperf.reports.html import esc, figure_div, missing, page, sortable_table, status_label, table_filter
from mobiperf.reports.page import syscall_count_rows
from mobiperf.reports.profile_section import latency_section, profile_section
from mobiperf.compare.verdict import LAYER_ORDER

FINDINGS = (stats.REGRESSION, stats.IMPROVEMENT, stats.CHANGED)


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


def _num(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else x


def _verdict_section(result: CompareResult) -> str:
    out = []
    sentences = " ".join(p.verdict.sentence() for p in result.pairs if p.verdict)
    for pair in result.pairs:
        v = pair.verdict
        if v is None:
            out.append(f"<p class='verdict'>{esc(pair.new.label)}: no verdict (no primary metric in both BASE and "
                       "NEW; give --primary METRIC)</p>")
            continue
        c = v.result
        who = f"{esc(pair.new.label)}: " if len(result.pairs) > 1 else ""
        out.append(f"<p class='verdict {v.direction.replace(' ', '-')}'>{who}{esc(v.sentence())}</p>")
        detail = (f"medians {format_quantity(c.base_median, v.unit)} → {format_quantity(c.new_median, v.unit)}; "
                  f"{c.test or 'no test'}" + (f"; CI: {c.ci_note}" if c.ci_note else "")
                  + "".join(f"; {w}" for w in c.warnings if not w.startswith("too few")))
        out.append(f"<p class='sub'>{esc(detail)}</p>")
    out += [f"<p class='banner'>{esc(n)}</p>" for n in result.notes if n not in sentences]
    primaries = [(p.new.label, p.primary) for p in result.pairs if p.primary is not None]
    if primaries and all(r.key == primaries[0][1].key for _, r in primaries):
        out.append(figure_div(fig_distributions(result, primaries, f"{primaries[0][1].key}: every repetition"),
                              "fig-primary"))
    return "".join(out)


def _guards_section(result: CompareResult) -> str:
    rows = []
    for pair in result.pairs:
        checks = {g.key: g for g in (pair.verdict.guards if pair.verdict else [])}
        for r in pair.guards:
            g = checks[r.key]
            c = r.result
            status = ("<span class='failed-guard'>FAILED</span>" if g.failed else "<span class='ok-guard'>ok</span>")
            rows.append([(esc(pair.new.label), None), (esc(r.key), None), (f"{100 * g.limit:g}%", g.limit),
                         (esc(_change(c)), _num(c.change)), (esc(_p(c)), _num(c.p_value)),
                         (esc(row_verdict_text(c)), None), (status, int(g.failed))])
    if not rows:
        return ("<p class='sub'>No guards. <code>--guard METRIC[:MAX]</code> makes a metric fail the gate when it "
                "regresses significantly by more than MAX (default: the minimum effect).</p>")
    table = sortable_table("guards-table", ["NEW", "guard", "allowed", "change", "p", "verdict", "status"], rows)
    guard_rows = [(p.new.label, r) for p in result.pairs for r in p.guards]
    several = len(result.pairs) > 1
    figs = "".join(figure_div(fig_distributions(result, [(label, r)], f"guard {r.key}: every repetition"
                                                + (f" ({label})" if several else "")), f"fig-guard-{i}")
                   for i, (label, r) in enumerate(guard_rows[:4]))
    return table + (f"<div class='grid'>{figs}</div>" if figs else "")


def _change(c: stats.Comparison) -> str:
    return "-" if math.isnan(c.change) else f"{100 * c.change:+.1f}%"


def _p(c: stats.Comparison) -> str:
    return "-" if math.isnan(c.p_value) else f"{c.p_value:.2g}"


CONTEXT_HEADERS = ["layer", "metric", "base", "new", "change", "ratio CI", "p", "n", "verdict", "why"]


def _context_section(result: CompareResult) -> str:
    rows, attrs = [], []
    several = len(result.pairs) > 1
    for pair in result.pairs:
        for r in sorted(pair.context, key=lambda r: (LAYER_ORDER.index(r.layer), r.key)):
            rows.append(context_row(pair.new.label, r, several))
            attrs.append({"layer": r.layer, "finding": "1" if r.result.verdict in FINDINGS else "0"})
    if not rows:
        return "<p class='sub'>No context metrics (all filtered out by --metric).</p>"
    headers = (["NEW"] if several else []) + CONTEXT_HEADERS
    layers = [x for x in LAYER_ORDER if any(a["layer"] == x for a in attrs)]
    out = [f"<p class='sub'>{esc(result.context_note)}. Click a header to sort.</p>",
           table_filter("context-table", layers, findings=True),
           "<div class='scroll tall'>" + sortable_table("context-table", headers, rows, attrs) + "</div>",
           figure_div(fig_changes(result), "fig-changes"),
           "<p class='sub'>red: significant regression, green: significant improvement, purple: changed (no better "
           "direction), grey: not significant, yellow: undecided; bars: the confidence interval of the ratio; "
           "dotted lines: the minimum effect.</p>"]
    return "".join(out)


def context_row(new_label: str, r: MetricRow, several: bool) -> list[tuple[str, object]]:
    """One metric's cells in a sortable table (CONTEXT_HEADERS): medians, change, CI, p, n, verdict, why."""
    c = r.result
    ci = ("-" if math.isnan(c.ci_low) else f"{c.ci_low:.3g} – {c.ci_high:.3g}")
    cls = c.verdict.replace(" ", "-")
    warn = "".join(f"<br>⚠ {esc(w)}" for w in c.warnings)
    # The CI's note in full on hover; in the row only its gist (a point, absent, coarse).
    note = (f"<br><span title='{esc(c.ci_note)}'>CI {esc(c.ci_note.split(':')[0].replace('no interval', 'absent'))}"
            "</span>" if c.ci_note else "")
    cells = [(esc(r.layer), None), (esc(r.key), None),
             (esc(format_quantity(c.base_median, r.unit)), _num(c.base_median)),
             (esc(format_quantity(c.new_median, r.unit)), _num(c.new_median)),
             (esc(_change(c)), _num(c.change)), (esc(ci), _num(c.ci_low)), (esc(_p(c)), _num(c.p_value)),
             (f"{c.n_base}/{c.n_new}", c.n_base + c.n_new),
             (f"<span class='{cls}'>{esc(row_verdict_text(c))}</span>", None),
             (f"<small>{esc(c.reason)}{note}{warn}</small>", None)]
    return ([(esc(new_label), None)] if several else []) + cells


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
    for head, details in result.warning_items:
        loud = "THE SAME RUN" in head or "DIFFERENT WORKLOADS" in head
        items = "".join(f"<li>{esc(d.replace(' -> ', ' → '))}</li>" for d in details)
        parts.append(f"<div class='banner{' loud' if loud else ''}'>{esc(head)}"
                     + (f"<ul>{items}</ul>" if items else "") + "</div>")
    parts.append(f"<section id='verdict'><h2>Verdict</h2>{_verdict_section(result)}</section>")
    parts.append("<section id='moved'><h2>Where the time moved</h2>"
                 f"{profile_section(result.profile, result.profile_note)}{latency_section(result.latency)}</section>")
    parts.append(f"<section id='guards'><h2>Guards</h2>{_guards_section(result)}</section>")
    parts.append(f"<section id='context'><h2>Context, by layer (never gates)</h2>{_context_section(result)}"
                 + "".join(f"<p>{esc(p.new.label)}: {esc(summary_line(p))}</p>" for p in result.pairs)
                 + "</section>")
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
    parts.append("</section>")
    parts.append(_figures_section(labels, tables, problems))
    parts.append("<section id='table3'><h2>System calls and IO requests (Table 3)</h2>"
                 + _table3(groups, tables) + "</section>")
    nav = [("verdict", "Verdict"), ("moved", "Where the time moved"), ("guards", "Guards"), ("context", "Context"),
           ("runs", "Runs"), ("figures", "Figures"), ("table3", "Table 3")]
    return page(f"mobiperf compare: {result.base.label}", nav, "".join(parts), status)


def _figures_section(labels: list[str], tables: list[dict[str, pl.DataFrame]], problems: list[str]) -> str:
    parts = ["<section id='figures'><h2>Figures, overlaid</h2>"]
    with_io = {label: t["io_class"] for label, t in zip(labels, tables) if "io_class" in t}
    with_block = {label: t["block_io"] for label, t in zip(labels, tables) if "block_io" in t}
    figs = []
    if with_io:
        figs.append(figure_div(compare_figures.fig_size_overlay(with_io), "fig-size-overlay"))
    if with_block:
        figs.append(figure_div(compare_figures.fig_cdf_overlay(with_block, "d2c"), "fig-cdf-d2c"))
        figs.append(figure_div(compare_figures.fig_cdf_overlay(with_block, "q2c"), "fig-cdf-q2c"))
        figs.append(figure_div(compare_figures.fig_breakdown_overlay(with_block), "fig-breakdown-overlay"))
    with_waterfall = {label: t["waterfall"] for label, t in zip(labels, tables) if "waterfall" in t}
    if len(with_waterfall) == len(labels):
        figs.append(figure_div(compare_figures.fig_layers_overlay(with_waterfall), "fig-layers-overlay"))
    lba = figure_div(compare_figures.fig_lba_small_multiples(with_block), "fig-lba-runs") if with_block else ""
    for problem in problems:
        parts.append(missing("A table", problem))
    lacking = [label for label, t in zip(labels, tables) if "block_io" not in t or "io_class" not in t]
    if lacking:
        parts.append(missing(f"The figures of {', '.join(lacking)}",
                             "their run directories have no io_class/block_io result tables (run `mobiperf analyze`"
                             " on them)"))
    parts.append("<div class='grid'>" + "".join(figs) + "</div>" + lba + "</section>")
    return "".join(parts)


def write_compare_page(result: CompareResult, path: Path) -> Path:
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(render_compare(result))
    os.replace(tmp, path)
    return path
