"""The parsers of who is who: the scheduler's and task events (parse/sched.py, its compiled scanner
sched_scan.py), the tgid column of ftrace text, systrace's process dump, a recording's /proc snapshots and inode
listings. Lines written from the kernels' TP_printk formats (sched.h, task.h; Android's sched_blocked_reason) and
from the outputs of ps, grep -H, head and ls -iR as they print."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from mobiperf.collectors.parse import sched
from mobiperf.collectors.parse.ftrace_text import parse_ftrace_text
from mobiperf.collectors.parse.inodes import parse_inode_listings
from mobiperf.collectors.parse.proc_snapshot import parse_proc_snapshots
from mobiperf.collectors.parse.process_dump import parse_process_dump

LINES = """\
# tracer: nop
 Jit thread pool-4711  ( 4690) [002] d..2  100.000100: sched_switch: prev_comm=Jit thread pool prev_pid=4711 prev_prio=120 prev_state=D ==> next_comm=swapper/2 next_pid=0 next_prio=120
          <idle>-0     (-----) [002] dNh3  100.000400: sched_waking: comm=Jit thread pool pid=4711 prio=120 target_cpu=002
          <idle>-0     (-----) [002] dNh3  100.000401: sched_blocked_reason: pid=4711 iowait=1 caller=wait_on_page_bit_common+0x1c0/0x3a8
          <idle>-0     (-----) [002] dNh4  100.000410: sched_wakeup: comm=Jit thread pool pid=4711 prio=120 success=1 target_cpu=002
          <idle>-0     (-----) [002] d..2  100.000500: sched_switch: prev_comm=swapper/2 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=Jit thread pool next_pid=4711 next_prio=120
    RenderThread-4712  ( 4690) [003] d..2  100.000600: sched_switch: prev_comm=RenderThread prev_pid=4712 prev_prio=110 prev_state=D|K ==> next_comm=kworker/3:1 next_pid=77 next_prio=120
     kworker/3:1-77    (   77) [003] d..2  100.000700: sched_switch: prev_comm=kworker/3:1 prev_pid=77 prev_prio=120 prev_state=R+ ==> next_comm=a=b c next_pid=901 next_prio=120
 com.example.not-4690  ( 4690) [001] ....  100.000800: task_newtask: pid=4713 comm=com.example.not clone_flags=3d0f00 oom_score_adj=0
 com.example.not-4713  ( 4690) [001] ....  100.000900: task_rename: pid=4713 oldcomm=com.example.not newcomm=SQLiteThread oom_score_adj=0
              sh-900   (  900) [000] ....  100.001000: task_newtask: pid=901 comm=sh clone_flags=1200011 oom_score_adj=0
"""


@pytest.fixture
def trace(tmp_path) -> Path:
    path = tmp_path / "trace.txt"
    path.write_text(LINES)
    return path


def test_switches_wakeups_and_blocked_reasons(trace):
    events = parse_ftrace_text(trace).events
    sw = events["sched_switch"]
    assert sw.select("prev_tid", "prev_comm", "prev_state", "next_tid", "next_comm").rows() == [
        (4711, "Jit thread pool", "D", 0, "swapper/2"), (0, "swapper/2", "R", 4711, "Jit thread pool"),
        (4712, "RenderThread", "D|K", 77, "kworker/3:1"), (77, "kworker/3:1", "R+", 901, "a=b c")]
    wake = events["sched_wakeup"]
    # the waker: the context the event ran in (the idle task here, an interrupt's wake-up)
    assert wake.select("tid", "comm", "waker_tid", "waker_comm", "event").rows() == [
        (4711, "Jit thread pool", 0, "<idle>", "waking"), (4711, "Jit thread pool", 0, "<idle>", "wakeup")]
    assert events["sched_blocked_reason"].select("tid", "is_io_wait", "caller").rows() == [
        (4711, True, "wait_on_page_bit_common+0x1c0/0x3a8")]


def test_the_compiled_scanner_reads_what_the_patterns_read(trace, monkeypatch):
    by_patterns = parse_ftrace_text(trace).events
    monkeypatch.setattr(sched, "SCAN_MIN_ROWS", 1)
    by_scanner = parse_ftrace_text(trace).events
    for table in ("sched_switch", "sched_wakeup"):
        assert_frame_equal(by_scanner[table], by_patterns[table])


def test_who_is_whose_thread_from_the_tgid_column_and_the_task_events(trace):
    for compiled in (False, True):
        task = parse_ftrace_text(trace, compiled=compiled).events["task"]
        column = dict(task.filter(pl.col("source") == "trace").select("tid", "pid").iter_rows())
        assert column == {4711: 4690, 4712: 4690, 77: 77, 4690: 4690, 4713: 4690, 900: 900}
        born = {r["tid"]: r for r in task.filter(pl.col("source") == "task_newtask").iter_rows(named=True)}
        # a thread (CLONE_THREAD) of its creator's process (the line's tgid where the parser kept it, else the
        # creator, for task_identity.py to follow), renamed; a process (no CLONE_THREAD) of its own
        assert born[4713]["pid"] == 4690 or (born[4713]["pid"], born[4713]["parent_tid"]) == (None, 4690)
        assert (born[4713]["thread"], born[901]["pid"], born[901]["parent_tid"]) == ("SQLiteThread", 901, None)


def test_systrace_process_dump(tmp_path):
    dump = tmp_path / "process_dump.txt"
    dump.write_text("PROCESS DUMP\n"
                    "USER           PID  PPID     VSZ    RSS WCHAN  PC S NAME                        COMM\n"
                    "root             2     0       0      0 kthreadd 0 S [kthreadd]                  2\n"
                    "u0_a157       1259  8162 1532720 307340 SyS_epoll_wait 0 S com.thl.fluwanandroid app_process32\n"
                    "USER           PID   TID CMD\n"
                    "u0_a157       1259  1259 l.fluwanandroid\n"
                    "u0_a157       1259  1309 1.io\n")
    rows = {r["tid"]: r for r in parse_process_dump(dump).iter_rows(named=True)}
    assert (rows[1309]["pid"], rows[1309]["thread"], rows[1309]["process"]) == (1259, "1.io", "com.thl.fluwanandroid")
    assert rows[2]["process"] == "kthreadd" and set(r["source"] for r in rows.values()) == {"ps"}


def test_proc_snapshots_and_inode_listings(tmp_path):
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "start-comm.txt").write_text("/proc/4690/task/4690/comm:com.example.not\n"
                                         "/proc/4690/task/4711/comm:SQLiteThread\n")
    (proc / "end-cmdline.bin").write_bytes(b"==> /proc/4690/cmdline <==\ncom.example.notes\x00\n"
                                           b"==> /proc/2/cmdline <==\n")
    rows = {r["tid"]: r for r in parse_proc_snapshots(proc).iter_rows(named=True)}
    assert (rows[4711]["pid"], rows[4711]["thread"], rows[4711]["process"]) == (4690, "SQLiteThread",
                                                                                  "com.example.notes")
    assert 2 not in rows  # a kernel thread has no command line and no comm line here
    (tmp_path / "inodes").mkdir()
    (tmp_path / "inodes" / "app.txt").write_text("/data/data/com.example.notes/:\n 131090 databases\n\n"
                                                 "/data/data/com.example.notes/databases:\n 131097 notes.db\n")
    listing = dict(parse_inode_listings(tmp_path).select("ino", "path").iter_rows())
    assert listing == {131090: "/data/data/com.example.notes/databases",
                       131097: "/data/data/com.example.notes/databases/notes.db"}
