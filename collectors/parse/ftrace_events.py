"""ftrace events other than block ones: bodies (TP_printk text) -> the fsync, jbd2, fuse, syscall and fs tables.

Input: rows of (ts, cpu, pid, comm, event, body) whose header the ftrace text parser already read. One regex per
event family, written from the kernels' TP_printk formats (see specs/trace-formats.md section 2.3):

  ext4_sync_file_enter   dev %d,%d ino %lu parent %lu datasync %d
  ext4_sync_file_exit    dev %d,%d ino %lu ret %d
  f2fs_sync_file_enter   dev = (%d,%d), ino = %lu, pino = %lu, ...
  f2fs_sync_file_exit    dev = (%d,%d), ino = %lu, checkpoint is %s | cp_reason: %s, datasync = %d, ret = %d
  jbd2_run_stats         dev %d,%d tid %u wait %u request_delay %u running %u locked %u flushing %u logging %u
                         handle_count %u blocks %u blocks_logged %u
  jbd2_start_commit ...  dev %d,%d transaction %u sync %d [head %u]
  fuse_request_send      connection %u req %llu opcode %u (%s) len %u
  fuse_request_end       connection %u req %llu len %u error %d
  syscalls:sys_enter_*   name: 0x%08lx, ... (hex!)      sys_exit_*  0x%lx          (trace-cmd, format files)
  the kernel's own text  sys_write(fd: 1, buf: 7ffd, count: 5)   sys_write -> 0x5  (hex without 0x)
  raw_syscalls           NR %ld (%lx, %lx, ...) / NR %ld = %ld  (names are ABI-specific: kept as nr_<N>)
  android_fs_data*       entry_name %s, offset %llu, bytes %d, ... / ino %lu, offset %llu, bytes %d (android_fs.py)
  sched_*, task_*        prev_comm=%s prev_pid=%d ... prev_state=%s ==> next_comm=%s ... (sched.py)

Lines that match no pattern are counted per event, never dropped silently.
"""

from __future__ import annotations

import errno as errno_mod

import polars as pl

from mobiperf.collectors.parse.android_fs import ANDROID_FS_EVENTS, parse_android_fs_events
from mobiperf.collectors.parse.fd_flags import CLONE_FILES, arm_bits_as_x86, track_open_flags
from mobiperf.collectors.parse.sched import SCHED_EVENTS, parse_sched_events
from mobiperf.core.schema import FS_EVENT, FSYNC_EVENT, FUSE_EVENT, JBD2_COMMIT, JBD2_RUN_STATS, SYSCALL_IO

_DEV = r"dev (?P<major>\d+),(?P<minor>\d+) "
FSYNC_BODIES = {
    "ext4_sync_file_enter": ("ext4", "enter",
                             _DEV + r"ino (?P<ino>\d+) parent (?P<parent>\d+) datasync (?P<datasync>\d+)"),
    "ext4_sync_file_exit": ("ext4", "exit", _DEV + r"ino (?P<ino>\d+) ret (?P<ret>-?\d+)"),
    "f2fs_sync_file_enter": ("f2fs", "enter", r"dev = \((?P<major>\d+),(?P<minor>\d+)\), ino = (?P<ino>\d+),"),
    "f2fs_sync_file_exit": ("f2fs", "exit", r"dev = \((?P<major>\d+),(?P<minor>\d+)\), ino = (?P<ino>\d+), "
                            r"(?:checkpoint is|cp_reason:) (?P<reason>.*), datasync = (?P<datasync>\d+), "
                            r"ret = (?P<ret>-?\d+)"),
}
RUN_STATS_FIELDS = ("wait", "request_delay", "running", "locked", "flushing", "logging")
RUN_STATS_BODY = (_DEV + r"tid (?P<tid>\d+) " + " ".join(f"{f} (?P<{f}>\\d+)" for f in RUN_STATS_FIELDS)
                  + r" handle_count (?P<handle_count>\d+) blocks (?P<blocks>\d+) blocks_logged (?P<blocks_logged>\d+)")
JBD2_PHASES = {"jbd2_start_commit": "start", "jbd2_commit_locking": "locking", "jbd2_commit_flushing": "flushing",
               "jbd2_commit_logging": "logging", "jbd2_end_commit": "end", "jbd2_drop_transaction": "drop"}
JBD2_COMMIT_BODY = _DEV + r"transaction (?P<tid>\d+) sync (?P<sync>\d+)(?: head (?P<head>\d+))?"
FUSE_BODIES = {
    "fuse_request_send": ("send", r"connection (?P<conn>\d+) req (?P<unique>\d+) opcode (?P<opcode>\d+) "
                                  r"\((?P<opname>[^)]*)\) len (?P<len>\d+)"),
    "fuse_request_end": ("end", r"connection (?P<conn>\d+) req (?P<unique>\d+) len (?P<len>\d+) "
                                r"error (?P<error>-?\d+)"),
}
FS_EVENT_PREFIXES = ("ext4_", "f2fs_", "writeback_", "jbd2_", "android_fs_")
SYSCALL_ARG_BYTES = {  # which argument of an IO syscall is its size and which its file offset
    "read": ("count", None), "write": ("count", None), "pread64": ("count", "pos"),
    "pwrite64": ("count", "pos"), "readv": ("vlen", None), "writev": ("vlen", None),
    "preadv": ("vlen", "pos_l"), "pwritev": ("vlen", "pos_l"), "fallocate": ("len", "offset"),
    "sync_file_range": ("nbytes", "offset"),
}
# Every event this module reads (the ftrace text parser hands it these rows).
KNOWN_EVENTS = {*FSYNC_BODIES, "jbd2_run_stats", *JBD2_PHASES, *FUSE_BODIES, *ANDROID_FS_EVENTS, *SCHED_EVENTS}


def is_known_event(name: str) -> bool:
    return name in KNOWN_EVENTS or name.startswith(FS_EVENT_PREFIXES) or name.startswith("sys_")


def parse_other_events(head: pl.DataFrame, rep: int) -> tuple[dict[str, pl.DataFrame], dict[str, int]]:
    """Tables of the non-block events in head (ts, cpu, pid, comm, event, body); counts of unparsed lines."""
    tables: dict[str, pl.DataFrame] = {}
    unparsed: dict[str, int] = {}
    if not len(head):
        return tables, unparsed
    head = head.with_columns(pl.col("body").str.strip_chars())
    events = set(head["event"].unique().to_list())

    fsync = []
    for event, (fs, phase, pattern) in FSYNC_BODIES.items():
        if event in events:
            got = _extract(head, event, pattern, unparsed)
            fsync.append(got.select(
                *_ev_cols(rep), pl.lit(fs).alias("fs"), pl.lit(phase).alias("phase"), *_dev_cols(),
                pl.col("ino").cast(pl.Int64, strict=False),
                _opt_int(got, "datasync", pl.Int32), _opt_int(got, "ret", pl.Int32)))
    if fsync:
        tables["fsync_event"] = FSYNC_EVENT.validate(pl.concat(fsync).sort("ts", maintain_order=True))

    if "jbd2_run_stats" in events:
        got = _extract(head, "jbd2_run_stats", RUN_STATS_BODY, unparsed)
        tables["jbd2_run_stats"] = JBD2_RUN_STATS.validate(got.select(
            pl.lit(rep, pl.Int32).alias("rep"), "ts", *_dev_cols(), pl.col("tid").cast(pl.Int64, strict=False),
            *[pl.col(f).cast(pl.Int64, strict=False).alias(f"{f}_ms") for f in RUN_STATS_FIELDS],
            *[pl.col(f).cast(pl.Int64, strict=False) for f in ("handle_count", "blocks", "blocks_logged")]))

    commits = []
    for event, phase in JBD2_PHASES.items():
        if event in events:
            got = _extract(head, event, JBD2_COMMIT_BODY, unparsed)
            commits.append(got.select(
                *_ev_cols(rep), pl.lit(phase).alias("phase"), *_dev_cols(),
                pl.col("tid").cast(pl.Int64, strict=False), (pl.col("sync").cast(pl.Int64, strict=False) != 0)
                .alias("is_sync"), pl.col("head").cast(pl.Int64, strict=False)))
    if commits:
        tables["jbd2_commit"] = JBD2_COMMIT.validate(pl.concat(commits).sort("ts", maintain_order=True))

    fuse = []
    for event, (phase, pattern) in FUSE_BODIES.items():
        if event in events:
            got = _extract(head, event, pattern, unparsed)
            fuse.append(got.select(
                *_ev_cols(rep), pl.lit(phase).alias("phase"), pl.col("conn").cast(pl.Int64, strict=False)
                .alias("connection"), pl.col("unique").cast(pl.Int64, strict=False),
                _opt_int(got, "opcode", pl.Int32), (pl.col("opname") if "opname" in got.columns
                                                    else pl.lit(None, pl.Utf8)).alias("opcode_name"),
                pl.col("len").cast(pl.Int64, strict=False).alias("len_bytes"), _opt_int(got, "error", pl.Int32)))
    if fuse:
        tables["fuse_event"] = FUSE_EVENT.validate(pl.concat(fuse, how="vertical_relaxed")
                                                   .sort("ts", maintain_order=True))

    android_fs = parse_android_fs_events(head, rep, unparsed)  # android_fs.py
    if android_fs is not None:
        tables["android_fs_event"] = android_fs
    tables.update(parse_sched_events(head, rep, unparsed))  # sched.py

    ev = pl.col("event")
    fs_rows = head.filter(pl.any_horizontal(ev.str.starts_with(p) for p in FS_EVENT_PREFIXES)
                          & ~ev.is_in(list(KNOWN_EVENTS)))
    if len(fs_rows):
        dev = fs_rows["body"].str.extract_groups(r"dev =? ?\(?(?P<major>\d+)[,:](?P<minor>\d+)").struct.unnest()
        ino = fs_rows["body"].str.extract(r"ino[ =:]+(?:0x)?(\d+)", 1)
        tables["fs_event"] = FS_EVENT.validate(pl.concat([fs_rows, dev], how="horizontal").with_columns(
            ino=ino.cast(pl.Int64, strict=False).fill_null(-1)).select(
            *_ev_cols(rep), "event", *[pl.col(c).cast(pl.Int32, strict=False).fill_null(-1).alias(f"dev_{c}")
                                       for c in ("major", "minor")], "ino", "body"))

    sys_rows = head.filter(pl.col("event").str.starts_with("sys_"))
    if len(sys_rows):
        tables["syscall_io"], bad = _syscalls(sys_rows, rep)
        unparsed.update(bad)
    return tables, unparsed


def _extract(head: pl.DataFrame, event: str, pattern: str, unparsed: dict[str, int]) -> pl.DataFrame:
    rows = head.filter(pl.col("event") == event)
    groups = rows["body"].str.extract_groups(pattern).struct.unnest()
    got = pl.concat([rows.drop("body"), groups], how="horizontal")
    first = groups.columns[0]
    ok = got.filter(pl.col(first).is_not_null())
    if len(ok) < len(got):
        unparsed[event] = unparsed.get(event, 0) + len(got) - len(ok)
    return ok


def _ev_cols(rep: int) -> list[pl.Expr]:
    return [pl.lit(rep, pl.Int32).alias("rep"), pl.col("ts"), pl.col("cpu"), pl.col("pid"), pl.col("comm")]


def _dev_cols() -> list[pl.Expr]:
    return [pl.col("major").cast(pl.Int32, strict=False).alias("dev_major"),
            pl.col("minor").cast(pl.Int32, strict=False).alias("dev_minor")]


def _opt_int(df: pl.DataFrame, name: str, dtype) -> pl.Expr:
    return (pl.col(name).cast(dtype, strict=False) if name in df.columns else pl.lit(None, dtype)).alias(name)


def _signed_hex(text: pl.Expr) -> pl.Expr:
    """A 64-bit hex word as the signed long the kernel meant (sys_exit prints `0x%lx` of a long)."""
    u = text.str.to_integer(base=16, dtype=pl.UInt64, strict=False)
    return pl.when(u > (1 << 63) - 1).then(-((~u) + 1).cast(pl.Int64, strict=False)).otherwise(
        u.cast(pl.Int64, strict=False))


def known_event_expr() -> pl.Expr:
    """True for the events parse_other_events reads."""
    ev = pl.col("event")
    return (ev.is_in(list(KNOWN_EVENTS)) | pl.any_horizontal(ev.str.starts_with(p) for p in FS_EVENT_PREFIXES)
            | ev.str.starts_with("sys_"))


def _hex_arg(name: str) -> pl.Expr:
    return (pl.col("body").str.extract(rf"(?:^|\(|, ){name}: (?:0x)?([0-9a-fA-F]+)", 1)
            .str.to_integer(base=16, strict=False))


def _signed_int(value: pl.Expr) -> pl.Expr:
    """An int argument printed as the unsigned 32-bit word (`dfd: 0xffffff9c` is AT_FDCWD, -100)."""
    return pl.when((value >= 1 << 31) & (value < 1 << 32)).then(value - (1 << 32)).otherwise(value)


def _syscalls(rows: pl.DataFrame, rep: int) -> tuple[pl.DataFrame, dict[str, int]]:
    """sys_enter_X / sys_exit_X pairs (per thread, in time order) -> syscall_io rows; raw_syscalls as nr_<N>.

    The strace columns where the kernel's text has them: fd from the fd/fildes/oldfd/dfd argument (AT_FDCWD,
    printed as 0xffffff9c, is -100 as in strace), request_bytes/offset_bytes from the arguments, ret from the exit
    (a negative errno with its name), and open_flags followed per fd by fd_flags.py from openat/open's flags,
    dup*, fcntl (cmd F_SETFL/F_GETFL/F_DUPFD*), close, close_range, clone's clone_flags and execve, which the
    syscalls event set of collectors/ftrace.py enables for this. Order: rows are placed at their enter, so a
    clone is seen before its child's first call even when the child runs before the parent's exit event.

    What stays unknown, measured on this machine (6.18) against strace on the same run: path and new_path
    (filename/oldname/newname are printed as user pointers, `filename: 0x7f0d6383c0b1`; the kernel reads no
    user memory in these events; an event probe fetching `+0($filename):ustring` would, but writing any `e:`
    definition to dynamic_events fails with EINVAL on this kernel), so file types are `unknown` at the syscall
    layer without strace; openat2's
    flags (behind the `how` pointer: its fd's flags stay unknown) and clone3's flags (behind a pointer: taken as
    a thread's, sharing the fd table, which is what pthread_create does; a posix_spawn child's fd changes before
    its exec are then wrongly shared with the parent); a thread or process that started before tracing (its
    table starts empty, the text carries no tgid). The numbers are decoded with x86's open flag bits; arm and
    arm64 swap O_DIRECT/O_DIRECTORY and O_NOFOLLOW/O_LARGEFILE, recognised when data is read or written
    through an fd that x86 numbering would call a directory (EISDIR on every kernel), then decoded as arm's. A
    trace with neither O_DIRECT IO nor such proof keeps x86's names, which changes no sync mode. Durations are
    on the trace clock, a few µs shorter than strace's (no ptrace stops)."""
    rows = _syscall_args(rows)
    bad = int(rows.filter(pl.col("syscall").is_null()).height)
    out = _pair_enter_exit(rows.filter(pl.col("syscall").is_not_null()))
    return SYSCALL_IO.validate(_syscall_io_table(_with_open_flags(out), rep)), ({"sys_enter/exit": bad} if bad else {})


_FLAG_ARGS = ("flag_bits", "fcntl_cmd", "fd2")


def _syscall_args(rows: pl.DataFrame) -> pl.DataFrame:
    """Each enter or exit event with its syscall's name (nr_<N> for raw_syscalls; null when the event is neither),
    is_enter, and the arguments read from its text: fd, size, off, ret and the flag arguments fd_flags.py
    follows."""
    kernel_style = ~pl.col("event").str.contains(r"^sys_(?:enter|exit)(?:_|$)")
    rows = rows.with_columns(
        is_enter=pl.when(kernel_style).then(pl.col("body").str.starts_with("("))
        .otherwise(pl.col("event").str.starts_with("sys_enter")),
        syscall=pl.when(pl.col("event").is_in(["sys_enter", "sys_exit"]))
        .then(pl.lit("nr_") + pl.col("body").str.extract(r"^NR (-?\d+)", 1))
        .when(kernel_style).then(pl.col("event").str.slice(4))
        .otherwise(pl.col("event").str.replace(r"^sys_(enter|exit)_", "")),
    )
    fd_expr = pl.when(pl.col("event") == "sys_enter").then(
        pl.col("body").str.extract(r"^NR -?\d+ \(([0-9a-fA-F]+)", 1).str.to_integer(base=16, strict=False)
    ).otherwise(_signed_int(pl.coalesce(_hex_arg("fd"), _hex_arg("fildes"), _hex_arg("oldfd"), _hex_arg("dfd"),
                                        _hex_arg("olddfd"))))
    size_expr = pl.lit(None, pl.Int64)
    off_expr = pl.lit(None, pl.Int64)
    for name, (size_arg, off_arg) in SYSCALL_ARG_BYTES.items():
        size_expr = pl.when(pl.col("syscall") == name).then(_hex_arg(size_arg)).otherwise(size_expr)
        if off_arg:
            off_expr = pl.when(pl.col("syscall") == name).then(_hex_arg(off_arg)).otherwise(off_expr)
    ret_expr = pl.when(pl.col("event") == "sys_exit").then(
        pl.col("body").str.extract(r"= (-?\d+)$", 1).cast(pl.Int64, strict=False)
    ).otherwise(_signed_hex(pl.col("body").str.extract(r"^(?:-> )?(?:0x)?([0-9a-fA-F]{1,16})$", 1)))
    return rows.with_columns(fd=fd_expr.cast(pl.Int64, strict=False), size=size_expr, off=off_expr, ret=ret_expr,
                             **_syscall_flag_args())


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


def _with_open_flags(out: pl.DataFrame) -> pl.DataFrame:
    """open_flags of each call's fd, followed through the calls in the order they enter (a clone enters before its
    child runs, an open before its fd is used); decoded as arm's when the trace proves an arm kernel."""
    out = out.with_columns(open_flags=track_open_flags(out.select("pid", "syscall", "fd", "ret", *_FLAG_ARGS)))
    # The numbers are x86's unless the trace proves an arm kernel: data read or written through an fd that x86
    # numbering calls O_DIRECTORY (impossible: read/write on a directory is EISDIR) is arm's O_DIRECT.
    data_io = pl.col("syscall").is_in(["read", "write", "pread64", "pwrite64", "readv", "writev", "preadv",
                                       "pwritev", "preadv2", "pwritev2"]) & (pl.col("ret") > 0)
    if out.filter(data_io & pl.col("open_flags").str.contains("O_DIRECTORY", literal=True)).height:
        as_x86 = out.with_columns(
            flag_bits=pl.when(pl.col("syscall").is_in(["open", "openat"])
                              | (pl.col("fcntl_cmd") == "F_SETFL")).then(arm_bits_as_x86(pl.col("flag_bits")))
            .otherwise(pl.col("flag_bits")),
            ret=pl.when(pl.col("fcntl_cmd") == "F_GETFL").then(arm_bits_as_x86(pl.col("ret"))).otherwise(pl.col("ret")))
        out = out.with_columns(open_flags=track_open_flags(as_x86.select("pid", "syscall", "fd", "ret", *_FLAG_ARGS)))
    return out


def _syscall_io_table(out: pl.DataFrame, rep: int) -> pl.DataFrame:
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
        pl.lit("ftrace").alias("source"), "open_flags", pl.lit("").alias("new_path"))


FCNTL_CMDS = {0: "F_DUPFD", 1: "F_GETFD", 2: "F_SETFD", 3: "F_GETFL", 4: "F_SETFL", 1030: "F_DUPFD_CLOEXEC"}


def _syscall_flag_args() -> dict[str, pl.Expr]:
    """The arguments fd_flags.py follows, from the numbers the kernel prints: open flags (open, openat; creat
    implies its own; openat2's are behind a pointer), fcntl's cmd and argument, dup3's flags, clone's flags
    (clone3's are behind a pointer: taken as a thread's, CLONE_FILES) and close_range's range and flags."""
    call = pl.col("syscall")
    cmd = _hex_arg("cmd").replace_strict(FCNTL_CMDS, default=None, return_dtype=pl.Utf8)
    bits = (pl.when(call.is_in(["open", "openat", "dup3", "close_range"])).then(_hex_arg("flags"))
            .when(call == "fcntl").then(_hex_arg("arg"))
            .when(call == "clone").then(_hex_arg("clone_flags"))
            .when(call == "clone3").then(pl.lit(CLONE_FILES)))
    return {"flag_bits": bits.cast(pl.Int64, strict=False), "fcntl_cmd": pl.when(call == "fcntl").then(cmd),
            "fd2": pl.when(call == "close_range").then(_hex_arg("max_fd")).cast(pl.Int64, strict=False)}
