"""Overhead of mobiperf's default tracing on the traced workload (root; real loop device, ext4, tracefs).

    python bench/tracing_overhead.py [--reps 5]

Each repetition builds a fresh ext4 stack and times the workload process alone, once with the collectors a
default `mobiperf run` plans (ftrace block events + light ext4/jbd2 events, layout snapshot, facts) and once
with none; off/on alternate so drift (other tenants of a shared machine) hits both. Workloads:
  sequential writes   dd bs=512k count=256 oflag=direct            (128 MiB)
  fsync-heavy writes  dd bs=4k count=1500 oflag=dsync              (every write is synced)
Prints the median workload time of each mode and the overhead: the median over the repetitions of the traced/
untraced ratio of one off/on pair run back to back (a slow spell of a shared machine hits both runs of a pair,
not one mode), with the ratios' range; and the same for the workload's CPU time (user + system of the workload
process tree, from getrusage), which includes the tracepoints' cost in the workload's context and is far less
disturbed by the other tenants of a shared machine than elapsed time.
Targets (issue 6): <= 5 % on sequential writes, <= 10 % on fsync-heavy writes.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mobiperf.collectors.plan import plan_collectors  # noqa: E402
from mobiperf.stack.emulated import EmulatedStack  # noqa: E402
from mobiperf.stack.options import StackOptions  # noqa: E402
from mobiperf.stack.spec import parse_stack_spec  # noqa: E402
from mobiperf.target.target import Target  # noqa: E402
from mobiperf.target.transport import LocalTransport  # noqa: E402

WORKLOADS = {
    "sequential writes": ["dd", "if=/dev/zero", "of=seq.dat", "bs=512k", "count=256", "oflag=direct"],
    "fsync-heavy writes": ["dd", "if=/dev/zero", "of=sync.dat", "bs=4k", "count=1500", "oflag=dsync"],
}
TARGETS = {"sequential writes": 5.0, "fsync-heavy writes": 10.0}


def one_run(target: Target, argv: list[str], traced: bool) -> tuple[float, float]:
    transport = target.transport
    with tempfile.TemporaryDirectory(prefix="mobiperf-overhead-") as raw, \
            EmulatedStack(target, parse_stack_spec("ext4"), StackOptions(image_size=512 << 20)) as stack, \
            contextlib.ExitStack() as active:
        collectors = plan_collectors(target, stack, Path(raw)) if traced else []
        for c in collectors:
            active.enter_context(c)
            argv = c.wrap_command(argv)
        for c in collectors:
            c.start()
        # The workload is our child: the children's CPU time reaped during its wait is the workload's.
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        proc = transport.start(argv, cwd=stack.workdir, stderr_path=Path(raw) / "stderr.txt")
        code = proc.wait(timeout=600)
        elapsed = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        for c in reversed(collectors):
            c.stop()
        if code != 0:
            raise SystemExit(f"{argv} exited {code}")
        return elapsed, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description="tracing overhead on the traced workload")
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root (loop devices, mounts, tracefs)")
    target = Target(LocalTransport())
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} (shared: figures are noisy)")
    print(f"{'workload':<20}{'measure':<9}{'untraced s':>11}{'traced s':>10}{'overhead':>10}{'target':>8}"
          "   overhead of each pair (min..max)")
    for name, argv in WORKLOADS.items():
        runs = {False: [], True: []}
        for rep in range(args.reps):
            for traced in ((False, True) if rep % 2 == 0 else (True, False)):
                runs[traced].append(one_run(target, list(argv), traced))
        for k, measure in enumerate(("elapsed", "cpu")):
            off_all, on_all = [r[k] for r in runs[False]], [r[k] for r in runs[True]]
            pairs = [(on / off - 1) * 100 for off, on in zip(off_all, on_all)]
            print(f"{name:<20}{measure:<9}{statistics.median(off_all):>11.3f}{statistics.median(on_all):>10.3f}"
                  f"{statistics.median(pairs):>9.1f}%{TARGETS[name]:>7.0f}%   {min(pairs):.1f}%..{max(pairs):.1f}%")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
