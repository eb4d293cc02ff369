"""Who a thread is: its process (pid, the thread group id), its own name and its process's name.

A trace names threads (comm) everywhere but says which process a thread belongs to only in some places; each
source is a row of the `task` table (collectors/parse: the tgid column of ftrace text, task_newtask events, the
run's tasks.json, a /proc snapshot taken when recording a phone, systrace's `ps` listings (process_dump.py),
Perfetto's process_tree), and Android's
android_fs start events carry the task's tgid (pid) and command line beside the thread's own id.

thread_identities() keeps one row per (rep, tid): pid and thread from the most trusted source that says them
(SOURCE_RANK: a snapshot of /proc or `ps` and Perfetto's process tree, which read the kernel's own task lists,
before the run's own notes, before what single events imply, before the names the thread's events carry);
process from the same order, else the name of the group leader (the thread whose tid is the pid), else null. A
thread task_newtask made with CLONE_THREAD in a trace without tgids is its creator's process's (parent_tid,
followed).
Limits: a tid reused by a new thread during one trace keeps its first identity.
"""

from __future__ import annotations

import polars as pl

SOURCE_RANK = {"proc": 0, "ps": 0, "perfetto": 1, "tasks.json": 2, "trace": 3, "task_newtask": 4, "android_fs": 5,
               "events": 6}
IDENTITY = {"rep": pl.Int32, "tid": pl.Int32, "pid": pl.Int32, "thread": pl.Utf8, "process": pl.Utf8}


def thread_identities(task: pl.DataFrame | None = None, android_fs_event: pl.DataFrame | None = None,
                      names: pl.DataFrame | None = None) -> pl.DataFrame:
    """(rep, tid, pid, thread, process) for every thread some source describes (module docstring); names:
    (rep, tid, thread) seen in the events themselves, the last resort for a thread's name."""
    frames = []
    if names is not None and len(names):
        frames.append(names.select("rep", "tid", pl.lit(None, pl.Int32).alias("pid"), "thread",
                                   pl.lit(None, pl.Utf8).alias("process"), pl.lit("events").alias("source")))
    parents = None
    if task is not None and len(task):
        frames.append(task.select("rep", "tid", "pid", "thread", "process", "source"))
        if "parent_tid" in task.columns:
            parents = task.filter(pl.col("parent_tid").is_not_null()).select("rep", "tid", "parent_tid").unique(
                ["rep", "tid"])
    if android_fs_event is not None and len(android_fs_event):
        starts = android_fs_event.filter(pl.col("phase") == "start")
        frames.append(starts.select("rep", pl.col("pid").alias("tid"), pl.col("task_pid").alias("pid"),
                                    pl.col("comm").alias("thread"), pl.col("cmdline").alias("process"),
                                    pl.lit("android_fs").alias("source")).unique(["rep", "tid", "pid", "process"]))
    if not frames:
        return pl.DataFrame(schema=IDENTITY)
    rows = pl.concat([f.cast({"rep": pl.Int32, "tid": pl.Int32, "pid": pl.Int32}) for f in frames],
                     how="vertical_relaxed")
    rows = rows.with_columns(
        _rank=pl.col("source").replace_strict(SOURCE_RANK, default=len(SOURCE_RANK), return_dtype=pl.Int32),
        thread=pl.when(pl.col("thread") == "").then(None).otherwise(pl.col("thread")),
        process=pl.when(pl.col("process") == "").then(None).otherwise(pl.col("process")))
    best = rows.sort("_rank").group_by("rep", "tid", maintain_order=True).agg(
        pl.col("pid").drop_nulls().first(), pl.col("thread").drop_nulls().first(),
        pl.col("process").drop_nulls().first())
    if parents is not None and parents.height:
        best = _follow_parents(best, parents)
    leaders = best.filter(pl.col("tid") == pl.col("pid")).select(
        "rep", "pid", pl.col("thread").alias("_leader"), pl.col("process").alias("_leader_process"))
    out = best.join(leaders, on=["rep", "pid"], how="left").with_columns(
        process=pl.coalesce("process", "_leader_process", "_leader"))
    return out.select(list(IDENTITY)).cast(IDENTITY)


def _follow_parents(best: pl.DataFrame, parents: pl.DataFrame, rounds: int = 8) -> pl.DataFrame:
    """A thread whose process no source says takes its creator's (task_newtask's parent_tid), following chains of
    threads made by threads; a creator no source describes is taken as its process's leader (the thread that
    makes threads is most often the main one)."""
    best = best.join(parents, on=["rep", "tid"], how="left")
    for _ in range(rounds):
        todo = best.filter(pl.col("pid").is_null() & pl.col("parent_tid").is_not_null())
        if not todo.height:
            break
        known = best.select("rep", pl.col("tid").alias("parent_tid"), pl.col("pid").alias("_parent_pid"))
        best = best.join(known, on=["rep", "parent_tid"], how="left").with_columns(
            pid=pl.coalesce("pid", "_parent_pid")).drop("_parent_pid")
    orphans = pl.col("pid").is_null() & pl.col("parent_tid").is_not_null()
    return best.with_columns(pid=pl.when(orphans).then(pl.col("parent_tid")).otherwise(pl.col("pid"))).drop(
        "parent_tid")
