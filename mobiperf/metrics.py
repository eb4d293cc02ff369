"""Metrics: named numbers with a unit and labels, the currency of run.json, `show` and `compare`.

A metric is {"name": "latency.d2c.p99", "labels": {"op": "write"}, "value": 812345.0, "unit": "ns"}. Each
repetition has its own list; the run's list is the median over repetitions of each (name, labels).
"""

from __future__ import annotations

import statistics
from typing import Any, Iterable

import polars as pl

Metric = dict[str, Any]


def metric(name: str, value: float, unit: str, **labels: str) -> Metric:
    return {"name": name, "labels": labels, "value": float(value), "unit": unit}


def metric_key(m: Metric) -> str:
    labels = ",".join(f"{k}={v}" for k, v in sorted(m.get("labels", {}).items()))
    return f"{m['name']}{{{labels}}}" if labels else m["name"]


def block_metrics(io_class: pl.DataFrame, latency: pl.DataFrame, rep: int) -> list[Metric]:
    """The block layer's headline numbers for one repetition."""
    out: list[Metric] = []
    io = io_class.filter(pl.col("rep") == rep)
    for op in ("read", "write"):
        rows = io.filter(pl.col("op") == op)
        n, nbytes = int(rows["count"].sum()), int(rows["bytes"].sum())
        out += [metric("block.requests", n, "count", op=op), metric("block.bytes", nbytes, "B", op=op)]
        if n:
            seq = int(rows.filter(pl.col("locality") == "sequential")["count"].sum())
            out.append(metric("block.sequential_share", seq / n, "ratio", op=op))
            for cls in rows["size_class"].unique().sort():
                c = int(rows.filter(pl.col("size_class") == cls)["count"].sum())
                out.append(metric("block.size_class_share", c / n, "ratio", op=op, size_class=cls))
    flushes = int(io.filter(pl.col("op") == "flush")["count"].sum())
    out.append(metric("block.requests", flushes, "count", op="flush"))
    lat = latency.filter(pl.col("rep") == rep)
    for row in lat.iter_rows(named=True):
        for stat in ("p50", "p99", "mean"):
            out.append(metric(f"latency.{row['phase']}.{stat}", row[f"{stat}_ns"], "ns", op=row["op"]))
    return out


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
