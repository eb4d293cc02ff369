"""ftrace syscalls events -> syscall_io with the strace columns where the kernel's text has them: the fd (also
openat's dfd, AT_FDCWD = -100 as strace prints it), sizes, return values, and each fd's open flags followed
through openat, dup2, fcntl and clone; paths stay empty (the kernel prints only the user pointer of a name)."""

from __future__ import annotations

import polars as pl

from mobiperf.analyzers.syscall import classify_syscalls
from mobiperf.collectors.parse.ftrace_text import parse_ftrace_text

# The kernel's own text (6.18 on this machine: decimal below 10, 0x above; `-> ret`), then the format-file style
# of trace-cmd and older kernels for the thread and the fork. Flags: 0x1241 = O_WRONLY|O_CREAT|O_TRUNC|O_DSYNC,
# 0x4000 = O_DIRECT, 0x101042 = O_RDWR|O_CREAT|O_SYNC; clone 0x3d0f00 has CLONE_FILES (a thread),
# 0x1200011 does not (fork).
TRACE = """\
              db-700     [000] .....  100.000001: sys_openat(dfd: 0xffffff9c, filename: 0x7ffd00001000, flags: 0x1241, mode: 0x1a4)
              db-700     [000] .....  100.000002: sys_openat -> 0x3
              db-700     [000] .....  100.000003: sys_pwrite64(fd: 3, buf: 0x5600, count: 0x1000, pos: 0)
              db-700     [000] .....  100.000013: sys_pwrite64 -> 0x1000
              db-700     [000] .....  100.000014: sys_dup2(oldfd: 3, newfd: 0xa)
              db-700     [000] .....  100.000015: sys_dup2 -> 0xa
              db-700     [000] .....  100.000016: sys_fcntl(fd: 0xa, cmd: 4, arg: 0x4000)
              db-700     [000] .....  100.000017: sys_fcntl -> 0x0
              db-700     [000] .....  100.000018: sys_write(fd: 3, buf: 0x5600, count: 0x1000)
              db-700     [000] .....  100.000028: sys_write -> 0x1000
              db-700     [000] .....  100.000029: sys_enter_clone: clone_flags: 0x003d0f00, newsp: 0x7f0000, parent_tidptr: 0x7f01, child_tidptr: 0x7f01, tls: 0x7f02
              db-701     [001] .....  100.000031: sys_enter_openat: dfd: 0xffffff9c, filename: 0x7f0000002000, flags: 0x00101042, mode: 0x000001a4
              db-700     [000] .....  100.000032: sys_exit_clone: 0x2bd
              db-701     [001] .....  100.000033: sys_exit_openat: 0x4
              db-700     [000] .....  100.000034: sys_enter_write: fd: 0x00000004, buf: 0x5600, count: 0x00000200
              db-700     [000] .....  100.000044: sys_exit_write: 0x200
              db-700     [000] .....  100.000045: sys_enter_clone: clone_flags: 0x01200011, newsp: 0x0, parent_tidptr: 0x0, child_tidptr: 0x7f01, tls: 0x0
              db-700     [000] .....  100.000046: sys_exit_clone: 0x2be
              db-702     [001] .....  100.000047: sys_enter_close: fd: 0x00000004
              db-702     [001] .....  100.000048: sys_exit_close: 0x0
              db-702     [001] .....  100.000049: sys_enter_write: fd: 0x0000000a, buf: 0x5600, count: 0x00001000
              db-702     [001] .....  100.000059: sys_exit_write: 0x1000
              db-700     [000] .....  100.000060: sys_write(fd: 4, buf: 0x5600, count: 0x200)
              db-700     [000] .....  100.000070: sys_write -> 0x200
              db-700     [000] .....  100.000071: sys_close(fd: 3)
              db-700     [000] .....  100.000072: sys_close -> 0x0
              db-700     [000] .....  100.000073: sys_write(fd: 3, buf: 0x5600, count: 0x1000)
              db-700     [000] .....  100.000074: sys_write -> 0xfffffffffffffff7
              db-700     [000] .....  100.000075: sys_write(fd: 0xa, buf: 0x5600, count: 0x1000)
              db-700     [000] .....  100.000085: sys_write -> 0x1000
"""


def test_fd_flags_and_sync_modes_from_the_kernels_numbers(tmp_path):
    path = tmp_path / "syscalls.txt"
    path.write_text(TRACE)
    parsed = parse_ftrace_text(path)
    calls = parsed.events["syscall_io"]
    assert parsed.unparsed_by_event == {} and set(calls["source"]) == {"ftrace"}
    opened = calls.filter(pl.col("syscall") == "openat").row(0, named=True)
    assert (opened["fd"], opened["ret"], opened["path"], opened["open_flags"]) == (
        -100, 3, "", "O_WRONLY|O_CREAT|O_TRUNC|O_DSYNC")
    clone = calls.filter(pl.col("syscall") == "clone").row(0, named=True)
    assert (clone["ret"], clone["dur"]) == (701, 3_000)
    sc = classify_syscalls(calls)
    writes = sc.filter(pl.col("op") == "write").select(
        (pl.col("ts") - 100_000_000_000) // 1000, "pid", "fd", "size_bytes", "sync_mode").rows()
    assert writes == [
        (3, 700, 3, 4096, "o_dsync"),
        (18, 700, 3, 4096, "o_direct"),  # F_SETFL O_DIRECT on the dup 10 changed the shared description
        (34, 700, 4, 512, "o_sync"),  # opened by the thread (CLONE_FILES): the same fd table
        (49, 702, 10, 4096, "o_direct"),  # the forked child inherits the descriptions
        (60, 700, 4, 512, "o_sync"),  # the child's close of 4 closed its own copy only
        (73, 700, 3, 4096, "buffered"),  # closed: EBADF (the size asked for), no flags
        (75, 700, 10, 4096, "o_direct"),  # the dup outlives the original
    ]
    bad = calls.filter(pl.col("ts") == 100_000_073_000).row(0, named=True)
    assert (bad["ret"], bad["errno"], bad["open_flags"]) == (-9, "EBADF", "")


# An arm64 kernel numbers O_DIRECT 0o200000 (x86's O_DIRECTORY) and O_DIRECTORY 0o40000 (x86's O_DIRECT).
ARM64_TRACE = """\
           app-900     [000] .....  200.000001: sys_openat(dfd: 0xffffff9c, filename: 0x7f00, flags: 0x84800, mode: 0)
           app-900     [000] .....  200.000002: sys_openat -> 0x3
           app-900     [000] .....  200.000003: sys_openat(dfd: 0xffffff9c, filename: 0x7f10, flags: 0x10041, mode: 0x1a4)
           app-900     [000] .....  200.000004: sys_openat -> 0x4
           app-900     [000] .....  200.000005: sys_pwrite64(fd: 4, buf: 0x5600, count: 0x1000, pos: 0)
           app-900     [000] .....  200.000015: sys_pwrite64 -> 0x1000
"""


def test_arm64_numbering_is_recognised_by_data_io_through_o_direct(tmp_path):
    path = tmp_path / "syscalls.txt"
    path.write_text(ARM64_TRACE)
    calls = parse_ftrace_text(path).events["syscall_io"]
    assert calls.filter(pl.col("syscall") == "openat")["open_flags"].to_list() == [
        "O_RDONLY|O_NONBLOCK|O_DIRECTORY|O_CLOEXEC", "O_WRONLY|O_CREAT|O_DIRECT"]
    write = classify_syscalls(calls).filter(pl.col("op") == "write").row(0, named=True)
    assert (write["fd"], write["size_bytes"], write["sync_mode"]) == (4, 4096, "o_direct")
