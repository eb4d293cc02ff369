"""Parser throughput against blkparse, on the same block events (one run; the machine may be loaded).

    python bench/parse_bench.py [--lines 2000000] [--workdir /tmp]

1. A real ftrace text trace (the 6.18 fixture of 4 KiB O_DSYNC writes) is repeated, with shifted timestamps, to
   --lines lines: the ftrace text input.
2. The same events are written as blk_io_trace v0x07 records (vectorized converter below: block_bio_queue -> Q,
   block_rq_issue -> D, ...; plug/unplug get the trace's device): the blktrace binary input.
3. Timed, each in its own process so its peak memory (max RSS) is its own:
     mobiperf ftrace text -> block_event table       parse_ftrace_text
     mobiperf blktrace binary -> block_event table   parse_blktrace
     mobiperf Perfetto protobuf -> block_event table parse_perfetto (the same events as typed block_* messages of
                                                     the perfetto package's protos, 1000 per bundle, make_perfetto)
     blkparse binary -> text                          blkparse -i - (pipe mode) > /dev/null
Targets (issue 6): ftrace text >= 2 M lines/s and >= 2.3x blkparse's text output; binary >= 3x blkparse.
Target (issue 18): Perfetto >= 1 M ftrace events/s, peak memory <= 3x the trace file (peak RSS less the
interpreter's with everything imported and compiled, over the file size).
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

    ev = events.with_columns(
        action=pl.col("event").cast(pl.Utf8).replace_strict(ACTION, default=0, return_dtype=pl.Int64))
    ev = ev.filter(pl.col("action") > 0)
    dev_major = int(ev.filter(pl.col("dev_major") >= 0)["dev_major"][0])
    dev_minor = int(ev.filter(pl.col("dev_major") >= 0)["dev_minor"][0])
    n = len(ev)
    rwbs = ev["rwbs"].cast(pl.Utf8)  # block_event keeps rwbs as a category
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


def make_perfetto(events, path: Path) -> int:
    """block_event rows -> a Perfetto trace: FtraceEvent {timestamp, pid, block_*{...}} in FtraceEventBundles of
    up to 1000 consecutive events of one CPU, field numbers from the perfetto package's protos."""
    import polars as pl
    import pyarrow as pa

    from mobiperf.collectors.parse.perfetto_schema import event_field, ftrace_event_types

    names = sorted(events["event"].unique().to_list())
    wanted = ("dev", "sector", "nr_sector", "bytes", "rwbs", "comm", "error", "new_sector")
    table = np.zeros((len(names), len(wanted) + 1), np.int64)
    for k, name in enumerate(names):
        layout = ftrace_event_types()[event_field(name)]
        table[k, 0] = event_field(name)
        for j, f in enumerate(wanted, 1):
            table[k, j] = layout.fields[f].number if f in layout.fields else 0
    code = events["event"].cast(pl.Utf8).replace_strict({n: k for k, n in enumerate(names)},
                                                       return_dtype=pl.Int64).to_numpy()

    def strings(col: str):
        arr = events[col].to_arrow().cast(pa.large_string())
        arr = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
        return (np.frombuffer(arr.buffers()[1], np.int64)[arr.offset:arr.offset + len(arr) + 1].copy(),
                np.frombuffer(arr.buffers()[2], np.uint8).copy())

    sector = events["sector"].to_numpy()
    nr = events["nr_sector"].to_numpy()
    out = _encode_perfetto(events["ts"].to_numpy(), events["pid"].to_numpy().astype(np.int64),
                           events["cpu"].to_numpy().astype(np.int64), code, table,
                           (events["dev_major"].to_numpy().astype(np.int64) << 20) | events["dev_minor"].to_numpy(),
                           sector, nr, events["size_bytes"].to_numpy(), events["error"].to_numpy().astype(np.int64),
                           sector + nr, *strings("rwbs"), *strings("comm"))
    path.write_bytes(out.tobytes())
    return len(events)


def _encode_perfetto(*args):
    from numba import njit

    @njit(cache=False)
    def varint_len(v):
        n = 1
        v = np.uint64(v)
        while v >= 128:
            v >>= np.uint64(7)
            n += 1
        return n

    @njit(cache=False)
    def put(out, o, v):
        v = np.uint64(v)
        while v >= 128:
            out[o] = np.uint8((v & np.uint64(127)) | np.uint64(128))
            v >>= np.uint64(7)
            o += 1
        out[o] = np.uint8(v)
        return o + 1

    @njit(cache=False)
    def payload_len(i, k, table, vals, r_off, c_off):
        n = 0
        for j in range(1, 9):
            f = table[k, j]
            if f == 0:
                continue
            if j == 5:
                ln = r_off[i + 1] - r_off[i]
                n += varint_len(f << 3) + varint_len(ln) + ln
            elif j == 6:
                ln = c_off[i + 1] - c_off[i]
                n += varint_len(f << 3) + varint_len(ln) + ln
            else:
                n += varint_len(f << 3) + varint_len(vals[j, i])
        return n

    @njit(cache=False)
    def encode(ts, pid, cpu, code, table, dev, sector, nr, size, err, new, r_off, r_dat, c_off, c_dat):
        n = len(ts)
        vals = np.zeros((9, n), np.int64)
        vals[1], vals[2], vals[3], vals[4], vals[7], vals[8] = dev, sector, nr, size, err, new
        for i in range(n):  # sector -1 stays: a flush's (sector_t)-1, sent as the uint64 it is
            if vals[3, i] < 0:
                vals[3, i] = 0
            if vals[4, i] < 0:
                vals[4, i] = 0
        ev_len = np.zeros(n, np.int64)
        for i in range(n):
            k = code[i]
            p = payload_len(i, k, table, vals, r_off, c_off)
            ev_len[i] = (1 + varint_len(ts[i]) + 1 + varint_len(pid[i]) + varint_len(table[k, 0] << 3)
                         + varint_len(p) + p)
        out = np.empty(n * 128 + 1024, np.uint8)
        o = 0
        i = 0
        while i < n:
            j = i
            body = 2
            while j < n and j - i < 1000 and cpu[j] == cpu[i]:
                body += 1 + varint_len(ev_len[j]) + ev_len[j]
                j += 1
            o = put(out, o, 0x0A)  # Trace.packet
            o = put(out, o, 1 + varint_len(body) + body)
            o = put(out, o, 0x0A)  # TracePacket.ftrace_events
            o = put(out, o, body)
            o = put(out, o, 0x08)
            o = put(out, o, cpu[i])
            for e in range(i, j):
                k = code[e]
                o = put(out, o, 0x12)
                o = put(out, o, ev_len[e])
                o = put(out, o, 0x08)
                o = put(out, o, ts[e])
                o = put(out, o, 0x10)
                o = put(out, o, pid[e])
                o = put(out, o, (table[k, 0] << 3) | 2)
                o = put(out, o, payload_len(e, k, table, vals, r_off, c_off))
                for jj in range(1, 9):
                    f = table[k, jj]
                    if f == 0:
                        continue
                    if jj == 5 or jj == 6:
                        off, dat = (r_off, r_dat) if jj == 5 else (c_off, c_dat)
                        o = put(out, o, (f << 3) | 2)
                        o = put(out, o, off[e + 1] - off[e])
                        for b in range(off[e], off[e + 1]):
                            out[o] = dat[b]
                            o += 1
                    else:
                        o = put(out, o, f << 3)
                        o = put(out, o, vals[jj, e])
            i = j
        return out[:o]

    return encode(*args)


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
        warm = ("from mobiperf.collectors.parse.ftrace_text import parse_ftrace_text\n"
                f"parse_ftrace_text({str(FIXTURE)!r})\n")
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
        pf = work / "trace.pftrace"
        n_perfetto = make_perfetto(events, pf)
        warm_p = ("from mobiperf.collectors.parse.perfetto_trace import parse_perfetto\n" + _warm_perfetto(work)
                  + "import gc; gc.collect()\n"
                  "base = int([l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0].split()[1])\n")
        events.drop("comm").write_parquet(work / "want.parquet")
        pt = timed_child(warm_p + f"from pathlib import Path\nt = time.perf_counter(); "
                         f"c = time.process_time(); r = parse_perfetto(Path({str(pf)!r})); "
                         "RESULT = {'wall_s': time.perf_counter() - t, 'cpu_s': time.process_time() - c, "
                         "'rows': len(r.block_event), 'base_mb': base / 1024, 'parse_hwm_mb': int([l for l in "
                         "open('/proc/self/status') if l.startswith('VmHWM:')][0].split()[1]) / 1024}\n"
                         "import polars as pl\n"  # the same rows as the text (comm aside: no process tree here)
                         f"want = pl.read_parquet({str(work / 'want.parquet')!r})\n"
                         "RESULT['same'] = r.block_event.drop('comm').equals(want)")
        bp = time_blkparse(blk)
        if not bp["ok"]:
            raise SystemExit("blkparse failed on the converted records")
        rate = lambda n, s: n / s / 1e6  # noqa: E731
        print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} (shared, figures are noisy)")
        print(f"input: {n_lines:,} ftrace text lines ({text.stat().st_size / 1e6:.0f} MB); "
              f"{n_records:,} blktrace records ({blk.stat().st_size / 1e6:.0f} MB); "
              f"{n_perfetto:,} Perfetto ftrace events ({pf.stat().st_size / 1e6:.0f} MB)")
        print(f"{'parser':<42}{'wall s':>7}{'cpu s':>7}{'M ev/s wall':>12}{'M ev/s cpu':>11}{'peak MB':>8}"
              f"{'x blkparse wall':>16}{'x blkparse cpu':>15}")
        bp_wall, bp_cpu = rate(n_records, bp["wall_s"]), rate(n_records, bp["cpu_s"])
        rows = [("mobiperf ftrace text -> block_event", ft, n_lines, ft["max_rss_mb"]),
                ("mobiperf blktrace binary -> block_event", bt, n_records, bt["max_rss_mb"]),
                ("mobiperf Perfetto protobuf -> block_event", pt, n_perfetto, pt["parse_hwm_mb"]),
                ("blkparse binary -> text (> /dev/null)", bp, n_records, bp["blkparse_rss_mb"])]
        for name, m, n, mem in rows:
            w, c = rate(n, m["wall_s"]), rate(n, m["cpu_s"])
            print(f"{name:<42}{m['wall_s']:>7.2f}{m['cpu_s']:>7.2f}{w:>12.2f}{c:>11.2f}{mem:>8.0f}"
                  f"{w / bp_wall:>15.2f}x{c / bp_cpu:>14.2f}x")
        print("targets: text >= 2.00 M lines/s and >= 2.30x blkparse; binary >= 3.00x blkparse "
              "(cpu columns: time on a CPU, less sensitive to the other tenants of a shared machine)")
        growth = (pt["parse_hwm_mb"] - pt["base_mb"]) * 2**20 / pf.stat().st_size
        print(f"Perfetto: {rate(n_perfetto, pt['wall_s']):.2f} M events/s wall, {rate(n_perfetto, pt['cpu_s']):.2f} "
              f"cpu; peak memory {pt['parse_hwm_mb'] - pt['base_mb']:.0f} MB over a {pt['base_mb']:.0f} MB "
              "interpreter "
              f"= {growth:.2f}x the file (targets: >= 1 M events/s, <= 3x)")
        if not pt["same"]:
            raise SystemExit("the Perfetto reader's block_event differs from the text's")
        if ft["rows"] != n_lines or bt["rows"] != n_records or pt["rows"] != n_perfetto:
            raise SystemExit(f"row counts differ: text {ft['rows']} of {n_lines}, binary {bt['rows']} of {n_records}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _warm_perfetto(work: Path) -> str:
    """Code that compiles (or loads from cache) the reader's numba functions on a tiny trace before timing."""
    tiny = work / "warm.pftrace"
    if not tiny.exists():
        import polars as pl

        from mobiperf.collectors.parse.ftrace_text import parse_ftrace_text
        make_perfetto(parse_ftrace_text(FIXTURE).block_event.head(50).with_columns(pl.col("ts")), tiny)
    return f"from pathlib import Path\nparse_perfetto(Path({str(tiny)!r}))\n"


if __name__ == "__main__":
    main()
