"""A run as a Perfetto protobuf trace of TrackEvents: what ui.perfetto.dev and trace_processor open natively.

Tracks and what is on them (spans and links from export_spans.run_spans()):
  thread tracks    one per thread (pid = tid: the traces carry no thread group), named by its comm: the app's
                   calls (layer syscall: path, size, offset, sync mode, file type as arguments), the FUSE requests
                   it served (on the daemon thread that replied), the lower file system's calls (fs), jbd2
                   commits (journal, on the jbd2 thread)
  device tracks    one per block device ("block 259:40"): each request from queue (or issue) to completion, with
                   Q2G, G2I, I2D and D2C as nested slices laid end to end (D2C from issue to completion)
  flows            an arrow from every span to each span it caused (call -> FUSE request -> lower fs call ->
                   journal commit / block request): flow_ids on the parent's slice, terminating_flow_ids on the
                   child's
  counters         per device: requests in flight at the device (issue -> complete), throughput (MB/s completed
                   per THROUGHPUT_BIN_NS window); dirty pages where the run traced them (writeback's
                   global_dirty_state / balance_dirty_pages events in fs_event)
A track holds properly nested slices only: a span that would overlap another partially (requests in flight
together on a device, strace-placed calls) goes to a child track of its own ("lane N"), the lowest free one.
Several repetitions: each rep's tracks are named "rep N · ..." and kept apart.
Timestamps are the run's trace clock (ns), as in its tables.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from mobiperf.reports.export_spans import PHASES, run_spans
from mobiperf.core.runstore import RunDir

THROUGHPUT_BIN_NS = 10_000_000
SEQ = 1
TYPE_BEGIN, TYPE_END, TYPE_COUNTER = 1, 2, 4
ARG_COLUMNS = {"syscall": ("path", "size_bytes", "offset_bytes", "sync_mode", "file_type"),
               "fuse": ("size_bytes", "op"), "fs": ("op", "dev"), "journal": ("dev",),
               "block": ("sector", "size_bytes", "op", "sync_mode", "file_type", "path", "comm", "tid")}


@dataclass
class Slice:
    key: tuple
    name: str
    category: str
    ts: int
    end: int
    args: dict
    flows_out: list[int] = field(default_factory=list)
    flows_in: list[int] = field(default_factory=list)
    children: list["Slice"] = field(default_factory=list)  # drawn inside it on its track (block phases)


def nest_lanes(slices: list[Slice]) -> list[list[Slice]]:
    """Slices split into lanes where every two slices are disjoint or one contains the other; each slice goes
    to the lowest lane where it nests."""
    lanes: list[list[Slice]] = []
    stacks: list[list[Slice]] = []
    for s in sorted(slices, key=lambda s: (s.ts, -s.end)):
        for lane, stack in zip(lanes, stacks):
            while stack and stack[-1].end <= s.ts:
                stack.pop()
            if not stack or stack[-1].end >= s.end:
                lane.append(s)
                stack.append(s)
                break
        else:
            lanes.append([s])
            stacks.append([s])
    return lanes


def lane_events(lane: list[Slice]) -> list[tuple[int, int, Slice | None]]:
    """(ts, type, slice) begin/end events of one lane in an order that nests (children end before parents)."""
    out, stack = [], []
    for s in lane:  # already in (ts, -end) order
        while stack and stack[-1].end <= s.ts:
            out.append((stack[-1].end, TYPE_END, stack.pop()))
        out.append((s.ts, TYPE_BEGIN, s))
        out += _child_events(s)
        stack.append(s)
    while stack:
        out.append((stack[-1].end, TYPE_END, stack.pop()))
    return out


def _child_events(s: Slice) -> list[tuple[int, int, Slice]]:
    events = []
    for c in s.children:
        events += [(c.ts, TYPE_BEGIN, c), (c.end, TYPE_END, c)]
    return events


class TraceWriter:
    """Length-prefixed TracePackets (the Trace message's packet field), written as they are made."""

    def __init__(self, f):
        from mobiperf.core.perfetto_protos import message_class

        self.f, self.Packet, self.uuid = f, message_class("TracePacket"), 0
        self.first = True

    def write(self, packet) -> None:
        packet.trusted_packet_sequence_id = SEQ
        if self.first:
            packet.sequence_flags = 1  # SEQ_INCREMENTAL_STATE_CLEARED
            self.first = False
        data = packet.SerializeToString()
        self.f.write(b"\x0a" + _varint(len(data)) + data)

    def track(self, name: str, *, parent: int | None = None, thread: tuple[int, str] | None = None,
              counter: str | None = None) -> int:
        self.uuid += 1
        p = self.Packet()
        d = p.track_descriptor
        d.uuid = self.uuid
        if thread is not None:
            d.thread.pid, d.thread.tid, d.thread.thread_name = thread[0], thread[0], thread[1]
        else:
            d.name = name
        if parent is not None:
            d.parent_uuid = parent
        if counter is not None:
            d.counter.unit_name = counter
        self.write(p)
        return self.uuid

    def event(self, ts: int, kind: int, track: int, s: Slice | None = None, value: float | None = None) -> None:
        p = self.Packet()
        p.timestamp = int(ts)
        e = p.track_event
        e.type, e.track_uuid = kind, track
        if kind == TYPE_BEGIN:
            e.name = s.name
            e.categories.append(s.category)
            for k, v in s.args.items():
                a = e.debug_annotations.add()
                a.name = k
                if isinstance(v, bool) or not isinstance(v, (int, float)):
                    a.string_value = str(v)
                elif isinstance(v, int):
                    a.int_value = v
                else:
                    a.double_value = v
            e.flow_ids.extend(s.flows_out)
            e.terminating_flow_ids.extend(s.flows_in)
        elif kind == TYPE_COUNTER:
            e.double_counter_value = float(value)
        self.write(p)


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def write_track_trace(run: RunDir, path: Path) -> dict:
    """Write the run as a Perfetto protobuf trace; returns what was written (slices per layer, flows, ...)."""
    spans, source = run_spans(run)
    dirty = _dirty_pages(run)
    counts: dict = {"source": source}
    tmp = Path(path).with_name(f".{Path(path).name}.tmp")
    with open(tmp, "wb") as f:
        w = TraceWriter(f)
        reps = sorted(spans["rep"].unique().to_list()) if len(spans) else []
        for rep in reps:
            prefix = f"rep {rep} · " if len(reps) > 1 else ""
            _write_rep(w, spans.filter(pl.col("rep") == rep), prefix, counts)
            if dirty is not None:
                _write_counter(w, f"{prefix}dirty pages", "pages", dirty.filter(pl.col("rep") == rep), counts)
    tmp.replace(path)
    return counts


def _write_rep(w: TraceWriter, spans: pl.DataFrame, prefix: str, counts: dict) -> None:
    slices = {}
    for r in spans.iter_rows(named=True):
        s = Slice((r["span_id"],), r["name"] or r["layer"], r["layer"], r["ts"], max(r["end_ts"], r["ts"]),
                  _args(r))
        if r["layer"] == "block":
            s.children = _phases(r, s)
        slices[r["span_id"]] = (s, r)
    for child, parent in spans.filter(pl.col("parent_id").is_not_null()).select("span_id", "parent_id").iter_rows():
        if parent in slices and child in slices:
            counts["flows"] = fid = counts.get("flows", 0) + 1  # unique over the whole trace
            slices[parent][0].flows_out.append(fid)
            slices[child][0].flows_in.append(fid)
    threads: dict[int, list[Slice]] = {}
    devices: dict[tuple[int, int], list[Slice]] = {}
    names: dict[int, str] = {}
    for s, r in slices.values():
        counts[s.category] = counts.get(s.category, 0) + 1
        counts["block.phase"] = counts.get("block.phase", 0) + len(s.children)
        if r["layer"] == "block":
            devices.setdefault((r["dev_major"], r["dev_minor"]), []).append(s)
        else:
            threads.setdefault(r["tid"], []).append(s)
            names.setdefault(r["tid"], r["comm"] or str(r["tid"]))
    events = []
    for tid, group in sorted(threads.items(), key=lambda kv: kv[0] or 0):
        track = w.track("", thread=(tid or 0, f"{prefix}{names[tid]}"))
        events += _lanes(w, group, track, "lane")
    for (major, minor), group in sorted(devices.items(), key=lambda kv: (kv[0][0] or 0, kv[0][1] or 0)):
        track = w.track(f"{prefix}block {major}:{minor}")
        events += _lanes(w, group, track, "request lane", disjoint=True)
        _device_counters(w, f"{prefix}block {major}:{minor}", group, counts)
    counts["tracks"] = w.uuid
    events.sort(key=lambda e: e[0])  # stable: each track's own order is kept among equal timestamps
    for ts, kind, track, s in events:
        w.event(ts, kind, track, s)


def _lanes(w: TraceWriter, group: list[Slice], track: int, what: str, disjoint: bool = False) -> list:
    """Events of a track's slices; lanes past the first are child tracks of it. disjoint: no nesting either
    (block requests, whose phases are their own nested slices)."""
    lanes = _disjoint_lanes(group) if disjoint else nest_lanes(group)
    events = []
    for k, lane in enumerate(lanes):
        uuid = track if k == 0 else w.track(f"{what} {k}", parent=track)
        events += [(ts, kind, uuid, s) for ts, kind, s in lane_events(lane)]
    return events


def _disjoint_lanes(group: list[Slice]) -> list[list[Slice]]:
    from mobiperf.reports.perfetto_json import assign_lanes

    ordered = sorted(group, key=lambda s: (s.ts, s.end))
    lanes: list[list[Slice]] = []
    for s, lane in zip(ordered, assign_lanes([s.ts for s in ordered], [s.end for s in ordered])):
        while len(lanes) <= lane:
            lanes.append([])
        lanes[lane].append(s)
    return lanes


def _phases(r: dict, s: Slice) -> list[Slice]:
    """Q2G, G2I, I2D end to end from the queue time, D2C from issue to completion, each clipped to the request."""
    out, t = [], r["queue_ts"] if r["queue_ts"] is not None else r["issue_ts"]
    for name, col in PHASES:
        d = r[col]
        if d is None or t is None or d < 0:
            continue
        if name == "D2C" and r["issue_ts"] is not None:
            t = r["issue_ts"]
        start, end = max(t, s.ts), min(t + d, s.end)
        if end >= start:
            out.append(Slice(s.key + (name,), name, "block.phase", start, end, {}))
        t += d
    return out


def _args(r: dict) -> dict:
    out = {}
    for col in ARG_COLUMNS.get(r["layer"], ()):
        v = f"{r['dev_major']}:{r['dev_minor']}" if col == "dev" and r["dev_major"] is not None else r.get(col)
        if v is not None and v != "" and not (isinstance(v, int) and v < 0 and col != "tid"):
            out[col] = v
    return out


def _device_counters(w: TraceWriter, name: str, group: list[Slice], counts: dict) -> None:
    reqs = [(s.args, s) for s in group]
    issue = [(c.ts, c.end) for _, s in reqs for c in s.children if c.name == "D2C"]
    if issue:
        changes = sorted([(a, 1) for a, _ in issue] + [(b, -1) for _, b in issue], key=lambda x: (x[0], x[1]))
        depth, rows = 0, []
        for ts, d in changes:
            depth += d
            if rows and rows[-1][0] == ts:
                rows[-1] = (ts, depth)
            else:
                rows.append((ts, depth))
        _write_counter(w, f"{name} · in flight", "requests", pl.DataFrame(rows, schema=["ts", "value"],
                                                                        orient="row"), counts)
    done = pl.DataFrame({"ts": [s.end for _, s in reqs], "bytes": [a.get("size_bytes", 0) for a, _ in reqs]})
    if len(done):
        per_bin = done.with_columns(ts=pl.col("ts") // THROUGHPUT_BIN_NS * THROUGHPUT_BIN_NS).group_by("ts").agg(
            pl.col("bytes").sum()).sort("ts")
        full = pl.DataFrame({"ts": np.arange(per_bin["ts"].min(), per_bin["ts"].max() + 2 * THROUGHPUT_BIN_NS,
                                             THROUGHPUT_BIN_NS)}).join(per_bin, on="ts", how="left")
        mbps = full.select("ts", value=pl.col("bytes").fill_null(0) / 1e6 / (THROUGHPUT_BIN_NS / 1e9))
        _write_counter(w, f"{name} · throughput", "MB/s", mbps, counts)


def _write_counter(w: TraceWriter, name: str, unit: str, rows: pl.DataFrame, counts: dict) -> None:
    if not len(rows):
        return
    track = w.track(name, counter=unit)
    for ts, value in rows.select("ts", "value").iter_rows():
        w.event(ts, TYPE_COUNTER, track, value=value)
    counts["counter"] = counts.get("counter", 0) + len(rows)


def _dirty_pages(run: RunDir) -> pl.DataFrame | None:
    """Dirty page counts from writeback events the run traced (global_dirty_state `dirty=N`)."""
    if not run.has_table("fs_event"):
        return None
    ev = run.read_table("fs_event").filter(pl.col("event").is_in(["writeback_global_dirty_state",
                                                                   "global_dirty_state",
                                                                   "writeback_balance_dirty_pages",
                                                                   "balance_dirty_pages"]))
    rows = ev.select("rep", "ts", value=pl.col("body").str.extract(r"\bdirty=(\d+)", 1).cast(pl.Int64, strict=False))
    rows = rows.filter(pl.col("value").is_not_null())
    return rows if len(rows) else None
