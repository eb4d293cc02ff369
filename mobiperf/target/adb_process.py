"""A process on the device kept alive by a local `adb shell` client (what AdbTransport.start returns): its pid said
on stderr first, its output streamed into local files, its status said last by a status marker, so that a cut
stream (a lost device) is told from a process that ended; killed as a process group, the group's own only.
"""

from __future__ import annotations

import re
import secrets
import shlex
import signal
import subprocess
import threading
from pathlib import Path
from typing import Mapping, Sequence

from mobiperf.core.errors import TargetError
from mobiperf.core.lifeline import OWNER_ENV, die_with_owner, owner_token
from mobiperf.target.adb_client import ENV_NAME, client_env, shell_status, strip_marker
from mobiperf.target.transport import BackgroundProcess, Transport

PID_TIMEOUT_S = 30.0             # how long start() waits for the remote process to say its pid


class AdbProcess(BackgroundProcess):
    """A remote process kept alive by a local `adb shell` client; its output streams into local files.

    The remote side is `sh -c 'say pid; exec argv'` inside a shell that reports the status at the end, so the pid
    is the workload's own and its process group (the device shell's, one per adb shell) takes its children along
    when it is killed.
    """

    def __init__(self, transport: Transport, argv: Sequence[str], *, stdout_path: Path | None,
                 stderr_path: Path | None, cwd: str | None, env: Mapping[str, str] | None):
        self.t = transport
        self.argv = tuple(argv)
        self._marker = f"\x1emobiperf-{secrets.token_hex(4)}:"
        self._pid: int | None = None
        self._group: int | None = None
        self._status: int | None = None
        self._pid_seen = threading.Event()
        self._stderr_status: int | None = None
        # exec takes a plain command, so cwd and env are applied by the shell before it.
        for key in env or {}:
            if not ENV_NAME.match(key):
                raise ValueError(f"not an environment variable name: {key!r}")
        cd = f"cd -- {shlex.quote(cwd)} || exit 127; " if cwd else ""
        exports = "".join(f"export {k}={shlex.quote(v)}; " for k, v in (env or {}).items())
        # The pid file (named after the status shell, which removes it) lets a later run find what a killed
        # mobiperf left running here; the owner token in the environment proves the pid is still ours.
        pid_dir = transport.pid_dir
        pid_file = f"{shlex.quote(pid_dir)}/$PPID" if pid_dir else ""
        record = f"mkdir -p {shlex.quote(pid_dir)} && echo $$ $PPID > {pid_file}; " if pid_dir else ""
        inner = (f"{record}printf '%s %d %d\\n' {shlex.quote(self._marker)} $$ $PPID >&2; {cd}{exports}"
                 f"exec {shlex.join(argv)}")
        # The status shell catches what kill() sends to the group (a caught signal is reset to default across
        # exec, so the workload still gets it): it outlives the workload and reports the workload's own status.
        forget = f"rm -f {shlex.quote(pid_dir)}/$$; " if pid_dir else ""
        outer = (f"export {OWNER_ENV}={shlex.quote(owner_token())}; trap : TERM INT QUIT USR1 USR2; "
                 f"sh -c {shlex.quote(inner)}; s=$?; {forget}"
                 f"printf '%s%d' {shlex.quote(self._marker)} \"$s\" >&2; exit \"$s\"")
        outer = transport._as_root(outer)
        out = open(stdout_path, "wb") if stdout_path else subprocess.DEVNULL
        try:
            self._client = subprocess.Popen(transport.adb_argv("shell", "-T", outer), stdin=subprocess.DEVNULL,
                                            stdout=out, stderr=subprocess.PIPE,
                                            env=client_env(transport.server_port), start_new_session=True,
                                            preexec_fn=die_with_owner(signal.SIGKILL))
        finally:
            if out is not subprocess.DEVNULL:
                out.close()
        self._stderr_file = open(stderr_path, "wb") if stderr_path else None
        self._pump = threading.Thread(target=self._pump_stderr, daemon=True, name=f"adb-stderr-{argv[0]}")
        self._pump.start()
        if not self._pid_seen.wait(PID_TIMEOUT_S) or self._pid is None:
            self._client.kill()
            self._client.wait(10)
            self._pump.join(10)
            if self.t.device_state() != "device":
                raise self.t._lost(shlex.join(argv))
            raise TargetError(f"{self.t.name}: {shlex.join(argv)} did not start within {PID_TIMEOUT_S:g} s")

    # stderr: the first line carries the pid, the tail the status; the rest is the workload's stderr.
    def _pump_stderr(self) -> None:
        pipe = self._client.stderr
        head = bytearray()
        try:
            while self._pid is None:
                chunk = pipe.read1(65536)
                if not chunk:
                    return
                head += chunk
                line, nl, rest = bytes(head).partition(b"\n")
                if not nl:
                    continue
                m = re.match(re.escape(self._marker.encode()) + rb" (\d+) (\d+)\Z", line)
                if m is None:   # the su or the shell said something first (e.g. an error): keep it
                    self._write_err(line + nl)
                    head = bytearray(rest)
                    continue
                self._pid, parent = int(m.group(1)), int(m.group(2))
                self._group = parent  # used for a group kill only if _group_is_own() confirms it
                self._pid_seen.set()
                head = bytearray(rest)
            tail = bytes(head)
            keep = len(self._marker) + 12  # hold back what could be the start of the status marker
            while chunk := pipe.read1(65536):
                tail += chunk
                if len(tail) > keep:
                    self._write_err(tail[:-keep])
                    tail = tail[-keep:]
            tail, self._stderr_status = strip_marker(tail, self._marker)
            self._write_err(tail)
        finally:
            self._pid_seen.set()
            if self._stderr_file:
                self._stderr_file.close()

    def _write_err(self, data: bytes) -> None:
        if self._stderr_file and data:
            self._stderr_file.write(data)
            self._stderr_file.flush()

    @property
    def pid(self) -> int | None:
        return self._pid

    def _finish(self) -> int:
        """The status once the adb client has ended; TargetError if the device went away instead."""
        if self._status is None:
            self._pump.join(10)
            if self._stderr_status is not None:
                self._status = shell_status(self._stderr_status)
            elif self.t.device_state() == "device":
                # Killed along with its group (the status shell too): shell v2's exit code is the truth.
                self._status = shell_status(self._client.returncode)
            else:
                raise self.t._lost(shlex.join(self.argv))
        return self._status

    def poll(self) -> int | None:
        if self._client.poll() is None:
            return None
        return self._finish()

    def wait(self, timeout: float) -> int:
        try:
            self._client.wait(timeout)
        except subprocess.TimeoutExpired:
            raise TargetError(f"{self.t.name}: {shlex.join(self.argv)} did not end within {timeout:g} s") from None
        return self._finish()

    def _signal(self, sig: int) -> None:
        if self._group is not None and self._group_is_own():
            target = f"-- -{self._group}"
        else:
            target = str(self._pid)
        self.t._run_script(f"kill -s {signal.Signals(sig).name[3:]} {target} 2>/dev/null", timeout=15, input=None,
                           what=f"kill {self._pid}")

    def _group_is_own(self) -> bool:
        # Kill the whole group only if the status shell (our pid's parent) leads it, never a group of adbd's.
        try:
            stat_line = self.t.read_file(f"/proc/{self._pid}/stat", timeout=10).decode(errors="replace")
        except TargetError:
            return False
        fields = stat_line.rsplit(")", 1)[-1].split()
        return len(fields) > 2 and fields[2] == str(self._group)

    def kill(self, sig: int = signal.SIGTERM, grace_s: float = 2.0) -> int | None:
        if self._client.poll() is not None:
            return self._finish_or_none()
        try:
            self._signal(sig)
            try:
                self._client.wait(grace_s)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self._client.wait(10)
        except (TargetError, subprocess.TimeoutExpired):
            # The device stopped answering: end the local client; the device hangs up the remote side if it can.
            self._client.kill()
            self._client.wait(10)
        return self._finish_or_none()

    def _finish_or_none(self) -> int | None:
        try:
            return self._finish()
        except TargetError:
            return None
