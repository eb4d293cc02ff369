"""blktrace records decoded with numpy alone: the same rows as the compiled decoder (blktrace.py), for small sets.

A set of a few MB is parsed in milliseconds either way; what the compiled decoder costs there is numba's start
(about a second of CPU and 90 MB the first time a process calls compiled code). This decoder walks the record
chain in Python (one step per record: notes have odd lengths, so records are not aligned), then gathers every
header with one numpy fancy index and reads it as a structured array of the records' byte order.
Definitions (row mapping, rwbs, notes, lost records, resyncs, cut records, row order) are blktrace.py's; tests
hold the two decoders equal on the fixtures, on generated record sets and on fuzzed bytes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from mobiperf.collectors.parse.blktrace_format import (ACTION_EVENT, CGROUP_FLAG, HEADER_SIZE, BlktraceTables,
                                                       comm_lookup, detect_format, map_file, note_record,
                                                       note_tables, rwbs_text, sequence_gaps)
from mobiperf.core.schema import BLOCK_EVENT, categories

TOP = (1 << 63) - 1


def _header_dtype(version: int, big: bool) -> np.dtype:
    e = ">" if big else "<"
    if version == 7:
        fields = [("magic", "u4"), ("seq", "u4"), ("time", "u8"), ("sector", "u8"), ("bytes", "u4"),
                  ("action", "u4"), ("pid", "u4"), ("device", "u4"), ("cpu", "u4"), ("error", "u2"),
                  ("pdu_len", "u2")]
    else:
        fields = [("magic", "u4"), ("seq", "u4"), ("time", "u8"), ("sector", "u8"), ("bytes", "u4"),
                  ("pid", "u4"), ("action", "u8"), ("device", "u4"), ("cpu", "u4"), ("error", "u2"),
                  ("pdu_len", "u2"), ("pad", "V12")]
    return np.dtype([(name, e + t if t[0] != "V" else t) for name, t in fields])


def _walk(data: bytes, version: int, big: bool) -> tuple[list[int], int, int, int]:
    """(record offsets, end of the last complete one, resyncs, first resync offset): blktrace._walk."""
    n, hdr = len(data), HEADER_SIZE[version]
    pdu_at = 46 if version == 7 else 50
    magic = bytes([0x65, 0x61, 0x74, version]) if big else bytes([version, 0x74, 0x61, 0x65])
    offs, p, resyncs, first = [], 0, 0, -1
    while p + hdr <= n:
        if data[p:p + 4] == magic:
            plen = int.from_bytes(data[p + pdu_at:p + pdu_at + 2], "big" if big else "little")
            if p + hdr + plen > n:
                break  # a cut last record
            offs.append(p)
            p += hdr + plen
            continue
        if first < 0:
            first = p
        resyncs += 1
        q = data.find(magic, p + 1)
        p = q if 0 <= q and q + hdr <= n else max(p + 1, n - hdr + 1)
    return offs, p, resyncs, first


def parse_blktrace_numpy(paths: list[Path], rep: int = 0) -> BlktraceTables:
    """block_event and trace_marker rows of a set of blktrace files, as parse_blktrace_compiled makes them."""
    warnings: list[str] = []
    notes: list[tuple[int, int, int, bytes, str]] = []
    parts: list[dict] = []
    lost = 0
    for path in paths:
        buf = map_file(path)
        if not len(buf):
            continue
        version, big = detect_format(bytes(buf[:4]), path)
        offs, end, resyncs, first = _walk(buf.tobytes(), version, big)
        if resyncs:
            warnings.append(f"{path}: {resyncs} stretch(es) of bytes that are not blktrace records, the first at "
                            f"byte offset {first}; skipped to the next record")
        if end < len(buf):
            warnings.append(f"{path}: cut record at byte offset {end} (truncated file); every complete record "
                            "before it was kept")
        hdr = HEADER_SIZE[version]
        o = np.array(offs, np.int64)
        h = buf[o[:, None] + np.arange(hdr)].reshape(-1).view(_header_dtype(version, big)) if len(o) else \
            np.zeros(0, _header_dtype(version, big))
        action = h["action"].astype(np.uint64)
        is_note = ((action >> np.uint64(16)) & np.uint64(0x400)) != 0
        order = "big" if big else "little"
        for off in o[is_note].tolist():
            notes.append(note_record(buf, off, big, version, order))
        h, o, action = h[~is_note], o[~is_note], action[~is_note]
        lost += sequence_gaps(h["device"].astype(np.int64), h["cpu"].astype(np.int64), h["seq"].astype(np.int64))
        parts.append({"h": h, "o": o, "action": action, "buf": buf, "hdr": hdr})
    comm_of, start_wall, marker_df = note_tables(notes, rep)
    cols = _columns(parts, comm_of)
    action_count = np.bincount(cols.pop("low"), minlength=1 << 16) if len(cols["ts"]) else np.zeros(1 << 16, int)
    codes = np.flatnonzero(action_count)
    skipped = {f"action {int(a)}": int(action_count[a]) for a in codes if int(a) not in ACTION_EVENT}
    known = cols.pop("known")
    keep = np.argsort(cols["ts_sort"], kind="stable")  # time order, ties in file order (blktrace.py's merge)
    keep = keep[known[keep]]
    del cols["ts_sort"]
    comm_text = cols.pop("comm_text")
    c = {k: v[keep] for k, v in cols.items()}
    event_names = categories("event", [ACTION_EVENT.get(k, "") for k in range(14)])
    keys, key_idx = np.unique(c.pop("rwbs_key"), return_inverse=True)
    rwbs_texts = categories("rwbs", [rwbs_text(int(k)) for k in keys])
    block = pl.DataFrame({
        "ts": c["ts"], "cpu": c["cpu"], "pid": c["pid"],
        "event": event_names.gather(c["event"].astype(np.uint32)), "dev_major": c["dev_major"],
        "dev_minor": c["dev_minor"], "sector": c["sector"], "nr_sector": c["nr_sector"],
        "size_bytes": c["size_bytes"], "rwbs": rwbs_texts.gather(key_idx.astype(np.uint32)), "error": c["error"],
    }).with_columns(
        rep=pl.lit(rep, dtype=pl.Int32),
        comm=categories("comm", comm_text).gather(c["comm"]) if comm_of else pl.lit("", pl.Categorical()))
    n_records = len(known)
    return BlktraceTables(block_event=BLOCK_EVENT.validate(block), trace_marker=marker_df, records=n_records,
                          lost_records=lost, skipped_actions=skipped, start_wallclock_ns=start_wall,
                          warnings=warnings)


def _columns(parts: list[dict], comm_of: dict[int, str]) -> dict[str, np.ndarray]:
    """Every non-note record's row columns (in file order), as blktrace._emit decodes them."""
    comm_pid, comm_text = comm_lookup(comm_of)
    out: dict[str, list[np.ndarray]] = {}
    for part in parts:
        h, action, buf, hdr, o = part["h"], part["action"], part["buf"], part["hdr"], part["o"]
        time = h["time"].astype(np.uint64)
        ts = np.where(time <= TOP, time.astype(np.int64), -1)
        sec = h["sector"].astype(np.uint64)
        sector = np.where(sec <= TOP, sec.astype(np.int64), -1)
        nbytes = h["bytes"].astype(np.int64)
        low = ((action & np.uint64(0xFFFF)) & ~np.uint64(CGROUP_FLAG)).astype(np.int64)
        tc = ((action >> np.uint64(16)) & np.uint64(0xFFFF)).astype(np.int64)
        device = h["device"].astype(np.int64)
        err = h["error"].astype(np.int32)
        nr = nbytes >> 9
        size = nbytes.copy()
        plug = np.isin(low, (9, 10, 11))
        split = low == 13
        if split.any():
            idx = np.flatnonzero(split)
            start = o[idx] + hdr + np.where((action[idx] & np.uint64(CGROUP_FLAG)) != 0, 8, 0)
            fits = start + 8 <= o[idx] + hdr + h["pdu_len"][idx].astype(np.int64)
            pdu = np.full(len(idx), -1, np.int64)
            if fits.any():
                raw = buf[start[fits][:, None] + np.arange(8)].reshape(-1).view(">u8").astype(np.uint64)
                pdu[fits] = np.where(raw <= TOP, raw.astype(np.int64), -1)
            split_nr = np.where((pdu >= 0) & (sector[idx] >= 0), pdu - sector[idx], -1)
            nr[idx] = split_nr
            size[idx] = np.where(split_nr >= 0, split_nr * 512, -1)
        sector = np.where(plug, -1, sector)
        nr = np.where(plug, -1, nr)
        size = np.where(plug, -1, size)
        pid = h["pid"].astype(np.int64).astype(np.int32)
        k = np.searchsorted(comm_pid, pid.astype(np.int64))
        found = (k < len(comm_pid)) & (comm_pid[np.minimum(k, max(len(comm_pid) - 1, 0))] == pid) \
            if len(comm_pid) else np.zeros(len(pid), bool)
        cols = {"ts": ts, "ts_sort": ts, "cpu": h["cpu"].astype(np.int64).astype(np.int32), "pid": pid,
                "comm": np.where(found, k + 1, 0).astype(np.uint32), "event": low,
                "dev_major": (device >> 20).astype(np.int32), "dev_minor": (device & 0xFFFFF).astype(np.int32),
                "sector": sector, "nr_sector": nr, "size_bytes": size,
                "rwbs_key": tc * 2 + (nbytes > 0), "error": np.where(err >= 32768, err - 65536, err).astype(np.int32),
                "low": low, "known": (low >= 1) & (low <= 13)}
        for name, v in cols.items():
            out.setdefault(name, []).append(v)
    cols = {name: np.concatenate(v) for name, v in out.items()} if out else {
        name: np.zeros(0, np.int64) for name in ("ts", "ts_sort", "cpu", "pid", "comm", "event", "dev_major",
                                                  "dev_minor", "sector", "nr_sector", "size_bytes", "rwbs_key",
                                                  "error", "low")} | {"known": np.zeros(0, bool)}
    cols["comm_text"] = comm_text
    return cols
