"""Who did the IO and who was blocked, on real phone captures from elsewhere (tests/fixtures/README.md: two systrace
HTML files of Gracker/SystraceForBlog, not redistributable, read where a copy was placed), checked against counts
made without mobiperf: regular expressions over the HTML's ftrace lines.

- io_by_file's block bytes per thread (the owner of each request: on these traces, which have no FUSE or jbd2
  events, the thread that issued it) equal the bytes of the completed requests by the pid of their first
  block_rq_issue line (blk-mq re-dispatches a request from its kworkers: the later issue lines are theirs);
- the process each thread belongs to is the one systrace's own `ps` listing gives it;
- blocked's time per thread equals its time in D: from each sched_switch that left it in D to its next
  sched_waking/sched_wakeup line (or, where none came first, the sched_switch that put it back on a CPU: a
  wake-up the trace lost).
"""

from __future__ import annotations

import hashlib
import re
import zipfile
from pathlib import Path

import polars as pl
import pytest

from mobiperf.commands.ingest import ingest

pytestmark = pytest.mark.slow  # two ingests of 20 MB captures

UNLICENSED = Path(__file__).parents[1] / "fixtures" / "unlicensed"
CAPTURES = {  # file -> (SHA-256, path in Gracker/SystraceForBlog at commit 6c17c38)
    "Gracker-SystraceForBlog-wangzherongyao.html.zip":
        ("3bd3f43eed21a0a55a1d5ef9b6cca98ac1609c8ea082a175d50edc7f29c54471",
         "Android_Systrace-MainThread-RenderThread/wangzherongyao.html.zip"),
    "Gracker-SystraceForBlog-flutter-wanandroid.html.zip":
        ("425ccbcf6461f78c7e8ecd400613aaf6c6aeed3718e50282abf04b9064700754",
         "Android_Systrace-MainThread-RenderThread/flutter-wanandroid.html.zip"),
}
LINE = re.compile(r"^\s*(?P<comm>.*?)-(?P<pid>\d+)\s+(?:\(\s*[-\d]+\)\s+)?\[\d+\]\s+\S+\s+(?P<ts>\d+\.\d+): "
                  r"(?P<event>\w+): (?P<body>.*)$")
BLOCK = re.compile(r"^(\d+),(\d+) [A-Z]+ (?:\d+ )?\(\) (\d+) \+ (\d+) ")
SWITCH = re.compile(r"prev_pid=(\d+) prev_prio=-?\d+ prev_state=(\S+) ==> next_comm=.* next_pid=(\d+) ")
WAKE = re.compile(r" pid=(\d+) prio=")
THREAD_ROW = re.compile(r"^\S+\s+(\d+)\s+(\d+)\s+\S")


def _html(name: str) -> str:
    path = UNLICENSED / name
    if not path.exists():
        pytest.skip(f"the public capture is not on this machine: put {CAPTURES[name][1]} of "
                    f"github.com/Gracker/SystraceForBlog (commit 6c17c38) at {path} (tests/fixtures/README.md)")
    data = path.read_bytes()
    assert hashlib.sha256(data).hexdigest() == CAPTURES[name][0]
    with zipfile.ZipFile(path) as z:
        (member,) = z.namelist()
        return z.read(member).decode(errors="replace")


def independent_counts(html: str) -> dict:
    """Block bytes by issuing pid, D time by pid, and each thread's process from the `ps` thread listing."""
    first_issuer: dict[tuple, int] = {}
    block: dict[int, int] = {}
    d_since: dict[int, float] = {}
    d_time: dict[int, float] = {}
    process_of: dict[int, int] = {}
    for line in html.splitlines():
        m = LINE.match(line)
        if not m:
            row = THREAD_ROW.match(line)
            if row and len(line.split()) == 4:  # `USER PID TID CMD`
                process_of[int(row[2])] = int(row[1])
            elif row and len(line.split()) >= 9:  # `USER PID PPID VSZ RSS WCHAN PC S NAME`: a process, its own
                process_of.setdefault(int(row[1]), int(row[1]))
            continue
        event, body, ts = m["event"], m["body"], float(m["ts"])
        if event in ("block_rq_issue", "block_rq_complete") and (b := BLOCK.match(body)):
            key = b.groups()
            if event == "block_rq_issue":
                first_issuer.setdefault(key, int(m["pid"]))
            elif key in first_issuer:
                pid = first_issuer.pop(key)
                block[pid] = block.get(pid, 0) + int(key[3]) * 512
        elif event == "sched_switch" and (s := SWITCH.search(body)):
            back = int(s[3])
            if back in d_since:  # on a CPU again with no wake-up seen
                d_time[back] = d_time.get(back, 0.0) + ts - d_since.pop(back)
            if "D" in s[2].split("|"):
                d_since[int(s[1])] = ts
        elif event in ("sched_waking", "sched_wakeup") and (w := WAKE.search(body)):
            tid = int(w[1])
            if tid in d_since:
                d_time[tid] = d_time.get(tid, 0.0) + ts - d_since.pop(tid)
    return {"block": block, "d_time": d_time, "process_of": process_of}


@pytest.fixture(scope="module", params=sorted(CAPTURES))
def capture(request, tmp_path_factory):
    html = _html(request.param)
    run = ingest([UNLICENSED / request.param], tmp_path_factory.mktemp("who") / "run", report=False)
    return independent_counts(html), {t: run.read_table(t) for t in ("io_by_file", "blocked", "block_rq")}


def test_block_bytes_per_thread_equal_the_completions_by_issuing_pid(capture):
    expected, r = capture
    block = r["io_by_file"].filter(pl.col("layer") == "block").group_by("tid").agg(pl.col("bytes").sum())
    got = {tid: b for tid, b in block.iter_rows() if b}
    assert got == expected["block"]
    assert sum(got.values()) == int(r["block_rq"].filter(pl.col("complete_ts").is_not_null()
                                                         & pl.col("issue_ts").is_not_null())["size_bytes"].sum())


def test_each_thread_belongs_to_the_process_ps_listed(capture):
    expected, r = capture
    owners = r["io_by_file"].select("tid", "pid").unique()
    listed = [(tid, pid) for tid, pid in owners.iter_rows() if tid in expected["process_of"]]
    assert listed, "no thread of the block requests is in the ps listing"
    assert all(pid == expected["process_of"][tid] for tid, pid in listed)


def test_blocked_time_per_thread_equals_its_time_in_d(capture):
    expected, r = capture
    per = r["blocked"].group_by("tid").agg(pl.col("blocked_ns").sum())
    got = {tid: ns for tid, ns in per.iter_rows()}
    want = {tid: round(s * 1e9) for tid, s in expected["d_time"].items()}
    assert got.keys() == {t for t, ns in want.items() if ns > 0}
    worst = max(abs(got[t] - want[t]) / want[t] for t in got)
    assert worst <= 0.01, worst
    assert r["blocked"]["blocked_ns"].sum() > 1e8  # these phones spent whole seconds in D (display, IO, locks)
