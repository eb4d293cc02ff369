"""parse_blktrace against a record-at-a-time oracle (struct.unpack, a dict per record, Python's stable sort) on
random sets of blktrace files: every action, notes, cgroup ids, split PDUs (cut ones too), sequences with gaps
per (device, cpu), per-CPU files merged by time with ties, out-of-order streams, both byte orders, v0x07 and
v0x08, truncated last records. The compiled parser takes shortcuts (a heap merge of per-CPU runs, gap sums while
sequences rise, rows written in place); the oracle takes none."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from mobiperf.collectors.parse.blktrace_compiled import ACTION_EVENT, MAX_SEQUENCE_GROUPS, parse_blktrace_compiled
from mobiperf.collectors.parse.blktrace_numpy import parse_blktrace_numpy

# both decoders: the compiled one (large sets) and numpy's (small sets: no compiler start-up)
DECODERS = pytest.mark.parametrize("parse_blktrace", [parse_blktrace_compiled, parse_blktrace_numpy],
                                   ids=["compiled", "numpy"])
from mobiperf.core.schema import BLOCK_EVENT

NOTIFY = 0x400 << 16


def pack(version: int, big: bool, r: dict) -> bytes:
    e = ">" if big else "<"
    magic = 0x65617400 | version
    if version == 7:
        head = struct.pack(e + "IIQQIIIIIHH", magic, r["seq"], r["time"], r["sector"], r["bytes"], r["action"],
                           r["pid"], r["dev"], r["cpu"], r["error"], len(r["pdu"]))
    else:
        head = struct.pack(e + "IIQQIIQIIHH12x", magic, r["seq"], r["time"], r["sector"], r["bytes"], r["pid"],
                           r["action"], r["dev"], r["cpu"], r["error"], len(r["pdu"]))
    return head + r["pdu"]


def rwbs(tc: int, nbytes: int) -> str:
    s = "F" if tc & 0x4 else ""
    s += "D" if tc & 0x2000 else "W" if tc & 0x2 else "R" if nbytes else "N"
    return s + ("F" if tc & 0x8000 else "") + ("A" if tc & 0x800 else "") + ("S" if tc & 0x8 else "") \
        + ("M" if tc & 0x1000 else "")


def signed(v: int, bits: int) -> int:
    return v - (1 << bits) if v >= 1 << (bits - 1) else v


def oracle(files: list[tuple[list[dict], bytes]]) -> tuple[list[tuple], dict]:
    """Rows (schema order) and summary of the records each file holds in full."""
    entries, comm, skipped, lost = [], {}, {}, 0  # entries: (time, row or None), every record not a note
    for records, _ in files:
        seqs: dict[tuple[int, int], list[int]] = {}
        for r in records:
            if r["action"] & NOTIFY:
                if r["action"] & 0xFF == 0:
                    comm[r["pid"]] = r["pdu"].split(b"\0", 1)[0].decode(errors="replace")
                continue
            if r["seq"]:
                seqs.setdefault((r["dev"], r["cpu"]), []).append(r["seq"])
            t = r["time"] if r["time"] < 1 << 63 else -1
            low = r["action"] & 0xFFFF & ~0x100
            if low not in ACTION_EVENT:  # sorted with the others, then dropped
                skipped[low] = skipped.get(low, 0) + 1
                entries.append((t, None))
                continue
            sector = r["sector"] if r["sector"] < 1 << 63 else -1
            if low in (9, 10, 11):
                sector = nr = size = -1
            elif low == 13:
                pdu = r["pdu"][8:] if r["action"] & 0x100 else r["pdu"]
                new = struct.unpack(">Q", pdu[:8])[0] if len(pdu) >= 8 else -1
                new = new if new < 1 << 63 else -1
                nr = new - sector if new >= 0 and sector >= 0 else -1
                size = nr * 512 if nr >= 0 else -1
            else:
                nr, size = r["bytes"] >> 9, r["bytes"]
            entries.append((t, (t, signed(r["cpu"], 32), signed(r["pid"], 32), r["pid"], ACTION_EVENT[low],
                                r["dev"] >> 20, r["dev"] & 0xFFFFF, sector, nr, size,
                                rwbs(r["action"] >> 16 & 0xFFFF, r["bytes"]), signed(r["error"], 16))))
        for seq in seqs.values():
            seq = sorted(seq)
            lost += sum(max(b - a - 1, 0) for a, b in zip(seq, seq[1:]))
    rows = [(0, ts, cpu, pid, comm.get(upid, ""), *rest)
            for _, row in sorted(entries, key=lambda e: e[0]) if row is not None  # sorted() is stable
            for ts, cpu, pid, upid, *rest in [row]]
    return rows, {"records": len(entries), "lost": lost,
                  "skipped": {f"action {a}": n for a, n in sorted(skipped.items())}}


def random_files(rnd: random.Random, version: int, big: bool, n_files: int, in_order: bool):
    files = []
    pids = [100, 200, 4242, 0xFFFFFFF0]
    for cpu in range(n_files):
        records, t = [], rnd.randrange(1000)
        seq = {d: rnd.randrange(1, 5) for d in (0, 1, 2)}
        for _ in range(rnd.choice([0, 1, 7, 60, 200])):
            t = t + rnd.randrange(3) if in_order else rnd.randrange(300)
            r = {"seq": 0, "time": t, "sector": 0, "bytes": 0, "pid": rnd.choice(pids), "cpu": cpu, "error": 0,
                 "dev": (8 << 20) | 16, "pdu": b""}
            if rnd.random() < 0.1:
                kind = rnd.choice([0, 0, 2])
                r["action"] = kind | NOTIFY
                r["pdu"] = b"comm-%d\0" % r["pid"] if kind == 0 else b"a marker"
                records.append(r)
                continue
            d = rnd.choice([0, 0, 1, 2])
            r["dev"] = [(8 << 20) | 16, (259 << 20) | 3, 0xFFFFFFFF][d]
            seq[d] += rnd.choice([1, 1, 1, 2, 5])
            r["seq"] = seq[d] if rnd.random() < 0.95 else 0
            if rnd.random() < 0.01:
                r["time"] = (1 << 64) - 3
            low = rnd.choice(list(range(1, 18)) + [0, 1, 7, 8, 13, 13])
            cgroup = 0x100 if rnd.random() < 0.15 else 0
            tc = rnd.choice([0x1, 0x2, 0x3, 0x4, 0x8, 0xA, 0x1002, 0x2002, 0x8002, 0x801, 0xFFFF])
            r["action"] = low | cgroup | (tc << 16)
            r["sector"] = rnd.choice([0, 8, 2048, 987654, (1 << 64) - 1])
            r["bytes"] = rnd.choice([0, 512, 4096, 0xFFFFFFFF])
            r["error"] = rnd.choice([0, 0, 5, 0xFFFB])
            if low in (9, 10, 11, 13) or rnd.random() < 0.05:
                pdu = struct.pack(">Q", rnd.choice([2056, r["sector"] + 16 & (1 << 64) - 1, (1 << 64) - 1]))
                pdu = (b"\x00" * 8 if cgroup else b"") + pdu
                r["pdu"] = pdu[:rnd.randrange(len(pdu))] if rnd.random() < 0.1 else pdu
            records.append(r)
        data = b"".join(pack(version, big, r) for r in records)
        if records and rnd.random() < 0.15:  # a cut last record
            data = data[:-rnd.randrange(1, len(pack(version, big, records[-1])))]
            records = records[:-1]
        files.append((records, data))
    return files


@DECODERS
@pytest.mark.parametrize("seed", range(60))
def test_parser_equals_oracle(tmp_path, seed, parse_blktrace):
    rnd = random.Random(seed)
    version, big = rnd.choice([7, 8]), rnd.random() < 0.5
    n_files = rnd.choice([1, 1, 2, 2, 3, 8])
    in_order = rnd.random() < 0.75
    files = random_files(rnd, version, big, n_files, in_order)
    paths = []
    for cpu, (_, data) in enumerate(files):
        paths.append(tmp_path / f"t.blktrace.{cpu}")
        paths[-1].write_bytes(data)
    got = parse_blktrace(paths)
    rows, summary = oracle(files)
    want = pl.DataFrame(rows, schema=BLOCK_EVENT.columns, orient="row")
    assert_frame_equal(got.block_event, want)
    assert (got.records, got.lost_records, got.skipped_actions) == \
        (summary["records"], summary["lost"], summary["skipped"])


@DECODERS
def test_many_sequence_groups_take_the_exact_count(tmp_path, parse_blktrace):
    """More (device, cpu) pairs than the on-the-fly count follows: the sort-based count gives the same."""
    records = [{"seq": s, "time": i, "sector": 8, "bytes": 4096, "action": 1 | (0x2 << 16), "pid": 1,
                "cpu": i % (MAX_SEQUENCE_GROUPS + 10), "error": 0, "dev": 8 << 20, "pdu": b""}
               for i, s in enumerate(range(1, 3 * (MAX_SEQUENCE_GROUPS + 10) * 2, 2))]
    path = tmp_path / "g.blktrace.0"
    path.write_bytes(b"".join(pack(7, False, r) for r in records))
    got = parse_blktrace([path])
    assert got.lost_records == oracle([(records, b"")])[1]["lost"] > 0
    assert len(got.block_event) == len(records)


@DECODERS
def test_sequences_going_backwards_take_the_exact_count(tmp_path, parse_blktrace):
    records = [{"seq": s, "time": i, "sector": 8, "bytes": 4096, "action": 1 | (0x2 << 16), "pid": 1,
                "cpu": c, "error": 0, "dev": 8 << 20, "pdu": b""}
               for i, (s, c) in enumerate([(1, 0), (9, 1), (5, 0), (3, 0), (10, 1), (12, 1)])]
    path = tmp_path / "b.blktrace.0"
    path.write_bytes(b"".join(pack(7, False, r) for r in records))
    assert parse_blktrace([path]).lost_records == 3  # cpu 0: 1 3 5 (2 and 4 missing); cpu 1: 9 10 12 (11)


@DECODERS
def test_empty_and_missing_inputs(tmp_path, parse_blktrace):
    (tmp_path / "e.blktrace.0").write_bytes(b"")
    got = parse_blktrace([tmp_path / "e.blktrace.0"])
    assert got.block_event.schema == pl.Schema(BLOCK_EVENT.columns) and len(got.block_event) == 0
    assert parse_blktrace([]).records == 0
    with pytest.raises(Exception, match="cannot read"):
        parse_blktrace([Path(tmp_path / "nope.blktrace.0")])
