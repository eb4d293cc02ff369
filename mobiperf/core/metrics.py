"""Metrics: named numbers with a unit and labels, the currency of run.json, `show` and `compare`.

A metric is a typed record (mobiperf.core.run_facts.Metric): name "latency.d2c.p99", labels {"op": "write"},
value 812345.0, unit "ns"; run.json writes it as that dict. Each repetition has its own list; the run's list is the
median over repetitions of each (name, labels), with n, the number of repetitions it is the median of.
"""

from __future__ import annotations

import statistics
from typing import Any, Iterable, Mapping

from mobiperf.core.run_facts import Metric


def metric(name: str, value: float, unit: str, **labels: str) -> Metric:
    return Metric(name=name, labels=labels, value=float(value), unit=unit)


def as_metric(m: Metric | Mapping[str, Any]) -> Metric:
    """A metric record from a record or the dict run.json (or older code) holds."""
    return m if isinstance(m, Metric) else Metric.from_dict(dict(m))


def metric_key(m: Metric | Mapping[str, Any]) -> str:
    return as_metric(m).key


def median_metrics(per_rep: Iterable[list[Metric]]) -> list[Metric]:
    groups: dict[str, list[Metric]] = {}
    for metrics in per_rep:
        for m in map(as_metric, metrics):
            groups.setdefault(m.key, []).append(m)
    out = []
    for ms in groups.values():
        first = ms[0]
        values = [m.value for m in ms if m.value is not None]
        out.append(
            Metric(
                name=first.name,
                labels=dict(first.labels),
                value=statistics.median(values) if values else None,
                unit=first.unit,
                n=len(ms),
            )
        )
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
