"""strace logs (`strace -f -ttt -T -y`, strace 4.x to 6.x) -> syscall_io rows (source "strace").

Logs written without -ttt (time of day with -t/-tt, or no time at all) and without -T (no durations) are read
too, for counts, sizes and files, with a warning saying what is missing (ts null without any time, dur null
without -T).

Line forms (specs/trace-formats.md section 3), each optionally preceded by the pid column of -f:
    1795333660.117527 pwrite64(3</data/f>, "..."..., 512, 4096) = 512 <0.000019>
    1795333660.117527 fsync(3</data/f> <unfinished ...>
    1795333660.238583 <... fsync resumed>) = 0 <0.000019>
    1795333660.145715 exit_group(0)   = ?
    1795333660.145860 +++ exited with 0 +++        /   --- SIGCHLD {...} ---      (not calls: skipped)
An `<unfinished ...>` line and the next `<... name resumed>` of the same pid are one call: the start time and
first arguments come from the former, the rest, the return value and the duration from the latter.
Fields: fd is the first argument when -y annotated it (`3</path>`; AT_FDCWD is -100), path the annotation (for
open calls the returned fd's when there is one, else their path argument, made absolute as below);
request_bytes/offset_bytes from the trailing numeric arguments of the read/write family and fallocate (ftruncate:
offset_bytes the new length); ret the return value (-1 with errno for failures, null for `?`).
unlink/unlinkat/rename/renameat/renameat2/mkdir/mkdirat/rmdir: path (and new_path, a rename's destination) is the
path argument made
absolute with the dirfd's annotation, else with the process's working directory (the AT_FDCWD annotation of its
other calls, per chdir segment); a relative path stays relative when the process showed no AT_FDCWD at all.
open_flags: each fd's flags followed through open/openat/openat2/creat, dup*, fcntl (F_SETFL, F_GETFL, F_DUPFD*),
close, close_range, clone/clone3/fork/vfork (CLONE_FILES from the printed flags) and execve, by fd_flags.py.

Compared with the ftrace syscalls events on the same run (tests/system/test_syscall_sync_mode_run.py: dd oflag=dsync and
oflag=direct, rm; 6.18 kernel, strace 6.1): the same calls of the same pids get the same fd, sizes, return
values and open flags, hence the same sync modes. What differs: strace sees every call (607 rows against 362
for the event set) and the workload wrapper's shell before ftrace's tracing_on; strace has every fd's path,
ftrace none; strace's comm is empty; strace stamps the wall clock at µs (aligned to the trace clock by
analyzers/syscall.py through trace markers), its durations are a few µs longer (median 1611 vs 1592 µs for the
O_DSYNC writes, 209 vs 202 µs for O_DIRECT, load average 7); strace decodes openat2's and clone3's flags, which
ftrace sees only as pointers.
The whole file is parsed with vectorized Polars regex. Lines that are neither calls nor signal/exit notes are
counted as unparsed; a cut last line is dropped with a warning.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from mobiperf.collectors.parse.fd_flags import (CLONE_FILES, CLOSE_RANGE_CLOEXEC, TABLE_CALLS, flag_bits_of_names,
                                                track_open_flags)
from mobiperf.core.errors import ParseError
from mobiperf.core.schema import SYSCALL_IO

# [pid] (-f: `123 ` in a log file, `[pid   123] ` on a terminal), then the time: -ttt epoch.usecs, -t/-tt
# HH:MM:SS[.usecs] (time of day), or none
LINE = (r"^(?:\[pid\s+(?P<pid_b>\d+)\]\s+|(?P<pid>\d+)\s+)?(?:(?P<secs>\d+)\.(?P<usecs>\d+) |"
        r"(?P<hh>\d\d):(?P<mm>\d\d):(?P<ss>\d\d)(?:\.(?P<frac>\d+))? )?(?P<rest>.*)$")
RESUMED = r"^<\.\.\. (?P<name>\w+) resumed>(?P<args>.*)$"
UNFINISHED = r"^(?P<name>\w+)\((?P<args>.*?) ?<unfinished \.\.\.>\s*$"
CALL = r"^(?P<name>\w+)\((?P<args>.*)$"
TAIL = (r"\)\s+= (?P<ret>-?\d+|0x[0-9a-fA-F]+|\?)(?:<(?P<ret_path>[^>]*)>)?(?: (?P<errno>E[A-Z0-9_]+))?"
        r"(?: \([^)]*\))?(?: \[[^\]]*\])?(?: <(?P<dur>\d+\.\d+)>)?\s*$")
# a deleted file's annotation is followed by `(deleted)`: `6</data/db-shm>(deleted)`
FIRST_FD = r"^(?P<fd>-?\d+|AT_FDCWD)(?:<(?P<path>[^>]*)>(?:\(deleted\))?)?(?:,|\)| <unfinished|$)"
# Calls whose first argument is a file descriptor even where -y could not name it (a closed or bad fd).
FD_CALLS = {"read", "write", "pread64", "pwrite64", "readv", "writev", "preadv", "pwritev", "preadv2",
            "pwritev2", "fsync", "fdatasync", "sync_file_range", "fallocate", "close", "lseek", "fstat",
            "ftruncate", "syncfs", "fcntl", "ioctl", "getdents64", "mmap", "dup", "dup2", "dup3", "close_range"}
TRAILING = {  # syscall: (pattern over the arguments' end, what its groups are)
    "read": (r", (?P<a>\d+)\)\s+=", ("request_bytes",)),
    "write": (r", (?P<a>\d+)\)\s+=", ("request_bytes",)),
    "pread64": (r", (?P<a>\d+), (?P<b>\d+)\)\s+=", ("request_bytes", "offset_bytes")),
    "pwrite64": (r", (?P<a>\d+), (?P<b>\d+)\)\s+=", ("request_bytes", "offset_bytes")),
    "fallocate": (r", (?P<a>\d+), (?P<b>\d+)\)\s+=", ("offset_bytes", "request_bytes")),
    "ftruncate": (r", (?P<a>\d+)\)\s+=", ("offset_bytes",)),  # the new length
}
# The flags argument of each call fd_flags.py follows (open flags, F_SETFL's, dup3's, clone's, close_range's).
_DIRFD = r"(?:AT_FDCWD|-?\d+)(?:<[^>]*>)?"
_STR = r'"(?:[^"\\]|\\.)*"(?:\.\.\.)?'
FLAG_ARGS = {
    "open": rf"^{_STR}, (?P<flags>[^,)]+)",
    "openat": rf"^{_DIRFD}, {_STR}, (?P<flags>[^,)]+)",
    "openat2": rf"^{_DIRFD}, {_STR}, \{{flags=(?P<flags>[^,}}]+)",
    "dup3": r"^-?\d+(?:<[^>]*>)?, -?\d+(?:<[^>]*>)?, (?P<flags>[^,)]+)",
}
FCNTL_ARGS = r"^-?\d+(?:<[^>]*>)?, (?P<cmd>F_[A-Z0-9_]+)(?:, (?P<arg>[^)]*))?\)"
CLOSE_RANGE_ARGS = r"^-?\d+(?:<[^>]*>)?, (?P<last>\d+|~0U?)(?:, (?P<flags>[^)]*))?\)"
# Calls that name files by path strings: the path (and a rename's new path) made absolute from the dirfd's -y
# annotation, else from the process's working directory (the latest AT_FDCWD annotation of that pid).
PATH_CALLS = ("unlink", "unlinkat", "rename", "renameat", "renameat2", "mkdir", "mkdirat", "rmdir")
OPEN_PATH_CALLS = ("open", "openat", "openat2", "creat")  # path: the opened fd's (-y), else the argument
PATH_ARGS = (rf'^(?:{_DIRFD.replace("<[^>]*>", "<(?P<d1>[^>]*)>")}, )?"(?P<p1>(?:[^"\\]|\\.)*)"(?:\.\.\.)?'
             rf'(?:, (?:{_DIRFD.replace("<[^>]*>", "<(?P<d2>[^>]*)>")}, )?"(?P<p2>(?:[^"\\]|\\.)*)")?')


@dataclass
class StraceTable:
    syscall_io: pl.DataFrame
    lines: int = 0
    unparsed: int = 0
    unpaired: int = 0
    truncated_at: int | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def summary(self) -> dict:
        return {"lines": self.lines, "calls": len(self.syscall_io), "unparsed": self.unparsed,
                "unpaired": self.unpaired}


def parse_strace(path: Path, rep: int = 0) -> StraceTable:
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise ParseError(path, 0, f"cannot read: {e.strerror}") from None
    text = data.decode("utf-8", errors="replace")
    lines = pl.Series("line", text.split("\n"), dtype=pl.Utf8)
    truncated_at = None
    warnings = []
    if not text.endswith("\n") and text:
        # The last line has no newline: strace was cut. Keep it only if it is a complete call.
        last = lines[-1]
        if not pl.Series([last]).str.contains(TAIL + "|^\\S+ \\S+ (\\+\\+\\+|---)")[0]:
            truncated_at = len(data) - len(data.rsplit(b"\n", 1)[-1])
            lines = lines.head(len(lines) - 1)
            warnings.append(f"{path}: cut last line at byte {truncated_at} (truncated file); every complete "
                            "line before it was kept")
    df = lines.to_frame().with_row_index("line_no").filter(pl.col("line").str.strip_chars() != "")
    n_lines = len(df)
    head = df.with_columns(pl.col("line").str.extract_groups(LINE).alias("h")).unnest("h")
    no_head = head.filter(pl.col("rest").is_null())
    head = head.filter(pl.col("rest").is_not_null()).with_columns(
        pid=pl.coalesce(pl.col("pid"), pl.col("pid_b")).cast(pl.Int32, strict=False).fill_null(0),
        ts=_timestamp_ns())
    warnings += _timing_notes(path, head)
    notes = pl.col("rest").str.starts_with("+++") | pl.col("rest").str.starts_with("---")
    head = head.filter(~notes)
    resumed = head.with_columns(pl.col("rest").str.extract_groups(RESUMED).alias("g")).unnest("g") \
        .filter(pl.col("name").is_not_null())
    rest = head.filter(~pl.col("rest").str.starts_with("<... "))
    unfinished = rest.with_columns(pl.col("rest").str.extract_groups(UNFINISHED).alias("g")).unnest("g") \
        .filter(pl.col("name").is_not_null())
    calls = rest.filter(~pl.col("rest").str.contains(r"<unfinished \.\.\.>\s*$")) \
        .with_columns(pl.col("rest").str.extract_groups(CALL).alias("g")).unnest("g")
    unparsed = int(calls["name"].is_null().sum()) + len(no_head)
    if n_lines and unparsed == n_lines:
        raise ParseError(path, int(df["line_no"][0]) + 1, f"not strace output: {df['line'][0][:80]!r}")
    calls = calls.filter(pl.col("name").is_not_null()).select("line_no", "pid", "ts", "name", "args")

    # One outstanding call per thread: a resumed line belongs to the latest unfinished line of its pid.
    pieces = pl.concat([
        unfinished.select("line_no", "pid", "ts", "name", "args", pl.lit(True).alias("is_start")),
        resumed.select("line_no", "pid", "ts", "name", "args", pl.lit(False).alias("is_start")),
    ]).sort(["pid", "line_no"])
    pieces = pieces.with_columns(
        prev_start=pl.col("is_start").shift(1).over("pid"), prev_name=pl.col("name").shift(1).over("pid"),
        prev_ts=pl.col("ts").shift(1).over("pid"), prev_args=pl.col("args").shift(1).over("pid"),
        prev_line=pl.col("line_no").shift(1).over("pid"))
    joined = pieces.filter(~pl.col("is_start") & pl.col("prev_start").fill_null(False)
                           & (pl.col("prev_name") == pl.col("name"))).select(
        pl.col("prev_line").alias("line_no"), "pid", pl.col("prev_ts").alias("ts"), "name",
        (pl.col("prev_args") + pl.when(pl.col("args").str.starts_with(")")).then(pl.lit("")).otherwise(pl.lit(" "))
         + pl.col("args")).alias("args"))
    unpaired = len(unfinished) + len(resumed) - 2 * len(joined)
    # A call still running when strace stopped: its start is known, its end is not (dur and ret stay null).
    running = unfinished.join(joined.select("line_no"), on="line_no", how="anti").select(
        "line_no", "pid", "ts", "name", "args")
    calls = pl.concat([calls, joined, running]).sort("line_no")
    table = _call_columns(calls, rep)
    if unpaired:
        warnings.append(f"{path}: {unpaired} unfinished/resumed halves without their partner (calls still "
                        "running when strace stopped, or a cut log)")
    return StraceTable(syscall_io=table, lines=n_lines, unparsed=unparsed, unpaired=unpaired,
                       truncated_at=truncated_at, warnings=warnings)


def _timestamp_ns() -> pl.Expr:
    """ns of the -ttt epoch time, or of the -t/-tt time of day; null when the log has no time."""
    def num(c: str) -> pl.Expr:
        return pl.col(c).cast(pl.Int64, strict=False)

    def nanos(frac: str) -> pl.Expr:
        return pl.col(frac).fill_null("0").str.pad_end(9, "0").str.slice(0, 9).cast(pl.Int64, strict=False)

    day = ((num("hh") * 60 + num("mm")) * 60 + num("ss")) * 1_000_000_000 + nanos("frac")
    return pl.when(pl.col("secs").is_not_null()).then(num("secs") * 1_000_000_000 + nanos("usecs")).otherwise(day)


def _timing_notes(path: Path, head: pl.DataFrame) -> list[str]:
    """What a log without -ttt and -T cannot tell, said once."""
    calls = head.filter(~pl.col("rest").str.starts_with("+++") & ~pl.col("rest").str.starts_with("---"))
    if not len(calls):
        return []
    if calls["ts"].is_null().all():
        return [f"{path}: strace log without timestamps (strace -ttt): read for counts and sizes; times, durations "
                "and the alignment with the trace clock are missing"]
    notes = []
    if calls["secs"].is_null().all():
        notes.append(f"{path}: strace log with the time of day (-t/-tt), not -ttt: times are not on the trace "
                     "clock and a log that passes midnight goes back in time")
    if not calls["rest"].str.contains(r"<\d+\.\d+>\s*$").any():
        notes.append(f"{path}: strace log without durations (strace -T): system call latencies are missing")
    return notes


def _call_columns(calls: pl.DataFrame, rep: int) -> pl.DataFrame:
    tail = calls["args"].str.extract_groups(TAIL).struct.unnest()
    first = calls["args"].str.extract_groups(FIRST_FD).struct.unnest()
    df = pl.concat([calls, tail, first.rename({"path": "fd_path"})], how="horizontal")
    size = pl.lit(None, pl.Int64)
    offset = pl.lit(None, pl.Int64)
    for name, (pattern, roles) in TRAILING.items():
        groups = pl.col("args").str.extract_groups(pattern)
        for group, role in zip(("a", "b"), roles):
            value = groups.struct.field(group).cast(pl.Int64, strict=False)
            if role == "request_bytes":
                size = pl.when(pl.col("name") == name).then(value).otherwise(size)
            else:
                offset = pl.when(pl.col("name") == name).then(value).otherwise(offset)
    ret = pl.when(pl.col("ret").str.starts_with("0x")).then(
        pl.col("ret").str.slice(2).str.to_integer(base=16, strict=False)).otherwise(
        pl.col("ret").cast(pl.Int64, strict=False))
    fd = pl.when(pl.col("fd") == "AT_FDCWD").then(-100).otherwise(pl.col("fd").cast(pl.Int64, strict=False))
    fd = pl.when(pl.col("fd_path").is_not_null() | pl.col("name").is_in(list(FD_CALLS))).then(fd)
    df = df.with_columns(_ret=ret, _fd=fd)
    df = pl.concat([df, _flag_columns(df), _path_columns(df)], how="horizontal")
    out = df.select(
        pl.lit(rep, pl.Int32).alias("rep"), "ts",
        (pl.col("dur").str.split_exact(".", 1).struct.field("field_0").cast(pl.Int64, strict=False) * 1_000_000_000
         + pl.col("dur").str.split_exact(".", 1).struct.field("field_1").str.pad_end(9, "0").str.slice(0, 9)
         .cast(pl.Int64, strict=False)).alias("dur"),
        "pid", pl.lit("").alias("comm"), pl.col("name").alias("syscall"),
        pl.when(pl.col("_fd").is_between(-(1 << 31), (1 << 31) - 1)).then(pl.col("_fd")).otherwise(-1)
        .fill_null(-1).cast(pl.Int32).alias("fd"),
        pl.when(pl.col("name").is_in(OPEN_PATH_CALLS))
        .then(pl.coalesce(pl.col("ret_path"), pl.col("_open_path"), pl.col("fd_path"), pl.lit("")))
        .otherwise(pl.coalesce(pl.col("_arg_path"), pl.col("ret_path"), pl.col("fd_path"), pl.lit(""))).alias("path"),
        size.fill_null(-1).alias("request_bytes"), offset.fill_null(-1).alias("offset_bytes"),
        pl.col("_ret").alias("ret"), pl.col("errno").fill_null("").alias("errno"), pl.lit("strace").alias("source"),
        pl.col("open_flags"), pl.col("_arg_new_path").fill_null("").alias("new_path"))
    return SYSCALL_IO.validate(out)


def _flag_columns(df: pl.DataFrame) -> pl.DataFrame:
    """open_flags of every call (fd_flags.py), from the flag arguments strace prints by name."""
    name, args = pl.col("name"), pl.col("args")
    text = pl.lit(None, pl.Utf8)
    for call, pattern in FLAG_ARGS.items():
        text = pl.when(name == call).then(args.str.extract(pattern, 1)).otherwise(text)
    fcntl = args.str.extract_groups(FCNTL_ARGS)
    closing = args.str.extract_groups(CLOSE_RANGE_ARGS)
    # the regexes run on the fd-table calls only; the reads and writes just look their fd up
    w = df.with_row_index("_row").filter(name.is_in(TABLE_CALLS)).select(
        "_row", "name", "args", fcntl_cmd=pl.when(name == "fcntl").then(fcntl.struct.field("cmd")),
        _arg=fcntl.struct.field("arg"), _close_flags=closing.struct.field("flags"),
        _last=closing.struct.field("last"), _text=text)
    w = w.with_columns(_text=pl.when(pl.col("fcntl_cmd") == "F_SETFL").then(pl.col("_arg"))
                       .otherwise(pl.col("_text")).str.strip_chars())
    names = {t: flag_bits_of_names(t) for t in w["_text"].unique().drop_nulls().to_list()}
    bits = (pl.when(name.is_in(["clone", "clone3"])).then(
                pl.when(args.str.contains(r"flags=[^,}]*CLONE_FILES")).then(CLONE_FILES).otherwise(0))
            .when(pl.col("fcntl_cmd") == "F_SETFD").then(
                pl.when(pl.col("_arg").str.contains("FD_CLOEXEC")).then(1)
                .otherwise(pl.col("_arg").cast(pl.Int64, strict=False)))
            .when(name == "close_range").then(
                pl.when(pl.col("_close_flags").str.contains("CLOSE_RANGE_CLOEXEC")).then(CLOSE_RANGE_CLOEXEC)
                .otherwise(0))
            .otherwise(pl.col("_text").replace_strict(names, default=None, return_dtype=pl.Int64)))
    last = pl.col("_last").str.replace(r"^~0U?$", str((1 << 31) - 1)).cast(pl.Int64, strict=False)
    w = w.select("_row", pl.when(name == "close_range").then(last).alias("fd2"),
                 bits.cast(pl.Int64).alias("flag_bits"), "fcntl_cmd")
    tracked = df.with_row_index("_row").select("_row", "pid", pl.col("name").alias("syscall"),
                                               pl.col("_fd").alias("fd"), pl.col("_ret").alias("ret"))
    tracked = tracked.join(w, on="_row", how="left", maintain_order="left").drop("_row")
    return pl.DataFrame({"open_flags": track_open_flags(tracked)})


def _path_columns(df: pl.DataFrame) -> pl.DataFrame:
    """_arg_path and _arg_new_path of unlink/rename/mkdir/rmdir calls, _open_path of opens: their path arguments,
    made absolute."""
    name = pl.col("name")
    # only the rows that name a file by path or show a working directory (strace -y annotates AT_FDCWD with
    # it; a chdir starts a new one) take part: the reads and writes cost nothing here
    rows = df.with_row_index("_row").filter(name.is_in(PATH_CALLS) | (pl.col("fd") == "AT_FDCWD")
                                            | name.is_in(["chdir", "fchdir"]))
    rows = rows.with_columns(_cwd=pl.when(pl.col("fd") == "AT_FDCWD").then(pl.col("fd_path")),
                             _seg=name.is_in(["chdir", "fchdir"]).cast(pl.Int32).cum_sum().over("pid"))
    rows = rows.with_columns(pl.col("_cwd").forward_fill().backward_fill().over(["pid", "_seg"]))
    rows = rows.filter(name.is_in(PATH_CALLS + OPEN_PATH_CALLS)).with_columns(
        pl.col("args").str.extract_groups(PATH_ARGS).alias("_g")).unnest("_g")

    def absolute(d: str, p: str) -> pl.Expr:
        text = pl.col(p).str.replace_all(r'\\(["\\])', "$1").str.replace(r"^(\./)+", "")
        base = pl.coalesce(pl.col(d), pl.col("_cwd"))
        return (pl.when(text.str.starts_with("/") | base.is_null()).then(text)
                .when(text.is_in(["", "."])).then(base).otherwise(base.str.strip_chars_end("/") + "/" + text))

    opens = name.is_in(OPEN_PATH_CALLS)
    rows = rows.select("_row", pl.when(~opens).then(absolute("d1", "p1")).alias("_arg_path"),
                       pl.when(~opens).then(absolute("d2", "p2")).alias("_arg_new_path"),
                       pl.when(opens).then(absolute("d1", "p1")).alias("_open_path"))
    return pl.DataFrame({"_row": pl.int_range(len(df), eager=True, dtype=pl.UInt32)}).join(
        rows, on="_row", how="left", maintain_order="left").drop("_row")
