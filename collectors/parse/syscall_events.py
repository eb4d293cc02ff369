"""The syscalls events (syscalls:sys_enter_X / sys_exit_X, and raw_syscalls decoded by raw_syscalls.py) -> one
syscall_io row per call: enters and exits paired per thread in time order.

The strace columns where the kernel's text has them: fd from the fd/fildes/oldfd/dfd argument (AT_FDCWD,
printed as 0xffffff9c, is -100 as in strace), request_bytes/offset_bytes from the arguments, ret from the exit
(a negative errno with its name), and open_flags followed per fd by fd_flags.py from openat/open's flags,
dup*, fcntl (cmd F_SETFL/F_GETFL/F_DUPFD*), close, close_range, clone's clone_flags and execve, which the
syscalls event set of collectors/ftrace.py enables for this. Order: rows are placed at their enter, so a
clone is seen before its child's first call even when the child runs before the parent's exit event.

What stays unknown, measured on this machine (6.18) against strace on the same run: path and new_path
(filename/oldname/newname are printed as user pointers, `filename: 0x7f0d6383c0b1`; the kernel reads no user memory
in these events; an event probe fetching `+0($filename):ustring` would, but writing any `e:` definition to
dynamic_events fails with EINVAL on this kernel), so file types are `unknown` at the syscall layer without strace;
openat2's flags (behind the `how` pointer: its fd's flags stay unknown) and clone3's flags (behind a pointer: taken
as a thread's, sharing the fd table, which is what pthread_create does; a posix_spawn child's fd changes before its
exec are then wrongly shared with the parent); a thread or process that started before tracing (its table starts
empty, the text carries no tgid). The numbers are decoded with the ABI's open flag bits where the trace says its ABI
(raw_syscalls of a run), else with x86's; arm and arm64 swap O_DIRECT/O_DIRECTORY and O_NOFOLLOW/O_LARGEFILE,
recognised when data is read or written through an fd that x86 numbering would call a directory (EISDIR on every
kernel), then decoded as arm's. A trace with neither O_DIRECT IO nor such proof keeps x86's names, which changes no
sync mode. Durations are on the trace clock, a few µs shorter than strace's (no ptrace stops).

Both sources go through syscall_io_of_calls: the events' text gives each argument by name (`fd: 0x3`,
argument_of_text), raw_syscalls by register (raw_syscalls.py), and the rest is the same.
"""

from __future__ import annotations

import errno as errno_mod
from typing import Callable

import polars as pl

from mobiperf.collectors.parse.fd_flags import CLONE_FILES, arm_bits_as_x86, track_open_flags
from mobiperf.core.schema import RAW_SYSCALL_EVENT, SYSCALL_IO

SYSCALL_ARG_BYTES = {  # which argument of an IO syscall is its size and which its file offset
    "read": ("count", None), "write": ("count", None), "pread64": ("count", "pos"),
    "pwrite64": ("count", "pos"), "readv": ("vlen", None), "writev": ("vlen", None),
    "preadv": ("vlen", "pos_l"), "pwritev": ("vlen", "pos_l"), "fallocate": ("len", "offset"),
    "sync_file_range": ("nbytes", "offset"), "ftruncate": (None, "length"),  # ftruncate: its new length
}
FD_ARGS = ("fd", "fildes", "oldfd", "dfd", "olddfd", "fd_in")  # fd_in: splice's source
RAW_SYSCALL_EVENTS = ("sys_enter", "sys_exit")
_FLAG_ARGS = ("flag_bits", "fcntl_cmd", "fd2")
ARM_ABIS = ("arm64-v8a", "armeabi-v7a")


def syscall_io_of_events(rows: pl.DataFrame, rep: int) -> tuple[pl.DataFrame, dict[str, int]]:
    """syscalls:sys_enter_X / sys_exit_X rows (ts, cpu, pid, comm, event, body) -> syscall_io, and the count of
    rows that are neither an enter nor an exit."""
    return syscall_io_of_calls(_named_from_text(rows), argument_of_text, rep)


def syscall_io_of_calls(calls: pl.DataFrame, argument: Callable[[str], pl.Expr], rep: int, *, source: str = "ftrace",
                        abi: str | None = None) -> tuple[pl.DataFrame, dict[str, int]]:
    """Enter and exit rows (ts, pid, comm, syscall, is_enter, ret) whose arguments argument(name) gives (an
    integer expression, null where the call has no such argument) -> syscall_io. abi: where the trace's ABI is
    known, open flags are decoded with its numbers (else x86's, unless the trace proves arm's)."""
    rows = calls.with_columns(**_call_arguments(argument))
    bad = int(rows.filter(pl.col("syscall").is_null()).height)
    out = _pair_enter_exit(rows.filter(pl.col("syscall").is_not_null()))
    table = _syscall_io_table(_with_open_flags(out, arm=abi in ARM_ABIS), rep, source)
    return SYSCALL_IO.validate(table), ({"sys_enter/exit": bad} if bad else {})


def raw_syscall_events(rows: pl.DataFrame, rep: int) -> tuple[pl.DataFrame, dict[str, int]]:
    """raw_syscalls sys_enter (`NR %ld (%lx, ...)`: the six argument registers) and sys_exit (`NR %ld = %ld`)
    rows -> raw_syscall_event; lines of neither shape are counted."""
    enter = rows["body"].str.extract_groups(r"^NR (?P<nr>-?\d+) \((?P<a>[0-9a-fA-F, ]*)\)").struct.unnest()
    exit_ = rows["body"].str.extract_groups(r"^NR (?P<xnr>-?\d+) = (?P<ret>-?\d+)").struct.unnest()
    got = pl.concat([rows.drop("body"), enter, exit_], how="horizontal").with_columns(
        phase=pl.when(pl.col("event") == "sys_enter").then(pl.lit("enter")).otherwise(pl.lit("exit")),
        nr=pl.coalesce("nr", "xnr").cast(pl.Int64, strict=False),
        _words=pl.col("a").str.split(", "))
    ok = got.filter(pl.col("nr").is_not_null())
    words = [pl.col("_words").list.get(k, null_on_oob=True).str.to_integer(base=16, dtype=pl.UInt64, strict=False)
             .alias(f"arg{k}") for k in range(6)]
    table = ok.select(pl.lit(rep, pl.Int32).alias("rep"), "ts", "cpu", "pid", "comm", "phase", "nr", *words,
                      pl.col("ret").cast(pl.Int64, strict=False))
    bad = rows.height - ok.height
    return RAW_SYSCALL_EVENT.validate(table), ({"raw_syscalls": bad} if bad else {})


def _named_from_text(rows: pl.DataFrame) -> pl.DataFrame:
    """Each enter or exit event with its syscall's name (null when the event is neither), is_enter and ret."""
    kernel_style = ~pl.col("event").str.contains(r"^sys_(?:enter|exit)_")
    return rows.with_columns(
        is_enter=pl.when(kernel_style).then(pl.col("body").str.starts_with("("))
        .otherwise(pl.col("event").str.starts_with("sys_enter")),
        syscall=pl.when(kernel_style).then(pl.col("event").str.slice(4))
        .otherwise(pl.col("event").str.replace(r"^sys_(enter|exit)_", "")),
        ret=_signed_hex(pl.col("body").str.extract(r"^(?:-> )?(?:0x)?([0-9a-fA-F]{1,16})$", 1)))


def _call_arguments(argument: Callable[[str], pl.Expr]) -> dict[str, pl.Expr]:
    """fd, size, off and the flag arguments fd_flags.py follows, from each call's named arguments."""
    size_expr = pl.lit(None, pl.Int64)
    off_expr = pl.lit(None, pl.Int64)
    for name, (size_arg, off_arg) in SYSCALL_ARG_BYTES.items():
        if size_arg:
            size_expr = pl.when(pl.col("syscall") == name).then(argument(size_arg)).otherwise(size_expr)
        if off_arg:
            off_expr = pl.when(pl.col("syscall") == name).then(argument(off_arg)).otherwise(off_expr)
    fd = _signed_int(pl.coalesce(*(argument(a) for a in FD_ARGS)))
    return {"fd": fd.cast(pl.Int64, strict=False), "size": size_expr.cast(pl.Int64, strict=False),
            "off": off_expr.cast(pl.Int64, strict=False), **_syscall_flag_args(argument)}


def argument_of_text(name: str) -> pl.Expr:
    """The argument `name` as the syscalls events print it (`name: 0x1f`), null where the line has none."""
    return (pl.col("body").str.extract(rf"(?:^|\(|, ){name}: (?:0x)?([0-9a-fA-F]+)", 1)
            .str.to_integer(base=16, strict=False))


def _signed_hex(text: pl.Expr) -> pl.Expr:
    """A 64-bit hex word as the signed long the kernel meant (sys_exit prints `0x%lx` of a long)."""
    u = text.str.to_integer(base=16, dtype=pl.UInt64, strict=False)
    return pl.when(u > (1 << 63) - 1).then(-((~u) + 1).cast(pl.Int64, strict=False)).otherwise(
        u.cast(pl.Int64, strict=False))


def _signed_int(value: pl.Expr) -> pl.Expr:
    """An int argument printed as the unsigned 32-bit word (`dfd: 0xffffff9c` is AT_FDCWD, -100)."""
    return pl.when((value >= 1 << 31) & (value < 1 << 32)).then(value - (1 << 32)).otherwise(value)


def _pair_enter_exit(rows: pl.DataFrame) -> pl.DataFrame:
    """One row per call, in the order calls enter: an enter paired with the next event of its thread when that is
    the same syscall's exit (dur, ret), else alone (dur and ret null)."""
    rows = rows.sort(["pid", "ts"], maintain_order=True)
    nxt = rows.select(pl.all().shift(-1).over("pid").name.suffix("_next"))
    both = pl.concat([rows, nxt], how="horizontal")
    paired = both.filter(pl.col("is_enter") & ~pl.col("is_enter_next").fill_null(True)
                         & (pl.col("syscall") == pl.col("syscall_next")))
    # sys_exit returns the kernel's unsigned long: a negative errno shows up as a huge value.
    ret = pl.col("ret_next")
    enters_unpaired = both.filter(pl.col("is_enter") & ~(pl.col("is_enter_next").is_not_null()
                                                          & ~pl.col("is_enter_next")
                                                          & (pl.col("syscall") == pl.col("syscall_next"))))
    return pl.concat([
        paired.select(pl.col("ts"), (pl.col("ts_next") - pl.col("ts")).alias("dur"), pl.col("pid"), pl.col("comm"),
                      pl.col("syscall"), pl.col("fd"), pl.col("size"), pl.col("off"), ret.alias("ret"), *_FLAG_ARGS),
        enters_unpaired.select(pl.col("ts"), pl.lit(None, pl.Int64).alias("dur"), pl.col("pid"), pl.col("comm"),
                               pl.col("syscall"), pl.col("fd"), pl.col("size"), pl.col("off"),
                               pl.lit(None, pl.Int64).alias("ret"), *_FLAG_ARGS),
    ], how="vertical_relaxed").sort("ts", maintain_order=True)


def _with_open_flags(out: pl.DataFrame, *, arm: bool = False) -> pl.DataFrame:
    """open_flags of each call's fd, followed through the calls in the order they enter (a clone enters before its
    child runs, an open before its fd is used); decoded as arm's when the ABI is arm's or the trace proves it."""
    if arm:
        return out.with_columns(open_flags=track_open_flags(_as_x86(out).select("pid", "syscall", "fd", "ret",
                                                                                *_FLAG_ARGS)))
    out = out.with_columns(open_flags=track_open_flags(out.select("pid", "syscall", "fd", "ret", *_FLAG_ARGS)))
    # The numbers are x86's unless the trace proves an arm kernel: data read or written through an fd that x86
    # numbering calls O_DIRECTORY (impossible: read/write on a directory is EISDIR) is arm's O_DIRECT.
    data_io = pl.col("syscall").is_in(["read", "write", "pread64", "pwrite64", "readv", "writev", "preadv",
                                       "pwritev", "preadv2", "pwritev2"]) & (pl.col("ret") > 0)
    if out.filter(data_io & pl.col("open_flags").str.contains("O_DIRECTORY", literal=True)).height:
        out = out.with_columns(open_flags=track_open_flags(_as_x86(out).select("pid", "syscall", "fd", "ret",
                                                                               *_FLAG_ARGS)))
    return out


def _as_x86(out: pl.DataFrame) -> pl.DataFrame:
    """The flag numbers of an arm trace in x86's numbering (fd_flags.py speaks x86's)."""
    return out.with_columns(
        flag_bits=pl.when(pl.col("syscall").is_in(["open", "openat"])
                          | (pl.col("fcntl_cmd") == "F_SETFL")).then(arm_bits_as_x86(pl.col("flag_bits")))
        .otherwise(pl.col("flag_bits")),
        ret=pl.when(pl.col("fcntl_cmd") == "F_GETFL").then(arm_bits_as_x86(pl.col("ret"))).otherwise(pl.col("ret")))


def _syscall_io_table(out: pl.DataFrame, rep: int, source: str) -> pl.DataFrame:
    """The calls as syscall_io rows: fd -1 where unknown or out of range, errno named from a negative ret."""
    names = {-n: name for n, name in errno_mod.errorcode.items()}
    errno = pl.when(pl.col("ret").is_between(-4095, -1)).then(
        pl.col("ret").replace_strict(names, default=None, return_dtype=pl.Utf8)
        .fill_null(pl.lit("E") + (-pl.col("ret")).cast(pl.Utf8))).otherwise(pl.lit(""))
    return out.select(
        pl.lit(rep, pl.Int32).alias("rep"), "ts", "dur", "pid", "comm", "syscall",
        pl.when(pl.col("fd").is_between(-(1 << 31), (1 << 31) - 1)).then(pl.col("fd")).otherwise(-1).cast(pl.Int32)
        .alias("fd"), pl.lit("").alias("path"), pl.col("size").fill_null(-1).alias("request_bytes"),
        pl.col("off").fill_null(-1).alias("offset_bytes"), "ret", errno.alias("errno"),
        pl.lit(source).alias("source"), "open_flags", pl.lit("").alias("new_path"))


FCNTL_CMDS = {0: "F_DUPFD", 1: "F_GETFD", 2: "F_SETFD", 3: "F_GETFL", 4: "F_SETFL", 1030: "F_DUPFD_CLOEXEC"}


def _syscall_flag_args(argument: Callable[[str], pl.Expr]) -> dict[str, pl.Expr]:
    """The arguments fd_flags.py follows, from the numbers the kernel prints: open flags (open, openat; creat
    implies its own; openat2's are behind a pointer), fcntl's cmd and argument, dup3's flags, clone's flags
    (clone3's are behind a pointer: taken as a thread's, CLONE_FILES) and close_range's range and flags."""
    call = pl.col("syscall")
    cmd = argument("cmd").replace_strict(FCNTL_CMDS, default=None, return_dtype=pl.Utf8)
    bits = (pl.when(call.is_in(["open", "openat", "dup3", "close_range"])).then(argument("flags"))
            .when(call == "fcntl").then(argument("arg"))
            .when(call == "clone").then(argument("clone_flags"))
            .when(call == "clone3").then(pl.lit(CLONE_FILES)))
    return {"flag_bits": bits.cast(pl.Int64, strict=False), "fcntl_cmd": pl.when(call == "fcntl").then(cmd),
            "fd2": pl.when(call == "close_range").then(argument("max_fd")).cast(pl.Int64, strict=False)}
