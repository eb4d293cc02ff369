"""Overhead of mobiperf's default tracing on the traced workload (root; real loop device, ext4, tracefs).

    python bench/tracing_overhead.py [--reps 5]

Each repetition builds a fresh ext4 stack and times the workload process alone, once with the collectors a
default `mobiperf run` plans (ftrace block events + light ext4/jbd2 events, layout snapshot, facts) and once
with none; off/on alternate so drift (other tenants of a shared machine) hits both. Workloads:
  sequential writes   dd bs=512k count=256 oflag=direct            (128 MiB)
  fsync-heavy writes  dd bs=4k count=1500 oflag=dsync              (every write is synced)
Prints the median workload time of each mode, the overhead of the medians, and the ranges.
Targets (issue 6): <= 5 % on sequential writes, <= 10 % on fsync-heavy writes.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mobiperf.collectors import plan_collectors  # noqa: E402
from mobiperf.stack import LocalStack, parse_stack_spec  # noqa: E402
from mobiperf.target.probe import probe  # noqa: E402
from mobiperf.target.transport import LocalTransport  # noqa: E402

WORKLOADS = {
    "sequential writes": ["dd", "if=/dev/zero", "of=seq.dat", "bs=512k", "count=256", "oflag=direct"],
    "fsync-heavy writes": ["dd", "if=/dev/zero", "of=sync.dat", "bs=4k", "count=1500", "oflag=dsync"],
}
TARGETS = {"sequential writes": 5.0, "fsync-heavy writes": 10.0}


def one_run(transport, caps, argv: list[str], traced: bool) -> float:
    with tempfile.TemporaryDirectory(prefix="mobiperf-overhead-") as raw, \
            LocalStack(transport, parse_stack_spec("ext4"), image_size=512 << 20) as stack, \
            contextlib.ExitStack() as active:
        collectors = plan_collectors(transport, caps, stack, Path(raw)) if traced else []
        for c in collectors:
            active.enter_context(c)
            argv = c.wrap_command(argv)
        for c in collectors:
            c.start()
        start = time.perf_counter()
        proc = transport.start(argv, cwd=stack.workdir)
        code = proc.wait(timeout=600)
        elapsed = time.perf_counter() - start
        for c in reversed(collectors):
            c.stop()
        if code != 0:
            raise SystemExit(f"{argv} exited {code}")
        return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description="tracing overhead on the traced workload")
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root (loop devices, mounts, tracefs)")
    transport = LocalTransport()
    caps = probe(transport)
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} (shared: figures are noisy)")
    print(f"{'workload':<20}{'untraced s':>12}{'traced s':>10}{'overhead':>10}{'target':>8}   ranges (s)")
    for name, argv in WORKLOADS.items():
        times = {False: [], True: []}
        for rep in range(args.reps):
            for traced in ((False, True) if rep % 2 == 0 else (True, False)):
                times[traced].append(one_run(transport, caps, list(argv), traced))
        off, on = statistics.median(times[False]), statistics.median(times[True])
        overhead = (on / off - 1) * 100
        print(f"{name:<20}{off:>12.3f}{on:>10.3f}{overhead:>9.1f}%{TARGETS[name]:>7.0f}%   "
              f"off {min(times[False]):.3f}-{max(times[False]):.3f}, on {min(times[True]):.3f}-{max(times[True]):.3f}")


if __name__ == "__main__":
    main()
