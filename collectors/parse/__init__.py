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
      ftrace-N.txt      further ftrace text files of an ingested run (each parsed on its own)
      ftrace_raw/       binary per-CPU trace_pipe_raw pages (with formats/): every table ftrace.txt gives
      trace.pftrace     a Perfetto trace (formats/ and kernel_hz beside it where saved): every table ftrace.txt
                        gives, and generic_event (collectors/parse/perfetto_trace.py)
      syscalls.txt      ftrace text of the workload-only instance: syscall_io (source ftrace)
      raw_syscalls.txt  the same instance with raw_syscalls (kernels without syscalls events): raw_syscall_event,
                        and syscall_io (source raw_syscalls) named by the ABI in raw_syscalls_stats.json
      strace.log        strace -f -ttt -T -y: syscall_io (source strace), on the trace clock with tasks.json's
                        clock readings; strace-N.log further ingested logs
      stderr.txt        the workload's stderr: strace_count when it ends with a `strace -c` table
      tasks.json        who is who (the workload's root, the FUSE daemons' threads, mobiperf): task_role, task
      process_dump.txt  systrace's `ps` listings (ingested; process_dump-N.txt further ones): task
      proc/             a recording's /proc snapshots at its start and end: task
      LAYER-requests.tsv  a bundled FUSE daemon's log of every request it read (fuse_daemon_log.py):
                        fuse_daemon_req
      blktrace/         blk_io_trace records (per-CPU files or a blk-tracer stream): block_event when no ftrace
                        block events exist, else blktrace_event (the same columns, kept apart)
      blkparse/         blkparse text output (ingested): the same tables as blktrace/ (format in format.txt)
      layout/           the layout snapshot: file_extent, and inode_path (inodes.txt)
      inodes/           `ls -iR` listings of a recorded app's data directory: inode_path
      inputs.json       (ingested runs) the user's name of each file above, under which its statistics are filed
    Lost events are reported per source in the summary (ring-buffer overruns, blktrace sequence gaps).
    """
    from mobiperf.collectors.parse.layout import parse_layout
    from mobiperf.collectors.parse.tasks import read_tasks

    out = ParsedRaw()
    parts: dict[str, list[pl.DataFrame]] = {}
    labels = _input_labels(raw)

    def add(name: str, df: pl.DataFrame) -> None:
        parts.setdefault(name, []).append(df)

    _parse_ftrace_texts(raw, rep, labels, add, out)
    if (raw / "ftrace_raw").is_dir():
        _parse_ftrace_pages(raw, rep, add, out)
    tasks = read_tasks(raw / "tasks.json")
    _parse_who_is_who(raw, rep, tasks, add)
    _parse_daemon_logs(raw, rep, tasks, add, out)
    if (raw / "trace.pftrace").exists():
        from mobiperf.collectors.parse.perfetto_trace import add_perfetto_tables

        add_perfetto_tables(raw, rep, add, out)
    _parse_strace_logs(raw, rep, labels, add, out, clock=tasks.get("clock", []))
    _parse_strace_counts(raw, rep, add)
    if (raw / "blktrace").is_dir() or (raw / "blkparse").is_dir():
        _parse_block_traces(raw, rep, labels, add, out, has_ftrace_blocks="block_event" in parts)
    if (raw / "layout").is_dir():
        extents, warnings = parse_layout(raw / "layout", rep)
        add("file_extent", extents)
        out.summary["layout"] = {"extents": len(extents)}
        out.warnings += warnings
    if "raw_syscall_event" in parts:
        _decode_raw_syscalls(raw, rep, parts, out)
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
    for placed, label in sorted(labels.items(), key=lambda kv: -len(kv[0])):  # the user's names, not the copies'
        out.warnings = [w.replace(str(raw / placed), label) for w in out.warnings]
    return out


def _parse_who_is_who(raw: Path, rep: int, tasks: dict, add) -> None:
    """task_role and task (who is whose thread), inode_path (which inode is which file): tasks.json, systrace's
    process dumps, a recording's /proc snapshots, the layout's and a recorded app's inode listings."""
    from mobiperf.collectors.parse.inodes import parse_inode_listings
    from mobiperf.collectors.parse.tasks import task_roles, task_rows

    if tasks:
        add("task_role", task_roles(tasks, rep))
        add("task", task_rows(tasks, rep))
    for dump in _numbered(raw, "process_dump.txt", "process_dump-*.txt"):  # systrace's ps listings (ingested)
        from mobiperf.collectors.parse.process_dump import parse_process_dump

        add("task", parse_process_dump(dump, rep))
    if (raw / "proc").is_dir():  # a recording's /proc snapshots (collectors/proc_snapshot.py)
        from mobiperf.collectors.parse.proc_snapshot import parse_proc_snapshots

        snapshot = parse_proc_snapshots(raw / "proc", rep)
        if snapshot is not None:
            add("task", snapshot)
    inodes = parse_inode_listings(raw, rep)  # inode -> path: the file systems' events name inodes only
    if inodes is not None:
        add("inode_path", inodes)


def _input_labels(raw: Path) -> dict[str, str]:
    """Placed file name -> the user's name of it (ingested runs keep this in raw/inputs.json), else {}."""
    import json

    try:
        labels = json.loads((raw / "inputs.json").read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {}


def _numbered(raw: Path, first: str, pattern: str) -> list[Path]:
    """`first` and the numbered siblings an ingest adds (ftrace-1.txt, ...), in their order."""
    extra = sorted(raw.glob(pattern), key=lambda p: int(p.stem.rpartition("-")[2] or 0)
                   if p.stem.rpartition("-")[2].isdigit() else 0)
    return [p for p in [raw / first, *extra] if p.exists()]


def _parse_ftrace_texts(raw: Path, rep: int, labels: dict, add, out: ParsedRaw) -> None:
    texts = [(p, "ftrace") for p in _numbered(raw, "ftrace.txt", "ftrace-*.txt")]
    for name in ("syscalls", "raw_syscalls"):
        if (raw / f"{name}.txt").exists():
            texts.append((raw / f"{name}.txt", name))
    if texts:  # imported only when there is text to parse: a run of blktrace files never loads it
        from mobiperf.collectors.parse.ftrace_text import parse_ftrace_text
    for trace, source in texts:
        key = labels.get(trace.name, source)
        parsed = parse_ftrace_text(trace, rep)
        if len(parsed.block_event) or source == "ftrace":
            add("block_event", parsed.block_event)
        if len(parsed.trace_marker):
            add("trace_marker", parsed.trace_marker)
        for name, df in parsed.events.items():
            add(name, df)
        out.summary[key] = {"lines": parsed.lines, "unparsed": parsed.unparsed_by_event,
                            "other_events": parsed.other_events, "span_ns": parsed.span,
                            # The saved per-CPU stats and the LOST notes in the text see the same loss.
                            "lost_events": max(_ftrace_lost(raw / f"{trace.stem}_stats.json"),
                                               parsed.lost_events)}
        out.warnings += [f"{labels.get(trace.name, trace.name)}: {w}" for w in parsed.warnings]


def _parse_ftrace_pages(raw: Path, rep: int, add, out: ParsedRaw) -> None:
    from mobiperf.collectors.parse.ftrace_raw import parse_ftrace_raw

    binary = parse_ftrace_raw(raw / "ftrace_raw", raw / "formats", rep)
    add("block_event", binary.block_event)
    if len(binary.trace_marker):
        add("trace_marker", binary.trace_marker)
    for name, df in binary.events.items():  # ext4, jbd2, fuse, writeback, syscalls: as the text path
        add(name, df)
    out.summary["ftrace_raw"] = {"events": binary.events_total, "pages": binary.pages, "span_ns": binary.span,
                                 "undecoded": binary.undecoded, "other_events": binary.other_events,
                                 "unparsed": binary.unparsed_by_event, "unrendered": binary.unrendered,
                                 "lost_events": max(_ftrace_lost(raw / "ftrace_raw_stats.json"),
                                                    binary.lost_events)}
    out.warnings += [f"ftrace_raw: {w}" for w in binary.warnings]


def _parse_strace_logs(raw: Path, rep: int, labels: dict, add, out: ParsedRaw, clock: list[dict]) -> None:
    from mobiperf.collectors.parse.strace import parse_strace
    from mobiperf.collectors.parse.tasks import wall_to_trace_clock

    for log in _numbered(raw, "strace.log", "strace-*.log"):
        parsed = parse_strace(log, rep)
        add("syscall_io", wall_to_trace_clock(parsed.syscall_io, clock))
        out.summary[labels.get(log.name, "strace")] = parsed.summary
        out.warnings += parsed.warnings


def _parse_daemon_logs(raw: Path, rep: int, tasks: dict, add, out: ParsedRaw) -> None:
    """The bundled FUSE daemons' request logs (<layer>-requests.tsv), on the trace's clock (boot for Perfetto)."""
    logs = sorted(raw.glob("*-requests.tsv"))
    if not logs:
        return
    from mobiperf.collectors.parse.fuse_daemon_log import parse_fuse_daemon_log

    connections = {d.get("layer"): d.get("connection") for d in tasks.get("fuse_daemons", [])}
    clock = "boot" if (raw / "trace.pftrace").exists() else "mono"
    for log in logs:
        layer = log.name.removesuffix("-requests.tsv")
        df, summary, warnings = parse_fuse_daemon_log(log, rep, layer, clock=clock, connection=connections.get(layer))
        add("fuse_daemon_req", df)
        out.summary[log.name] = summary
        out.warnings += warnings


def _decode_raw_syscalls(raw: Path, rep: int, parts: dict[str, list[pl.DataFrame]], out: ParsedRaw) -> None:
    """raw_syscalls named by the ABI the run recorded (raw_syscalls.py): the call layer where the syscalls events
    did not make one. A run with both keeps the syscalls events' (they name calls without an ABI table)."""
    from mobiperf.collectors.parse.raw_syscalls import known_abi, raw_syscall_io

    abi = syscall_abi(raw)
    events = pl.concat(parts["raw_syscall_event"], how="vertical_relaxed")
    calls, bad = raw_syscall_io(events, abi, rep)
    have_events = any(len(df) and (df["source"] == "ftrace").any() for df in parts.get("syscall_io", []))
    used = not have_events
    if used:
        parts.setdefault("syscall_io", []).append(calls)
    how = f"named by the {abi} table" if known_abi(abi) else "of an unknown ABI: named nr_<N>"
    out.summary["raw_syscalls_decoded"] = {"calls": calls.height, "abi": abi, "used": used, "unparsed": bad}
    out.summary["call_layer"] = (f"call layer from raw_syscalls ({calls.height} calls {how})" if used else
                                 f"call layer from the syscalls events (raw_syscalls beside them: {calls.height} "
                                 "calls, not used)")


def syscall_abi(raw: Path) -> str | None:
    """The ABI the syscalls collector recorded for a repetition (its *_stats.json), None if none did."""
    import json

    for stats in sorted(raw.glob("*_stats.json")):
        try:
            abi = json.loads(stats.read_text()).get("syscall_abi")
        except (OSError, ValueError, AttributeError):
            continue
        if abi:
            return str(abi)
    return None


def _parse_strace_counts(raw: Path, rep: int, add) -> None:
    """The `strace -c` table the workload's stderr ends with, when it ran under strace -c (a sweep's syscalls=on)."""
    if not (raw / "stderr.txt").exists():
        return
    from mobiperf.collectors.parse.strace_count import strace_count_table

    counts = strace_count_table(raw / "stderr.txt", rep)
    if len(counts):
        add("strace_count", counts)


def _parse_block_traces(raw: Path, rep: int, labels: dict, add, out: ParsedRaw, has_ftrace_blocks: bool) -> None:
    """blktrace records and blkparse text: block_event, or blktrace_event beside ftrace block events."""
    table = "blktrace_event" if has_ftrace_blocks else "block_event"
    if (raw / "blktrace").is_dir():
        from mobiperf.collectors.parse.blktrace_format import blktrace_files
        from mobiperf.collectors.parse.blktrace import parse_blktrace

        for group in blktrace_files(raw / "blktrace"):
            blk = parse_blktrace(group, rep)
            add(table, blk.block_event)
            if len(blk.trace_marker):
                add("trace_marker", blk.trace_marker)
            name = labels.get(f"blktrace/{group[0].name}", group[0].name)
            out.summary.setdefault("blktrace", {})[name] = {**blk.summary, "table": table,
                                                            "lost_events": blk.lost_records}
            out.warnings += blk.warnings
    if (raw / "blkparse").is_dir():
        from mobiperf.collectors.parse.blkparse_text import parse_blkparse_text

        fmt_file = raw / "blkparse" / "format.txt"
        fmt = fmt_file.read_text().rstrip("\n") if fmt_file.exists() else None
        for text in sorted(p for p in (raw / "blkparse").iterdir() if p.name != "format.txt"):
            parsed = parse_blkparse_text(text, rep, fmt)
            add(table, parsed.block_event)
            if len(parsed.trace_marker):
                add("trace_marker", parsed.trace_marker)
            out.summary[labels.get(f"blkparse/{text.name}", text.name)] = {**parsed.summary, "table": table}
            out.warnings += parsed.warnings


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


def derive_tables(tables: dict[str, pl.DataFrame], parsed: dict | None = None) -> tuple[dict[str, pl.DataFrame], dict]:
    """Tables built from the event tables of all repetitions, with a summary for run.json; parsed: each
    repetition's parse summary (what it could not read is said beside what it made)."""
    from mobiperf.collectors.parse.pairing import pair_block_requests

    derived, summary = {}, {}
    if "block_event" in tables:
        # the pairing's own counts; what was matched for what the trace holds is the pairing_summary analyzer's
        derived["block_rq"], pairing = pair_block_requests(tables["block_event"])
        summary["block_pairing"] = pairing.as_dict()
    from mobiperf.collectors.parse.fuse_layer import make_fuse_layer

    fuse_req, fuse_summary = make_fuse_layer(tables, parsed)
    if fuse_req is not None:
        derived["fuse_req"] = fuse_req
    if fuse_summary:
        summary["fuse_pairing"] = fuse_summary
    return derived, summary
