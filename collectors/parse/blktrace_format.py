"""blktrace records (struct blk_io_trace, versions 0x07 and 0x08, either byte order): their layout, the notes,
rwbs and sequence gaps (blktrace.parse_blktrace picks a decoder by size).

Two decoders make the same rows (tests hold them equal): blktrace.py compiles its passes with numba (for large
sets: millions of records a second) and blktrace_numpy.py walks and gathers with numpy (for small sets, where
starting numba costs about a second of CPU and 90 MB, more than the whole parse). specs/trace-formats.md
section 1 has the layout; blktrace.py's docstring the mapping of actions to block events.
"""

from __future__ import annotations

import mmap
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from mobiperf.core.errors import ParseError
from mobiperf.core.schema import TRACE_MARKER

# Below this many bytes in a set, the numpy decoder (no compiler start-up); above, the compiled one.
NUMPY_MAX_BYTES = 8 << 20

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


def map_file(path: Path) -> np.ndarray:
    """The bytes of a file as a read-only uint8 array: mapped (no copy, page-cache pages) when it is a regular
    file, else read."""
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            if stat.S_ISREG(st.st_mode):
                if st.st_size == 0:
                    return np.zeros(0, np.uint8)
                return np.frombuffer(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ), np.uint8)
            return np.frombuffer(f.read(), np.uint8)
    except OSError as e:
        raise ParseError(path, 0, f"cannot read: {e.strerror}") from None


def note_record(buf: np.ndarray, o: int, big: bool, version: int, byteorder: str) -> tuple[int, int, int, bytes, str]:
    """(kind, pid, time, payload, byte order) of the note record at offset o."""
    hdr = HEADER_SIZE[version]
    head = bytes(buf[o:o + hdr])
    u = lambda at, size: int.from_bytes(head[at:at + size], byteorder)  # noqa: E731
    action = u(28, 4) if version == 7 else u(32, 8)
    pid = u(32, 4) if version == 7 else u(28, 4)
    t = u(8, 8)
    plen = u(46 if version == 7 else 50, 2)
    return (action & 0xFF, pid, t if t < 1 << 63 else -1, bytes(buf[o + hdr:o + hdr + plen]), byteorder)


def rwbs_text(key: int) -> str:
    """blkparse's fill_rwbs of key = category bits * 2 + (bytes > 0)."""
    bits, has_bytes = key >> 1, key & 1
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
    return s


def sequence_gaps(device: np.ndarray, cpu: np.ndarray, seq: np.ndarray) -> int:
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


def note_tables(notes: list[tuple[int, int, int, bytes, str]], rep: int) -> tuple[dict, int | None, pl.DataFrame]:
    """From the notes (kind, pid, time, payload, byte order): comm by pid (PROCESS), the wall clock of the
    trace start (TIMESTAMP) and the trace_marker rows (MESSAGE)."""
    comm_of, start_wall, markers = {}, None, []
    for kind, pid, t, payload, byteorder in notes:
        if kind == NOTE_PROCESS:
            comm_of[pid] = payload.split(b"\0", 1)[0].decode("utf-8", errors="replace")
        elif kind == NOTE_TIMESTAMP and len(payload) >= 8:
            sec, nsec = int.from_bytes(payload[:4], byteorder), int.from_bytes(payload[4:8], byteorder)
            start_wall = sec * 1_000_000_000 + nsec
        elif kind == NOTE_MESSAGE:
            markers.append({"rep": rep, "ts": t, "pid": pid,
                            "text": payload.split(b"\0", 1)[0].decode("utf-8", errors="replace").strip()})
    marker_df = pl.DataFrame({  # pid is u32 in the record: a damaged one must not overflow the i32 column
        "rep": np.full(len(markers), rep, np.int32), "ts": np.array([m["ts"] for m in markers], np.int64),
        "pid": np.array([m["pid"] for m in markers], np.int64).astype(np.int32),
        "text": pl.Series([m["text"] for m in markers], dtype=pl.Utf8)}) if markers else TRACE_MARKER.empty()
    return comm_of, start_wall, TRACE_MARKER.validate(marker_df)


def comm_lookup(comm_of: dict[int, str]) -> tuple[np.ndarray, list[str]]:
    """Sorted pids (as the record's i32 pid column holds them: the u32 wraps the same way) and, for code k >= 1,
    the comm of pid k-1 in that order (code 0: no name)."""
    comm_pid = np.array(list(comm_of), np.int64).astype(np.int32).astype(np.int64)
    order = np.argsort(comm_pid)
    names = list(comm_of.values())
    return comm_pid[order], [""] + [names[i] for i in order.tolist()]
