"""The generator replaying a mobiperf replay script (reference-impl/mobibench/mb_rs_*.c), run for real in tmp_path:
every op does what the script says (checked with strace), threads wait where the script says, the open loop keeps
the think times and the closed loop does not, and a script that would write outside its root is refused before
anything is made."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from mobiperf.collectors.parse.mobibench_replay import parse_replay_result

EVERY_OP = """mobiperf-replay 1
threads 2
handles 4
need 1000000
dir data/db
file data/db/old.db 65536
file with%20space 10
c 0 0 open 0 rdwr,creat data/db/new.db
c 0 1000 pwrite 0 0 4096
c 0 1000 write 0 4096
c 0 0 fsync 0
c 1 0 open 1 rdonly data/db/old.db @0:4
c 1 0 pread 1 0 65536
c 1 0 read 1 100
c 1 0 lseek 1 0
c 1 0 readv 1 512
c 1 0 preadv 1 1024 512
c 1 0 close 1
c 0 500 rename data/db/new.db data/db/renamed
c 0 0 ftruncate 0 1000
c 0 0 fallocate 0 0 0 8192
c 0 0 fdatasync 0
c 0 0 dup 3 0
c 0 0 close 0
c 0 0 writev 3 100
c 0 0 pwritev 3 200 100
c 0 0 close 3
c 0 0 mkdir data/x
c 0 0 open 2 wronly,creat,trunc,dsync data/x/f
c 0 0 close 2
c 0 0 unlink data/x/f
c 0 0 rmdir data/x @1:7
c 0 0 unlink with%20space
"""
STRACED = "openat,close,read,write,readv,writev,pread64,pwrite64,preadv,pwritev,lseek,fsync,fdatasync,ftruncate," \
          "fallocate,dup,rename,renameat,renameat2,unlink,unlinkat,mkdir,mkdirat,rmdir"


@pytest.fixture
def mobibench(reference_binary):
    return reference_binary("mobibench")


def replay(binary: Path, tmp_path: Path, script: str, *args: str, strace: bool = False,
           timeout: float = 60) -> tuple[subprocess.CompletedProcess, Path, Path]:
    (tmp_path / "s.replay").write_text(script)
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    marker = tmp_path / "markers"
    marker.write_text("")
    cmd = [str(binary), "-p", str(work), "-g", str(tmp_path / "s.replay"), "--no-drop-caches", *args]
    if strace:
        cmd = ["strace", "-f", "-qq", "-e", f"trace={STRACED}", "-o", str(tmp_path / "strace.log"), *cmd]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env={"MOBIBENCH_TRACE_MARKER": str(marker), "PATH": "/usr/bin:/bin"})
    return proc, work, marker


def test_every_op_does_what_the_script_says(mobibench, tmp_path):
    proc, root, marker = replay(mobibench, tmp_path, EVERY_OP)
    assert proc.returncode == 0, proc.stderr
    files = {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file()}
    # new.db renamed, truncated to 1000 then fallocated to 8192; old.db as pre-created; the rest removed
    assert files == {"data/db/renamed": 8192, "data/db/old.db": 65536}
    assert (root / "data/db/old.db").read_bytes() == b"\xfe" * 65536     # written in full, not sparse
    assert not (root / "data/x").exists() and not (root / "with space").exists()
    figures = parse_replay_result(proc.stdout)
    assert figures["workload.calls"]["value"] == 26 and figures["workload.failed_calls"]["value"] == 0
    assert figures["workload.write_bytes"]["value"] == 4096 * 2 + 100 + 100
    assert figures["workload.read_bytes"]["value"] == 65536 + 100 + 512 + 512
    assert re.findall(r"mobibench: (\w+)", marker.read_text()) == [
        "replay_begin", "precreate_start", "precreate_end", "timed_start", "timed_end"]


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace (Debian package strace)")
def test_the_calls_issued_are_the_scripts(mobibench, tmp_path):
    proc, root, _ = replay(mobibench, tmp_path, EVERY_OP, strace=True)
    assert proc.returncode == 0, proc.stderr
    log = (tmp_path / "strace.log").read_text()
    timed = log[log.index("timed_start"):log.index("timed_end")]
    names = re.findall(r"^\d+\s+(\w+)\(", timed, re.M)
    counts = {n: names.count(n) for n in set(names)}
    assert counts.pop("write") == 2           # the script's write, and the timed_end marker's (timed_start's precedes)
    assert counts == {"openat": 3, "pwrite64": 1, "fsync": 1, "pread64": 1, "read": 1, "lseek": 1, "readv": 1,
                      "preadv": 1, "close": 4, "renameat": 1, "ftruncate": 1, "fallocate": 1, "fdatasync": 1,
                      "dup": 1, "writev": 1, "pwritev": 1, "mkdirat": 1, "unlinkat": 3}
    assert re.search(r'openat\(\d+, "data/x/f", O_WRONLY\|O_CREAT\|O_TRUNC\|O_DSYNC', timed)


def test_a_thread_waits_for_the_call_it_depends_on(mobibench, tmp_path):
    script = ("mobiperf-replay 1\nthreads 2\nhandles 2\nneed 100000\n"
              "c 0 0 open 0 rdwr,creat a\nc 0 150000000 fsync 0\n"          # fsync 150 ms into the replay
              "c 1 0 open 1 rdwr,creat b\nc 1 0 pwrite 1 0 10 @0:2\n")      # waits for it
    proc, _, _ = replay(mobibench, tmp_path, script, strace=True)
    assert proc.returncode == 0, proc.stderr
    waited = re.search(r"^Replay waits : 1 \(([\d.]+) sec\)$", proc.stdout, re.M)
    assert waited and float(waited[1]) >= 0.14, proc.stdout     # from its start to the fsync's end, 150 ms in
    lines = (tmp_path / "strace.log").read_text().splitlines()
    fsync = next(i for i, line in enumerate(lines) if re.search(r"fsync\(\d+.*= 0$|<\.\.\. fsync resumed", line))
    pwrite = next(i for i, line in enumerate(lines) if "pwrite64(" in line)
    assert pwrite > fsync


def test_open_loop_keeps_think_times_closed_loop_does_not(mobibench, tmp_path):
    script = "mobiperf-replay 1\nthreads 1\nhandles 1\nneed 100000\n" + "c 0 0 open 0 rdwr,creat a\n" + \
             "".join("c 0 100000000 pwrite 0 0 10\n" for _ in range(3)) + "c 0 0 close 0\n"
    proc, root, _ = replay(mobibench, tmp_path, script)
    elapsed = parse_replay_result(proc.stdout)["workload.elapsed"]["value"]
    assert 0.3 <= elapsed < 0.6, proc.stdout                          # three 100 ms thinks
    shutil.rmtree(root)
    proc, _, _ = replay(mobibench, tmp_path, script, "--replay-timing=closed")
    assert parse_replay_result(proc.stdout)["workload.elapsed"]["value"] < 0.1
    assert "Replay timing : closed" in proc.stdout


@pytest.mark.parametrize("line", [
    "c 0 0 open 0 rdwr,creat /etc/passwd", "c 0 0 open 0 rdwr,creat ../outside", "c 0 0 open 0 rdwr a/../../x",
    "c 0 0 open 0 rdwr a%2F..%2F..%2Fx", "c 0 0 open 0 rdwr a%00b", "c 0 0 unlink /proc/sys/vm/drop_caches",
    "c 0 0 rename a /tmp/x", "c 0 0 open 0 rdwr,sideways a", "c 0 0 chmod 0 a", "c 0 0 open 5 rdwr a",
    "c 0 0 open 0 rdwr a @3:1", "c 0 -5 open 0 rdwr a", "c 2 0 open 0 rdwr a"])
def test_a_hostile_or_broken_script_is_refused_before_anything_is_made(mobibench, tmp_path, line):
    before = sorted(p.name for p in tmp_path.iterdir())
    proc, root, _ = replay(mobibench, tmp_path, f"mobiperf-replay 1\nthreads 1\nhandles 1\n{line}\n")
    assert proc.returncode == 1
    assert re.search(r"s\.replay:4: not a replay line", proc.stderr), proc.stderr
    assert list(root.iterdir()) == [] and not Path("/tmp/x").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted({*before, "s.replay", "work", "markers"})


def test_a_replay_larger_than_the_free_space_says_so_before_it_starts(mobibench, tmp_path):
    script = "mobiperf-replay 1\nthreads 1\nhandles 1\nneed 4611686018427387904\nc 0 0 open 0 rdwr,creat a\n"
    proc, root, marker = replay(mobibench, tmp_path, script)
    assert proc.returncode == 1
    assert re.search(r"this replay writes up to 4611686018427387904 bytes \(.* MiB\) but .* has \d+ bytes "
                     r"\(.* MiB\) free; nothing was replayed", proc.stderr), proc.stderr
    assert list(root.iterdir()) == [] and marker.read_text() == ""


def test_an_empty_directory_is_the_root_else_a_new_one_in_it(mobibench, tmp_path):
    """A fresh stack's directory (empty but for lost+found) is the root itself, as it was for the recording;
    a directory with anything else in it gets mobiperf_replay, never an earlier replay's."""
    script = "mobiperf-replay 1\nthreads 1\nhandles 1\nneed 10\nc 0 0 open 0 rdwr,creat a\n"
    (tmp_path / "work" / "lost+found").mkdir(parents=True)
    proc, root, _ = replay(mobibench, tmp_path, script)
    assert proc.returncode == 0 and f"Write target : {root}\n" in proc.stdout
    assert sorted(p.name for p in root.iterdir()) == ["a", "lost+found"]
    proc, _, _ = replay(mobibench, tmp_path, script)
    assert proc.returncode == 0 and f"Write target : {root}/mobiperf_replay\n" in proc.stdout
    assert sorted(p.name for p in (root / "mobiperf_replay").iterdir()) == ["a"]
    proc, _, _ = replay(mobibench, tmp_path, script)
    assert proc.returncode == 1 and "a replay starts from an empty directory" in proc.stderr


def test_a_failed_call_is_said_and_the_replay_fails(mobibench, tmp_path):
    script = "mobiperf-replay 1\nthreads 1\nhandles 1\nneed 10\nc 0 0 open 0 rdonly missing\nc 0 0 read 0 10\n"
    proc, _, _ = replay(mobibench, tmp_path, script)
    assert proc.returncode == 1
    assert "replay line 5: open failed: No such file or directory" in proc.stderr
    assert "replay line 6: read failed: Bad file descriptor" in proc.stderr
    assert parse_replay_result(proc.stdout)["workload.failed_calls"]["value"] == 2
