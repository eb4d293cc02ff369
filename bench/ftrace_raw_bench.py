"""Binary ftrace decoding speed: trace_pipe_raw pages -> every table, against the text parser on the same events.

    python bench/ftrace_raw_bench.py [--copies 200] [--workdir /tmp]

Input: the captured fixture tests/fixtures/ftrace/raw-6.18-rawdec.tar.gz (block, ext4, jbd2, writeback and
syscall events of a busy 2-CPU machine, ~96 event types), its page files repeated --copies times with each copy's
page timestamps shifted by 10 s (so the merged order stays a real trace's), and its text repeated the same way.
Each parser runs in its own process after a warm-up call on the fixture itself (numba's cache loaded, not timed);
reported: records, wall seconds, CPU seconds (user + sys of the process, getrusage) and records per CPU second.
  raw         parse_ftrace_raw: every table (its non-block bodies go through the text path's body parsers)
  raw-decode  the same without those body parsers: page walk, field columns, block rows, rendered bodies
  text        parse_ftrace_text on the same events as text
The machine is shared: CPU time is the figure to compare, and the load average is printed with it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "tests" / "fixtures" / "ftrace" / "raw-6.18-rawdec.tar.gz"
SHIFT_NS = 10_000_000_000

CHILD = r"""
import json, resource, sys, time
from pathlib import Path
kind, path, warm = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
if kind.startswith("raw"):
    import mobiperf.collectors.parse.ftrace_raw as ftrace_raw
    if kind == "raw-decode":  # pages -> fields -> rendered bodies only: the text path's body parsers left out
        ftrace_raw.parse_other_events = lambda head, rep: ({"fs_event": head}, {})
    run = lambda d: ftrace_raw.parse_ftrace_raw(d / "ftrace_raw", d / "formats")
    count = lambda t: t.events_total
else:
    from mobiperf.collectors.parse.ftrace_text import parse_ftrace_text
    run = lambda d: parse_ftrace_text(d / "ftrace.txt")
    count = lambda t: t.lines
run(warm)
r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
tables = run(path)
wall, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
rows = {"block_event": len(tables.block_event), **{k: len(v) for k, v in tables.events.items()}}
print(json.dumps({"records": count(tables), "wall_s": wall, "cpu_s": cpu, "rows": rows}))
"""


def replicate(src: Path, dest: Path, copies: int) -> None:
    """dest: the capture with its pages and its text repeated, each copy shifted by SHIFT_NS."""
    (dest / "ftrace_raw").mkdir(parents=True)
    os.symlink(src / "formats", dest / "formats")
    for name in ("saved_cmdlines", "kernel_hz"):
        (dest / "ftrace_raw" / name).write_bytes((src / "ftrace_raw" / name).read_bytes())
    for cpu in src.glob("ftrace_raw/cpu*"):
        pages = np.frombuffer(cpu.read_bytes(), np.uint8).reshape(-1, 4096)
        stamp = pages[:, :8].copy().view("<u8")
        with open(dest / "ftrace_raw" / cpu.name, "wb") as out:
            for k in range(copies):
                copy = pages.copy()
                copy[:, :8] = (stamp + np.uint64(k * SHIFT_NS)).view(np.uint8).reshape(-1, 8)
                out.write(copy.tobytes())
    lines = [ln for ln in (src / "ftrace.txt").read_text().splitlines() if not ln.startswith("#")]
    stamp = re.compile(r"(\s)(\d+)\.(\d{6}): ")
    with open(dest / "ftrace.txt", "w") as out:
        for k in range(copies):
            shift = k * SHIFT_NS // 1_000_000_000
            out.write("\n".join(stamp.sub(lambda m: f"{m[1]}{int(m[2]) + shift}.{m[3]}: ", ln, count=1)
                                for ln in lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--copies", type=int, default=200)
    ap.add_argument("--workdir", default="/tmp")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=args.workdir) as work:
        with tarfile.open(FIXTURE) as tar:
            tar.extractall(work, filter="data")
        src = Path(work) / "raw-6.18-rawdec"
        big = Path(work) / "big"
        replicate(src, big, args.copies)
        results = {}
        for kind in ("raw", "raw-decode", "text"):
            out = subprocess.run([sys.executable, "-c", CHILD, kind, str(big), str(src)], check=True,
                                 capture_output=True, text=True, timeout=3600).stdout
            results[kind] = json.loads(out.strip().splitlines()[-1])
        pages = sum(p.stat().st_size for p in big.glob("ftrace_raw/cpu*"))
        size = {"raw": pages, "raw-decode": pages, "text": (big / "ftrace.txt").stat().st_size}
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}, copies {args.copies}")
    for kind, r in results.items():
        print(f"{kind:10s} {r['records']:>10,} records  {size[kind] / 1e6:7.1f} MB  wall {r['wall_s']:6.2f} s  "
              f"cpu {r['cpu_s']:6.2f} s  {r['records'] / r['cpu_s'] / 1e6:5.2f} M records/cpu-s")
    print("rows raw :", results["raw"]["rows"])
    print("rows text:", results["text"]["rows"])


if __name__ == "__main__":
    main()
