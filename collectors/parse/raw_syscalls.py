"""raw_syscalls:sys_enter / sys_exit -> the call layer (syscall_io), decoded by system call number for the ABI of
the device that recorded them.

    sys_enter   NR %ld (%lx, %lx, %lx, %lx, %lx, %lx)     the number and the six argument registers
    sys_exit    NR %ld = %ld                                 the number and the return value

These events exist on every kernel with tracepoints (Perfetto records them); the syscalls:sys_enter_* events that
name each call need CONFIG_FTRACE_SYSCALLS, which Android's GKI builds may lack. The parsers keep the raw rows as
raw_syscall_event; raw_syscall_io() names each by its number in the ABI's table (mobiperf/core/syscall_table.py,
generated from the kernel's headers) and gives each argument of a call by the name the syscalls:sys_enter_<call>
event of that call gives it (the format files' names: fd, count, pos, flags...), so
syscall_events.syscall_io_of_calls makes the same syscall_io from either source: fds, sizes, offsets and open flags
where the arguments carry them. Paths are pointers into the process's memory that neither source reads: they come
from strace (`--source strace`) or not at all.

Per ABI: x86_64 and arm64 pass every argument in one register. 32-bit arm (EABI) passes a 64-bit argument in an
even/odd register pair, low word first (arch/arm's calling convention, which its syscall table follows: pread64's
offset in r4/r5 after a pad in r3), and names some calls apart (fcntl64, arm_sync_file_range = sync_file_range2 with
flags second, fstatat64, ftruncate64, _llseek): ARM_CALLS says where each argument is and which call it is.

Limits: a 32-bit process on an arm64 kernel makes compat calls whose numbers are arm's, but the events do not say
which table a call used; a trace is decoded with its device's ABI (its 64-bit one on arm64), so such a process's
calls get wrong names. _llseek's new position is written to memory (its return value is 0): the running file
position after one is unknown, as with strace. A trace of unknown ABI (an ingested one) keeps nr_<N> names and the
first argument as fd, as before this decoding existed.
"""

from __future__ import annotations

import polars as pl

from mobiperf.core.syscall_abi import canonical
from mobiperf.core.syscall_table import ARGS, NUMBERS

# 32-bit arm: the call each arm name is, and its arguments as (name, low register, high register or None).
_PAIR = None
ARM_CALLS: dict[str, tuple[str, tuple[tuple[str, int, int | None], ...]]] = {
    "pread64": ("pread64", (("fd", 0, _PAIR), ("buf", 1, _PAIR), ("count", 2, _PAIR), ("pos", 4, 5))),
    "pwrite64": ("pwrite64", (("fd", 0, _PAIR), ("buf", 1, _PAIR), ("count", 2, _PAIR), ("pos", 4, 5))),
    "preadv": ("preadv", (("fd", 0, _PAIR), ("vec", 1, _PAIR), ("vlen", 2, _PAIR), ("pos_l", 3, 4))),
    "pwritev": ("pwritev", (("fd", 0, _PAIR), ("vec", 1, _PAIR), ("vlen", 2, _PAIR), ("pos_l", 3, 4))),
    "preadv2": ("preadv2", (("fd", 0, _PAIR), ("vec", 1, _PAIR), ("vlen", 2, _PAIR), ("pos_l", 3, 4),
                            ("flags", 5, _PAIR))),
    "pwritev2": ("pwritev2", (("fd", 0, _PAIR), ("vec", 1, _PAIR), ("vlen", 2, _PAIR), ("pos_l", 3, 4),
                              ("flags", 5, _PAIR))),
    "fallocate": ("fallocate", (("fd", 0, _PAIR), ("mode", 1, _PAIR), ("offset", 2, 3), ("len", 4, 5))),
    "arm_sync_file_range": ("sync_file_range", (("fd", 0, _PAIR), ("flags", 1, _PAIR), ("offset", 2, 3),
                                                ("nbytes", 4, 5))),
    "ftruncate64": ("ftruncate", (("fd", 0, _PAIR), ("length", 2, 3))),
    "truncate64": ("truncate", (("path", 0, _PAIR), ("length", 2, 3))),
    "fcntl64": ("fcntl", (("fd", 0, _PAIR), ("cmd", 1, _PAIR), ("arg", 2, _PAIR))),
    "fstatat64": ("newfstatat", (("dfd", 0, _PAIR), ("filename", 1, _PAIR), ("statbuf", 2, _PAIR),
                                 ("flag", 3, _PAIR))),
    "fstat64": ("newfstat", (("fd", 0, _PAIR), ("statbuf", 1, _PAIR))),
    "_llseek": ("_llseek", (("fd", 0, _PAIR), ("offset_high", 1, _PAIR), ("offset_low", 2, _PAIR),
                            ("result", 3, _PAIR), ("whence", 4, _PAIR))),   # lseek's new position is in memory
}
THIRTY_TWO_BIT = {"armeabi-v7a"}


def known_abi(abi: str | None) -> bool:
    return abi in NUMBERS


def call_layout(abi: str, name: str) -> tuple[str, tuple[tuple[str, int, int | None], ...]]:
    """(the call's name as the call layer knows it, its arguments as (name, register, high register))."""
    if abi in THIRTY_TWO_BIT and name in ARM_CALLS:
        return ARM_CALLS[name]
    name = canonical(abi, name)
    return name, tuple((arg, i, None) for i, arg in enumerate(ARGS.get(name, ())))


def raw_syscall_io(raw: pl.DataFrame, abi: str | None, rep: int) -> tuple[pl.DataFrame, dict[str, int]]:
    """raw_syscall_event rows of one repetition -> syscall_io (source raw_syscalls), each call named and its
    arguments read by the ABI's table; an unknown ABI gives nr_<N> and the first argument as fd."""
    from mobiperf.collectors.parse.syscall_events import syscall_io_of_calls

    names = NUMBERS.get(abi or "", {})
    nrs = sorted(set(raw["nr"].drop_nulls().to_list()))
    if names:
        layouts = {nr: call_layout(abi or "", names[nr]) if nr in names else (f"nr_{nr}", ()) for nr in nrs}
    else:
        layouts = {nr: (f"nr_{nr}", (("fd", 0, None),)) for nr in nrs}
    calls = raw.select(
        "ts", "pid", "comm", (pl.col("phase") == "enter").alias("is_enter"), pl.col("nr").alias("nr_of"),
        pl.col("nr").replace_strict({nr: lay[0] for nr, lay in layouts.items()}, default=None,
                                    return_dtype=pl.Utf8).alias("syscall"),
        pl.when(pl.col("phase") == "exit").then(pl.col("ret")).alias("ret"),
        *[pl.col(f"arg{k}") for k in range(6)])
    return syscall_io_of_calls(calls, _register_argument(layouts), rep, source="raw_syscalls", abi=abi)


def _register_argument(layouts: dict[int, tuple[str, tuple[tuple[str, int, int | None], ...]]]):
    """argument(name) for syscall_io_of_calls: the register (or register pair) of each call that has one."""
    def argument(name: str) -> pl.Expr:
        expr = pl.lit(None, pl.Int64)
        for nr, (_, args) in layouts.items():
            for arg, lo, hi in args:
                if arg == name:
                    expr = pl.when(pl.col("nr_of") == nr).then(_word(lo, hi)).otherwise(expr)
        return expr
    return argument


def _word(lo: int, hi: int | None) -> pl.Expr:
    """A register as a signed 64-bit integer, or a 64-bit value in a 32-bit register pair, low word first."""
    if hi is None:
        return pl.col(f"arg{lo}").reinterpret(signed=True)
    low = pl.col(f"arg{lo}") & 0xFFFFFFFF
    high = (pl.col(f"arg{hi}") & 0xFFFFFFFF) * (1 << 32)
    return (low + high).reinterpret(signed=True)
