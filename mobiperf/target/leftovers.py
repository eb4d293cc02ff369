"""Leftovers: the changes of mobiperf processes that died without undoing them, found through their undo journals.

`find_leftovers(transport)` reads every journal on the target and keeps those whose owner is dead: locally a
journal its owner no longer holds locked; over adb a journal written from this host whose lock file here is free
(or from an earlier boot of this host). A journal from another host cannot be judged and is listed as such.
Each dead journal comes with what is really still in place: its helpers still running (by owner token), and its
changes that `mobiperf.target.undo_steps` finds in place (a change the owner undid, or died before making, is not).

`undo_leftovers()` ends the helpers, then undoes the changes newest first (unmount before detaching the loop
device under it, restore a value before removing its directory), marks each one done in the journal as it goes,
and removes the journal once nothing is left. A change that cannot be undone stays in the journal for the next
attempt. The recoverer holds the journal's lock meanwhile, so two recoverers never undo the same journal.

A tracefs instance outlives a journal that was lost with its directory (a killed run's scratch space wiped, a
test device's root removed): on this host, an instance named as mobiperf names them (mobiperf-PID-ID) whose PID is
gone is found without a journal (`orphan_instances`) and handled as a dead journal of one change, so that tracing
nobody reads does not go on taxing every later run.

An adb journal's lock file stays on this host when its run could not reach the device at the end (the phone went
away, a virtual phone was killed): once nobody holds it, it proves nothing (a journal without its lock file is
judged dead all the same), so every recovery removes such free lock files (`forget_free_locks`), on any target.

`recover()` is what `mobiperf run` and `mobiperf probe` call first, and `mobiperf doctor` with or without --fix.
"""

from __future__ import annotations

import fcntl
import json
import os
import platform
import posixpath
import shlex
from dataclasses import dataclass, field
from typing import Callable

from mobiperf.target import undo_steps
from mobiperf.core.errors import MobiperfError
from mobiperf.target.undo_journal import (INSTANCE_NAME, LOCAL_DIR, SUFFIX, JournalState, boot_id, device_journal_dir,
                                          parse_journal)


@dataclass
class DeadJournal:
    """The journal of a process that is gone, with what of its changes is still in place."""

    state: JournalState
    verdict: str                                   # "dead", or "other host" (cannot be judged from here)
    processes: dict[int, str] = field(default_factory=dict)
    found: list[tuple[dict, str]] = field(default_factory=list)   # (entry, what is still there)
    pid_files: list[str] = field(default_factory=list)
    lock_fd: int | None = None                     # held while we look at it and undo it

    @property
    def empty(self) -> bool:
        return not (self.processes or self.found)

    def as_dict(self) -> dict:
        return {"journal": self.state.path, "verdict": self.verdict, "owner": self.state.owner,
                "token": self.state.token, "torn": self.state.torn,
                "processes": [{"pid": p, "name": n} for p, n in sorted(self.processes.items())],
                "changes": [{**entry, "still": what} for entry, what in self.found],
                "pending_entries": len(self.state.pending)}

    def release(self) -> None:
        if self.lock_fd is not None:
            os.close(self.lock_fd)
            self.lock_fd = None


def find_leftovers(transport, *, other_hosts: bool = False, local_dir: str = LOCAL_DIR) -> list[DeadJournal]:
    """The dead journals on the target, each checked for what is still in place (locks held until release())."""
    dead = []
    for path, text in _journal_texts(transport, local_dir):
        try:
            state = parse_journal(path, text)
        except ValueError:
            continue  # not ours to judge: a file that is not a journal
        verdict, lock_fd = _judge_owner(transport, state, other_hosts)
        if verdict is None:
            continue  # the owner lives (or another recoverer is at it)
        found = DeadJournal(state, verdict, lock_fd=lock_fd)
        try:
            if state.token:
                found.processes = undo_steps.owned_processes(transport, state.token,
                                                             state.header.get("pid_dir"))
            found.pid_files = undo_steps.pid_files(transport, state.header.get("pid_dir"))
            for entry in state.pending:
                what = undo_steps.still_there(transport, entry)
                if what is not None:
                    found.found.append((entry, what))
        except BaseException:
            found.release()
            raise
        dead.append(found)
    return dead + orphan_instances(transport)


_TRACEFS_ROOTS = ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")


def orphan_instances(transport) -> list[DeadJournal]:
    """This host's tracefs instances of mobiperf processes that are gone, each as a journal-less DeadJournal (its
    path empty). Not over adb: a device's instance names carry the pids of the host that made them."""
    if not transport.is_local:
        return []
    found, seen = [], set()
    for root in _TRACEFS_ROOTS:
        try:
            names = os.listdir(f"{root}/instances")
        except OSError:
            continue
        for name in names:
            match = INSTANCE_NAME.fullmatch(name)
            if not match or name in seen or os.path.exists(f"/proc/{match.group(1)}"):
                continue
            seen.add(name)   # the same instance when debugfs shows tracefs too
            path = f"{root}/instances/{name}"
            entry = {"id": 0, "kind": "tracefs_instance", "path": path}
            state = JournalState("", {"owner": {"pid": int(match.group(1))}}, [entry])
            found.append(DeadJournal(state, "dead", found=[(entry, "exists")]))
    return found


def undo_leftovers(transport, dead: DeadJournal) -> list[str]:
    """End its helpers and undo its changes, newest first; returns what could not be undone (empty: all)."""
    state = dead.state
    failures = []
    try:
        if state.token:
            undo_steps.end_owned_processes(transport, state.token, state.header.get("pid_dir"))
        undone = []
        for entry in reversed(state.pending):
            try:
                if undo_steps.still_there(transport, entry) is not None:
                    undo_steps.undo(transport, entry)
                undone.append(entry["id"])
            except MobiperfError as e:
                failures.append(f"{undo_steps.describe(entry)}: {e}")
        _mark_done(transport, state, undone, remove=not failures)
    finally:
        dead.release()
    return failures


def recover(transport, *, fix: bool = True, other_hosts: bool = False, say: Callable[[str], None] = print,
            local_dir: str = LOCAL_DIR) -> list[DeadJournal]:
    """Report (and with fix, undo) what dead mobiperf processes left on the target; returns the dead journals.
    Journals whose changes are all gone already are removed without a word."""
    forget_free_locks(local_dir)
    dead = find_leftovers(transport, other_hosts=other_hosts, local_dir=local_dir)
    for item in dead:
        if item.empty and item.verdict == "dead":
            _mark_done(transport, item.state, [e["id"] for e in item.state.pending], remove=True)
            item.release()
            continue
        for line in describe_leftovers(item):
            say(line)
        if not fix or item.verdict != "dead":
            item.release()
            continue
        failures = undo_leftovers(transport, item)
        for failure in failures:
            say(f"  could not undo: {failure}")
        say(f"  undone: {len(item.found) - len(failures)} of {len(item.found)} changes"
            + (f", {len(item.processes)} processes ended" if item.processes else "")
            + ("" if not failures else "; the journal keeps the rest (mobiperf doctor --fix tries again)"))
    return dead


LOCK_GRACE_S = 60.0   # a lock file younger than this may be one its owner has created and not yet locked


def forget_free_locks(local_dir: str = LOCAL_DIR) -> list[str]:
    """Remove this host's adb journal lock files that nobody holds (older than LOCK_GRACE_S); their names."""
    import time

    removed = []
    try:
        names = sorted(n for n in os.listdir(local_dir) if n.endswith(".lock"))
    except OSError:
        return removed
    for name in names:
        path = f"{local_dir}/{name}"
        try:
            if time.time() - os.stat(path).st_mtime < LOCK_GRACE_S:
                continue
        except OSError:
            continue
        verdict, fd = _lock_if_free(path)
        if verdict == "dead" and fd is not None:
            try:
                os.unlink(path)   # unlinked while we hold it: nobody can take it over meanwhile
                removed.append(name)
            except OSError:
                pass
            finally:
                os.close(fd)
    return removed


def describe_leftovers(item: DeadJournal) -> list[str]:
    owner = item.state.owner
    who = (f"mobiperf pid {owner.get('pid')} ({'killed or crashed' if item.verdict == 'dead' else item.verdict}"
           f"; started {owner.get('started', '?')}: {owner.get('command', '?')})")
    lines = [f"mobiperf: leftovers of {who}, journal {item.state.path}:" if item.state.path else
             f"mobiperf: leftovers of mobiperf pid {owner.get('pid')} (gone, its journal lost with it):"]
    if item.processes:
        lines.append("  processes " + ", ".join(f"{pid} ({name})" for pid, name in sorted(item.processes.items())))
    for entry, what in item.found:
        lines.append(f"  {undo_steps.describe(entry)}: {what}")
    if item.verdict != "dead":
        lines.append(f"  left alone: written from host {owner.get('host')}, whose processes cannot be checked "
                     "from here (mobiperf doctor --fix --other-hosts undoes it)")
    return lines


# --- the journals on a target ---

def _journal_texts(transport, local_dir: str) -> list[tuple[str, str]]:
    if transport.is_local:
        out = []
        try:
            names = sorted(os.listdir(local_dir))
        except OSError:
            return []
        for name in names:
            if name.endswith(SUFFIX):
                try:
                    with open(f"{local_dir}/{name}") as f:
                        out.append((f"{local_dir}/{name}", f.read()))
                except OSError:
                    continue
        return out
    directory = device_journal_dir(transport)
    # One call: every journal, each introduced by a line with its path.
    script = (f"for f in {shlex.quote(directory)}/*{SUFFIX}; do [ -f \"$f\" ] || continue; "
              "printf '\\036%s\\n' \"$f\"; cat \"$f\"; echo; done; true")
    text = transport.run(["sh", "-c", script], timeout=60).text
    out = []
    for chunk in text.split("\x1e")[1:]:
        path, _, body = chunk.partition("\n")
        out.append((path.strip(), body))
    return out


def _judge_owner(transport, state: JournalState, other_hosts: bool) -> tuple[str | None, int | None]:
    """("dead", lock fd held) when the owner is gone, (None, None) while it lives, ("other host", None)."""
    if transport.is_local:
        return _lock_if_free(state.path)
    owner = state.owner
    if owner.get("host") != platform.node():
        return ("dead" if other_hosts else "other host"), None
    if owner.get("boot_id") and owner.get("boot_id") != boot_id():
        return "dead", None   # this host rebooted since: the owner is certainly gone
    lock = state.header.get("lock")
    if not lock or os.path.dirname(lock) != LOCAL_DIR:   # not written by a mobiperf of this host as it should be
        return ("dead" if other_hosts else "other host"), None
    if not os.path.exists(lock):
        return "dead", None
    return _lock_if_free(lock)


def _lock_if_free(path: str) -> tuple[str | None, int | None]:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return "dead", None
    except OSError:
        return None, None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None, None
    return "dead", fd


def _mark_done(transport, state: JournalState, ids: list[int], *, remove: bool) -> None:
    """Write the undone entries down (a crash of the recoverer then does not redo them); remove the journal when
    nothing is left, and with an adb journal its pid files there and its lock file on this host."""
    path = state.path
    if not path:   # a leftover found without a journal (orphan_instances)
        return
    if remove:
        transport.run(["rm", "-f", path], timeout=30)
        pid_dir = state.header.get("pid_dir")
        if not transport.is_local and pid_dir and pid_dir.endswith(".pids"):
            transport.run(["rm", "-rf", pid_dir], timeout=30)
        if not transport.is_local:  # the journals' directory goes with the last journal in it
            transport.run(["sh", "-c", f"rmdir {shlex.quote(posixpath.dirname(path))} 2>/dev/null; true"], timeout=30)
        lock = state.header.get("lock") if not transport.is_local else None
        if lock and os.path.dirname(lock) == LOCAL_DIR:  # never a path a device could choose
            try:
                os.unlink(lock)
            except OSError:
                pass
        return
    lines = "".join(json.dumps({"done": i}) + "\n" for i in ids)
    if not lines:
        return
    if transport.is_local:
        with open(path, "a") as f:
            f.write(lines)
            f.flush()
            os.fsync(f.fileno())
    else:
        transport.run(["sh", "-c", f"printf '%s' {shlex.quote(lines)} >> {shlex.quote(path)}"], timeout=30)
