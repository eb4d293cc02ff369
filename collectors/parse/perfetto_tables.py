"""Rows of the Perfetto reader's tables from decoded event groups (perfetto_trace.py), and its summary.

block_frame    block_event with the text parser's definitions (ftrace_text._block_columns): dev the kernel dev_t
               (major = dev >> 20, minor = dev & 0xfffff), sector -1 for (sector_t)-1, block_split's size from
               new_sector - sector, size = bytes where the event has it and it is > 0 else nr_sector * 512, -1 on
               plug/unplug; error from `error` (newer kernels) or `errors`; comm the event's own where its proto
               has one (the text prints it in [brackets]), else the thread's name
marker_frame   trace_marker: print's buf without surrounding whitespace
head_frame     (order, ts, cpu, pid, comm, event, body) rows for parse_other_events / generic_event
"""

from __future__ import annotations

import numpy as np
import polars as pl

from mobiperf.collectors.parse.event_fields import strings
from mobiperf.collectors.parse.perfetto_schema import decode_message

CLOCK_NAMES = {1: "realtime", 2: "realtime_coarse", 3: "monotonic", 4: "monotonic_coarse", 5: "monotonic_raw",
               6: "boottime"}


def block_frame(groups, names, rep: int, buf: np.ndarray) -> pl.DataFrame:
    """One block_event table in trace order. Each group's rows go straight to their places in preallocated
    columns (its fields are decoded then released, one group at a time); the strings are byte spans of the
    trace buffer until then, and each string column is built once, in order."""
    n = sum(len(g) for g in groups)
    # The place of every row: its rank among the block rows of the merged trace order.
    place = np.empty(n, np.int64)
    place[np.argsort(np.concatenate([g.order for g in groups]), kind="stable")] = np.arange(n)
    out = {k: np.empty(n, t) for k, t in (("ts", np.int64), ("cpu", np.int32), ("pid", np.int32),
                                          ("dev_major", np.int32), ("dev_minor", np.int32), ("sector", np.int64),
                                          ("nr_sector", np.int64), ("size_bytes", np.int64), ("error", np.int32),
                                          ("code", np.int32), ("comm_s", np.int64), ("comm_e", np.int64),
                                          ("rwbs_s", np.int64), ("rwbs_e", np.int64))}
    named, at = [], 0  # (places, comm) of the events whose proto has no comm: the thread's name
    for k, g in enumerate(groups):
        c, size = g.cols, len(g)
        where = place[at:at + size]
        at += size
        dev = c.int("dev")
        sector = c.int("sector")
        sector = np.where(sector < 0, -1, sector)  # (sector_t)-1 and the like: none
        nr = c.int("nr_sector")
        if c.has("new_sector"):  # block_split: the first part runs from sector to new_sector
            new = c.int("new_sector")
            nr = np.where((new >= 0) & (sector >= 0), new - sector, -1)
        bytes_ = np.where(nr >= 0, nr * 512, -1)
        if c.has("bytes"):  # rq insert/issue: real bytes on 4.x+, 0 for fs requests on 3.x
            bytes_ = np.where(c.int("bytes") > 0, c.int("bytes"), bytes_)
        out["ts"][where], out["cpu"][where], out["pid"][where] = g.ts, g.cpu, g.pid
        out["dev_major"][where] = np.where(dev < 0, -1, dev >> 20)
        out["dev_minor"][where] = np.where(dev < 0, -1, dev & 0xFFFFF)
        out["sector"][where], out["nr_sector"][where], out["size_bytes"][where] = sector, nr, bytes_
        out["error"][where] = c.ints["error"] if "error" in c.ints else c.int("errors", 0)
        out["code"][where] = k
        for name in ("comm", "rwbs"):
            out[f"{name}_s"][where], out[f"{name}_e"][where] = c.spans.get(name, (0, 0))
        if "comm" not in c.spans:
            named.append((where, names.lookup(g.pid, g.ts)))
        g.release()
    comm = strings(buf, out.pop("comm_s"), out.pop("comm_e"))
    for where, resolved in named:
        comm = comm.scatter(where, resolved)
    code = out.pop("code")
    return pl.DataFrame({
        "rep": np.full(n, rep, np.int32), "ts": out["ts"], "cpu": out["cpu"], "pid": out["pid"], "comm": comm,
        "event": pl.Series([g.name for g in groups]).gather(pl.Series(code)),
        "dev_major": out["dev_major"], "dev_minor": out["dev_minor"], "sector": out["sector"],
        "nr_sector": out["nr_sector"], "size_bytes": out["size_bytes"],
        "rwbs": strings(buf, out.pop("rwbs_s"), out.pop("rwbs_e")), "error": out["error"]})


def marker_frame(groups, rep: int) -> pl.DataFrame:
    return pl.concat([pl.DataFrame({"order": g.order, "rep": np.full(len(g), rep, np.int32), "ts": g.ts,
                                    "pid": g.pid, "text": g.cols.strings.get("buf", pl.Series([""] * len(g)))
                                    .str.strip_chars()}) for g in groups]).sort("order").drop("order")


def head_frame(g, names, body: pl.Series) -> pl.DataFrame:
    return pl.DataFrame({"order": g.order, "ts": g.ts, "cpu": g.cpu, "pid": g.pid,
                         "comm": names.lookup(g.pid, g.ts), "event": _repeat(g.name, len(g)),
                         "body": body})


def _repeat(text: str, n: int) -> pl.Series:
    return pl.select(pl.repeat(text, n, dtype=pl.Utf8)).to_series()


def loss_summary(bundles, metas) -> dict:
    """What was lost: bundles the kernel flagged, the ftrace_stats overruns and drops (end minus start, per
    CPU), traced's buffer chunks overwritten or discarded, and its writers' packet losses."""
    flagged = int(np.count_nonzero(bundles[1]))
    by_phase: dict[int, dict[int, tuple[int, int]]] = {}
    for _, raw in metas.get("ftrace_stats", []):
        s = decode_message("FtraceStats", raw)
        if s is None:
            continue
        by_phase[s.phase] = {c.cpu: (c.overrun, c.dropped_events) for c in s.cpu_stats}
    start, end = by_phase.get(1, {}), by_phase.get(2, {})
    overrun = sum(max(v[0] - start.get(cpu, (0, 0))[0], 0) for cpu, v in end.items())
    dropped = sum(max(v[1] - start.get(cpu, (0, 0))[1], 0) for cpu, v in end.items())
    out = {"bundles_with_lost_events": flagged, "overrun": overrun, "dropped_events": dropped,
           "ftrace_stats": bool(end)}
    chunks = loss = 0
    for _, raw in metas.get("trace_stats", [])[-1:]:
        t = decode_message("TraceStats", raw)
        if t is None:
            continue
        chunks = sum(b.chunks_overwritten + b.chunks_discarded for b in t.buffer_stats)
        loss = sum(b.trace_writer_packet_loss for b in t.buffer_stats)
    out.update(buffer_chunks_lost=chunks, writer_packet_loss=loss)
    # Without stats each flagged bundle stands for at least one lost event.
    out["lost_events"] = overrun + dropped if end else flagged
    return out


def clock_summary(metas) -> dict:
    snaps = []
    for _, raw in metas.get("clock_snapshot", []):
        s = decode_message("ClockSnapshot", raw)
        if s is None:
            continue
        snaps.append({CLOCK_NAMES.get(c.clock_id, f"clock_{c.clock_id}"): c.timestamp for c in s.clocks})
    out = {"clock_snapshots": len(snaps)}
    if snaps:
        out["clock_snapshot"] = snaps[0]
        first = snaps[0]
        if "boottime" in first and "monotonic" in first:  # suspend time: boottime runs on, monotonic does not
            out["boottime_minus_monotonic_ns"] = first["boottime"] - first["monotonic"]
    return out


def system_summary(metas) -> dict:
    for _, raw in metas.get("system_info", [])[:1]:
        s = decode_message("SystemInfo", raw)
        if s is None:
            continue
        return {"system": {k: v for k, v in {
            "kernel": s.utsname.release, "machine": s.utsname.machine,
            "android_build": s.android_build_fingerprint, "sdk": s.android_sdk_version or None,
            "tracing_service": s.tracing_service_version, "cpus": s.num_cpus or None,
            "page_size": s.page_size or None}.items() if v}}
    return {}
