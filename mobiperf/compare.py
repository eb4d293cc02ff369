"""Before/after comparison of runs: BASE against one or more NEW runs, metric by metric, every repetition kept.

A side is a run directory (its repetitions are the sample) or a directory of run directories (a group: the
repetitions of all its runs are pooled). Each metric of run.json becomes one sample per side (one value per
repetition); `run.workload_time` (the workload's wall time, from each repetition record) is added to every run.
mobiperf.stats does the statistics; this module loads the runs, checks that they are comparable, and formats.

Comparable means the same workload on the same kind of target. Differing workload settings (the command and its
arguments) and target settings (device, kernel, partition size) are warned about loudly, naming each setting;
differing stack settings (filesystem, FUSE, scheduler) are the usual subject of a before/after study and are
listed as such. Failed repetitions are left out with a warning; a failed or incomplete run is labelled.
"""

from __future__ import annotations

import csv
import fnmatch
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from mobiperf import stats
from mobiperf.errors import UsageError
from mobiperf.metrics import format_quantity, metric_key
from mobiperf.units import format_size
from mobiperf.runstore import RunDir

WORKLOAD_TIME = "run.workload_time"
REGRESSION_EXIT_CODE = 3


@dataclass
class RunGroup:
    """One side of a comparison: one run, or the pooled repetitions of several runs."""

    label: str                              # as the user named it on the command line
    runs: list[RunDir]
    metas: list[dict[str, Any]]
    samples: dict[str, list[float]]         # metric key -> one value per usable repetition
    units: dict[str, str]
    names: dict[str, tuple[str, dict]]      # metric key -> (name, labels)
    warnings: list[str] = field(default_factory=list)

    @property
    def repetitions(self) -> int:
        return sum(len(m.get("repetitions", [])) for m in self.metas)

    @property
    def status(self) -> str:
        statuses = {m.get("status") for m in self.metas}
        for s in ("failed", "incomplete"):
            if s in statuses:
                return s
        return "complete"

    @property
    def stack(self) -> str:
        return ", ".join(sorted({str(m.get("stack")) for m in self.metas}))


@dataclass
class MetricRow:
    key: str
    name: str
    labels: dict
    unit: str
    result: stats.Comparison


@dataclass
class Setting:
    """A setting that differs between BASE and a NEW run."""

    kind: str      # workload | target | stack
    name: str
    base: str
    new: str


@dataclass
class PairResult:
    new: RunGroup
    rows: list[MetricRow]
    settings: list[Setting]
    only_in_base: list[str]
    only_in_new: list[str]

    @property
    def incomparable(self) -> list[Setting]:
        """The differing settings that make BASE and NEW different experiments."""
        return [s for s in self.settings if s.kind in ("workload", "target")]

    @property
    def regressions(self) -> list[MetricRow]:
        return [r for r in self.rows if r.result.verdict == stats.REGRESSION]


@dataclass
class CompareOptions:
    alpha: float = 0.05
    min_effect: float = 0.05
    method: str = "mwu"
    max_dispersion: float = 0.25
    metric_patterns: tuple[str, ...] = ()


@dataclass
class CompareResult:
    base: RunGroup
    pairs: list[PairResult]
    options: CompareOptions

    @property
    def has_regression(self) -> bool:
        return any(p.regressions for p in self.pairs)

    @property
    def warnings(self) -> list[str]:
        out = [f"BASE {self.base.label}: {w}" for w in self.base.warnings]
        for p in self.pairs:
            out += [f"NEW {p.new.label}: {w}" for w in p.new.warnings]
            if p.incomparable:
                out.append(f"BASE and NEW {p.new.label} ran DIFFERENT WORKLOADS OR TARGETS; differences may come "
                           "from that, not from the change under study: "
                           + "; ".join(f"{s.name}: {s.base} -> {s.new}" for s in p.incomparable))
        return out


# --- loading ---

def load_group(path: Path | str, label: str | None = None) -> RunGroup:
    """A run directory, or a directory whose subdirectories are run directories (pooled)."""
    path = Path(path)
    if (path / "run.json").exists():
        runs = [RunDir.open(path)]
    elif path.is_dir():
        runs = [RunDir.open(p) for p in sorted(path.iterdir()) if (p / "run.json").exists()]
        if not runs:
            raise UsageError(f"{path}: neither a run directory (no run.json) nor a directory of run directories")
    else:
        raise UsageError(f"{path}: no such run directory")
    metas = [r.read_meta() for r in runs]
    group = RunGroup(label or str(path), runs, metas, {}, {}, {})
    for run, meta in zip(runs, metas):
        _add_run_samples(group, run, meta)
    if len(runs) > 1:
        first = metas[0]
        for other, run in zip(metas[1:], runs[1:]):
            for s in differing_settings(first, other):
                if s.kind != "stack":
                    group.warnings.append(f"runs pooled in this group differ: {run.path.name}: {s.name}: "
                                          f"{s.base} -> {s.new}")
    return group


def _add_run_samples(group: RunGroup, run: RunDir, meta: dict) -> None:
    name = run.path.name
    if meta.get("status") == "incomplete":
        group.warnings.append(f"run {name} is INCOMPLETE (interrupted before all stages finished)")
    reps = meta.get("repetitions", [])
    usable = []
    for rec in reps:
        if rec.get("exit_code", 0) != 0:
            group.warnings.append(f"run {name}: repetition {rec.get('index')} failed (exit status "
                                  f"{rec.get('exit_code')}) and is left out")
        else:
            usable.append(rec)
    if reps and not usable:
        group.warnings.append(f"run {name}: every repetition failed; it contributes no values")
        return
    per_rep = [rec.get("metrics") for rec in usable]
    if not usable or any(m is None for m in per_rep):
        # An old or partial run.json: only the medians are known, i.e. one value per metric.
        group.warnings.append(f"run {name} has no per-repetition metrics; its medians count as one repetition")
        per_rep = [meta.get("metrics", [])]
    for rec, metrics in zip(usable or [{}], per_rep):
        metrics = list(metrics)
        if "workload_ns" in rec:
            metrics.append({"name": WORKLOAD_TIME, "labels": {}, "value": float(rec["workload_ns"]), "unit": "ns"})
        for m in metrics:
            key = metric_key(m)
            group.samples.setdefault(key, []).append(float(m["value"]))
            group.units[key] = m.get("unit", "")
            group.names[key] = (m["name"], dict(m.get("labels", {})))


# --- comparability ---

def _stack_facts(meta: dict) -> dict[str, str]:
    reps = meta.get("repetitions") or [{}]
    stack = reps[0].get("stack", {}) if isinstance(reps[0], dict) else {}
    return {"image size": format_size(stack["image_size_bytes"]) if "image_size_bytes" in stack else "",
            "mount options": stack.get("mount_options", "")}


def workload_settings(argv: Sequence[str]) -> dict[str, str]:
    """The settings a command line expresses: `key=value` tokens, `-x value` options, flags, positionals."""
    argv = list(argv)
    out: dict[str, str] = {}
    if not argv:
        return out
    out["program"] = Path(argv[0]).name
    i, pos = 1, 0
    while i < len(argv):
        tok = argv[i]
        if tok.startswith("-") and len(tok) > 1 and "=" not in tok:
            if i + 1 < len(argv) and not (argv[i + 1].startswith("-") and len(argv[i + 1]) > 1):
                out[tok] = argv[i + 1]
                i += 2
                continue
            out[tok] = "(set)"
        elif "=" in tok:
            k, _, v = tok.partition("=")
            out[k] = v
        else:
            out[f"argument {pos + 1}"] = tok
            pos += 1
        i += 1
    return out


def differing_settings(base: dict, new: dict) -> list[Setting]:
    """Every setting that differs between two run descriptions, named, with both values."""
    out: list[Setting] = []
    wb, wn = workload_settings(base.get("command", [])), workload_settings(new.get("command", []))
    for k in sorted(set(wb) | set(wn), key=lambda k: (k != "program", k)):
        if wb.get(k) != wn.get(k):
            out.append(Setting("workload", f"command {k}", wb.get(k, "(absent)"), wn.get(k, "(absent)")))
    tb, tn = base.get("target", {}), new.get("target", {})
    for k in ("target", "kernel", "model", "android_version"):
        if tb.get(k) != tn.get(k) and (tb.get(k) or tn.get(k)):
            out.append(Setting("target", k, str(tb.get(k)), str(tn.get(k))))
    sb, sn = _stack_facts(base), _stack_facts(new)
    if sb["image size"] != sn["image size"]:
        out.append(Setting("target", "partition size", sb["image size"] or "?", sn["image size"] or "?"))
    for k, a, b in (("stack", base.get("stack"), new.get("stack")),
                    ("scheduler", base.get("scheduler"), new.get("scheduler")),
                    ("mount options", sb["mount options"], sn["mount options"])):
        if (a or None) != (b or None):
            out.append(Setting("stack", k, str(a or "default"), str(b or "default")))
    return out


# --- comparing ---

def compare_groups(base: RunGroup, news: Sequence[RunGroup], options: CompareOptions | None = None) -> CompareResult:
    options = options or CompareOptions()
    pairs = []
    for new in news:
        keys = sorted(set(base.samples) & set(new.samples))
        if options.metric_patterns:
            keys = [k for k in keys if any(fnmatch.fnmatchcase(k, p) or fnmatch.fnmatchcase(base.names[k][0], p)
                                           for p in options.metric_patterns)]
        rows = []
        for key in keys:
            name, labels = base.names[key]
            result = stats.compare_samples(
                base.samples[key], new.samples[key], direction=stats.metric_direction(name), alpha=options.alpha,
                min_effect=options.min_effect, method=options.method, max_dispersion=options.max_dispersion)
            rows.append(MetricRow(key, name, labels, base.units.get(key, ""), result))
        settings = differing_settings(base.metas[0], new.metas[0])
        pairs.append(PairResult(new, rows, settings, sorted(set(base.samples) - set(new.samples)),
                                sorted(set(new.samples) - set(base.samples))))
    if options.metric_patterns and not any(p.rows for p in pairs):
        raise UsageError(f"no metric matches {', '.join(options.metric_patterns)} in both BASE and NEW "
                         "(see `mobiperf show RUN` for the metric names)")
    return CompareResult(base, pairs, options)


# --- formatting ---

def verdict_label(c: stats.Comparison) -> str:
    return c.verdict.upper() if c.verdict in (stats.REGRESSION, stats.IMPROVEMENT) else c.verdict


def _describe_group(tag: str, g: RunGroup) -> str:
    status = g.status if g.status == "complete" else g.status.upper()
    runs = f"{len(g.runs)} runs, " if len(g.runs) > 1 else ""
    return f"{tag:<5} {g.label}  ({runs}{g.repetitions} repetitions, stack {g.stack}, {status})"


def method_description(options: CompareOptions) -> str:
    test = ("Mann-Whitney U, two-sided" if options.method == "mwu"
            else f"bootstrap {100 * (1 - options.alpha):.0f}% CI of the ratio of medians")
    return (f"test: {test}; alpha {options.alpha:g}; minimum effect {100 * options.min_effect:g}%; "
            f"dispersion warning above robust CV {100 * options.max_dispersion:g}%")


def format_text(result: CompareResult) -> str:
    out = [_describe_group("BASE", result.base)]
    out += [_describe_group("NEW", p.new) for p in result.pairs]
    out.append(method_description(result.options))
    for w in [f"BASE {result.base.label}: {w}" for w in result.base.warnings]:
        out.append(f"WARNING: {w}")
    for p in result.pairs:
        out += [f"WARNING: NEW {p.new.label}: {w}" for w in p.new.warnings]
        if p.incomparable:
            out.append(f"!! WARNING: BASE and NEW {p.new.label} ran DIFFERENT WORKLOADS OR TARGETS; differences "
                       "may come from that, not from the change under study:")
            out += [f"!!   {s.name}: {s.base} -> {s.new}" for s in p.incomparable]
    for p in result.pairs:
        out.append("")
        out.append(f"== {result.base.label} -> {p.new.label}")
        for s in p.settings:
            if s.kind == "stack":
                out.append(f"   changed under study: {s.name}: {s.base} -> {s.new}")
        header = ("metric", "base", "new", "change", "p", "verdict")
        table = [header]
        notes: dict[str, list[str]] = {}
        for r in p.rows:
            c = r.result
            change = "-" if math.isnan(c.change) else f"{100 * c.change:+.1f}%"
            pval = "-" if math.isnan(c.p_value) else f"{c.p_value:.3g}"
            verdict = verdict_label(c)
            if c.direction != stats.NEUTRAL and c.verdict in (stats.REGRESSION, stats.IMPROVEMENT):
                verdict += f" ({c.direction} is better)"
            if c.verdict == stats.NOT_SIGNIFICANT and "minimum effect" in c.reason:
                verdict += " (below minimum effect)"
            table.append((r.key, f"{format_quantity(c.base_median, r.unit)} (n={c.n_base})",
                          f"{format_quantity(c.new_median, r.unit)} (n={c.n_new})", change, pval, verdict))
            for w in c.warnings:
                notes.setdefault(w, []).append(r.key)
        widths = [max(len(row[i]) for row in table) for i in range(len(header))]
        for row in table:
            out.append("  ".join(cell.ljust(widths[i]) if i in (0, 5) else cell.rjust(widths[i])
                                 for i, cell in enumerate(row)).rstrip())
        if notes:
            out.append("notes:")
            for w, keys in notes.items():
                which = "every metric" if len(keys) == len(p.rows) > 1 else ", ".join(keys)
                out.append(f"   {w}: {which}")
        for side, keys in (("BASE", p.only_in_base), ("NEW", p.only_in_new)):
            if keys:
                out.append(f"   {len(keys)} metric(s) only in {side}, not compared: {', '.join(keys[:6])}"
                           + (" ..." if len(keys) > 6 else ""))
        out.append("summary: " + summary_line(p))
    return "\n".join(out) + "\n"


def summary_line(p: PairResult) -> str:
    plural = {stats.REGRESSION: "regressions", stats.IMPROVEMENT: "improvements"}
    parts = []
    for v in (stats.REGRESSION, stats.IMPROVEMENT, stats.CHANGED, stats.NOT_SIGNIFICANT, stats.UNDECIDED):
        n = sum(r.result.verdict == v for r in p.rows)
        parts.append(f"{n} {plural.get(v, v) if n != 1 else v}")
    return ", ".join(parts)


def to_json(result: CompareResult) -> dict:
    def group(g: RunGroup) -> dict:
        return {"label": g.label, "runs": [str(r.path) for r in g.runs], "repetitions": g.repetitions,
                "status": g.status, "stack": g.stack}

    return {
        "base": group(result.base),
        "options": result.options.__dict__ | {"metric_patterns": list(result.options.metric_patterns)},
        "warnings": result.warnings,
        "comparisons": [{
            "new": group(p.new),
            "settings": [s.__dict__ for s in p.settings],
            "metrics": [{"metric": r.key, "name": r.name, "labels": r.labels, "unit": r.unit, **r.result.as_dict()}
                        for r in p.rows],
            "only_in_base": p.only_in_base, "only_in_new": p.only_in_new,
        } for p in result.pairs],
        "has_regression": result.has_regression,
    }


CSV_COLUMNS = ("new", "metric", "unit", "base_median", "new_median", "n_base", "n_new", "ratio", "change",
               "p_value", "ci_low", "ci_high", "direction", "verdict", "reason", "warnings")


def to_csv(result: CompareResult) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for p in result.pairs:
        for r in p.rows:
            d = r.result.as_dict()
            w.writerow([p.new.label, r.key, r.unit] + [_csv_num(d[c]) for c in CSV_COLUMNS[3:12]]
                       + [d["direction"], d["verdict"], d["reason"], " | ".join(d["warnings"])])
    return buf.getvalue()


def _csv_num(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.10g}"
    return str(v)


def dump_json(result: CompareResult) -> str:
    return json.dumps(to_json(result), indent=2, default=str) + "\n"
