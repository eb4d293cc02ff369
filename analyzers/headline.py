"""Headline metrics of a run, per repetition, from the result tables: what `show`, the report summary and
`compare` look at first."""

from __future__ import annotations

import polars as pl

from mobiperf.core.metrics import Metric, metric

SYNC_MODES = ("fsync", "fdatasync", "msync", "sync_file_range", "o_sync", "o_dsync", "o_direct")


def block_metrics(results: dict[str, pl.DataFrame], rep: int) -> list[Metric]:
    """The block layer's headline numbers for one repetition."""
    out: list[Metric] = []
    if "io_class" not in results or "latency_summary" not in results:
        return out
    io_class, latency = results["io_class"], results["latency_summary"]
    io = io_class.filter((pl.col("rep") == rep) & (pl.col("layer") == "block"))
    for op in ("read", "write"):
        rows = io.filter(pl.col("op") == op)
        n, nbytes = int(rows["count"].sum()), int(rows["bytes"].sum())
        out += [metric("block.requests", n, "count", op=op), metric("block.bytes", nbytes, "B", op=op)]
        if n:
            seq = int(rows.filter(pl.col("locality") == "sequential")["count"].sum())
            rnd = int(rows.filter(pl.col("locality") == "random")["count"].sum())
            if seq + rnd:  # the first request of a stream is neither (locality.py)
                out.append(metric("block.sequential_share", seq / (seq + rnd), "ratio", op=op))
            for cls in rows["size_class"].unique().sort():
                c = int(rows.filter(pl.col("size_class") == cls)["count"].sum())
                out.append(metric("block.size_class_share", c / n, "ratio", op=op, size_class=cls))
            data = rows.filter(pl.col("region") == "data")
            n_data = int(data["count"].sum())
            if n_data and "file_type" in data.columns:  # how far the block-level file types can be trusted
                known = int(data.filter(pl.col("file_type") != "unknown")["count"].sum())
                out.append(metric("block.file_attributed_share", known / n_data, "ratio", op=op))
            if op == "write" and nbytes:
                for region in ("journal", "metadata"):
                    b = int(rows.filter(pl.col("region") == region)["bytes"].sum())
                    out.append(metric("block.region_bytes_share", b / nbytes, "ratio", op=op, region=region))
    flushes = int(io.filter(pl.col("op") == "flush")["count"].sum())
    out.append(metric("block.requests", flushes, "count", op="flush"))
    lat = latency.filter(pl.col("rep") == rep)
    for row in lat.iter_rows(named=True):
        for stat in ("p50", "p99", "mean"):
            out.append(metric(f"latency.{row['phase']}.{stat}", row[f"{stat}_ns"], "ns", op=row["op"]))
    return out


def layer_metrics(results: dict[str, pl.DataFrame], rep: int) -> list[Metric]:
    """Syscall, file system and FUSE latencies, amplification and the SQLite per-transaction figures."""
    out: list[Metric] = []
    if "pairing_summary" in results:
        for row in results["pairing_summary"].filter(pl.col("rep") == rep).iter_rows(named=True):
            out.append(metric("block.pairing.matched_share", row["matched_share"], "ratio"))
    for name, prefix in (("syscall_latency", "latency.syscall"), ("fs_latency", "latency.fs"),
                         ("fuse_latency", "latency.fuse")):
        if name not in results:
            continue
        for row in results[name].filter(pl.col("rep") == rep).iter_rows(named=True):
            # the phase named after its layer is the layer's own time: latency.syscall.p50, not .syscall.syscall.
            name = prefix if row["phase"] == prefix.rsplit(".", 1)[1] else f"{prefix}.{row['phase']}"
            for stat in ("p50", "p99"):
                out.append(metric(f"{name}.{stat}", row[f"{stat}_ns"], "ns", op=row["op"]))
    if "layer_breakdown" in results:  # where a synchronous call's time goes (exclusive and inclusive shares)
        lb = results["layer_breakdown"].filter((pl.col("rep") == rep) & pl.col("sync_mode").is_in(SYNC_MODES)
                                               & (pl.col("total_ns") > 0))
        for row in lb.iter_rows(named=True):
            labels = {"syscall": row["syscall"], "layer": row["layer"]}
            out.append(metric("layer.share", row["share"], "ratio", **labels))
            if row["inclusive_ns"] is not None:
                out.append(metric("layer.inclusive_share", row["inclusive_ns"] / row["total_ns"], "ratio", **labels))
    if "amplification" in results:
        amp = results["amplification"].filter((pl.col("rep") == rep) & (pl.col("region") == "all")
                                              & (pl.col("layer") != "app") & pl.col("ratio_to_app").is_not_null())
        for row in amp.iter_rows(named=True):
            out.append(metric(f"amplification.{row['layer']}", row["ratio_to_app"], "ratio", op=row["op"]))
    if "sqlite_summary" in results:
        for row in results["sqlite_summary"].filter(pl.col("rep") == rep).iter_rows(named=True):
            for key, unit in (("fsync_per_txn", "count"), ("block_writes_per_txn", "count"),
                              ("block_kib_per_txn", "KiB"), ("journal_meta_share", "ratio")):
                if row[key] is not None:
                    out.append(metric(f"sqlite.{key}", row[key], unit, journal_mode=row["journal_mode"]))
    return out
