"""Replays built from recordings (mobiperf replay's first half, no stack needed): a real strace recording of the
SQLite generator against counts taken from its log by a regex of this test's own, and the inputs a replay refuses
in one line: a block-only trace, a run whose system calls name no file, one larger than the partition."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from mobiperf.core.runstore import RunDir
from mobiperf.orchestration import pipeline
from mobiperf.orchestration.replay import load_source

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
MOBIPERF = [sys.executable, "-m", "mobiperf"]
NAMES = {"openat": "open", "pwrite64": "pwrite", "pread64": "pread", "fdatasync": "fdatasync", "close": "close",
         "ftruncate": "ftruncate", "unlink": "unlink"}


def analysed(name: str, tmp_path: Path) -> RunDir:
    dest = tmp_path / name
    shutil.copytree(FIXTURES / name, dest, ignore=shutil.ignore_patterns("expected"))
    for sub in ("tables", "results"):
        (dest / sub).mkdir(exist_ok=True)
    run = RunDir.open(dest)
    pipeline.analyze(run, reparse=True)
    return run


def counted_by_hand(log: str, workdir: str) -> tuple[Counter, int]:
    """(calls per replayed op, bytes written) on workdir and the files under it (SQLite opens and fsyncs the
    directory too), read off the strace log line by line: a call's file is its first argument's -y annotation
    (openat: the returned descriptor's, unlink: its path), a call split by <unfinished ...> is counted at its
    resumption, with the resumed line's return value."""
    calls, written, pending = Counter(), 0, {}
    inside = re.escape(workdir) + "[/>\"]"
    for line in log.splitlines():
        m = re.match(r"(\d+) [\d.]+ (<\.\.\. (\w+) resumed>)?(.*)$", line)
        pid, rest = m[1], m[4]
        if m[2]:
            name, head = pending.pop(pid, (None, ""))
            rest = head + rest
        else:
            call = re.match(r"(\w+)\(", rest)
            if not call:
                continue
            name = call[1]
            if "<unfinished ...>" in rest:
                pending[pid] = (name, rest)
                continue
        if name not in NAMES:
            continue
        ret = re.search(r"\) += (-?\d+)", rest)
        if not ret or int(ret[1]) < 0:
            continue
        if name == "openat":
            on_file = re.search(r"\) += \d+<" + inside, rest)
        elif name == "unlink":
            on_file = re.search(r'unlink\("' + inside, rest)
        else:
            on_file = re.match(r"\w+\(\d+<" + inside, rest)
        if on_file:
            calls[NAMES[name]] += 1
            written += int(ret[1]) if name == "pwrite64" else 0
    return calls, written


def test_a_recorded_sqlite_run_replays_every_call_on_its_files(tmp_path):
    run = analysed("golden/strace-sqlite-wal", tmp_path)
    workdir = run.read_meta()["repetitions"][0]["stack"]["workdir"]
    log = (run.path / "raw" / "rep0" / "strace.log").read_text()
    calls, written = counted_by_hand(log, workdir)
    source = load_source(run, "golden")
    replayed = Counter(source.workload.counts())
    # from the log: the journal's, the database's and the directory's
    assert calls["pwrite"] == 84 and calls["fdatasync"] == 19 and calls["open"] == 6
    # every call on the stack's files, and the three of the generator's cache drop (open, write "3\n", close)
    assert replayed == calls + Counter({"open": 1, "write": 1, "close": 1})
    assert source.original["syscall.write_bytes"] == written + 2
    assert source.workload.state.files == [] and source.workload.nthreads == 2
    assert any("outside the stack's directory" in n for n in source.workload.notes())


def test_a_block_only_trace_is_refused_in_one_line(tmp_path):
    done = subprocess.run([*MOBIPERF, "replay", str(FIXTURES / "blktrace" / "takeoverjp-sample.blktrace.0"),
                           "--stack", "ext4"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if line.startswith("mobiperf: error:")]
    assert len(lines) == 1 and "nothing to replay: no file-level events (it has block_rq" in lines[0]
    assert "system calls with paths, from strace, or Android's android_fs events" in lines[0]


@pytest.mark.parametrize("name,missing", [
    ("golden/rand4k-fsync", "no file-level events (it has block_rq, fsync_event"),
    ("layers/ext4-fdatasync", "its system calls carry no file paths"),
])
def test_a_run_without_a_file_level_record_is_refused(tmp_path, name, missing):
    run = analysed(name, tmp_path)
    done = subprocess.run([*MOBIPERF, "replay", str(run.path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and missing in done.stderr and done.stderr.count("\n") == 1, done.stderr


def test_a_replay_larger_than_the_partition_is_refused_before_anything_starts(tmp_path):
    log = tmp_path / "big.strace"
    lines = ['1 openat(AT_FDCWD, "/data/big", O_WRONLY|O_CREAT) = 3']
    lines += [f"1 pwrite64(3, \"\"..., 1048576, {k << 20}) = 1048576" for k in range(200)]
    log.write_text("\n".join(lines) + "\n")
    out = tmp_path / "replay"
    done = subprocess.run([*MOBIPERF, "replay", str(log), "--stack", "ext4", "--image-size", "64M", "-o", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert re.search(r"this replay writes up to 200\.0 MiB, more than the stack's 64 MiB partition can hold \(about "
                     r"57\.6 MiB free once formatted\); give --image-size larger", done.stderr), done.stderr
    assert not out.exists()


def test_hostile_paths_are_mapped_inside_the_root(tmp_path):
    log = tmp_path / "hostile.strace"
    log.write_text("\n".join([
        '1 openat(AT_FDCWD, "/../../../../tmp/evil", O_WRONLY|O_CREAT) = 3',
        '1 write(3, "x", 1) = 1',
        '1 openat(AT_FDCWD, "../../../escape", O_WRONLY|O_CREAT) = 4',
        '1 write(4, "x", 1) = 1',
        '1 rename("/data/a/../../../../etc/passwd", "/data/x") = 0',
        '1 mkdir("/..", 0777) = 0',
        '1 unlink("/proc/self/../../etc/shadow") = 0']) + "\n")
    script = tmp_path / "hostile.replay"
    done = subprocess.run([*MOBIPERF, "replay", str(log), "--write-script", str(script)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    calls = [line for line in script.read_text().splitlines() if line.startswith("c ")]
    assert [line.split(" ", 4)[3:] for line in calls] == [
        ["open", "0 wronly,creat tmp/evil"], ["write", "0 1"], ["open", "1 wronly,creat escape"], ["write", "1 1"],
        ["rename", "etc/passwd data/x"], ["unlink", "etc/shadow"]]      # mkdir("/..") is the root: it exists
    assert "left out or added: 2 calls on a relative path that climbed above its directory" in done.stdout
    assert "left out or added: 1 calls that would make, remove or rename the replay's root itself" in done.stdout
