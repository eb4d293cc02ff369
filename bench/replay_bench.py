"""The replay's two speed targets (issue 25), on this machine as it is (give the load average beside the figures):

1. Building the replay of 1 M calls <= 10 s: a run's system calls as workload_syscalls gives them (4 threads, each
   opening a file and doing pwrite 4 KiB + fdatasync pairs, the threads' syncs interleaved so that the waits
   between threads are computed for real) -> build_from_syscalls -> the script's text; and the same for 1 M phone
   file events (android_fs starts and ends, one file per thread) -> build_from_android_fs. Wall and CPU time.
2. The generator's own overhead per replayed call <= 5 us: a script of N pwrites of 4 KiB to one file on a tmpfs,
   replayed in the closed loop, against a C loop (bench/replay_loop.c, built here with cc -O2) doing the same
   calls; CPU time (user + sys) of each one's timed part, by its own getrusage, in alternating repetitions;
   overhead per call = (median generator CPU - median loop CPU) / N. Wall time beside it.

    python bench/replay_bench.py [--calls 1000000] [--replayed 200000] [--reps 5] [--dir /dev/shm]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "support"))


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def syscall_calls(n: int) -> pl.DataFrame:
    """n calls in syscall_io's columns (workload_syscalls' output): 4 threads on 4 files."""
    from mobiperf.core.schema import SYSCALL_IO

    per_thread = n // 4
    k = pl.int_range(per_thread, eager=True, dtype=pl.Int64)
    frames = []
    for t in range(4):
        path = f"/w/data/file{t}"
        is_write = (k % 2) == 0
        frames.append(pl.DataFrame({
            "rep": pl.repeat(0, per_thread, dtype=pl.Int32, eager=True), "ts": k * 20_000 + t * 5_000,
            "dur": pl.repeat(3_000, per_thread, dtype=pl.Int64, eager=True),
            "pid": pl.repeat(100 + t, per_thread, dtype=pl.Int32, eager=True), "comm": "app",
            "syscall": pl.select(pl.when(k == 0).then(pl.lit("openat")).when(is_write).then(pl.lit("pwrite64"))
                                 .otherwise(pl.lit("fdatasync"))).to_series(),
            "fd": pl.select(pl.when(k == 0).then(-100).otherwise(3)).to_series().cast(pl.Int32),
            "path": path, "request_bytes": pl.select(pl.when(is_write).then(4096).otherwise(-1)).to_series(),
            "offset_bytes": pl.select(pl.when(is_write).then((k // 2) * 4096 % (1 << 30)).otherwise(-1)).to_series(),
            "ret": pl.select(pl.when(k == 0).then(3).when(is_write).then(4096).otherwise(0)).to_series(),
            "errno": "", "source": "strace", "open_flags": "O_RDWR|O_CREAT", "new_path": "",
            "clock_error_ns": pl.repeat(0, per_thread, dtype=pl.Int64, eager=True)}))
    return SYSCALL_IO.validate(pl.concat(frames)).with_columns(timing=pl.lit("kernel")).sort("ts")


def phone_events(n: int) -> pl.DataFrame:
    """n android_fs events (n/2 starts and their ends), 4 threads writing and reading 4 files."""
    from mobiperf.core.schema import ANDROID_FS_EVENT

    half = n // 2
    k = pl.int_range(half, eager=True, dtype=pl.Int64)
    tid = (k % 4).cast(pl.Int32) + 1000
    common = {"rep": pl.repeat(0, half, dtype=pl.Int32, eager=True), "cpu": pl.repeat(0, half, dtype=pl.Int32,
              eager=True), "pid": tid, "comm": "app", "op": pl.select(pl.when(k % 3 == 0).then(pl.lit("read"))
                                                                         .otherwise(pl.lit("write"))).to_series(),
              "offset_bytes": (k // 4) * 4096, "size_bytes": pl.repeat(4096, half, dtype=pl.Int64, eager=True),
              "ino": (k % 4) + 500}
    starts = pl.DataFrame({**common, "ts": k * 10_000, "phase": "start",
                           "path": pl.select(pl.lit("/data/data/app/f") + (k % 4).cast(pl.Utf8)).to_series(),
                           "cmdline": "app", "task_pid": pl.repeat(1000, half, dtype=pl.Int32, eager=True),
                           "i_size_bytes": pl.repeat(1 << 30, half, dtype=pl.Int64, eager=True)})
    ends = pl.DataFrame({**common, "ts": k * 10_000 + 4_000, "phase": "end", "path": None, "cmdline": None,
                         "task_pid": None, "i_size_bytes": None})
    return ANDROID_FS_EVENT.validate(pl.concat([starts, ends], how="diagonal_relaxed")).sort("ts")


def bench_build(n: int) -> None:
    from mobiperf.analyzers.replay.phone import build_from_android_fs
    from mobiperf.analyzers.replay.script import script_text
    from mobiperf.analyzers.replay.workload import build_from_syscalls

    for what, make, build in (
            ("system calls", syscall_calls, lambda d: build_from_syscalls(d, "/w/data")),
            ("phone file events", phone_events, lambda d: build_from_android_fs(d, None, 0))):
        data = make(n)
        c0, w0 = cpu_s(), time.perf_counter()
        workload = build(data)
        text = script_text(workload)
        wall, cpu = time.perf_counter() - w0, cpu_s() - c0
        print(f"build {what:<18} {data.height:>9,} rows -> {workload.calls.height:>9,} calls, "
              f"{workload.waits.height:,} waits, {len(text) / 1e6:.1f} MB script: {wall:.2f} s wall, {cpu:.2f} s "
              f"CPU  (target <= 10 s)")


def run_cpu(cmd: list[str], pattern: str) -> tuple[float, float]:
    """(CPU seconds, elapsed seconds) of a timed part, as the program printed them."""
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=600,
                         env={**os.environ, "MOBIBENCH_TRACE_MARKER": ""}).stdout
    cpu = re.search(pattern + r" CPU : user ([\d.]+) sec, sys ([\d.]+) sec", out)
    elapsed = re.search(r"(?:Replay|loop) elapsed : ([\d.]+) sec", out)
    return float(cpu[1]) + float(cpu[2]), float(elapsed[1])


def bench_generator(n: int, reps: int, base: Path) -> None:
    from mobiperf.core.binaries import reference_bin_dir

    with tempfile.TemporaryDirectory(dir=base, prefix="replay-bench-") as tmp:
        tmp = Path(tmp)
        loop = tmp / "replay_loop"
        subprocess.run(["cc", "-O2", "-o", str(loop), str(REPO / "bench" / "replay_loop.c")], check=True)
        script = tmp / "s.replay"
        script.write_text("mobiperf-replay 1\nthreads 1\nhandles 1\nneed 8192\nc 0 0 open 0 rdwr,creat f\n"
                          + "c 0 0 pwrite 0 0 4096\n" * n)
        gen, base_loop = [], []
        for rep in range(reps):  # alternated: drift of a shared machine hits both alike
            work = tmp / f"w{rep}"
            work.mkdir()
            gen.append(run_cpu([str(reference_bin_dir() / "mobibench"), "-p", str(work), "-g", str(script),
                                "--replay-timing=closed", "--no-drop-caches"], "Replay"))
            base_loop.append(run_cpu([str(loop), str(tmp / f"loop{rep}"), str(n), "4096"], "loop"))
        g_cpu, l_cpu = statistics.median(c for c, _ in gen), statistics.median(c for c, _ in base_loop)
        g_wall, l_wall = statistics.median(e for _, e in gen), statistics.median(e for _, e in base_loop)
        print(f"generator: {n:,} pwrites of 4 KiB on {base}, {reps} alternated repetitions (medians):")
        print(f"  CPU   generator {g_cpu:.3f} s, C loop {l_cpu:.3f} s: {1e6 * (g_cpu - l_cpu) / n:.2f} us per call "
              f"(target <= 5 us); ratio {g_cpu / l_cpu:.2f}")
        print(f"  wall  generator {g_wall:.3f} s, C loop {l_wall:.3f} s: {1e6 * (g_wall - l_wall) / n:.2f} us per "
              "call")
        print(f"  every repetition (CPU s): generator {[round(c, 3) for c, _ in gen]}, "
              f"loop {[round(c, 3) for c, _ in base_loop]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=1_000_000)
    ap.add_argument("--replayed", type=int, default=200_000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--dir", type=Path, default=Path("/dev/shm"))
    args = ap.parse_args()
    print(f"load average: {open('/proc/loadavg').read().split()[:3]}")
    bench_build(args.calls)
    bench_generator(args.replayed, args.reps, args.dir)


if __name__ == "__main__":
    main()
