"""f2fs's sync in the nest of a call (analyzers/io_span.py): its checkpoints as the journal layer, and the cache
flushes its flush thread issues for waiting fsyncs.

What f2fs does for fsync (fs/f2fs/file.c, f2fs_do_sync_file): it writes the file's dirty data, then, unless the
inode needs a checkpoint, the file's dirty node blocks with an fsync mark (roll-forward recovery finds them after a
crash: no checkpoint, no journal), then a cache flush (f2fs_issue_flush). When the inode needs one (cp_reason in
f2fs_sync_file_exit: a new file whose parent is not yet checkpointed, a hard link, ...), it writes a checkpoint
instead (f2fs_sync_fs): node blocks, the NAT/SIT/SSA blocks that changed, and the checkpoint pack, whose last
block goes with REQ_PREFLUSH | REQ_FUA (META_FLUSH). sync(2) and syncfs(2) write one too.

The links (each recorded by the kernel, as io_span's are):
  checkpoint   one span per f2fs_write_checkpoint `start block_ops` -> `finish checkpoint` of a device, in the
               thread that wrote it: the syncing thread itself, or the f2fs_ckpt-M:m thread under the
               checkpoint_merge mount option (on by default in 6.1's Debian kernel and on Android), which the
               syncing thread waits for. It is the journal layer: io_span charges it, like a jbd2 commit, to every
               sync running on its device when it ended, and its block requests are those its thread submitted
               during it.
  flush        with flush_merge (the default), an fsync issues its flush itself when it is the only one waiting;
               when others wait, the f2fs_flush-M:m thread issues one flush for all of them. Such a flush is
               charged, like a checkpoint, to every sync on its device running when it completed (they all
               waited for it), its bytes to the first.
Limits: a checkpoint whose start or end event was lost is not a span (its blocks stay their thread's).
"""

from __future__ import annotations

from typing import Callable

import polars as pl

FLUSH_THREAD = "f2fs_flush-"


def checkpoint_entities(f2fs_checkpoint: pl.DataFrame | None,
                        tag: Callable[[pl.DataFrame], pl.DataFrame]) -> pl.DataFrame | None:
    """Journal-layer spans of the checkpoints (rep, layer, name, tid, comm, start, end, dev_major, dev_minor),
    tagged with entity ids by `tag`; None without checkpoint events. Checkpoints of one file system are serial
    (the kernel holds its cp_global_sem), so each start pairs with the next end of its device."""
    if f2fs_checkpoint is None or not f2fs_checkpoint.height:
        return None
    ev = f2fs_checkpoint.filter(pl.col("phase").is_in(["start", "end"])).sort("rep", "dev_major", "dev_minor", "ts")
    ev = ev.with_columns(n=pl.col("phase").eq("start").cum_sum().over("rep", "dev_major", "dev_minor"))
    spans = ev.group_by("rep", "dev_major", "dev_minor", "n").agg(
        start=pl.col("ts").filter(pl.col("phase") == "start").first(),
        end=pl.col("ts").filter(pl.col("phase") == "end").first(),
        tid=pl.col("pid").filter(pl.col("phase") == "start").first(),
        comm=pl.col("comm").filter(pl.col("phase") == "start").first(),
    ).filter(pl.col("start").is_not_null() & pl.col("end").is_not_null() & (pl.col("n") > 0))
    if not spans.height:
        return None
    # ids in time order: the same every time (group_by keeps no order)
    return tag(spans.sort("rep", "start", "dev_major", "dev_minor").select(
        "rep", pl.lit("journal").alias("layer"), pl.lit("f2fs_checkpoint").alias("name"), "tid", "comm", "start",
        "end", "dev_major", "dev_minor"))


def flush_thread_flushes(blocks: pl.DataFrame) -> pl.DataFrame | None:
    """The flushes f2fs's flush thread submitted, as io_span waits for them (rep, eid, end, dev_major, dev_minor),
    None if none: io_span charges each to the syncs of its device running when it completed, as a commit."""
    flushes = blocks.filter((pl.col("op") == "flush") & pl.col("comm").fill_null("").str.starts_with(FLUSH_THREAD))
    return flushes.select("rep", "eid", "end", "dev_major", "dev_minor") if flushes.height else None
