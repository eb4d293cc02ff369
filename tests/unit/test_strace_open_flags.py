"""strace: every fd's open flags followed through open, dup, fcntl, threads, fork and exec, and the sync mode the
syscall layer gives each read and write from them; unlink and rename carry their (absolute) paths."""

from __future__ import annotations

import polars as pl
import pytest

from mobiperf.analyzers.syscall import classify_syscalls
from mobiperf.collectors.parse.fd_flags import flag_bits_of_names, flag_names
from mobiperf.collectors.parse.strace import parse_strace

# One process (100) with a thread (101, CLONE_FILES) and a forked child (102) that execs; line forms as
# strace 6.1 prints them with -f -ttt -T -y (fcntl F_SETFL O_SYNC and the F_GETFL reply are from this machine).
LOG = r"""100 1000.000001 openat(AT_FDCWD</w>, "db", O_WRONLY|O_CREAT|O_DSYNC|O_CLOEXEC, 0644) = 3</w/db> <0.000010>
100 1000.000002 pwrite64(3</w/db>, "x"..., 4096, 0) = 4096 <0.000100>
100 1000.000003 dup2(3</w/db>, 7) = 7</w/db> <0.000002>
100 1000.000004 write(7</w/db>, "x"..., 4096) = 4096 <0.000100>
100 1000.000005 openat(AT_FDCWD</w>, "log", O_WRONLY|O_CREAT|O_APPEND, 0644) = 4</w/log> <0.000010>
100 1000.000006 fcntl(4</w/log>, F_SETFL, O_WRONLY|O_SYNC|O_APPEND) = 0 <0.000002>
100 1000.000007 write(4</w/log>, "y"..., 512) = 512 <0.000005>
100 1000.000008 fcntl(7</w/db>, F_SETFL, O_RDONLY|O_DIRECT) = 0 <0.000002>
100 1000.000009 pwrite64(3</w/db>, "x"..., 4096, 4096) = 4096 <0.000100>
100 1000.000010 clone3({flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM, child_tid=0x7f, parent_tid=0x7f, exit_signal=0, stack=0x7f, stack_size=0x7fff00, tls=0x7f} => {parent_tid=[101]}, 88) = 101 <0.000030>
101 1000.000011 openat(AT_FDCWD</w>, "wal", O_RDWR|O_CREAT|O_SYNC, 0644) = 5</w/wal> <0.000010>
101 1000.000012 write(3</w/db>, "x"..., 4096) = 4096 <0.000100>
100 1000.000013 write(5</w/wal>, "z"..., 1024) = 1024 <0.000100>
100 1000.000014 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD <unfinished ...>
102 1000.000015 write(3</w/db>, "x"..., 4096) = 4096 <0.000100>
100 1000.000016 <... clone resumed>, child_tidptr=0x7f) = 102 <0.000020>
102 1000.000017 close(5</w/wal>) = 0 <0.000002>
100 1000.000018 write(5</w/wal>, "z"..., 1024) = 1024 <0.000100>
102 1000.000019 execve("/bin/tool", ["tool"], 0x7ffd /* 3 vars */) = 0 <0.000300>
102 1000.000020 write(3, "x"..., 10) = -1 EBADF (Bad file descriptor) <0.000002>
102 1000.000021 write(4</w/log>, "y"..., 10) = 10 <0.000002>
100 1000.000022 fcntl(1</w/out>, F_GETFL) = 0x8001 (flags O_WRONLY|O_LARGEFILE) <0.000002>
100 1000.000023 fcntl(1</w/out>, F_SETFL, O_WRONLY|O_DIRECT) = 0 <0.000002>
100 1000.000024 write(1</w/out>, "o"..., 512) = 512 <0.000002>
100 1000.000025 write(2</w/err>, "e"..., 5) = 5 <0.000002>
100 1000.000026 openat2(AT_FDCWD</w>, "raw", {flags=O_RDWR|O_DIRECT|O_CLOEXEC, resolve=0, mode=0}, 24) = 6</w/raw> <0.000010>
100 1000.000027 pread64(6</w/raw>, ""..., 4096, 0) = 4096 <0.000050>
100 1000.000028 creat("/w/new", 0644) = 8</w/new> <0.000010>
100 1000.000029 write(8</w/new>, "n"..., 100) = 100 <0.000002>
100 1000.000030 close(3</w/db>) = 0 <0.000002>
100 1000.000031 write(3, "x"..., 10) = -1 EBADF (Bad file descriptor) <0.000002>
100 1000.000032 write(7</w/db>, "x"..., 4096) = 4096 <0.000100>
100 1000.000033 fcntl(5</w/wal>, F_DUPFD_CLOEXEC, 10) = 10</w/wal> <0.000002>
100 1000.000034 write(10</w/wal>, "z"..., 1024) = 1024 <0.000100>
100 1000.000035 unlinkat(AT_FDCWD</w>, "db-journal", 0) = 0 <0.000010>
100 1000.000036 unlink("/w/other-journal") = 0 <0.000010>
100 1000.000037 rename("a.db-wal", "sub/b.db-wal") = 0 <0.000010>
100 1000.000038 renameat2(4</w/log>, "x", AT_FDCWD</w>, "/abs/y", RENAME_NOREPLACE) = -1 ENOTDIR (Not a directory) <0.000010>
100 1000.000039 exit_group(0) = ?
"""


@pytest.fixture(scope="module")
def calls(tmp_path_factory):
    path = tmp_path_factory.mktemp("strace") / "flags.strace"
    path.write_text(LOG)
    parsed = parse_strace(path)
    assert parsed.unparsed == 0 and parsed.unpaired == 0
    return parsed.syscall_io


def _at(df: pl.DataFrame, usec: int) -> dict:
    rows = df.filter(pl.col("ts") == 1000_000_000_000 + usec * 1000)
    assert len(rows) == 1, rows
    return rows.row(0, named=True)


def test_flags_follow_open_dup_fcntl_threads_fork_and_exec(calls):
    flags = {usec: _at(calls, usec)["open_flags"] for usec in range(1, 35) if usec != 16}  # 16: clone resumed
    assert flags[1] == "O_WRONLY|O_CREAT|O_DSYNC|O_CLOEXEC"  # the open call carries what it asked for
    assert flags[2] == flags[4] == "O_WRONLY|O_CREAT|O_DSYNC|O_CLOEXEC"  # dup2 shares the description
    assert flags[7] == "O_WRONLY|O_CREAT|O_APPEND"  # F_SETFL cannot add O_SYNC (fcntl(2), checked here)
    assert flags[9] == "O_WRONLY|O_CREAT|O_DSYNC|O_DIRECT|O_CLOEXEC"  # F_SETFL O_DIRECT on 7 reaches 3 too
    assert flags[12] == flags[9]  # the thread shares the fd table
    assert flags[13] == "O_RDWR|O_CREAT|O_SYNC"  # ... both ways: the thread's open is the parent's fd 5
    assert flags[15] == flags[9]  # the forked child's first write, before its parent's clone returned
    assert flags[18] == "O_RDWR|O_CREAT|O_SYNC"  # the child's close of 5 is its own copy's
    assert flags[20] == ""  # exec closed the O_CLOEXEC fd 3
    assert flags[21] == "O_WRONLY|O_CREAT|O_APPEND"  # ... and kept fd 4
    assert flags[24] == "O_WRONLY|O_DIRECT|O_LARGEFILE"  # F_GETFL taught the inherited fd 1, then F_SETFL
    assert flags[25] == ""  # inherited and never asked about: unknown
    assert flags[27] == "O_RDWR|O_DIRECT|O_CLOEXEC"  # openat2's how.flags
    assert flags[29] == "O_WRONLY|O_CREAT|O_TRUNC"  # creat
    assert flags[31] == ""  # after close
    assert flags[32] == "O_WRONLY|O_CREAT|O_DSYNC|O_DIRECT|O_CLOEXEC"  # the dup outlives the closed original
    assert flags[34] == "O_RDWR|O_CREAT|O_SYNC"  # F_DUPFD_CLOEXEC


def test_sync_mode_of_each_write_at_the_syscall_layer(calls):
    sc = classify_syscalls(calls)
    mode = {(r["ts"] - 1000_000_000_000) // 1000: r["sync_mode"] for r in sc.iter_rows(named=True)}
    assert [mode[u] for u in (2, 4, 7, 9, 12, 13, 15, 18, 21, 24, 25, 27, 29, 32, 34)] == [
        "o_dsync", "o_dsync", "buffered", "o_direct", "o_direct", "o_sync", "o_direct", "o_sync", "buffered",
        "o_direct", "buffered", "o_direct", "buffered", "o_direct", "o_sync"]


def test_unlink_and_rename_carry_absolute_paths(calls):
    got = calls.filter(pl.col("syscall").is_in(["unlinkat", "unlink", "rename", "renameat2"])).select(
        "syscall", "path", "new_path").rows()
    assert got == [("unlinkat", "/w/db-journal", ""), ("unlink", "/w/other-journal", ""),
                   ("rename", "/w/a.db-wal", "/w/sub/b.db-wal"),  # relative: the cwd of AT_FDCWD</w>
                   ("renameat2", "/w/log/x", "/abs/y")]
    from mobiperf.analyzers.file_type import file_type_of_path
    types = calls.filter(pl.col("syscall").str.contains("unlink")).select(file_type_of_path(pl.col("path")))
    assert types.to_series().to_list() == ["db-journal", "db-journal"]


def test_flag_names_round_trip_in_strace_spelling():
    for text in ("O_RDONLY", "O_WRONLY|O_CREAT|O_TRUNC", "O_RDWR|O_SYNC", "O_WRONLY|O_DSYNC|O_DIRECT",
                 "O_RDWR|O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC", "O_RDWR|O_TMPFILE"):
        assert flag_names(flag_bits_of_names(text)) == text
    assert flag_bits_of_names("O_SYNC") & flag_bits_of_names("O_DSYNC")  # O_SYNC contains O_DSYNC's bit
    assert flag_names(0o4010001) == "O_WRONLY|O_SYNC" and flag_names(0o10001) == "O_WRONLY|O_DSYNC"
    assert flag_bits_of_names("0x8000|O_WRONLY") == 0o100001 and flag_bits_of_names("O_BOGUS") is None
