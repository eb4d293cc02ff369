"""strace collection: the workload runs under `strace -f -ttt -T -y`, its log lands in raw/strace.log.

-f follows forks and prefixes each line with the pid, -ttt gives epoch timestamps in microseconds (in nanoseconds
where strace has --absolute-timestamps/--syscall-times), -T each call's duration, -y the path behind every fd. The
log is written on the target (a file in the raw directory locally, the
device's work directory over adb) and brought back at stop(). strace slows every system call down: it is for
finding out *which* calls a workload makes, not for timing small ones; compare with the ftrace syscalls source.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from mobiperf.collectors.collector import Collector
from mobiperf.core.errors import TargetError
from mobiperf.target.transport import Transport

STRACE_OPTIONS = ("-f", "-ttt", "-T", "-y")
# The same, in ns where strace can (>= 5.18): µs steps are as long as the gap between a FUSE request and its call.
STRACE_OPTIONS_NS = ("-f", "--absolute-timestamps=format:unix,precision:ns", "-T", "--syscall-times=ns", "-y")


class StraceCollector(Collector):
    name = "strace"

    def __init__(self, transport: Transport, strace: str, out_dir: Path, *, remote_log: str | None = None):
        self.transport = transport
        self.strace = strace
        # Absolute: the workload (and strace with it) runs in the stack's directory, not ours.
        self.local_log = Path(out_dir).absolute() / "strace.log"
        self.remote_log = remote_log or str(self.local_log)
        self.options = STRACE_OPTIONS

    def __enter__(self) -> "StraceCollector":
        probe = self.transport.run([self.strace, *STRACE_OPTIONS_NS, "-o", "/dev/null", "true"], timeout=30)
        self.options = STRACE_OPTIONS_NS if probe.returncode == 0 else STRACE_OPTIONS
        return self

    def wrap_command(self, argv: Sequence[str]) -> list[str]:
        return [self.strace, *self.options, "-o", self.remote_log, "--", *argv]

    def stop(self) -> dict:
        if self.remote_log != str(self.local_log):
            try:
                self.transport.pull(self.remote_log, self.local_log)
            finally:
                self.transport.run(["rm", "-f", self.remote_log], timeout=30)
        size = self.local_log.stat().st_size if self.local_log.exists() else 0
        if not size:
            raise TargetError(f"strace wrote nothing to {self.remote_log}")
        return {"log": self.local_log.name, "bytes": size}

    def __exit__(self, *exc) -> None:
        if self.remote_log != str(self.local_log):
            try:
                self.transport.run(["rm", "-f", self.remote_log], timeout=30)
            except TargetError:
                pass  # the device is gone: the log goes with its work directory, and the first error stands
