"""What a mobiperf-side process that outlives its starter leaves (a virtual phone's QEMU, its adb connection): the
journal kinds `process` and `adb_connection`, a journal whose lock a long-lived process inherits, and the lock
files of adb journals that nobody holds any more."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from conftest import needs_root
from mobiperf.target.leftovers import LOCK_GRACE_S, find_leftovers, forget_free_locks, recover
from mobiperf.target.transport import LocalTransport

# Records a directory and a `sleep` it starts, then exits; with "hand" the sleep inherits the journal's lock.
STARTER = """
    import os, subprocess, sys
    from mobiperf.target.transport import LocalTransport
    from mobiperf.target.undo_journal import UndoJournal
    journals, made, hand = sys.argv[1], sys.argv[2], sys.argv[3] == "hand"
    journal = UndoJournal(LocalTransport(), local_dir=journals)
    journal.record("dir", path=made)
    os.makedirs(made)
    entry = journal.record("process", name="sleep for the test")
    keep = (journal.inheritable_lock(),) if hand else ()
    child = subprocess.Popen(["sleep", "300"], pass_fds=keep, start_new_session=True, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    start = int(open(f"/proc/{child.pid}/stat").read().rsplit(")", 1)[1].split()[19])
    journal.update(entry, pid=child.pid, start=start)
    print(child.pid, flush=True)
"""


def start_outliving(tmp_path: Path, hand: bool) -> tuple[Path, Path, int]:
    journals, made = tmp_path / "journals", tmp_path / "made"
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(STARTER), str(journals), str(made),
                           "hand" if hand else "keep"], capture_output=True, text=True, timeout=60, check=True)
    return journals, made, int(done.stdout)


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


@needs_root
def test_a_process_holding_the_journal_keeps_it_alive_and_its_death_frees_it(tmp_path):
    journals, made, pid = start_outliving(tmp_path, hand=True)
    try:
        # The starter is gone, but the sleep holds the journal's lock: its owner lives, nothing is touched.
        assert find_leftovers(LocalTransport(), local_dir=str(journals)) == []
        assert made.is_dir() and alive(pid)
    finally:
        os.kill(pid, 9)
    time.sleep(0.2)
    said: list[str] = []
    dead = recover(LocalTransport(), fix=True, say=said.append, local_dir=str(journals))
    assert len(dead) == 1 and [e["kind"] for e, _ in dead[0].found] == ["dir"]   # the process is gone already
    assert not made.exists() and list(journals.glob("*.jsonl")) == []
    assert any("dir " + str(made) in line for line in said)


@needs_root
def test_a_process_left_running_by_a_dead_owner_is_ended_by_pid_and_start_time(tmp_path):
    journals, made, pid = start_outliving(tmp_path, hand=False)   # nobody holds the journal: its owner is dead
    try:
        [dead] = find_leftovers(LocalTransport(), local_dir=str(journals))
        found = {e["kind"]: what for e, what in dead.found}
        dead.release()
        assert found == {"dir": "exists", "process": "running"}
        said: list[str] = []
        recover(LocalTransport(), fix=True, say=said.append, local_dir=str(journals))
        assert not alive(pid) and not made.exists()
        assert any(f"process {pid} (sleep for the test): running" in line for line in said)
    finally:
        if alive(pid):
            os.kill(pid, 9)


def test_a_reused_pid_is_not_the_process_the_journal_names(tmp_path):
    from mobiperf.target import undo_steps

    entry = {"kind": "process", "name": "x", "pid": os.getpid(), "start": 1}   # this pid, another start time
    assert undo_steps.still_there(LocalTransport(), entry) is None
    assert undo_steps.still_there(LocalTransport(), {"kind": "process", "name": "x"}) is None   # never started


def test_free_lock_files_of_dead_adb_journals_go_and_held_or_young_ones_stay(tmp_path):
    held, free, young = (tmp_path / f"{n}.lock" for n in ("1-held", "2-free", "3-young"))
    for path in (held, free, young):
        path.write_text("")
    old = time.time() - LOCK_GRACE_S - 5
    os.utime(held, (old, old))
    os.utime(free, (old, old))
    fd = os.open(held, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)     # a live mobiperf's lock
    try:
        assert forget_free_locks(str(tmp_path)) == ["2-free.lock"]
        assert sorted(p.name for p in tmp_path.iterdir()) == ["1-held.lock", "3-young.lock"]
    finally:
        os.close(fd)
