"""Headline metrics of a run, per repetition, from the result tables: what `show`, the report summary and
`compare` look at first."""

from __future__ import annotations

import polars as pl

from mobiperf.metrics import Metric, metric


def block_metrics(results: dict[str, pl.DataFrame], rep: int) -> list[Metric]:
    """The block layer's headline numbers for one repetition."""
    out: list[Metric] = []
    if "io_class" not in results or "latency_summary" not in results:
        return out
    io_class, latency = results["io_class"], results["latency_summary"]
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
