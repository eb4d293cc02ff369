"""Which collectors a repetition gets: the trace sources, the ftrace event sets, and plan_collectors(), from what
was asked and what the target offers."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from mobiperf.collectors.collector import Collector
from mobiperf.core.trace_events import TABLE_EVENTS, USER_EVENT_SETS, events_for_tables

if TYPE_CHECKING:
    from mobiperf.stack.facts import StackFacts
    from mobiperf.target.target import Target

SOURCES = ("ftrace", "ftrace_raw", "syscalls", "raw_syscalls", "strace", "blktrace", "layout", "facts")
# The syscalls events (of the workload's process tree and the stack's FUSE daemons) are the top layer of the
# layer-by-layer model (analyzers/io_span.py); strace adds paths but slows every call, so it comes only when asked.
DEFAULT_SOURCES = ("ftrace", "syscalls", "layout", "facts")
BATCH_INTERVAL_S = 0.2
EVENT_SET_NAMES = USER_EVENT_SETS   # what --event-set names (mobiperf.core.trace_events)
# The filesystems' and layers' tracefs systems: a stack gets the events of the systems it has.
FS_SYSTEMS = {"ext4": ("ext4", "jbd2"), "f2fs": ("f2fs",)}
# Every run's, whatever its stack: who the threads born during it are (task_newtask, task_rename: one event each).
EVERY_RUN_SYSTEMS = ("task",)


RECORDERS = ("auto", "perfetto", "tracefs")


def check_trace_choice(sources=None, event_sets=None) -> None:
    """The trace sources and event sets asked for, when mobiperf has them; UsageError naming the valid ones. The
    one check of them: the pipeline calls it before a run directory exists, plan_collectors before planning."""
    from mobiperf.core.errors import UsageError

    for kind, asked, valid in (("trace source", sources or (), SOURCES), ("event set", event_sets or (),
                                                                          EVENT_SET_NAMES)):
        unknown = [a for a in asked if a not in valid]
        if unknown:
            raise UsageError(f"unknown {kind} {', '.join(unknown)}; choose from {', '.join(valid)}")


def plan_collectors(target: Target, stack: StackFacts, raw_dir: Path, *, extra_events=(), sources=None,
                    event_sets=None, notes: list[str] | None = None, recorder: str = "auto",
                    tables=None) -> list[Collector]:
    """The collectors of one repetition, from what was asked and what the target offers.

    sources: any of SOURCES (default DEFAULT_SOURCES). ftrace_raw is ftrace read as binary per-CPU pages
    (trace_pipe_raw: exact ns timestamps, no text formatting in the kernel) with the same events, each decoded by
    its saved format (ftrace wins if both are asked). ftrace always traces the block events of the stack's
    devices; event_sets adds whole sets (ext4, jbd2, f2fs, fuse, writeback); without event_sets a run gets the
    events of the tables the analyzers need (tables: the pipeline passes mobiperf.analyzers.needed_tables();
    None: every table of mobiperf.core.trace_events.TABLE_EVENTS) of the systems its stack has (ext4 and jbd2,
    or f2fs, for its filesystem; fuse for a FUSE layer): fsync enter/exit, jbd2 commits, FUSE requests, which
    cost one event per call, not per page. Events this kernel lacks are skipped and named in
    `notes` (the pipeline can put them in run.json); asking for a source the target cannot provide is an error.
    Order matters for wrap_command: the syscalls wrapper sits inside strace, so strace sees the workload exec.
    recorder: how the ftrace source records (collectors/perfetto.py choose_recorder): auto takes the device's
    perfetto on an adb target that has one, tracefs otherwise; the choice and its reason go into the collector's
    summary in run.json.
    """
    check_trace_choice(sources, event_sets)
    notes = notes if notes is not None else []
    wanted = tuple(DEFAULT_SOURCES if sources is None else sources)
    collectors: list[Collector] = []
    if "facts" in wanted:
        from mobiperf.collectors.facts import FactsCollector
        collectors.append(FactsCollector(target.transport, stack.device, stack.workdir.rsplit("/", 1)[0]))
    if "ftrace" in wanted or "ftrace_raw" in wanted:  # the same events, read as text or as binary pages
        events = _ftrace_events(target, stack, event_sets, TABLE_EVENTS if tables is None else tables, notes)
        events += list(extra_events)
        collectors.append(ftrace_recorder(target, events, raw_dir, raw_pages="ftrace" not in wanted,
                                           recorder=recorder))
    if "syscalls" in wanted:
        collectors.append(_syscalls_collector(target, stack, raw_dir, notes))
    if "raw_syscalls" in wanted and not (collectors and collectors[-1].name == "raw_syscalls"):
        collectors.append(_syscalls_collector(target, stack, raw_dir, notes, raw=True))
    if "strace" in wanted:
        collectors.append(_strace_collector(target, stack, raw_dir))
    if "blktrace" in wanted:
        from mobiperf.collectors.blktrace import BlktraceCollector
        remote = None if target.is_local else f"{stack.workdir}/.mobiperf-blktrace-{raw_dir.name}"
        collectors.append(BlktraceCollector(target.transport, target.caps.tracefs_path, stack.device, raw_dir,
                                            remote_dir=remote))
    if "layout" in wanted:
        from mobiperf.collectors.layout import LayoutCollector
        files_dir = stack.layers[-1]["source"] if stack.layers else stack.workdir  # FUSE has no FIEMAP: ask below
        collectors.append(LayoutCollector(target.transport, stack.device, stack.filesystem, files_dir, raw_dir,
                                          dev_major=stack.dev_major, dev_minor=stack.dev_minor))
    return collectors


def _batch_interval(target: Target) -> float | None:
    """Batched trace reading where the target's dd can read non-blocking (GNU coreutils: the local host)."""
    return BATCH_INTERVAL_S if target.is_local else None


def _ftrace_events(target: Target, stack: StackFacts, event_sets, tables, notes: list[str]) -> list:
    """The ftrace source's events: the block events of the stack's devices, and the asked sets, or else the events
    of the tables asked for that the stack's systems make."""
    from mobiperf.collectors.ftrace import block_event_specs, event_set_specs, fuse_connection

    devices = stack.traced_devices
    available = target.caps.events
    events = block_event_specs(devices)
    if event_sets is None:
        wanted = events_for_tables(tables)
        systems = (FS_SYSTEMS.get(stack.filesystem, ()) + (("fuse",) if stack.layers or stack.fuse_servers else ())
                   + EVERY_RUN_SYSTEMS)
        chosen = [(name, wanted[name]) for name in systems if name in wanted]
        android_fs = "android_fs" in wanted
    else:
        chosen = [(name, None) for name in event_sets if name != "block"]
        android_fs = True
    if android_fs and available.get("android_fs") and "android_fs" not in [name for name, _ in chosen]:
        chosen.append(("android_fs", None))  # file IO with paths: what an Android kernel offers instead of strace
    mounts = [layer.get("mountpoint") for layer in (*stack.layers, *stack.fuse_servers)]
    connections = [c for c in (fuse_connection(target.transport, m) for m in mounts if m) if c is not None]
    for name, only in chosen:
        specs, missing = event_set_specs(name, available, devices, only=only, fuse_connections=connections)
        events += specs
        if missing:
            notes.append(f"ftrace: this kernel lacks {', '.join(missing)}")
    return events


def _syscalls_collector(target: Target, stack: StackFacts, raw_dir: Path, notes: list[str], *,
                        raw: bool = False) -> Collector:
    """The workload's (and the FUSE daemons') system calls: the syscalls:* events, or raw_syscalls where the kernel
    lacks those (Android's GKI builds) or where asked; with sched_waking beside a FUSE daemon (who woke whom is how
    collectors/parse/fuse_dev_calls.py ties its requests to their callers without FUSE events)."""
    from mobiperf.collectors.ftrace import EventSpec, FtraceCollector, event_set_specs
    from mobiperf.core.errors import TargetError

    events = target.caps.events
    specs, missing = ([], []) if raw else event_set_specs("syscalls", events, stack.traced_devices)
    if not specs and not raw:
        if "sys_enter" not in events.get("raw_syscalls", []):
            raise TargetError("this kernel has neither syscalls:sys_enter_* events (CONFIG_FTRACE_SYSCALLS) nor "
                              "raw_syscalls; use the strace source instead")
        notes.append(f"syscalls: this kernel has no syscalls:* events: the call layer comes from raw_syscalls, "
                     f"decoded for {target.abi}")
        raw = True
    elif missing and not raw:
        notes.append(f"syscalls: this kernel lacks {', '.join(missing)}")
    facts = {}
    if raw:
        specs, facts = _raw_syscalls_specs(target, notes), {"syscall_abi": target.abi}
    # The daemons serve the workload's FUSE requests: their calls into the lower file system are the layer
    # under FUSE. Their threads are listed now; threads they start later join through event-fork.
    daemon_tids = [tid for layer in stack.fuse_daemons for tid in task_ids(target.transport, layer["daemon_pid"])]
    if daemon_tids and "sched_waking" in events.get("sched", []):
        specs.append(EventSpec("sched", "sched_waking"))
    name = "raw_syscalls" if raw else "syscalls"
    collector = FtraceCollector(target.transport, target.caps.tracefs_path, specs, raw_dir,
                                trace_name=f"{name}.txt", workload_pids_only=True, collector_name=name,
                                batch_interval_s=_batch_interval(target), extra_pids=daemon_tids)
    collector.facts = facts
    return collector


def _raw_syscalls_specs(target: Target, notes: list[str]) -> list:
    """raw_syscalls enter and exit, filtered to the numbers of the calls the call layer reads on this ABI."""
    from mobiperf.collectors.ftrace import EventSpec
    from mobiperf.core.syscall_abi import numbers_of

    numbers = numbers_of(target.abi)
    if not numbers:
        notes.append(f"raw_syscalls: no system call table for ABI {target.abi}: every call is kept, named nr_<N>")
    flt = " || ".join(f"id == {n}" for n in numbers) or None
    return [EventSpec("raw_syscalls", "sys_enter", flt), EventSpec("raw_syscalls", "sys_exit", flt)]


def _strace_collector(target: Target, stack: StackFacts, raw_dir: Path) -> Collector:
    from mobiperf.collectors.strace import StraceCollector
    from mobiperf.core.errors import TargetError

    if not target.caps.strace:
        raise TargetError("strace is not installed on the target (Debian: apt-get install strace)")
    # Over adb the log is written on the device (next to the workload) and pulled at stop().
    remote = None if target.is_local else f"{stack.workdir}/.mobiperf-strace-{raw_dir.name}.log"
    return StraceCollector(target.transport, target.caps.strace, raw_dir, remote_log=remote)


def task_ids(transport, pid: int) -> list[int]:
    """The thread ids of a process on the target (empty if it is gone)."""
    done = transport.run(["ls", f"/proc/{pid}/task"], timeout=10)
    return sorted(int(t) for t in done.text.split() if t.isdigit()) if done.returncode == 0 else []
def ftrace_recorder(target: Target, events, raw_dir: Path, *, raw_pages: bool, recorder: str) -> Collector:
    """The ftrace source's collector: the device's perfetto or tracefs directly (binary pages are tracefs's)."""
    from mobiperf.collectors.ftrace import FtraceCollector
    from mobiperf.collectors.perfetto import PerfettoCollector, choose_recorder

    transport, tracefs = target.transport, target.caps.tracefs_path
    kind, why, facts = choose_recorder(transport, "tracefs" if raw_pages else recorder)
    if kind == "perfetto":
        return PerfettoCollector(transport, tracefs, events, raw_dir, facts=facts, why=why)
    collector = FtraceCollector(transport, tracefs, events, raw_dir, raw_pages=raw_pages,
                                batch_interval_s=_batch_interval(target))
    collector.recorder = {"recorder": "tracefs", "why": why if not raw_pages else "binary pages (ftrace_raw)"}
    return collector
