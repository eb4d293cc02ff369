"""The FUSE layer of a daemon that keeps no log of mobiperf's, from its threads' reads and writes of /dev/fuse
(collectors/parse/fuse_dev_calls.py), tied to the requesting thread by the wake-ups the kernel records.

A synthetic trace in the syscalls and sched_waking text formats (6.18's format files): the workload (mobibench,
tid 100) writes 4 KiB and fdatasyncs through a FUSE daemon (bindfs, tids 200-202, /dev/fuse on fd 5):
  - thread 200 sleeps in read(5); the workload's send wakes it; it reads the WRITE (4176 bytes), pwrites 4096
    bytes to the lower file (fd 7) and answers with 24 bytes, whose writev wakes the workload;
  - thread 201 is busy when the FSYNC comes: its next read returns it at once; it fdatasyncs fd 7 and answers;
  - thread 202 reads a third request and dies: no reply, ever.
"""

from __future__ import annotations

import json

import polars as pl

from mobiperf.analyzers.io_span import nest_calls
from mobiperf.collectors.parse import derive_tables, parse_raw_dir

US = 1_000
LINES = [  # (seconds after 10 s in us, comm-tid, event, body)
    (0, "bindfs-200", "sys_enter_read", "fd: 0x00000005, buf: 0x7f0000001000, count: 0x00101000"),
    (100, "mobibench-100", "sys_enter_pwrite64", "fd: 0x00000003, buf: 0x55d000, count: 0x00001000, pos: 0x0"),
    (105, "mobibench-100", "sched_waking", "comm=bindfs pid=200 prio=120 target_cpu=001"),
    (110, "bindfs-200", "sys_exit_read", "0x1050"),
    (112, "bindfs-200", "sys_enter_pwrite64", "fd: 0x00000007, buf: 0x7f0000001050, count: 0x00001000, pos: 0x0"),
    (140, "bindfs-200", "sys_exit_pwrite64", "0x1000"),
    (150, "bindfs-200", "sys_enter_writev", "fd: 0x00000005, vec: 0x7f0000002000, vlen: 0x00000002"),
    (152, "bindfs-200", "sched_waking", "comm=mobibench pid=100 prio=120 target_cpu=000"),
    (155, "bindfs-200", "sys_exit_writev", "0x18"),
    (160, "mobibench-100", "sys_exit_pwrite64", "0x1000"),
    (170, "mobibench-100", "sys_enter_fdatasync", "fd: 0x00000003"),
    (175, "bindfs-201", "sys_enter_read", "fd: 0x00000005, buf: 0x7f0000003000, count: 0x00101000"),
    (180, "bindfs-201", "sys_exit_read", "0x38"),
    (185, "bindfs-201", "sys_enter_fdatasync", "fd: 0x00000007"),
    (900, "bindfs-201", "sys_exit_fdatasync", "0x0"),
    (910, "bindfs-201", "sys_enter_writev", "fd: 0x00000005, vec: 0x7f0000004000, vlen: 0x00000001"),
    (912, "bindfs-201", "sched_waking", "comm=mobibench pid=100 prio=120 target_cpu=000"),
    (915, "bindfs-201", "sys_exit_writev", "0x10"),
    (920, "mobibench-100", "sys_exit_fdatasync", "0x0"),
    (950, "mobibench-100", "sys_enter_fsync", "fd: 0x00000003"),
    (960, "bindfs-202", "sys_enter_read", "fd: 0x00000005, buf: 0x7f0000005000, count: 0x00101000"),
    (965, "bindfs-202", "sys_exit_read", "0x38"),
]


def _raw(tmp_path, lines=LINES):
    raw = tmp_path / "raw"
    raw.mkdir()
    text = "".join(f"{comm:>16} [000] ..... {10 + t * 1e-6:12.6f}: {event}: {body}\n"
                   for t, comm, event, body in lines)
    (raw / "syscalls.txt").write_text(text)
    (raw / "tasks.json").write_text(json.dumps({"workload_pid": 100, "fuse_daemons": [
        {"layer": "bindfs", "pid": 200, "tids": [200, 201, 202], "fuse_fds": [5], "mountpoint": "/mnt/b"}]}))
    parsed = parse_raw_dir(raw, 0)
    derived, summary = derive_tables(parsed.tables, {0: parsed.summary})
    return parsed.tables, derived, summary["fuse_pairing"]


def test_requests_from_the_daemons_calls_tied_by_wake_ups(tmp_path):
    _, derived, summary = _raw(tmp_path)
    req = derived["fuse_req"].sort("send_ts")
    assert set(req["source"]) == {"dev_fuse_calls"} and req.height == 3
    write, fsync, lost = req.iter_rows(named=True)
    base = 10_000_000 * US
    # the WRITE: sent when the workload woke the sleeping daemon thread, answered when its reply began
    assert (write["opcode_name"], write["data_bytes"], write["pid"], write["comm"]) == ("FUSE_WRITE", 4096, 100,
                                                                                        "mobibench")
    assert (write["send_ts"], write["end_ts"], write["daemon_tid"]) == (base + 105 * US, base + 150 * US, 200)
    # the FSYNC: the busy thread read it at once (no wake-up): it starts at the read's return
    assert (fsync["send_ts"], fsync["end_ts"], fsync["pid"], fsync["daemon_tid"]) == (base + 180 * US,
                                                                                      base + 910 * US, 100, 201)
    assert fsync["opcode_name"] == "FUSE_?" and fsync["len_bytes"] == 56 and fsync["reply_len_bytes"] == 16
    # thread 202 read a request and died: kept, never answered, its requester unknown
    assert lost["end_ts"] is None and lost["daemon_tid"] is None and lost["pid"] is None
    assert summary["source"] == "dev_fuse_calls"
    assert summary["note"] == ("FUSE layer from the daemon's /dev/fuse reads and writes (bindfs): 3 requests, 2 "
                               "answered, 2 tied to their requesting thread by wake-ups")


def test_the_nest_is_the_same_whichever_source_made_the_fuse_layer(tmp_path):
    tables, derived, _ = _raw(tmp_path)
    spans = nest_calls(tables["syscall_io"], task_role=tables["task_role"], fuse_req=derived["fuse_req"])
    calls = spans.filter(pl.col("layer") == "syscall").select("call_id", "name")
    kids = spans.filter(pl.col("layer") != "syscall").join(calls.rename({"name": "call"}), on="call_id")
    by_call = kids.group_by("call").agg(pl.col("layer"), pl.col("name"))
    nest = {r["call"]: sorted(zip(r["layer"], r["name"])) for r in by_call.iter_rows(named=True)}
    # call > FUSE request > the daemon's own call into the lower file system
    assert nest["pwrite64"] == [("fs", "pwrite64"), ("fuse", "FUSE_WRITE")]
    assert nest["fdatasync"] == [("fs", "fdatasync"), ("fuse", "FUSE_?")]
    assert "fsync" not in nest  # its request was never answered and never tied: nothing is charged to it


def test_without_wake_ups_the_requests_are_kept_and_the_note_says_why(tmp_path):
    _, derived, summary = _raw(tmp_path, [ln for ln in LINES if ln[2] != "sched_waking"])
    req = derived["fuse_req"]
    assert req.height == 3 and req["pid"].is_null().all()
    assert summary["note"].endswith("0 tied to their requesting thread by wake-ups (no sched_waking "
                                    "events in the trace: none could be tied)")


def test_a_reply_that_woke_nobody_takes_the_thread_that_woke_the_daemon(tmp_path):
    """One CPU: the send wakes the daemon, which runs, answers, and only then the requester goes on (it never
    slept: the reply wakes nobody). The requester is the thread that woke the daemon out of its read."""
    lines = [
        (0, "bindfs-200", "sys_enter_read", "fd: 0x00000005, buf: 0x7f0000001000, count: 0x00101000"),
        (100, "mobibench-100", "sys_enter_fsync", "fd: 0x00000003"),
        (105, "mobibench-100", "sched_waking", "comm=bindfs pid=200 prio=120 target_cpu=000"),
        (110, "bindfs-200", "sys_exit_read", "0x38"),
        (150, "bindfs-200", "sys_enter_writev", "fd: 0x00000005, vec: 0x7f0000002000, vlen: 0x00000001"),
        (155, "bindfs-200", "sys_exit_writev", "0x10"),
        (160, "mobibench-100", "sys_exit_fsync", "0x0"),
        # a timer woke the daemon during a read that then got nothing it could tie: no call of the waker holds it
        (200, "bindfs-200", "sys_enter_read", "fd: 0x00000005, buf: 0x7f0000001000, count: 0x00101000"),
        (205, "kworker/0:1-9", "sched_waking", "comm=bindfs pid=200 prio=120 target_cpu=000"),
        (210, "bindfs-200", "sys_exit_read", "0x40"),
        (250, "bindfs-200", "sys_enter_writev", "fd: 0x00000005, vec: 0x7f0000002000, vlen: 0x00000001"),
        (255, "bindfs-200", "sys_exit_writev", "0x10"),
    ]
    _, derived, summary = _raw(tmp_path, lines)
    req = derived["fuse_req"].sort("send_ts")
    first, second = req.iter_rows(named=True)
    assert (first["pid"], first["comm"], first["send_ts"]) == (100, "mobibench", 10_000_105_000)
    assert second["pid"] is None and second["send_ts"] == 10_000_210_000
    assert summary["note"].endswith("2 requests, 2 answered, 1 tied to their requesting thread by wake-ups")
