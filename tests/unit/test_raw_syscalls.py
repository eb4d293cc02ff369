"""raw_syscalls decoded by the device's ABI (collectors/parse/raw_syscalls.py) into the same syscall_io the
syscalls:* events make: names from the ABI's table, fds, sizes, offsets (32-bit arm: 64-bit values from register
pairs), return values and errnos, open flags in the ABI's numbering. Synthetic lines in the raw_syscalls formats
(`NR %ld (%lx, %lx, %lx, %lx, %lx, %lx)`, `NR %ld = %ld`, the 6.18 format files), one call per ABI feature."""

from __future__ import annotations

import polars as pl
import pytest

from mobiperf.collectors.parse.ftrace_text import parse_ftrace_text_regex
from mobiperf.collectors.parse.raw_syscalls import raw_syscall_io


def _calls(tmp_path, lines: list[tuple[str, str]], abi: str | None) -> pl.DataFrame:
    """syscall_io of (sys_enter|sys_exit, body) lines of one thread, 10 us apart."""
    text = "".join(f"       mobibench-100     [000] ..... {10 + k * 1e-5:12.6f}: {event}: {body}\n"
                   for k, (event, body) in enumerate(lines))
    trace = tmp_path / "raw_syscalls.txt"
    trace.write_text(text)
    parsed = parse_ftrace_text_regex(trace, 0)
    assert "syscall_io" not in parsed.events  # raw rows are decoded by the ABI, not named here
    calls, bad = raw_syscall_io(parsed.events["raw_syscall_event"], abi, 0)
    assert bad == {}
    return calls


def _enter(nr: int, *args: int) -> tuple[str, str]:
    words = [format(a & (1 << 64) - 1, "x") for a in args] + ["0"] * (6 - len(args))
    return "sys_enter", f"NR {nr} ({', '.join(words)})"


def _exit(nr: int, ret: int) -> tuple[str, str]:
    return "sys_exit", f"NR {nr} = {ret}"


def test_x86_64_calls_read_like_the_syscalls_events(tmp_path):
    calls = _calls(tmp_path, [
        _enter(257, -100, 0x7FFD1000, 0o2 | 0o100 | 0o10000, 0o644), _exit(257, 3),    # openat(AT_FDCWD, O_DSYNC)
        _enter(18, 3, 0x7FFD2000, 4096, 8192), _exit(18, 4096),                         # pwrite64
        _enter(75, 3), _exit(75, 0),                                                     # fdatasync
        _enter(1, 9, 0x7FFD2000, 16), _exit(1, -9),                                      # write -> EBADF
        _enter(202, 0x7FFD3000, 0x81, 1), _exit(202, 0),                                 # futex: named, no fd
    ], "x86_64")
    rows = {r["syscall"]: r for r in calls.iter_rows(named=True)}
    assert list(calls["syscall"]) == ["openat", "pwrite64", "fdatasync", "write", "futex"]
    assert set(calls["source"]) == {"raw_syscalls"} and calls["dur"].to_list() == [10_000] * 5
    assert (rows["openat"]["fd"], rows["openat"]["ret"]) == (-100, 3) and "O_DSYNC" in rows["openat"]["open_flags"]
    pw = rows["pwrite64"]
    assert (pw["fd"], pw["request_bytes"], pw["offset_bytes"], pw["ret"]) == (3, 4096, 8192, 4096)
    assert "O_DSYNC" in pw["open_flags"]  # followed from the openat, as with the syscalls events
    assert (rows["fdatasync"]["fd"], rows["fdatasync"]["ret"]) == (3, 0)
    assert (rows["write"]["ret"], rows["write"]["errno"]) == (-9, "EBADF")
    assert rows["futex"]["fd"] == -1 and rows["futex"]["request_bytes"] == -1


def test_arm64_numbers_and_open_flags(tmp_path):
    # arm64: openat 56, pwrite64 68, fsync 82; O_DIRECT is 0o200000 there (x86's O_DIRECTORY bit is 0o200000)
    calls = _calls(tmp_path, [
        _enter(56, -100, 0x7FF0, 0o2 | 0o100 | 0o200000, 0o644), _exit(56, 4),
        _enter(68, 4, 0x7FF8, 4096, 0), _exit(68, 4096),
        _enter(82, 4), _exit(82, 0),
    ], "arm64-v8a")
    assert list(calls["syscall"]) == ["openat", "pwrite64", "fsync"]
    flags = calls["open_flags"][1]
    assert "O_DIRECT" in flags.split("|") and "O_DIRECTORY" not in flags


def test_32_bit_arm_takes_64_bit_values_from_register_pairs(tmp_path):
    calls = _calls(tmp_path, [
        _enter(181, 3, 0x1000, 4096, 0, 0x2000, 1), _exit(181, 4096),          # pwrite64: pad r3, pos r4:r5
        _enter(352, 3, 0, 0x1000, 0, 0x8000, 0), _exit(352, 0),                 # fallocate: offset r2:r3, len r4:r5
        _enter(341, 3, 2, 0x3000, 0, 0x1000, 0), _exit(341, 0),                 # arm_sync_file_range: flags second
        _enter(221, 3, 4, 0o4000), _exit(221, 0),                               # fcntl64(F_SETFL)
    ], "armeabi-v7a")
    rows = {r["syscall"]: r for r in calls.iter_rows(named=True)}
    assert list(calls["syscall"]) == ["pwrite64", "fallocate", "sync_file_range", "fcntl"]
    assert (rows["pwrite64"]["offset_bytes"], rows["pwrite64"]["request_bytes"]) == ((1 << 32) + 0x2000, 4096)
    assert (rows["fallocate"]["offset_bytes"], rows["fallocate"]["request_bytes"]) == (0x1000, 0x8000)
    assert (rows["sync_file_range"]["offset_bytes"], rows["sync_file_range"]["request_bytes"]) == (0x3000, 0x1000)


def test_an_unknown_abi_keeps_numbers_and_the_first_argument(tmp_path):
    calls = _calls(tmp_path, [_enter(74, 5), _exit(74, 0)], None)
    assert calls.select("syscall", "fd", "ret").rows() == [("nr_74", 5, 0)]


@pytest.mark.parametrize("abi, nr", [("x86_64", 74), ("arm64-v8a", 82), ("armeabi-v7a", 118)])
def test_fsync_by_its_number_on_each_abi(tmp_path, abi, nr):
    assert _calls(tmp_path, [_enter(nr, 7), _exit(nr, 0)], abi).select("syscall", "fd").rows() == [("fsync", 7)]
