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
  raw_syscalls           NR %ld (%lx, %lx, ...) / NR %ld = %ld  (raw_syscall_event; named by the ABI: raw_syscalls.py)
  android_fs_data*       entry_name %s, offset %llu, bytes %d, ... / ino %lu, offset %llu, bytes %d (android_fs.py)
  sched_*, task_*        prev_comm=%s prev_pid=%d ... prev_state=%s ==> next_comm=%s ... (sched.py)
  f2fs_submit_*_bio      dev = (%d,%d)/(%d,%d), rw = %s(%s), %s, sector = %lld, size = %u      (f2fs_events.py)
  f2fs_write_checkpoint  dev = (%d,%d), checkpoint for %s, state = %s

Lines that match no pattern are counted per event, never dropped silently.
"""

from __future__ import annotations

import polars as pl

from mobiperf.collectors.parse.android_fs import ANDROID_FS_EVENTS, parse_android_fs_events
from mobiperf.collectors.parse.body_fields import extract_fields
from mobiperf.collectors.parse.f2fs_events import F2FS_EVENTS, parse_f2fs_events
from mobiperf.collectors.parse.sched import SCHED_EVENTS, parse_sched_events
from mobiperf.collectors.parse.syscall_events import RAW_SYSCALL_EVENTS, raw_syscall_events, syscall_io_of_events
from mobiperf.core.schema import FS_EVENT, FSYNC_EVENT, FUSE_EVENT, JBD2_COMMIT, JBD2_RUN_STATS

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
# Every event this module reads (the ftrace text parser hands it these rows).
KNOWN_EVENTS = {*FSYNC_BODIES, "jbd2_run_stats", *JBD2_PHASES, *FUSE_BODIES, *ANDROID_FS_EVENTS, *SCHED_EVENTS,
                *F2FS_EVENTS}


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
            got = extract_fields(head, event, pattern, unparsed)
            fsync.append(got.select(
                *_ev_cols(rep), pl.lit(fs).alias("fs"), pl.lit(phase).alias("phase"), *_dev_cols(),
                pl.col("ino").cast(pl.Int64, strict=False),
                _opt_int(got, "datasync", pl.Int32), _opt_int(got, "ret", pl.Int32),
                (pl.col("reason") if "reason" in got.columns else pl.lit(None, pl.Utf8)).alias("cp_reason")))
    if fsync:
        tables["fsync_event"] = FSYNC_EVENT.validate(pl.concat(fsync).sort("ts", maintain_order=True))

    if "jbd2_run_stats" in events:
        got = extract_fields(head, "jbd2_run_stats", RUN_STATS_BODY, unparsed)
        tables["jbd2_run_stats"] = JBD2_RUN_STATS.validate(got.select(
            pl.lit(rep, pl.Int32).alias("rep"), "ts", *_dev_cols(), pl.col("tid").cast(pl.Int64, strict=False),
            *[pl.col(f).cast(pl.Int64, strict=False).alias(f"{f}_ms") for f in RUN_STATS_FIELDS],
            *[pl.col(f).cast(pl.Int64, strict=False) for f in ("handle_count", "blocks", "blocks_logged")]))

    commits = []
    for event, phase in JBD2_PHASES.items():
        if event in events:
            got = extract_fields(head, event, JBD2_COMMIT_BODY, unparsed)
            commits.append(got.select(
                *_ev_cols(rep), pl.lit(phase).alias("phase"), *_dev_cols(),
                pl.col("tid").cast(pl.Int64, strict=False), (pl.col("sync").cast(pl.Int64, strict=False) != 0)
                .alias("is_sync"), pl.col("head").cast(pl.Int64, strict=False)))
    if commits:
        tables["jbd2_commit"] = JBD2_COMMIT.validate(pl.concat(commits).sort("ts", maintain_order=True))

    fuse = []
    for event, (phase, pattern) in FUSE_BODIES.items():
        if event in events:
            got = extract_fields(head, event, pattern, unparsed)
            fuse.append(got.select(
                *_ev_cols(rep), pl.lit(phase).alias("phase"), pl.col("conn").cast(pl.Int64, strict=False)
                .alias("connection"), pl.col("unique").cast(pl.Int64, strict=False),
                _opt_int(got, "opcode", pl.Int32), (pl.col("opname") if "opname" in got.columns
                                                    else pl.lit(None, pl.Utf8)).alias("opcode_name"),
                pl.col("len").cast(pl.Int64, strict=False).alias("len_bytes"), _opt_int(got, "error", pl.Int32)))
    if fuse:
        tables["fuse_event"] = FUSE_EVENT.validate(pl.concat(fuse, how="vertical_relaxed")
                                                   .sort("ts", maintain_order=True))

    tables.update(parse_f2fs_events(head, rep, unparsed))  # f2fs_bio, f2fs_checkpoint: f2fs_events.py
    android_fs = parse_android_fs_events(head, rep, unparsed)  # android_fs.py
    if android_fs is not None:
        tables["android_fs_event"] = android_fs
    tables.update(parse_sched_events(head, rep, unparsed))  # sched.py (sched_waking: who woke whom, FUSE's link)

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

    raw_rows = head.filter(pl.col("event").is_in(RAW_SYSCALL_EVENTS))
    if len(raw_rows):  # decoded by the device's ABI where the run knows it (raw_syscalls.py)
        tables["raw_syscall_event"], bad = raw_syscall_events(raw_rows, rep)
        unparsed.update(bad)
    sys_rows = head.filter(pl.col("event").str.starts_with("sys_") & ~pl.col("event").is_in(RAW_SYSCALL_EVENTS))
    if len(sys_rows):
        tables["syscall_io"], bad = syscall_io_of_events(sys_rows, rep)
        unparsed.update(bad)
    return tables, unparsed


def _ev_cols(rep: int) -> list[pl.Expr]:
    return [pl.lit(rep, pl.Int32).alias("rep"), pl.col("ts"), pl.col("cpu"), pl.col("pid"), pl.col("comm")]


def _dev_cols() -> list[pl.Expr]:
    return [pl.col("major").cast(pl.Int32, strict=False).alias("dev_major"),
            pl.col("minor").cast(pl.Int32, strict=False).alias("dev_minor")]


def _opt_int(df: pl.DataFrame, name: str, dtype) -> pl.Expr:
    return (pl.col(name).cast(dtype, strict=False) if name in df.columns else pl.lit(None, dtype)).alias(name)


def known_event_expr() -> pl.Expr:
    """True for the events parse_other_events reads."""
    ev = pl.col("event")
    return (ev.is_in(list(KNOWN_EVENTS)) | pl.any_horizontal(ev.str.starts_with(p) for p in FS_EVENT_PREFIXES)
            | ev.str.starts_with("sys_"))


