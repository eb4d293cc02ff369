"""Parser throughput against blkparse, on the same block events (one run; the machine may be loaded).

    python bench/parse_bench.py [--lines 2000000] [--workdir /tmp]

1. A real ftrace text trace (the 6.18 fixture of 4 KiB O_DSYNC writes) is repeated, with shifted timestamps, to
   --lines lines: the ftrace text input.
2. The same events are written as blk_io_trace v0x07 records (vectorized converter below: block_bio_queue -> Q,
   block_rq_issue -> D, ...; plug/unplug get the trace's device): the blktrace binary input.
3. Timed, each in its own process so its peak memory (max RSS) is its own:
     mobiperf ftrace text -> block_event table       parse_ftrace_text
     mobiperf blktrace binary -> block_event table   parse_blktrace
     blkparse binary -> text                          blkparse -i - (pipe mode) > /dev/null
Targets (issue 6): ftrace text >= 2 M lines/s and >= 2.3x blkparse's text output; binary >= 3x blkparse.
The numba code is compiled once and cached; a warm-up call on a tiny file loads the cache before timing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "tests" / "fixtures" / "ftrace" / "k6.18-dd-4k-direct-dsync.txt"
ACTION = {"block_bio_queue": 1, "block_bio_backmerge": 2, "block_bio_frontmerge": 3, "block_getrq": 4,
          "block_rq_requeue": 6, "block_rq_issue": 7, "block_rq_complete": 8, "block_plug": 9, "block_unplug": 10,
          "block_rq_insert": 12, "block_split": 13}
CATEGORY = {1: 0x10, 2: 0x10, 3: 0x10, 4: 0x10, 6: 0x20, 7: 0x40, 8: 0x80, 9: 0x10, 10: 0x10, 12: 0x10, 13: 0}
BLK_DTYPE = np.dtype([("magic", "<u4"), ("sequence", "<u4"), ("time", "<u8"), ("sector", "<u8"),
                      ("bytes", "<u4"), ("action", "<u4"), ("pid", "<u4"), ("device", "<u4"), ("cpu", "<u4"),
                      ("error", "<u2"), ("pdu_len", "<u2")])


def make_ftrace_text(path: Path, lines: int) -> int:
    src = FIXTURE.read_text().splitlines()
    period_s = 10
    written = 0
    with open(path, "w") as out:
        k = 0
        while written < lines:
            chunk = []
            for line in src[:lines - written]:
                head, sep, rest = line.partition("]")
                flags, ts_rest = rest[:7], rest[7:]
                secs, _, tail = ts_rest.strip().partition(".")
                chunk.append(f"{head}]{flags} {int(secs) + k * period_s:5d}.{tail}")
            out.write("\n".join(chunk) + "\n")
            written += len(chunk)
            k += 1
    return written


def make_blktrace(events, path: Path) -> int:
    """block_event rows -> blk_io_trace v0x07 records (U carries its request count as a big-endian PDU)."""
    import polars as pl

    ev = events.with_columns(action=pl.col("event").replace_strict(ACTION, default=0, return_dtype=pl.Int64))
    ev = ev.filter(pl.col("action") > 0)
    dev_major = int(ev.filter(pl.col("dev_major") >= 0)["dev_major"][0])
    dev_minor = int(ev.filter(pl.col("dev_major") >= 0)["dev_minor"][0])
    n = len(ev)
    rwbs = ev["rwbs"]
    tc = (np.where(rwbs.str.contains("W").to_numpy(), 2, 1) | np.where(rwbs.str.contains("S").to_numpy(), 8, 0)
          | np.where(rwbs.str.contains("M").to_numpy(), 0x1000, 0))
    action = ev["action"].to_numpy()
    tc |= np.vectorize(CATEGORY.get)(action) | np.where((action >= 6) & (action <= 12) & (action != 9)
                                                        & (action != 10), 0x100, 0)
    rec = np.zeros(n, BLK_DTYPE)
    rec["magic"] = 0x65617407
    rec["sequence"] = np.arange(1, n + 1)
    rec["time"] = ev["ts"].to_numpy()
    rec["sector"] = np.maximum(ev["sector"].to_numpy(), 0)
    rec["bytes"] = np.maximum(ev["size_bytes"].to_numpy(), 0)
    rec["action"] = action | (tc << 16)
    rec["pid"] = ev["pid"].to_numpy()
    rec["device"] = (dev_major << 20) | dev_minor
    rec["cpu"] = 0  # one stream: blkparse pipe mode wants per-CPU sequences, all on cpu 0 here
    is_unplug = action == 10
    rec["pdu_len"] = np.where(is_unplug, 8, 0)
    # Interleave the 8-byte PDUs of unplugs: build the byte stream with one numpy pass.
    sizes = 48 + rec["pdu_len"].astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    out = np.zeros(int(sizes.sum()), np.uint8)
    raw = rec.view(np.uint8).reshape(n, 48)
    out[offsets[:, None] + np.arange(48)] = raw
    pdu = np.frombuffer(np.full(int(is_unplug.sum()), 1, ">u8").tobytes(), np.uint8).reshape(-1, 8)
    out[offsets[is_unplug][:, None] + 48 + np.arange(8)] = pdu
    path.write_bytes(out.tobytes())
    return n


def timed_child(code: str) -> dict:
    """Run code in a fresh interpreter; it prints a JSON dict; add the child's peak RSS."""
    wrapper = (f"import json, resource, sys, time\n{code}\n"
               # VmHWM is this process's own peak; ru_maxrss would include the parent's (kept across exec).
               "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0].split()[1]\n"
               "RESULT['max_rss_mb'] = int(hwm) / 1024\nprint(json.dumps(RESULT))\n")
    done = subprocess.run([sys.executable, "-c", wrapper], capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    return json.loads(done.stdout.strip().splitlines()[-1])


def time_blkparse(path: Path) -> dict:
    """blkparse in pipe mode, text to /dev/null, timed from a child whose only child is blkparse (its peak RSS)."""
    return timed_child(
        "import resource, subprocess\n"
        f"f = open({str(path)!r}, 'rb')\n"
        "t = time.perf_counter()\n"
        "done = subprocess.run(['blkparse', '-i', '-'], stdin=f, stdout=subprocess.DEVNULL, "
        "stderr=subprocess.DEVNULL, timeout=1800)\n"
        "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
        "RESULT = {'wall_s': time.perf_counter() - t, 'ok': done.returncode == 0, "
        "'cpu_s': u.ru_utime + u.ru_stime, 'blkparse_rss_mb': u.ru_maxrss / 1024}\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lines", type=int, default=2_000_000)
    ap.add_argument("--workdir", default=tempfile.gettempdir())
    args = ap.parse_args()
    if not shutil.which("blkparse"):
        raise SystemExit("blkparse is not installed (Debian: blktrace)")
    work = Path(tempfile.mkdtemp(prefix="mobiperf-parse-bench-", dir=args.workdir))
    try:
        text = work / "trace.txt"
        n_lines = make_ftrace_text(text, args.lines)
        sys.path.insert(0, str(REPO))
        from mobiperf.collectors.parse.ftrace_text import parse_ftrace_text
        events = parse_ftrace_text(text).block_event
        blk = work / "trace.blkbin"
        n_records = make_blktrace(events, blk)
        warm = f"from mobiperf.collectors.parse.ftrace_text import parse_ftrace_text\nparse_ftrace_text({str(FIXTURE)!r})\n"
        ft = timed_child(warm + f"t = time.perf_counter(); c = time.process_time(); "
                         f"r = parse_ftrace_text({str(text)!r}); "
                         "RESULT = {'wall_s': time.perf_counter() - t, 'cpu_s': time.process_time() - c, "
                         "'rows': len(r.block_event)}")
        warm_b = ("from mobiperf.collectors.parse.blktrace import parse_blktrace\n"
                  f"parse_blktrace([{str(REPO / 'tests/fixtures/blktrace/loop-dd-4k-direct.blkbin')!r}])\n")
        bt = timed_child(warm_b + f"from pathlib import Path\nt = time.perf_counter(); c = time.process_time(); "
                         f"r = parse_blktrace([Path({str(blk)!r})]); "
                         "RESULT = {'wall_s': time.perf_counter() - t, 'cpu_s': time.process_time() - c, "
                         "'rows': len(r.block_event)}")
        bp = time_blkparse(blk)
        if not bp["ok"]:
            raise SystemExit("blkparse failed on the converted records")
        rate = lambda n, s: n / s / 1e6  # noqa: E731
        print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} (shared, figures are noisy)")
        print(f"input: {n_lines:,} ftrace text lines ({text.stat().st_size / 1e6:.0f} MB); "
              f"{n_records:,} blktrace records ({blk.stat().st_size / 1e6:.0f} MB)")
        print(f"{'parser':<42}{'wall s':>7}{'cpu s':>7}{'M ev/s wall':>12}{'M ev/s cpu':>11}{'peak MB':>8}"
              f"{'x blkparse wall':>16}{'x blkparse cpu':>15}")
        bp_wall, bp_cpu = rate(n_records, bp["wall_s"]), rate(n_records, bp["cpu_s"])
        rows = [("mobiperf ftrace text -> block_event", ft, n_lines, ft["max_rss_mb"]),
                ("mobiperf blktrace binary -> block_event", bt, n_records, bt["max_rss_mb"]),
                ("blkparse binary -> text (> /dev/null)", bp, n_records, bp["blkparse_rss_mb"])]
        for name, m, n, mem in rows:
            w, c = rate(n, m["wall_s"]), rate(n, m["cpu_s"])
            print(f"{name:<42}{m['wall_s']:>7.2f}{m['cpu_s']:>7.2f}{w:>12.2f}{c:>11.2f}{mem:>8.0f}"
                  f"{w / bp_wall:>15.2f}x{c / bp_cpu:>14.2f}x")
        print("targets: text >= 2.00 M lines/s and >= 2.30x blkparse; binary >= 3.00x blkparse "
              "(cpu columns: time on a CPU, less sensitive to the other tenants of a shared machine)")
        if ft["rows"] != n_lines or bt["rows"] != n_records:
            raise SystemExit(f"row counts differ: text {ft['rows']} of {n_lines}, binary {bt['rows']} of {n_records}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
