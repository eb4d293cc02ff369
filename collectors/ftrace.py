"""ftrace collection through a tracefs instance of mobiperf's own.

The session creates `instances/mobiperf-<id>`, enables the requested events there (with filters, e.g. the block
events of one device), streams the instance's trace_pipe to a local file while the workload runs, and on the
way out saves the events' format files and the per-CPU overrun counts, then removes the instance. Nothing at the
top level of tracefs changes, so other tracing users are undisturbed. Only where a kernel has no instances does
it fall back to the top level, and then it restores every setting it touched.

Event sets (mobiperf.core.trace_events.EVENT_SETS): block (the request life cycle, filtered to the stack's devices;
plug/unplug carry no device and come only when asked), ext4, jbd2, f2fs (filtered to the devices), fuse (filtered
to the stack's FUSE connections), writeback (filtered to the devices' bdi), android_fs (Android kernels' file IO
events with paths; every run on a kernel that has them gets them), and syscalls. The syscalls set traces only the
workload: it runs in a second instance whose set_event_pid holds the workload's pid, with event-fork on so its
children are added as they are forked. The pid is known before the first system call because the workload is
wrapped in `sh -c 'echo $$ > .../set_event_pid && echo 1 > .../tracing_on && exec "$@"'`: the shell writes its own
pid, turns the instance on, and then becomes the workload. (A common_pid filter set after the start would miss the
first calls and every child, and filters cannot follow forks.) Its own instance because set_event_pid filters
every event of an instance, and block completions run in interrupt or kworker context, not in the workload's pids.

raw_pages reads the per-CPU trace_pipe_raw files instead (binary pages, exact ns timestamps, decoded by
parse/ftrace_raw.py with the saved format files); buffer_percent is set to 0 so the blocked readers drain every
page, also the last partial ones after tracing stops.

Why trace_pipe and not the `trace` file: trace_pipe consumes the ring buffer as it is read, so a run longer than
the buffer loses nothing as long as the reader keeps up; lost events show up as overruns in per_cpu stats.
"""

from __future__ import annotations

import json
import re
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path

from mobiperf.collectors.collector import Collector
from mobiperf.core.errors import TargetError, UsageError
from mobiperf.core.mounts import parse_mountinfo
from mobiperf.core.run_stop import storage_full
from mobiperf.core.signals import shielded
from mobiperf.core.trace_events import BLOCK_EVENTS, DEVICELESS_EVENTS, EVENT_SETS
from mobiperf.target.transport import BackgroundProcess, Transport
from mobiperf.target.undo_journal import journal_for, new_instance_name

def kernel_dev_t(major: int, minor: int) -> int:
    """dev as ftrace and blktrace encode it: MINORBITS = 20 (not glibc's makedev)."""
    return (major << 20) | minor


@dataclass
class EventSpec:
    system: str
    name: str
    filter: str | None = None

    @property
    def path(self) -> str:
        return f"events/{self.system}/{self.name}"


@dataclass
class CollectionStats:
    clock: str
    buffer_size_kb: int
    per_cpu: dict[str, dict[str, int]] = field(default_factory=dict)
    duration_ns: int = 0
    instance: str | None = None

    @property
    def lost_events(self) -> int:
        return sum(c.get("overrun", 0) + c.get("dropped events", 0) for c in self.per_cpu.values())


class FtraceCollector(Collector):
    """Tracing is set up on entry (not yet on); start() and stop() bracket the workload."""

    name = "ftrace"

    def __init__(self, transport: Transport, tracefs: str, events: list[EventSpec], out_dir: Path, *,
                 buffer_size_kb: int = 32768, name: str | None = None, trace_name: str = "ftrace.txt",
                 workload_pids_only: bool = False, collector_name: str = "ftrace", raw_pages: bool = False,
                 batch_interval_s: float | None = None, extra_pids: list[int] | None = None):
        self.transport = transport
        self.tracefs = tracefs
        self.events = events
        self.out_dir = Path(out_dir)
        self.buffer_size_kb = buffer_size_kb
        # The owner's pid in the name: a leftover instance tells whose it was (and whether its owner still lives).
        self.instance_name = name or new_instance_name()
        self.trace_name = trace_name
        self.workload_pids_only = workload_pids_only
        self.name = collector_name  # the key of its summary in run.json
        # Binary capture: one `cat per_cpu/cpuN/trace_pipe_raw` per CPU into ftrace_raw/cpuN (whole pages, exact
        # ns timestamps, no text formatting in the kernel); parse/ftrace_raw.py decodes them with the formats.
        self.raw_pages = raw_pages
        # Batched reading: a blocking reader wakes for every event, and on a busy 2-core machine that reader
        # competes with the workload. With an interval, a non-blocking `dd` empties the buffer every interval
        # and the ring buffer holds what comes in between (32 MiB per CPU by default). None: a blocking `cat`
        # (the only portable choice: toybox dd on Android has no iflag=nonblock).
        self.batch_interval_s = batch_interval_s
        # With workload_pids_only: other tasks traced beside the workload's tree (the stack's FUSE daemon threads).
        self.extra_pids = list(extra_pids or [])
        self._raw_readers: list[BackgroundProcess] = []
        self.recorder: dict = {}  # how and why this path records (plan_collectors), kept in the summary
        self.root: str | None = None
        self._reader: BackgroundProcess | None = None
        self._restore: list[tuple[str, bytes]] = []
        self._entries: list[int] = []   # undo journal entries of what this session changed on the target
        self._started_ns = 0
        self.stats: CollectionStats | None = None

    @property
    def trace_file(self) -> Path:
        return self.out_dir / self.trace_name

    @property
    def marker_path(self) -> str:
        """The instance's trace_marker: lines written there appear in this session's trace only."""
        return f"{self.root}/trace_marker"

    def __enter__(self) -> "FtraceCollector":
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self._check_events()
        journal = journal_for(self.transport)  # what a killed mobiperf leaves, the next run undoes
        if self.transport.exists(f"{self.tracefs}/instances"):
            root = f"{self.tracefs}/instances/{self.instance_name}"
            with shielded():  # made and known as one: a stop signal waits until the cleanup can find it
                entry = journal.record("tracefs_instance", path=root)
                made = self.transport.run(["mkdir", root], timeout=10)
                if made.returncode != 0:
                    journal.done(entry)
                    made.check()
                self._entries.append(entry)
                self.root = root
        else:
            self.root = self.tracefs
            for knob in ("tracing_on", "buffer_size_kb", "trace_clock"):
                self._restore.append((knob, self._read(knob).strip()))
                self._entries.append(journal.record("sysfs", path=f"{self.root}/{knob}", old=self._restore[-1][1]))
            for ev in self.events:
                self._entries.append(journal.record("sysfs", path=f"{self.tracefs}/{ev.path}/enable", old="0"))
        try:
            self._configure()
        except BaseException:
            self._cleanup()
            raise
        return self

    def __exit__(self, *exc) -> None:
        try:
            if self._reader is not None or self._raw_readers:
                self.stop()
        finally:
            self._cleanup()

    def workload_env(self) -> dict[str, str]:
        # The Mobibench-compatible generator marks its timed window in this instance's trace.
        return {} if self.workload_pids_only else {"MOBIBENCH_TRACE_MARKER": self.marker_path}

    def wrap_command(self, argv):
        if not self.workload_pids_only:
            return list(argv)
        # The shell writes its own pid, turns this instance on, then exec makes it the workload: traced from its
        # first system call, and nothing before (tracing_on stays 0 until the pid filter is in place).
        script = (f'echo $$ >> {shlex.quote(self.root + "/set_event_pid")} && '
                  f'echo 1 > {shlex.quote(self.root + "/tracing_on")} && exec "$@"')
        return ["sh", "-c", script, "mobiperf-workload", *argv]

    def _reader_argv(self, path: str) -> list[str]:
        if not self.batch_interval_s:
            return ["cat", path]
        loop = (f"while :; do dd if={shlex.quote(path)} iflag=nonblock bs=1M 2>/dev/null; "
                f"sleep {self.batch_interval_s:g}; done")
        return ["sh", "-c", loop]

    def start(self) -> None:
        if self.raw_pages:
            raw = self.out_dir / "ftrace_raw"
            raw.mkdir(exist_ok=True)
            for cpu in self._cpu_dirs():
                with shielded():  # started and known as one: the cleanup must find every reader
                    self._raw_readers.append(self.transport.start(
                        self._reader_argv(f"{self.root}/per_cpu/{cpu}/trace_pipe_raw"), stdout_path=raw / cpu))
        else:
            with shielded():
                self._reader = self.transport.start(self._reader_argv(f"{self.root}/trace_pipe"),
                                                    stdout_path=self.trace_file)
        if not self.workload_pids_only:  # else the workload's wrapper turns it on once its pid is set
            self._write("tracing_on", "1")
        self._started_ns = time.monotonic_ns()

    def stop(self) -> dict:
        """Stop tracing, let the reader drain the buffer, and record the per-CPU statistics."""
        self._write("tracing_on", "0")
        duration = time.monotonic_ns() - self._started_ns
        self._wait_for_readers()
        time.sleep(0.1 + (self.batch_interval_s or 0))  # the reader may still hold the last page it took
        if self._reader is not None:
            self._reader.kill()
            self._reader = None
        while self._raw_readers:
            self._raw_readers.pop().kill()
        if self.raw_pages:
            self._drain_raw_pages()
            # pid -> comm for events without a comm field (the text output resolves them the same way)
            try:
                (self.out_dir / "ftrace_raw" / "saved_cmdlines").write_bytes(
                    self.transport.read_file(f"{self.tracefs}/saved_cmdlines"))
            except TargetError:
                pass
            hz = kernel_hz(self.transport)  # jiffies fields (jbd2_run_stats) are ms in the text, jiffies in binary
            if hz:
                (self.out_dir / "ftrace_raw" / "kernel_hz").write_text(f"{hz}\n")
        self.stats = CollectionStats(clock=self._active_clock(), buffer_size_kb=self.buffer_size_kb,
                                     per_cpu=self._per_cpu_stats(), duration_ns=duration,
                                     instance=self.instance_name if self.root != self.tracefs else None)
        stats_name = ("ftrace_raw" if self.raw_pages else self.trace_name.rsplit(".", 1)[0]) + "_stats.json"
        (self.out_dir / stats_name).write_text(json.dumps(self.stats.__dict__, indent=2) + "\n")
        return {"clock": self.stats.clock, "lost_events": self.stats.lost_events, "per_cpu": self.stats.per_cpu,
                "trace": "ftrace_raw/" if self.raw_pages else self.trace_name,
                "events": [f"{e.system}:{e.name}" for e in self.events],
                **self.recorder}

    # --- set-up and clean-up ---

    def _check_events(self) -> None:
        for ev in self.events:
            if not self.transport.exists(f"{self.tracefs}/{ev.path}/format"):
                system_dir = f"{self.tracefs}/events/{ev.system}"
                known = self.transport.run(["ls", system_dir], timeout=10)
                hint = (f"this kernel's {ev.system} events: {' '.join(known.text.split()[:30])}"
                        if known.returncode == 0 else f"this kernel has no {ev.system} events")
                raise UsageError(f"unknown trace event {ev.system}:{ev.name}; {hint}")

    def _configure(self) -> None:
        self._write("tracing_on", "0")
        if self.workload_pids_only:
            if self.root == self.tracefs:
                raise TargetError("tracing only the workload's pids needs tracefs instances (set_event_pid would "
                                  "filter everyone's top-level tracing)")
            self._write("options/event-fork", "1")
            # The wrapper appends the workload's pid to these (set_event_pid takes one pid per write).
            if self.extra_pids:
                pids = " ".join(str(p) for p in self.extra_pids)
                target = shlex.quote(f"{self.root}/set_event_pid")
                self.transport.run(["sh", "-c", f"for p in {pids}; do echo $p >> {target}; done"],
                                   timeout=10).check()
        self._write("buffer_size_kb", str(self.buffer_size_kb))
        clock = "mono" if "mono" in self._read("trace_clock").replace("[", " ").replace("]", " ").split() else None
        if clock:
            # CLOCK_MONOTONIC: the clock of the kernel's blktrace records and of the generator's own timestamps.
            self._write("trace_clock", clock)
        formats = self.out_dir / "formats"
        for ev in self.events:
            if ev.filter:
                self._write(f"{ev.path}/filter", ev.filter)
            self._write(f"{ev.path}/enable", "1")
            dest = formats / ev.system / ev.name
            dest.mkdir(parents=True, exist_ok=True)
            (dest / "format").write_bytes(self.transport.read_file(f"{self.tracefs}/{ev.path}/format"))
        if self.raw_pages and not self.batch_interval_s and self.transport.exists(f"{self.root}/buffer_percent"):
            # A blocked trace_pipe_raw reader wakes only when the buffer is this full (default 50 %): with 0 it
            # takes every page as it comes, and after tracing stops it drains the rest instead of sleeping on it.
            self._write("buffer_percent", "0")
        if self.raw_pages:  # trace_marker lines are ftrace:print events in the binary pages
            dest = formats / "ftrace" / "print"
            dest.mkdir(parents=True, exist_ok=True)
            (dest / "format").write_bytes(self.transport.read_file(f"{self.tracefs}/events/ftrace/print/format"))
        for header in ("header_page", "header_event"):
            (formats / header).write_bytes(self.transport.read_file(f"{self.tracefs}/events/{header}"))

    def _cleanup(self) -> None:
        if self._reader is not None:
            self._reader.kill()
            self._reader = None
        while self._raw_readers:
            self._raw_readers.pop().kill()
        if self.root is None:
            return
        if self.root != self.tracefs:
            # Removing an instance drops its events, filters and buffers with it.
            for attempt in range(50):
                if self.transport.run(["rmdir", self.root], timeout=10).returncode == 0:
                    break
                time.sleep(0.1)  # EBUSY while a reader still has trace_pipe open
            else:
                raise TargetError(f"could not remove tracefs instance {self.root}: {self._holders()}")
        else:
            for ev in self.events:
                self._write(f"{ev.path}/enable", "0")
                if ev.filter:
                    self._write(f"{ev.path}/filter", "0")
            for knob, value in reversed(self._restore):
                if knob == "trace_clock":
                    value = value.split("[")[1].split("]")[0] if "[" in value else value
                self._write(knob, value)
        self.root = None
        while self._entries:
            journal_for(self.transport).done(self._entries.pop())

    def _holders(self) -> str:
        """Who keeps the instance busy (the processes with one of its files open), for the error message."""
        script = (f"for f in /proc/[0-9]*/fd/*; do case $(readlink $f) in {shlex.quote(self.root)}/*) "
                  "p=${f#/proc/}; p=${p%%/*}; echo \"$p $(cat /proc/$p/comm)\";; esac; done 2>/dev/null | sort -u")
        try:
            found = self.transport.run(["sh", "-c", script], timeout=30).text.split("\n")
        except TargetError:
            return "busy"
        return "held open by " + (", ".join(line for line in found if line) or "nobody any more")

    # --- tracefs access ---

    def _write(self, knob: str, value: str | bytes) -> None:
        data = value if isinstance(value, bytes) else value.encode()
        self.transport.write_file(f"{self.root}/{knob}", data)

    def _read(self, knob: str) -> str:
        return self.transport.read_file(f"{self.root}/{knob}").decode(errors="replace")

    def _active_clock(self) -> str:
        text = self._read("trace_clock")
        return text.split("[")[1].split("]")[0] if "[" in text else text.strip()

    def _cpu_dirs(self) -> list[str]:
        done = self.transport.run(["ls", f"{self.root}/per_cpu"], timeout=10)
        return sorted(done.text.split(), key=lambda c: int(c[3:]) if c[3:].isdigit() else 0)

    def _per_cpu_stats(self) -> dict[str, dict[str, int]]:
        stats = {}
        for cpu in self._cpu_dirs():
            text = self._read(f"per_cpu/{cpu}/stats")
            values = {}
            for line in text.splitlines():
                key, _, value = line.partition(":")
                value = value.strip().split()[0] if value.strip() else ""
                if value.isdigit():
                    values[key.strip()] = int(value)
            stats[cpu] = values
        return stats

    def _wait_for_readers(self, limit_s: float = 30, stalled_s: float = 1.0) -> None:
        """Until the readers have taken what the buffer holds, at most limit_s, and no longer than stalled_s
        without progress: a reader asleep in the kernel's wait when tracing stopped may never be woken
        (_drain_raw_pages takes what it leaves). Not into a full file system: the reader's writes fail there."""
        deadline = time.monotonic() + limit_s
        left, progress_at = self._buffered_entries(), time.monotonic()
        while left > 0 and time.monotonic() < deadline and not storage_full(self.out_dir):
            if time.monotonic() - progress_at > stalled_s:
                return
            time.sleep(0.05)
            now = self._buffered_entries()
            if now < left:
                left, progress_at = now, time.monotonic()

    def _drain_raw_pages(self) -> None:
        """What the per-CPU readers left in the buffer, read without blocking and appended to their files."""
        for cpu in self._cpu_dirs():
            path = f"{self.root}/per_cpu/{cpu}/trace_pipe_raw"
            left = self.transport.run(["dd", f"if={path}", "iflag=nonblock", "bs=1M"], timeout=30).stdout
            if left:
                with open(self.out_dir / "ftrace_raw" / cpu, "ab") as f:
                    f.write(left)

    def _buffered_entries(self) -> int:
        return sum(s.get("entries", 0) for s in self._per_cpu_stats().values())


def block_event_specs(devices: list[tuple[int, int]], *, with_plugs: bool = False) -> list[EventSpec]:
    """The block events of these devices. block_plug/unplug carry no device, so no filter can keep them to the
    stack: they would record every process of the machine (noise and overhead on a busy host) and no analyzer
    uses them, so they come only when asked (with_plugs, or --event block:block_plug)."""
    dev_filter = " || ".join(f"dev == {kernel_dev_t(major, minor)}" for major, minor in devices)
    return [EventSpec("block", name, None if name in DEVICELESS_EVENTS else dev_filter) for name in BLOCK_EVENTS
            if with_plugs or name not in DEVICELESS_EVENTS]


def parse_event_names(names: list[str]) -> list[EventSpec]:
    """EventSpecs of `system:event` strings given by the user (e.g. --event ext4:ext4_sync_file_enter)."""
    specs = []
    for text in names:
        system, sep, name = text.partition(":")
        if not sep or not system or not name:
            raise UsageError(f"trace event {text!r} is not system:event (e.g. ext4:ext4_sync_file_enter)")
        specs.append(EventSpec(system, name))
    return specs


def kernel_hz(transport: Transport) -> int | None:
    """CONFIG_HZ from the target's /proc/config.gz (None where the kernel does not expose its config)."""
    import gzip
    import zlib

    try:
        config = gzip.decompress(transport.read_file("/proc/config.gz")).decode(errors="replace")
    except (TargetError, OSError, EOFError, zlib.error):
        return None
    m = re.search(r"^CONFIG_HZ=(\d+)$", config, re.M)
    return int(m[1]) if m else None


def event_set_specs(set_name: str, available: dict[str, list[str]], devices: list[tuple[int, int]], *,
                    only: tuple[str, ...] | None = None,
                    fuse_connections: list[int] | None = None) -> tuple[list[EventSpec], list[str]]:
    """The EventSpecs of a set (mobiperf.core.trace_events.EVENT_SETS, checked by plan.check_trace_choice) that this
    kernel has, and the names of those it lacks; only: the set's events to take (None: all)."""
    event_set = EVENT_SETS[set_name]
    system, names, field = event_set.system, event_set.events, event_set.filter_field
    have = set(available.get(system, []))
    wanted = [n for n in names if only is None or n in only]
    if field == "dev":
        flt = " || ".join(f"dev == {kernel_dev_t(major, minor)}" for major, minor in devices)
    elif field == "bdi":
        flt = " || ".join(f'name == "{major}:{minor}"' for major, minor in devices)
    elif field == "connection" and fuse_connections:  # else every FUSE mount of the machine is traced
        flt = " || ".join(f"connection == {c}" for c in fuse_connections)
    else:
        flt = None
    specs = [EventSpec(system, n, flt or None) for n in wanted if n in have]
    missing = [f"{system}:{n}" for n in wanted if n not in have]
    if set_name == "writeback":  # dirty_folio replaced dirty_page: one of the two is expected to be missing
        missing = [m for m in missing if not m.endswith(("dirty_page", "dirty_folio"))]
    if set_name == "syscalls":  # arm64 has only the *at forms (openat, not open): a call missing with its *at
        missing = [m for m in missing if not _has_variant(m.split(":", 1)[1], have)]
    return specs, missing


def _has_variant(event: str, have: set[str]) -> bool:
    """Whether the kernel has another form of a syscall event (sys_enter_open -> sys_enter_openat, ...)."""
    edge, _, call = event.partition("_")[2].partition("_")
    base = f"sys_{edge}_"
    return any(f"{base}{alt}" in have for alt in (f"{call}at", f"{call}at2", f"{call}3", f"new{call}",
                                                   call.removesuffix("at"), f"{call}64"))


def fuse_connection(transport: Transport, mountpoint: str) -> int | None:
    """The FUSE connection number of a mount (what fuse_request_* events carry): its dev_t, 0:N -> N."""
    try:
        text = transport.read_file("/proc/self/mountinfo").decode(errors="replace")
    except TargetError:
        return None
    for mount in parse_mountinfo(text):
        major, _, minor = (mount.dev or "").partition(":")
        if mount.mountpoint == mountpoint and major.isdigit() and minor.isdigit():
            return kernel_dev_t(int(major), int(minor))
    return None
