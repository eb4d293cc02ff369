"""The undo journal: what a mobiperf process changed on a target and has not undone yet, written before each change.

A stack's set-up changes the machine (or the phone) outside the run directory: mounts, loop devices, tracefs
instances, sysfs values, cgroups, directories, pushed files. The normal way back is the teardown that runs on
exit, Ctrl-C, SIGTERM and SIGHUP. SIGKILL, an OOM kill or a crash of the host skip it; the journal lets the next
`mobiperf run`, `mobiperf probe` or `mobiperf doctor --fix` undo the changes of a process that is gone
(mobiperf.target.leftovers), and restore every value it changed.

Where: on the target, since that is where the changes are.
  local  /var/tmp/mobiperf/journal/<pid>-<hex>.jsonl, fsync'ed after every line and flock'ed by its owner for as
         long as the owner lives: a journal that another process can lock has a dead owner.
  adb    /data/local/tmp/mobiperf-journal/<pid>-<hex>.jsonl on the device (/tmp/mobiperf-journal where it has no
         /data/local/tmp), a directory shared like /tmp (mode 1777: root through su and the shell user may both
         run mobiperf on one phone). The owner flocks a lock file of the same name on its own host, and the
         header names that host and its boot, so that host can tell whether the owner still lives.

Format: JSON lines. A header, then one line per change, written *before* the change is made
(`{"id": 3, "kind": "mount", "path": ...}`), facts learned after it (`{"update": 3, "device": "/dev/loop7"}`), and
`{"done": 3}` once it is undone. A change whose line exists may not have happened (the process died in between):
undoing checks first. A torn last line (the process died while writing it) is ignored. The file is removed when
nothing is left to undo; a process that makes more changes later starts a new one.

Kinds of change (how each is found and undone: mobiperf.target.undo_steps):
  dir {path[, only_if_empty]}  a directory we created; removed with its content (only if empty when others may
                           use it too), never across a mount
  file {path}              a file we put there (a pushed binary)
  mount {path}             something we mounted at path (a filesystem, a FUSE layer, the device model, debugfs)
  loop {image, device}     a loop device over image (device: learned after attaching)
  sysfs {path, old}        a sysfs or tracefs value we changed, and what it was
  bdi {path, old}          a block device's dirty-limit knobs ({knob: value}), restored in an order the kernel takes
  cgroup {path}            a cgroup we created
  tracefs_instance {path}  a tracefs instance we created
  blktrace {device}        a kernel block trace set up on a device
  process {name[, pid, start]}  a long-lived process started to outlive its starter (a virtual phone's QEMU; pid
                           and its start time in clock ticks, learned after starting it, tell it from a reused pid)
  adb_connection {serial, server_port}  an `adb connect SERIAL` made on this host's adb server at that port
Helpers are not entries: every helper carries the owner token of the header (mobiperf.core.lifeline), and over adb
each background command leaves a pid file in the header's pid_dir while it runs. A process meant to outlive its
starter holds the journal's lock instead (UndoJournal.inheritable_lock): the journal is alive while it runs, and
its changes are undone by the next recovery once it is gone.
"""

from __future__ import annotations

import fcntl
import json
import os
import platform
import posixpath
import re
import secrets
import shlex
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterator

from mobiperf.core.errors import StackError
from mobiperf.core.lifeline import owner_token

FORMAT = "mobiperf-undo-journal"
VERSION = 1
# MOBIPERF_JOURNAL_DIR and MOBIPERF_DEVICE_JOURNAL_DIR move them (tests: journals no other mobiperf recovers)
LOCAL_DIR = os.environ.get("MOBIPERF_JOURNAL_DIR") or "/var/tmp/mobiperf/journal"
DEVICE_DIRS = ("/data/local/tmp/mobiperf-journal", "/tmp/mobiperf-journal")  # the first whose parent exists
SUFFIX = ".jsonl"
KINDS = ("dir", "file", "mount", "loop", "sysfs", "bdi", "cgroup", "tracefs_instance", "blktrace", "process",
         "adb_connection")


class JournalError(StackError):
    """The journal cannot be written: the change it would describe is not made."""


def boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return ""


def owner_facts() -> dict[str, Any]:
    """Who writes a journal: enough to tell later whether that process still lives, and what it was doing."""
    return {"pid": os.getpid(), "host": platform.node(), "boot_id": boot_id(),
            "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "command": " ".join(_program() if i == 0 else a for i, a in enumerate(sys.argv))[:300]}


def _program() -> str:
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"
    return "mobiperf" if name in ("__main__.py", "mobiperf") else name


class UndoJournal:
    """One process's journal on one target. record() before a change, update() with what it learned, done() after
    the change was undone. Thread-safe; every method raises JournalError if the journal cannot be written."""

    def __init__(self, transport, local_dir: str = LOCAL_DIR):
        self.transport = transport
        self.local = transport.is_local
        self.local_dir = local_dir
        self._lock = threading.Lock()
        self._next_id = 1
        self._pending: set[int] = set()
        self.path: str | None = None      # the journal file on the target, while one is open
        self._fd: int | None = None       # local: the journal itself; adb: the lock file on this host
        self._lock_path: str | None = None
        self._device_dir: str | None = None

    @property
    def pending(self) -> set[int]:
        return set(self._pending)

    def record(self, kind: str, **fields: Any) -> int:
        """Write down a change about to be made; returns its entry id."""
        if kind not in KINDS:
            raise ValueError(f"unknown journal entry kind {kind!r}")
        with self._lock:
            if self.path is None:
                self._open()
            entry = self._next_id
            self._next_id += 1
            self._append({"id": entry, "kind": kind, **fields})
            self._pending.add(entry)
            return entry

    @contextmanager
    def attempt(self, kind: str, **fields: Any) -> Iterator[int]:
        """record() around a block that makes the change: if the block fails, the change is taken as not made
        (the block cleans up after itself), and the entry is done."""
        entry = self.record(kind, **fields)
        try:
            yield entry
        except BaseException:
            self.done(entry)
            raise

    def update(self, entry: int, **fields: Any) -> None:
        with self._lock:
            if entry in self._pending:
                self._append({"update": entry, **fields})

    def done(self, entry: int | None) -> None:
        """The change is undone (or was never made); the journal goes when nothing is left."""
        with self._lock:
            if entry not in self._pending:
                return
            self._append({"done": entry})
            self._pending.discard(entry)
            if not self._pending:
                self._close()

    def inheritable_lock(self) -> int:
        """The descriptor holding this journal's lock, made inheritable, for a process that must outlive us (pass
        it in pass_fds): while that process or we run, the journal's owner lives. Local journals only."""
        with self._lock:
            if not self.local or self._fd is None:
                raise JournalError("only an open local journal has a lock a process can inherit")
            os.set_inheritable(self._fd, True)
            return self._fd

    # --- the file ---

    def _open(self) -> None:
        name = f"{os.getpid()}-{secrets.token_hex(4)}"
        header = {"journal": FORMAT, "version": VERSION, "target": self.transport.name, "token": owner_token(),
                  "owner": owner_facts()}
        try:
            os.makedirs(self.local_dir, exist_ok=True)
            if self.local:
                self.path = f"{self.local_dir}/{name}{SUFFIX}"
                self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
                fcntl.flock(self._fd, fcntl.LOCK_EX)
            else:
                self._lock_path = f"{self.local_dir}/{name}.lock"
                self._fd = os.open(self._lock_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                fcntl.flock(self._fd, fcntl.LOCK_EX)
                directory = self.device_dir()
                self.path = f"{directory}/{name}{SUFFIX}"
                header["lock"] = self._lock_path
                header["pid_dir"] = f"{directory}/{owner_token()}.pids"
                d = shlex.quote(directory)
                self._run(f"[ -d {d} ] || {{ mkdir -p {d} && chmod 1777 {d}; }}; [ -w {d} ]")
            self._append(header)
        except (OSError, StackError) as e:
            self._abandon()
            raise JournalError(f"cannot start the undo journal ({e}); nothing was changed") from None
        if not self.local:
            self.transport.pid_dir = header["pid_dir"]  # AdbProcess writes its pid files there
        else:
            _fsync_dir(self.local_dir)

    def _abandon(self) -> None:
        """A journal that could not be started leaves nothing behind."""
        for path in (self.path if self.local else None, self._lock_path):
            if path:
                try:
                    os.unlink(path)
                except OSError:
                    pass
        self._release()

    def device_dir(self) -> str:
        if self._device_dir is None:
            self._device_dir = device_journal_dir(self.transport)
        return self._device_dir

    def _append(self, line: dict[str, Any]) -> None:
        text = json.dumps(line, separators=(",", ":"), default=str) + "\n"
        try:
            if self.local:
                os.write(self._fd, text.encode())
                os.fsync(self._fd)
            else:
                self._run(f"printf '%s' {shlex.quote(text)} >> {shlex.quote(self.path)}")
        except (OSError, StackError) as e:
            raise JournalError(f"cannot write the undo journal {self.path}: {e}") from None

    def _run(self, script: str) -> None:
        from mobiperf.core.errors import TargetError

        try:
            done = self.transport.run(["sh", "-c", script], timeout=30)
        except TargetError as e:
            raise JournalError(str(e)) from None
        if done.returncode != 0:
            raise JournalError(done.stderr.decode(errors="replace").strip() or f"exit status {done.returncode}")

    def _close(self) -> None:
        """Nothing is left to undo: the journal goes (unlinked before it is unlocked, so nobody takes it over)."""
        try:
            if self.local:
                os.unlink(self.path)
            else:
                pid_dir = self.transport.pid_dir
                extra = f"; rm -rf {shlex.quote(pid_dir)}" if pid_dir else ""
                # the journals' directory goes with the last journal in it: nothing of ours stays on a device
                extra += f"; rmdir {shlex.quote(posixpath.dirname(self.path))} 2>/dev/null; true"
                self._run(f"rm -f {shlex.quote(self.path)}{extra}")
                os.unlink(self._lock_path)
        except (OSError, StackError):
            pass  # an empty journal left behind is harmless: the next recovery finds nothing to undo in it
        self._release()

    def _release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
        self._fd = None
        self.path = None
        self._lock_path = None


# The tracefs instances mobiperf makes are named after their owner's pid, so that one found without a journal can
# be judged (leftovers.orphan_instances) and a live owner's told apart.
INSTANCE_NAME = re.compile(r"mobiperf-(\d+)-[0-9a-f]{10}")


def new_instance_name() -> str:
    """A name for a tracefs instance of this process (INSTANCE_NAME)."""
    return f"mobiperf-{os.getpid()}-{secrets.token_hex(5)}"


def device_journal_dir(transport) -> str:
    """Where the journals are on an adb device: under /data/local/tmp on a phone, else under /tmp."""
    if os.environ.get("MOBIPERF_DEVICE_JOURNAL_DIR"):
        return os.environ["MOBIPERF_DEVICE_JOURNAL_DIR"]
    parents = " ".join(shlex.quote(os.path.dirname(d)) for d in DEVICE_DIRS)
    done = transport.run(["sh", "-c", f"for d in {parents}; do [ -d \"$d\" ] && echo \"$d\" && break; done; true"],
                         timeout=30)
    found = done.text.strip()
    for directory in DEVICE_DIRS:
        if os.path.dirname(directory) == found:
            return directory
    return DEVICE_DIRS[-1]


def _fsync_dir(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# --- one journal per process and target ---

_journals: dict[tuple[int, str], UndoJournal] = {}
_registry_lock = threading.Lock()


def journal_for(transport) -> UndoJournal:
    """The journal of this process on the transport's target (a forked child gets its own)."""
    key = (os.getpid(), transport.name)
    with _registry_lock:
        if key not in _journals:
            _journals[key] = UndoJournal(transport)
        return _journals[key]


def local_journal() -> UndoJournal:
    from mobiperf.target.transport import LocalTransport

    return journal_for(LocalTransport())


# --- reading (recovery) ---

@dataclass
class JournalState:
    """What a journal file says: its header, and the changes not marked done (oldest first)."""

    path: str
    header: dict[str, Any]
    pending: list[dict[str, Any]] = field(default_factory=list)
    torn: bool = False   # the last line was cut (the owner died while writing it)

    @property
    def owner(self) -> dict[str, Any]:
        return self.header.get("owner", {})

    @property
    def token(self) -> str | None:
        return self.header.get("token")


def parse_journal(path: str, text: str) -> JournalState:
    """The state a journal's text describes; ValueError if it is not a journal at all."""
    lines = text.split("\n")
    header: dict[str, Any] | None = None
    entries: dict[int, dict[str, Any]] = {}
    torn = False
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError:
            if i >= len(lines) - 2:  # the last line, cut short
                torn = True
                continue
            raise ValueError(f"{path}: line {i + 1} is not JSON") from None
        if header is None:
            if item.get("journal") != FORMAT:
                raise ValueError(f"{path} is not a mobiperf undo journal")
            header = item
        elif "id" in item and "kind" in item:
            entries[item["id"]] = item
        elif "update" in item and item["update"] in entries:
            entries[item["update"]].update({k: v for k, v in item.items() if k != "update"})
        elif "done" in item:
            entries.pop(item["done"], None)
    if header is None:
        raise ValueError(f"{path} is empty")
    return JournalState(path, header, [entries[k] for k in sorted(entries)], torn)
