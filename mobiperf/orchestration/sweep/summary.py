"""A sweep's results: per cell the values of each metric over its repetitions, their median and a bootstrap
confidence interval of it (mobiperf.core.stats), its change against the baseline cell with compare's test and
verdict (sweep.versus), the cell's status over its units, and the matrix that shows them (text rows, or the
heatmap page of mobiperf.reports.study_page). Metric names are `mobiperf run`/`compare`'s:
workload.* is what the workload reports itself, run.* what mobiperf measured around it; a sweep written before the
rename is read with its names (and units) translated.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from mobiperf.core.run_facts import RENAMED_METRICS
from mobiperf.core.stats import bootstrap_median_ci
from mobiperf.orchestration.sweep.params import DEFAULTS

DEFAULT_METRIC = "run.throughput"
# Sweeps written before the rename are read with these names (and units) translated.
LEGACY_METRICS = {"e2e.throughput": ("run.throughput", 1.0), "e2e.tps": ("run.tps", 1.0),
                  "run.elapsed": ("run.workload_time", 1e9)}


def canonical_metric(name: str) -> str:
    """A metric key in today's vocabulary (e2e.throughput -> run.throughput; a run's renamed metrics,
    latency.syscall.syscall.p50{op=write} -> latency.syscall.p50{op=write})."""
    return _legacy(name)[0]


def _legacy(key: str) -> tuple[str, float]:
    """(today's key, the factor to today's unit) of a metric key an older sweep stored."""
    if key in LEGACY_METRICS:
        return LEGACY_METRICS[key]
    name, brace, labels = key.partition("{")
    return RENAMED_METRICS.get(name, name) + brace + labels, 1.0


@dataclass
class CellSummary:
    """One cell's figures over its repetitions."""

    cell: str
    params: dict[str, str]
    status: str                     # done (every rep), partial, failed, skipped, pending
    reason: str | None
    values: dict[str, list[float]]  # metric -> one value per successful repetition

    def stat(self, metric: str, *, confidence: float = 0.95, seed: int = 0) -> dict[str, float]:
        """n, median, and a percentile-bootstrap confidence interval of the median (nan below 2 values)."""
        values = self.values.get(canonical_metric(metric), [])
        return summarize_values(values, confidence=confidence, seed=seed)


def summarize_values(values: list[float], *, confidence: float = 0.95, seed: int = 0) -> dict[str, float]:
    """n, median, min, max and the bootstrap interval of the median (stats.bootstrap_median_ci) of one cell's
    values; nan where there are no values (and for the interval, below 2)."""
    n = len(values)
    if n == 0:
        return {"n": 0, "median": math.nan, "ci_low": math.nan, "ci_high": math.nan, "min": math.nan,
                "max": math.nan}
    import numpy as np

    a = np.asarray(values, dtype=float)
    ci = bootstrap_median_ci(a, confidence=confidence, seed=seed)
    return {"n": n, "median": float(np.median(a)), "ci_low": ci.low, "ci_high": ci.high, "min": float(a.min()),
            "max": float(a.max())}


def summarize(data: dict) -> list[CellSummary]:
    """Per cell: the metric values of its done units, and its overall status."""
    out = []
    for cell in data["cells"]:
        units = [u for u in data["units"] if u["cell"] == cell["id"]]
        values: dict[str, list[float]] = {}
        for u in sorted(units, key=lambda u: u["rep"]):
            if u["status"] == "done":
                for k, v in u["metrics"].items():
                    name, scale = _legacy(k)
                    values.setdefault(name, []).append(v * scale)
        if cell["status"] == "skipped":
            status, reason = "skipped", cell.get("reason")
        else:
            statuses = {u["status"] for u in units}
            errors = [u["error"] for u in units if u["status"] == "failed" and u.get("error")]
            reason = errors[0] if errors else None
            if statuses == {"done"}:
                status = "done"
            elif statuses <= {"failed"}:
                status = "failed"
            elif "done" in statuses:
                status = "partial"
            else:
                status = "pending" if statuses & {"pending", "running"} else "failed"
        out.append(CellSummary(cell["id"], cell["params"], status, reason, values))
    return out


def varying_params(data: dict) -> list[str]:
    """The parameters whose value differs between cells, in first-seen order."""
    names: list[str] = []
    for c in data["cells"]:
        for k in c["params"]:
            if k not in names:
                names.append(k)
    return [n for n in names if len({c["params"].get(n, DEFAULTS.get(n, "")) for c in data["cells"]}) > 1]


def status_counts(data: dict) -> dict[str, int]:
    counts: dict[str, int] = {}
    for u in data["units"]:
        counts[u["status"]] = counts.get(u["status"], 0) + 1
    skipped = sum(1 for c in data["cells"] if c["status"] == "skipped")
    if skipped:
        counts["skipped cells"] = skipped
    return counts


def cell_comparisons(data: dict, metric: str, baseline: str | None = None) -> tuple[str, dict]:
    """(the baseline cell's id, {cell: stats.Comparison with it}) for `metric` (sweep.versus)."""
    from mobiperf.orchestration.sweep.versus import baseline_cell, compare_to_baseline

    base = baseline_cell(data, baseline)
    values = {s.cell: s.values.get(canonical_metric(metric), []) for s in summarize(data)}
    return base, compare_to_baseline(values, base, metric)


def format_matrix_text(data: dict, metric: str | None = None, baseline: str | None = None) -> str:
    """The matrix as a text table: one row per cell, the varying parameters, n, median and CI of `metric`, and
    the change against the baseline cell with compare's test and verdict."""
    from mobiperf.core.metrics import format_value
    from mobiperf.orchestration.sweep.versus import multiple_comparisons_note, verdict_text

    metric = canonical_metric(metric or data.get("metric", DEFAULT_METRIC))
    unit = metric_unit(metric, data)
    names = varying_params(data) or list(data["cells"][0]["params"])[:1]
    base, versus = cell_comparisons(data, metric, baseline)
    rows = [[*names, "status", "n", f"median {metric}", "95% CI", f"vs {base}"]]
    for s in summarize(data):
        st = s.stat(metric)
        fmt = (lambda v: "-" if math.isnan(v) else format_value({"value": v, "unit": unit}))
        ci = "-" if math.isnan(st["ci_low"]) else f"[{fmt(st['ci_low'])}, {fmt(st['ci_high'])}]"
        note = s.status if s.status in ("done",) else f"{s.status}: {(s.reason or '')[:60]}"
        rows.append([*(s.params.get(n, DEFAULTS.get(n, "")) for n in names), note, str(st["n"]),
                     fmt(st["median"]), ci, verdict_text(versus.get(s.cell)) if st["n"] else "-"])
    import textwrap

    note = textwrap.fill(multiple_comparisons_note(list(versus.values())), 120)
    return format_rows(rows) + f"{note}\n"


def sweep_matrix(data: dict, metric: str | None = None, baseline: str | None = None):
    """The cells of a sweep with the statistics of `metric` (default: the sweep's), for the matrix page."""
    import polars as pl

    from mobiperf.orchestration.sweep.versus import multiple_comparisons_note, verdict_text
    from mobiperf.reports.study_page import Matrix

    metric = canonical_metric(metric or data.get("metric") or DEFAULT_METRIC)
    names = list(dict.fromkeys(k for c in data["cells"] for k in c["params"]))
    base, versus = cell_comparisons(data, metric, baseline)
    rows = []
    for s in summarize(data):
        st = s.stat(metric)
        c = versus.get(s.cell)
        rows.append({"cell": s.cell, **{n: s.params.get(n, DEFAULTS.get(n, "")) for n in names},
                     "status": s.status, "reason": s.reason, **{k: st[k] for k in ("n", "median", "ci_low",
                                                                                    "ci_high", "min", "max")},
                     "versus": verdict_text(c) if st["n"] else "-",
                     "verdict": c.verdict if c else ("baseline" if s.cell == base else "-"),
                     "p_value": math.nan if c is None else c.p_value})
    schema = {"cell": pl.Utf8, **{n: pl.Utf8 for n in names}, "status": pl.Utf8, "reason": pl.Utf8,
              "n": pl.Int64, **{k: pl.Float64 for k in ("median", "ci_low", "ci_high", "min", "max")},
              "versus": pl.Utf8, "verdict": pl.Utf8, "p_value": pl.Float64}
    varying = varying_params(data)
    counts = ", ".join(f"{v} {k}" for k, v in status_counts(data).items())
    intro = (f"{len(data['cells'])} cells × {data['repeat']} repetitions, seeded order (seed {data['seed']}); "
             f"units: {counts}. Each cell against {base}: {multiple_comparisons_note(list(versus.values()))}.")
    return Matrix(pl.DataFrame(rows, schema=schema), metric, metric_unit(metric, data), varying,
                  varying or sorted(names), intro)


def write_matrix_page(data: dict, path: Path, *, metric: str | None = None, baseline: str | None = None) -> Path:
    """SWEEP/matrix.html: the heatmap and the table of `metric` (default: the sweep's) over the cells."""
    from mobiperf.reports.study_page import write_matrix_page as write_page

    return write_page(sweep_matrix(data, metric, baseline), path, name=data.get("name", ""))


def format_rows(rows: list[list[str]]) -> str:
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(str(v).ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines) + "\n"


_UNITS = (("*throughput*", "B/s"), ("*.tps", "tx/s"), ("*.iops", "IOPS"), ("run.workload_time", "ns"),
          ("*elapsed*", "s"),
          ("latency.*", "ns"), ("*.bytes", "B"))


def metric_unit(metric: str, data: dict | None = None) -> str:
    """The unit of a sweep metric: as its units recorded it (the metric records of each unit's run), else, for a
    sweep written before units were recorded, by its name."""
    import fnmatch

    for u in (data or {}).get("units", []):
        if metric in (u.get("units") or {}):
            return u["units"][metric]
    for pattern, unit in _UNITS:
        if fnmatch.fnmatchcase(metric, pattern):
            return unit
    return "count"
