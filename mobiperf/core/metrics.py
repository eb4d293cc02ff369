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
    return format_quantity(m["value"], m["unit"])


def format_quantity(value: float | None, unit: str) -> str:
    """A number with its unit for people; `-` when there is none (None or NaN)."""
    from mobiperf.core.units import format_duration_ns, format_size

    if value is None or value != value:
        return "-"
    if unit == "ns":
        return format_duration_ns(value)
    if unit == "B":
        return format_size(value)
    if unit == "B/s":
        return f"{format_size(value)}/s"
    if unit == "ratio":
        return f"{100 * value:.1f}%"
    if unit == "count":
        return f"{value:,.0f}" if value == int(value) else f"{value:,.1f}"
    if unit == "s":
        return f"{value:.3f} s"
    return f"{value:,.4g} {unit}".strip()
