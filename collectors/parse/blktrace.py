"""blktrace binary records (struct blk_io_trace, versions 0x07 and 0x08, either byte order) -> block_event rows.

Sources: per-CPU files of the blktrace tool (`NAME.blktrace.<cpu>`), a merged stream (`blkparse -d`), or the
kernel's `blk` tracer read from trace_pipe with the `bin` option (sequence always 0, no process notes).
specs/trace-formats.md section 1 has the layout. A file is a chain of records, each a fixed header (48 bytes for
v0x07, 64 for v0x08) followed by `pdu_len` bytes; message notes have odd lengths, so records are not aligned and
the chain is walked (in numba) before every field is gathered with numpy views, no Python per record.

Mapping to the ftrace block events (so one pairing and one set of analyzers serve both sources):
  Q block_bio_queue   M block_bio_backmerge   F block_bio_frontmerge   G block_getrq   S block_sleeprq
  I block_rq_insert   D block_rq_issue        C block_rq_complete      R block_rq_requeue
  P block_plug        U/UT block_unplug       X block_split (nr_sector = new sector - sector, from the PDU)
  A (remap), B (bounce), ABORT and DRV_DATA records are counted but not turned into rows.
rwbs is rebuilt from the category bits the way blkparse writes it: [F flush] D|W|R|N [F fua] [A] [S] [M]
(blktrace cannot tell a pre-flush from a flush op: both set BLK_TC_FLUSH). Notes: PROCESS gives the comm of a pid,
MESSAGE becomes a trace_marker row, TIMESTAMP the wall clock of the trace start.
Lost records: gaps in the per-(device, cpu) sequence numbers (blkparse's "skips"), where sequences are kept.
A cut last record is dropped with a warning; bytes that are not a record chain are skipped to the next magic
with a warning naming the offset.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl
from numba import njit

from mobiperf.errors import ParseError
from mobiperf.schema import BLOCK_EVENT, TRACE_MARKER

MAGIC = 0x65617400
HEADER_SIZE = {0x07: 48, 0x08: 64}
TC_SHIFT = 16
TC = {"read": 1 << 0, "write": 1 << 1, "flush": 1 << 2, "sync": 1 << 3, "queue": 1 << 4, "requeue": 1 << 5,
      "issue": 1 << 6, "complete": 1 << 7, "fs": 1 << 8, "pc": 1 << 9, "notify": 1 << 10, "ahead": 1 << 11,
      "meta": 1 << 12, "discard": 1 << 13, "drv_data": 1 << 14, "fua": 1 << 15}
CGROUP_FLAG = 0x100
ACTION_EVENT = {1: "block_bio_queue", 2: "block_bio_backmerge", 3: "block_bio_frontmerge", 4: "block_getrq",
                5: "block_sleeprq", 6: "block_rq_requeue", 7: "block_rq_issue", 8: "block_rq_complete",
                9: "block_plug", 10: "block_unplug", 11: "block_unplug", 12: "block_rq_insert",
                13: "block_split"}
NOTE_PROCESS, NOTE_TIMESTAMP, NOTE_MESSAGE = 0, 1, 2


@dataclass
class BlktraceTables:
    block_event: pl.DataFrame
    trace_marker: pl.DataFrame
    records: int = 0
    lost_records: int = 0
    skipped_actions: dict[str, int] = field(default_factory=dict)
    start_wallclock_ns: int | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def summary(self) -> dict:
        return {"records": self.records, "lost_records": self.lost_records, "skipped": self.skipped_actions,
                "start_wallclock_ns": self.start_wallclock_ns}


@njit(cache=True, nogil=True)
def _walk(buf, big_endian, version):
    """Offsets of the records of a chain, the end of the last complete one, and the garbage skipped.

    Returns (offsets, complete_end, n_resyncs, first_resync_offset).
    """
    n = len(buf)
    hdr = 48 if version == 7 else 64
    pdu_at = 46 if version == 7 else 50
    offs = np.empty(n // 48 + 1, np.int64)
    k = 0
    p = 0
    resyncs = 0
    first_resync = -1
    while p + hdr <= n:
        if big_endian:
            m0, m1, m2, m3 = buf[p + 3], buf[p + 2], buf[p + 1], buf[p]
        else:
            m0, m1, m2, m3 = buf[p], buf[p + 1], buf[p + 2], buf[p + 3]
        if m0 == version and m1 == 0x74 and m2 == 0x61 and m3 == 0x65:
            if big_endian:
                plen = (np.int64(buf[p + pdu_at]) << 8) | np.int64(buf[p + pdu_at + 1])
            else:
                plen = np.int64(buf[p + pdu_at]) | (np.int64(buf[p + pdu_at + 1]) << 8)
            if p + hdr + plen > n:
                break  # a cut last record
            offs[k] = p
            k += 1
            p += hdr + plen
        else:
            # Not a record here: find the next magic of this version (byte by byte: notes are unaligned).
            if first_resync < 0:
                first_resync = p
            resyncs += 1
            p += 1
            while p + hdr <= n:
                if big_endian:
                    ok = buf[p] == 0x65 and buf[p + 1] == 0x61 and buf[p + 2] == 0x74 and buf[p + 3] == version
                else:
                    ok = buf[p + 3] == 0x65 and buf[p + 2] == 0x61 and buf[p + 1] == 0x74 and buf[p] == version
                if ok:
                    break
                p += 1
    return offs[:k], p, resyncs, first_resync


def detect_format(head: bytes, path: Path) -> tuple[int, bool]:
    """(version, big_endian) from the first record's magic; ParseError if it is not blktrace data."""
    if len(head) < 4:
        raise ParseError(path, 0, "too short for a blktrace record")
    le = int.from_bytes(head[:4], "little")
    be = int.from_bytes(head[:4], "big")
    for value, big in ((le, False), (be, True)):
        if value & 0xFFFFFF00 == MAGIC:
            version = value & 0xFF
            if version not in HEADER_SIZE:
                raise ParseError(path, 0, f"blktrace version 0x{version:02x} is not supported (0x07, 0x08)")
            return version, big
    raise ParseError(path, 0, f"not blktrace data (magic 0x{le:08x})")


FIELDS = ("sequence", "time", "sector", "bytes", "action", "pid", "device", "cpu", "error", "pdu")


@njit(cache=True, nogil=True)
def _uint(buf, p, size, big):
    v = np.uint64(0)
    for j in range(size):
        byte = np.uint64(buf[p + j])
        v |= byte << np.uint64(8 * (size - 1 - j) if big else 8 * j)
    return v


@njit(cache=True, nogil=True)
def _decode(buf, offs, big, version):
    """Every header field of every record at offs as int64 columns (either byte order), in one pass.

    Returns (cols[10, n] in FIELDS order, is_note[n], pdu_start[n], pdu_len[n]). sector and time above
    2**63-1 become -1; pdu is the first big-endian u64 of the PDU after any cgroup id, -1 if there is none.
    """
    n = len(offs)
    cols = np.empty((10, n), np.int64)
    is_note = np.zeros(n, np.bool_)
    pdu_start = np.empty(n, np.int64)
    pdu_len = np.empty(n, np.int64)
    v7 = version == 7
    hdr = 48 if v7 else 64
    top = np.uint64((1 << 63) - 1)
    for i in range(n):
        o = offs[i]
        cols[0, i] = np.int64(_uint(buf, o + 4, 4, big))
        t = _uint(buf, o + 8, 8, big)
        cols[1, i] = np.int64(t) if t <= top else -1
        sec = _uint(buf, o + 16, 8, big)
        cols[2, i] = np.int64(sec) if sec <= top else -1
        cols[3, i] = np.int64(_uint(buf, o + 24, 4, big))
        if v7:
            action = _uint(buf, o + 28, 4, big)
            cols[5, i] = np.int64(_uint(buf, o + 32, 4, big))
            dev_at = 36
        else:
            cols[5, i] = np.int64(_uint(buf, o + 28, 4, big))
            action = _uint(buf, o + 32, 8, big)
            dev_at = 40
        cols[4, i] = np.int64(action & np.uint64(0xFFFFFFFF))
        cols[6, i] = np.int64(_uint(buf, o + dev_at, 4, big))
        cols[7, i] = np.int64(_uint(buf, o + dev_at + 4, 4, big))
        err = np.int64(_uint(buf, o + dev_at + 8, 2, big))
        cols[8, i] = err - 65536 if err >= 32768 else err
        plen = np.int64(_uint(buf, o + dev_at + 10, 2, big))
        pdu_start[i] = o + hdr
        pdu_len[i] = plen
        is_note[i] = (action >> np.uint64(16)) & np.uint64(0x400) != 0
        start = o + hdr + (8 if action & np.uint64(0x100) else 0)
        if start + 8 <= o + hdr + plen:
            v = _uint(buf, start, 8, True)  # PDU integers are big-endian whatever the records' order
            cols[9, i] = np.int64(v) if v <= top else -1
        else:
            cols[9, i] = -1
    return cols, is_note, pdu_start, pdu_len


def parse_blktrace(paths: list[Path], rep: int = 0) -> BlktraceTables:
    """block_event and trace_marker rows of a set of blktrace files (per-CPU files or one stream)."""
    parts: list[np.ndarray] = []
    notes: list[tuple[int, int, int, bytes, str]] = []  # (kind, pid, time, payload, byte order)
    warnings: list[str] = []
    for path in paths:
        try:
            data = Path(path).read_bytes()
        except OSError as e:
            raise ParseError(path, 0, f"cannot read: {e.strerror}") from None
        if not data:
            continue
        version, big = detect_format(data[:4], path)
        buf = np.frombuffer(data, np.uint8)
        offs, end, resyncs, first_resync = _walk(buf, big, version)
        if resyncs:
            warnings.append(f"{path}: {resyncs} stretch(es) of bytes that are not blktrace records, the first at "
                            f"byte offset {first_resync}; skipped to the next record")
        if end < len(data):
            warnings.append(f"{path}: cut record at byte offset {end} (truncated file); every complete record "
                            "before it was kept")
        cols, is_note, pdu_start, pdu_len = _decode(buf, offs, big, version)
        for i in np.flatnonzero(is_note):
            start = int(pdu_start[i])
            notes.append((int(cols[4, i] & 0xFF), int(cols[5, i]), int(cols[1, i]),
                          data[start:start + int(pdu_len[i])], "big" if big else "little"))
        parts.append(cols[:, ~is_note] if is_note.any() else cols)
    both = parts[0] if len(parts) == 1 else (np.concatenate(parts, axis=1) if parts else np.zeros((10, 0), np.int64))
    merged = dict(zip(FIELDS, both))
    pdu = merged.pop("pdu")
    t = merged["time"]
    if len(paths) > 1 or not bool(np.all(t[1:] >= t[:-1])):  # one stream is usually in time order already
        order = np.argsort(t, kind="stable")
        merged = {f: v[order] for f, v in merged.items()}
        pdu = pdu[order]
    n_records = len(t)
    # Per file, before the merge: a per-CPU file is already in sequence order, so no sort is needed.
    dev_i, cpu_i, seq_i = (FIELDS.index(f) for f in ("device", "cpu", "sequence"))
    lost = sum(_sequence_gaps(part[dev_i], part[cpu_i], part[seq_i]) for part in parts)

    comm_of = {}
    start_wall = None
    markers = []
    for kind, pid, t, payload, byteorder in notes:
        if kind == NOTE_PROCESS:
            comm_of[pid] = payload.split(b"\0", 1)[0].decode("utf-8", errors="replace")
        elif kind == NOTE_TIMESTAMP and len(payload) >= 8:
            sec, nsec = int.from_bytes(payload[:4], byteorder), int.from_bytes(payload[4:8], byteorder)
            start_wall = sec * 1_000_000_000 + nsec
        elif kind == NOTE_MESSAGE:
            markers.append({"rep": rep, "ts": t, "pid": pid,
                            "text": payload.split(b"\0", 1)[0].decode("utf-8", errors="replace").strip()})

    low = (merged["action"] & 0xFFFF) & ~CGROUP_FLAG
    codes = np.array(sorted(ACTION_EVENT), np.int64)
    known = np.isin(low, codes)
    skipped = {f"action {int(a)}": int(n) for a, n in zip(*np.unique(low[~known], return_counts=True))}
    if skipped:
        m = {f: v[known] for f, v in merged.items()}
        low, pdu = low[known], pdu[known]
    else:
        m = merged
    tc = m["action"] >> TC_SHIFT
    event = pl.Series("event", [ACTION_EVENT[int(c)] for c in codes]).gather(np.searchsorted(codes, low))
    sector_i = m["sector"]
    nbytes = m["bytes"]
    is_plug = (low == 9) | (low == 10) | (low == 11)
    is_split = low == 13
    nr = np.where(is_split, np.where((pdu >= 0) & (sector_i >= 0), pdu - sector_i, -1), nbytes >> 9)
    size = np.where(is_split, np.where(nr >= 0, nr * 512, -1), nbytes)
    block = pl.DataFrame({
        "rep": np.full(len(low), rep, np.int32), "ts": m["time"],
        "cpu": m["cpu"].astype(np.int32), "pid": m["pid"].astype(np.int32),
        "comm": pl.Series(m["pid"]).replace_strict(comm_of, default="", return_dtype=pl.Utf8) if comm_of
        else pl.repeat("", len(low), dtype=pl.Utf8, eager=True),
        "event": event, "dev_major": (m["device"] >> 20).astype(np.int32),
        "dev_minor": (m["device"] & 0xFFFFF).astype(np.int32),
        "sector": np.where(is_plug, -1, sector_i), "nr_sector": np.where(is_plug, -1, nr),
        "size_bytes": np.where(is_plug, -1, size), "rwbs": _rwbs(tc, nbytes),
        "error": m["error"].astype(np.int32),
    })
    marker_df = pl.DataFrame({  # pid is u32 in the record: a damaged one must not overflow the i32 column
        "rep": np.full(len(markers), rep, np.int32), "ts": np.array([m["ts"] for m in markers], np.int64),
        "pid": np.array([m["pid"] for m in markers], np.int64).astype(np.int32),
        "text": pl.Series([m["text"] for m in markers], dtype=pl.Utf8)}) if markers else TRACE_MARKER.empty()
    return BlktraceTables(block_event=BLOCK_EVENT.validate(block), trace_marker=TRACE_MARKER.validate(marker_df),
                          records=n_records, lost_records=lost, skipped_actions=skipped,
                          start_wallclock_ns=start_wall, warnings=warnings)


def _rwbs(tc: np.ndarray, nbytes: np.ndarray) -> pl.Series:
    """blkparse's fill_rwbs over the category bits, vectorized through a table of the distinct combinations."""
    key = (tc & 0xFFFF) * 2 + (nbytes > 0)
    uniq = np.flatnonzero(np.bincount(key, minlength=1 << 17))  # the combinations present, without a sort
    lookup = np.zeros(1 << 17, np.int64)
    lookup[uniq] = np.arange(len(uniq))
    inverse = lookup[key]
    texts = []
    for k in uniq.tolist():
        bits, has_bytes = k >> 1, k & 1
        s = "F" if bits & TC["flush"] else ""
        if bits & TC["discard"]:
            s += "D"
        elif bits & TC["write"]:
            s += "W"
        elif has_bytes:
            s += "R"
        else:
            s += "N"
        s += "F" if bits & TC["fua"] else ""
        s += "A" if bits & TC["ahead"] else ""
        s += "S" if bits & TC["sync"] else ""
        s += "M" if bits & TC["meta"] else ""
        texts.append(s)
    return pl.Series("rwbs", texts, dtype=pl.Utf8).gather(inverse.reshape(-1))


def _sequence_gaps(device: np.ndarray, cpu: np.ndarray, seq: np.ndarray) -> int:
    """Records missing from the per-(device, cpu) sequence (0 = not kept, as with the blk tracer)."""
    has = seq > 0
    if not has.any():
        return 0
    d, c, s = device[has], cpu[has], seq[has]
    if (d == d[0]).all() and (c == c[0]).all():  # one (device, cpu): time order is sequence order
        step = np.diff(s.astype(np.int64)) - 1
        return int(step[step > 0].sum())
    order = np.lexsort((s, c, d))
    d, c, s = d[order], c[order], s[order]
    same = (d[1:] == d[:-1]) & (c[1:] == c[:-1])
    gaps = np.where(same, s[1:].astype(np.int64) - s[:-1].astype(np.int64) - 1, 0)
    return int(gaps[gaps > 0].sum())


def blktrace_files(raw: Path) -> list[list[Path]]:
    """The blktrace record sets in a directory: each NAME.blktrace.<cpu> group, and *.blktrace / *.bin streams."""
    groups: dict[str, list[Path]] = {}
    for p in sorted(raw.iterdir()):
        name = p.name
        stem, sep, cpu = name.rpartition(".blktrace.")
        if sep and cpu.isdigit():
            groups.setdefault(stem, []).append(p)
        elif name.endswith((".blktrace", ".blkbin")):
            groups[name] = [p]
    return [sorted(v, key=lambda q: int(q.name.rpartition(".")[2]) if q.name.rpartition(".")[2].isdigit() else 0)
            for _, v in sorted(groups.items())]
