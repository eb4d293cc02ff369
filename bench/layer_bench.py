"""The layer model's speed: io_span (every call's nest: syscall ⊃ FUSE ⊃ lower fs ⊃ sync_file ⊃ journal ⊃ block ⊃
device) and what is built on it (waterfall, layer breakdown, time profile) on a recorded run scaled up to millions
of events (issue 28's target: >= 2 M events/s at 5 M events, peak memory <= 2x the tables).

    python bench/layer_bench.py [--events 5000000] [--repeat 3]

The run is real: tests/fixtures/layers/bfuse-fsync (100 fsync'ed 4 KiB writes through bFUSE over ext4, captured on
this machine kind with the syscalls and ftrace sources: tests/fixtures/README.md), parsed and analysed once, then
its tables (syscall_io, fuse_req, fsync_event, jbd2_commit, block_io, task_role) copied back to back, each copy's
times moved past the previous copy's end and its FUSE request ids, journal transactions and sectors moved past the
previous ones', until they stand for the asked number of trace events. An event is what the kernel traced: two
per system call (enter, exit), two per FUSE request (send, end), one per sync_file enter or exit and per jbd2
phase, three per block request (queue, issue, complete).

Each repetition runs in a child process (a fresh heap: its peak RSS is the step's own) that loads the scaled
tables, then times, with getrusage CPU time and wall time:
  io_span       nest_calls (analyzers/io_span.py) on the tables, as `mobiperf analyze` calls it
  + waterfall   build_waterfall and break_down_layers on that io_span
  + profile     time_profile's profile_span_time on that io_span
The peak RSS of the child less its RSS after loading the tables is the memory the analysis took, against the
tables' own size in memory (polars' estimated_size). CPU time is the figure to compare: this VM's wall time moves
with what its host does.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "tests" / "fixtures" / "layers" / "bfuse-fsync"
TABLES = ("syscall_io", "fuse_req", "fsync_event", "jbd2_commit", "task_role")
EVENTS_PER_ROW = {"syscall_io": 2, "fuse_req": 2, "fsync_event": 1, "jbd2_commit": 1, "block_io": 3}
# per table, the columns that are times (moved by a copy's offset) and ids (moved past the previous copy's)
TIMES = {"syscall_io": ("ts",), "fuse_req": ("send_ts", "end_ts"), "fsync_event": ("ts",),
         "jbd2_commit": ("ts",), "block_io": ("ts", "queue_ts", "issue_ts", "complete_ts")}
IDS = {"fuse_req": ("unique",), "jbd2_commit": ("tid",), "block_io": ("sector",)}


def analysed_fixture(work: Path) -> dict[str, pl.DataFrame]:
    """The fixture's tables after `mobiperf analyze` (block_io is an analysis result)."""
    from mobiperf.core.runstore import RunDir
    from mobiperf.orchestration import pipeline

    run = work / "fixture"
    shutil.copytree(FIXTURE, run)
    for sub in ("tables", "results"):
        (run / sub).mkdir(exist_ok=True)
    rd = RunDir.open(run)
    pipeline.analyze(rd, reparse=True)
    tables = {name: rd.read_table(name) for name in TABLES}
    tables["block_io"] = pl.read_parquet(run / "results" / "block_io.parquet")
    return tables


def events_in(tables: dict[str, pl.DataFrame]) -> int:
    return sum(len(tables[name]) * per for name, per in EVENTS_PER_ROW.items())


def scaled(tables: dict[str, pl.DataFrame], copies: int) -> dict[str, pl.DataFrame]:
    """The tables copied back to back `copies` times (times, request ids, transactions and sectors moved)."""
    ends = [tables[n][c].max() for n, cols in TIMES.items() for c in cols if tables[n][c].max() is not None]
    starts = [tables[n][c].min() for n, cols in TIMES.items() for c in cols if tables[n][c].min() is not None]
    period = max(ends) - min(starts) + 1_000_000   # a millisecond of quiet between copies
    out = {}
    for name, df in tables.items():
        if name not in TIMES:
            out[name] = df
            continue
        span = {c: int(df[c].max() - df[c].min() + 1) for c in IDS.get(name, ()) if len(df)}
        k = pl.DataFrame({"_copy": range(copies)}, schema={"_copy": pl.Int64})
        big = k.join(df, how="cross")
        big = big.with_columns([pl.col(c) + pl.col("_copy") * period for c in TIMES[name]]
                               + [pl.col(c) + pl.col("_copy") * span[c] for c in span])
        out[name] = big.drop("_copy").cast(dict(df.schema))
    return out


def child(data: Path) -> None:
    """One repetition: load, then time each step; prints one JSON line."""
    from mobiperf.analyzers.io_span import nest_calls
    from mobiperf.analyzers.time_profile import profile_span_time
    from mobiperf.analyzers.waterfall import break_down_layers, build_waterfall

    tables = {p.stem: pl.read_parquet(p) for p in sorted(data.glob("*.parquet"))}
    base_rss = _rss_mib()
    out = {"tables_mib": sum(df.estimated_size() for df in tables.values()) / 2**20, "base_rss_mib": base_rss}
    cpu, wall = _clocks()
    spans = nest_calls(tables["syscall_io"], task_role=tables["task_role"], fuse_req=tables["fuse_req"],
                       fsync_event=tables["fsync_event"], jbd2_commit=tables["jbd2_commit"],
                       block_io=tables["block_io"])
    out["io_span"] = _since(cpu, wall)
    cpu, wall = _clocks()
    break_down_layers(build_waterfall(spans))
    out["waterfall"] = _since(cpu, wall)
    cpu, wall = _clocks()
    profile_span_time(spans)
    out["profile"] = _since(cpu, wall)
    out["spans"] = len(spans)
    out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out))


def _clocks() -> tuple[float, float]:
    return time.process_time(), time.perf_counter()


def _since(cpu: float, wall: float) -> dict[str, float]:
    return {"cpu_s": time.process_time() - cpu, "wall_s": time.perf_counter() - wall}


def _rss_mib() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=5_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.child)
    with tempfile.TemporaryDirectory(prefix="layer-bench-") as tmp:
        work = Path(tmp)
        base = analysed_fixture(work)
        copies = max(1, round(args.events / events_in(base)))
        tables = scaled(base, copies)
        data = work / "scaled"
        data.mkdir()
        for name, df in tables.items():
            df.write_parquet(data / f"{name}.parquet")
        events = events_in(tables)
        print(f"{FIXTURE.relative_to(REPO)} x {copies:,}: {events:,} events ({len(tables['syscall_io']):,} calls, "
              f"{len(tables['fuse_req']):,} FUSE requests, {len(tables['block_io']):,} block requests)")
        runs = []
        for i in range(args.repeat):
            done = subprocess.run([sys.executable, __file__, "--child", str(data)], capture_output=True, text=True,
                                  timeout=3600)
            if done.returncode != 0:
                sys.exit(f"repetition {i} failed:\n{done.stderr[-3000:]}")
            runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(f"  repetition {i}: load {os.getloadavg()[0]:.1f}", file=sys.stderr)
    _report(runs, events)


def _report(runs: list[dict], events: int) -> None:
    med = statistics.median
    print(f"{'step':<28}{'CPU s':>8}{'wall s':>8}{'M events/s (CPU)':>18}")
    total_cpu = total_wall = 0.0
    for step in ("io_span", "waterfall", "profile"):
        cpu, wall = med(r[step]["cpu_s"] for r in runs), med(r[step]["wall_s"] for r in runs)
        total_cpu, total_wall = total_cpu + cpu, total_wall + wall
        print(f"{step:<28}{cpu:>8.2f}{wall:>8.2f}{events / cpu / 1e6:>18.2f}")
    print(f"{'io_span + waterfall + profile':<28}{total_cpu:>8.2f}{total_wall:>8.2f}{events / total_cpu / 1e6:>18.2f}")
    tables = med(r["tables_mib"] for r in runs)
    took = med(r["peak_rss_mib"] - r["base_rss_mib"] for r in runs)
    print(f"memory: the tables {tables:.0f} MiB; the analysis's peak above them {took:.0f} MiB "
          f"({took / tables:.1f}x the tables); {runs[0]['spans']:,} spans; medians of {len(runs)}, "
          f"load {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
