"""System calls by ABI: which calls mobiperf's call layer reads, and what each ABI calls them.

The numbers are syscall_table.py's (generated from the kernel's headers by tests/support/syscall_headers.py). The
collection plan filters raw_syscalls to the numbers of DECODED_CALLS on the device's ABI (numbers_of); the parser
(collectors/parse/raw_syscalls.py) names every number and reads the arguments of these calls.
"""

from __future__ import annotations

from mobiperf.core.syscall_table import NUMBERS
from mobiperf.core.trace_events import SYSCALL_EVENTS

# The calls whose arguments the call layer reads: those of the syscalls event set (trace_events.SYSCALL_EVENTS),
# read from raw_syscalls where the kernel has no syscalls events.
DECODED_CALLS = tuple(e.removeprefix("sys_enter_") for e in SYSCALL_EVENTS if e.startswith("sys_enter_"))
# Header names whose entry point (and syscalls event) has another name (the kernels' syscall tables: x86_64's
# `5 common fstat sys_newfstat`), and 32-bit arm's own names of some calls (arch/arm/tools/syscall.tbl): each
# maps to the name the call layer knows the call by.
_NEW_STAT = {"fstat": "newfstat", "stat": "newstat", "lstat": "newlstat"}
ALIASES = {"x86_64": _NEW_STAT, "arm64-v8a": _NEW_STAT,
           "armeabi-v7a": {"fcntl64": "fcntl", "arm_sync_file_range": "sync_file_range", "ftruncate64": "ftruncate",
                           "truncate64": "truncate", "fstatat64": "newfstatat", "fstat64": "newfstat",
                           "_llseek": "lseek"}}
ABIS = tuple(NUMBERS)


def call_name(abi: str, number: int) -> str | None:
    """The ABI's name of a system call number (None if the table has none)."""
    return NUMBERS.get(abi, {}).get(number)


def canonical(abi: str, name: str) -> str:
    """The name the syscalls events give the call the ABI calls `name` (fcntl64 -> fcntl on arm)."""
    return ALIASES.get(abi, {}).get(name, name)


def numbers_of(abi: str, calls=DECODED_CALLS) -> list[int]:
    """The numbers, on this ABI, of the calls named (their ABI-specific names included); [] for an unknown ABI."""
    wanted = set(calls)
    return sorted(n for n, name in NUMBERS.get(abi, {}).items() if canonical(abi, name) in wanted)
