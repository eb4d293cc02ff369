"""Parse + analyze speed on a 5 M-event block trace, against blkparse + btt on the same events.

    python bench/analyze_bench.py [--events 5000000] [--repeat 3]

The trace is real: the block events of the golden fixtures (tests/fixtures/golden, captured on this machine's
emulated stack), replayed back to back with shifted times and sectors until there are enough events, and written
as blktrace binary (struct blk_io_trace v0x07, two per-CPU files), the format both tools read. Plug and unplug
events are kept: they are part of a real trace and both tools must read past them.

mobiperf: parse_blktrace (numba record walker, numpy gathers) -> block request pairing (vectorized FIFO per
device and sector) -> block_io classification -> io_class, io_share and latency_summary, all in memory.
peers:    blkparse -i NAME -d merged.bin -o /dev/null (the step btt needs) and btt -i merged.bin.
The first mobiperf call also compiles the numba walker; a warm-up on a small file runs before timing.
Prints a table of medians and ranges over the repetitions; the machine is shared, so figures are noisy.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

REPO = Path(__file__).resolve().parent.parent
GOLDEN = REPO / "tests" / "fixtures" / "golden"

ACTIONS = {"block_bio_queue": (1, 0x10), "block_bio_backmerge": (2, 0x10), "block_bio_frontmerge": (3, 0x10),
           "block_getrq": (4, 0x10), "block_rq_requeue": (6, 0x20), "block_rq_issue": (7, 0x40),
           "block_rq_complete": (8, 0x80), "block_plug": (9, 0x10), "block_unplug": (10, 0x10),
           "block_rq_insert": (12, 0x10), "block_split": (13, 0)}
REQUEST_LEVEL = {"block_rq_requeue", "block_rq_issue", "block_rq_complete", "block_rq_insert"}
HEADER = np.dtype([("magic", "<u4"), ("sequence", "<u4"), ("time", "<u8"), ("sector", "<u8"), ("bytes", "<u4"),
                   ("action", "<u4"), ("pid", "<u4"), ("device", "<u4"), ("cpu", "<u4"), ("error", "<u2"),
                   ("pdu_len", "<u2")])


def golden_events() -> pl.DataFrame:
    from mobiperf.collectors.parse.ftrace_text import parse_ftrace_text

    frames, offset = [], 0
    for d in sorted(GOLDEN.iterdir()):
        trace = d / "raw" / "rep0" / "ftrace.txt"
        if trace.exists():
            ev = parse_ftrace_text(trace).block_event
            frames.append(ev.with_columns(pl.col("ts") - pl.col("ts").min() + offset))
            offset = int(frames[-1]["ts"].max()) + 1_000_000
    return pl.concat(frames)


def category_bits(rwbs: str) -> int:
    from mobiperf.collectors.parse.block_requests import decode_request_rwbs

    d = decode_request_rwbs(rwbs) if rwbs else None
    bits = 0
    if d is None:
        return 0x1
    bits |= {"write": 0x2, "discard": 0x2000 | 0x2}.get(d.op, 0x1)
    if d.op == "flush" or d.is_preflush:
        bits |= 0x4
    bits |= (0x8 if d.is_sync else 0) | (0x1000 if d.is_meta else 0) | (0x8000 if d.is_fua else 0) \
        | (0x800 if d.is_readahead else 0)
    return bits


def replicate(events: pl.DataFrame, target: int) -> pl.DataFrame:
    """Back-to-back copies with times shifted past the previous copy and sectors moved to fresh space."""
    span = int(events["ts"].max()) + 1_000_000
    copies = -(-target // len(events))
    sector_step = int(events["sector"].max()) + 1 << 0
    parts = [events.with_columns(pl.col("ts") + i * span,
                                 pl.when(pl.col("sector") >= 0).then(pl.col("sector") + (i % 64) * sector_step)
                                 .otherwise(pl.col("sector")))
             for i in range(copies)]
    return pl.concat(parts).head(target)


def write_blktrace(events: pl.DataFrame, stem: Path, cpus: int = 2) -> int:
    """events -> STEM.blktrace.<cpu> files of v0x07 records; returns the number of records."""
    ev = events.with_columns(cpu=(pl.col("cpu") % cpus))
    act = ev["event"].replace_strict({k: v[0] for k, v in ACTIONS.items()}, return_dtype=pl.UInt32).to_numpy()
    cat = ev["event"].replace_strict({k: v[1] for k, v in ACTIONS.items()}, return_dtype=pl.UInt32).to_numpy()
    rwbs_bits = {s: category_bits(s) for s in ev["rwbs"].unique().to_list()}
    bits = ev["rwbs"].replace_strict(rwbs_bits, return_dtype=pl.UInt32).to_numpy()
    fs = np.where(ev["event"].is_in(list(REQUEST_LEVEL)).to_numpy(), 0x100, 0).astype(np.uint32)
    is_split = (ev["event"] == "block_split").to_numpy()
    is_plug = ev["event"].is_in(["block_plug", "block_unplug"]).to_numpy()
    sector = ev["sector"].to_numpy()
    nr = ev["nr_sector"].to_numpy()
    for cpu in range(cpus):
        sel = np.flatnonzero(ev["cpu"].to_numpy() == cpu)
        rec = np.zeros(len(sel), HEADER)
        rec["magic"] = 0x65617407
        # the kernel numbers records per (device, cpu): no gaps, so no lost records for either tool to report
        dev_sel = (ev["dev_major"].to_numpy()[sel].astype(np.int64) << 20) | ev["dev_minor"].to_numpy()[sel]
        rec["sequence"] = pl.DataFrame({"d": dev_sel}).select(pl.int_range(1, pl.len() + 1).over("d"))\
            .to_series().to_numpy()
        rec["time"] = ev["ts"].to_numpy()[sel]
        rec["sector"] = np.where(sector[sel] >= 0, sector[sel], np.where(is_plug[sel], 0, -1)).astype(np.uint64)
        rec["bytes"] = np.where(is_split[sel] | is_plug[sel], 0, np.maximum(nr[sel], 0) * 512)
        rec["action"] = act[sel] | ((cat[sel] | bits[sel] | fs[sel]) << 16)
        rec["pid"] = ev["pid"].to_numpy()[sel]
        rec["device"] = (ev["dev_major"].to_numpy()[sel].astype(np.uint32) << 20) | ev["dev_minor"].to_numpy()[sel]
        rec["cpu"] = cpu
        pdu = np.zeros(len(sel), np.uint64)
        split_sel = is_split[sel]
        pdu[split_sel] = (sector[sel][split_sel] + nr[sel][split_sel]).astype(np.uint64)
        has_pdu = split_sel | is_plug[sel]
        pdu[is_plug[sel]] = 1
        rec["pdu_len"] = np.where(has_pdu, 8, 0)
        # interleave headers and their 8-byte big-endian PDUs
        out = bytearray()
        hb = rec.tobytes()
        be = pdu.astype(">u8").tobytes()
        size = HEADER.itemsize
        idx = np.flatnonzero(has_pdu)
        last = 0
        for i in idx.tolist():  # only splits and plugs carry a PDU
            out += hb[last * size:(i + 1) * size]
            out += be[i * 8:(i + 1) * 8]
            last = i + 1
        out += hb[last * size:]
        Path(f"{stem}.blktrace.{cpu}").write_bytes(out)
    return len(ev)


def run_mobiperf(stem: Path) -> tuple[float, dict]:
    from mobiperf.analyzers.block_io import classify_block_io
    from mobiperf.analyzers.io_class import count_io_classes, share_io
    from mobiperf.analyzers.latency import summarize_block_latency
    from mobiperf.collectors.parse.pairing import pair_block_requests
    from mobiperf.collectors.parse.blktrace import parse_blktrace

    files = sorted(stem.parent.glob(f"{stem.name}.blktrace.*"))
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    c0 = time.process_time()
    t0 = time.perf_counter()
    parsed = parse_blktrace(files)
    t1, c1 = time.perf_counter(), time.process_time()
    rq, stats = pair_block_requests(parsed.block_event)
    t2, c2 = time.perf_counter(), time.process_time()
    bio = classify_block_io(rq)
    count_io_classes(bio), share_io(bio)
    lat = summarize_block_latency(bio)
    t3 = time.perf_counter()
    cpu = time.process_time() - c0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    stage_cpu = {"parse_cpu_s": c1 - c0, "pair_cpu_s": c2 - c1, "classify_cpu_s": time.process_time() - c2}
    d2c = lat.filter((pl.col("phase") == "d2c") & (pl.col("op") == "write"))["mean_ns"]
    return t3 - t0, {"cpu_s": cpu, "sys_s": r1.ru_stime - r0.ru_stime, "minflt": r1.ru_minflt - r0.ru_minflt,
                     **stage_cpu, "parse_s": t1 - t0, "pair_s": t2 - t1, "classify_s": t3 - t2,
                     "requests": stats.requests, "records": parsed.records, "lost": parsed.lost_records,
                     "matched": stats.matched_share, "d2c_write_mean_us": float(d2c[0]) / 1e3 if len(d2c) else None}


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_peers(stem: Path, work: Path) -> tuple[float, float, float]:
    merged = work / "merged.bin"
    c0 = _children_cpu()
    t0 = time.perf_counter()
    subprocess.run(["blkparse", "-q", "-i", stem.name, "-D", str(stem.parent), "-d", str(merged), "-o",
                    "/dev/null"], check=True, timeout=3600, stdout=subprocess.DEVNULL)
    t1 = time.perf_counter()
    subprocess.run(["btt", "-i", str(merged), "-o", str(work / "btt")], check=True, timeout=3600,
                   capture_output=True, text=True, cwd=work)  # btt drops per-device *_fp.dat files in its cwd
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, _children_cpu() - c0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=5_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    for tool in ("blkparse", "btt"):
        if not shutil.which(tool):
            sys.exit(f"{tool} not found (Debian package blktrace)")
    with tempfile.TemporaryDirectory(prefix="analyze-bench-", dir="/var/tmp") as tmp:
        work = Path(tmp)
        base = golden_events()
        events = replicate(base, args.events)
        stem = work / "bench"
        n = write_blktrace(events, stem)
        small = work / "warm"
        write_blktrace(base, small)
        run_mobiperf(small)  # numba compile / cache load, imports
        ours, parts, peers_parse, peers_btt, peers_cpu = [], [], [], [], []
        for _ in range(args.repeat):
            t, info = run_mobiperf(stem)
            ours.append(t)
            parts.append(info)
            p, b, c = run_peers(stem, work)
            peers_parse.append(p)
            peers_btt.append(b)
            peers_cpu.append(c)

    def fmt(xs):
        return f"{statistics.median(xs):7.2f} s  [{min(xs):.2f}-{max(xs):.2f}]"

    peers = [p + b for p, b in zip(peers_parse, peers_btt)]
    med = statistics.median
    print(f"events: {n:,} (block events of {len(base):,} from the golden traces, replayed); repeat {args.repeat}")
    print(f"{'tool (wall time unless CPU)':<34} {'time (median [range])':<26} {'M events/s':>10}")
    print(f"{'mobiperf parse+pair+classify':<34} {fmt(ours):<26} {n / med(ours) / 1e6:>10.2f}")
    for key, label in (("parse_s", "  parse_blktrace"), ("pair_s", "  pair_block_requests"),
                       ("classify_s", "  block_io + io_class/share/latency")):
        xs = [p[key] for p in parts]
        print(f"{label:<34} {fmt(xs):<26} {n / med(xs) / 1e6:>10.2f}")
    print(f"{'blkparse -d + btt':<34} {fmt(peers):<26} {n / med(peers) / 1e6:>10.2f}")
    print(f"{'  blkparse -d':<34} {fmt(peers_parse):<26} {n / med(peers_parse) / 1e6:>10.2f}")
    print(f"{'  btt':<34} {fmt(peers_btt):<26} {n / med(peers_btt) / 1e6:>10.2f}")
    ours_cpu = [p["cpu_s"] for p in parts]
    print(f"{'CPU time: mobiperf':<34} {fmt(ours_cpu):<26} {n / med(ours_cpu) / 1e6:>10.2f}")
    # system time is mostly first touches of fresh memory, dear in a VM and varying with what ran before
    print(f"{'  of which system time':<34} {fmt([p['sys_s'] for p in parts]):<26} "
          f"({med([p['minflt'] for p in parts]) / 1e3:.0f} k page faults)")
    for key, label in (("parse_cpu_s", "  parse_blktrace"), ("pair_cpu_s", "  pair_block_requests"),
                       ("classify_cpu_s", "  block_io + io_class/share/latency")):
        xs = [p[key] for p in parts]
        print(f"{label:<34} {fmt(xs):<26} {n / med(xs) / 1e6:>10.2f}")
    print(f"{'CPU time: blkparse -d + btt':<34} {fmt(peers_cpu):<26} {n / med(peers_cpu) / 1e6:>10.2f}")
    print(f"speed-up vs blkparse+btt: wall {med(peers) / med(ours):.2f}x, CPU {med(peers_cpu) / med(ours_cpu):.2f}x; "
          f"load average {open('/proc/loadavg').read().split()[0]} on {len(__import__('os').sched_getaffinity(0))} "
          "cores")
    print(f"records {parts[-1]['records']:,} (lost {parts[-1]['lost']:,}), requests {parts[-1]['requests']:,}, "
          f"fully matched {parts[-1]['matched']:.4f}, mean write D2C {parts[-1]['d2c_write_mean_us']:.1f} us")


if __name__ == "__main__":
    main()
