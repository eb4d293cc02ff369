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

from mobiperf.collectors.parse.perfetto_schema import message_class

CLOCK_NAMES = {1: "realtime", 2: "realtime_coarse", 3: "monotonic", 4: "monotonic_coarse", 5: "monotonic_raw",
               6: "boottime"}


def block_frame(groups, names, rep: int) -> pl.DataFrame:
    frames = []
    for g in groups:
        c = g.cols
        dev = c.int("dev")
        sector = c.int("sector")
        nr = c.int("nr_sector")
        if c.has("sector"):
            sector = np.where(sector < 0, -1, sector)
        if c.has("new_sector"):
            new = c.int("new_sector")
            nr = np.where((new >= 0) & (sector >= 0), new - sector, -1)
        size = np.where(nr >= 0, nr * 512, -1)
        if c.has("bytes"):
            nbytes = c.int("bytes")
            size = np.where(nbytes > 0, nbytes, size)
        error = c.ints["error"] if "error" in c.ints else c.int("errors", 0)
        no_dev = np.ones(len(g), bool) if not c.has("dev") else dev < 0
        comm = c.strings["comm"] if "comm" in c.strings else names.lookup(g.pid, g.ts)
        frames.append(pl.DataFrame({
            "order": g.order, "rep": np.full(len(g), rep, np.int32), "ts": g.ts, "cpu": g.cpu, "pid": g.pid,
            "comm": comm, "event": pl.Series([g.name] * len(g), dtype=pl.Utf8),
            "dev_major": np.where(no_dev, -1, dev >> 20).astype(np.int32),
            "dev_minor": np.where(no_dev, -1, dev & 0xFFFFF).astype(np.int32),
            "sector": sector if c.has("sector") else np.full(len(g), -1, np.int64), "nr_sector": nr,
            "size_bytes": size, "rwbs": c.strings.get("rwbs", pl.Series([""] * len(g), dtype=pl.Utf8)),
            "error": error.astype(np.int32)}))
    return pl.concat(frames, how="vertical_relaxed").sort("order").drop("order")


def marker_frame(groups, rep: int) -> pl.DataFrame:
    return pl.concat([pl.DataFrame({"order": g.order, "rep": np.full(len(g), rep, np.int32), "ts": g.ts,
                                    "pid": g.pid, "text": g.cols.strings.get("buf", pl.Series([""] * len(g)))
                                    .str.strip_chars()}) for g in groups]).sort("order").drop("order")


def head_frame(g, names, body: pl.Series) -> pl.DataFrame:
    return pl.DataFrame({"order": g.order, "ts": g.ts, "cpu": g.cpu, "pid": g.pid,
                         "comm": names.lookup(g.pid, g.ts), "event": pl.Series([g.name] * len(g), dtype=pl.Utf8),
                         "body": body})


def loss_summary(bundles, metas) -> dict:
    """What was lost: bundles the kernel flagged, the ftrace_stats overruns and drops (end minus start, per
    CPU), traced's buffer chunks overwritten or discarded, and its writers' packet losses."""
    flagged = int(np.count_nonzero(bundles[1]))
    stats_cls = message_class("FtraceStats")
    by_phase: dict[int, dict[int, tuple[int, int]]] = {}
    for _, raw in metas.get("ftrace_stats", []):
        s = stats_cls.FromString(raw)
        by_phase[s.phase] = {c.cpu: (c.overrun, c.dropped_events) for c in s.cpu_stats}
    start, end = by_phase.get(1, {}), by_phase.get(2, {})
    overrun = sum(max(v[0] - start.get(cpu, (0, 0))[0], 0) for cpu, v in end.items())
    dropped = sum(max(v[1] - start.get(cpu, (0, 0))[1], 0) for cpu, v in end.items())
    out = {"bundles_with_lost_events": flagged, "overrun": overrun, "dropped_events": dropped,
           "ftrace_stats": bool(end)}
    chunks = loss = 0
    trace_stats_cls = message_class("TraceStats")
    for _, raw in metas.get("trace_stats", [])[-1:]:
        t = trace_stats_cls.FromString(raw)
        chunks = sum(b.chunks_overwritten + b.chunks_discarded for b in t.buffer_stats)
        loss = sum(b.trace_writer_packet_loss for b in t.buffer_stats)
    out.update(buffer_chunks_lost=chunks, writer_packet_loss=loss)
    # Without stats each flagged bundle stands for at least one lost event.
    out["lost_events"] = overrun + dropped if end else flagged
    return out


def clock_summary(metas) -> dict:
    snaps = []
    cls = message_class("ClockSnapshot")
    for _, raw in metas.get("clock_snapshot", []):
        s = cls.FromString(raw)
        snaps.append({CLOCK_NAMES.get(c.clock_id, f"clock_{c.clock_id}"): c.timestamp for c in s.clocks})
    out = {"clock_snapshots": len(snaps)}
    if snaps:
        out["clock_snapshot"] = snaps[0]
        first = snaps[0]
        if "boottime" in first and "monotonic" in first:  # suspend time: boottime runs on, monotonic does not
            out["boottime_minus_monotonic_ns"] = first["boottime"] - first["monotonic"]
    return out


def system_summary(metas) -> dict:
    cls = message_class("SystemInfo")
    for _, raw in metas.get("system_info", [])[:1]:
        s = cls.FromString(raw)
        return {"system": {k: v for k, v in {
            "kernel": s.utsname.release, "machine": s.utsname.machine,
            "android_build": s.android_build_fingerprint, "sdk": s.android_sdk_version or None,
            "tracing_service": s.tracing_service_version, "cpus": s.num_cpus or None,
            "page_size": s.page_size or None}.items() if v}}
    return {}
