"""Metrics: named numbers with a unit and labels, the currency of run.json, `show` and `compare`.

A metric is {"name": "latency.d2c.p99", "labels": {"op": "write"}, "value": 812345.0, "unit": "ns"}. Each
repetition has its own list; the run's list is the median over repetitions of each (name, labels).
"""

from __future__ import annotations

import statistics
from typing import Any, Iterable

Metric = dict[str, Any]


def metric(name: str, value: float, unit: str, **labels: str) -> Metric:
    return {"name": name, "labels": labels, "value": float(value), "unit": unit}


def metric_key(m: Metric) -> str:
    labels = ",".join(f"{k}={v}" for k, v in sorted(m.get("labels", {}).items()))
    return f"{m['name']}{{{labels}}}" if labels else m["name"]


def median_metrics(per_rep: Iterable[list[Metric]]) -> list[Metric]:
    groups: dict[str, list[Metric]] = {}
    for metrics in per_rep:
        for m in metrics:
            groups.setdefault(metric_key(m), []).append(m)
    out = []
    for ms in groups.values():
        first = ms[0]
        out.append({**first, "value": statistics.median(m["value"] for m in ms), "n": len(ms)})
    return out


def format_value(m: Metric) -> str:
    """A metric's value for people: sizes in KiB/MiB, durations in us/ms, ratios in percent."""
    from mobiperf.units import format_duration_ns, format_size

    v, unit = m["value"], m["unit"]
    if unit == "ns":
        return format_duration_ns(v)
    if unit == "B":
        return format_size(v)
    if unit == "B/s":
        return f"{format_size(v)}/s"
    if unit == "ratio":
        return f"{100 * v:.1f} %"
    if unit == "count":
        return f"{v:,.0f}"
    if unit == "s":
        return f"{v:.3f} s"
    return f"{v:,.2f} {unit}"
