"""The inputs of bench/parse_bench.py: one real trace's block events written in each format the parsers read.

make_ftrace_text  the 6.18 fixture of 4 KiB O_DSYNC writes (tests/fixtures/ftrace/k6.18-dd-4k-direct-dsync.txt)
                  repeated, timestamps shifted by 10 s a copy, to the number of lines asked
make_blktrace     the same block events as blk_io_trace v0x07 records (block_bio_queue -> Q, block_rq_issue -> D
                  ...; an unplug carries its request count as a big-endian PDU), one stream on CPU 0
make_perfetto     the same events as a Perfetto trace: typed block_* messages (field numbers from the perfetto
                  package's protos) in FtraceEventBundles of up to 1000 consecutive events of one CPU
"""

from __future__ import annotations

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
