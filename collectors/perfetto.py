"""ftrace through the device's own perfetto: the recorder of adb targets that have one (Android 10+).

On a phone, traced_probes and atrace own the top-level tracefs; mobiperf writing tracefs itself clashes with them.
When the target has `perfetto` (/system/bin/perfetto) and its tracing service is enabled (persist.traced.enable,
on by default since Android 10; set on Android 9 when it is off), a run records through it instead:

  config    a TraceConfig (perfetto_trace_pb2.TraceConfig, sent as text with --txt on stdin): one buffer, the
            linux.ftrace data source with the run's events (`group/name`, as the tracefs collector would enable
            them), its per-CPU buffer size and drain period, the atrace categories asked, and linux.process_stats
            (a process tree at the start: thread names); write_into_file, so a long run streams to the file
  instance  with root and tracefs instances, the collector makes an instance of its own, writes the run's event
            filters into it (block events of the stack's devices, ...) and names it in the config
            (ftrace_config.instance_name): traced_probes records there, the workload's trace_marker writes land
            there, and nobody else's tracing is touched. Without (or with atrace categories, which only the top
            level has) traced_probes uses the top level, unfiltered.
  record    `perfetto --txt -c - -o /data/misc/perfetto-traces/mobiperf-....pftrace --background-wait` (or
            --background where the binary predates -D); stop() sends SIGTERM to the printed pid, waits for it to
            finalise the file, pulls it to raw/trace.pftrace and removes it from the device
  formats   the events' format files and CONFIG_HZ are saved as the tracefs collector saves them, where tracefs
            is readable: the reader then prints every body exactly as the kernel does
choose_recorder() decides between this and tracefs and says why; run.json keeps both in the repetition's notes
and in this collector's summary. Hosts (the local target) always use tracefs.
"""

from __future__ import annotations

import time
from pathlib import Path

from mobiperf.collectors.collector import Collector
from mobiperf.collectors.ftrace import EventSpec, kernel_hz
from mobiperf.core.errors import TargetError
from mobiperf.target.script_sections import script_sections
from mobiperf.target.transport import Transport
from mobiperf.target.undo_journal import new_instance_name

TRACE_DIRS = ("/data/misc/perfetto-traces", "/data/local/tmp", "/tmp")
STOP_TIMEOUT_S = 60.0
PROBE_SCRIPT = (
    "echo @@path; command -v perfetto 2>/dev/null || { [ -x /system/bin/perfetto ] && echo /system/bin/perfetto; }\n"
    "echo @@enabled; getprop persist.traced.enable 2>/dev/null\n"
    "echo @@sdk; getprop ro.build.version.sdk 2>/dev/null\n"
    "echo @@help; p=$(command -v perfetto || echo /system/bin/perfetto); $p --help 2>&1 | grep -o -- "
    "'--background-wait' | head -1\n"
    "echo @@end\n")


def device_perfetto(transport: Transport) -> dict:
    """What the target says about its perfetto: path (None without one), enabled (persist.traced.enable), sdk,
    background_wait (the binary knows -D). One shell round trip."""
    done = transport.run(["sh", "-c", PROBE_SCRIPT], timeout=30)
    first = {k: (v[0] if v else "") for k, v in script_sections(done.text).items()}
    sdk = first.get("sdk", "")
    return {"path": first.get("path") or None, "enabled": first.get("enabled", ""),
            "sdk": int(sdk) if sdk.isdigit() else None, "background_wait": bool(first.get("help"))}


def choose_recorder(transport: Transport, asked: str = "auto") -> tuple[str, str, dict]:
    """("perfetto" or "tracefs", why, the perfetto facts). asked: auto, perfetto (an error if it cannot) or
    tracefs. On Android 9 with the service off, persist.traced.enable is set (the property Android documents
    for it) and checked again."""
    if asked == "tracefs":
        return "tracefs", "asked (--recorder tracefs)", {}
    if transport.is_local:
        if asked == "perfetto":
            raise TargetError("--recorder perfetto is for adb targets (a host records through tracefs)")
        return "tracefs", "a host target: tracefs directly", {}
    facts = device_perfetto(transport)
    why = _not_usable(transport, facts)
    if why is None:
        return "perfetto", (f"the device has {facts['path']} (persist.traced.enable={facts['enabled'] or 'unset'}, "
                            f"sdk {facts['sdk']})"), facts
    if asked == "perfetto":
        raise TargetError(f"--recorder perfetto: {why}")
    return "tracefs", f"{why}: tracefs directly", facts


def _not_usable(transport: Transport, facts: dict) -> str | None:
    if not facts["path"]:
        return "the device has no perfetto binary"
    if facts["enabled"] == "1" or (facts["enabled"] == "" and (facts["sdk"] or 0) >= 29):
        return None
    if facts["sdk"] is not None and facts["sdk"] < 28:
        return f"Android sdk {facts['sdk']} predates perfetto's tracing service"
    transport.run(["setprop", "persist.traced.enable", "1"], timeout=15)  # Android 9: the service is opt-in
    time.sleep(0.5)
    again = transport.run(["getprop", "persist.traced.enable"], timeout=15).text.strip()
    if again == "1":
        facts["enabled"] = "1 (set by mobiperf)"
        return None
    return f"perfetto's tracing service is off (persist.traced.enable={facts['enabled'] or 'unset'})"


def trace_config(events: list[EventSpec], *, buffer_kb: int, ftrace_buffer_kb: int, instance: str | None,
                 atrace_categories: tuple[str, ...] = (), drain_ms: int = 250) -> str:
    """The TraceConfig of a recording, as the text (--txt) perfetto reads."""
    from google.protobuf import text_format

    from mobiperf.core.perfetto_protos import message_class

    cfg = message_class("TraceConfig")()
    buf = cfg.buffers.add()
    buf.size_kb = buffer_kb
    buf.fill_policy = buf.DISCARD  # a full buffer drops new data and says so, never overwrites the start
    ftrace = cfg.data_sources.add().config
    ftrace.name = "linux.ftrace"
    ftrace.ftrace_config.ftrace_events.extend(sorted({f"{e.system}/{e.name}" for e in events}))
    ftrace.ftrace_config.buffer_size_kb = ftrace_buffer_kb
    ftrace.ftrace_config.drain_period_ms = drain_ms
    ftrace.ftrace_config.atrace_categories.extend(atrace_categories)
    if instance:
        ftrace.ftrace_config.instance_name = instance
    procs = cfg.data_sources.add().config
    procs.name = "linux.process_stats"
    procs.process_stats_config.scan_all_processes_on_start = True
    cfg.write_into_file = True
    cfg.file_write_period_ms = 1000
    cfg.flush_period_ms = 5000
    return text_format.MessageToString(cfg)


class PerfettoCollector(Collector):
    """Records the run's ftrace events through the target's perfetto; start() and stop() bracket the workload."""

    name = "ftrace"

    def __init__(self, transport: Transport, tracefs: str | None, events: list[EventSpec], out_dir: Path, *,
                 facts: dict, why: str, buffer_size_kb: int = 32768, use_instance: bool = True,
                 atrace_categories: tuple[str, ...] = ()):
        self.transport, self.tracefs, self.events, self.out_dir = transport, tracefs, events, Path(out_dir)
        self.facts, self.why, self.buffer_size_kb = facts, why, buffer_size_kb
        self.atrace_categories = atrace_categories
        self.use_instance = use_instance and not atrace_categories
        self.id = new_instance_name()
        self.instance: str | None = None
        self.remote_trace: str | None = None
        self.pid: int | None = None
        self.config = ""
        self.instance_note: str | None = None
        self.recording_instance: str | None = None  # the instance named in the config (None: the top level)

    @property
    def marker_path(self) -> str | None:
        if not self.tracefs:
            return None
        return f"{self.tracefs}/instances/{self.instance}/trace_marker" if self.instance else \
            f"{self.tracefs}/trace_marker"

    def __enter__(self) -> "PerfettoCollector":
        self.out_dir.mkdir(parents=True, exist_ok=True)
        try:
            if self.use_instance and self.tracefs and self.transport.exists(f"{self.tracefs}/instances"):
                self._make_instance()
            self._save_formats()
            self.remote_trace = f"{self._trace_dir()}/{self.id}.pftrace"
            self.config = trace_config(self.events, buffer_kb=max(4 * self.buffer_size_kb, 65536),
                                       ftrace_buffer_kb=self.buffer_size_kb, instance=self.instance,
                                       atrace_categories=self.atrace_categories)
            (self.out_dir / "perfetto_config.pbtxt").write_text(self.config)
        except BaseException:
            self._cleanup()
            raise
        return self

    def __exit__(self, *exc) -> None:
        try:
            if self.pid is not None:
                self.stop()
        finally:
            self._cleanup()

    def workload_env(self) -> dict[str, str]:
        return {"MOBIBENCH_TRACE_MARKER": self.marker_path} if self.marker_path else {}

    def start(self) -> None:
        """Start the session in our instance; where perfetto refuses instance_name (before v36 its --txt parser
        rejects the field) or traced_probes does not enable the events there (SELinux on some builds), stop it
        and record at the top level instead, saying so in the summary."""
        try:
            self._start_session()
            if self.recording_instance is None or self._instance_enabled():
                return
            why = "traced_probes did not enable the events in it"
            self._end_session()
        except TargetError as e:
            if self.recording_instance is None:
                raise
            why = f"perfetto refused it ({str(e)[-200:]})"
        # The instance stays until the end (the workload was already told its trace_marker): its lines are lost.
        self.instance_note = (f"instance {self.instance} not used: {why}; recorded at the top level, unfiltered, "
                              "without the workload's trace markers")
        self.recording_instance = None
        self.config = trace_config(self.events, buffer_kb=max(4 * self.buffer_size_kb, 65536),
                                   ftrace_buffer_kb=self.buffer_size_kb, instance=None,
                                   atrace_categories=self.atrace_categories)
        (self.out_dir / "perfetto_config.pbtxt").write_text(self.config)
        self._start_session()

    def _start_session(self) -> None:
        mode = "--background-wait" if self.facts.get("background_wait") else "--background"
        done = self.transport.run([self.facts["path"] or "perfetto", "--txt", "-c", "-", "-o", self.remote_trace,
                                   mode], input=self.config.encode(), timeout=60)
        pid = done.text.strip().splitlines()[-1] if done.text.strip() else ""
        if done.returncode != 0 or not pid.isdigit():
            err = (done.stderr.decode(errors="replace") or done.text).strip()[-500:]
            raise TargetError(f"perfetto did not start tracing (exit {done.returncode}): {err}")
        self.pid = int(pid)
        if mode == "--background":  # no acknowledgement: give the data sources a moment to start
            time.sleep(1.0)

    def _instance_enabled(self) -> bool:
        ev = self.events[0]
        try:
            enable = f"{self.tracefs}/instances/{self.instance}/{ev.path}/enable"
            return self.transport.read_file(enable).strip() == b"1"
        except TargetError:
            return False

    def _end_session(self) -> None:
        pid, self.pid = self.pid, None
        self.transport.run(["kill", "-TERM", str(pid)], timeout=15)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while self.transport.run(["kill", "-0", str(pid)], timeout=15).returncode == 0:
            if time.monotonic() > deadline:
                self.transport.run(["kill", "-KILL", str(pid)], timeout=15)
                raise TargetError(f"perfetto (pid {pid}) did not finish its trace within {STOP_TIMEOUT_S:g} s")
            time.sleep(0.2)

    def stop(self) -> dict:
        """SIGTERM to perfetto (it stops the session and finalises the file), wait for it, pull the trace."""
        self._end_session()
        self.transport.pull(self.remote_trace, self.out_dir / "trace.pftrace", timeout=600)
        size = (self.out_dir / "trace.pftrace").stat().st_size
        return {"recorder": "perfetto", "why": self.why, "perfetto": self.facts.get("path"),
                "sdk": self.facts.get("sdk"), "instance": self.recording_instance,
                "instance_note": self.instance_note,
                "trace": "trace.pftrace",
                "trace_bytes": size, "config": "perfetto_config.pbtxt",
                "events": [f"{e.system}:{e.name}" for e in self.events], "clock": "boot (traced_probes' ftrace clock)"}

    # --- set-up and clean-up ---

    def _trace_dir(self) -> str:
        for d in TRACE_DIRS:
            if self.transport.run(["test", "-d", d, "-a", "-w", d], timeout=15).returncode == 0:
                return d
        raise TargetError(f"no writable directory for perfetto's trace on the device ({', '.join(TRACE_DIRS)})")

    def _make_instance(self) -> None:
        """An instance of our own with the run's filters; perfetto enables the events in it."""
        root = f"{self.tracefs}/instances/{self.id}"
        if self.transport.run(["mkdir", root], timeout=15).returncode != 0:
            return  # no permission: traced_probes records at the top level
        self.instance = self.recording_instance = self.id
        for ev in self.events:
            if ev.filter:
                self.transport.write_file(f"{root}/{ev.path}/filter", ev.filter.encode())

    def _save_formats(self) -> None:
        if not self.tracefs:
            return
        formats = self.out_dir / "formats"
        for ev in [*self.events, EventSpec("ftrace", "print")]:
            try:
                data = self.transport.read_file(f"{self.tracefs}/{ev.path}/format")
            except TargetError:
                continue  # not readable here: the reader uses its built-in formats
            (formats / ev.system / ev.name).mkdir(parents=True, exist_ok=True)
            (formats / ev.system / ev.name / "format").write_bytes(data)
        hz = kernel_hz(self.transport)
        if hz:
            (self.out_dir / "kernel_hz").write_text(f"{hz}\n")

    def _cleanup(self) -> None:
        if self.pid is not None:
            self.transport.run(["kill", "-KILL", str(self.pid)], timeout=15)
            self.pid = None
        if self.remote_trace:
            self.transport.run(["rm", "-f", self.remote_trace], timeout=15)
        self._remove_instance()

    def _remove_instance(self) -> None:
        if self.instance:
            root = f"{self.tracefs}/instances/{self.instance}"
            for _ in range(50):
                if self.transport.run(["rmdir", root], timeout=15).returncode == 0:
                    break
                time.sleep(0.1)
            else:
                raise TargetError(f"could not remove tracefs instance {root}")
            self.instance = None
