"""Synthetic io_span nests whose every node's time is known, for the differential profile's tests and benchmark.

A workload is a list of CallKind: `count` calls of one system call per repetition, each a chain of spans, one per
layer it names (syscall ⊃ fuse ⊃ fs ⊃ journal ⊃ block ⊃ device, any subset, outermost first), with the self time
each layer gets in every call. A child span starts half its parent's self time after the parent and the parent ends
half its self time after the child, so the self time of each layer in each call is exactly the figure given
(analyzers/time_profile.py's definition). With a fan-out, a call sends k spans of one layer one after the other (a
write split into k FUSE requests), each with the layers below it. Repetitions differ by noise: every self time of a
repetition is scaled by 1 + noise x a standard normal draw (one per repetition, kind and layer, seeded), so the
expected difference of a node between two runs is what their CallKinds differ by.

make_profile_run writes such a run as a run directory (run.json, results/io_span.parquet and time_profile.parquet),
as `mobiperf run` would have left it after analysis, minus every other table.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from mobiperf.analyzers.io_span import LAYERS
from mobiperf.core.schema import IO_SPAN

GAP_NS = 1_000    # between two calls of the workload


@dataclass(frozen=True)
class CallKind:
    syscall: str
    count: int
    self_ns: dict[str, int]                      # layer -> self time of each call, ns (the chain's layers)
    names: dict[str, str] = field(default_factory=dict)   # layer -> span name (default: the syscall's name)
    comm: dict[str, tuple[str, int]] = field(default_factory=dict)  # layer -> (comm, tid); default app thread
    size_bytes: int = 4096
    path: str = "test.dat"
    fanout: tuple[str, int] | None = None  # (layer, k): each call sends k spans of that layer one after the other,
    #                                        each with the layers below; self_ns there is per span, not per call


APP = ("mobibench", 1000)


def synthetic_io_span(kinds: list[CallKind], *, reps: int, seed: int = 0, noise: float = 0.01) -> pl.DataFrame:
    """io_span of `reps` repetitions of the workload (module docstring)."""
    rng = np.random.default_rng(seed)
    frames, first_span = [], 0
    for rep in range(reps):
        scale = {(k, layer): max(0.0, 1 + noise * rng.standard_normal()) for k in range(len(kinds))
                 for layer in kinds[k].self_ns}
        frames.append(_repetition(kinds, rep, scale, first_span))
        first_span += frames[-1].height   # span ids are unique across the table, as io_span's
    return IO_SPAN.validate(pl.concat(frames)).sort("rep", "span_id")


def _repetition(kinds: list[CallKind], rep: int, scale: dict, first_span: int) -> pl.DataFrame:
    cols: dict[str, list] = {c: [] for c in ("call_id", "span_id", "parent_id", "ts", "end_ts", "layer", "name",
                                             "tid", "comm", "size_bytes", "path")}
    t0, next_call, next_span = 1_000_000_000, 0, first_span
    for k, kind in enumerate(kinds):
        layers = [layer for layer in LAYERS if layer in kind.self_ns]
        selfs = [int(round(kind.self_ns[layer] * scale[(k, layer)])) for layer in layers]
        split = layers.index(kind.fanout[0]) if kind.fanout else len(layers)
        times = kind.fanout[1] if kind.fanout else 1
        inner = np.cumsum(selfs[::-1])[::-1].astype(np.int64)  # a span's duration: its self time and all below
        if split < len(layers):  # the layers above the fan-out hold `times` of its spans each
            inner[:split] = np.cumsum(selfs[:split][::-1])[::-1] + times * inner[split]
        n = kind.count
        start = t0 + np.arange(n, dtype=np.int64) * (int(inner[0]) + GAP_NS)
        t0 = int(start[-1] + inner[0] + GAP_NS) if n else t0
        call_ids = np.arange(next_call, next_call + n, dtype=np.int64)
        next_call += n
        parent = np.full(n, -1, np.int64)
        for depth, layer in enumerate(layers):
            if depth == split:  # each parent's `times` spans, one after the other
                step = np.tile(np.arange(times, dtype=np.int64) * inner[depth], len(start))
                start, call_ids, parent = np.repeat(start, times) + step, np.repeat(call_ids, times), \
                    np.repeat(parent, times)
            m = len(start)
            span_ids = np.arange(next_span, next_span + m, dtype=np.int64)
            next_span += m
            comm, tid = kind.comm.get(layer, APP)
            values = {"call_id": call_ids, "span_id": span_ids, "parent_id": parent, "ts": start,
                      "end_ts": start + inner[depth], "tid": np.full(m, tid, np.int32),
                      "size_bytes": np.full(m, kind.size_bytes if layer != "journal" else 0, np.int64),
                      "layer": pl.repeat(layer, m, eager=True),
                      "name": pl.repeat(kind.names.get(layer, kind.syscall), m, eager=True),
                      "comm": pl.repeat(comm, m, eager=True),
                      "path": pl.repeat(kind.path if layer in ("syscall", "block") else "", m, eager=True)}
            for c, v in values.items():
                cols[c].append(v)
            start, parent = start + selfs[depth] // 2, span_ids
    df = pl.DataFrame({c: pl.concat(v) if isinstance(v[0], pl.Series) else np.concatenate(v)
                       for c, v in cols.items() if v})
    none = {"op": pl.Utf8, "region": pl.Utf8, "dev_major": pl.Int32, "dev_minor": pl.Int32, "sector": pl.Int64,
            "fuse_unique": pl.Int64, "sync_mode": pl.Utf8, "file_type": pl.Utf8, "source_row": pl.Int64}
    return df.with_columns(
        rep=pl.lit(rep, pl.Int32), is_primary=pl.lit(True),
        parent_id=pl.when(pl.col("parent_id") >= 0).then(pl.col("parent_id")),
        **{c: pl.lit(None, t) for c, t in none.items()})


def make_profile_run(path: Path, kinds: list[CallKind], *, reps: int, seed: int = 0, noise: float = 0.01,
                     stack: str = "ext4+fuse", write_time_profile: bool = True,
                     background: list[tuple] = ()) -> Path:
    """A run directory of the workload (module docstring): run.json with `reps` successful repetitions (their
    workload time: the calls' total), results/io_span.parquet and its results/time_profile.parquet (unless asked not to);
    results/io_background.parquet when `background` gives its rows (scope, comm, layer, name, count, bytes,
    time_ns), the same in every repetition."""
    path = Path(path)
    (path / "results").mkdir(parents=True)
    (path / "raw").mkdir()
    (path / "tables").mkdir()
    spans = synthetic_io_span(kinds, reps=reps, seed=seed, noise=noise)
    spans.write_parquet(path / "results" / "io_span.parquet")
    if write_time_profile:
        from mobiperf.analyzers.time_profile import profile_span_time

        profile_span_time(spans).write_parquet(path / "results" / "time_profile.parquet")
    if background:
        from mobiperf.core.schema import IO_BACKGROUND

        rows = [(rep, scope, 3000 + j, comm, layer, name, count, size, ns) for rep in range(reps)
                for j, (scope, comm, layer, name, count, size, ns) in enumerate(background)]
        IO_BACKGROUND.validate(pl.DataFrame(rows, schema=list(IO_BACKGROUND.columns), orient="row")).write_parquet(
            path / "results" / "io_background.parquet")
    calls = spans.filter(pl.col("layer") == "syscall").group_by("rep").agg((pl.col("end_ts") - pl.col("ts")).sum())
    total = dict(zip(calls["rep"].to_list(), calls["end_ts"].to_list()))
    meta = {"format": "mobiperf-run", "version": 1, "status": "complete", "id": path.name,
            "created": "2026-12-01T09:00:00+00:00", "mobiperf": "0.1.0", "host": f"synthetic-{seed}",
            "target": {"target": "local", "kernel": "6.18.0"}, "stack": stack, "scheduler": None,
            "command": ["mobibench", "-p", ".", "-f", "4096", "-r", "4"],
            "repetitions": [{"index": r, "exit_code": 0, "workload_ns": int(total.get(r, 0)),
                             "stack": {"spec": stack, "workdir": "/var/tmp/mobiperf/stack-1-ab/sdcard"},
                             "metrics": []} for r in range(reps)],
            "warnings": []}
    (path / "run.json").write_text(json.dumps(meta, indent=1) + "\n")
    return path
