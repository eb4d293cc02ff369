"""What f2fs's design says a known workload writes, checked on an analysed run: shared by the golden tests on
the virtual phone's captures (tests/golden/test_f2fs_layers.py) and the live test on a phone
(tests/vphone/test_vphone_f2fs.py).

f2fs_do_sync_file (fs/f2fs/file.c, 6.1): write the file's dirty data; if the inode needs a checkpoint
(cp_reason: a new file whose parent directory is not yet checkpointed, ...) write one (f2fs_sync_fs) and stop;
else, when the file grew or its inode changed, write its dirty node blocks (for a file under 3.6 MiB, the inode
block alone: it holds the data addresses) marked for roll-forward recovery; a datasync that only overwrote data
in place (fdatasync sets FI_NEED_IPU: in-place update) writes no node; then a cache flush (f2fs_issue_flush,
issued by the caller itself when it is the only one waiting).
"""

from __future__ import annotations

import polars as pl


def per_call(spans: pl.DataFrame, call: str, fsync_event: pl.DataFrame | None = None) -> pl.DataFrame:
    """Per call named `call`: its data, node and checkpoint-area block writes, flushes and checkpoints (the
    spans it caused, counted once: is_primary), in call order; with fsync_event, the cp_reason of its
    f2fs_sync_file (`no needed`, or why it wrote a checkpoint) and needs_cp."""
    calls = spans.filter((pl.col("layer") == "syscall") & (pl.col("name") == call)).select("rep", "call_id", "ts")
    mine = spans.filter(pl.col("call_id").is_not_null() & pl.col("is_primary"))
    block = (pl.col("layer") == "block") & (pl.col("op") == "write")
    in_checkpoint = pl.col("parent_id").is_in(mine.filter(pl.col("layer") == "journal")["span_id"].implode())
    counts = mine.group_by("rep", "call_id").agg(
        data=(block & (pl.col("region") == "data")).sum(),
        data_bytes=pl.col("size_bytes").filter(block & (pl.col("region") == "data")).sum(),
        node=(block & (pl.col("region") == "node")).sum(),
        cp_area=(block & (pl.col("region") == "checkpoint")).sum(),
        other_meta=(block & pl.col("region").is_in(["sit", "nat", "ssa", "metadata"])).sum(),
        flushes=((pl.col("layer") == "block") & (pl.col("op") == "flush")).sum(),
        checkpoints=((pl.col("layer") == "journal") & (pl.col("name") == "f2fs_checkpoint")).sum(),
        node_in_checkpoint=(block & (pl.col("region") == "node") & in_checkpoint).sum(),
        data_in_checkpoint=(block & (pl.col("region") == "data") & in_checkpoint).sum())
    rows = calls.join(counts, on=["rep", "call_id"], how="left").fill_null(0).sort("ts")
    if fsync_event is None:
        return rows
    exits = fsync_event.filter((pl.col("fs") == "f2fs") & (pl.col("phase") == "exit")).select(
        "rep", pl.col("pid").alias("tid"), pl.col("ts").alias("end_ts"), "cp_reason")
    reasons = spans.filter(pl.col("name") == "f2fs_sync_file").select("rep", "call_id", "tid", "end_ts").join(
        exits, on=["rep", "tid", "end_ts"]).select("rep", "call_id", "cp_reason")
    return rows.join(reasons, on=["rep", "call_id"], how="left").with_columns(
        needs_cp=~pl.col("cp_reason").is_in(["no needed", "0"]))


def check_appending_fdatasyncs(spans: pl.DataFrame, fsync_event: pl.DataFrame, n: int = 100) -> None:
    """n appending 4 KiB writes, each followed by fdatasync, into a file the generator created: every fdatasync
    writes its own 4 KiB of data, itself. One whose f2fs_sync_file says it needed a checkpoint (cp_reason: only the first
    can, when its file's directory is newer than the last checkpoint: `node needs cp`) waits for one, whose writes
    nest under it: node blocks, the checkpoint pack. Every other one writes exactly one node block (the inode:
    i_size grew) and one flush, and no checkpoint."""
    rows = per_call(spans, "fdatasync", fsync_event).with_columns(own_data=pl.col("data") - pl.col("data_in_checkpoint"))
    assert rows.height == n and rows["cp_reason"].is_not_null().all(), rows.height
    assert (rows["own_data"] == 1).all(), rows.filter(pl.col("own_data") != 1)
    assert (rows.filter(pl.col("checkpoints") == 0)["data_bytes"] == 4096).all()
    with_cp = rows.filter(pl.col("needs_cp"))
    assert with_cp.height <= 1 and (with_cp["call_id"] == rows["call_id"][0]).all(), with_cp
    assert (rows["checkpoints"] == rows["needs_cp"].cast(pl.UInt32)).all(), rows.filter(pl.col("checkpoints") > 0)
    for first in with_cp.iter_rows(named=True):
        assert first["cp_area"] >= 2, first         # the pack's header (and summaries), then its commit block
        assert first["node"] == first["node_in_checkpoint"] >= 1, first   # the inode, written by the checkpoint
        # (the checkpoint also writes the directories' dentry blocks: data, in it)
    rest = rows.filter(~pl.col("needs_cp"))
    assert (rest["node"] == 1).all(), rest.filter(pl.col("node") != 1)
    assert (rest["flushes"] == 1).all(), rest.filter(pl.col("flushes") != 1)
    assert (rest["cp_area"] == 0).all() and (rest["other_meta"] == 0).all()


def check_overwriting_fdatasyncs(spans: pl.DataFrame, file_extents: pl.DataFrame | None, n: int = 100) -> None:
    """n 4 KiB overwrites of a pre-created file, each followed by fdatasync: in-place updates (fdatasync sets
    FI_NEED_IPU), so each writes its own 4 KiB of data where the file's block already is, no node block (the inode
    is unchanged but for its times, which fdatasync does not persist) and one flush. Where the file's blocks are:
    its FIEMAP extents (filefrag.txt), else what the generator's fsync of the new file wrote (the first fsync)."""
    rows = per_call(spans, "fdatasync")
    assert rows.height == n, rows.height
    assert (rows["data"] == 1).all() and (rows["data_bytes"] == 4096).all()
    assert (rows["node"] == 0).all() and (rows["checkpoints"] == 0).all(), rows.filter(pl.col("node") > 0)
    assert (rows["flushes"] == 1).all()
    block = (pl.col("layer") == "block") & (pl.col("region") == "data")
    if file_extents is not None and file_extents.filter(pl.col("region") == "file").height:
        home = file_extents.filter(pl.col("region") == "file").select(
            pl.col("physical_bytes").alias("b0"), (pl.col("physical_bytes") + pl.col("length_bytes")).alias("b1"))
    else:
        created = per_call(spans, "fsync")["call_id"][0]
        home = spans.filter((pl.col("call_id") == created) & block).select(
            (pl.col("sector") * 512).alias("b0"), (pl.col("sector") * 512 + pl.col("size_bytes")).alias("b1"))
    assert home["b1"].sum() - home["b0"].sum() >= n * 4096, home      # the whole file, 400 KiB
    writes = spans.filter(pl.col("call_id").is_in(rows["call_id"].implode()) & block)
    inside = writes.join(home, how="cross").filter(
        (pl.col("sector") * 512 >= pl.col("b0")) & (pl.col("sector") * 512 + pl.col("size_bytes") <= pl.col("b1")))
    assert inside.height == n, f"{inside.height} of {n} data writes inside the file's own blocks"
    assert inside["sector"].n_unique() == n                           # each record its own block: sequential


def check_sync_checkpoint(spans: pl.DataFrame) -> None:
    """A buffered write then sync(2): sync waits for the checkpoint its f2fs_sync_fs(wait) issues, and every
    checkpoint under it writes its pack to the checkpoint area: at least its header (with the summaries) and its
    commit block, the last with REQ_PREFLUSH | REQ_FUA, whose flushes nest under that write. (On the virtual
    phone a sync(2) waited for two checkpoints, the second writing its pack alone.)"""
    rows = per_call(spans, "sync")
    assert rows.height == 1 and rows["checkpoints"][0] >= 1, rows
    assert rows["cp_area"][0] >= 2 * rows["checkpoints"][0], rows
    assert rows["flushes"][0] >= rows["checkpoints"][0], rows
