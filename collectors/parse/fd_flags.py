"""Open flags per file descriptor, followed through a process tree's system calls -> `open_flags` of each call.

A write is O_SYNC, O_DSYNC or O_DIRECT because of how its fd was opened, not because of anything in the write
call itself; the syscall layer can only classify it by remembering every fd's flags. Both syscall sources
(strace and the ftrace syscalls events) hand their calls here in call order, each with:
  pid, syscall, fd (first fd argument), fd2 (close_range's last fd), ret, flag_bits, fcntl_cmd
where flag_bits holds the open flags of open/openat/openat2/creat, the argument of fcntl F_SETFL, and the flags of
clone (only CLONE_FILES matters); fcntl_cmd the F_* name of an fcntl.

The model is the kernel's: an fd table maps fds to open file descriptions, and the flags live on the
description, so
  open/openat/openat2/creat  a new description with the call's flags at the returned fd
  dup/dup2/dup3, F_DUPFD*    the new fd shares the old fd's description (and therefore later flag changes)
  fcntl F_SETFL              changes only O_APPEND, O_ASYNC, O_DIRECT, O_NOATIME and O_NONBLOCK of the
                             description (fcntl(2): O_SYNC/O_DSYNC cannot be changed, checked on this kernel:
                             F_SETFL O_SYNC|O_DIRECT on an O_DSYNC fd reads back O_DSYNC|O_DIRECT)
  fcntl F_GETFL              its result is the description's flags as the kernel sees them: taken as the truth
                             (this also teaches the flags of fds opened before tracing started)
  close, close_range         end the fd (close_range with CLOSE_RANGE_CLOEXEC only marks them)
  clone with CLONE_FILES     the child shares the parent's table (threads); without it, and fork/vfork, the
                             child gets a copy that shares the descriptions
  execve (success)           fds opened O_CLOEXEC are closed and the table is no longer shared (unshare_files)
Failed calls change nothing. A process whose creation was not traced starts with an empty table of its own.

Flags are kept as the bits of this module's table (x86-64 values, which are the asm-generic ones for the sync
bits) and rendered as strace prints them: the access mode first, then the flags by bit value, O_SYNC for
__O_SYNC|O_DSYNC. The sources decode into these bits: strace from the names it prints, ftrace from the numbers
the kernel prints (see ftrace_events.py for the arm/arm64 difference).

Result: open_flags per call, in the calls' order: for an open call the flags it asked for; for any other call
with an fd, the flags of that fd's description just before the call; "" where no open (or F_GETFL) of the fd
was seen, or the call has no fd.

Cost: one Python step per fd-table event (opens, closes, dups, fcntls, clones, execs), then vectorized as-of
joins for the rest; a trace of a million reads and writes needs no Python per call.
"""

from __future__ import annotations

import polars as pl

# x86-64 open flag bits (include/uapi/asm-generic/fcntl.h with x86's values). O_SYNC = __O_SYNC | O_DSYNC.
OPEN_FLAG_BITS = {
    "O_WRONLY": 0o1, "O_RDWR": 0o2, "O_CREAT": 0o100, "O_EXCL": 0o200, "O_NOCTTY": 0o400, "O_TRUNC": 0o1000,
    "O_APPEND": 0o2000, "O_NONBLOCK": 0o4000, "O_DSYNC": 0o10000, "O_ASYNC": 0o20000, "O_DIRECT": 0o40000,
    "O_LARGEFILE": 0o100000, "O_DIRECTORY": 0o200000, "O_NOFOLLOW": 0o400000, "O_NOATIME": 0o1000000,
    "O_CLOEXEC": 0o2000000, "__O_SYNC": 0o4000000, "O_PATH": 0o10000000, "__O_TMPFILE": 0o20000000,
}
O_DSYNC, O_SYNC_BIT = OPEN_FLAG_BITS["O_DSYNC"], OPEN_FLAG_BITS["__O_SYNC"]
O_SYNC = O_SYNC_BIT | O_DSYNC
O_CLOEXEC = OPEN_FLAG_BITS["O_CLOEXEC"]
O_TMPFILE = OPEN_FLAG_BITS["__O_TMPFILE"] | OPEN_FLAG_BITS["O_DIRECTORY"]
ALIASES = {"O_SYNC": O_SYNC, "O_RSYNC": O_SYNC, "O_TMPFILE": O_TMPFILE, "O_NDELAY": OPEN_FLAG_BITS["O_NONBLOCK"],
           "FASYNC": OPEN_FLAG_BITS["O_ASYNC"], "O_RDONLY": 0, "O_FSYNC": O_SYNC}
# fcntl(2): what F_SETFL can change on Linux
SETFL_MASK = sum(OPEN_FLAG_BITS[n] for n in ("O_APPEND", "O_ASYNC", "O_DIRECT", "O_NOATIME", "O_NONBLOCK"))
CREAT_FLAGS = OPEN_FLAG_BITS["O_CREAT"] | OPEN_FLAG_BITS["O_WRONLY"] | OPEN_FLAG_BITS["O_TRUNC"]
CLONE_FILES = 0x400
CLOSE_RANGE_CLOEXEC = 1 << 2
OPEN_CALLS = ("open", "openat", "openat2", "creat")
DUP_CALLS = ("dup", "dup2", "dup3")
CLONE_CALLS = ("clone", "clone3", "fork", "vfork")
EXEC_CALLS = ("execve", "execveat")
TABLE_CALLS = (*OPEN_CALLS, *DUP_CALLS, *CLONE_CALLS, *EXEC_CALLS, "close", "close_range", "fcntl")
DUP_FCNTL = ("F_DUPFD", "F_DUPFD_CLOEXEC")


# arm and arm64 (asm/fcntl.h) swap four bits against x86: O_DIRECTORY 0o40000, O_NOFOLLOW 0o100000,
# O_DIRECT 0o200000, O_LARGEFILE 0o400000. Numbers from an arm kernel are mapped onto this module's bits.
ARM_TO_X86 = {0o40000: OPEN_FLAG_BITS["O_DIRECTORY"], 0o100000: OPEN_FLAG_BITS["O_NOFOLLOW"],
              0o200000: OPEN_FLAG_BITS["O_DIRECT"], 0o400000: OPEN_FLAG_BITS["O_LARGEFILE"]}


def arm_bits_as_x86(bits: pl.Expr) -> pl.Expr:
    """Open flags as an arm/arm64 kernel numbers them -> this module's (x86) bits."""
    bits = bits.cast(pl.Int64)
    out = bits & pl.lit(~sum(ARM_TO_X86), pl.Int64)
    for arm, x86 in ARM_TO_X86.items():
        out = out | pl.when((bits & pl.lit(arm, pl.Int64)) != 0).then(pl.lit(x86, pl.Int64)).otherwise(
            pl.lit(0, pl.Int64))
    return out


def flag_bits_of_names(text: str | None) -> int | None:
    """`O_WRONLY|O_CREAT|O_DSYNC` (strace's way, numbers allowed: `0x8000`, `0100`) -> bits; None if unknown."""
    if text is None:
        return None
    bits = 0
    for part in text.strip().split("|"):
        part = part.strip()
        if part in OPEN_FLAG_BITS:
            bits |= OPEN_FLAG_BITS[part]
        elif part in ALIASES:
            bits |= ALIASES[part]
        else:
            try:
                bits |= int(part, 0) if not (part.startswith("0") and part[1:].isdigit()) else int(part, 8)
            except ValueError:
                return None
    return bits


def flag_names(bits: int | None) -> str:
    """Bits -> strace's spelling: access mode, then the flags by bit value; O_SYNC, O_TMPFILE when whole."""
    if bits is None:
        return ""
    access = bits & 0o3
    names = [{0: "O_RDONLY", 1: "O_WRONLY", 2: "O_RDWR"}.get(access, "O_ACCMODE")]
    rest = bits & ~0o3
    if rest & O_SYNC == O_SYNC:
        rest &= ~O_SYNC_BIT  # O_DSYNC's place in the order prints O_SYNC
        sync_name = "O_SYNC"
    else:
        sync_name = "O_DSYNC"
    tmpfile = rest & O_TMPFILE == O_TMPFILE
    if tmpfile:
        rest &= ~O_TMPFILE
    for name, bit in sorted(OPEN_FLAG_BITS.items(), key=lambda kv: kv[1]):
        if bit > 0o3 and rest & bit:
            names.append(sync_name if name == "O_DSYNC" else name)
            rest &= ~bit
    if tmpfile:
        names.append("O_TMPFILE")
    if rest:
        names.append(f"{rest:#o}")
    return "|".join(names)


def track_open_flags(calls: pl.DataFrame) -> pl.Series:
    """open_flags (strace spelling, "" if unknown) for every row of calls, which are in call order."""
    n = len(calls)
    if not n:
        return pl.Series("open_flags", [], pl.Utf8)
    calls = calls.with_row_index("_seq").with_columns(pl.col("_seq").cast(pl.Int64))
    if "fd2" not in calls.columns:
        calls = calls.with_columns(fd2=pl.lit(None, pl.Int64))
    events = calls.filter(pl.col("syscall").is_in(TABLE_CALLS) & pl.col("ret").is_not_null() & (pl.col("ret") >= 0))
    pid_rows, fd_rows = _replay(events)
    pid_table = pl.DataFrame(pid_rows, schema={"_seq": pl.Int64, "pid": pl.Int64, "_table": pl.Int64},
                             orient="row").sort("_seq")
    fd_state = pl.DataFrame(fd_rows, schema={"_seq": pl.Int64, "_table": pl.Int64, "fd": pl.Int64,
                                             "_bits": pl.Int64}, orient="row").sort("_seq")
    probe = calls.select("_seq", pl.col("pid").cast(pl.Int64), pl.col("fd").cast(pl.Int64), "syscall",
                         pl.col("flag_bits").cast(pl.Int64))
    # the table a pid used just before each call; a pid never created under the trace uses its own (id = pid)
    probe = probe.join_asof(pid_table, on="_seq", by="pid", strategy="backward", allow_exact_matches=False,
                            check_sortedness=False).with_columns(pl.col("_table").fill_null(pl.col("pid")))
    probe = probe.join_asof(fd_state, on="_seq", by=["_table", "fd"], strategy="backward",
                            allow_exact_matches=False, check_sortedness=False)
    bits = pl.when(pl.col("syscall").is_in(OPEN_CALLS)).then(pl.col("flag_bits")).otherwise(pl.col("_bits"))
    got = probe.sort("_seq").select(bits.alias("b"))["b"]
    names = {b: flag_names(b) for b in got.unique().drop_nulls().to_list()}
    return got.replace_strict(names, default="", return_dtype=pl.Utf8).fill_null("").alias("open_flags")


class _Description:
    """An open file description: its flags are shared by every fd (in any table) that refers to it."""
    __slots__ = ("bits", "refs")

    def __init__(self, bits: int):
        self.bits = bits
        self.refs: set[tuple[int, int]] = set()  # (table id, fd)


def _replay(events: pl.DataFrame) -> tuple[list[tuple], list[tuple]]:
    """Run the fd-table events; return (seq, pid, table) assignments and (seq, table, fd, bits|None) states."""
    tables: dict[int, dict[int, tuple[_Description, bool]]] = {}  # table -> fd -> (description, cloexec)
    table_of: dict[int, int] = {}
    next_table = [1 << 40]  # ids of tables made here, above any pid (a pid's own first table has its pid as id)
    pid_rows: list[tuple] = []
    fd_rows: list[tuple] = []

    def table_for(pid: int) -> int:
        if pid not in table_of:
            table_of[pid] = pid
            tables.setdefault(pid, {})
        return table_of[pid]

    def set_fd(seq: int, table: int, fd: int, desc: _Description | None, cloexec: bool = False) -> None:
        fds = tables[table]
        old = fds.pop(fd, None)
        if old is not None:
            old[0].refs.discard((table, fd))
        if desc is not None:
            fds[fd] = (desc, cloexec)
            desc.refs.add((table, fd))
        fd_rows.append((seq, table, fd, None if desc is None else desc.bits))

    def new_table(seq: int, pid: int, fds: dict) -> None:
        tid = next_table[0]
        next_table[0] += 1
        tables[tid] = {}
        table_of[pid] = tid
        pid_rows.append((seq, pid, tid))
        for fd, (desc, cloexec) in fds.items():
            set_fd(seq, tid, fd, desc, cloexec)

    cols = ("_seq", "pid", "syscall", "fd", "fd2", "ret", "flag_bits", "fcntl_cmd")
    for seq, pid, name, fd, fd2, ret, bits, cmd in events.select(*cols).iter_rows():
        table = table_for(pid)
        fds = tables[table]
        if name in OPEN_CALLS:
            bits = CREAT_FLAGS if name == "creat" and bits is None else bits
            if bits is not None:
                set_fd(seq, table, ret, _Description(bits), bool(bits & O_CLOEXEC))
            else:
                set_fd(seq, table, ret, None)
        elif name in DUP_CALLS or (name == "fcntl" and cmd in DUP_FCNTL):
            src = fds.get(fd)
            if name == "dup2" and fd == ret:
                continue  # dup2(fd, fd) does nothing
            set_fd(seq, table, ret, src[0] if src else None, (cmd == "F_DUPFD_CLOEXEC"
                                                                or (name == "dup3" and bool((bits or 0) & O_CLOEXEC))))
        elif name == "close" and fd is not None:
            set_fd(seq, table, fd, None)
        elif name == "close_range" and fd is not None:
            last = fd2 if fd2 is not None else fd
            for f in [f for f in fds if fd <= f <= last]:
                if (bits or 0) & CLOSE_RANGE_CLOEXEC:
                    fds[f] = (fds[f][0], True)
                else:
                    set_fd(seq, table, f, None)
        elif name == "fcntl" and fd in fds:
            desc = fds[fd][0]
            if cmd == "F_SETFL" and bits is not None:
                desc.bits = (desc.bits & ~SETFL_MASK) | (bits & SETFL_MASK)
            elif cmd == "F_GETFL":
                desc.bits = ret
            else:
                continue
            for t, f in sorted(desc.refs):
                fd_rows.append((seq, t, f, desc.bits))
        elif name == "fcntl" and cmd == "F_GETFL" and fd is not None:
            set_fd(seq, table, fd, _Description(ret))  # an fd opened before the trace: now known
        elif name in CLONE_CALLS and ret > 0:
            if name in ("clone", "clone3") and (bits or 0) & CLONE_FILES:
                table_of[ret] = table
                pid_rows.append((seq, ret, table))
            else:
                new_table(seq, ret, dict(fds))
        elif name in EXEC_CALLS:
            new_table(seq, pid, {f: v for f, v in fds.items() if not v[1]})
    return pid_rows, fd_rows
