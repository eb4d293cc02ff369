"""Which open file each replayed call uses: a handle per open file description of the recording.

A descriptor number means different files at different times and in different processes; what a call uses is
the description an open (or a dup of it) made. Every successful open and dup makes a handle; a later call on
descriptor `fd` whose file strace named `path` uses the handle of the latest open or dup that returned `fd` for
that `path` before it (a join on (fd, path) in call order: two processes may hold the same number for different
files at once, rarely the same number for the same path). After a rename the descriptors open on the old path are
named by the new one (strace -y prints a descriptor's current path), so a rename adds the new name to them; a
deleted file's ` (deleted)` suffix is gone already (from_syscalls.py).

A call whose descriptor was opened before the recording began has no open to match: such a file gets one handle
per (fd, path), opened (read-write if the trace writes through it, else read-only) just before its first use, in
that call's thread, and counted in the notes. The generator's dup shares the description, so positions move
together as in the kernel.
"""

from __future__ import annotations

from collections import Counter

import polars as pl

from mobiperf.analyzers.replay.from_syscalls import WRITES

HANDLE_COLUMNS = {"handle": pl.Int64, "handle2": pl.Int64}


def assign_handles(calls: pl.DataFrame) -> tuple[pl.DataFrame, int, Counter]:
    """(calls in replay order with `handle` and `handle2` (a dup's source), the number of handles, notes)."""
    calls = calls.sort("start_ns", maintain_order=True).with_row_index("_seq").with_columns(
        pl.col("_seq").cast(pl.Int64) * 2 + 1)
    binders = calls.filter(pl.col("op").is_in(["open", "dup"])).with_row_index("_h").select(
        pl.col("_h").cast(pl.Int64), "_seq", pl.col("new_fd").alias("_fd"), pl.col("path").alias("_path"))
    binders = pl.concat([binders, _renamed(binders, calls)]).sort("_seq")
    users = calls.filter(pl.col("fd").is_not_null()).select("_seq", pl.col("fd").alias("_fd"),
                                                            pl.col("path").alias("_path"))
    bound = users.sort("_seq").join_asof(binders.rename({"_seq": "_bseq"}).sort("_bseq"), left_on="_seq",
                                         right_on="_bseq", by=["_fd", "_path"], strategy="backward",
                                         allow_exact_matches=False, check_sortedness=False)
    nhandles = int(binders["_h"].max() + 1) if binders.height else 0
    unmatched = bound.filter(pl.col("_h").is_null())
    notes: Counter = Counter()
    synthetic = None
    if unmatched.height:
        keys = unmatched.group_by("_fd", "_path").agg(pl.col("_seq").min().alias("_first")).sort("_first") \
            .with_row_index("_new").with_columns(_new=pl.col("_new").cast(pl.Int64) + nhandles)
        nhandles += keys.height
        notes["descriptors opened before the recording began (opened at their first use)"] += keys.height
        bound = bound.join(keys.select("_fd", "_path", "_new"), on=["_fd", "_path"], how="left").with_columns(
            _h=pl.coalesce("_h", "_new")).drop("_new")
        synthetic = _first_use_opens(calls, keys)
    calls = calls.join(bound.select("_seq", pl.col("_h").alias("_used")), on="_seq", how="left")
    calls = calls.join(binders.filter(pl.col("_seq") % 2 == 1).select("_seq", pl.col("_h").alias("_made")),
                       on="_seq", how="left")
    calls = calls.with_columns(
        handle=pl.when(pl.col("op").is_in(["open", "dup"])).then(pl.col("_made")).otherwise(pl.col("_used")),
        handle2=pl.when(pl.col("op") == "dup").then(pl.col("_used")).otherwise(None).cast(pl.Int64))
    if synthetic is not None:
        calls = pl.concat([calls, synthetic], how="diagonal_relaxed")
    return calls.sort("_seq").drop("_used", "_made", "_seq"), nhandles, notes


def _renamed(binders: pl.DataFrame, calls: pl.DataFrame) -> pl.DataFrame:
    """Binder rows naming, from each rename on, the descriptors open on its old path by the new one."""
    renames = calls.filter(pl.col("op") == "rename").select(pl.col("_seq").alias("_rseq"), pl.col("path").alias(
        "_path"), pl.col("path2").alias("_to"))
    if not renames.height or not binders.height:
        return binders.clear()
    moved = binders.join(renames, on="_path").filter(pl.col("_seq") < pl.col("_rseq"))
    # even sequence numbers: after the rename (odd) itself, before the next call
    return moved.select("_h", (pl.col("_rseq") + 1).alias("_seq"), "_fd", pl.col("_to").alias("_path"))


def _first_use_opens(calls: pl.DataFrame, keys: pl.DataFrame) -> pl.DataFrame:
    """An open just before the first use of every descriptor the recording did not see opened."""
    first = calls.join(keys.rename({"_fd": "fd", "_path": "path"}), left_on=["_seq", "fd", "path"],
                       right_on=["_first", "fd", "path"])
    writes = calls.filter(pl.col("op").is_in([*WRITES, "ftruncate", "fallocate"])).select(
        pl.col("fd"), pl.col("path")).unique().with_columns(_writes=pl.lit(True))
    first = first.join(writes, on=["fd", "path"], how="left")
    return first.select(
        "tid", "start_ns", pl.col("start_ns").alias("end_ns"), pl.lit("open").alias("op"),
        pl.lit(None, pl.Int64).alias("fd"), pl.col("fd").alias("new_fd"), "path", pl.lit("").alias("path2"),
        pl.when(pl.col("_writes").fill_null(False)).then(pl.lit("rdwr")).otherwise(pl.lit("rdonly")).alias("flags"),
        pl.lit(None, pl.Int64).alias("offset"), pl.lit(None, pl.Int64).alias("size"),
        pl.lit(None, pl.Int64).alias("ret"), (pl.col("_seq") - 1).alias("_seq"),
        pl.col("_new").alias("handle"), pl.lit(None, pl.Int64).alias("handle2"),
        pl.lit(True).alias("is_synthetic"))
