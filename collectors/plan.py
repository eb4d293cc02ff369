"""Which collectors a repetition gets: the trace sources, the ftrace event sets, and plan_collectors(), from what
was asked and what the target offers."""

from __future__ import annotations

from pathlib import Path

from mobiperf.collectors.collector import Collector

SOURCES = ("ftrace", "ftrace_raw", "syscalls", "strace", "blktrace", "layout", "facts")
# The syscalls events (of the workload's process tree and the stack's FUSE daemons) are the top layer of the
# layer-by-layer model (analyzers/io_span.py); strace adds paths but slows every call, so it comes only when asked.
DEFAULT_SOURCES = ("ftrace", "syscalls", "layout", "facts")
BATCH_INTERVAL_S = 0.2
EVENT_SET_NAMES = ("block", "ext4", "jbd2", "f2fs", "fuse", "writeback", "android_fs")


RECORDERS = ("auto", "perfetto", "tracefs")


def plan_collectors(transport, caps, stack, raw_dir: Path, *, extra_events=(), sources=None,
                    event_sets=None, notes: list[str] | None = None, recorder: str = "auto") -> list[Collector]:
    """The collectors of one repetition, from what was asked and what the target offers.

    sources: any of SOURCES (default DEFAULT_SOURCES). ftrace_raw is ftrace read as binary per-CPU pages
    (trace_pipe_raw: exact ns timestamps, no text formatting in the kernel) with the same events, each decoded by
    its saved format (ftrace wins if both are asked). ftrace always traces the block events of the stack's
    devices; event_sets adds whole sets (ext4, jbd2, f2fs, fuse, writeback); without event_sets a run gets the
    light events of its stack (fsync enter/exit and jbd2 commits of its filesystem, FUSE requests of a FUSE
    layer), which cost one event per call, not per page. Events this kernel lacks are skipped and named in
    `notes` (the pipeline can put them in run.json); asking for a source the target cannot provide is an error.
    Order matters for wrap_command: the syscalls wrapper sits inside strace, so strace sees the workload exec.
    recorder: how the ftrace source records (collectors/perfetto.py choose_recorder): auto takes the device's
    perfetto on an adb target that has one, tracefs otherwise; the choice and its reason go into the collector's
    summary in run.json.
    """
    from mobiperf.collectors.ftrace import (LIGHT_EVENTS, FtraceCollector, block_event_specs, event_set_specs,
                                            fuse_connection)
    from mobiperf.core.errors import TargetError, UsageError

    notes = notes if notes is not None else []
    wanted = tuple(DEFAULT_SOURCES if sources is None else sources)
    unknown = [s for s in wanted if s not in SOURCES]
    if unknown:
        raise UsageError(f"unknown trace source(s) {', '.join(unknown)}; sources are {', '.join(SOURCES)}")
    devices = getattr(stack, "traced_devices", None) or [(stack.dev_major, stack.dev_minor)]
    # Batched trace reading where the target's dd can read non-blocking (GNU coreutils: the local host).
    batch = BATCH_INTERVAL_S if getattr(transport, "name", "") == "local" else None
    available = getattr(caps, "events", {}) or {}
    collectors: list[Collector] = []
    if "facts" in wanted:
        from mobiperf.collectors.facts import FactsCollector
        collectors.append(FactsCollector(transport, stack.device, stack.workdir.rsplit("/", 1)[0]))
    if "ftrace" in wanted or "ftrace_raw" in wanted:  # the same events, read as text or as binary pages
        events = block_event_specs(devices)
        if event_sets is None:
            sets = {"ext4": ("ext4", "jbd2"), "f2fs": ("f2fs",)}.get(stack.filesystem, ())
            sets += ("fuse",) if getattr(stack, "layers", None) else ()
            chosen = [(name, LIGHT_EVENTS.get(name)) for name in sets]
        else:
            bad = [s for s in event_sets if s not in EVENT_SET_NAMES]
            if bad:
                raise UsageError(f"unknown event set(s) {', '.join(bad)}; sets are {', '.join(EVENT_SET_NAMES)}")
            chosen = [(name, None) for name in event_sets if name != "block"]
        if available.get("android_fs") and "android_fs" not in [name for name, _ in chosen]:
            chosen.append(("android_fs", None))  # file IO with paths: what an Android kernel offers instead of strace
        mounts = [layer.get("mountpoint") for layer in (getattr(stack, "layers", None) or [])]
        connections = [c for c in (fuse_connection(transport, m) for m in mounts if m) if c is not None]
        for name, only in chosen:
            specs, missing = event_set_specs(name, available, devices, only=only, fuse_connections=connections)
            events += specs
            if missing:
                notes.append(f"ftrace: this kernel lacks {', '.join(missing)}")
        collectors.append(_ftrace_recorder(transport, caps, events + list(extra_events), raw_dir,
                                           raw_pages="ftrace" not in wanted, batch=batch, recorder=recorder))
    if "syscalls" in wanted:
        specs, missing = event_set_specs("syscalls", available, devices)
        if not specs:
            raise TargetError("this kernel has no syscalls:sys_enter_* events (CONFIG_FTRACE_SYSCALLS); "
                              "use the strace source instead")
        if missing:
            notes.append(f"syscalls: this kernel lacks {', '.join(missing)}")
        # The daemons serve the workload's FUSE requests: their calls into the lower file system are the layer
        # under FUSE. Their threads are listed now; threads they start later join through event-fork.
        daemon_tids = [tid for layer in (getattr(stack, "layers", None) or []) if layer.get("daemon_pid")
                       for tid in task_ids(transport, layer["daemon_pid"])]
        collectors.append(FtraceCollector(transport, caps.tracefs_path, specs, raw_dir, trace_name="syscalls.txt",
                                          workload_pids_only=True, collector_name="syscalls",
                                          batch_interval_s=batch, extra_pids=daemon_tids))
    if "strace" in wanted:
        from mobiperf.collectors.strace import StraceCollector
        if not getattr(caps, "strace", None):
            raise TargetError("strace is not installed on the target (Debian: apt-get install strace)")
        # Over adb the log is written on the device (next to the workload) and pulled at stop().
        remote = None if getattr(transport, "name", "local") == "local" else \
            f"{stack.workdir}/.mobiperf-strace-{raw_dir.name}.log"
        collectors.append(StraceCollector(transport, caps.strace, raw_dir, remote_log=remote))
    if "blktrace" in wanted:
        from mobiperf.collectors.blktrace import BlktraceCollector
        remote = None if getattr(transport, "name", "local") == "local" else \
            f"{stack.workdir}/.mobiperf-blktrace-{raw_dir.name}"
        collectors.append(BlktraceCollector(transport, caps.tracefs_path, stack.device, raw_dir, remote_dir=remote))
    if "layout" in wanted:
        from mobiperf.collectors.layout import LayoutCollector
        layers = getattr(stack, "layers", None) or []
        files_dir = layers[-1]["source"] if layers else stack.workdir  # FUSE has no FIEMAP: ask the fs below
        collectors.append(LayoutCollector(transport, stack.device, stack.filesystem, files_dir, raw_dir,
                                          dev_major=stack.dev_major, dev_minor=stack.dev_minor))
    return collectors


def task_ids(transport, pid: int) -> list[int]:
    """The thread ids of a process on the target (empty if it is gone)."""
    done = transport.run(["ls", f"/proc/{pid}/task"], timeout=10)
    return sorted(int(t) for t in done.text.split() if t.isdigit()) if done.returncode == 0 else []
def _ftrace_recorder(transport, caps, events, raw_dir: Path, *, raw_pages: bool, batch, recorder: str) -> Collector:
    """The ftrace source's collector: the device's perfetto or tracefs directly (binary pages are tracefs's)."""
    from mobiperf.collectors.ftrace import FtraceCollector
    from mobiperf.collectors.perfetto import PerfettoCollector, choose_recorder

    kind, why, facts = choose_recorder(transport, "tracefs" if raw_pages else recorder)
    if kind == "perfetto":
        return PerfettoCollector(transport, caps.tracefs_path, events, raw_dir, facts=facts, why=why)
    collector = FtraceCollector(transport, caps.tracefs_path, events, raw_dir, raw_pages=raw_pages,
                                batch_interval_s=batch)
    collector.recorder = {"recorder": "tracefs", "why": why if not raw_pages else "binary pages (ftrace_raw)"}
    return collector
