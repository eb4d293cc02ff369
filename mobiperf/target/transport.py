"""Transports: how mobiperf runs commands and moves files on a target.

A Transport is the only thing that touches a device. Everything above it (stack set-up, collectors, the
workload runner) speaks in argv lists and device paths, so the same code drives the local host and an
adb-attached phone. Every call takes a timeout: a device that stops answering becomes a TargetError, never a hang.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from mobiperf.core.errors import TargetError
from mobiperf.core.lifeline import die_with_owner, helper_env

DEFAULT_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Completed:
    """The outcome of a command that ran to its end."""

    argv: tuple[str, ...]
    returncode: int
    stdout: bytes
    stderr: bytes

    @property
    def text(self) -> str:
        return self.stdout.decode(errors="replace")

    def check(self) -> "Completed":
        if self.returncode != 0:
            err = self.stderr.decode(errors="replace").strip() or self.text.strip()
            raise TargetError(f"{shlex.join(self.argv)} exited {self.returncode}: {err[-500:]}")
        return self


class BackgroundProcess(ABC):
    """A process started on the target that outlives the call that started it."""

    @property
    @abstractmethod
    def pid(self) -> int | None:
        """The process id on the target, when known."""

    @abstractmethod
    def poll(self) -> int | None:
        """The exit status if it has ended, else None."""

    @abstractmethod
    def wait(self, timeout: float) -> int:
        """Wait for the end; TargetError if it has not ended within timeout."""

    @abstractmethod
    def kill(self, sig: int = signal.SIGTERM, grace_s: float = 2.0) -> int | None:
        """Send sig, then SIGKILL after grace_s; returns the exit status (None if it cannot be known)."""


class Transport(ABC):
    """Runs commands and moves files on one target."""

    name: str = "?"
    is_local: bool = False       # the host mobiperf runs on (subprocess), not a device reached through a client
    pid_dir: str | None = None   # where background commands leave pid files on the target (set by the undo journal)

    @property
    def is_root(self) -> bool:
        """Whether commands run as root on the target."""
        return self.run(["id", "-u"], timeout=10).text.strip() == "0"

    def require_root(self, why: str) -> str:
        """How this transport gets root for `why` (a step that needs it); TargetError naming the step and how to
        get root when it has none. Transports that can acquire root (AdbTransport: su, `adb root`) override it."""
        if self.is_root:
            return "uid 0"
        raise TargetError(f"{why} needs root: run mobiperf as root (e.g. with sudo)")

    @abstractmethod
    def run(self, argv: Sequence[str], *, timeout: float = DEFAULT_TIMEOUT_S, input: bytes | None = None,
            cwd: str | None = None, env: Mapping[str, str] | None = None) -> Completed:
        """Run argv to completion. A non-zero exit is returned, not raised (call .check())."""

    @abstractmethod
    def start(self, argv: Sequence[str], *, stdout_path: Path | None = None, stderr_path: Path | None = None,
              cwd: str | None = None, env: Mapping[str, str] | None = None,
              death_signal: int = signal.SIGKILL) -> BackgroundProcess:
        """Start argv in the background; its stdout/stderr go to these local files (or are discarded).

        The process dies with mobiperf (mobiperf.core.lifeline): it gets death_signal when mobiperf ends, even by
        SIGKILL (SIGTERM lets a FUSE daemon unmount and write its counters), and carries mobiperf's owner token.
        Start it from a thread that outlives it."""

    @abstractmethod
    def read_file(self, path: str, *, timeout: float = DEFAULT_TIMEOUT_S) -> bytes:
        """The content of a file on the target; TargetError if it cannot be read."""

    @abstractmethod
    def write_file(self, path: str, data: bytes, *, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        """Write data to a file on the target (tracefs and sysfs knobs included); TargetError on failure."""

    @abstractmethod
    def push(self, local: Path, remote: str, *, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        """Copy a local file or tree to the target."""

    @abstractmethod
    def pull(self, remote: str, local: Path, *, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        """Copy a file or tree from the target."""

    def exists(self, path: str, *, timeout: float = DEFAULT_TIMEOUT_S) -> bool:
        return self.run(["test", "-e", path], timeout=timeout).returncode == 0

    def which(self, program: str, *, timeout: float = DEFAULT_TIMEOUT_S) -> str | None:
        done = self.run(["sh", "-c", f"command -v {shlex.quote(program)}"], timeout=timeout)
        path = done.text.strip()
        return path if done.returncode == 0 and path else None


class LocalProcess(BackgroundProcess):
    def __init__(self, popen: subprocess.Popen, argv: Sequence[str]):
        self._popen = popen
        self._argv = tuple(argv)

    @property
    def pid(self) -> int:
        return self._popen.pid

    def poll(self) -> int | None:
        return self._popen.poll()

    def wait(self, timeout: float) -> int:
        try:
            return self._popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise TargetError(f"{shlex.join(self._argv)} did not end within {timeout:g} s") from None

    def kill(self, sig: int = signal.SIGTERM, grace_s: float = 2.0) -> int | None:
        if self._popen.poll() is not None:
            return self._popen.returncode
        # The process leads its own group (start_new_session), so its children go with it.
        _signal_group(self._popen.pid, sig)
        try:
            return self._popen.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            _signal_group(self._popen.pid, signal.SIGKILL)
            return self._popen.wait(timeout=10)


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass


class LocalTransport(Transport):
    """The host mobiperf runs on, through subprocess and plain file IO."""

    name = "local"
    is_local = True

    def run(self, argv, *, timeout=DEFAULT_TIMEOUT_S, input=None, cwd=None, env=None) -> Completed:
        try:
            done = subprocess.run(list(argv), input=input, capture_output=True, timeout=timeout, cwd=cwd,
                                  env=helper_env(env), start_new_session=True)
        except subprocess.TimeoutExpired:
            raise TargetError(f"{shlex.join(argv)} did not end within {timeout:g} s") from None
        except FileNotFoundError:
            raise TargetError(f"{argv[0]}: command not found") from None
        return Completed(tuple(argv), done.returncode, done.stdout, done.stderr)

    def start(self, argv, *, stdout_path=None, stderr_path=None, cwd=None, env=None,
              death_signal=signal.SIGKILL) -> LocalProcess:
        out = open(stdout_path, "wb") if stdout_path else subprocess.DEVNULL
        err = open(stderr_path, "wb") if stderr_path else subprocess.DEVNULL
        try:
            popen = subprocess.Popen(list(argv), stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=cwd,
                                     env=helper_env(env), start_new_session=True,
                                     preexec_fn=die_with_owner(death_signal))
        except FileNotFoundError:
            raise TargetError(f"{argv[0]}: command not found") from None
        finally:
            for f in (out, err):
                if f is not subprocess.DEVNULL:
                    f.close()
        return LocalProcess(popen, argv)

    def read_file(self, path, *, timeout=DEFAULT_TIMEOUT_S) -> bytes:
        try:
            return Path(path).read_bytes()
        except OSError as e:
            raise TargetError(f"cannot read {path}: {e.strerror}") from None

    def write_file(self, path, data, *, timeout=DEFAULT_TIMEOUT_S) -> None:
        # One write() call: tracefs and sysfs knobs act on each write, and a short write would split a command.
        # A file object, not a bare fd: an exception from a stop signal between the open and the write cannot leak
        # it (a tracefs file left open keeps its instance busy: it could not be removed).
        try:
            f = open(path, "wb", buffering=0)
        except OSError as e:
            raise TargetError(f"cannot open {path} for writing: {e.strerror}") from None
        with f:
            try:
                f.write(data)
            except OSError as e:
                raise TargetError(f"writing {data[:60]!r} to {path}: {e.strerror}") from None

    def push(self, local, remote, *, timeout=DEFAULT_TIMEOUT_S) -> None:
        _copy(Path(local), Path(remote))

    def pull(self, remote, local, *, timeout=DEFAULT_TIMEOUT_S) -> None:
        _copy(Path(remote), Path(local))

    def exists(self, path, *, timeout=DEFAULT_TIMEOUT_S) -> bool:
        return os.path.exists(path)

    def which(self, program, *, timeout=DEFAULT_TIMEOUT_S) -> str | None:
        return shutil.which(program)


def _copy(src: Path, dst: Path) -> None:
    try:
        if src.is_dir():
            shutil.copytree(src, dst, symlinks=True, dirs_exist_ok=True)
        else:
            shutil.copy2(src, dst)
    except OSError as e:
        raise TargetError(f"cannot copy {src} to {dst}: {e}") from None


