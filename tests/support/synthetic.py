"""Synthetic run directories, for the report's tests, its benchmark and demos without a traced device.

A synthetic run is made of a `block_rq` event table shaped like a phone's sdcard write workload (a sequential
512 KiB stream, random 4 KiB synchronous writes, metadata and journal writes near the start of the device,
flushes, a few reads) with plausible btt phase times; the real analyzers then derive every result table from it
through the pipeline, so the report sees exactly what a traced run would give. Deterministic for a given seed.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import polars as pl

from mobiperf.core.runstore import RunDir
from mobiperf.core.schema import BLOCK_RQ, IO_SPAN

SECTOR = 512


def synthetic_block_rq(n_requests: int, *, rep: int = 0, seed: int = 0, latency_scale: float = 1.0,
                       dev: tuple[int, int] = (7, 42)) -> pl.DataFrame:
    """`n_requests` block requests in the BLOCK_RQ schema, in queue order."""
    rng = np.random.default_rng(seed * 1000 + rep)
    n = n_requests
    kind = rng.choice(4, size=n, p=[0.55, 0.3, 0.1, 0.05])  # 0 seq 512k, 1 random 4k, 2 metadata/journal, 3 other
    size = np.where(kind == 0, 512 << 10, 4096).astype(np.int64)
    seq_idx = np.cumsum(kind == 0)
    data_start = 2 << 20  # sectors: 1 GiB in
    sector = np.where(kind == 0, data_start + (seq_idx * (512 << 10)) // SECTOR,
                      np.where(kind == 1, rng.integers(data_start, data_start + (4 << 20), n) & ~7,
                               np.where(kind == 2, rng.integers(0, 8192, n) & ~7, -1))).astype(np.int64)
    op = np.where(kind == 3, "flush", "write").astype(object)
    reads = rng.random(n) < 0.03
    op[reads & (kind != 3)] = "read"
    size[kind == 3] = 0
    gap = rng.exponential(200_000, n).astype(np.int64) + 20_000
    queue = np.cumsum(gap) + 1_000_000_000
    q2g = rng.integers(500, 3000, n)
    g2i = rng.integers(200, 1500, n)
    i2d = (rng.exponential(8_000, n) * latency_scale).astype(np.int64) + 100
    d2c = ((80_000 + size // 8) * rng.lognormal(0, 0.35, n) * latency_scale).astype(np.int64)
    getrq, insert = queue + q2g, queue + q2g + g2i
    issue = insert + i2d
    complete = issue + d2c
    is_meta = kind == 2
    is_sync = (kind == 1) | (kind == 2) | (kind == 3)
    rwbs = np.where(op == "read", "R", np.where(op == "flush", "FN", np.where(is_meta, "WSM",
                    np.where(is_sync, "WS", "W"))))
    return pl.DataFrame({
        "rep": np.full(n, rep, np.int32), "dev_major": np.full(n, dev[0], np.int32),
        "dev_minor": np.full(n, dev[1], np.int32), "sector": sector, "size_bytes": size, "rwbs": rwbs,
        "op": op.astype(str), "is_sync": is_sync, "is_meta": is_meta, "is_fua": np.zeros(n, bool),
        "is_preflush": kind == 3, "is_readahead": np.zeros(n, bool), "queue_ts": queue, "getrq_ts": getrq,
        "insert_ts": insert, "issue_ts": issue, "complete_ts": complete, "nr_bios": np.ones(n, np.int32),
        "pid": np.full(n, 4242, np.int32), "comm": np.full(n, "mobibench"), "error": np.zeros(n, np.int32),
        "is_complete_match": np.ones(n, bool),
    })


def synthetic_layer_tables(block_io: pl.DataFrame, *, seed: int = 0) -> dict[str, pl.DataFrame]:
    """The cross-layer result tables (system calls, waterfall, layer breakdown, amplification, FUSE latency,
    SQLite transactions) of a synthetic SQLite-on-FUSE workload over the same time span as `block_io`, in the
    result schemas. They are made up, not derived: they exist so every section of the report can be drawn and
    tested where no strace-traced run is at hand."""
    from mobiperf.analyzers.waterfall import break_down_layers
    from mobiperf.core.schema import RESULTS

    rng = np.random.default_rng(seed)
    out: dict[str, list[pl.DataFrame]] = {}
    for rep in block_io["rep"].unique().sort().to_list():
        bio = block_io.filter(pl.col("rep") == rep)
        t0, t1 = int(bio["ts"].min()), int(bio["ts"].max())
        n = 600
        ts = np.sort(rng.integers(t0, t1, n))
        call = rng.choice(["pwrite64", "fdatasync", "read"], size=n, p=[0.6, 0.25, 0.15])
        size = np.where(call == "fdatasync", 0, rng.choice([4096, 8192, 65536, 524288], size=n))
        dur = (rng.lognormal(10, 0.8, n) * np.where(call == "fdatasync", 20, 1)).astype(np.int64)
        mode = np.where(call == "fdatasync", "fdatasync", np.where(call == "read", "buffered", "o_sync"))
        op = np.where(call == "read", "read", np.where(call == "fdatasync", "sync", "write"))
        path = rng.choice(["/data/app/a.db", "/data/app/a.db-journal"], size=n)
        sc = pl.DataFrame({"rep": np.full(n, rep), "ts": ts, "dur": dur, "pid": np.full(n, 4242), "comm": "mobibench",
                           "syscall": call, "op": op, "fd": np.full(n, 3), "path": path,
                           "file_type": np.where(np.char.endswith(path.astype(str), "journal"), "db-journal", "db"),
                           "size_bytes": size, "offset_bytes": np.zeros(n, np.int64)}).with_columns(
            size_class=pl.lit("<=4k"), size_log2_bytes=pl.lit(4096), locality=pl.lit("random"),
            locality_tolerant=pl.lit("random"), locality_global=pl.lit("random"), sync_mode=pl.Series(mode))
        out.setdefault("syscall_class", []).append(sc)
        sync = sc.filter(pl.col("sync_mode") != "buffered").with_columns(
            call_id=pl.int_range(pl.len(), dtype=pl.Int64))
        wf, spans = _synthetic_nest(sync, rng)
        out.setdefault("waterfall", []).append(wf)
        out.setdefault("io_span", []).append(spans)
        out.setdefault("layer_breakdown", []).append(break_down_layers(RESULTS["waterfall"].validate(wf)))
        app_w = int(sc.filter(pl.col("op") == "write")["size_bytes"].sum())
        amp = [{"rep": rep, "layer": "app", "region": "all", "op": "write", "count": 360, "bytes": app_w}]
        amp.append({"rep": rep, "layer": "fuse", "region": "all", "op": "write", "count": 900, "bytes": app_w})
        for region, k in (("data", 1.0), ("journal", 0.9), ("metadata", 0.1), ("all", 2.0)):
            amp.append({"rep": rep, "layer": "block", "region": region, "op": "write", "count": 100,
                        "bytes": int(app_w * k)})
        out.setdefault("amplification", []).append(pl.DataFrame(amp).with_columns(
            ratio_to_app=pl.col("bytes") / app_w))
        fl = [{"rep": rep, "layer": "fuse", "phase": "request", "op": f"fuse_{o}", "count": c, "mean_ns": 5e4,
               "p50_ns": 4e4, "p90_ns": 9e4, "p99_ns": 2e5, "max_ns": 5e5}
              for o, c in (("write", 900), ("fsync", 150), ("getattr", 300), ("read", 90))]
        out.setdefault("fuse_latency", []).append(pl.DataFrame(fl))
        txn = pl.DataFrame({"rep": rep, "txn": np.arange(50), "start_ts": t0 + np.arange(50) * 1000,
                            "end_ts": t0 + np.arange(50) * 1000 + 900, "dur_ns": np.full(50, 900),
                            "fsync": 0, "fdatasync": 5, "write_calls": 6, "write_bytes": 24576, "block_writes": 7,
                            "block_write_bytes": 86016, "journal_bytes": 45056, "metadata_bytes": 0, "flushes": 6})
        out.setdefault("sqlite_txn", []).append(txn)
        out.setdefault("sqlite_summary", []).append(pl.DataFrame({
            "rep": [rep], "journal_mode": ["truncate"], "transactions": [50], "fsync_per_txn": [5.0],
            "block_writes_per_txn": [7.0], "block_kib_per_txn": [84.0], "fs_journal_kib_per_txn": [44.0],
            "journal_meta_share": [0.52]}))
    return {name: RESULTS[name].validate(pl.concat(frames, how="vertical_relaxed")) for name, frames in out.items()}


def _synthetic_nest(calls: pl.DataFrame, rng) -> tuple[pl.DataFrame, pl.DataFrame]:
    """A nest per call, consistent like the analyzers' (analyzers/io_span.py): FUSE request inside the call, the
    lower fs inside it, a journal commit and a block request (with its device time) inside that; and the
    waterfall rows the nest gives (exclusive times add up to the call)."""
    m = len(calls)
    dur = calls["dur"].to_numpy()
    fuse = (dur * rng.uniform(0.7, 0.9, m)).astype(np.int64)
    fs = (fuse * rng.uniform(0.6, 0.8, m)).astype(np.int64)
    block = (fs * rng.uniform(0.5, 0.6, m)).astype(np.int64)
    device = (block * rng.uniform(0.7, 0.9, m)).astype(np.int64)
    journal = (fs * 0.2).astype(np.int64)
    t0 = calls["ts"].to_numpy()
    starts = {"syscall": t0, "fuse": t0 + (dur - fuse) // 2}
    starts["fs"] = starts["fuse"] + (fuse - fs) // 2
    starts["journal"] = starts["fs"]
    starts["block"] = starts["fs"] + journal
    starts["device"] = starts["block"] + (block - device)
    lengths = {"syscall": dur, "fuse": fuse, "fs": fs, "journal": journal, "block": block, "device": device}
    names = {"syscall": calls["syscall"].to_numpy(), "fuse": np.full(m, "FUSE_FSYNC"), "fs": np.full(m, "fdatasync"),
             "journal": np.full(m, "jbd2_commit"), "block": np.full(m, "write"), "device": np.full(m, "write")}
    parent = {"fuse": "syscall", "fs": "fuse", "journal": "fs", "block": "fs", "device": "block"}
    layers = list(lengths)
    span_id = {layer: np.arange(m) * len(layers) + i for i, layer in enumerate(layers)}
    spans = pl.concat([pl.DataFrame({
        "rep": calls["rep"], "span_id": span_id[layer],
        "parent_id": pl.Series(span_id[parent[layer]] if layer in parent else [None] * m, dtype=pl.Int64),
        "call_id": calls["call_id"], "layer": layer, "name": names[layer], "ts": starts[layer],
        "end_ts": starts[layer] + lengths[layer], "tid": calls["pid"], "comm": calls["comm"],
        "size_bytes": np.full(m, 4096 if layer in ("block", "device") else 0), "is_primary": True})
        for layer in layers], how="diagonal_relaxed")
    spans = spans.with_columns([pl.lit(None, t).alias(c) for c, t in IO_SPAN.columns.items() if c not in spans.columns])
    self_ns = {"syscall": dur - fuse, "fuse": fuse - fs, "fs": fs - block - journal, "journal": journal,
               "block": block - device, "device": device}
    wf = calls.select("rep", "call_id", "ts", "pid", "comm", "syscall", "path", "file_type", "sync_mode",
                      "size_bytes", pl.col("dur").alias("dur_ns")).with_columns(
        fs_ns=pl.Series(fs), fuse_ns=pl.Series(fuse), block_requests=pl.lit(1), block_bytes=pl.lit(4096),
        data_bytes=pl.lit(4096), journal_bytes=pl.lit(0), metadata_bytes=pl.lit(0), flushes=pl.lit(0),
        block_ns=pl.Series(block), device_ns=pl.Series(device), other_ns=pl.Series(self_ns["syscall"]),
        journal_ns=pl.Series(journal), **{f"{k}_self_ns": pl.Series(v) for k, v in self_ns.items()},
        fuse_requests=pl.lit(1), fuse_data_bytes=pl.lit(0))
    return wf, spans


def make_synthetic_run(path: Path, *, n_requests: int = 2000, repetitions: int = 3, seed: int = 0,
                       latency_scale: float = 1.0, status: str = "complete", stack: str = "ext4+fuse",
                       command: list[str] | None = None, analyze: bool = True,
                       layer_tables: bool = False) -> RunDir:
    """A run directory with a synthetic block trace per repetition, analysed by the real pipeline; with
    `layer_tables`, also the made-up cross-layer tables of synthetic_layer_tables()."""
    from mobiperf.orchestration import pipeline

    command = command or ["mobibench", "-p", ".", "-f", "65536", "-r", "512", "-a", "0"]
    reps = []
    tables = []
    for rep in range(repetitions):
        df = synthetic_block_rq(n_requests, rep=rep, seed=seed, latency_scale=latency_scale)
        tables.append(df)
        span = int(df["complete_ts"].max() - df["queue_ts"].min())
        reps.append({"index": rep, "exit_code": 0, "workload_ns": span,
                     "stack": {"spec": stack, "device": "/dev/loop42", "filesystem": "ext4", "dev_major": 7,
                               "dev_minor": 42, "mount_options": "rw,noatime", "image_size_bytes": 1 << 30}})
    run = RunDir.create(Path(path), {
        "id": Path(path).name, "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "mobiperf": "synthetic", "host": "synthetic", "target": {"target": "local", "kernel": "synthetic"},
        "stack": stack, "scheduler": None, "command": command, "repetitions": reps, "warnings": []})
    run.write_table(BLOCK_RQ, pl.concat(tables))
    if analyze:
        pipeline.analyze(run)
        if layer_tables:
            from mobiperf.core.schema import RESULTS

            for name, df in synthetic_layer_tables(run.read_table("block_io"), seed=seed).items():
                run.write_table(RESULTS[name], df)
    run.update_meta(status=status)
    return run
