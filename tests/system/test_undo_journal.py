"""The undo journal (written before each change, gone when nothing is left to undo), the judgement of its owner
(a journal its owner still holds locked is never touched), and `mobiperf doctor` undoing a dead owner's changes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import needs_root
from mobiperf.target.leftovers import find_leftovers, recover
from mobiperf.target.transport import LocalTransport
from mobiperf.target.undo_journal import JournalError, UndoJournal, parse_journal

REPO = Path(__file__).resolve().parents[2]
MOBIPERF = [sys.executable, "-m", "mobiperf"]


def private(tmp_path: Path) -> dict[str, str]:
    """Journals of the test's own: no other mobiperf on the machine undoes them before the test looks."""
    return dict(os.environ, MOBIPERF_JOURNAL_DIR=str(tmp_path / "journals"))


def test_a_journal_lives_exactly_as_long_as_there_is_something_to_undo(tmp_path):
    journal = UndoJournal(LocalTransport(), local_dir=str(tmp_path))
    assert list(tmp_path.iterdir()) == []          # nothing changed yet: no file
    a = journal.record("dir", path="/x/stack")
    b = journal.record("loop", image="/x/stack/img")
    journal.update(b, device="/dev/loop9")
    [path] = tmp_path.glob(f"{os.getpid()}-*.jsonl")
    state = parse_journal(str(path), path.read_text())
    assert state.header["owner"]["pid"] == os.getpid() and state.token.startswith(f"{os.getpid()}-")
    assert state.pending == [{"id": a, "kind": "dir", "path": "/x/stack"},
                             {"id": b, "kind": "loop", "image": "/x/stack/img", "device": "/dev/loop9"}]
    journal.done(b)
    assert [e["id"] for e in parse_journal(str(path), path.read_text()).pending] == [a]
    journal.done(a)
    assert not path.exists()                        # all undone: the journal goes
    journal.record("dir", path="/y")
    assert len(list(tmp_path.glob("*.jsonl"))) == 1  # and a later change starts a new one


def test_a_journal_that_cannot_be_written_refuses_the_change(tmp_path):
    (tmp_path / "not-a-dir").write_text("")
    journal = UndoJournal(LocalTransport(), local_dir=str(tmp_path / "not-a-dir" / "journal"))
    with pytest.raises(JournalError, match="cannot start the undo journal .*nothing was changed"):
        journal.record("dir", path="/x")


def test_parse_keeps_what_is_not_done_and_forgives_a_torn_last_line():
    header = json.dumps({"journal": "mobiperf-undo-journal", "version": 1, "token": "1-ab", "owner": {"pid": 1}})
    text = "\n".join([header, '{"id":1,"kind":"dir","path":"/a"}', '{"id":2,"kind":"mount","path":"/a/m"}',
                      '{"done":2}', '{"id":3,"kind":"sysfs","path":"/s","old":"none"}', '{"upd'])
    state = parse_journal("j", text)
    assert [e["id"] for e in state.pending] == [1, 3] and state.torn
    with pytest.raises(ValueError, match="line 2 is not JSON"):
        parse_journal("j", header + "\nnot json\n{}\n")
    with pytest.raises(ValueError, match="not a mobiperf undo journal"):
        parse_journal("j", '{"something": "else"}\n')


OWNER = """
    import sys, time, os
    from mobiperf.target.transport import LocalTransport
    from mobiperf.target.undo_journal import UndoJournal
    journal = UndoJournal(LocalTransport(), local_dir=sys.argv[1])
    journal.record("dir", path=sys.argv[2])
    os.makedirs(sys.argv[2] + "/inside")
    print("ready", flush=True)
    time.sleep(300)
"""


def test_a_live_owner_is_left_alone_and_a_dead_one_undone(tmp_path):
    journals, made = tmp_path / "journals", tmp_path / "made-by-the-owner"
    owner = subprocess.Popen([sys.executable, "-c", textwrap.dedent(OWNER), str(journals), str(made)],
                             stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert owner.stdout.readline() == "ready\n"
        assert find_leftovers(LocalTransport(), local_dir=str(journals)) == []   # it lives: its lock is held
    finally:
        owner.kill()
        owner.wait(10)
    said: list[str] = []
    dead = recover(LocalTransport(), fix=True, say=said.append, local_dir=str(journals))
    assert len(dead) == 1 and dead[0].state.owner["pid"] == owner.pid
    assert said[0].startswith(f"mobiperf: leftovers of mobiperf pid {owner.pid} (killed or crashed;")
    assert said[1:] == [f"  dir {made}: exists", "  undone: 1 of 1 changes"]
    assert not made.exists() and list(journals.iterdir()) == []


@needs_root
def test_doctor_reports_then_fixes_what_a_killed_process_left(tmp_path):
    """A process mounts a tmpfs through the journal, starts a helper, and is SIGKILLed."""
    mnt = tmp_path / "mnt"
    owner = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import sys, time, os
        from mobiperf.target.transport import LocalTransport
        from mobiperf.target.undo_journal import journal_for
        t = LocalTransport()
        j = journal_for(t)
        j.record("dir", path=sys.argv[1])
        os.makedirs(sys.argv[1])
        j.record("mount", path=sys.argv[1])
        t.run(["mount", "-t", "tmpfs", "tmpfs", sys.argv[1]]).check()
        helper = t.start(["sleep", "300"])
        print(helper.pid, flush=True)
        time.sleep(300)
    """), str(mnt)], stdout=subprocess.PIPE, text=True, cwd=REPO, env=private(tmp_path))
    try:
        helper = int(owner.stdout.readline())
    finally:
        owner.kill()
        owner.wait(10)
    assert mnt.is_mount()
    done = subprocess.run([*MOBIPERF, "doctor", "--format", "json"], capture_output=True, text=True, timeout=120,
                          env=private(tmp_path))
    assert done.returncode == 1, done.stderr
    found = [j for j in json.loads(done.stdout)["found"] if j["owner"]["pid"] == owner.pid]
    assert len(found) == 1
    assert [(c["kind"], c["path"], c["still"]) for c in found[0]["changes"]] == [
        ("dir", str(mnt), "exists"), ("mount", str(mnt), "mounted")]
    done = subprocess.run([*MOBIPERF, "doctor", "--fix"], capture_output=True, text=True, timeout=120,
                          env=private(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"mobiperf: leftovers of mobiperf pid {owner.pid}" in done.stderr
    assert done.stdout.startswith("local: clean now")
    assert not mnt.exists()
    assert not Path(f"/proc/{helper}").exists() or Path(f"/proc/{helper}/stat").read_text().split()[2] == "Z"


@needs_root
def test_probe_undoes_what_a_killed_process_left(tmp_path):
    made = tmp_path / "made-by-the-owner"
    owner = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import sys, time, os
        from mobiperf.target.transport import LocalTransport
        from mobiperf.target.undo_journal import journal_for
        journal_for(LocalTransport()).record("dir", path=sys.argv[1])
        os.makedirs(sys.argv[1])
        print("ready", flush=True)
        time.sleep(300)
    """), str(made)], stdout=subprocess.PIPE, text=True, cwd=REPO, env=private(tmp_path))
    try:
        assert owner.stdout.readline() == "ready\n"
    finally:
        owner.kill()
        owner.wait(10)
    done = subprocess.run([*MOBIPERF, "probe", "--format", "json"], capture_output=True, text=True, timeout=120,
                          env=private(tmp_path))
    assert done.returncode == 0 and json.loads(done.stdout)["is_root"] is True
    assert f"mobiperf: leftovers of mobiperf pid {owner.pid} (killed or crashed" in done.stderr
    assert f"  dir {made}: exists" in done.stderr and "undone: 1 of 1 changes" in done.stderr
    assert not made.exists()


@needs_root
@pytest.mark.skipif(not Path("/sys/kernel/tracing/instances").is_dir(), reason="needs tracefs instances")
def test_doctor_removes_a_tracefs_instance_whose_owner_and_journal_are_gone(tmp_path):
    """A journal lost with its directory (a test device's root removed) leaves an instance nobody would undo: it is
    found by its name, mobiperf-PID-ID, when PID is gone; a live process's instance is left alone."""
    gone = subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True, check=True).stdout.strip()
    instances = Path("/sys/kernel/tracing/instances")
    orphan, live = instances / f"mobiperf-{gone}-0123456789", instances / f"mobiperf-{os.getpid()}-abcdef0123"
    orphan.mkdir()
    live.mkdir()
    try:
        (orphan / "tracing_on").write_text("1")
        done = subprocess.run([*MOBIPERF, "doctor", "--format", "json"], capture_output=True, text=True,
                              timeout=120, env=private(tmp_path))
        found = {c["path"]: (j["owner"]["pid"], c["still"]) for j in json.loads(done.stdout)["found"]
                 for c in j["changes"]}
        assert found[str(orphan)] == (int(gone), "exists") and str(live) not in found
        done = subprocess.run([*MOBIPERF, "doctor", "--fix"], capture_output=True, text=True, timeout=120,
                              env=private(tmp_path))
        assert f"mobiperf: leftovers of mobiperf pid {gone} (gone, its journal lost with it):" in done.stderr
        assert not orphan.exists() and live.exists()
    finally:
        for path in (orphan, live):
            if path.exists():
                path.rmdir()
