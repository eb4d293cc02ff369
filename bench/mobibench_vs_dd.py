"""mobibench against dd and fio doing the same IO: is the generator itself ever the bottleneck?

Two workloads, each tool on its own pre-created file in --dir, repetitions interleaved (A B C, A B C, ...) so
drift on a shared machine hits every tool alike:

  seq512k   sequential 512 KiB writes over a pre-created file, then one fsync (inside the timed part)
            mobibench -a 0 -y 0 -r 512 | dd bs=512k conv=notrunc,fsync | fio rw=write bs=512k psync end_fsync=1
  rand4k    4 KiB random writes, fsync after every write, then a final fsync
            mobibench -a 1 -y 2 -r 4   | fio rw=randwrite bs=4k psync fsync=1 end_fsync=1   (dd cannot)

Each tool's own figure is used (mobibench's timed window from its JSON, dd's summary line, fio's JSON bw), because
that is what a user compares. mobibench runs with --no-drop-caches (the peers do not drop caches either) and with
its trace markers off. Prints medians, min-max ranges and the ratio mobibench/peer (>1: mobibench faster).

    python bench/mobibench_vs_dd.py [--dir DIR] [--reps 5] [--seq-mib 128] [--rand-mib 16]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "MOBIBENCH_TRACE_MARKER": ""}


def mobibench_bps(binary: Path, workdir: Path, args: list[str]) -> float:
    out = workdir / "mobibench.json"
    subprocess.run([str(binary), "-q", "--no-drop-caches", "-p", str(workdir / "mobibench"), *args,
                    f"--json={out}"], check=True, capture_output=True, timeout=600, env=ENV)
    return json.loads(out.read_text())["results"]["throughput_bytes_per_s"]


def dd_bps(target: Path, mib: int) -> float:
    proc = subprocess.run(["dd", "if=/dev/zero", f"of={target}", "bs=512k", f"count={mib * 2}",
                           "conv=notrunc,fsync"], check=True, capture_output=True, text=True, timeout=600)
    # "134217728 bytes (134 MB, 128 MiB) copied, 0.0984 s, 1.4 GB/s"
    match = re.search(r"^(\d+) bytes .* copied, ([\d.]+) s", proc.stderr, re.M)
    if not match:
        raise RuntimeError(f"unexpected dd output: {proc.stderr!r}")
    return int(match[1]) / float(match[2])


def fio_bps(target: Path, mib: int, extra: list[str]) -> float:
    proc = subprocess.run(["fio", "--name=peer", f"--filename={target}", f"--size={mib}m", "--ioengine=psync",
                           "--end_fsync=1", "--output-format=json", *extra],
                          check=True, capture_output=True, text=True, timeout=600)
    job = json.loads(proc.stdout[proc.stdout.index("{"):])["jobs"][0]
    return float(job["write"]["bw_bytes"])


def precreate(path: Path, mib: int) -> None:
    """A full-size file of data so every tool overwrites (no allocation in the timed part)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.stat().st_size < mib << 20:
        subprocess.run(["dd", "if=/dev/zero", f"of={path}", "bs=1M", f"count={mib}", "conv=fsync"],
                       check=True, capture_output=True, timeout=600)


def summarize(values: list[float]) -> tuple[float, float, float]:
    return statistics.median(values), min(values), max(values)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, help="directory to run in (default: a temporary directory)")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--seq-mib", type=int, default=128)
    parser.add_argument("--rand-mib", type=int, default=16)
    parser.add_argument("--binary", type=Path, default=REPO / "reference-impl" / "bin" / "mobibench")
    opts = parser.parse_args()

    if not opts.binary.exists():
        subprocess.run(["make", "-s", "-C", str(REPO / "reference-impl")], check=True, timeout=600)
    missing = [tool for tool in ("dd", "fio") if shutil.which(tool) is None]
    if missing:
        print(f"missing peers: {', '.join(missing)} (Debian packages coreutils, fio)", file=sys.stderr)
        return 1

    base = opts.dir or Path(tempfile.mkdtemp(prefix="mobibench-bench-"))
    work = base / "mobibench-vs-dd"
    work.mkdir(parents=True, exist_ok=True)
    try:
        seq, rand = opts.seq_mib, opts.rand_mib
        precreate(work / "mobibench" / "test.dat0", max(seq, rand))
        precreate(work / "dd.dat", seq)
        precreate(work / "fio.dat", max(seq, rand))
        runs = {
            "seq512k": {
                "mobibench": lambda: mobibench_bps(opts.binary, work, ["-f", str(seq * 1024), "-r", "512",
                                                                        "-a", "0", "-y", "0"]),
                "dd": lambda: dd_bps(work / "dd.dat", seq),
                "fio": lambda: fio_bps(work / "fio.dat", seq, ["--rw=write", "--bs=512k"]),
            },
            "rand4k": {
                "mobibench": lambda: mobibench_bps(opts.binary, work, ["-f", str(rand * 1024), "-r", "4",
                                                                        "-a", "1", "-y", "2"]),
                "fio": lambda: fio_bps(work / "fio.dat", rand, ["--rw=randwrite", "--bs=4k", "--fsync=1"]),
            },
        }
        results: dict[str, dict[str, list[float]]] = {w: {t: [] for t in tools} for w, tools in runs.items()}
        for rep in range(opts.reps):
            for workload, tools in runs.items():
                for tool, fn in tools.items():
                    results[workload][tool].append(fn())
            print(f"repetition {rep + 1}/{opts.reps} done", file=sys.stderr)
    finally:
        if opts.dir is None:
            shutil.rmtree(base, ignore_errors=True)
        else:
            shutil.rmtree(work, ignore_errors=True)

    print(f"mobibench vs dd / fio, {opts.reps} repetitions each, medians (min-max); dir {base}")
    print(f"seq512k: {opts.seq_mib} MiB, 512 KiB writes + final fsync; "
          f"rand4k: {opts.rand_mib} MiB, 4 KiB random writes + fsync each")
    header = f"{'workload':<9} {'tool':<10} {'MB/s median':>12} {'range MB/s':>19} {'IOPS':>9} {'mobibench/peer':>15}"
    print(header)
    print("-" * len(header))
    for workload, tools in results.items():
        ours = statistics.median(tools["mobibench"])
        for tool, values in tools.items():
            med, low, high = summarize(values)
            iops = med / 4096 if workload == "rand4k" else med / (512 * 1024)
            ratio = "" if tool == "mobibench" else f"{ours / med:.3f}"
            print(f"{workload:<9} {tool:<10} {med / 1e6:>12.1f} {low / 1e6:>9.1f}-{high / 1e6:<9.1f}"
                  f"{iops:>9.0f} {ratio:>15}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
