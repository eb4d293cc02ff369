"""A/B of the parse and pairing modules: this working tree against a commit, on one trace, back to back.

    python bench/analyze_ab.py [--commit e589724] [--events 5000000] [--pairs 3]

The machine is shared, so speed work is judged by CPU time and by runs of both versions alternated in fresh
processes (each process pays for its own fresh memory, as the pipeline does). Version A takes the blktrace
parser and the pairing modules (pairing.py, pairing_kernel.py, fifo.py) of --commit, swapped in under their
package names; everything else, and the trace (bench/analyze_bench.py's replayed golden events), is shared.
Each line: wall, CPU (user + system, page faults) and the stages of analyze_bench.run_mobiperf, with the load
average when it started; the results (requests, matched share, mean write D2C) must agree.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SWAPPED = {"mobiperf.collectors.parse.fifo": "collectors/parse/fifo.py",
           "mobiperf.collectors.parse.pairing_kernel": "collectors/parse/pairing_kernel.py",
           "mobiperf.collectors.parse.pairing": "collectors/parse/pairing.py",
           "mobiperf.collectors.parse.blktrace_compiled": "collectors/parse/blktrace_compiled.py"}


def use_modules_of(src: Path) -> None:
    """Import the SWAPPED modules from src (files of another commit) under their package names."""
    import mobiperf.analyzers  # noqa: F401  (the packages first, then their swapped modules)
    import mobiperf.collectors.parse  # noqa: F401
    for name, rel in SWAPPED.items():
        spec = importlib.util.spec_from_file_location(name, src / rel)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)


def child(stem: Path, warm: Path, src: str) -> None:
    if src:
        use_modules_of(Path(src))
    sys.path.insert(0, str(REPO / "bench"))
    import analyze_bench

    analyze_bench.run_mobiperf(warm)  # numba compile / cache load
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    wall, info = analyze_bench.run_mobiperf(stem)
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    info.update(wall_s=wall, user_s=r1.ru_utime - r0.ru_utime, sys_s=r1.ru_stime - r0.ru_stime,
                minflt=r1.ru_minflt - r0.ru_minflt)
    print(json.dumps(info))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commit", default="e589724")
    ap.add_argument("--events", type=int, default=5_000_000)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(Path(args.child[0]), Path(args.child[1]), args.child[2])
        return
    sys.path.insert(0, str(REPO / "bench"))
    import analyze_bench

    with tempfile.TemporaryDirectory(prefix="analyze-ab-", dir="/var/tmp") as tmp:
        work = Path(tmp)
        for rel in SWAPPED.values():
            (work / "a" / rel).parent.mkdir(parents=True, exist_ok=True)
            (work / "a" / rel).write_bytes(subprocess.run(["git", "show", f"{args.commit}:{rel}"], cwd=REPO,
                                                          check=True, capture_output=True).stdout)
        base = analyze_bench.golden_events()
        analyze_bench.write_blktrace(analyze_bench.replicate(base, args.events), work / "bench")
        analyze_bench.write_blktrace(base, work / "warm")
        print(f"A = {args.commit} ({', '.join(SWAPPED.values())}), B = working tree; {args.events:,} events")
        for _ in range(args.pairs):
            for label, src in (("A", str(work / "a")), ("B", "")):
                load = open("/proc/loadavg").read().split()[0]
                done = subprocess.run([sys.executable, __file__, "--child", str(work / "bench"), str(work / "warm"),
                                       src], capture_output=True, text=True, cwd=REPO, timeout=3600)
                if done.returncode:
                    sys.exit(done.stderr[-3000:])
                d = json.loads(done.stdout.strip().splitlines()[-1])
                print(f"{label} load {load:>5}  wall {d['wall_s']:5.2f} s  CPU {d['cpu_s']:5.2f} s (system "
                      f"{d['sys_s']:.2f}, {d['minflt'] / 1e3:.0f} k faults)  parse {d['parse_cpu_s']:.2f}  pair "
                      f"{d['pair_cpu_s']:.2f}  classify {d['classify_cpu_s']:.2f}  | requests {d['requests']:,} "
                      f"matched {d['matched']:.4f} D2C {d['d2c_write_mean_us']:.3f} us", flush=True)


if __name__ == "__main__":
    main()
