"""Rows of the Perfetto reader's tables from decoded event groups (perfetto_trace.py), and its summary.

BlockRows      block_event with the text parser's definitions (ftrace_text._block_columns): dev the kernel dev_t
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


class BlockRows:
    """block_event rows gathered chunk by chunk (perfetto_trace.py reads a trace in chunks of packets): numeric
    columns as numpy pieces, comm and rwbs as codes of interned strings (a trace has few distinct ones), so no
    chunk's bytes are needed after it; finish() puts every row in the kernel's merged order."""

    NUMERIC = (("ts", np.int64), ("cpu", np.int32), ("pid", np.int32), ("dev_major", np.int32),
               ("dev_minor", np.int32), ("sector", np.int64), ("nr_sector", np.int64), ("size_bytes", np.int64),
               ("error", np.int32), ("pos", np.int64), ("code", np.int32), ("comm", np.int32), ("rwbs", np.int32))

    def __init__(self):
        self.parts: dict[str, list[np.ndarray]] = {k: [] for k, _ in self.NUMERIC}
        self.texts: dict[str, int] = {"": 0}
        self.events: dict[str, int] = {}
        self.unnamed: list[tuple[int, np.ndarray, np.ndarray]] = []  # rows whose comm is the thread's name
        self.n = 0

    def intern(self, values: list[str]) -> np.ndarray:
        return np.array([self.texts.setdefault(v, len(self.texts)) for v in values], np.int32)

    def _codes(self, buf: np.ndarray, spans: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        from mobiperf.collectors.parse.perfetto_wire import hash_spans

        starts, ends = spans
        uniq, first, inverse = np.unique(hash_spans(buf, starts, ends), return_index=True, return_inverse=True)
        return self.intern(strings(buf, starts[first], ends[first]).to_list())[inverse]

    def add(self, g, buf: np.ndarray) -> None:
        """One group's rows (the text parser's definitions, module docstring); its fields are then released."""
        c, size = g.cols, len(g)
        dev = c.int("dev")
        sector = c.int("sector")
        sector = np.where(sector < 0, -1, sector)  # (sector_t)-1 and the like: none
        nr = c.int("nr_sector")
        if c.has("new_sector"):  # block_split: the first part runs from sector to new_sector
            new = c.int("new_sector")
            nr = np.where((new >= 0) & (sector >= 0), new - sector, -1)
        nbytes = np.where(nr >= 0, nr * 512, -1)
        if c.has("bytes"):  # rq insert/issue: real bytes on 4.x+, 0 for fs requests on 3.x
            nbytes = np.where(c.int("bytes") > 0, c.int("bytes"), nbytes)
        cols = {"ts": g.ts, "cpu": g.cpu, "pid": g.pid, "dev_major": np.where(dev < 0, -1, dev >> 20),
                "dev_minor": np.where(dev < 0, -1, dev & 0xFFFFF), "sector": sector, "nr_sector": nr,
                "size_bytes": nbytes, "error": c.ints["error"] if "error" in c.ints else c.int("errors", 0),
                "pos": g.order, "code": np.full(size, self.events.setdefault(g.name, len(self.events))),
                "rwbs": self._codes(buf, c.spans["rwbs"]) if "rwbs" in c.spans else np.zeros(size, np.int32)}
        if "comm" in c.spans:
            cols["comm"] = self._codes(buf, c.spans["comm"])
        else:
            cols["comm"] = np.full(size, -1, np.int32)
            self.unnamed.append((self.n, g.pid, g.ts))
        for k, t in self.NUMERIC:
            self.parts[k].append(np.asarray(cols[k], t))
        self.n += size
        g.release()

    def finish(self, names, rep: int) -> pl.DataFrame:
        """The rows in the kernel's merged order (time, then CPU, then as recorded), strings made once."""
        cols = {k: self._column(k) for k in ("ts", "cpu", "pos")}
        order = np.lexsort((cols.pop("pos"), cols["cpu"], cols["ts"]))
        if (np.diff(order) == 1).all():
            order = None  # already in order: no gather
        comm = self._column("comm")
        for at, pid, ts in self.unnamed:  # the thread's name at that moment, as the kernel's header prints it
            comm[at:at + len(pid)] = self.intern(names.lookup(pid, ts).to_list())
        out = {"rep": np.full(self.n, rep, np.int32)}
        for k, _ in self.NUMERIC:
            if k == "pos":
                continue
            col = cols.pop(k) if k in cols else (comm if k == "comm" else self._column(k))
            out[k] = col[order] if order is not None else col
        texts = pl.Series(list(self.texts), dtype=pl.Utf8)
        events = pl.Series(list(self.events), dtype=pl.Utf8)
        return pl.DataFrame({
            "rep": out["rep"], "ts": out["ts"], "cpu": out["cpu"], "pid": out["pid"],
            "comm": texts.gather(pl.Series(out.pop("comm"))), "event": events.gather(pl.Series(out.pop("code"))),
            "dev_major": out["dev_major"], "dev_minor": out["dev_minor"], "sector": out["sector"],
            "nr_sector": out["nr_sector"], "size_bytes": out["size_bytes"],
            "rwbs": texts.gather(pl.Series(out.pop("rwbs"))), "error": out["error"]})

    def _column(self, k: str) -> np.ndarray:
        parts = self.parts[k]
        col = np.concatenate(parts) if parts else np.empty(0, dict(self.NUMERIC)[k])
        parts.clear()  # the pieces go as the column is made
        return col


def in_trace_order(frame: pl.DataFrame) -> pl.DataFrame:
    """Rows of head/marker frames (ts, cpu, pos) in the kernel's merged order, pos dropped."""
    return frame.sort("ts", "cpu", "pos").drop("pos")


def marker_frame(g, rep: int) -> pl.DataFrame:
    return pl.DataFrame({"pos": g.order, "cpu": g.cpu, "rep": np.full(len(g), rep, np.int32), "ts": g.ts,
                         "pid": g.pid, "text": g.cols.strings.get("buf", pl.Series([""] * len(g))).str.strip_chars()})


def head_frame(g, body: pl.Series) -> pl.DataFrame:
    """(pos, ts, cpu, pid, event, body): the thread's comm is added once every name of the trace is known."""
    return pl.DataFrame({"pos": g.order, "ts": g.ts, "cpu": g.cpu, "pid": g.pid, "event": _repeat(g.name, len(g)),
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
