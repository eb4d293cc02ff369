"""Table schemas, declared once as data; every stage boundary validates against them.

Conventions (DESIGN.md): `ts`/`dur` and every `*_ns` are int64 nanoseconds on the trace clock; quantities carry
their unit in the name; booleans are `is_*`; categories are lowercase strings; `dev_major`/`dev_minor` apart.
Event tables (tables/) are named after their row type; result tables (results/) after the result.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from mobiperf.errors import MobiperfError


@dataclass(frozen=True)
class Schema:
    name: str
    columns: dict[str, pl.DataType]
    doc: str

    def validate(self, df: pl.DataFrame) -> pl.DataFrame:
        """df with exactly these columns, in this order, with these types; raise if a column is missing or
        cannot be cast losslessly."""
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

BLOCK_EVENT = Schema("block_event", {
    "rep": I32, "ts": I64, "cpu": I32, "pid": I32, "comm": STR, "event": STR,
    "dev_major": I32, "dev_minor": I32, "sector": I64, "nr_sector": I64, "size_bytes": I64,
    "rwbs": STR, "error": I32,
}, "One row per ftrace block event (block_bio_queue, block_getrq, block_rq_insert/issue/complete, merges, split,"
   " requeue); sector/nr_sector are -1 where the event has none (plug/unplug).")

BLOCK_RQ = Schema("block_rq", {
    "rep": I32, "dev_major": I32, "dev_minor": I32, "sector": I64, "size_bytes": I64, "rwbs": STR,
    "op": STR, "is_sync": BOOL, "is_meta": BOOL, "is_fua": BOOL, "is_preflush": BOOL, "is_readahead": BOOL,
    "queue_ts": I64, "getrq_ts": I64, "insert_ts": I64, "issue_ts": I64, "complete_ts": I64,
    "nr_bios": I32, "pid": I32, "comm": STR, "error": I32, "is_complete_match": BOOL,
}, "One row per block request: its bios' queue time (first bio), get-request, insert, issue and completion times"
   " (null where the event was not seen), device, start sector, size and decoded rwbs. op is read, write, flush,"
   " discard or other.")

TRACE_MARKER = Schema("trace_marker", {
    "rep": I32, "ts": I64, "pid": I32, "text": STR,
}, "Lines written to the instance's trace_marker (e.g. the generator's timed-window markers).")

# --- event tables of the other trace sources (collectors helper) ---

_EV = {"rep": I32, "ts": I64, "cpu": I32, "pid": I32, "comm": STR}

FSYNC_EVENT = Schema("fsync_event", {
    **_EV, "fs": STR, "phase": STR, "dev_major": I32, "dev_minor": I32, "ino": I64, "datasync": I32, "ret": I32,
}, "ext4_sync_file_enter/exit and f2fs_sync_file_enter/exit: fs is ext4 or f2fs, phase enter or exit; datasync is"
   " null on ext4's exit, ret null on enter.")

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
}, "One row per FUSE request: send and end paired by (connection, unique); end_ts/dur null if no end was seen.")

SYSCALL_IO = Schema("syscall_io", {
    "rep": I32, "ts": I64, "dur": I64, "pid": I32, "comm": STR, "syscall": STR, "fd": I32, "path": STR,
    "request_bytes": I64, "offset_bytes": I64, "ret": I64, "errno": STR, "source": STR,
}, "One row per system call of the workload (source strace: ts on the wall clock; source ftrace: the trace"
   " clock). fd/request_bytes/offset_bytes are -1 where the call has none; path from strace -y, else empty;"
   " dur null when the call never returned (or strace printed no <time>).")

FS_EVENT = Schema("fs_event", {
    **_EV, "event": STR, "dev_major": I32, "dev_minor": I32, "ino": I64, "body": STR,
}, "Other file system and writeback events (ext4_*, f2fs_*, writeback_*) with their device and inode where the"
   " text has them (-1 otherwise) and the raw body.")

FILE_EXTENT = Schema("file_extent", {
    "rep": I32, "region": STR, "path": STR, "logical_bytes": I64, "physical_bytes": I64, "length_bytes": I64,
    "dev_major": I32, "dev_minor": I32, "flags": STR,
}, "The file system layout snapshot: region is file (FIEMAP extents of the workload's files), journal (ext4"
   " journal / xfs log), or metadata (ext4 group descriptors, bitmaps and inode tables); physical_bytes is the"
   " offset on the device.")

TABLES = {s.name: s for s in (BLOCK_EVENT, BLOCK_RQ, TRACE_MARKER, FSYNC_EVENT, JBD2_RUN_STATS, JBD2_COMMIT,
                              FUSE_EVENT, FUSE_REQ, SYSCALL_IO, FS_EVENT, FILE_EXTENT)}

# --- result tables ---

BLOCK_IO = Schema("block_io", {
    "rep": I32, "ts": I64, "dev_major": I32, "dev_minor": I32, "sector": I64, "size_bytes": I64, "op": STR,
    "rwbs": STR, "size_class": STR, "locality": STR, "sync_mode": STR, "is_meta": BOOL,
    "q2g_ns": I64, "g2i_ns": I64, "i2d_ns": I64, "d2c_ns": I64, "q2c_ns": I64, "pid": I32, "comm": STR,
}, "Every block request classified (size class, locality, sync mode) with its btt latency phases.")

IO_CLASS = Schema("io_class", {
    "rep": I32, "layer": STR, "op": STR, "size_class": STR, "locality": STR, "sync_mode": STR,
    "count": I64, "bytes": I64,
}, "IO counts and bytes by layer (block), op, the papers' size class, locality and sync mode.")

LATENCY_SUMMARY = Schema("latency_summary", {
    "rep": I32, "layer": STR, "phase": STR, "op": STR, "count": I64, "mean_ns": F64, "p50_ns": F64,
    "p90_ns": F64, "p99_ns": F64, "max_ns": F64,
}, "Latency percentiles per layer phase (block q2c, d2c, ...) and op.")

RESULTS = {s.name: s for s in (BLOCK_IO, IO_CLASS, LATENCY_SUMMARY)}
