"""The system call tables (mobiperf/core/syscall_table.py) are the kernel headers' numbers, ABI by ABI, and name
every call the call layer reads (mobiperf/core/syscall_abi.py)."""

from __future__ import annotations

import shutil

import pytest

from mobiperf.core.syscall_abi import DECODED_CALLS, canonical, numbers_of
from mobiperf.core.syscall_table import ARGS, NUMBERS
from tests.support.syscall_headers import ABIS, syscall_numbers


@pytest.mark.parametrize("abi", sorted(ABIS))
def test_the_table_is_the_headers_numbers(abi):
    compiler = ABIS[abi][0]
    if not shutil.which(compiler):
        pytest.skip(f"{compiler} is not installed (make setup installs the cross compilers)")
    assert NUMBERS[abi] == syscall_numbers(abi)


# Numbers known by heart (arch/x86/entry/syscalls/syscall_64.tbl, include/uapi/asm-generic/unistd.h,
# arch/arm/tools/syscall.tbl): a table off by one would fail here without the compilers too.
KNOWN = {"x86_64": {"read": 0, "write": 1, "pwrite64": 18, "fsync": 74, "fdatasync": 75, "openat": 257,
                    "splice": 275},
         "arm64-v8a": {"openat": 56, "read": 63, "write": 64, "pwrite64": 68, "fsync": 82, "fdatasync": 83,
                       "splice": 76},
         "armeabi-v7a": {"read": 3, "write": 4, "fsync": 118, "fdatasync": 148, "pwrite64": 181, "fcntl64": 221,
                         "openat": 322, "arm_sync_file_range": 341}}


@pytest.mark.parametrize("abi", sorted(KNOWN))
def test_known_numbers(abi):
    names = {name: nr for nr, name in NUMBERS[abi].items()}
    assert {call: names.get(call) for call in KNOWN[abi]} == KNOWN[abi]


@pytest.mark.parametrize("abi", sorted(KNOWN))
def test_each_abi_has_the_io_calls(abi):
    present = {canonical(abi, NUMBERS[abi][n]) for n in numbers_of(abi)}
    assert {"read", "write", "pwrite64", "fsync", "fdatasync", "openat", "fcntl", "close", "splice",
            "sync_file_range"} <= present
    assert "futex" not in present  # the filter keeps the calls the layer reads, not every call


def test_argument_names_of_every_decoded_call_x86_64_has():
    on_x86 = {canonical("x86_64", name) for name in NUMBERS["x86_64"].values()}
    assert {c for c in DECODED_CALLS if c in on_x86} <= set(ARGS)
    assert ARGS["pwrite64"] == ("fd", "buf", "count", "pos")
    assert ARGS["openat"] == ("dfd", "filename", "flags", "mode")
