"""A comparison as text (for people, at most 120 columns), JSON (a top-level "verdict" object, then every row) and
CSV (one row per metric and NEW run).

The order is the order of importance: what makes the answer doubtful (warnings), the verdict sentence on the
primary metric, the guards, then the context metrics grouped by layer, which never gate.
"""

from __future__ import annotations

import csv
import io
import json
import math
from typing import Any

from mobiperf.core import stats
from mobiperf.compare.latency_shift import shifts_json, shifts_text
from mobiperf.compare.text_layout import WIDTH, elide, table, wrap
from mobiperf.compare.profile_format import background_json, movers_json, movers_text, profile_json
from mobiperf.compare.runs import CompareOptions, CompareResult, MetricRow, PairResult, RunGroup
from mobiperf.core.metrics import format_quantity
from mobiperf.compare.verdict import LAYER_ORDER



def verdict_label(c: stats.Comparison) -> str:
    return c.verdict.upper() if c.verdict in (stats.REGRESSION, stats.IMPROVEMENT) else c.verdict


def _describe_group(tag: str, g: RunGroup) -> str:
    status = g.status if g.status == "complete" else g.status.upper()
    runs = f"{len(g.runs)} runs, " if len(g.runs) > 1 else ""
    return f"{tag:<5} {g.label}  ({runs}{g.repetitions} repetitions, stack {g.stack}, {status})"


def method_description(options: CompareOptions) -> str:
    test = ("Mann-Whitney U, two-sided, exact (a permutation test with ties)" if options.method == "mwu"
            else f"bootstrap {100 * (1 - options.alpha):.0f}% CI of the ratio of medians")
    return (f"test: {test}; alpha {options.alpha:g}; minimum effect {100 * options.min_effect:g}%; "
            f"dispersion warning above robust CV {100 * options.max_dispersion:g}%")


def _change(c: stats.Comparison) -> str:
    return "-" if math.isnan(c.change) else f"{100 * c.change:+.1f}%"


def _p(c: stats.Comparison) -> str:
    return "-" if math.isnan(c.p_value) else f"{c.p_value:.2g}"


def row_verdict_text(c: stats.Comparison) -> str:
    text = verdict_label(c)
    if c.direction != stats.NEUTRAL and c.verdict in (stats.REGRESSION, stats.IMPROVEMENT):
        text += f" ({c.direction} is better)"
    elif c.verdict == stats.NOT_SIGNIFICANT and c.significant:
        text += " (below minimum effect)"
    return text


def _dispersed(c: stats.Comparison) -> list[str]:
    """The sides whose repetitions are dispersed (robust CV above --max-dispersion)."""
    return [w.split()[0] for w in c.warnings if " is dispersed " in w]


def _metric_rows(rows: list[MetricRow]) -> list[tuple[str, ...]]:
    out = [("metric", "base", "new", "change", "p", "n", "verdict")]
    for r in rows:
        c = r.result
        out.append((r.key, format_quantity(c.base_median, r.unit), format_quantity(c.new_median, r.unit),
                    _change(c), _p(c), f"{c.n_base}/{c.n_new}" + ("~" if _dispersed(c) else " "),
                    row_verdict_text(c)))
    return out


def format_text(result: CompareResult) -> str:
    out = [_describe_group("BASE", result.base)] + [_describe_group("NEW", p.new) for p in result.pairs]
    for p in result.pairs:  # what differs by design, at the top with what differs by accident (the warnings)
        studied = "; ".join(f"{s.name}: {s.base} -> {s.new}" for s in p.settings if s.kind == "stack")
        who = f" ({p.new.label})" if len(result.pairs) > 1 else ""
        if studied:
            out += wrap(f"changed under study{who}: {studied}")
    for head, details in result.warning_items:
        out += wrap(f"!! WARNING: {head}", "!!   ")
        out += [line for d in details for line in wrap(f"!!   {d}", "!!     ")]
    sentences = " ".join(p.verdict.sentence() for p in result.pairs if p.verdict)
    for n in result.notes:
        if n not in sentences:  # said once: in the verdict when it is the verdict's reason
            out += wrap(f"note: {n}", "   ")
    for p in result.pairs:
        out += [""] + _pair_text(result, p)
    out += [""] + wrap(method_description(result.options), "   ")
    if result.context_note:
        out += wrap(result.context_note, "   ")
    return "\n".join(out) + "\n"


def _pair_text(result: CompareResult, p: PairResult) -> list[str]:
    out = [f"== {result.base.label} -> {p.new.label}"]
    v = p.verdict
    if v is None:
        out.append("VERDICT: none (no primary metric in both BASE and NEW; give --primary METRIC)")
    else:
        out += wrap(f"VERDICT: {v.sentence()}")
        c = v.result
        detail = (f"   medians {format_quantity(c.base_median, v.unit)} -> {format_quantity(c.new_median, v.unit)}"
                  f"; {c.test or 'no test'}")
        out += wrap(detail + (f"; CI: {c.ci_note}" if c.ci_note else ""))
        out += [line for w in c.warnings if not w.startswith("too few repetitions")
                for line in wrap(f"   {w}")]
    if p.guards:
        checks = {g.key: g for g in (v.guards if v else [])}
        rows = [("guard", "allowed", "change", "p", "n", "status")]
        for r in p.guards:
            g = checks.get(r.key)
            rows.append((r.key, f"{100 * g.limit:g}%" if g else "-", _change(r.result), _p(r.result),
                         f"{r.result.n_base}/{r.result.n_new}", g.status if g else "-"))
        out += ["guards:"] + table(rows, "   ", left=(0, 5))
    if result.profile is not None:
        out += [""] + movers_text(result.profile, result.pairs.index(p))
    elif result.profile_note:
        out += wrap(f"where the time moved: no profile: {result.profile_note}")
    if result.latency is not None:
        out += [""] + shifts_text(result.latency, result.pairs.index(p)) + [""]
    if p.context:
        out.append("context (never gates), by layer:")
        ordered = sorted(p.context, key=lambda r: (LAYER_ORDER.index(r.layer), r.key))
        lines = table(_metric_rows(ordered), "   ", left=(0, 6))
        out.append(lines[0])
        layer = None
        for r, line in zip(ordered, lines[1:]):
            if r.layer != layer:
                layer = r.layer
                out.append(f"  [{layer}]")
            out.append(line)
        dispersed = {side: [r.key for r in p.context if side in _dispersed(r.result)] for side in ("BASE", "NEW")}
        if any(dispersed.values()):
            which = ", ".join(f"{side} in {len(keys)}" for side, keys in dispersed.items() if keys)
            out += wrap(f"   ~ dispersed repetitions (robust CV above {100 * result.options.max_dispersion:g}%: a "
                         f"change of the minimum effect can drown in their noise): {which} of {len(p.context)} "
                         "context metrics", "     ")
    for side, keys in (("BASE", p.only_in_base), ("NEW", p.only_in_new)):
        if keys:
            out.append(elide(f"   {len(keys)} metric(s) only in {side}, not compared: {', '.join(keys[:6])}"
                              + (" ..." if len(keys) > 6 else ""), WIDTH))
    out += wrap("summary: " + summary_line(p))
    return out


def summary_line(p: PairResult) -> str:
    head = "no verdict" if p.verdict is None else f"verdict {p.verdict.direction} ({p.verdict.metric})"
    failed = [r.key for r in p.regressions if r.role == "guard"]
    guards = (f"; guards {len(p.guards) - len(failed)} ok, {len(failed)} failed" if p.guards else "")
    plural = {stats.REGRESSION: "regressions", stats.IMPROVEMENT: "improvements"}
    parts = []
    for v in (stats.REGRESSION, stats.IMPROVEMENT, stats.CHANGED, stats.NOT_SIGNIFICANT, stats.UNDECIDED):
        n = sum(r.result.verdict == v for r in p.context)
        parts.append(f"{n} {plural.get(v, v) if n != 1 else v}")
    return f"{head}{guards}; context: {', '.join(parts)}"


def _num(v: Any) -> Any:
    return None if isinstance(v, float) and not math.isfinite(v) else v


def _row_json(p: PairResult, r: MetricRow) -> dict:
    return {"new": p.new.label, "metric": r.key, "name": r.name, "labels": r.labels, "unit": r.unit,
            "role": r.role, "layer": r.layer, **r.result.as_dict(),
            "values_a": [_num(v) for v in r.base_values], "values_b": [_num(v) for v in r.new_values]}


def to_json(result: CompareResult) -> dict:
    """The comparison as data: "verdict" (the first NEW's; each comparison has its own), then every row."""
    def group(g: RunGroup) -> dict:
        return {"label": g.label, "runs": [str(r.path) for r in g.runs], "repetitions": g.repetitions,
                "status": g.status, "stack": g.stack}

    comparisons = [{
        "new": group(p.new), "settings": [s.__dict__ for s in p.settings],
        "verdict": p.verdict.as_dict() if p.verdict else None,
        "rows": [_row_json(p, r) for r in p.rows],
        "only_in_base": p.only_in_base, "only_in_new": p.only_in_new,
        "movers": movers_json(result.profile, k) if result.profile is not None else [],
        "background": background_json(result.profile, k) if result.profile is not None else [],
        "latency_shifts": shifts_json(result.latency, k) if result.latency is not None else [],
    } for k, p in enumerate(result.pairs)]
    options = result.options.__dict__ | {"metric_patterns": list(result.options.metric_patterns),
                                         "guards": [str(g) for g in result.options.guards]}
    return {
        "verdict": comparisons[0]["verdict"] if comparisons else None,
        "rows": [row for c in comparisons for row in c["rows"] if row["role"] != "primary"],
        "base": group(result.base), "options": options,
        "warnings": result.warnings, "notes": result.notes + ([result.context_note] if result.context_note else []),
        "comparisons": comparisons,
        "has_regression": result.has_regression,
        "movers": comparisons[0]["movers"] if comparisons else [],
        "profile": profile_json(result.profile) if result.profile is not None else None,
        "profile_note": result.profile_note,
        "latency_shifts": comparisons[0]["latency_shifts"] if comparisons else [],
    }


CSV_COLUMNS = ("new", "metric", "role", "layer", "unit", "base_median", "new_median", "n_base", "n_new", "ratio",
               "change", "p_value", "ci_low", "ci_high", "direction", "verdict", "reason", "test", "ci_note",
               "warnings")


def to_csv(result: CompareResult) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for p in result.pairs:
        for r in p.rows:
            d = r.result.as_dict()
            w.writerow([p.new.label, r.key, r.role, r.layer, r.unit] + [_csv_num(d[c]) for c in CSV_COLUMNS[5:14]]
                       + [d["direction"], d["verdict"], d["reason"], d["test"], d["ci_note"],
                          " | ".join(d["warnings"])])
    return buf.getvalue()


def _csv_num(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.10g}"
    return str(v)


def dump_json(result: CompareResult) -> str:
    return json.dumps(to_json(result), indent=2, default=str) + "\n"
