"""Time to answer for small traces, and memory for a big one (issue 14).

Small traces (the fixtures): each input is ingested and analyzed by `mobiperf ingest --no-report` in a fresh
process, then reported by `mobiperf report` in another one, as a user runs them; the peers run on the same file
in the same loop, alternated with mobiperf's runs:
  ftrace 1 MB     tests/fixtures/ftrace/k6.18-dd-4k-direct-dsync.txt (11 360 block events, 6.18 kernel)
  blktrace 347 KB tests/fixtures/blktrace/takeoverjp-sample.blktrace.0     peer: blkparse -d + btt
  blkparse text   tests/fixtures/blkparse/takeoverjp-sample.blkparse.txt.gz (gunzipped first: 564 KB)
  trace-cmd .dat  tests/fixtures/trace-cmd/dd-block.v7zstd.dat             peer: trace-cmd report
Per run: wall time, CPU time (user + system of the child, os.wait4) and peak RSS (its ru_maxrss); the median of
--repeat runs. The targets: ingest + analyze of a 1 MB trace <= 0.5 s wall and <= 200 MB, the report <= 1 s
more. The machine is shared: wall time is reported, CPU time is what the checks gate on (a loaded machine
stretches wall time, not CPU time); `uptime` is printed with the figures.

Big trace (--big-gb N): an ftrace text of N GB is written (the 1 MB fixture repeated, each copy 100 s later,
into --workdir), then ingested and analyzed; the target: peak RSS <= 2 GB (the parser streams the file in
chunks). The file is removed afterwards.

Usage: python bench/small_trace_bench.py [--repeat 5] [--big-gb 1 --workdir /var/tmp]
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"
MOBIPERF = [sys.executable, "-m", "mobiperf"]
INPUTS = {
    "ftrace 1 MB": FIX / "ftrace" / "k6.18-dd-4k-direct-dsync.txt",
    "blktrace 347 KB": FIX / "blktrace" / "takeoverjp-sample.blktrace.0",
    "blkparse text": FIX / "blkparse" / "takeoverjp-sample.blkparse.txt.gz",
    "trace-cmd .dat": FIX / "trace-cmd" / "dd-block.v7zstd.dat",
}
TARGET_ANALYZE_S, TARGET_RSS_MB, TARGET_REPORT_S, TARGET_BIG_RSS_MB = 0.5, 200, 1.0, 2048


def run_child(argv: list[str], cwd: Path | None = None) -> dict:
    """wall, cpu (user + sys) and peak RSS of one child process, from its own rusage (reaped with wait4)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=cwd)
    err = proc.stderr.read()
    _, status, ru = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, argv))} failed:\n{err.decode(errors='replace')[-2000:]}")
    return {"wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "rss_mb": ru.ru_maxrss / 1024}


def peers(name: str, path: Path, work: Path) -> dict[str, list[str]]:
    """The peer commands for an input, as shell pipelines run through sh -c."""
    if name.startswith("blktrace") and shutil.which("blkparse") and shutil.which("btt"):
        dump = work / "merged.bin"
        return {"blkparse+btt": ["sh", "-c", f"blkparse -q -i - -d {dump} -O < {path} && btt -i {dump} > /dev/null"]}
    if name.startswith("trace-cmd") and shutil.which("trace-cmd"):
        return {"trace-cmd report": ["sh", "-c", f"trace-cmd report -i {path} > /dev/null 2>&1"]}
    return {}


def small(repeat: int) -> list[str]:
    failures = []
    with tempfile.TemporaryDirectory(prefix="small-trace-bench-") as tmp:
        work = Path(tmp)
        for name, src in INPUTS.items():
            path = src
            if src.suffix == ".gz":  # the text itself, as blkparse writes it
                path = work / src.stem
                path.write_bytes(gzip.decompress(src.read_bytes()))
            rows: dict[str, list[dict]] = {"ingest+analyze": [], "report": []}
            peer_cmds = peers(name, path, work)
            for p in peer_cmds:
                rows[p] = []
            for i in range(repeat):  # alternated: every tool sees the same machine state in each round
                out = work / f"run-{i}"
                rows["ingest+analyze"].append(run_child([*MOBIPERF, "ingest", "--no-report", str(path), "-o",
                                                         str(out)]))
                rows["report"].append(run_child([*MOBIPERF, "report", str(out)]))
                for p, argv in peer_cmds.items():
                    rows[p].append(run_child(argv))
                shutil.rmtree(out)
            med = {k: {m: statistics.median(r[m] for r in v) for m in ("wall", "cpu", "rss_mb")}
                   for k, v in rows.items()}
            size_kb = path.stat().st_size / 1024
            print(f"\n{name} ({size_kb:.0f} KB, median of {repeat})")
            for k, m in med.items():
                print(f"  {k:<18} wall {m['wall']:6.3f} s   cpu {m['cpu']:6.3f} s   peak RSS {m['rss_mb']:6.1f} MB")
            for p in peer_cmds:
                print(f"  ratio ingest+analyze / {p}: wall {med['ingest+analyze']['wall'] / med[p]['wall']:.1f}x"
                      f", cpu {med['ingest+analyze']['cpu'] / max(med[p]['cpu'], 1e-3):.1f}x")
            a, r = med["ingest+analyze"], med["report"]
            if a["cpu"] > TARGET_ANALYZE_S:
                failures.append(f"{name}: ingest+analyze {a['cpu']:.3f} s of CPU > {TARGET_ANALYZE_S} s")
            if a["rss_mb"] > TARGET_RSS_MB:
                failures.append(f"{name}: ingest+analyze peak RSS {a['rss_mb']:.0f} MB > {TARGET_RSS_MB} MB")
            if r["cpu"] > TARGET_REPORT_S:
                failures.append(f"{name}: report {r['cpu']:.3f} s of CPU > {TARGET_REPORT_S} s")
    return failures


def write_big(path: Path, gigabytes: float) -> int:
    """An ftrace text of about `gigabytes` GB: the 1 MB fixture repeated, each copy 100 s later. Lines written."""
    lines = [ln for ln in INPUTS["ftrace 1 MB"].read_text().splitlines(keepends=True) if not ln.startswith("#")]
    heads, tails = [], []
    for ln in lines:  # split each line around its timestamp (`secs.usecs:`) once
        cut = ln.index(": ")
        dot = ln.rindex(".", 0, cut)
        start = ln.rindex(" ", 0, dot) + 1
        heads.append(ln[:start])
        tails.append((int(ln[start:dot]), ln[dot:]))
    target, written, n, copy = int(gigabytes * (1 << 30)), 0, 0, 0
    with open(path, "w") as f:
        while written < target:
            block = "".join(f"{h}{secs + 100 * copy}{rest}" for h, (secs, rest) in zip(heads, tails))
            f.write(block)
            written += len(block)
            n += len(lines)
            copy += 1
    return n


def big(gigabytes: float, workdir: Path) -> list[str]:
    work = Path(tempfile.mkdtemp(prefix="big-trace-bench-", dir=workdir))
    try:
        trace = work / "big-ftrace.txt"
        t0 = time.perf_counter()
        n = write_big(trace, gigabytes)
        print(f"\nbig ftrace text: {trace.stat().st_size / 2**30:.2f} GiB, {n} lines, written in "
              f"{time.perf_counter() - t0:.0f} s")
        m = run_child([*MOBIPERF, "ingest", "--no-report", str(trace), "-o", str(work / "run")])
        print(f"  ingest+analyze     wall {m['wall']:6.1f} s   cpu {m['cpu']:6.1f} s   peak RSS {m['rss_mb']:7.0f} MB"
              f"   ({trace.stat().st_size / 2**20 / m['cpu']:.0f} MB/s of CPU)")
        over = m["rss_mb"] > TARGET_BIG_RSS_MB
        return [f"big: peak RSS {m['rss_mb']:.0f} MB > {TARGET_BIG_RSS_MB} MB"] if over else []
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--big-gb", type=float, default=0, help="also ingest an ftrace text of this many GB")
    ap.add_argument("--workdir", type=Path, default=Path("/var/tmp"), help="where the big trace is written")
    ap.add_argument("--no-small", action="store_true")
    args = ap.parse_args()
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    failures = [] if args.no_small else small(args.repeat)
    if args.big_gb:
        failures += big(args.big_gb, args.workdir)
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    if failures:
        print("\nmissed targets:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("\nall targets met")


if __name__ == "__main__":
    main()
