"""blktrace binary parser: synthetic records of both byte orders and versions 0x07/0x08, notes, PDUs, damage;
a real capture of the kernel's blk tracer checked against blkparse."""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import polars as pl
import pytest

from mobiperf.collectors.parse.blktrace_compiled import parse_blktrace_compiled
from mobiperf.collectors.parse.blktrace_numpy import parse_blktrace_numpy

DECODERS = pytest.mark.parametrize("parse_blktrace", [parse_blktrace_compiled, parse_blktrace_numpy],
                                   ids=["compiled", "numpy"])
from mobiperf.core.errors import ParseError

FIXTURE = Path(__file__).parents[1] / "fixtures" / "blktrace" / "loop-dd-4k-direct.blkbin"
TC_WRITE, TC_SYNC, TC_QUEUE, TC_ISSUE, TC_COMPLETE, TC_NOTIFY, TC_READ = 2, 8, 0x10, 0x40, 0x80, 0x400, 1
DEV = (259 << 20) | 3  # kernel dev_t of 259:3


def record(version: int, big: bool, *, seq=1, time=0, sector=0, nbytes=0, action=0, pid=100, dev=DEV, cpu=0,
           error=0, pdu=b"") -> bytes:
    e = ">" if big else "<"
    magic = 0x65617400 | version
    if version == 7:
        head = struct.pack(e + "IIQQIIIIIHH", magic, seq, time, sector, nbytes, action, pid, dev, cpu, error,
                           len(pdu))
    else:
        head = struct.pack(e + "IIQQIIQIIHH12x", magic, seq, time, sector, nbytes, pid, action, dev, cpu, error,
                           len(pdu))
    return head + pdu


def sample_stream(version: int, big: bool) -> bytes:
    act = lambda code, *tc: code | (sum(tc) << 16)  # noqa: E731
    e = ">" if big else "<"
    return b"".join([
        record(version, big, seq=0, time=0, action=act(0, TC_NOTIFY), pid=100, pdu=b"dbench\0".ljust(16, b"\0")),
        record(version, big, seq=0, time=0, action=act(1, TC_NOTIFY), pdu=struct.pack(e + "II", 1700000000, 5)),
        record(version, big, seq=1, time=1000, sector=2048, nbytes=8192, action=act(1, TC_WRITE, TC_SYNC, TC_QUEUE)),
        record(version, big, seq=2, time=1500, sector=2048, nbytes=8192, action=act(13, TC_WRITE),
               pdu=struct.pack(">Q", 2056)),  # split at 2056: PDU big-endian whatever the byte order
        record(version, big, seq=0, time=1600, action=act(2, TC_NOTIFY), pdu=b"cfq hello"),  # odd length
        record(version, big, seq=3, time=2000, sector=2048, nbytes=8192, action=act(7, TC_WRITE, TC_SYNC, TC_ISSUE)),
        record(version, big, seq=4, time=2500, action=act(10, TC_READ, TC_QUEUE), pdu=struct.pack(">Q", 3)),
        record(version, big, seq=7, time=9000, sector=2048, nbytes=8192, error=(-5) & 0xFFFF,
               action=act(8, TC_WRITE, TC_SYNC, TC_COMPLETE), cpu=0),
    ])


@DECODERS
@pytest.mark.parametrize("version", [7, 8])
@pytest.mark.parametrize("big", [False, True], ids=["le", "be"])
def test_synthetic_records_every_layout(tmp_path, version, big, parse_blktrace):
    path = tmp_path / "sda.blktrace.0"
    path.write_bytes(sample_stream(version, big))
    t = parse_blktrace([path])
    b = t.block_event
    assert b["event"].to_list() == ["block_bio_queue", "block_split", "block_rq_issue", "block_unplug",
                                    "block_rq_complete"]
    assert set(b["comm"]) == {"dbench"} and set(b["dev_major"]) == {259} and set(b["dev_minor"]) == {3}
    q = b.row(0, named=True)
    assert (q["sector"], q["nr_sector"], q["size_bytes"], q["rwbs"], q["ts"]) == (2048, 16, 8192, "WS", 1000)
    split = b.row(1, named=True)
    assert (split["sector"], split["nr_sector"]) == (2048, 8)  # new sector 2056 from the big-endian PDU
    unplug = b.row(3, named=True)
    assert unplug["sector"] == -1 and unplug["rwbs"] == "N"
    assert b.row(4, named=True)["error"] == -5
    assert t.trace_marker["text"].to_list() == ["cfq hello"]
    assert t.start_wallclock_ns == 1700000000 * 10**9 + 5
    assert t.lost_records == 2  # sequence 4 -> 7 on (259:3, cpu 0)
    assert t.warnings == []


@DECODERS
def test_per_cpu_files_merge_in_time_order(tmp_path, parse_blktrace):
    a = record(7, False, seq=1, time=3000, sector=8, nbytes=4096, action=1 | (TC_WRITE << 16), cpu=0)
    b = record(7, False, seq=1, time=1000, sector=16, nbytes=4096, action=1 | (TC_WRITE << 16), cpu=1)
    (tmp_path / "d.blktrace.0").write_bytes(a)
    (tmp_path / "d.blktrace.1").write_bytes(b)
    t = parse_blktrace([tmp_path / "d.blktrace.0", tmp_path / "d.blktrace.1"])
    assert t.block_event["sector"].to_list() == [16, 8] and t.block_event["cpu"].to_list() == [1, 0]


@DECODERS
def test_truncated_and_damaged_files_keep_complete_records(tmp_path, parse_blktrace):
    data = sample_stream(7, False)
    cut = tmp_path / "cut.blktrace.0"
    cut.write_bytes(data[:-10])
    t = parse_blktrace([cut])
    assert len(t.block_event) == 4 and any("truncated" in w for w in t.warnings)
    junk = tmp_path / "junk.blktrace.0"
    junk.write_bytes(data[:48 * 2 + 16 + 8] + b"\xff" * 13 + data[48 * 2 + 16 + 8:])
    t = parse_blktrace([junk])
    assert len(t.block_event) == 5 and any("not blktrace records" in w for w in t.warnings)


@DECODERS
def test_not_blktrace_is_a_parse_error(tmp_path, parse_blktrace):
    path = tmp_path / "x.blktrace.0"
    path.write_bytes(b"hello world, not a trace")
    with pytest.raises(ParseError, match=r"x.blktrace.0:0: not blktrace data"):
        parse_blktrace([path])
    path.write_bytes(struct.pack("<I", 0x65617405) + b"\0" * 60)
    with pytest.raises(ParseError, match="version 0x05"):
        parse_blktrace([path])


@DECODERS
def test_real_blk_tracer_capture_agrees_with_blkparse(parse_blktrace):
    t = parse_blktrace([FIXTURE])
    b = t.block_event
    assert len(b) == 300 and t.lost_records == 0
    counts = dict(b.group_by("event").len().iter_rows())
    assert counts == {e: 50 for e in ("block_bio_queue", "block_getrq", "block_plug", "block_unplug",
                                      "block_rq_issue", "block_rq_complete")}
    if not shutil.which("blkparse"):
        pytest.skip("blkparse is not installed")
    done = subprocess.run(["blkparse", "-i", "-"], input=FIXTURE.read_bytes(), capture_output=True, timeout=60)
    lines = [ln.split() for ln in done.stdout.decode().splitlines() if ln.startswith("  7,")]
    assert len(lines) == 300
    # Same records, same order: action letter and sector of every queue/issue/complete.
    letter = {"block_bio_queue": "Q", "block_rq_issue": "D", "block_rq_complete": "C", "block_getrq": "G"}
    ours = [(letter[e], s) for e, s in b.select("event", "sector").iter_rows() if e in letter]
    theirs = [(f[5], int(f[7])) for f in lines if f[5] in "QDCG"]
    assert ours == theirs
    assert set(b.filter(pl.col("event") == "block_rq_issue")["rwbs"]) == {f[6] for f in lines if f[5] == "D"}


@DECODERS
def test_damaged_note_fields_do_not_overflow(tmp_path, parse_blktrace):
    """Found by bench/fuzz_parsers.py: a message note with a u32 pid above 2**31 and a time above 2**63."""
    path = tmp_path / "n.blktrace.0"
    path.write_bytes(record(7, False, seq=0, time=(1 << 64) - 5, action=2 | (TC_NOTIFY << 16), pid=0xFFFFFFF0,
                            pdu=b"abc"))
    t = parse_blktrace([path])
    assert t.trace_marker.rows() == [(0, -1, -16, "abc")] and len(t.block_event) == 0


def test_the_decoders_agree_on_public_and_captured_sets():
    """The numpy and compiled decoders make the same tables (the fixtures: a merged NVMe stream with remaps, and
    a blk tracer capture)."""
    for path in (Path(__file__).parents[1] / "fixtures" / "blktrace").iterdir():
        a, b = parse_blktrace_compiled([path]), parse_blktrace_numpy([path])
        assert a.block_event.equals(b.block_event) and a.trace_marker.equals(b.trace_marker), path.name
        assert (a.summary, a.warnings) == (b.summary, b.warnings), path.name
