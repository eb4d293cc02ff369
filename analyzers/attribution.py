"""Whose is each span: the process, thread and file every row of io_span belongs to, by causality.

io_span (analyzers/io_span.py) nests every span under what caused it: a call's FUSE requests, the daemon's calls
that served them, the journal commits its sync waited for, the block requests its thread (or the daemon's, or
the committing jbd2 thread) submitted, their device time. Each nest starts at a root: a call of the workload (or,
on a trace without calls, an operation of the file layer), or, for IO no call caused, the first span of it
(a writeback block request, a periodic journal commit). So:

  thread, tid    the root's thread: the app thread whose call it was, for everything the call caused (the FUSE
                 daemon's work, the jbd2 thread's commit, the kworker's flush included); for IO no call caused,
                 the task that did it (kworker, jbd2/...): `background by task`
  process, pid   that thread's process (analyzers/task_identity.py); pid null where no source says, process then
                 the thread's name
  path           the top-most path on the way from the root down to the span: the call's own path where it has
                 one (strace -y: the app's name of the file, on FUSE the path under the mount), else the file
                 layer's (android_fs), else a deeper span's (block requests: the layout snapshot's extents); a
                 span that names an inode (sync_file, a file span) and no path takes the inode's path where a
                 listing (inode_path: the layout snapshot's, a recorded app's) or android_fs names it; a nest
                 whose root names no file but whose spans name exactly one is that file's, all of it
  path_from      the layer of the span that gave the path (syscall, file, block ...)
  root_id        the span_id of the nest's root (the call, or the first span of IO no call caused)
  file_type      from the path (analyzers/file_type.py), unknown without one
  scope          the root thread's (analyzers/scope.py): workload, fuse_daemon, kernel, mobiperf, other

Never by clock proximity: every link used here is io_span's, each one something the kernel recorded.
Limits: a call without a path (ftrace syscalls alone) gets its file from below, so its spans can name more than one
file; a file deleted before the layout snapshot is named only where a call or an android_fs event named it.
"""

from __future__ import annotations

import polars as pl

from mobiperf.analyzers.file_type import file_type_of_path
from mobiperf.analyzers.scope import with_scope
from mobiperf.analyzers.task_identity import thread_identities

# What a trace prints for a thread whose name it did not keep (ftrace's saved cmdlines overflowed: `<...>`)
UNNAMED = ("", "<...>")
MAX_DEPTH = 32  # io_span's deepest nest is 9 spans; a loop that has not ended by then has orphans


def attribute_spans(io_span: pl.DataFrame, task: pl.DataFrame | None = None,
                    android_fs_event: pl.DataFrame | None = None, task_role: pl.DataFrame | None = None,
                    syscall_io: pl.DataFrame | None = None, sched_switch: pl.DataFrame | None = None,
                    inode_path: pl.DataFrame | None = None) -> pl.DataFrame:
    """span_owner: one row per io_span row with its owner and file (module docstring)."""
    chains = _root_and_path(_with_inode_paths(io_span, inode_path, android_fs_event))
    who = thread_identities(task, android_fs_event, _event_names(io_span, sched_switch))
    out = chains.join(who.rename({"tid": "root_tid", "thread": "_known_thread"}), on=["rep", "root_tid"],
                      how="left")
    named = pl.when(~pl.col("root_comm").fill_null("").is_in(UNNAMED)).then(pl.col("root_comm"))
    out = out.with_columns(thread=pl.coalesce(named, "_known_thread"))
    out = out.with_columns(process=pl.coalesce("process", "thread"))
    out = with_scope(out, task_role, syscall_io, pid="root_tid", comm="thread", process="pid")
    return out.select(
        "rep", "span_id", "scope", "process", "pid", "thread", pl.col("root_tid").alias("tid"),
        pl.col("top_path").alias("path"), file_type_of_path(pl.col("top_path")).alias("file_type"),
        "path_from", "root_id").sort("rep", "span_id")


def _with_inode_paths(io_span: pl.DataFrame, inode_path: pl.DataFrame | None,
                      android_fs_event: pl.DataFrame | None) -> pl.DataFrame:
    """io_span with the path of each span that names an inode and no path (a sync_file, a file span the kernel
    could not name), where the inode names exactly one path (listings, android_fs's own entries)."""
    known = []
    if inode_path is not None and len(inode_path):
        known.append(inode_path.select("rep", "ino", "path"))
    if android_fs_event is not None and len(android_fs_event):
        known.append(android_fs_event.filter((pl.col("phase") == "start")
                                             & ~pl.col("path").fill_null("<unknown>").is_in(["<unknown>", ""]))
                     .select("rep", "ino", "path"))
    if not known or "ino" not in io_span.columns:
        return io_span
    pairs = pl.concat(known).unique()
    single = pairs.group_by("rep", "ino").agg(pl.col("path").first().alias("_ino_path"), pl.len().alias("_n"))
    single = single.filter(pl.col("_n") == 1).drop("_n")
    out = io_span.join(single, on=["rep", "ino"], how="left")
    named = pl.when(pl.col("path").fill_null("") != "").then(pl.col("path")).otherwise(pl.col("_ino_path"))
    return out.with_columns(path=named).drop("_ino_path")


def _event_names(io_span: pl.DataFrame, sched_switch: pl.DataFrame | None) -> pl.DataFrame:
    """Each thread's name as its events print it: the most frequent among its spans (a strace-timed call has
    none of its own), else the last a context switch gave it."""
    names = [io_span.select("rep", "tid", "comm")]
    if sched_switch is not None and len(sched_switch):
        names.append(sched_switch.select("rep", pl.col("next_tid").alias("tid"), pl.col("next_comm").alias("comm")))
    named = pl.concat(names).filter(~pl.col("comm").fill_null("").is_in(UNNAMED))
    return named.group_by("rep", "tid").agg(pl.col("comm").mode().first().alias("thread"))


def _root_and_path(io_span: pl.DataFrame) -> pl.DataFrame:
    """(rep, span_id, root_id, root_tid, root_comm, top_path, path_from) for every span, walked down from the
    roots one level at a time (a span's parent is one level up)."""
    own_path = pl.when(pl.col("path").fill_null("") == "").then(None).otherwise(pl.col("path"))
    spans = io_span.select("rep", "span_id", "parent_id", "tid", "comm", "layer", own_path.alias("own_path"))
    level = spans.filter(pl.col("parent_id").is_null()).select(
        "rep", "span_id", pl.col("span_id").alias("root_id"), pl.col("tid").alias("root_tid"),
        pl.col("comm").alias("root_comm"),
        pl.col("own_path").alias("top_path"),
        pl.when(pl.col("own_path").is_not_null()).then(pl.col("layer")).alias("path_from"))
    found = [level]
    rest = spans.filter(pl.col("parent_id").is_not_null())
    for _ in range(MAX_DEPTH):
        if not rest.height or not level.height:
            break
        kids = rest.join(level.rename({"span_id": "parent_id"}), on=["rep", "parent_id"], how="inner")
        level = kids.select(
            "rep", "span_id", "root_id", "root_tid", "root_comm", pl.coalesce("top_path", "own_path").alias("top_path"),
            pl.when(pl.col("top_path").is_not_null()).then(pl.col("path_from"))
            .when(pl.col("own_path").is_not_null()).then(pl.col("layer")).alias("path_from"))
        found.append(level)
        rest = rest.join(level.select("rep", "span_id"), on=["rep", "span_id"], how="anti")
    return _single_nest_path(pl.concat(found), spans)


def _single_nest_path(chains: pl.DataFrame, spans: pl.DataFrame) -> pl.DataFrame:
    """A nest whose root names no file but whose spans name exactly one (a call without strace's path whose
    sync_file named the file's inode) takes that file (its longest spelling) for its spans that had none."""
    named = chains.join(spans.select("rep", "span_id", "own_path", "layer"), on=["rep", "span_id"]).filter(
        pl.col("own_path").is_not_null())
    # one file, however each listing spells it: the layout's filefrag relative, its find absolute
    longest = named.sort(pl.col("own_path").str.len_chars(), "span_id", descending=[True, False]).group_by(
        "rep", "root_id").agg(_only=pl.col("own_path").first(), _from=pl.col("layer").first())
    same = named.join(longest, on=["rep", "root_id"]).with_columns(
        _same=(pl.col("own_path") == pl.col("_only")) | pl.col("_only").str.ends_with("/" + pl.col("own_path")))
    one = same.group_by("rep", "root_id").agg(pl.col("_same").all(), pl.col("_only").first(),
                                              pl.col("_from").first())
    one = one.filter(pl.col("_same")).drop("_same")
    out = chains.join(one, on=["rep", "root_id"], how="left")
    return out.with_columns(
        path_from=pl.when(pl.col("top_path").is_null()).then(pl.col("_from")).otherwise(pl.col("path_from")),
        top_path=pl.coalesce("top_path", "_only")).drop("_only", "_from")
