"""Who did the IO and who waited, on a capture of this host whose true answer is known (tests/fixtures/who, see
capture.py there): two processes started together, `dd of=a.dat` (64 x 4 KiB, buffered, never synced) and
`dd of=b.dat conv=fsync` (64 x 4 KiB, then one fsync). Every expected figure is counted from the raw lines with
regular expressions, without mobiperf, or known from first principles:

  b.dat's writer   64 write calls of 4096 bytes and one fsync to b.dat; the block requests its own thread queued
                   (in the fsync) are its data, 64 x 4 KiB, and the journal blocks the jbd2 thread queued for the
                   commit that ended inside that fsync are the file's too: io_by_file's block bytes of b.dat
                   under that thread are their sum; its fsync's time is the kernel's sys_fsync enter -> exit
  a.dat's writer   64 write calls of 4096 bytes to a.dat and no block request of its own: a.dat's 256 KiB reach
                   the device later, by another task (the run's sync, or writeback), owned by that task
  blocked          the fsync'ing thread's time in D (sched_switch prev_state=D until its wake-up) equals blocked's,
                   within 1 %; the part of it inside its fsync or its own block requests (queue -> completion)
                   equals what blocked says it waited on in its nests (fs, journal, block)
"""

from __future__ import annotations

import lzma
import re
import shutil
from pathlib import Path

import polars as pl
import pytest

from mobiperf.core.runstore import RunDir
from mobiperf.orchestration import pipeline

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "who" / "two-writers"
HEAD = re.compile(r"^\s*(?P<comm>.*?)-(?P<pid>\d+)\s+(?:\(\s*[-\d]+\)\s+)?\[\d+\]\s+\S+\s+(?P<ts>\d+\.\d+): "
                  r"(?P<event>\w+): (?P<body>.*)$")
QUEUE = re.compile(r"^\d+,\d+ \S+ \d+ \+ (\d+) ")
FSYNC_LINE = re.compile(r"^\s*\S+-(\d+)\s+\[\d+\]\s+\S+\s+(\d+\.\d+): sys_fsync(?:\(| ->)")
# a write's start line, finished (`= 4096`) or not (`<unfinished ...>`, resumed on a later line): its size argument
STRACE_WRITE = re.compile(r"^(\d+) \S+ write\(\d+<(?P<path>[^>]*)>, .*, (?P<ret>\d+)(?:\) = \d+| <unfinished)")


def _ns(ts: str) -> int:
    secs, frac = ts.split(".")
    return int(secs) * 1_000_000_000 + int(frac.ljust(9, "0"))


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    dest = tmp_path_factory.mktemp("who") / "two-writers"
    shutil.copytree(FIX, dest)
    packed = dest / "raw" / "rep0" / "ftrace.txt.xz"
    (dest / "raw" / "rep0" / "ftrace.txt").write_bytes(lzma.decompress(packed.read_bytes()))
    packed.unlink()
    for sub in ("tables", "results"):
        (dest / sub).mkdir(exist_ok=True)
    rundir = RunDir.open(dest)
    return rundir, pipeline.analyze(rundir, reparse=True)


@pytest.fixture(scope="module")
def counted():
    """The figures counted from the raw lines (module docstring)."""
    raw = FIX / "raw" / "rep0"
    lines = [m for m in map(HEAD.match, lzma.decompress((raw / "ftrace.txt.xz").read_bytes()).decode().splitlines())
             if m]
    writes: dict[tuple[int, str], list[int]] = {}
    for line in (raw / "strace.log").read_text().splitlines():
        if (m := STRACE_WRITE.match(line)) and m.group("path").endswith(("/a.dat", "/b.dat")):
            writes.setdefault((int(m.group(1)), m.group("path").rsplit("/", 1)[-1]), []).append(int(m.group("ret")))
    syncer = next(pid for (pid, name) in writes if name == "b.dat")
    buffered = next(pid for (pid, name) in writes if name == "a.dat")
    enter = next(_ns(m["ts"]) for m in lines if m["event"] == "ext4_sync_file_enter" and int(m["pid"]) == syncer)
    leave = next(_ns(m["ts"]) for m in lines if m["event"] == "ext4_sync_file_exit" and int(m["pid"]) == syncer)
    own = sum(int(QUEUE.match(m["body"]).group(1)) * 512 for m in lines  # its writes (it also read 2 blocks)
              if m["event"] == "block_bio_queue" and int(m["pid"]) == syncer and "W" in m["body"].split()[1])
    starts = {m["body"]: _ns(m["ts"]) for m in lines if m["event"] == "jbd2_start_commit"}
    commit = next((_ns(m["ts"]), m["pid"]) for m in lines if m["event"] == "jbd2_end_commit"
                  and enter < _ns(m["ts"]) <= leave)
    began = max(t for t in starts.values() if t <= commit[0])
    journal = sum(int(QUEUE.match(m["body"]).group(1)) * 512 for m in lines if m["event"] == "block_bio_queue"
                  and m["pid"] == commit[1] and began <= _ns(m["ts"]) <= commit[0])
    calls = [_ns(m.group(2)) for m in map(FSYNC_LINE.match, (raw / "syscalls.txt").read_text().splitlines())
             if m and int(m.group(1)) == syncer]  # the kernel's sys_fsync(fd: 1) and sys_fsync -> 0x0
    windows = [(enter, leave), *_own_requests(lines, syncer)]
    d_time, d_in_fsync, d_in_nest, since = 0, 0, 0, None
    for m in lines:
        t, body = _ns(m["ts"]), m["body"]
        if m["event"] == "sched_switch":
            prev = int(re.search(r"prev_pid=(\d+)", body).group(1))
            nxt = int(re.search(r"next_pid=(\d+)", body).group(1))
            if nxt == syncer and since is not None:
                d_in_nest += _overlap(since, t, windows)
                d_time, d_in_fsync, since = _ended(d_time, d_in_fsync, since, t, enter, leave)
            if prev == syncer and "D" in re.search(r"prev_state=(\S+)", body).group(1).split("|"):
                since = t
        elif m["event"] in ("sched_waking", "sched_wakeup") and since is not None:
            if int(re.search(r" pid=(\d+)", body).group(1)) == syncer:
                d_in_nest += _overlap(since, t, windows)
                d_time, d_in_fsync, since = _ended(d_time, d_in_fsync, since, t, enter, leave)
    return {"syncer": syncer, "buffered": buffered, "writes": writes, "own": own, "journal": journal,
            "fsync_ns": calls[1] - calls[0], "d_time": d_time, "d_in_fsync": d_in_fsync, "d_in_nest": d_in_nest}


def _own_requests(lines, pid: int) -> list[tuple[int, int]]:
    """The windows of the thread's own block requests: its block_bio_queue to the next completion of that sector."""
    out, pending = [], {}
    for m in lines:
        if m["event"] == "block_bio_queue" and int(m["pid"]) == pid:
            pending[m["body"].split()[2]] = _ns(m["ts"])
        elif m["event"] == "block_rq_complete" and (sector := m["body"].split()[3]) in pending:
            out.append((pending.pop(sector), _ns(m["ts"])))
    return out


def _overlap(lo: int, hi: int, windows: list[tuple[int, int]]) -> int:
    """How long [lo, hi] overlaps the union of the windows."""
    covered, reach = 0, lo
    for a, b in sorted(windows):
        a, b = max(a, reach), min(b, hi)
        if b > a:
            covered += b - a
            reach = b
    return covered


def _ended(total: int, inside: int, since: int, t: int, lo: int, hi: int) -> tuple[int, int, None]:
    return total + t - since, inside + max(0, min(t, hi) - max(since, lo)), None


def test_the_fsyncing_writer_owns_its_calls_data_and_journal(run, counted):
    _, r = run
    c = counted
    assert [len(v) for v in c["writes"].values()] == [64, 64] and {sum(v) for v in c["writes"].values()} == {262144}
    assert c["own"] == 262144 and c["journal"] > 0
    mine = r["io_by_file"].filter((pl.col("tid") == c["syncer"]) & pl.col("path").str.ends_with("b.dat"))

    def one(layer: str, op: str) -> dict:
        got = mine.filter((pl.col("layer") == layer) & (pl.col("op") == op))
        assert got.height == 1, (layer, op, mine)
        return got.row(0, named=True)

    assert (one("syscall", "write")["requests"], one("syscall", "write")["bytes"]) == (64, 262144)
    assert one("syscall", "fsync")["requests"] == 1 and one("syscall", "fsync")["time_ns"] == c["fsync_ns"]
    assert one("block", "write")["bytes"] == c["own"] + c["journal"]
    assert one("journal", "jbd2_commit")["requests"] == 1
    assert set(mine["process"]) == {"dd"} and set(mine["pid"]) == {c["syncer"]} and set(mine["scope"]) == {"workload"}


def test_the_buffered_writer_owns_its_calls_and_its_data_is_written_back_by_another_task(run, counted):
    _, r = run
    c = counted
    a = r["io_by_file"].filter(pl.col("path").str.ends_with("a.dat"))  # the layout names it relative
    calls = a.filter((pl.col("layer") == "syscall") & (pl.col("op") == "write"))
    assert calls.select("tid", "requests", "bytes").rows() == [(c["buffered"], 64, 262144)]
    blocks = a.filter((pl.col("layer") == "block") & (pl.col("op") == "write"))
    assert int(blocks["bytes"].sum()) == 262144
    assert c["buffered"] not in set(blocks["tid"]) and set(blocks["scope"]) <= {"kernel"}


def test_every_data_request_has_its_file(run):
    _, r = run
    spans = r["io_span"].join(r["span_owner"], on=["rep", "span_id"], suffix="_owner")
    data = spans.filter((pl.col("layer") == "block") & (pl.col("region") == "data"))
    assert data.height and data["path_owner"].is_not_null().all()


def test_blocked_time_of_the_fsyncing_thread_is_its_time_in_d(run, counted):
    _, r = run
    c = counted
    mine = r["blocked"].filter(pl.col("tid") == c["syncer"])
    total = int(mine["blocked_ns"].sum())
    assert c["d_time"] > 0 and abs(total - c["d_time"]) <= 0.01 * c["d_time"], (total, c["d_time"])
    # what it waited on in its own nests (its fsync's sync_file, commit and requests, its own earlier reads):
    # its D time inside the fsync or its own block requests' windows, counted from the raw lines
    nest = int(mine.filter(pl.col("waited_on").is_in(["fs", "journal", "block"]))["blocked_ns"].sum())
    assert abs(nest - c["d_in_nest"]) <= 0.01 * c["d_in_nest"], (nest, c["d_in_nest"], mine)
    assert 0 < c["d_in_fsync"] < c["d_in_nest"]  # the known fsync's wait is part of it
