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

from mobiperf.runstore import RunDir
from mobiperf.schema import BLOCK_RQ

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


def make_synthetic_run(path: Path, *, n_requests: int = 2000, repetitions: int = 3, seed: int = 0,
                       latency_scale: float = 1.0, status: str = "complete", stack: str = "ext4+fuse",
                       command: list[str] | None = None, analyze: bool = True) -> RunDir:
    """A run directory with a synthetic block trace per repetition, analysed by the real pipeline."""
    from mobiperf import pipeline

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
    run.update_meta(status=status)
    return run
