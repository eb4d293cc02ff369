"""blktrace binary records (struct blk_io_trace, versions 0x07 and 0x08, either byte order) -> block_event rows:
the compiled decoder (numba), for large sets; blktrace.parse_blktrace picks it or blktrace_numpy.py by
size.

Sources: per-CPU files of the blktrace tool (`NAME.blktrace.<cpu>`), a merged stream (`blkparse -d`), or the
kernel's `blk` tracer read from trace_pipe with the `bin` option (sequence always 0, no process notes).
specs/trace-formats.md section 1 has the layout. A file is a chain of records, each a fixed header (48 bytes for
v0x07, 64 for v0x08) followed by `pdu_len` bytes; message notes have odd lengths, so records are not aligned and
the chain is walked (in numba) before the records are decoded, no Python per record. Files are mapped, not read
into memory (a file truncated while it is parsed ends the process with SIGBUS: parse finished traces).

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

from mobiperf.collectors.parse.blktrace_format import (  # noqa: F401  (re-exported: the format's names)
    ACTION_EVENT, CGROUP_FLAG, HEADER_SIZE, MAGIC, NOTE_MESSAGE, NOTE_PROCESS, NOTE_TIMESTAMP, TC, TC_SHIFT,
    BlktraceTables, blktrace_files, comm_lookup, detect_format, map_file, note_record, note_tables, rwbs_text,
    sequence_gaps)
from mobiperf.core.schema import BLOCK_EVENT, categories


@njit(cache=True, nogil=True)
def _walk(buf, big_endian, version, offs):
    """Offsets of the records of a chain (into offs, room for len(buf) // 48 + 1), the end of the last complete
    one, and the garbage skipped.

    Returns (offsets, complete_end, n_resyncs, first_resync_offset).
    """
    n = len(buf)
    hdr = 48 if version == 7 else 64
    pdu_at = 46 if version == 7 else 50
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


@njit(cache=True, nogil=True)
def _uint_le(buf, p, size):
    v = np.uint64(0)
    for j in range(size):
        v |= np.uint64(buf[p + j]) << np.uint64(8 * j)
    return v


@njit(cache=True, nogil=True)
def _uint_be(buf, p, size):
    v = np.uint64(0)
    for j in range(size):
        v = (v << np.uint64(8)) | np.uint64(buf[p + j])
    return v


@njit(cache=True, nogil=True)
def _uint(buf, p, size, big):
    """The unsigned integer of `size` bytes at p in the records' byte order (one loop per order: the compiler
    folds each into plain loads, where one loop choosing its shift per byte stays byte by byte)."""
    return _uint_be(buf, p, size) if big else _uint_le(buf, p, size)


MAX_SEQUENCE_GROUPS = 256  # (device, cpu) pairs followed in one file; more and the exact sort-based count runs


@njit(cache=True, nogil=True)
def _index(buf, offs, big, version, times, known, action_count):
    """The first look at every record of a file, before any column is built.

    Compacts offs in place to the records that are not notes and writes their times (-1 above 2**63-1) into
    times and whether their action becomes a row into known; counts their action codes into action_count.
    Sequence gaps are summed per (device, cpu) while every such sequence only rises (a per-CPU file of the
    blktrace tool, or a blk-tracer stream); otherwise `regular` is False and the caller counts them exactly.
    Returns (records, note offsets, is_sorted, lost, regular).
    """
    n = len(offs)
    v7 = version == 7
    dev_at = 36 if v7 else 40
    top = np.uint64((1 << 63) - 1)
    notes = np.empty(n, np.int64)
    n_notes = 0
    gdev = np.empty(MAX_SEQUENCE_GROUPS, np.uint64)
    gcpu = np.empty(MAX_SEQUENCE_GROUPS, np.uint64)
    glast = np.empty(MAX_SEQUENCE_GROUPS, np.uint64)
    n_groups = 0
    g = 0
    regular = True
    lost = 0
    is_sorted = True
    prev = np.int64(-(1 << 62))
    m = 0
    for i in range(n):
        o = offs[i]
        action = _uint(buf, o + 28, 4, big) if v7 else _uint(buf, o + 32, 8, big)
        if (action >> np.uint64(16)) & np.uint64(0x400) != 0:
            notes[n_notes] = o
            n_notes += 1
            continue
        offs[m] = o
        t = _uint(buf, o + 8, 8, big)
        ti = np.int64(t) if t <= top else np.int64(-1)
        times[m] = ti
        if m > 0 and ti < prev:
            is_sorted = False
        prev = ti
        low = (action & np.uint64(0xFFFF)) & ~np.uint64(CGROUP_FLAG)
        action_count[low] += 1
        known[m] = low >= 1 and low <= 13  # the codes of ACTION_EVENT
        m += 1
        seq = _uint(buf, o + 4, 4, big)
        if seq == 0 or not regular:
            continue
        dev = _uint(buf, o + dev_at, 4, big)
        cpu = _uint(buf, o + dev_at + 4, 4, big)
        if not (g < n_groups and gdev[g] == dev and gcpu[g] == cpu):
            g = 0
            while g < n_groups and not (gdev[g] == dev and gcpu[g] == cpu):
                g += 1
            if g == n_groups:
                if n_groups == MAX_SEQUENCE_GROUPS:
                    regular = False
                    continue
                gdev[g], gcpu[g], glast[g] = dev, cpu, seq
                n_groups += 1
                continue
        if seq > glast[g]:
            lost += np.int64(seq - glast[g]) - 1
            glast[g] = seq
        else:
            regular = False
    return m, notes[:n_notes], is_sorted, lost, regular


@njit(cache=True, nogil=True)
def _sequence_columns(buf, offs, big, version):
    """device, cpu and sequence of the records at offs (for the exact gap count of irregular files)."""
    n = len(offs)
    dev_at = 36 if version == 7 else 40
    out = np.empty((3, n), np.int64)
    for i in range(n):
        o = offs[i]
        out[0, i] = np.int64(_uint(buf, o + dev_at, 4, big))
        out[1, i] = np.int64(_uint(buf, o + dev_at + 4, 4, big))
        out[2, i] = np.int64(_uint(buf, o + 4, 4, big))
    return out


@njit(cache=True, nogil=True, inline="always")
def _runs_before(times, head, a, b):
    """Whether run a's next record goes before run b's: earlier time, ties to the earlier run."""
    ta, tb = times[head[a]], times[head[b]]
    return ta < tb or (ta == tb and a < b)


@njit(cache=True, nogil=True)
def _merge_destinations(times, known, bounds, dest):
    """Output row of every record (in file order) into dest, -1 for records that make no row, merging runs
    [bounds[r], bounds[r+1]) that are each in time order (per-CPU files) with a heap of their heads: equal to a
    stable sort of the concatenation by time, without sorting or an order array."""
    k = len(bounds) - 1
    head = bounds[:-1].copy()
    heap = np.empty(k, np.int64)
    h = 0
    for r in range(k):
        if head[r] < bounds[r + 1]:
            heap[h] = r  # sift up
            c = h
            h += 1
            while c > 0 and _runs_before(times, head, heap[c], heap[(c - 1) // 2]):
                heap[c], heap[(c - 1) // 2] = heap[(c - 1) // 2], heap[c]
                c = (c - 1) // 2
    row = 0
    while h > 0:
        r = heap[0]
        j = head[r]
        if known[j]:
            dest[j] = row
            row += 1
        else:
            dest[j] = -1
        head[r] += 1
        if head[r] == bounds[r + 1]:  # run done: the last heap entry takes the top
            h -= 1
            heap[0] = heap[h]
        c = 0  # sift down
        while True:
            a = 2 * c + 1
            if a >= h:
                break
            if a + 1 < h and _runs_before(times, head, heap[a + 1], heap[a]):
                a += 1
            if not _runs_before(times, head, heap[a], heap[c]):
                break
            heap[c], heap[a] = heap[a], heap[c]
            c = a
    return row


@njit(cache=True, nogil=True)
def _destinations(order, known, dest):
    """Output row of every record (in file order) into dest given the merged order; -1 for records that make no
    row."""
    r = 0
    for i in range(len(order)):
        j = order[i]
        if known[j]:
            dest[j] = r
            r += 1
        else:
            dest[j] = -1
    return r


@njit(cache=True, nogil=True)
def _emit(buf, offs, big, version, dest, base, comm_pid, rwbs_id, rwbs_keys, out_ts, out_cpu, out_pid, out_comm,
          out_event, out_major, out_minor, out_sector, out_nr, out_size, out_rwbs, out_error):
    """Decode the records at offs (this file's rows base.. of the concatenation) straight into their output
    rows dest[base + j] (or base + j when dest is empty: one file in order, every record a row).

    event: the action code. comm: 1 + position of the pid in the sorted comm_pid, 0 when no PROCESS note named
    it. rwbs: the id of key = category bits * 2 + (bytes > 0) in rwbs_id (ids given in order of first sight,
    their keys appended to rwbs_keys, whose slot 0 counts them), so _rwbs_texts decodes each distinct key once."""
    v7 = version == 7
    hdr = 48 if v7 else 64
    dev_at = 36 if v7 else 40
    top = np.uint64((1 << 63) - 1)
    use_dest = len(dest) > 0
    n_comm = len(comm_pid)
    for j in range(len(offs)):
        d = dest[base + j] if use_dest else base + j
        if d < 0:
            continue
        o = offs[j]
        t = _uint(buf, o + 8, 8, big)
        out_ts[d] = np.int64(t) if t <= top else -1
        sec = _uint(buf, o + 16, 8, big)
        sector = np.int64(sec) if sec <= top else np.int64(-1)
        nbytes = np.int64(_uint(buf, o + 24, 4, big))
        if v7:
            action = _uint(buf, o + 28, 4, big)
            pid = np.int32(_uint(buf, o + 32, 4, big))
        else:
            pid = np.int32(_uint(buf, o + 28, 4, big))
            action = _uint(buf, o + 32, 8, big)
        out_pid[d] = pid
        device = _uint(buf, o + dev_at, 4, big)
        out_major[d] = np.int32(device >> np.uint64(20))
        out_minor[d] = np.int32(device & np.uint64(0xFFFFF))
        out_cpu[d] = np.int32(_uint(buf, o + dev_at + 4, 4, big))
        err = np.int32(_uint(buf, o + dev_at + 8, 2, big))
        out_error[d] = err - 65536 if err >= 32768 else err
        low = np.int64((action & np.uint64(0xFFFF)) & ~np.uint64(CGROUP_FLAG))
        out_event[d] = low
        tc = np.int64((action >> np.uint64(16)) & np.uint64(0xFFFF))
        key = tc * 2 + (1 if nbytes > 0 else 0)
        rid = rwbs_id[key]
        if rid < 0:
            rid = rwbs_keys[0]
            rwbs_id[key] = rid
            rwbs_keys[rid + 1] = key
            rwbs_keys[0] = rid + 1
        out_rwbs[d] = rid
        if low == 9 or low == 10 or low == 11:  # plug, unplug: no sectors
            out_sector[d] = -1
            out_nr[d] = -1
            out_size[d] = -1
        elif low == 13:  # split: the new sector is the PDU (big-endian, after any cgroup id)
            plen = np.int64(_uint(buf, o + dev_at + 10, 2, big))
            start = o + hdr + (8 if action & np.uint64(CGROUP_FLAG) else 0)
            pdu = np.int64(-1)
            if start + 8 <= o + hdr + plen:
                v = _uint(buf, start, 8, True)
                pdu = np.int64(v) if v <= top else np.int64(-1)
            nr = pdu - sector if pdu >= 0 and sector >= 0 else np.int64(-1)
            out_sector[d] = sector
            out_nr[d] = nr
            out_size[d] = nr * 512 if nr >= 0 else -1
        else:
            out_sector[d] = sector
            out_nr[d] = nbytes >> 9
            out_size[d] = nbytes
        c = 0
        if n_comm:
            k = np.searchsorted(comm_pid, pid)
            if k < n_comm and comm_pid[k] == pid:
                c = k + 1
        out_comm[d] = c


@dataclass
class _File:
    path: Path
    buf: np.ndarray
    version: int
    big: bool
    offs: np.ndarray = None  # the records that are not notes
    base: int = 0            # index of its first record in the concatenation of all files' records


@dataclass
class _Index:
    """What the first pass found in every file: per record its time and whether its action makes a row, the count
    of each action, the notes, the records lost, and whether each file is in time order."""

    times: np.ndarray
    known: np.ndarray
    action_count: np.ndarray
    bounds: list[int]              # each file's first record in the concatenation, and the end
    n_records: int = 0
    lost: int = 0
    all_sorted: bool = True
    notes: list[tuple[int, int, int, bytes, str]] = field(default_factory=list)  # (kind, pid, time, payload, order)
    warnings: list[str] = field(default_factory=list)


def parse_blktrace_compiled(paths: list[Path], rep: int = 0) -> BlktraceTables:
    """block_event and trace_marker rows of a set of blktrace files (per-CPU files or one stream).

    Three passes over the records, all compiled: index (times, notes, action counts, sequence gaps), merge
    (the per-CPU files are each in time order: a stable merge of runs, no sort), emit (each record decoded
    straight into its output row). Files are mapped, not copied."""
    files: list[_File] = []
    for path in paths:
        buf = map_file(path)
        if len(buf):
            version, big = detect_format(bytes(buf[:4]), path)
            files.append(_File(path, buf, version, big))
    index = _index_files(files)
    comm_of, start_wall, marker_df = note_tables(index.notes, rep)
    codes = np.flatnonzero(index.action_count)
    skipped = {f"action {int(a)}": int(index.action_count[a]) for a in codes if int(a) not in ACTION_EVENT}
    n_rows = index.n_records - sum(skipped.values())
    dest = _row_destinations(files, index, n_rows)
    block = _emit_block_event(files, dest, comm_of, n_rows, rep)
    return BlktraceTables(block_event=BLOCK_EVENT.validate(block), trace_marker=marker_df,
                          records=index.n_records, lost_records=index.lost, skipped_actions=skipped,
                          start_wallclock_ns=start_wall, warnings=index.warnings)


def _index_files(files: list[_File]) -> _Index:
    """The first pass: every file's records walked (stretches that are not records skipped, a cut last record
    said) and indexed; sets each file's record offsets and base."""
    capacity = sum(len(f.buf) // 48 + 1 for f in files)
    # allocated here, not in the compiled passes: numpy asks for huge pages, and first touches of fresh memory
    # are what this parse spends most of its time on in a VM
    offs_all = np.empty(capacity, np.int64)
    index = _Index(np.empty(capacity, np.int64), np.empty(capacity, np.bool_), np.zeros(1 << 16, np.int64), [0])
    for f in files:
        n = index.n_records
        offs, end, resyncs, first_resync = _walk(f.buf, f.big, f.version, offs_all[n:])
        if resyncs:
            index.warnings.append(f"{f.path}: {resyncs} stretch(es) of bytes that are not blktrace records, the "
                                  f"first at byte offset {first_resync}; skipped to the next record")
        if end < len(f.buf):
            index.warnings.append(f"{f.path}: cut record at byte offset {end} (truncated file); every complete "
                                  "record before it was kept")
        m, note_offs, is_sorted, file_lost, regular = _index(f.buf, offs, f.big, f.version, index.times[n:],
                                                             index.known[n:], index.action_count)
        f.offs, f.base = offs[:m], n
        if not regular:  # sequences out of order or too many (device, cpu): the exact count, by sorting
            dev, cpu, seq = _sequence_columns(f.buf, f.offs, f.big, f.version)
            file_lost = sequence_gaps(dev, cpu, seq)
        index.lost += file_lost
        index.all_sorted &= bool(is_sorted)
        index.n_records += m
        index.bounds.append(index.n_records)
        order = "big" if f.big else "little"
        for o in note_offs.tolist():
            index.notes.append(note_record(f.buf, o, f.big, f.version, order))
    index.times, index.known = index.times[:index.n_records], index.known[:index.n_records]
    return index


def _row_destinations(files: list[_File], index: _Index, n_rows: int) -> np.ndarray:
    """Rows in time order, ties in file order (a stable sort of the concatenation): per-CPU files, each in order
    already, are merged; anything else is sorted. Each record's row, -1 if it makes none; empty when records and
    rows coincide (one stream in order, every action known)."""
    n_records = index.n_records
    if len(files) <= 1 and index.all_sorted and n_rows >= n_records:
        return np.zeros(0, np.int64)
    dest = np.empty(n_records, np.int32 if n_records < 2**31 else np.int64)
    if index.all_sorted:
        _merge_destinations(index.times, index.known, np.array(index.bounds, np.int64), dest)
    else:
        _destinations(np.argsort(index.times, kind="stable"), index.known, dest)
    return dest


def _emit_block_event(files: list[_File], dest: np.ndarray, comm_of: dict, n_rows: int, rep: int) -> pl.DataFrame:
    """The last pass: every record decoded straight into its row of block_event."""
    comm_pid, comm_text = comm_lookup(comm_of)
    col = {name: np.empty(n_rows, dt) for name, dt in (  # _emit's order; codes are u32, what polars gathers by
        ("ts", np.int64), ("cpu", np.int32), ("pid", np.int32), ("comm", np.uint32), ("event", np.uint32),
        ("dev_major", np.int32), ("dev_minor", np.int32), ("sector", np.int64), ("nr_sector", np.int64),
        ("size_bytes", np.int64), ("rwbs", np.uint32), ("error", np.int32))}
    rwbs_id = np.full(1 << 17, -1, np.int64)
    rwbs_keys = np.zeros((1 << 17) + 1, np.int64)
    for f in files:
        _emit(f.buf, f.offs, f.big, f.version, dest, f.base, comm_pid, rwbs_id, rwbs_keys, *col.values())
    event_names = categories("event", [ACTION_EVENT.get(c, "") for c in range(14)])
    rwbs_texts = categories("rwbs", [rwbs_text(k) for k in rwbs_keys[1:rwbs_keys[0] + 1].tolist()])
    return pl.DataFrame({
        "ts": col["ts"], "cpu": col["cpu"], "pid": col["pid"],
        "event": event_names.gather(col["event"]), "dev_major": col["dev_major"], "dev_minor": col["dev_minor"],
        "sector": col["sector"], "nr_sector": col["nr_sector"], "size_bytes": col["size_bytes"],
        "rwbs": rwbs_texts.gather(col["rwbs"]), "error": col["error"],
    }).with_columns(  # constant columns stay scalars (no 5 M-row copies of one value)
        rep=pl.lit(rep, dtype=pl.Int32),
        comm=categories("comm", comm_text).gather(col["comm"]) if comm_of else pl.lit("", pl.Categorical()))
