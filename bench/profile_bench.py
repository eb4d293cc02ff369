"""Differential profile benchmark: where the time moved between two runs of 1 M calls each (issue 26's target:
<= 3 s).

Two synthetic runs (tests/support/profile_synthetic.py), 5 repetitions of 200,000 calls each, the shape of a FUSE
write workload: writes through FUSE to the daemon's pwrite (1 in 64 with a block request and its device time), and
1 in 50 an fsync waiting for a journal commit of three block requests (calls with branching nests: swept, the
others are chains); NEW's FUSE writes 20 % slower. Timed, in alternated repetitions:

  profile from io_span  the whole work from the two io_span tables: each run's time_profile (the analyzer of
                        analyzers/time_profile.py: every span's self time, the leaves), then compare's tree and
                        its tests (compare.profile.profile_groups): what two runs of 1 M calls cost end to end
  compare               profile_groups alone, on runs analysed with time_profile: what `mobiperf compare` pays
  reading io_span       the floor: reading the columns the profile needs from both io_span tables
  waterfall's layers    (--waterfall) a peer: waterfall's per-call exclusive time of each layer on the same
                        io_span tables (the unions of intervals the layer breakdown computes today)

CPU time (getrusage, this process: polars and numpy threads included) and wall time, medians over the
repetitions; the machine's load average beside them (a shared machine: wall times inflate, CPU less).

Usage: python bench/profile_bench.py [--calls 1000000] [--repeat 3] [--waterfall] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

REPS = 5


def workload(calls_per_rep: int, fuse_write_ns: int) -> list:
    from support.profile_synthetic import CallKind

    daemon, jbd2 = ("bfuse", 2000), ("jbd2/loop0-8", 77)
    syncs = calls_per_rep // 50
    blocky = calls_per_rep // 64
    plain = calls_per_rep - syncs - blocky
    names = {"fuse": "FUSE_WRITE", "fs": "pwrite64"}
    return [
        CallKind("write", plain, {"syscall": 3000, "fuse": fuse_write_ns, "fs": 5000}, names=names,
                 comm={"fs": daemon}),
        CallKind("write", blocky, {"syscall": 3000, "fuse": fuse_write_ns, "fs": 5000, "block": 1000,
                                   "device": 20000}, names=names, comm={"fs": daemon, "block": daemon,
                                                                        "device": daemon}),
        CallKind("fsync", syncs, {"syscall": 3000, "fuse": 2000, "fs": 5000, "journal": 30000, "block": 1000,
                                  "device": 50000}, names={"fuse": "FUSE_FSYNC", "journal": "jbd2_commit"},
                 comm={"fs": daemon, "journal": jbd2, "block": jbd2, "device": jbd2}, fanout=("block", 3)),
    ]


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _profile(base: Path, new: Path) -> int:
    from mobiperf.compare.profile import profile_groups
    from mobiperf.compare.runs import load_group

    return len(profile_groups(load_group(base), [load_group(new)]).tree.keys)


def _profile_from_io_span(base: Path, new: Path) -> int:
    """Each run's time_profile made from its io_span (as `mobiperf analyze` does), then the comparison."""
    import polars as pl

    from mobiperf.analyzers.time_profile import SPAN_COLUMNS, profile_span_time

    for run in (base, new):
        spans = pl.scan_parquet(run / "results" / "io_span.parquet").select(SPAN_COLUMNS).collect()
        profile_span_time(spans).write_parquet(run / "results" / "time_profile.parquet")
    return _profile(base, new)


def _read_io_span(base: Path, new: Path) -> int:
    import polars as pl

    from mobiperf.analyzers.time_profile import SPAN_COLUMNS

    return sum(pl.scan_parquet(run / "results" / "io_span.parquet").select(SPAN_COLUMNS).collect().height
               for run in (base, new))


def _waterfall_layers(base: Path, new: Path) -> int:
    import polars as pl

    from mobiperf.analyzers.waterfall import _layer_times

    rows = 0
    for run in (base, new):
        spans = pl.read_parquet(run / "results" / "io_span.parquet")
        rows += _layer_times(spans.filter(pl.col("call_id").is_not_null())).height
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=1_000_000, help="calls per run (over 5 repetitions)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--waterfall", action="store_true", help="also time waterfall's layer times (about 15x slower)")
    ap.add_argument("--keep", type=Path, help="make the runs in DIR, or reuse them when it holds them")
    args = ap.parse_args()
    from support.profile_synthetic import make_profile_run

    from mobiperf.core import stats

    stats._scipy()  # imported once, as a compare does before the profile (its verdict's tests)
    tmp = args.keep or Path(tempfile.mkdtemp(prefix="profile-bench-"))
    try:
        per_rep = args.calls // REPS
        t0 = time.time()
        runs = {}
        for name, fuse_ns in (("base", 8000), ("new", 9600)):
            runs[name] = tmp / name
            if not (tmp / name / "run.json").exists():
                make_profile_run(tmp / name, workload(per_rep, fuse_ns), reps=REPS, seed=len(runs))
        import polars as pl

        spans = pl.scan_parquet(runs["base"] / "results" / "io_span.parquet").select(pl.len()).collect().item()
        print(f"two runs of {args.calls:,} calls ({REPS} repetitions of {per_rep:,}), {spans:,} io_span rows each; "
              f"made in {time.time() - t0:.1f} s")
        cases = {"profile from io_span": lambda: _profile_from_io_span(runs["base"], runs["new"]),
                 "compare": lambda: _profile(runs["base"], runs["new"]),
                 "reading io_span": lambda: _read_io_span(runs["base"], runs["new"])}
        if args.waterfall:
            cases["waterfall's layers"] = lambda: _waterfall_layers(runs["base"], runs["new"])
        times: dict[str, list[tuple[float, float]]] = {k: [] for k in cases}
        for _ in range(args.repeat):
            for name, fn in cases.items():   # alternated: a drift of the machine hits every case alike
                c, w = _cpu(), time.perf_counter()
                fn()
                times[name].append((_cpu() - c, time.perf_counter() - w))
        floor = statistics.median(c for c, _ in times["reading io_span"])
        for name, t in times.items():
            cpu, wall = statistics.median(c for c, _ in t), statistics.median(w for _, w in t)
            print(f"  {name:<21} CPU {cpu:6.2f} s  wall {wall:6.2f} s  ({cpu / floor:5.2f}x reading io_span)  "
                  f"[CPU {min(c for c, _ in t):.2f}-{max(c for c, _ in t):.2f} s]")
        print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} CPUs); target: "
              "the profile from io_span <= 3 s")
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
