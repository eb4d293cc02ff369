"""Table schemas, declared once as data; every stage boundary validates against them.

Conventions (DESIGN.md): `ts`/`dur` and every `*_ns` are int64 nanoseconds on the trace clock; quantities carry
their unit in the name; booleans are `is_*`; categories are lowercase strings; `dev_major`/`dev_minor` apart.
Event tables (tables/) are named after their row type; result tables (results/) after the result.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from mobiperf.core.errors import MobiperfError


@dataclass(frozen=True)
class Schema:
    name: str
    columns: dict[str, pl.DataType]
    doc: str
    # Columns added after run directories were first written, with the value an older table means by
    # leaving them out: validate() fills them, so old runs still read and analyze.
    added: tuple[tuple[str, object], ...] = ()

    def validate(self, df: pl.DataFrame) -> pl.DataFrame:
        """df with exactly these columns, in this order, with these types; raise if a column is missing or
        cannot be cast losslessly."""
        fill = [pl.lit(value, self.columns[c]).alias(c) for c, value in self.added if c not in df.columns]
        if fill:
            df = df.with_columns(fill)
        missing = [c for c in self.columns if c not in df.columns]
        if missing:
            raise MobiperfError(f"table {self.name}: missing columns {missing}")
        try:
            return df.select([pl.col(c).cast(t, strict=True) for c, t in self.columns.items()])
        except pl.exceptions.PolarsError as e:
            raise MobiperfError(f"table {self.name}: {e}") from None

    def empty(self) -> pl.DataFrame:
        return pl.DataFrame(schema=self.columns)


I64, I32, U64, STR, BOOL, F64 = pl.Int64, pl.Int32, pl.UInt64, pl.Utf8, pl.Boolean, pl.Float64
CAT = pl.Categorical()  # a string column of few distinct values, 4 bytes a row (block events: tens of millions)


def categories(name: str, values: list[str]) -> pl.Series:
    """A categorical Series of distinct strings, to gather rows from by code: 6x faster than gathering strings and
    casting every row (the cast hashes each one)."""
    return pl.Series(name, values, dtype=pl.Utf8).cast(CAT)

BLOCK_EVENT = Schema("block_event", {
    "rep": I32, "ts": I64, "cpu": I32, "pid": I32, "comm": CAT, "event": CAT,
    "dev_major": I32, "dev_minor": I32, "sector": I64, "nr_sector": I64, "size_bytes": I64,
    "rwbs": CAT, "error": I32,
}, "One row per ftrace block event (block_bio_queue, block_getrq, block_rq_insert/issue/complete, merges, split,"
   " requeue); sector/nr_sector are -1 where the event has none (plug/unplug). comm, event and rwbs are"
   " categorical (strings stored once: a 1 GB trace's block events fit in memory).")

BLOCK_RQ = Schema("block_rq", {
    "rep": I32, "dev_major": I32, "dev_minor": I32, "sector": I64, "size_bytes": I64, "rwbs": STR,
    "op": STR, "is_sync": BOOL, "is_meta": BOOL, "is_fua": BOOL, "is_preflush": BOOL, "is_readahead": BOOL,
    "queue_ts": I64, "getrq_ts": I64, "insert_ts": I64, "issue_ts": I64, "complete_ts": I64,
    "nr_bios": I32, "pid": I32, "comm": STR, "error": I32, "is_complete_match": BOOL, "first_issue_ts": I64,
    "dispatches": I32,
}, "One row per block request: its bios' queue time (first bio), get-request, insert, issue (the latest dispatch)"
   " and completion times (null where the event was not seen), device, start sector, size and decoded rwbs. op is"
   " read, write, flush, discard or other. first_issue_ts is its first dispatch and dispatches the number of issue"
   " events it had (re-dispatches and re-issues after a requeue count; 0 if it was never seen issued).",
    added=(("first_issue_ts", None), ("dispatches", 1)))

TRACE_MARKER = Schema("trace_marker", {
    "rep": I32, "ts": I64, "pid": I32, "text": STR,
}, "Lines written to the instance's trace_marker (e.g. the generator's timed-window markers).")

# --- event tables of the other trace sources (collectors helper) ---

_EV = {"rep": I32, "ts": I64, "cpu": I32, "pid": I32, "comm": STR}

FSYNC_EVENT = Schema("fsync_event", {
    **_EV, "fs": STR, "phase": STR, "dev_major": I32, "dev_minor": I32, "ino": I64, "datasync": I32, "ret": I32,
    "cp_reason": STR,
}, "ext4_sync_file_enter/exit and f2fs_sync_file_enter/exit: fs is ext4 or f2fs, phase enter or exit; datasync is"
   " null on ext4's exit, ret null on enter; cp_reason, on f2fs's exit, why the fsync wrote a checkpoint instead"
   " of its node blocks (`no needed` when it did not), as the kernel prints it.", added=(("cp_reason", None),))

JBD2_RUN_STATS = Schema("jbd2_run_stats", {
    "rep": I32, "ts": I64, "dev_major": I32, "dev_minor": I32, "tid": I64, "wait_ms": I64, "request_delay_ms": I64,
    "running_ms": I64, "locked_ms": I64, "flushing_ms": I64, "logging_ms": I64, "handle_count": I64,
    "blocks": I64, "blocks_logged": I64,
}, "One row per committed jbd2 transaction (jbd2_run_stats): the phase times the kernel reports, in ms"
   " (jiffies_to_msecs in the text format, so a jiffy is the resolution).")

JBD2_COMMIT = Schema("jbd2_commit", {
    **_EV, "phase": STR, "dev_major": I32, "dev_minor": I32, "tid": I64, "is_sync": BOOL, "head": I64,
}, "jbd2 commit phase events: phase is start, locking, flushing, logging, end or drop; head only on end.")

FUSE_EVENT = Schema("fuse_event", {
    **_EV, "phase": STR, "connection": I64, "unique": I64, "opcode": I32, "opcode_name": STR, "len_bytes": I64,
    "error": I32,
}, "fuse_request_send (phase send: opcode and request length) and fuse_request_end (phase end: reply length"
   " and error).")

FUSE_REQ = Schema("fuse_req", {
    "rep": I32, "connection": I64, "unique": I64, "opcode": I32, "opcode_name": STR, "send_ts": I64,
    "end_ts": I64, "dur": I64, "len_bytes": I64, "reply_len_bytes": I64, "error": I32, "pid": I32, "comm": STR,
    "daemon_tid": I32, "data_bytes": I64, "source": STR,
}, "One row per FUSE request: send and end paired by (connection, unique); end_ts/dur null if no end was seen."
   " pid/comm: the task that sent it (fuse_request_send runs in the requester's context); daemon_tid: the daemon"
   " thread that replied (fuse_request_end runs in the replying write to /dev/fuse), null without an end."
   " len_bytes and reply_len_bytes are the messages' lengths, headers included; data_bytes the file data moved:"
   " WRITE len_bytes - 80 (fuse_in_header + fuse_write_in), READ reply_len_bytes - 16 (fuse_out_header) on"
   " success, 0 for every other opcode and for failed requests. source: what made the row (collectors/parse/"
   "fuse_layer.py): fuse_events (send and end paired by unique id), fuse_events+daemon_log (sends without their id"
   " paired through the daemon's log), fuse_events_by_order (paired by connection and order), daemon_log (the"
   " daemon's log: send_ts is when it read the request), dev_fuse_calls (the daemon's reads and writes of"
   " /dev/fuse: send_ts is when it read the request); connection is null where the source does not know it.",
   added=(("daemon_tid", None), ("data_bytes", None), ("source", "fuse_events")))

FUSE_DAEMON_REQ = Schema("fuse_daemon_req", {
    "rep": I32, "layer": STR, "daemon_pid": I32, "connection": I64, "unique": I64, "opcode": I32,
    "opcode_name": STR, "nodeid": I64, "len_bytes": I64, "size_bytes": I64, "offset_bytes": I64, "pid": I32,
    "tid": I32, "read_ts": I64, "reply_tid": I32, "reply_ts": I64, "error": I32, "reply_len_bytes": I64,
}, "A bundled FUSE daemon's log of every request it read (fusecore's -o requests, collectors/parse/"
   "fuse_daemon_log.py): the request header's unique, opcode, nodeid and len, pid the requesting thread (the"
   " header's in.h.pid; 0 for requests the kernel sends on its own), a READ's or WRITE's size and offset, tid the"
   " daemon thread that read it at read_ts, and its reply (reply_tid, reply_ts, error, reply_len_bytes; null when"
   " it had none), times on the trace clock.")

SYSCALL_IO = Schema("syscall_io", {
    "rep": I32, "ts": I64, "dur": I64, "pid": I32, "comm": STR, "syscall": STR, "fd": I32, "path": STR,
    "request_bytes": I64, "offset_bytes": I64, "ret": I64, "errno": STR, "source": STR, "open_flags": STR,
    "new_path": STR, "clock_error_ns": I64,
}, "One row per system call of the workload (source ftrace: the trace clock; source strace: the wall clock, moved"
   " to the trace clock at parse time where the run read both clocks, clock_error_ns then saying how far off the"
   " move may be, null while still on the wall clock). fd/request_bytes/offset_bytes are -1 where the call has none"
   " (ftruncate: offset_bytes its new length); path from strace -y (for unlink, rename, mkdir and rmdir the path"
   " argument, made absolute), else empty; new_path a rename's destination, else empty;"
   " open_flags the flags of the call's fd as strace prints them (O_WRONLY|O_DSYNC), followed through open,"
   " dup, fcntl, fork and exec (for an open call its own flags), empty where unknown; dur null when the call"
   " never returned (or strace printed no <time>).",
   added=(("open_flags", ""), ("new_path", ""), ("clock_error_ns", None)))

STRACE_COUNT = Schema("strace_count", {
    "rep": I32, "syscall": STR, "calls": I64,
}, "What `strace -c -U calls,name` counted, one row per system call (the workload's own count, taken when it ends;"
   " a sweep cell with syscalls=on runs its workload so): calls over the workload and every thread and child it"
   " made.")

TASK_ROLE = Schema("task_role", {
    "rep": I32, "pid": I32, "role": STR, "fuse_fd": I32, "layer": STR, "comm": STR, "fd_kind": STR,
}, "Tasks whose role the run knows (raw/tasks.json): workload (the workload's root process), fuse_daemon (every"
   " thread of a stack's FUSE daemon, one row per descriptor of the FUSE protocol it holds: fd_kind fuse for"
   " /dev/fuse, pipe for the pipes a splicing daemon moves requests through; fuse_fd -1 if none; layer the"
   " stack layer), mobiperf (mobiperf itself, comm its name). pid is the task id the trace shows.",
   added=(("comm", None), ("fd_kind", "fuse")))

FS_EVENT = Schema("fs_event", {
    **_EV, "event": STR, "dev_major": I32, "dev_minor": I32, "ino": I64, "body": STR,
}, "Other file system and writeback events (ext4_*, f2fs_*, writeback_*, jbd2_*, android_fs_*) with their device"
   " and inode where the text has them (-1 otherwise) and the raw body.")

FILE_EXTENT = Schema("file_extent", {
    "rep": I32, "region": STR, "path": STR, "logical_bytes": I64, "physical_bytes": I64, "length_bytes": I64,
    "dev_major": I32, "dev_minor": I32, "flags": STR,
}, "The file system layout snapshot: region is file (FIEMAP extents of the workload's files), journal (ext4"
   " journal / xfs log), metadata (ext4 group descriptors, bitmaps and inode tables), or f2fs's areas (superblock,"
   " checkpoint, sit, nat, ssa) and main segments by kind (node, data; main where unknown); physical_bytes is the"
   " offset on the device.")

F2FS_BIO = Schema("f2fs_bio", {
    **_EV, "dev_major": I32, "dev_minor": I32, "fs_dev_major": I32, "fs_dev_minor": I32, "op": STR, "flags": STR,
    "type": STR, "sector": I64, "size_bytes": I64,
}, "Every bio f2fs submitted (f2fs_submit_write_bio / f2fs_submit_read_bio, collectors/parse/f2fs_events.py): the"
   " bio's device (dev_*) and the file system's (fs_dev_*), op read or write, its flags as printed (S, M, P, PF,"
   " FUA), type data, node, meta, meta_flush, in-place or out-of-place, and its own first sector and size.")

F2FS_CHECKPOINT = Schema("f2fs_checkpoint", {
    **_EV, "dev_major": I32, "dev_minor": I32, "reason": STR, "phase": STR, "state": STR,
}, "f2fs_write_checkpoint events: reason as printed (sync, umount, ...), phase start (start block_ops), block_ops"
   " (finish block_ops), end (finish checkpoint) or other, state the kernel's words. pid: the task that wrote the"
   " checkpoint (the f2fs_ckpt thread under checkpoint_merge, else the syncing task).")

ANDROID_FS_EVENT = Schema("android_fs_event", {
    **_EV, "op": STR, "phase": STR, "path": STR, "offset_bytes": I64, "size_bytes": I64, "cmdline": STR,
    "task_pid": I32, "i_size_bytes": I64, "ino": I64,
}, "Android's file IO events (android_fs_dataread/datawrite_start/end): op read or write, phase start or end;"
   " path, cmdline, task_pid (the task's tgid) and i_size_bytes on starts only (null on ends). Reads are traced"
   " where the page cache misses, writes where they enter it.")

RAW_SYSCALL_EVENT = Schema("raw_syscall_event", {
    **_EV, "phase": STR, "nr": I64, "arg0": U64, "arg1": U64, "arg2": U64, "arg3": U64, "arg4": U64, "arg5": U64,
    "ret": I64,
}, "raw_syscalls:sys_enter (phase enter: the call's number and its six argument registers) and sys_exit (phase"
   " exit: its return value): what collectors/parse/raw_syscalls.py decodes into syscall_io by the device's ABI.")

BLKTRACE_EVENT = Schema("blktrace_event", dict(BLOCK_EVENT.columns),
                        "blktrace records of a run that also has ftrace block events (which stay in block_event):"
                        " the same columns, kept apart so no request is counted twice.")

SCHED_SWITCH = Schema("sched_switch", {
    "rep": I32, "ts": I64, "cpu": I32, "prev_tid": I32, "prev_comm": STR, "prev_state": STR, "next_tid": I32,
    "next_comm": STR,
}, "The scheduler's context switches (sched_switch): the thread that left the CPU, the state it left in"
   " (prev_state as the kernel prints it: R, R+, S, D, D|K ...: D is uninterruptible sleep) and the thread that"
   " took it (collectors/parse/sched.py).")

SCHED_WAKEUP = Schema("sched_wakeup", {
    "rep": I32, "ts": I64, "cpu": I32, "tid": I32, "comm": STR, "waker_tid": I32, "waker_comm": STR, "event": STR,
}, "A sleeping thread woken (sched_waking: the waker starts to wake it, event waking; sched_wakeup: it is"
   " runnable, event wakeup): tid/comm the woken thread, waker_tid/waker_comm the thread whose context the event"
   " ran in (the waker itself for waking, which runs in try_to_wake_up; sched_wakeup may run on the woken one's"
   " CPU).")

SCHED_BLOCKED_REASON = Schema("sched_blocked_reason", {
    "rep": I32, "ts": I64, "tid": I32, "is_io_wait": BOOL, "caller": STR,
}, "Android's sched_blocked_reason: where a thread in uninterruptible sleep was blocked (caller, the kernel"
   " function, symbolized as the text prints it) and whether it was an IO wait; traced when the thread wakes.")

TASK = Schema("task", {
    "rep": I32, "tid": I32, "pid": I32, "thread": STR, "process": STR, "source": STR, "parent_tid": I32,
}, "Who a thread is, as a trace or the capture said it: tid its thread id, pid its process (the thread group id;"
   " null where the source does not say), thread its name (comm), process the process's name (its command line's"
   " first word where known, else the group leader's comm; null where unknown). source: tasks.json (the run's"
   " workload root and FUSE daemons), trace (the tgid column of ftrace text), task_newtask (a thread or process"
   " created or renamed during the trace), ps (systrace's process dump), proc (a /proc snapshot taken when"
   " recording), perfetto (process_tree packets). parent_tid: for a thread task_newtask made (CLONE_THREAD) in a"
   " trace that does not say its tgid, the thread that made it (its process is that thread's); else null. A thread"
   " may appear once per source; analyzers/task_identity.py decides.", added=(("parent_tid", None),))

INODE_PATH = Schema("inode_path", {
    "rep": I32, "ino": I64, "path": STR, "source": STR,
}, "A file's inode and its path, from a listing taken on the device (collectors/parse/inodes.py): source layout"
   " (the layout snapshot's find), listing (a recorded app's data directory). The file systems' events name files"
   " by inode only.")

GENERIC_EVENT = Schema("generic_event", {
    **_EV, "event": STR, "body": STR,
}, "ftrace events of a Perfetto trace that no other table reads and its protos do not type (generic or"
   " self-described events: vendor and newer kernel events), kept with their fields as name=value text.")

TABLES = {s.name: s for s in (BLOCK_EVENT, BLOCK_RQ, TRACE_MARKER, FSYNC_EVENT, JBD2_RUN_STATS, JBD2_COMMIT,
                              FUSE_EVENT, FUSE_REQ, SYSCALL_IO, STRACE_COUNT, TASK_ROLE, FS_EVENT, FILE_EXTENT,
                              BLKTRACE_EVENT, GENERIC_EVENT, ANDROID_FS_EVENT, TASK, FUSE_DAEMON_REQ,
                              RAW_SYSCALL_EVENT, F2FS_BIO, F2FS_CHECKPOINT, SCHED_SWITCH, SCHED_WAKEUP,
                              SCHED_BLOCKED_REASON, INODE_PATH)}

# --- result tables ---

BLOCK_IO = Schema("block_io", {
    "rep": I32, "ts": I64, "dev_major": I32, "dev_minor": I32, "sector": I64, "size_bytes": I64, "op": STR,
    "rwbs": STR, "size_class": STR, "size_log2_bytes": I64, "locality": STR, "locality_tolerant": STR,
    "locality_global": STR, "sync_mode": STR, "region": STR, "file_type": STR, "path": STR, "is_meta": BOOL,
    "queue_ts": I64, "issue_ts": I64, "complete_ts": I64,
    "q2g_ns": I64, "g2i_ns": I64, "i2d_ns": I64, "d2c_ns": I64, "q2c_ns": I64, "nr_bios": I32, "pid": I32,
    "comm": STR, "scope": STR, "dispatches": I32, "redispatch_ns": I64,
}, "Every block request of the workload's scope (analyzers/scope.py: scope says whose) classified once in each"
   " dimension (size class and log2 bucket; locality strict, tolerant and global, with `first` for a stream's"
   " first request; sync mode from its flags; region data, metadata, journal or none; file type and path through"
   " the layout snapshot) with its btt latency phases (D2C from its last dispatch; redispatch_ns the wait from its"
   " first to its last dispatch, null if it was dispatched once).",
   added=(("scope", "workload"), ("dispatches", 1), ("redispatch_ns", None)))

PAIRING_SUMMARY = Schema("pairing_summary", {
    "rep": I32, "requests": I64, "matched": I64, "matched_for": STR, "matched_share": F64, "fully_matched": I64,
    "no_queue": I64, "no_issue": I64, "no_complete": I64,
}, "How completely the block events paired into requests, per repetition: requests matched for every phase"
   " (queue, issue, completion) their device's trace holds events of (matched_for; an issue/complete-only"
   " capture: issue+complete), their share, requests with all three seen (fully_matched; a kernel flush needs no"
   " queue) and how many lack each.")

SYSCALL_CLASS = Schema("syscall_class", {
    "rep": I32, "ts": I64, "dur": I64, "pid": I32, "comm": STR, "syscall": STR, "op": STR, "fd": I32,
    "path": STR, "file_type": STR, "size_bytes": I64, "offset_bytes": I64, "size_class": STR,
    "size_log2_bytes": I64, "locality": STR, "locality_tolerant": STR, "locality_global": STR, "sync_mode": STR,
    "timing": STR, "clock_error_ns": I64,
}, "Every IO system call of the workload (read, write and their p/v variants, fsync, fdatasync, msync,"
   " sync_file_range) classified: op read, write or sync; size; locality per (process, file) and per process; sync"
   " mode (buffered, o_sync, o_dsync, o_direct, fsync, fdatasync, msync, sync_file_range); file type from its path."
   " timing: kernel (ts/dur from the syscalls events), strace (strace's stamps placed on the trace clock,"
   " clock_error_ns the placement's uncertainty) or wall (strace's stamps, not placeable).",
   added=(("timing", "kernel"), ("clock_error_ns", None)))

FILE_IO = Schema("file_io", {
    "rep": I32, "ts": I64, "dur": I64, "pid": I32, "comm": STR, "op": STR, "path": STR, "file_type": STR,
    "size_bytes": I64, "offset_bytes": I64, "size_class": STR, "size_log2_bytes": I64, "locality": STR,
    "locality_tolerant": STR, "locality_global": STR, "sync_mode": STR, "ino": I64, "tid": I32, "thread": STR,
}, "The file layer (Android's android_fs events): every file read where it missed the page cache and every"
   " write where it entered it, with its path and file type, size and locality per (process, file); dur from"
   " its start to its end event (null if none was seen). pid/comm: the process (tgid, command line); tid/thread:"
   " the thread that did it (null in run directories analysed before they were kept).",
   added=(("tid", None), ("thread", None)))

IO_CLASS = Schema("io_class", {
    "rep": I32, "layer": STR, "op": STR, "size_class": STR, "locality": STR, "sync_mode": STR, "region": STR,
    "file_type": STR, "count": I64, "bytes": I64,
}, "IO counts and bytes by layer (block, syscall, file: Android's android_fs events), op, the papers' size"
   " class, strict locality, sync mode, region (block layer; `-` at the others) and file type.")

IO_SHARE = Schema("io_share", {
    "rep": I32, "layer": STR, "op": STR, "dimension": STR, "value": STR, "count": I64, "bytes": I64,
    "count_share": F64, "bytes_share": F64,
}, "The IO characterisation of seed 000 Fig. 4 and seed 002 in long form: per layer, op and dimension"
   " (size_class, size_log2, locality, locality_tolerant, locality_global, sync_mode, region, file_type), each"
   " value's count and bytes and their shares. Locality shares leave `first` and `none` out of the denominator.")

_LATENCY_COLUMNS = {
    "rep": I32, "layer": STR, "phase": STR, "op": STR, "count": I64, "mean_ns": F64, "p50_ns": F64,
    "p90_ns": F64, "p99_ns": F64, "max_ns": F64,
}
LATENCY_SUMMARY = Schema("latency_summary", _LATENCY_COLUMNS,
                         "Latency percentiles per layer phase (block q2g, g2i, i2d, d2c, q2c) and op.")
SYSCALL_LATENCY = Schema("syscall_latency", _LATENCY_COLUMNS,
                         "System call latency (enter -> exit) percentiles, phase `syscall`, op the call name.")
FS_LATENCY = Schema("fs_latency", _LATENCY_COLUMNS,
                    "File system latency: phase sync_file (ext4/f2fs_sync_file enter -> exit, op fsync or"
                    " fdatasync) and the jbd2 commit phases of jbd2_run_stats (wait, request_delay, running,"
                    " locked, flushing, logging; ms resolution), op commit.")
FUSE_LATENCY = Schema("fuse_latency", _LATENCY_COLUMNS,
                      "FUSE request latency (fuse_request_send -> end) percentiles, op the FUSE opcode name in lower"
                      " case without FUSE_ (write, read, fsync...).")

WATERFALL = Schema("waterfall", {
    "rep": I32, "call_id": I64, "ts": I64, "pid": I32, "comm": STR, "syscall": STR, "path": STR, "file_type": STR,
    "sync_mode": STR, "size_bytes": I64, "dur_ns": I64, "fs_ns": I64, "fuse_ns": I64, "block_requests": I64,
    "block_bytes": I64, "data_bytes": I64, "journal_bytes": I64, "metadata_bytes": I64, "flushes": I64,
    "block_ns": I64, "device_ns": I64, "other_ns": I64, "journal_ns": I64, "syscall_self_ns": I64,
    "fuse_self_ns": I64, "fs_self_ns": I64, "journal_self_ns": I64, "block_self_ns": I64, "device_self_ns": I64,
    "fuse_requests": I64, "fuse_data_bytes": I64, "file_ns": I64, "file_self_ns": I64, "root_layer": STR,
}, "Each call of the workload (analyzers/waterfall.py, io_span.py) with what it caused, layer by layer:"
   " *_ns the inclusive time of each layer (file_ns Android's android_fs spans; fs_ns the lower file system's,"
   " also under FUSE; block_ns queue ->"
   " complete; device_ns issue -> complete), *_self_ns the exclusive time (the layer was the deepest active;"
   " they add up to dur_ns), other_ns = syscall_self_ns; requests and bytes counted once per request. root_layer:"
   " the layer of the call (syscall; a phone's trace without calls: file or fs, syscall then naming it).",
   added=(("call_id", None), ("journal_ns", 0), ("syscall_self_ns", None), ("fuse_self_ns", 0),
          ("fs_self_ns", 0), ("journal_self_ns", 0), ("block_self_ns", 0), ("device_self_ns", 0),
          ("fuse_requests", 0), ("fuse_data_bytes", 0), ("file_ns", 0), ("file_self_ns", 0),
          ("root_layer", "syscall")))

IO_SPAN = Schema("io_span", {
    "rep": I32, "span_id": I64, "parent_id": I64, "call_id": I64, "layer": STR, "name": STR, "ts": I64,
    "end_ts": I64, "tid": I32, "comm": STR, "size_bytes": I64, "is_primary": BOOL, "op": STR, "region": STR,
    "dev_major": I32, "dev_minor": I32, "sector": I64, "fuse_unique": I64, "path": STR, "sync_mode": STR,
    "file_type": STR, "source_row": I64, "ino": I64,
}, "The nest of intervals of every call (analyzers/io_span.py): layer syscall (the call), fuse (a request it"
   " sent), fs (a daemon's call into the lower file system, a sync_file), journal (a jbd2 commit it waited for),"
   " block (a request, queue -> complete), device (issue -> complete); each span clipped to its parent"
   " (parent_id), call_id the top call (null: IO no call caused, nested the same way). is_primary: the span's"
   " bytes count for this call (false for the second waiter of a shared commit). path, sync_mode and file_type"
   " of calls (sync_mode `none` for calls that are not IO) and block requests. source_row: the row in the"
   " source table (the call's call_id, fuse_req, block_io). A phone's trace without calls starts its nests at"
   " layer file (Android's android_fs read/write, analyzers/file_nest.py) and at fs (sync_file); ino: the inode"
   " of file and sync_file spans (null elsewhere).", added=(("ino", None),))

TIME_PROFILE = Schema("time_profile", {
    "rep": I32, "layer": STR, "name": STR, "process": STR, "thread": STR, "path": STR, "file_type": STR,
    "time_ns": I64, "count": I64, "bytes": I64,
}, "Where the workload's call time went (analyzers/time_profile.py): every instant of a call given to the deepest"
   " layer's span active then (shared equally among that layer's active spans), summed per layer, name (call,"
   " FUSE opcode, block op), process and thread (who ran the span; names that line up between runs) and file (the"
   " span's, else its call's); count and bytes of the spans counted once (is_primary). The time_ns of a"
   " repetition add up to its calls' durations, and a layer's to waterfall's <layer>_self_ns.")

IO_BACKGROUND = Schema("io_background", {
    "rep": I32, "scope": STR, "pid": I32, "comm": STR, "layer": STR, "name": STR, "count": I64, "bytes": I64,
    "time_ns": I64,
}, "IO no call of the workload caused, by scope (workload, fuse_daemon, kernel, mobiperf, other:"
   " analyzers/scope.py), task and layer: FUSE requests, daemon calls, journal commits and block requests.")

BLOCK_CAUSE = Schema("block_cause", {
    "rep": I32, "ts": I64, "sector": I64, "size_bytes": I64, "op": STR, "region": STR, "sync_mode": STR,
    "cause": STR, "cause_mode": STR, "call_ts": I64, "call_pid": I32,
}, "Every block request with the call that caused it (cause: the call's name, cause_mode its sync mode; through"
   " the nest of io_span: its own thread, the journal commit it waited for, the FUSE daemon serving it), or"
   " `none`; the call's start time and task.")

LAYER_BREAKDOWN = Schema("layer_breakdown", {
    "rep": I32, "syscall": STR, "sync_mode": STR, "count": I64, "total_ns": I64, "layer": STR, "time_ns": I64,
    "share": F64, "inclusive_ns": I64,
}, "Seed 000 Fig. 3 / seed 004 Fig. 3: the calls' time per type, split by layer: time_ns the layer's exclusive"
   " time (syscall, fuse, fs, journal, block = queue/scheduler, device = D2C), share = time_ns / total_ns (the"
   " shares of a call type add up to 1), inclusive_ns the layer's inclusive time.",
   added=(("inclusive_ns", None),))

AMPLIFICATION = Schema("amplification", {
    "rep": I32, "layer": STR, "region": STR, "op": STR, "count": I64, "bytes": I64, "ratio_to_app": F64,
}, "Bytes written (and read) per layer: app (syscalls), fuse (FUSE write/read requests), block by region;"
   " ratio_to_app = bytes / application bytes of the same op.")

WINDOW_BLOCK = Schema("window_block", {
    "rep": I32, "op": STR, "window_ns": I64, "requests": I64, "bytes": I64, "d2c_mean_ns": F64, "d2c_p50_ns": F64,
    "d2c_sum_ns": F64, "q2c_mean_ns": F64, "q2c_p50_ns": F64,
}, "The block requests inside the generator's timed window (analyzers/timed_window.py), per repetition and op:"
   " requests, bytes, device time D2C (mean, median, sum) and Q2C (mean, median; null when no queue was seen);"
   " window_ns the window's length. No rows for a repetition without timed_start/timed_end markers.")

SQLITE_TXN = Schema("sqlite_txn", {
    "rep": I32, "txn": I64, "start_ts": I64, "end_ts": I64, "dur_ns": I64, "fsync": I64, "fdatasync": I64,
    "write_calls": I64, "write_bytes": I64, "block_writes": I64, "block_write_bytes": I64, "journal_bytes": I64,
    "metadata_bytes": I64, "flushes": I64,
}, "One row per SQLite transaction, cut at each sync call on a database or WAL file inside the generator's"
   " timed window (trace markers), else over the whole trace: its syncs, write calls and the block writes queued"
   " during it, by region.")

SQLITE_SUMMARY = Schema("sqlite_summary", {
    "rep": I32, "journal_mode": STR, "transactions": I64, "fsync_per_txn": F64, "block_writes_per_txn": F64,
    "block_kib_per_txn": F64, "fs_journal_kib_per_txn": F64, "journal_meta_share": F64,
}, "Seed 002's per-insert table: per transaction on average, the syncs (fsync + fdatasync), block writes, block"
   " KiB, file system journal KiB and the journal+metadata share of block write bytes; journal_mode inferred"
   " from the files (wal, delete, truncate, persist).")

SPAN_OWNER = Schema("span_owner", {
    "rep": I32, "span_id": I64, "scope": STR, "process": STR, "pid": I32, "thread": STR, "tid": I32, "path": STR,
    "file_type": STR, "path_from": STR, "root_id": I64,
}, "Whose each io_span row is (analyzers/attribution.py), one row per io_span row (same rep, span_id): the"
   " thread whose call (or file operation) the span's nest starts from, by causality: the call's thread for"
   " everything it caused (FUSE requests, the daemon's calls, the journal commits it waited for, block requests,"
   " device time); for IO no call caused, the task that did it (writeback, a periodic commit). process and pid"
   " its process (pid null where no source says; process then the thread's name), scope as in block_io"
   " (analyzers/scope.py). path: the top-most path on the way down to the span (the app's own name of the file"
   " where the call has one; else the file layer's, an inode's, the layout snapshot's), null where none is known;"
   " file_type from it (analyzers/file_type.py); path_from the layer whose span gave the path; root_id the"
   " span_id of the nest's root.", added=(("root_id", None),))

IO_BY_OWNER = Schema("io_by_owner", {
    "rep": I32, "scope": STR, "process": STR, "pid": I32, "thread": STR, "tid": I32, "path": STR,
    "file_type": STR, "layer": STR, "self_ns": I64, "nests": I64, "block_bytes": I64,
}, "Where each owner's IO time went (analyzers/io_by_owner.py): per process, thread, file (the path of the nest's"
   " root, span_owner) and layer, the exclusive time of the layer summed over the owner's nests (the time it was"
   " the deepest active one, as in the waterfall: the layers of an owner's file add up to the time its calls,"
   " file operations or background requests on it took); nests the nests with time in the layer; block_bytes the"
   " bytes of the nests' block requests (counted once, on the block row).")

IO_BY_FILE = Schema("io_by_file", {
    "rep": I32, "scope": STR, "process": STR, "pid": I32, "thread": STR, "tid": I32, "path": STR,
    "file_type": STR, "layer": STR, "op": STR, "requests": I64, "bytes": I64, "time_ns": I64,
}, "IO by process, thread, file, layer and op (analyzers/io_by_file.py), every span of io_span counted once under"
   " its owner (span_owner), the workload's and the background's alike (scope says which): requests the spans"
   " (a shared journal commit counts for its first waiter), bytes their size_bytes (the same rule), time_ns the"
   " sum of their durations as nested (each clipped to its parent; concurrent requests each count their own"
   " time; every waiter of a shared commit its wait). layer as in io_span; op the call's name (syscall), the"
   " FUSE opcode in lower case without fuse_ (fuse), read or write (file), the daemon's call or the file"
   " system's sync (fs: pwrite64, ext4_sync_file), jbd2_commit (journal), read/write/flush/discard (block,"
   " device). Calls that are neither IO nor on a"
   " file (getpid, futex...) are left out. path null: the IO of no known file.")

REPLAY_FIDELITY = Schema("replay_fidelity", {
    "rep": I32, "metric": STR, "original": F64, "replay": F64, "ratio": F64, "tolerance": F64, "ok": BOOL,
}, "How faithfully a replay (`mobiperf replay`) reproduced its recording (analyzers/replay/fidelity.py): per"
   " repetition and metric (calls.OP, syscall.write_bytes/read_bytes, block.write_bytes/read_bytes,"
   " block.flushes, fs.syncs, elapsed), the recording's figure, the replay's, their ratio replay/original, the"
   " bound it is held to (0: equal; null: none, e.g. block figures on another stack) and whether it holds.")

BLOCKED = Schema("blocked", {
    "rep": I32, "scope": STR, "process": STR, "pid": I32, "thread": STR, "tid": I32, "waited_on": STR,
    "count": I64, "blocked_ns": I64,
}, "Per thread, its time in uninterruptible sleep (sched_switch prev_state D until its wake-up) by what it waited"
   " on (analyzers/blocked.py): the deepest layer of its own nests active then (block: a block request in flight,"
   " journal: a commit its sync waited for, fuse: the FUSE reply, fs, file, call), else the kernel function of"
   " Android's sched_blocked_reason (io:NAME for an IO wait, caller:NAME otherwise), else unknown; count the"
   " intervals with time on it. The causes"
   " of a thread add up to its time in D. scope, process and pid as in span_owner.")

RESULTS = {s.name: s for s in (BLOCK_IO, PAIRING_SUMMARY, SYSCALL_CLASS, FILE_IO, IO_CLASS, IO_SHARE,
                               LATENCY_SUMMARY, SYSCALL_LATENCY, FS_LATENCY, FUSE_LATENCY, IO_SPAN, WATERFALL,
                               BLOCK_CAUSE, LAYER_BREAKDOWN, IO_BACKGROUND, TIME_PROFILE, AMPLIFICATION,
                               WINDOW_BLOCK, SQLITE_TXN, SQLITE_SUMMARY, SPAN_OWNER, IO_BY_FILE, BLOCKED,
                               IO_BY_OWNER, REPLAY_FIDELITY)}
