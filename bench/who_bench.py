"""Ingest + analyze + report of a 30 s phone trace of 1 M events (the issue's target: <= 5 s).

    python bench/who_bench.py [--events 1000000] [--seconds 30] [--repeat 3] [--keep DIR]

The trace is an atrace-style text capture (tgid column, 8 CPUs) written here, seeded, in the formats of the
android fixture (tests/fixtures/android/k4.14-android-fs.txt) and the public captures of
tests/golden/test_who_public_traces.py: 60 processes of 6 threads each switch and wake across the CPUs
(sched_switch, sched_waking, sched_wakeup: most of a phone trace's events), some of them blocking in D (with
Android's sched_blocked_reason), reading files that miss the page cache (android_fs_dataread_start, the block
requests the reading thread issues, _end), writing them (android_fs_datawrite_*) and syncing (f2fs_sync_file
enter/exit around block writes and a flush), with kworker writeback requests in between.

Each repetition runs `mobiperf ingest FILE -o RUN` (parse, analyze and report: the one command a user runs) as a
child process, then its two halves apart (`--no-report`, then `mobiperf report RUN`), and prints wall time and CPU
time (getrusage of the children) with the load average beside them: the machine is shared, so CPU time is the
figure to compare; wall time means something only on a quiet machine.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MOBIPERF = [sys.executable, "-m", "mobiperf"]
CPUS = 8
PROCESSES = 60
THREADS = 6
FILES = 400


def write_trace(path: Path, events: int, seconds: float, seed: int = 24) -> int:
    """A phone-shaped trace of about `events` events over `seconds` (module docstring); the events written."""
    rng = random.Random(seed)
    procs = [(1000 + 100 * p, f"com.bench.app{p}") for p in range(PROCESSES)]
    threads = [(pid + t, pid, (name[-15:] if t == 0 else ("RenderThread", "SQLiteThread", "pool-1-thread-1",
                                                          "Binder:1", "AsyncTask #1")[t - 1]))
               for pid, name in procs for t in range(THREADS)]
    files = [f"/data/data/com.bench.app{i % PROCESSES}/databases/f{i}.db" for i in range(FILES)]
    running = [threads[rng.randrange(len(threads))] for _ in range(CPUS)]
    step = seconds * 1e6 / events  # microseconds between events on average
    t = 1000.0
    n, sector = 0, 4096
    out = []

    def line(task, cpu, ts, text):
        tid, pid, comm = task
        out.append(f"{comm[-16:]:>16}-{tid:<5} ({pid:>5}) [{cpu:03d}] d..2 {ts:.6f}: {text}\n")

    while n < events:
        cpu = rng.randrange(CPUS)
        prev = running[cpu]
        t += rng.expovariate(1 / step) / 1e6
        kind = rng.random()
        if kind < 0.04:  # a file read that misses the cache: android_fs + block request by the reader
            f = rng.randrange(FILES)
            size = 4096 * rng.choice((1, 4, 16))
            line(prev, cpu, t, f"android_fs_dataread_start: entry_name {files[f]}, offset 0, bytes {size}, "
                               f"cmdline {procs[(prev[1] - 1000) // 100][1]}, pid {prev[1]}, i_size 1048576, "
                               f"ino {100000 + f}")
            line(prev, cpu, t + 0.00002, f"block_rq_issue: 259,32 RA {size} () {sector} + {size // 512} "
                                         f"[{prev[2]}]")
            line((0, 0, "<idle>"), 0, t + 0.0004, f"block_rq_complete: 259,32 RA () {sector} + {size // 512} [0]")
            line(prev, cpu, t + 0.00042, f"android_fs_dataread_end: ino {100000 + f}, offset 0, bytes {size}")
            sector += size // 512
            n += 4
        elif kind < 0.05:  # an fsync: f2fs_sync_file around a block write and a flush
            f = rng.randrange(FILES)
            line(prev, cpu, t, f"f2fs_sync_file_enter: dev = (259,33), ino = {100000 + f}, pino = 1, i_mode = "
                               "0x81b0, i_size = 8192, i_nlink = 1, i_blocks = 16, i_advise = 0x0")
            line(prev, cpu, t + 0.00003, f"block_rq_issue: 259,32 WS 4096 () {sector} + 8 [{prev[2]}]")
            line((0, 0, "<idle>"), 0, t + 0.0005, f"block_rq_complete: 259,32 WS () {sector} + 8 [0]")
            line(prev, cpu, t + 0.0006, f"f2fs_sync_file_exit: dev = (259,33), ino = {100000 + f}, cp_reason: no "
                                        "needed, datasync = 1, ret = 0")
            sector += 8
            n += 4
        elif kind < 0.06:  # writeback from a kworker
            line((91, 91, "kworker/u16:3"), cpu, t, f"block_rq_issue: 259,32 W 65536 () {sector} + 128 "
                                                   "[kworker/u16:3]")
            line((0, 0, "<idle>"), 0, t + 0.001, f"block_rq_complete: 259,32 W () {sector} + 128 [0]")
            sector += 128
            n += 2
        else:  # the scheduler: a switch, sometimes into D with its reason and wake-up
            nxt = threads[rng.randrange(len(threads))]
            state = "D" if rng.random() < 0.1 else rng.choice(("S", "R+", "S"))
            line(prev, cpu, t, f"sched_switch: prev_comm={prev[2]} prev_pid={prev[0]} prev_prio=120 prev_state="
                               f"{state} ==> next_comm={nxt[2]} next_pid={nxt[0]} next_prio=120")
            running[cpu] = nxt
            n += 1
            if state != "R+":
                w = t + rng.expovariate(1000) + 0.00001
                line(nxt, cpu, w, f"sched_waking: comm={prev[2]} pid={prev[0]} prio=120 target_cpu={cpu:03d}")
                line(nxt, cpu, w + 0.000005, f"sched_wakeup: comm={prev[2]} pid={prev[0]} prio=120 "
                                             f"target_cpu={cpu:03d}")
                n += 2
                if state == "D":
                    line(nxt, cpu, w + 0.000002, f"sched_blocked_reason: pid={prev[0]} iowait=1 "
                                                 "caller=wait_on_page_bit_common+0x1c0/0x3a8")
                    n += 1
    out.sort(key=lambda s: float(s[s.index("] ") + 7:].split(":", 1)[0]))
    with open(path, "w") as fh:
        fh.write("# tracer: nop\n#\n")
        fh.writelines(out)
    return len(out)


def _timed(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of a child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, timeout=900, cwd=REPO)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.monotonic() - t0, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", type=Path, help="keep the trace and the last run here")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="who-bench-"))
    try:
        trace = (args.keep or work) / "phone-30s.txt"
        trace.parent.mkdir(parents=True, exist_ok=True)
        lines = write_trace(trace, args.events, args.seconds)
        print(f"trace: {lines:,} events, {trace.stat().st_size / 1e6:.0f} MB; load average {os.getloadavg()}")
        rows = []
        for i in range(args.repeat):  # the whole (ingest, analyze, report: one command), then its two halves
            whole = _timed([*MOBIPERF, "ingest", str(trace), "-o", str(work / f"run{i}")])
            ingest = _timed([*MOBIPERF, "ingest", str(trace), "-o", str(work / f"half{i}"), "--no-report"])
            report = _timed([*MOBIPERF, "report", str(work / f"half{i}")])
            rows.append(whole)
            print(f"rep {i}: mobiperf ingest (with its report) {whole[0]:.2f} s wall, {whole[1]:.2f} s CPU; apart: "
                  f"ingest+analyze {ingest[1]:.2f} s CPU, report {report[1]:.2f} s CPU; load {os.getloadavg()[0]:.1f}")
            if args.keep and i == args.repeat - 1:
                shutil.copytree(work / f"run{i}", args.keep / "run", dirs_exist_ok=True)
            shutil.rmtree(work / f"half{i}", ignore_errors=True)
        wall = statistics.median(r[0] for r in rows)
        cpu = statistics.median(r[1] for r in rows)
        print(f"median of {len(rows)}: {wall:.2f} s wall, {cpu:.2f} s CPU (target: 5 s wall)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
