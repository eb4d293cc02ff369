"""Parser throughput against blkparse, on the same block events; before/after against another checkout.

    python bench/parse_bench.py [--lines 2000000] [--repeat 3] [--against CHECKOUT ...] [--workdir /tmp]

Inputs (bench/parse_inputs.py): a real ftrace text trace (the 6.18 fixture of 4 KiB O_DSYNC writes) repeated to
--lines lines, and its block events as blk_io_trace v0x07 records and as a Perfetto trace of typed block_* events.

Each parser runs in a fresh interpreter of the checkout it belongs to (CHECKOUT/.venv/bin/python: `make setup`
there first; `git worktree add --detach /tmp/old bc813ac` gives an older state), in rounds that alternate the
checkouts, so every version sees the machine in the same state; the figures are the medians over the rounds:
  mobiperf ftrace text -> block_event        parse_ftrace_text
  mobiperf blktrace binary -> block_event    parse_blktrace
  mobiperf Perfetto protobuf -> block_event  parse_perfetto (checkouts older than the reader show n/a)
  blkparse binary -> text (> /dev/null)      blkparse -i - (pipe mode), the peer
Before timing, each child parses a 200,000-line prefix of the same input (19 MB of text, 9.6 MB of records:
above every size below which a parser takes its small-file path), so the timed parse runs the code a big trace
runs, with numba's start and cached code already loaded; that start is shown on its own ("start": imports and
the prefix's parse, CPU seconds), as a user's first parse in a process pays it once.
Targets (issue 28): text >= 4x blkparse, binary >= 10x blkparse, wall time on a quiet machine (the text parser
runs on every CPU: its CPU-time ratio is lower); peak memory no higher than the state before (compare with
--against); Perfetto >= 1.6 M events/s and peak memory <= 3x the file (the peak over the interpreter's, with
everything imported and the prefix parsed, divided by the file's size).
The machine may be loaded: the load average is printed; CPU time is less disturbed by other tenants than wall.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import parse_inputs  # noqa: E402  (bench/ is not a package)

REPO = Path(__file__).resolve().parent.parent
WARM_LINES = 200_000
KINDS = {"text": "mobiperf ftrace text -> block_event", "binary": "mobiperf blktrace binary -> block_event",
         "perfetto": "mobiperf Perfetto protobuf -> block_event"}
TARGET_TEXT_X, TARGET_BINARY_X, TARGET_PERFETTO_MEV, TARGET_PERFETTO_MEM = 4.0, 10.0, 1.6, 3.0

CHILD = r"""
import gc, json, sys, time
from pathlib import Path
kind, path, warm, want = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]
def hwm_mb():
    return int([l for l in open("/proc/self/status") if l.startswith("VmHWM:")][0].split()[1]) / 1024
t0 = time.process_time()
try:
    if kind == "text":
        from mobiperf.collectors.parse.ftrace_text import parse_ftrace_text as parse
    elif kind == "binary":
        from mobiperf.collectors.parse.blktrace import parse_blktrace
        parse = lambda p: parse_blktrace([p])
    else:
        from mobiperf.collectors.parse.perfetto_trace import parse_perfetto as parse
except ImportError:
    print(json.dumps({"missing": True}))
    sys.exit()
import mobiperf
parse(warm)
start = time.process_time() - t0
gc.collect()
base = hwm_mb()
c, t = time.process_time(), time.perf_counter()
r = parse(path)
RESULT = {"wall_s": time.perf_counter() - t, "cpu_s": time.process_time() - c, "start_cpu_s": start,
          "rows": len(r.block_event), "base_mb": base, "peak_mb": hwm_mb(), "module": mobiperf.__file__}
if kind != "binary":  # the same rows as the text's (comm aside: the Perfetto input has no process names)
    import polars as pl
    got = r.block_event.drop("comm").with_columns(pl.col(pl.Categorical).cast(pl.Utf8))
    RESULT["same"] = got.equals(pl.read_parquet(want).with_columns(pl.col(pl.Categorical).cast(pl.Utf8)))
print(json.dumps(RESULT))
"""


def run_json(argv: list[str], cwd: Path) -> dict:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=1800, cwd=cwd)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:3])} failed in {cwd}:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def time_blkparse(path: Path) -> dict:
    """blkparse in pipe mode, text to /dev/null, timed from a child whose only child is blkparse (its peak RSS)."""
    code = ("import json, resource, subprocess, sys, time\n"
            f"f = open({str(path)!r}, 'rb')\n"
            "t = time.perf_counter()\n"
            "done = subprocess.run(['blkparse', '-i', '-'], stdin=f, stdout=subprocess.DEVNULL, "
            "stderr=subprocess.DEVNULL, timeout=1800)\n"
            "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
            "print(json.dumps({'wall_s': time.perf_counter() - t, 'ok': done.returncode == 0, "
            "'cpu_s': u.ru_utime + u.ru_stime, 'peak_mb': u.ru_maxrss / 1024}))\n")
    got = run_json([sys.executable, "-c", code], REPO)
    if not got["ok"]:
        raise SystemExit("blkparse failed on the converted records")
    return got


class Checkout:
    """A source tree with its own venv: the code a child process imports."""

    def __init__(self, root: Path):
        self.root = root.resolve()
        self.python = self.root / ".venv" / "bin" / "python"
        if not self.python.exists():
            raise SystemExit(f"{self.root}: no .venv/bin/python (run `make setup` there first)")
        rev = subprocess.run(["git", "-C", str(self.root), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True)
        self.name = f"{rev.stdout.strip() or '?'} ({self.root})"
        self.runs: dict[str, list[dict]] = {k: [] for k in KINDS}

    def parse(self, kind: str, inputs: dict[str, Path]) -> None:
        got = run_json([str(self.python), "-c", CHILD, kind, str(inputs[kind]), str(inputs[f"warm-{kind}"]),
                        str(inputs["want"])], self.root)
        if not got.get("missing") and not Path(got["module"]).resolve().is_relative_to(self.root):
            raise SystemExit(f"{self.python} imports mobiperf from {got['module']}, not from {self.root}")
        if got.get("same") is False and self.root == REPO:
            raise SystemExit(f"{self.name}: the {kind} parser's block_event differs from the text's")
        self.runs[kind].append(got)

    def median(self, kind: str) -> dict | None:
        runs = [r for r in self.runs[kind] if not r.get("missing")]
        if not runs:
            return None
        return {k: statistics.median(r[k] for r in runs) for k in ("wall_s", "cpu_s", "start_cpu_s", "rows",
                                                                    "base_mb", "peak_mb")}


def make_inputs(work: Path, lines: int) -> tuple[dict[str, Path], int]:
    import polars as pl

    from mobiperf.collectors.parse.ftrace_text import parse_ftrace_text

    inputs: dict[str, Path] = {}
    for prefix, n in (("", lines), ("warm-", WARM_LINES)):
        text = inputs[f"{prefix}text"] = work / f"{prefix}trace.txt"
        parse_inputs.make_ftrace_text(text, n)
        events = parse_ftrace_text(text).block_event
        parse_inputs.make_blktrace(events, inputs.setdefault(f"{prefix}binary", work / f"{prefix}trace.blkbin"))
        parse_inputs.make_perfetto(events, inputs.setdefault(f"{prefix}perfetto", work / f"{prefix}trace.pftrace"))
        if not prefix:
            inputs["want"] = work / "want.parquet"
            events.drop("comm").with_columns(pl.col(pl.Categorical).cast(pl.Utf8)).write_parquet(inputs["want"])
            n_events = len(events)
    return inputs, n_events


def report(checkouts: list[Checkout], blkparse: list[dict], inputs: dict[str, Path], n_events: int) -> list[str]:
    """Print the medians, the ratios to blkparse and between checkouts; return the targets missed (this tree)."""
    bp = {k: statistics.median(r[k] for r in blkparse) for k in ("wall_s", "cpu_s", "peak_mb")}
    print(f"\n{'parser':<44}{'wall s':>7}{'cpu s':>7}{'M ev/s':>8}{'peak MB':>8}{'start s':>8}"
          f"{'x blkparse':>11}{'(cpu)':>7}")
    missed = []
    for co in checkouts:
        print(f"-- {co.name}")
        for kind, label in KINDS.items():
            m = co.median(kind)
            if m is None:
                print(f"{label:<44}{'n/a (no such parser in this checkout)':>40}")
                continue
            x_wall, x_cpu = bp["wall_s"] / m["wall_s"], bp["cpu_s"] / m["cpu_s"]
            print(f"{label:<44}{m['wall_s']:>7.2f}{m['cpu_s']:>7.2f}{n_events / m['wall_s'] / 1e6:>8.2f}"
                  f"{m['peak_mb']:>8.0f}{m['start_cpu_s']:>8.2f}{x_wall:>10.2f}x{x_cpu:>6.2f}x")
            if co is checkouts[0]:
                missed += _missed(kind, m, x_wall, n_events, inputs)
    print(f"{'blkparse binary -> text (> /dev/null)':<44}{bp['wall_s']:>7.2f}{bp['cpu_s']:>7.2f}"
          f"{n_events / bp['wall_s'] / 1e6:>8.2f}{bp['peak_mb']:>8.0f}{'':>8}{1:>10.2f}x{1:>6.2f}x")
    for other in checkouts[1:]:
        print(f"\nthis tree / {other.name} (below 1: faster or smaller here)")
        for kind, label in KINDS.items():
            a, b = checkouts[0].median(kind), other.median(kind)
            if a and b:
                print(f"  {label:<42} wall {a['wall_s'] / b['wall_s']:5.2f}  cpu {a['cpu_s'] / b['cpu_s']:5.2f}  "
                      f"peak {a['peak_mb'] / b['peak_mb']:5.2f}  start {a['start_cpu_s'] / b['start_cpu_s']:5.2f}")
    return missed


def _missed(kind: str, m: dict, x_wall: float, n_events: int, inputs: dict[str, Path]) -> list[str]:
    if kind == "text" and x_wall < TARGET_TEXT_X:
        return [f"ftrace text {x_wall:.2f}x blkparse (target >= {TARGET_TEXT_X}x)"]
    if kind == "binary" and x_wall < TARGET_BINARY_X:
        return [f"blktrace binary {x_wall:.2f}x blkparse (target >= {TARGET_BINARY_X}x)"]
    if kind != "perfetto":
        return []
    rate = n_events / m["wall_s"] / 1e6
    growth = (m["peak_mb"] - m["base_mb"]) * 2**20 / inputs["perfetto"].stat().st_size
    print(f"Perfetto: {rate:.2f} M events/s; peak {m['peak_mb'] - m['base_mb']:.0f} MB over a "
          f"{m['base_mb']:.0f} MB interpreter = {growth:.2f}x the file")
    out = [f"Perfetto {rate:.2f} M events/s (target >= {TARGET_PERFETTO_MEV})"] if rate < TARGET_PERFETTO_MEV else []
    return out + ([f"Perfetto memory {growth:.2f}x the file (target <= {TARGET_PERFETTO_MEM}x)"]
                  if growth > TARGET_PERFETTO_MEM else [])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lines", type=int, default=2_000_000)
    ap.add_argument("--repeat", type=int, default=3, help="rounds, each running every parser of every checkout")
    ap.add_argument("--against", type=Path, action="append", default=[],
                    help="another checkout (with its own .venv) to run beside this one, alternated")
    ap.add_argument("--workdir", default=tempfile.gettempdir())
    args = ap.parse_args()
    if not shutil.which("blkparse"):
        raise SystemExit("blkparse is not installed (Debian: blktrace)")
    checkouts = [Checkout(REPO), *(Checkout(p) for p in args.against)]
    work = Path(tempfile.mkdtemp(prefix="mobiperf-parse-bench-", dir=args.workdir))
    try:
        inputs, n_events = make_inputs(work, args.lines)
        print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start")
        print(f"input: {n_events:,} events: ftrace text {inputs['text'].stat().st_size / 1e6:.0f} MB, blktrace "
              f"{inputs['binary'].stat().st_size / 1e6:.0f} MB, Perfetto {inputs['perfetto'].stat().st_size / 1e6:.0f}"
              f" MB; {args.repeat} rounds, alternated")
        blkparse = []
        for _ in range(args.repeat):
            for co in checkouts:
                for kind in KINDS:
                    co.parse(kind, inputs)
            blkparse.append(time_blkparse(inputs["binary"]))
        missed = report(checkouts, blkparse, inputs, n_events)
        rows = {k: co.median(k)["rows"] for co in checkouts[:1] for k in KINDS}
        if any(r != n_events for r in rows.values()):
            raise SystemExit(f"row counts differ from the {n_events} events: {rows}")
        print(f"\nload average at the end {os.getloadavg()[0]:.1f}; targets (this tree, wall on a quiet machine): "
              f"text >= {TARGET_TEXT_X}x, binary >= {TARGET_BINARY_X}x blkparse, Perfetto >= {TARGET_PERFETTO_MEV} "
              f"M events/s and <= {TARGET_PERFETTO_MEM}x the file")
        print("missed: " + "; ".join(missed) if missed else "all targets met")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
