"""SQLite transactions: the "journaling of journal" table of seed 002 (fsync calls, block writes, volume and the
file system journal's share per insert, for DELETE / TRUNCATE / PERSIST / WAL).

Window: the generator's timed window, between its trace markers `mobibench: timed_start` and `timed_end`
(trace_marker table), else the whole trace. Transactions are cut by the system calls: a transaction ends with
the exit of a sync call (fsync or fdatasync) on the database file (rollback journal modes: SQLite syncs the
journal, then the database) or on the WAL file (WAL mode: the commit syncs only the WAL), and starts where the
previous one ended (the first at the window start). IO after the last commit in the window is left out.

Per transaction: fsync and fdatasync calls (on any file), write calls and their bytes, and the block writes
queued inside it (any process: the journal thread's commits belong to it) with their journal and metadata bytes
and the flushes. sqlite_summary averages them per transaction and infers the journal mode from the files:
a -wal file: wal; else a -journal file that is unlinked (or, when the parser kept no path for unlink, any
unlink): delete; truncated (ftruncate/truncate): truncate; else persist.

Without paths (no strace, only the ext4_sync_file events of fsync_event), the cut uses the rhythm of the
syncs instead: a SQLite transaction makes the same sequence of sync calls each time (e.g. journal, directory,
journal, database in DELETE mode), so the smallest period p with which the sequence of synced inodes repeats
(inodes synced at most twice in the window, such as a DELETE-mode journal created anew, match each other) gives
one transaction per p syncs, cut at every p-th sync's exit.

When it applies: only to a run that wrote SQLite files (a db, -journal or -wal path among the calls) or whose
generator named a SQLite workload in its marker (`mobibench: workload sqlite journal=MODE`, which also gives the
journal mode where no paths tell it) or its command line (`mobibench -d N -j J`, run.json); otherwise it is
skipped with the reason. A WAL checkpoint (the database's
syncs after a commit's WAL sync, before the WAL is written again) is folded into the transaction that triggered it.

Limits: needs paths (strace -y) or the sync_file events; the rhythm breaks when transactions differ (a WAL
checkpoint adds a sync now and then); with several threads writing databases at once their transactions
interleave and the block writes of one are counted in another's window.
"""

from __future__ import annotations

import polars as pl

from mobiperf.analyzers.file_type import file_type_of_path
from mobiperf.analyzers.syscall import classify_syscalls
from mobiperf.core.errors import NotApplicable
from mobiperf.core.schema import SQLITE_TXN

COMMIT_FILES = ("db", "db-wal")
SQLITE_FILES = ("db", "db-journal", "db-wal")


def _fold_checkpoints(syncs: pl.DataFrame, calls: pl.DataFrame) -> pl.DataFrame:
    """Transaction ends (rep, txn, end_ts, _lo): each commit sync. In WAL mode (a rep that syncs its -wal) a
    commit is a sync of the WAL that was written since its previous sync; a checkpoint syncs the WAL with nothing
    new in it, then copies pages into the database and syncs that: those syncs end the transaction whose commit
    triggered the checkpoint (the last one before them), later."""
    wal_reps = syncs.filter(pl.col("file_type") == "db-wal")["rep"].unique().to_list()
    s = syncs.sort("rep", "end_ts").with_row_index("_i")
    wal_writes = calls.filter((pl.col("file_type") == "db-wal") & (pl.col("op") == "write")).select(
        "rep", pl.col("ts").alias("_w")).sort("_w")
    last = s.select("_i", "rep", "ts").sort("ts").join_asof(wal_writes, left_on="ts", right_on="_w", by="rep",
                                                            strategy="backward", check_sortedness=False)
    s = s.join(last.select("_i", "_w"), on="_i", how="left").sort("rep", "end_ts")
    is_wal = pl.col("file_type") == "db-wal"
    wal = s.filter(is_wal).with_columns(_prev=pl.col("end_ts").shift(1).over("rep")).select("_i", "_prev")
    s = s.join(wal, on="_i", how="left").with_columns(
        _commit=pl.when(pl.col("rep").is_in(wal_reps)).then(
            is_wal & pl.col("_w").is_not_null() & (pl.col("_w") > pl.col("_prev").fill_null(-1)))
        .otherwise(pl.lit(True)))
    s = s.with_columns(_txn=pl.col("_commit").cast(pl.Int64).cum_sum().over("rep") - 1).filter(pl.col("_txn") >= 0)
    return s.group_by("rep", "_txn").agg(end_ts=pl.col("end_ts").max(), _lo=pl.col("_lo").first()).sort(
        "rep", "end_ts").with_columns(txn=pl.int_range(pl.len()).over("rep").cast(pl.Int64)).select(
        "rep", "txn", "end_ts", "_lo")


def _window(trace_marker: pl.DataFrame | None, reps: list[int]) -> pl.DataFrame:
    rows = []
    for rep in reps:
        lo, hi = None, None
        if trace_marker is not None:
            m = trace_marker.filter(pl.col("rep") == rep)
            starts = m.filter(pl.col("text").str.contains("timed_start"))["ts"]
            ends = m.filter(pl.col("text").str.contains("timed_end"))["ts"]
            lo = int(starts.min()) if len(starts) else None
            hi = int(ends.max()) if len(ends) else None
        rows.append({"rep": rep, "_lo": lo, "_hi": hi})
    return pl.DataFrame(rows, schema={"rep": pl.Int32, "_lo": pl.Int64, "_hi": pl.Int64})


def cut_transactions(syscall_io: pl.DataFrame, block_io: pl.DataFrame, trace_marker: pl.DataFrame | None = None,
                     task_role: pl.DataFrame | None = None, fuse_req: pl.DataFrame | None = None) -> pl.DataFrame:
    calls = classify_syscalls(syscall_io, trace_marker, task_role, fuse_req)
    if not calls.filter(pl.col("file_type").is_in(SQLITE_FILES)).height:
        raise NotApplicable("no SQLite file among the calls' paths (paths come from strace)")
    reps = sorted(set(calls["rep"].to_list()))
    win = _window(trace_marker, reps)
    inside = (pl.col("ts") >= pl.col("_lo").fill_null(-(1 << 62))) & (pl.col("ts") <= pl.col("_hi").fill_null(1 << 62))
    calls = calls.join(win, on="rep").filter(inside).with_columns(end_ts=pl.col("ts") + pl.col("dur").fill_null(0))
    syncs = calls.filter(pl.col("syscall").is_in(["fsync", "fdatasync"]) & pl.col("file_type").is_in(COMMIT_FILES))
    bounds = _fold_checkpoints(syncs, calls)
    bounds = bounds.with_columns(
        start_ts=pl.col("end_ts").shift(1).over("rep").fill_null(pl.col("_lo")).fill_null(
            calls["ts"].min() if len(calls) else 0)).drop("_lo")
    if not len(bounds):
        return SQLITE_TXN.empty()

    c = _assign(bounds, calls, "end_ts").group_by("rep", "txn").agg(
        fsync=(pl.col("syscall") == "fsync").sum().cast(pl.Int64),
        fdatasync=(pl.col("syscall") == "fdatasync").sum().cast(pl.Int64),
        write_calls=(pl.col("op") == "write").sum().cast(pl.Int64),
        write_bytes=pl.col("size_bytes").filter(pl.col("op") == "write").sum().cast(pl.Int64))
    b = _block_counts(_assign(bounds, block_io.with_columns(_t=pl.coalesce("queue_ts", "issue_ts")), "_t"))
    out = bounds.join(c, on=["rep", "txn"], how="left").join(b, on=["rep", "txn"], how="left")
    return _finish(out)


def _sync_period(inodes: list[int], max_period: int = 16) -> int:
    """The smallest p such that inode[i] == inode[i + p] for at least 90 % of i (rare inodes match each other)."""
    from collections import Counter

    counts = Counter(inodes)
    rare = {ino for ino, n in counts.items() if n <= 2}
    n = len(inodes)
    for p in range(1, min(max_period, max(n // 2, 1)) + 1):
        pairs = n - p
        if pairs <= 0:
            break
        same = sum(1 for i in range(pairs)
                   if inodes[i] == inodes[i + p] or (inodes[i] in rare and inodes[i + p] in rare))
        if same >= 0.9 * pairs:
            return p
    return 1


def transactions_from_syncs(fsync_event: pl.DataFrame, block_io: pl.DataFrame,
                            trace_marker: pl.DataFrame | None = None,
                            sqlite_journal: str | None = None) -> pl.DataFrame:
    """sqlite_txn from the sync_file events alone (see the module docstring: the rhythm of the syncs)."""
    from mobiperf.analyzers.latency import sync_file_calls

    if not marker_journal_modes(trace_marker) and not sqlite_journal:
        raise NotApplicable("no SQLite workload known: no paths (strace), no generator marker or command naming one")
    syncs = sync_file_calls(fsync_event)
    win = _window(trace_marker, sorted(set(syncs["rep"].to_list())))
    syncs = syncs.join(win, on="rep").filter(
        (pl.col("ts") >= pl.col("_lo").fill_null(-(1 << 62))) & (pl.col("ts") <= pl.col("_hi").fill_null(1 << 62)))
    frames = []
    for rep in sorted(set(syncs["rep"].to_list())):
        s = syncs.filter(pl.col("rep") == rep).sort("ts")
        p = _sync_period(s["ino"].to_list())
        s = s.with_row_index("_i").with_columns(txn=(pl.col("_i") // p).cast(pl.Int64),
                                                end_ts=pl.col("ts") + pl.col("dur"))
        t = s.group_by("txn").agg(end_ts=pl.col("end_ts").max(), n=pl.len(),
                                  fsync=(pl.col("op") == "fsync").sum().cast(pl.Int64),
                                  fdatasync=(pl.col("op") == "fdatasync").sum().cast(pl.Int64),
                                  _lo=pl.col("_lo").first()).filter(pl.col("n") == p).sort("txn")
        t = t.with_columns(rep=pl.lit(rep, pl.Int32), start_ts=pl.col("end_ts").shift(1).fill_null(
            pl.col("_lo")).fill_null(s["ts"].min()))
        frames.append(t.select("rep", "txn", "start_ts", "end_ts", "fsync", "fdatasync"))
    if not frames:
        return SQLITE_TXN.empty()
    bounds = pl.concat(frames)
    b = _assign(bounds, block_io.with_columns(_t=pl.coalesce("queue_ts", "issue_ts")), "_t")
    out = bounds.join(_block_counts(b), on=["rep", "txn"], how="left").with_columns(
        write_calls=pl.lit(0, pl.Int64), write_bytes=pl.lit(0, pl.Int64))
    return _finish(out)


def _assign(bounds: pl.DataFrame, df: pl.DataFrame, t: str) -> pl.DataFrame:
    """Rows of df with the transaction (rep, txn) whose (start_ts, end_ts] holds their time t."""
    b = bounds.select("rep", "txn", pl.col("start_ts").alias("_b0"), pl.col("end_ts").alias("_b1")).sort("_b1")
    return df.filter(pl.col(t).is_not_null()).sort(t).join_asof(
        b, left_on=t, right_on="_b1", by="rep", strategy="forward", check_sortedness=False).filter(
        pl.col("txn").is_not_null() & (pl.col(t) >= pl.col("_b0")))


def _block_counts(b: pl.DataFrame) -> pl.DataFrame:
    w = pl.col("op") == "write"
    return b.group_by("rep", "txn").agg(
        block_writes=w.sum().cast(pl.Int64),
        block_write_bytes=pl.col("size_bytes").filter(w).sum().cast(pl.Int64),
        journal_bytes=pl.col("size_bytes").filter(w & (pl.col("region") == "journal")).sum().cast(pl.Int64),
        metadata_bytes=pl.col("size_bytes").filter(w & (pl.col("region") == "metadata")).sum().cast(pl.Int64),
        flushes=(pl.col("op") == "flush").sum().cast(pl.Int64))


_COUNTS = ["fsync", "fdatasync", "write_calls", "write_bytes", "block_writes", "block_write_bytes",
           "journal_bytes", "metadata_bytes", "flushes"]


def _finish(out: pl.DataFrame) -> pl.DataFrame:
    out = out.with_columns([pl.col(k).fill_null(0) for k in _COUNTS]).with_columns(
        dur_ns=pl.col("end_ts") - pl.col("start_ts"))
    return out.select("rep", "txn", "start_ts", "end_ts", "dur_ns", *_COUNTS).sort("rep", "txn")


def infer_journal_mode(syscall_io: pl.DataFrame) -> pl.DataFrame:
    """Per rep: wal, delete, truncate or persist (see the module docstring); `none` without a database file."""
    kinds = syscall_io.with_columns(ft=file_type_of_path(pl.col("path")))
    out = []
    for rep in sorted(set(syscall_io["rep"].to_list())):
        k = kinds.filter(pl.col("rep") == rep)
        j = k.filter(pl.col("ft") == "db-journal")
        # A -wal file that was really used: every mode probes for a hot -wal first, and that open fails.
        if k.filter((pl.col("ft") == "db-wal") & (pl.col("ret") >= 0)).height:
            mode = "wal"
        elif k.filter(pl.col("syscall").is_in(["unlink", "unlinkat"])
                      & pl.col("ft").is_in(["db-journal", "unknown"])).height:
            # unlink takes a path string, which strace parsers may not keep: an unlink of an unknown path
            # by a process that writes a rollback journal counts as the journal's deletion
            mode = "delete"
        elif j.filter(pl.col("syscall").is_in(["ftruncate", "truncate"])).height:
            mode = "truncate"
        elif len(j):
            mode = "persist"
        else:
            mode = "none"
        out.append({"rep": rep, "journal_mode": mode})
    return pl.DataFrame(out, schema={"rep": pl.Int32, "journal_mode": pl.Utf8})


def marker_journal_modes(trace_marker: pl.DataFrame | None) -> dict[int, str]:
    """Per rep, the journal mode the generator named in its marker `mobibench: workload sqlite journal=MODE`."""
    if trace_marker is None or not len(trace_marker):
        return {}
    m = trace_marker.with_columns(mode=pl.col("text").str.extract(r"workload sqlite journal=(\w+)")) \
        .filter(pl.col("mode").is_not_null())
    return {rep: mode.lower() for rep, mode in m.select("rep", "mode").unique("rep").iter_rows()}


def summarize_transactions(sqlite_txn: pl.DataFrame, syscall_io: pl.DataFrame | None = None,
                           trace_marker: pl.DataFrame | None = None, sqlite_journal: str | None = None) -> pl.DataFrame:
    s = sqlite_txn.group_by("rep").agg(
        transactions=pl.len().cast(pl.Int64),
        fsync_per_txn=(pl.col("fsync") + pl.col("fdatasync")).mean(),
        block_writes_per_txn=pl.col("block_writes").mean(),
        block_kib_per_txn=pl.col("block_write_bytes").mean() / 1024,
        fs_journal_kib_per_txn=pl.col("journal_bytes").mean() / 1024,
        journal_meta_share=pl.when(pl.col("block_write_bytes").sum() > 0).then(
            (pl.col("journal_bytes").sum() + pl.col("metadata_bytes").sum()) / pl.col("block_write_bytes").sum()))
    named = marker_journal_modes(trace_marker)
    if syscall_io is not None:
        s = s.join(infer_journal_mode(syscall_io), on="rep", how="left")
    else:
        s = s.with_columns(journal_mode=pl.lit(None, pl.Utf8))
    # The generator's own word where the paths say nothing (no strace: the syscalls events carry no paths).
    s = s.with_columns(journal_mode=pl.when(pl.col("journal_mode").is_in(["none"]) | pl.col("journal_mode").is_null())
                       .then(pl.col("rep").replace_strict(named, default=sqlite_journal or "unknown",
                                                          return_dtype=pl.Utf8))
                       .otherwise(pl.col("journal_mode")))
    return s.select(
        "rep", "journal_mode", "transactions", "fsync_per_txn", "block_writes_per_txn", "block_kib_per_txn",
        "fs_journal_kib_per_txn", "journal_meta_share").sort("rep")


def sqlite_transactions(syscall_io: pl.DataFrame, block_io: pl.DataFrame, trace_marker: pl.DataFrame,
                        task_role: pl.DataFrame | None = None, fuse_req: pl.DataFrame | None = None) -> pl.DataFrame:
    return cut_transactions(syscall_io, block_io, trace_marker, task_role, fuse_req)


def sqlite_summary(sqlite_txn: pl.DataFrame, syscall_io: pl.DataFrame | None = None,
                   trace_marker: pl.DataFrame | None = None, sqlite_journal: str | None = None) -> pl.DataFrame:
    return summarize_transactions(sqlite_txn, syscall_io, trace_marker, sqlite_journal)
