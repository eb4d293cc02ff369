"""blktrace collection: real kernel blk_io_trace records of the stack's device.

Two ways, tried in this order:
  tool        the blktrace program (relay files on debugfs). It needs debugfs mounted and a kernel that allows
              the relay (kernel lockdown forbids it); when debugfs is not mounted we mount it and unmount it after.
              Output: raw/blktrace/<dev>.blktrace.<cpu>.
  blk tracer  the kernel's ftrace `blk` tracer with the `bin` option: sysfs /sys/block/<dev>/trace/enable sets up
              the trace without debugfs, and trace_pipe yields blk_io_trace records (sequence 0, no process
              notes). Output: raw/blktrace/<dev>.blkbin.
              The blk tracer exists only at the top level of tracefs (instances do not offer it), so this mode
              takes the top level: it refuses when another tracer or top-level events are active, saves
              current_tracer, tracing_on, options/bin and options/context-info and the device's trace/enable, and
              restores them on the way out (also on errors and Ctrl-C: __exit__ always runs).
"""

from __future__ import annotations

import time
from pathlib import Path

from mobiperf.collectors.collector import Collector
from mobiperf.core.errors import TargetError
from mobiperf.core.mounts import is_mounted, parse_proc_mounts
from mobiperf.target.transport import BackgroundProcess, Transport
from mobiperf.target.undo_journal import journal_for


class BlktraceCollector(Collector):
    name = "blktrace"

    def __init__(self, transport: Transport, tracefs: str | None, device: str, out_dir: Path, *,
                 mode: str = "auto", remote_dir: str | None = None):
        self.transport = transport
        self.tracefs = tracefs
        self.device = device  # /dev/loop3
        self.dev_name = Path(device).name
        self.out_dir = Path(out_dir) / "blktrace"
        self.mode = mode  # auto | tool | blk-tracer
        self.used: str | None = None
        self._proc: BackgroundProcess | None = None
        self._restore: list[tuple[str, bytes]] = []
        self._mounted_debugfs = False
        self._remote_dir = remote_dir  # where the blktrace program writes on the target (None: out_dir)
        self._journal = journal_for(transport)
        self._debugfs_entry = self._trace_entry = None
        self._knob_entries: list[int] = []

    # --- protocol ---

    def __enter__(self) -> "BlktraceCollector":
        self.out_dir.mkdir(parents=True, exist_ok=True)
        return self

    def start(self) -> None:
        if self.mode in ("auto", "tool") and self._start_tool():
            self.used = "tool"
            return
        if self.mode == "tool":
            raise TargetError("the blktrace program cannot record here (debugfs relay unavailable or locked down)")
        self._start_blk_tracer()
        self.used = "blk-tracer"

    def stop(self) -> dict:
        if self._proc is None:
            return {"mode": self.used}
        if self.used == "tool":
            self._proc.kill(sig=2, grace_s=10)  # SIGINT: blktrace flushes its relay buffers and writes files
            self._proc = None
            self._journal.done(self._trace_entry)
            if self._remote_dir and self._remote_dir != str(self.out_dir):
                self.transport.pull(self._remote_dir, self.out_dir)
                self.transport.run(["rm", "-rf", self._remote_dir], timeout=60)
        else:
            self._write(f"/sys/block/{self.dev_name}/trace/enable", "0")
            self._write(f"{self.tracefs}/tracing_on", "0")
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and self._entries() > 0:
                time.sleep(0.05)
            time.sleep(0.1)
            self._proc.kill()
            self._proc = None
        self._restore_all()
        files = sorted(p.name for p in self.out_dir.iterdir())
        return {"mode": self.used, "files": files,
                "bytes": sum((self.out_dir / f).stat().st_size for f in files)}

    def __exit__(self, *exc) -> None:
        if self._proc is not None:
            self._proc.kill()  # SIGTERM: blktrace tears its kernel trace down as on SIGINT
            self._proc = None
            if self.used == "tool":
                self._journal.done(self._trace_entry)
        self._restore_all()

    # --- the blktrace program ---

    def _start_tool(self) -> bool:
        if not self.transport.which("blktrace"):
            return False
        mounts = parse_proc_mounts(self.transport.read_file("/proc/self/mounts").decode(errors="replace"))
        if not is_mounted("/sys/kernel/debug", mounts, fstype="debugfs"):
            self._debugfs_entry = self._journal.record("mount", path="/sys/kernel/debug")
            if self.transport.run(["mount", "-t", "debugfs", "debugfs", "/sys/kernel/debug"],
                                  timeout=10).returncode != 0:
                self._journal.done(self._debugfs_entry)
                return False
            self._mounted_debugfs = True
        if self._remote_dir is None:
            self._remote_dir = str(self.out_dir)  # local transport: the same path
        else:
            self.transport.run(["mkdir", "-p", self._remote_dir], timeout=30).check()
        # Killed without its SIGINT, blktrace leaves the kernel's trace set up: the journal tears it down then.
        self._trace_entry = self._journal.record("blktrace", device=self.device)
        proc = self.transport.start(["blktrace", "-d", self.device, "-o", self.dev_name, "-D", self._remote_dir],
                                    stdout_path=self.out_dir / "blktrace.log",
                                    stderr_path=self.out_dir / "blktrace.err")
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                self._journal.done(self._trace_entry)
                self._undo_debugfs()
                for leftover in self.out_dir.glob(f"{self.dev_name}.blktrace.*"):
                    leftover.unlink()
                return False
            time.sleep(0.05)
        self._proc = proc
        return True

    def _undo_debugfs(self) -> None:
        if self._mounted_debugfs:
            if self.transport.run(["umount", "/sys/kernel/debug"], timeout=10).returncode == 0:
                self._journal.done(self._debugfs_entry)
            self._mounted_debugfs = False

    # --- the blk tracer ---

    def _start_blk_tracer(self) -> None:
        if not self.tracefs:
            raise TargetError("no tracefs: the blk tracer cannot run")
        top = self.tracefs
        if "blk" not in self._read(f"{top}/available_tracers").split():
            raise TargetError("this kernel has no blk tracer (CONFIG_BLK_DEV_IO_TRACE)")
        current = self._read(f"{top}/current_tracer").strip()
        if current != "nop":
            raise TargetError(f"the top-level tracer is busy ({current}); the blk tracer would disturb its user")
        if self._read(f"{top}/set_event").strip():
            raise TargetError("top-level trace events are enabled by someone else; the blk tracer's binary output "
                              "would mix with them")
        enable = f"/sys/block/{self.dev_name}/trace/enable"
        if self._read(enable).strip() != "0":
            raise TargetError(f"{self.device} is already being block-traced")
        for knob in (f"{top}/tracing_on", f"{top}/options/bin", f"{top}/options/context-info", enable,
                     f"{top}/current_tracer"):
            self._restore.append((knob, self.transport.read_file(knob).strip()))
            self._knob_entries.append(self._journal.record("sysfs", path=knob,
                                                           old=self._restore[-1][1].decode(errors="replace")))
        self._write(f"{top}/tracing_on", "0")
        self._write(enable, "1")
        self._write(f"{top}/current_tracer", "blk")
        self._write(f"{top}/options/context-info", "0")  # else each record gets a pid/cpu/ts text prefix
        self._write(f"{top}/options/bin", "1")
        self._write(f"{top}/trace", "")  # what an earlier user left in the buffer is not ours
        self._proc = self.transport.start(["cat", f"{top}/trace_pipe"],
                                          stdout_path=self.out_dir / f"{self.dev_name}.blkbin")
        self._write(f"{top}/tracing_on", "1")

    def _entries(self) -> int:
        total = 0
        for cpu_dir in self.transport.run(["ls", f"{self.tracefs}/per_cpu"], timeout=10).text.split():
            text = self._read(f"{self.tracefs}/per_cpu/{cpu_dir}/stats")
            for line in text.splitlines():
                if line.startswith("entries:"):
                    total += int(line.split()[1])
        return total

    def _restore_all(self) -> None:
        """Put every saved knob back, newest first; current_tracer last-saved so restored first (EBUSY otherwise
        while trace_pipe is open: the reader is gone by now)."""
        errors = []
        while self._restore:
            knob, value = self._restore.pop()
            for attempt in range(20):
                try:
                    self.transport.write_file(knob, value or b"0")
                    break
                except TargetError as e:
                    if attempt == 19:
                        errors.append(str(e))
                    time.sleep(0.1)
        self._undo_debugfs()
        if errors:
            raise TargetError("blktrace: could not restore " + "; ".join(errors))
        while self._knob_entries:
            self._journal.done(self._knob_entries.pop())

    def _write(self, path: str, value: str) -> None:
        self.transport.write_file(path, value.encode())

    def _read(self, path: str) -> str:
        return self.transport.read_file(path).decode(errors="replace")
