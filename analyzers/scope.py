"""Whose IO is it: the scope of every task in a trace.

  workload     the workload's process tree: its root (task_role) and every task whose system calls were traced
               (the syscalls source follows the tree with event-fork, strace with -f)
  fuse_daemon  the stack's FUSE daemons, every thread (task_role)
  kernel       kernel threads (jbd2/*, kworker/*, ksoftirqd/*, flush-*, irq/*, swapper; f2fs's f2fs_ckpt-*,
               f2fs_flush-*, f2fs_discard-*, f2fs_gc-*) and the run's final `sync`:
               they write back and journal whoever's data is on the device
  mobiperf     mobiperf itself (task_role)
  other        every other task

The workload's figures count workload, fuse_daemon and, on a device that is the run's own (the emulated stack),
kernel; a shared device (a phone's /data, `dir:` stacks) leaves kernel threads out, since they work for every
process there, but for the file system's journaling threads (jbd2's commits, f2fs's checkpoints and merged
flushes): a sync of the workload waits for their writes, which the layer model must see to charge them to it.
mobiperf and other are never counted: they are reported apart, by task (io_background). Scope `all` (`mobiperf
run --scope all`, whole-device studies) counts every task. A run without task roles (ingested
traces, runs older than task_role) has no way to tell, and counts every task.
"""

from __future__ import annotations

import polars as pl

SCOPES = ("workload", "fuse_daemon", "kernel", "mobiperf", "other")
KERNEL_THREADS = r"^(?:jbd2/|kworker/|ksoftirqd/|flush-|irq/|swapper|kswapd|writeback|sync$|f2fs_)"
# The file system's own commits: what a sync waits for, on a shared device as on the run's own (io_span charges
# each to the syncs that waited for it; one no sync of the workload waited for is background there).
JOURNALING_THREADS = r"^(?:jbd2/|f2fs_ckpt-|f2fs_flush-)"


def task_scopes(task_role: pl.DataFrame | None, syscall_io: pl.DataFrame | None) -> pl.DataFrame:
    """(rep, pid, scope) for the tasks whose role is known: the workload's traced tasks, daemons, mobiperf."""
    frames = []
    if syscall_io is not None and len(syscall_io):
        frames.append(syscall_io.select("rep", "pid").unique().with_columns(scope=pl.lit("workload")))
    if task_role is not None and len(task_role):
        frames.append(task_role.select("rep", "pid", scope=pl.col("role")).unique())
    if not frames:
        return pl.DataFrame(schema={"rep": pl.Int32, "pid": pl.Int32, "scope": pl.Utf8})
    # A daemon's or mobiperf's role wins over `workload` (the syscalls source also traces the daemons' threads).
    rank = pl.col("scope").replace_strict({"mobiperf": 0, "fuse_daemon": 1, "workload": 2}, default=3)
    return (pl.concat([f.cast({"rep": pl.Int32, "pid": pl.Int32}) for f in frames])
            .sort(rank).unique(["rep", "pid"], keep="first"))


def with_scope(df: pl.DataFrame, task_role: pl.DataFrame | None, syscall_io: pl.DataFrame | None, *,
               pid: str = "pid", comm: str = "comm", process: str | None = None) -> pl.DataFrame:
    """df with a `scope` column for the task in its pid/comm columns. A task still named like mobiperf is
    mobiperf's child before it exec'd the workload (it chdir's into the stack: FUSE lookups of its own). With
    `process` (a column holding each task's thread group id), a task whose process has a role has it too: a
    thread a recorded app started after the snapshot that listed its threads."""
    known = task_scopes(task_role, syscall_io).rename({"pid": pid, "scope": "_scope"})
    out = df.join(known, on=["rep", pid], how="left")
    if process is not None:
        by_process = task_scopes(task_role, syscall_io).rename({"pid": process, "scope": "_process_scope"})
        out = out.join(by_process, on=["rep", process], how="left").with_columns(
            _scope=pl.coalesce("_scope", "_process_scope")).drop("_process_scope")
    own = []
    if task_role is not None and "comm" in task_role.columns:
        own = task_role.filter(pl.col("role") == "mobiperf")["comm"].drop_nulls().unique().to_list()
    name = pl.col(comm).fill_null("")
    return out.with_columns(scope=pl.when(name.is_in(own) & pl.lit(bool(own))).then(pl.lit("mobiperf"))
                            .otherwise(pl.coalesce("_scope", pl.when(name.str.contains(KERNEL_THREADS))
                                                   .then(pl.lit("kernel")).otherwise(pl.lit("other"))))).drop("_scope")


def counted(scope: pl.Expr, *, mode: str, device_private: bool, has_roles: bool,
            comm: pl.Expr | None = None) -> pl.Expr:
    """Whether rows of this scope are the workload's (see the module docstring); with the rows' comm, a shared
    device's journaling threads count too."""
    if mode == "all" or not has_roles:
        return pl.lit(True)
    if device_private:
        return scope.is_in(["workload", "fuse_daemon", "kernel"])
    ours = scope.is_in(["workload", "fuse_daemon"])
    if comm is None:
        return ours
    return ours | ((scope == "kernel") & comm.fill_null("").str.contains(JOURNALING_THREADS))
