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

TABLES = {s.name: s for s in (BLOCK_EVENT, BLOCK_RQ, TRACE_MARKER)}

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
