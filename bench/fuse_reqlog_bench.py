"""What the bundled daemons' request log costs (fusecore's -o requests=PATH, reference-impl/fusecore/fc_reqlog.c):
the daemon's CPU time per FUSE request with the log and without, side by side.

For each preset (legacy: fusecore reads /dev/fuse with read(2), one thread; bfuse: libfuse's loop with splice,
where the log sees each request's header through tee(2)), bFUSE serves a tmpfs directory (no device: the daemon's
own work only) and `dd bs=4k` writes N blocks, one FUSE_WRITE each. The daemon's user + system time over its whole
life comes from wait4(2) when it exits; divided by the requests it counted. Runs with and without the log
alternate (round robin), medians of --repeat. Printed: CPU us per request without and with the log, their ratio
and difference (the log's cost per request), and the load average.

    python bench/fuse_reqlog_bench.py                  # 20,000 writes, 5 repetitions
    python bench/fuse_reqlog_bench.py --quick          # 4,000 writes, 2 repetitions: checks the bench
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BFUSE = REPO / "reference-impl" / "bin" / "bfuse"


def one_run(preset: str, logged: bool, blocks: int, work: Path) -> tuple[float, int]:
    """(daemon CPU seconds, FUSE requests it counted) of one mount, write and unmount."""
    src, mnt = work / "src", work / "mnt"
    for d in (src, mnt):
        d.mkdir(exist_ok=True)
    counters, requests = work / "counters.json", work / "requests.tsv"
    options = f"preset={preset},counters={counters}" + (f",requests={requests}" if logged else "")
    daemon = subprocess.Popen([str(BFUSE), "-f", "-o", options, str(src), str(mnt)], stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while not os.path.ismount(mnt):
            if daemon.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"bfuse did not mount: {daemon.stderr.read().decode()[-400:]}")
            time.sleep(0.02)
        subprocess.run(["dd", "if=/dev/zero", f"of={mnt}/f", "bs=4k", f"count={blocks}"], check=True,
                       capture_output=True, timeout=600)
    finally:
        subprocess.run(["umount", str(mnt)], check=False, timeout=60)
    _, status, usage = os.wait4(daemon.pid, 0)
    daemon.returncode = status
    ops = json.loads(counters.read_text())["ops"]
    (src / "f").unlink(missing_ok=True)
    if logged:
        lines = sum(1 for ln in requests.read_text().splitlines() if ln and ln[0].isdigit())
        assert lines >= blocks, f"the log holds {lines} requests for {blocks} writes"
    return usage.ru_utime + usage.ru_stime, sum(op["requests"] for op in ops.values())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.blocks, args.repeat = 4_000, 2
    if os.geteuid() != 0 or not Path("/dev/fuse").exists() or not BFUSE.exists():
        print("fuse_reqlog_bench: needs root, /dev/fuse and reference-impl/bin/bfuse; skipped")
        return 0
    load = open("/proc/loadavg").read().split()[:3]
    print(f"fuse_reqlog_bench: {args.blocks} writes of 4 KiB, {args.repeat} alternated repetitions, "
          f"load average {' '.join(load)}")
    with tempfile.TemporaryDirectory(prefix="reqlog-bench-", dir="/dev/shm") as tmp:
        for preset in ("legacy", "bfuse"):
            per_request: dict[bool, list[float]] = {False: [], True: []}
            for _ in range(args.repeat):
                for logged in (False, True):
                    cpu, n = one_run(preset, logged, args.blocks, Path(tmp))
                    per_request[logged].append(cpu / n * 1e6)
            off, on = statistics.median(per_request[False]), statistics.median(per_request[True])
            print(f"  {preset:<7} CPU per request: {off:6.2f} us without the log, {on:6.2f} us with it: "
                  f"ratio {on / off:4.2f}, the log costs {on - off:+5.2f} us a request")
    print(f"  load average after: {' '.join(open('/proc/loadavg').read().split()[:3])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
