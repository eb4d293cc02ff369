"""The replay built from recorded system calls (analyzers/replay/): which calls, on which handles and files, with
what think times and waits between threads, against workloads written by hand whose true answer is known."""

from __future__ import annotations

import polars as pl
import pytest

from replay_calls import call, fdatasyncs, workload

from mobiperf.analyzers.replay.dependencies import cross_thread_waits
from mobiperf.analyzers.replay.script import script_text
from mobiperf.analyzers.replay.workload import build_from_syscalls

WORKDIR = "/w/data"


def test_100_fdatasyncs_of_4k_are_101_opens_and_closes_200_calls_and_400_kib():
    w = build_from_syscalls(workload(fdatasyncs(100, f"{WORKDIR}/f.db")), WORKDIR)
    assert w.counts() == {"close": 1, "fdatasync": 100, "open": 1, "pwrite": 100}
    assert w.nthreads == 1 and w.nhandles == 1 and w.waits.height == 0
    assert w.state.dirs == [] and w.state.files == []          # the recording made its file
    assert w.state.need_bytes == 100 * 4096 + 4096
    pw = w.calls.filter(pl.col("op") == "pwrite")
    assert pw["offset"].to_list() == [k * 4096 for k in range(100)] and set(pw["size"].to_list()) == {4096}
    # think: open ends at 1 us, first pwrite at 10 us; a sync 4 us after its write's end; the next write 25 us
    # after the sync's end (gap 50 us, write 1 us, 4 us, sync 20 us)
    thinks = w.calls["think_ns"].to_list()
    assert thinks[:4] == [0, 9000, 4000, 25000]
    text = script_text(w)
    assert text.startswith("mobiperf-replay 1\nthreads 1\nhandles 1\nneed 413696\n"
                           "c 0 0 open 0 rdwr,creat,cloexec f.db\nc 0 9000 pwrite 0 0 4096\nc 0 4000 fdatasync 0\n"
                           "c 0 25000 pwrite 0 4096 4096\n")
    assert text.endswith("c 0 25000 close 0\n") and text.count("\nc ") == 202


def test_what_is_left_out_is_counted_by_reason():
    rows = fdatasyncs(2, f"{WORKDIR}/f") + [
        call(500, 100, "openat", fd=-100, path="/usr/lib/libc.so.6", ret=4, flags="O_RDONLY|O_CLOEXEC"),
        call(501, 100, "read", fd=4, path="/usr/lib/libc.so.6", size=832, ret=832),
        call(502, 100, "mmap", fd=4, path="/usr/lib/libc.so.6", ret=1 << 40),
        call(503, 100, "write", fd=1, path="pipe:[77]", size=10, ret=10),
        call(504, 100, "openat", fd=-100, path=f"{WORKDIR}/missing", ret=-2, flags="O_RDONLY"),
        call(505, 100, "openat", fd=-100, path=f"{WORKDIR}/t", ret=5, flags="O_RDWR|O_CREAT|O_TMPFILE")]
    w = build_from_syscalls(workload(rows), WORKDIR)
    notes = dict(w.left_out)
    assert notes["outside the stack's directory (the host's files: libraries, the run's output)"] == 2
    assert notes["not replayable: mmap"] == 1 and notes["failed or unfinished"] == 1
    assert notes["not storage (/proc, /sys, /dev, pipes, sockets)"] == 1
    assert notes["open flag not replayed: O_TMPFILE"] == 1
    assert w.counts() == {"close": 1, "fdatasync": 2, "open": 2, "pwrite": 2}


def test_handles_follow_descriptions_not_numbers():
    a, b = f"{WORKDIR}/a", f"{WORKDIR}/b"
    rows = [
        call(0, 100, "openat", fd=-100, path=a, ret=3, flags="O_WRONLY|O_CREAT"),
        call(1, 200, "openat", fd=-100, path=b, ret=3, flags="O_WRONLY|O_CREAT"),   # another process, same number
        call(2, 100, "write", fd=3, path=a, size=10, ret=10),
        call(3, 200, "write", fd=3, path=b, size=20, ret=20),
        call(4, 100, "dup2", fd=3, path=a, ret=7),
        call(5, 100, "close", fd=3, path=a),
        call(6, 100, "write", fd=7, path=a, size=30, ret=30),                       # through the copy
        call(7, 200, "openat", fd=-100, path=f"{WORKDIR}/tmp", ret=4, flags="O_WRONLY|O_CREAT|O_TRUNC"),
        call(8, 200, "write", fd=4, path=f"{WORKDIR}/tmp", size=5, ret=5),
        call(9, 200, "rename", path=f"{WORKDIR}/tmp", new_path=f"{WORKDIR}/final"),
        call(10, 200, "fsync", fd=4, path=f"{WORKDIR}/final"),                      # strace -y's name after it
    ]
    w = build_from_syscalls(workload(rows), WORKDIR)
    c = w.calls.select("op", "path", "handle", "handle2")
    assert c.rows() == [
        ("open", "a", 0, None), ("open", "b", 1, None), ("write", "a", 0, None), ("write", "b", 1, None),
        ("dup", "a", 2, 0), ("close", "a", 0, None), ("write", "a", 2, None), ("open", "tmp", 3, None),
        ("write", "tmp", 3, None), ("rename", "tmp", None, None), ("fsync", "final", 3, None)]
    assert "dup 2 0" in script_text(w) and "rename tmp final" in script_text(w)
    assert w.nhandles == 4 and w.notes() == []


def test_a_log_without_y_names_descriptors_by_their_opens_and_proves_the_rest():
    rows = [
        call(0, 100, "openat", fd=-100, path="/data/app/base.apk", ret=38, flags="O_RDONLY"),
        call(1, 100, "pread64", fd=38, size=30, off=14024466, ret=30),              # no -y: no path
        call(2, 100, "close", fd=38),
        call(3, 100, "pread64", fd=28, size=30, off=38170752, ret=30),              # opened before the log
        call(4, 100, "read", fd=28, size=100, ret=100),
        call(5, 100, "write", fd=43, size=8, ret=8),                                # an eventfd: never proven
    ]
    w = build_from_syscalls(workload(rows), None)
    assert w.calls.select("op", "path").rows() == [
        ("open", "data/app/base.apk"), ("pread", "data/app/base.apk"), ("close", "data/app/base.apk"),
        ("open", "unnamed/fd-28"), ("pread", "unnamed/fd-28"), ("read", "unnamed/fd-28")]
    assert w.calls.filter(pl.col("is_synthetic"))["path"].to_list() == ["unnamed/fd-28"]
    # a pread does not move the position: the read is at 0
    assert dict(w.state.files) == {"data/app/base.apk": 14024496, "unnamed/fd-28": 38170782}
    assert dict(w.left_out)["no path (a descriptor strace did not name)"] == 1


def test_the_initial_state_is_what_the_first_references_need():
    rows = [
        call(0, 1, "openat", fd=-100, path=f"{WORKDIR}/old/db", ret=3, flags="O_RDWR"),       # existed
        call(1, 1, "pread64", fd=3, path=f"{WORKDIR}/old/db", size=4096, off=8192, ret=4096),  # size >= 12 KiB
        call(2, 1, "openat", fd=-100, path=f"{WORKDIR}/new", ret=4, flags="O_RDWR|O_CREAT"),   # made here
        call(3, 1, "read", fd=4, path=f"{WORKDIR}/new", size=100, ret=0),
        call(4, 1, "openat", fd=-100, path=f"{WORKDIR}/lock", ret=5, flags="O_RDWR|O_CREAT|O_EXCL"),
        call(5, 1, "mkdir", path=f"{WORKDIR}/d"),
        call(6, 1, "openat", fd=-100, path=f"{WORKDIR}/d/x", ret=6, flags="O_WRONLY|O_CREAT"),
        call(7, 1, "unlink", path=f"{WORKDIR}/gone"),                                           # existed
        call(8, 1, "openat", fd=-100, path=f"{WORKDIR}/old", ret=7, flags="O_RDONLY"),          # a directory
        call(9, 1, "fsync", fd=7, path=f"{WORKDIR}/old"),
        call(10, 1, "openat", fd=-100, path=f"{WORKDIR}/log", ret=8, flags="O_WRONLY|O_CREAT|O_APPEND"),
        call(11, 1, "write", fd=8, path=f"{WORKDIR}/log", size=100, ret=100),
        call(12, 1, "openat", fd=-100, path=f"{WORKDIR}/log", ret=9, flags="O_RDONLY"),
        call(13, 1, "read", fd=9, path=f"{WORKDIR}/log", size=4096, ret=100),   # what it wrote: no evidence
    ]
    w = build_from_syscalls(workload(rows), WORKDIR)
    assert w.state.dirs == ["old"]
    assert sorted(w.state.files) == [("gone", 0), ("old/db", 12288)]


@pytest.fixture
def two_threads():
    """Thread 1 writes and fsyncs f; thread 2 works on g, then opens f after the fsync returned."""
    f, g = f"{WORKDIR}/f", f"{WORKDIR}/g"
    return workload([
        call(0, 1, "openat", fd=-100, path=f, ret=3, flags="O_RDWR|O_CREAT"),
        call(10, 1, "pwrite64", fd=3, path=f, size=4096, off=0, ret=4096),
        call(20, 1, "fsync", fd=3, path=f, dur_us=80),                       # ends at 100 us
        call(50, 2, "openat", fd=-100, path=g, ret=4, flags="O_RDWR|O_CREAT"),
        call(150, 2, "pwrite64", fd=4, path=g, size=512, off=0, ret=512),    # after the fsync, another file
        call(200, 2, "openat", fd=-100, path=f, ret=5, flags="O_RDONLY"),    # after the fsync, its file
        call(210, 2, "pread64", fd=5, path=f, size=4096, off=0, ret=4096),
    ])


def test_file_mode_waits_on_the_same_file_only(two_threads):
    w = build_from_syscalls(two_threads, WORKDIR, dependencies="file")
    # thread 0 is pid 1; its fsync is its 3rd call: thread 1's open of f (its 3rd call) waits for 3 calls of 0
    assert w.waits.rows() == [(1, 2, 0, 3)]
    assert "c 1 49000 open 2 rdonly f @0:3" in script_text(w)   # 200 us - the write's end at 151


def test_all_by_default_and_none(two_threads):
    everything = build_from_syscalls(two_threads, WORKDIR)
    # the first call of thread 1 after thread 0's fsync, whatever its file, and its first call after thread 0's
    # open (which ended at 1 us) before that: its open of g at 50 us
    assert everything.waits.rows() == [(1, 0, 0, 1), (1, 1, 0, 3)]
    assert build_from_syscalls(two_threads, WORKDIR, dependencies="none").waits.height == 0


def test_a_handle_made_by_another_thread_is_waited_for():
    f = f"{WORKDIR}/f"
    w = build_from_syscalls(workload([
        call(0, 1, "openat", fd=-100, path=f, ret=3, flags="O_RDWR|O_CREAT", dur_us=5),
        call(30, 2, "pwrite64", fd=3, path=f, size=8, off=0, ret=8),        # a thread of the same process
    ]), WORKDIR, dependencies="none")
    assert w.waits.rows() == [(1, 0, 0, 1)]


def test_every_wait_points_to_a_call_that_ended_before_the_waiter_started():
    rows = []
    for k in range(60):  # four threads on two files, syncs and opens interleaved
        pid, path = 1 + k % 4, f"{WORKDIR}/f{k % 2}"
        t = k * 7.0
        rows += [call(t, pid, "openat", fd=-100, path=path, ret=10 + k, flags="O_RDWR|O_CREAT", dur_us=2),
                 call(t + 3, pid, "fdatasync", fd=10 + k, path=path, dur_us=(k % 5) * 3),
                 call(t + 5 + (k % 5) * 3, pid, "close", fd=10 + k, path=path)]
    rows.sort(key=lambda r: r["ts"])
    for mode in ("file", "all"):
        w = build_from_syscalls(workload(rows), WORKDIR, dependencies=mode)
        c = w.calls.select("thread", "index", "start_ns", "end_ns")
        joined = w.waits.join(c, on=["thread", "index"]).join(
            c.rename({"thread": "wait_thread", "index": "_i", "start_ns": "_s", "end_ns": "_e"}),
            left_on=["wait_thread", "wait_count"], right_on=["wait_thread", pl.col("_i") + 1])
        assert joined.height == w.waits.height > 0
        assert (joined["_e"] < joined["start_ns"]).all()
        assert (joined["thread"] != joined["wait_thread"]).all()


def test_an_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="dependency mode 'some'"):
        cross_thread_waits(pl.DataFrame({"thread": [0, 1]}), "some")


def test_a_cache_drop_orders_every_other_thread_in_every_mode():
    """mobibench's main thread drops the caches while its worker waits: the worker's next call waits for the
    drop's write (not only its open), whatever the mode."""
    rows = [call(0, 2, "openat", fd=-100, path=f"{WORKDIR}/db", ret=3, flags="O_RDWR|O_CREAT"),
            call(5, 1, "openat", fd=-100, path="/proc/sys/vm/drop_caches", ret=4, flags="O_WRONLY"),
            call(6, 1, "write", fd=4, path="/proc/sys/vm/drop_caches", size=2, ret=2, dur_us=400_000),
            call(400_010, 2, "pread64", fd=3, path=f"{WORKDIR}/db", size=100, off=0, ret=0)]
    for mode in ("all", "file"):
        w = build_from_syscalls(workload(rows), WORKDIR, dependencies=mode)
        assert (0, 1, 1, 2) in w.waits.rows(), mode       # the worker's pread waits for the main thread's 2 calls
