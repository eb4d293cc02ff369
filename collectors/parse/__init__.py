"""Parsers: raw trace files -> typed tables. Pure functions of their input files; they never touch a device.

parse_raw_dir() reads whatever one repetition's raw directory holds and returns its event tables;
derive_tables() then builds the tables that combine events (one row per block request) for all repetitions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import polars as pl


@dataclass
class ParsedRaw:
    tables: dict[str, pl.DataFrame] = field(default_factory=dict)
    summary: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def parse_raw_dir(raw: Path, rep: int) -> ParsedRaw:
    """Every trace one repetition's raw directory holds, each by the parser of its kind.

      ftrace.txt        ftrace text of the main instance: block_event, trace_marker, and the other event tables
      ftrace_raw/       binary per-CPU trace_pipe_raw pages (with formats/): every table ftrace.txt gives
      trace.pftrace     a Perfetto trace (formats/ and kernel_hz beside it where saved): every table ftrace.txt
                        gives, and generic_event (collectors/parse/perfetto_trace.py)
      syscalls.txt      ftrace text of the workload-only instance: syscall_io (source ftrace)
      strace.log        strace -f -ttt -T -y: syscall_io (source strace), on the trace clock with tasks.json's
                        clock readings
      tasks.json        who is who (the workload's root, the FUSE daemons' threads, mobiperf): task_role
      blktrace/         blk_io_trace records (per-CPU files or a blk-tracer stream): block_event when no ftrace
                        block events exist, else blktrace_event (the same columns, kept apart)
      layout/           the layout snapshot: file_extent
    Lost events are reported per source in the summary (ring-buffer overruns, blktrace sequence gaps).
    """
    from mobiperf.collectors.parse.blktrace import blktrace_files, parse_blktrace
    from mobiperf.collectors.parse.ftrace_text import parse_ftrace_text
    from mobiperf.collectors.parse.layout import parse_layout
    from mobiperf.collectors.parse.strace import parse_strace
    from mobiperf.collectors.parse.tasks import read_tasks, task_roles, wall_to_trace_clock

    out = ParsedRaw()
    parts: dict[str, list[pl.DataFrame]] = {}

    def add(name: str, df: pl.DataFrame) -> None:
        parts.setdefault(name, []).append(df)

    for trace_name, source in (("ftrace.txt", "ftrace"), ("syscalls.txt", "syscalls")):
        trace = raw / trace_name
        if not trace.exists():
            continue
        parsed = parse_ftrace_text(trace, rep)
        if len(parsed.block_event) or source == "ftrace":
            add("block_event", parsed.block_event)
        if len(parsed.trace_marker):
            add("trace_marker", parsed.trace_marker)
        for name, df in parsed.events.items():
            add(name, df)
        out.summary[source] = {"lines": parsed.lines, "unparsed": parsed.unparsed_by_event,
                               "other_events": parsed.other_events,
                               # The saved per-CPU stats and the LOST notes in the text see the same loss.
                               "lost_events": max(_ftrace_lost(raw / f"{trace.stem}_stats.json"),
                                                  parsed.lost_events)}
        out.warnings += [f"{trace_name}: {w}" for w in parsed.warnings]
    if (raw / "ftrace_raw").is_dir():
        from mobiperf.collectors.parse.ftrace_raw import parse_ftrace_raw

        binary = parse_ftrace_raw(raw / "ftrace_raw", raw / "formats", rep)
        add("block_event", binary.block_event)
        if len(binary.trace_marker):
            add("trace_marker", binary.trace_marker)
        for name, df in binary.events.items():  # ext4, jbd2, fuse, writeback, syscalls: as the text path
            add(name, df)
        out.summary["ftrace_raw"] = {"events": binary.events_total, "pages": binary.pages,
                                     "undecoded": binary.undecoded, "other_events": binary.other_events,
                                     "unparsed": binary.unparsed_by_event, "unrendered": binary.unrendered,
                                     "lost_events": max(_ftrace_lost(raw / "ftrace_raw_stats.json"),
                                                        binary.lost_events)}
        out.warnings += [f"ftrace_raw: {w}" for w in binary.warnings]
    tasks = read_tasks(raw / "tasks.json")
    if tasks:
        add("task_role", task_roles(tasks, rep))
    if (raw / "trace.pftrace").exists():  # a Perfetto trace (recorded through the device's perfetto, or ingested)
        from mobiperf.collectors.parse.perfetto_trace import add_perfetto_tables

        add_perfetto_tables(raw, rep, add, out)
    strace_log = raw / "strace.log"
    if strace_log.exists():
        parsed_strace = parse_strace(strace_log, rep)
        add("syscall_io", wall_to_trace_clock(parsed_strace.syscall_io, tasks.get("clock", [])))
        out.summary["strace"] = parsed_strace.summary
        out.warnings += parsed_strace.warnings
    if (raw / "blktrace").is_dir():
        for group in blktrace_files(raw / "blktrace"):
            blk = parse_blktrace(group, rep)
            table = "blktrace_event" if "block_event" in parts else "block_event"
            add(table, blk.block_event)
            if len(blk.trace_marker):
                add("trace_marker", blk.trace_marker)
            out.summary.setdefault("blktrace", {})[group[0].name] = {**blk.summary, "table": table,
                                                                    "lost_events": blk.lost_records}
            out.warnings += blk.warnings
    if (raw / "layout").is_dir():
        extents, warnings = parse_layout(raw / "layout", rep)
        add("file_extent", extents)
        out.summary["layout"] = {"extents": len(extents)}
        out.warnings += warnings
    if "fs_event" in parts:  # block mappings of ext4 files, short-lived ones included
        from mobiperf.collectors.parse.layout import layout_block_size, mapped_extents

        mapped = mapped_extents(pl.concat(parts["fs_event"]), layout_block_size(raw / "layout"), rep)
        if len(mapped):
            add("file_extent", mapped)
    for name, frames in parts.items():
        out.tables[name] = pl.concat(frames, how="vertical_relaxed") if len(frames) > 1 else frames[0]
    lost = {src: s["lost_events"] for src, s in out.summary.items() if isinstance(s, dict) and s.get("lost_events")}
    lost.update({f"blktrace {name}": s["lost_events"] for name, s in out.summary.get("blktrace", {}).items()
                 if s.get("lost_events")})
    out.summary["lost_events"] = lost
    for src, n in lost.items():
        out.warnings.append(f"{src}: {n} events were lost (ring buffer overrun or blktrace gaps); counts are low")
    return out


def _ftrace_lost(stats_path: Path) -> int:
    """Overruns plus dropped events over every CPU, from the stats the collector saved (0 if none saved)."""
    import json

    try:
        stats = json.loads(stats_path.read_text())
    except (OSError, ValueError):
        return 0
    per_cpu = stats.get("per_cpu", {}) if isinstance(stats, dict) else {}
    return sum(int(c.get("overrun", 0)) + int(c.get("dropped events", 0)) for c in per_cpu.values()
               if isinstance(c, dict))


def derive_tables(tables: dict[str, pl.DataFrame]) -> tuple[dict[str, pl.DataFrame], dict]:
    """Tables built from the event tables of all repetitions, with a summary for run.json."""
    from mobiperf.collectors.parse.block_requests import pair_block_requests

    derived, summary = {}, {}
    if "block_event" in tables:
        derived["block_rq"], pairing = pair_block_requests(tables["block_event"])
        summary["block_pairing"] = pairing.as_dict()
    if "fuse_event" in tables:
        from mobiperf.collectors.parse.fuse_requests import pair_fuse_requests

        derived["fuse_req"], summary["fuse_pairing"] = pair_fuse_requests(tables["fuse_event"])
    return derived, summary
