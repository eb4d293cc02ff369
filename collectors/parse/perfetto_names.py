"""Thread names over time in a Perfetto trace: the comm the kernel's text would print for an event's pid.

An FtraceEvent carries its thread's pid, not its name (the kernel's text takes the name from its saved cmdlines).
Names come from:
  process_tree packets   each thread's name (its comm); a process's main thread: cmdline[0] when the trace says
                         it is the comm (cmdline_is_comm), else its base name cut to 15 bytes, as the kernel keeps
                         comm (TASK_COMM_LEN 16 with the NUL)
  task_newtask           the new thread's pid and comm; task_rename: pid and newcomm
  sched_switch/wakeup    prev_comm/next_comm, comm of the woken thread (where the trace has them)
A pid's name at time t is its last name given at or before t, else its first name given later (a thread seen
before its first scan or rename had that name already: names change by rename only); pid 0 is always <idle>
and a pid no source names is <...>, as in the kernel's text.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from mobiperf.collectors.parse.perfetto_schema import decode_message

TASK_COMM_LEN = 16
# event -> [(pid field, name field)] of the events that name threads
NAMING_EVENTS = {"task_newtask": [("pid", "comm")], "task_rename": [("pid", "newcomm")],
                 "sched_switch": [("prev_pid", "prev_comm"), ("next_pid", "next_comm")],
                 "sched_wakeup": [("pid", "comm")], "sched_waking": [("pid", "comm")],
                 "sched_wakeup_new": [("pid", "comm")], "sched_process_exec": [("pid", "filename")]}


def process_tree_tasks(trees: list[tuple[int, bytes]], rep: int) -> pl.DataFrame | None:
    """task rows (source perfetto) of process_tree packets: every thread with its tgid and name, every process with
    its command line's first word (a package name on Android), the last scan's word where scans differ."""
    rows = []
    for _, raw in trees:
        tree = decode_message("ProcessTree", raw)
        if tree is None:
            continue
        rows += [(p.pid, p.pid, None, p.cmdline[0] if p.cmdline else None) for p in tree.processes]
        rows += [(t.tid, t.tgid or None, t.name or None, None) for t in tree.threads]
    if not rows:
        return None
    df = pl.DataFrame(rows, schema={"tid": pl.Int32, "pid": pl.Int32, "thread": pl.Utf8, "process": pl.Utf8},
                      orient="row")
    df = df.group_by("tid", maintain_order=True).agg(pl.col("pid").drop_nulls().last(),
                                                     pl.col("thread").drop_nulls().last(),
                                                     pl.col("process").drop_nulls().last())
    return df.with_columns(rep=pl.lit(rep, pl.Int32), source=pl.lit("perfetto"))


class NameTimeline:
    def __init__(self):
        self.parts: list[pl.DataFrame] = []

    def add(self, pid: np.ndarray, ts: np.ndarray, name: pl.Series) -> None:
        if len(pid):
            self.parts.append(pl.DataFrame({"pid": np.asarray(pid, np.int64), "ts": np.asarray(ts, np.int64),
                                            "name": name.cast(pl.Utf8)}))

    def add_trees(self, trees: list[tuple[int, bytes]]) -> None:
        """Names of process_tree packets: [(the packet's timestamp or -1, its bytes)]; a tree without a time is
        taken as the trace's start (the scan perfetto makes when it begins)."""
        pids, times, names = [], [], []
        for ts, raw in trees:
            tree = decode_message("ProcessTree", raw)
            if tree is None:
                continue
            ts = max(int(ts), 0)
            for p in tree.processes:
                if p.cmdline:
                    first = p.cmdline[0]
                    comm = first if p.cmdline_is_comm else first.rsplit("/", 1)[-1]
                    pids.append(p.pid)
                    times.append(ts)
                    names.append(comm.encode()[:TASK_COMM_LEN - 1].decode(errors="ignore"))
            for t in tree.threads:
                if t.name:
                    pids.append(t.tid)
                    times.append(ts)
                    names.append(t.name)
        self.add(np.array(pids, np.int64), np.array(times, np.int64), pl.Series(names, dtype=pl.Utf8))

    def add_task_events(self, group) -> None:
        """Names given by a group's events (task_newtask, task_rename, sched_*)."""
        for pid_field, name_field in NAMING_EVENTS.get(group.name, []):
            if pid_field in group.cols.ints and name_field in group.cols.strings:
                name = group.cols.strings[name_field]
                if name_field == "filename":  # exec: the comm becomes the file's base name
                    name = name.str.replace(r"^.*/", "").str.slice(0, TASK_COMM_LEN - 1)
                self.add(group.cols.ints[pid_field], group.ts, name)

    def lookup(self, pid: np.ndarray, ts: np.ndarray) -> pl.Series:
        """The name of each (pid, ts)."""
        q = pl.DataFrame({"pid": np.asarray(pid, np.int64), "ts": np.asarray(ts, np.int64)}).with_row_index("row")
        if not self.parts:
            return _defaults(q["pid"], pl.Series([None] * len(q), dtype=pl.Utf8))
        names = pl.concat(self.parts).filter(pl.col("name") != "").unique(["pid", "ts"], keep="last",
                                                                         maintain_order=True).sort("pid", "ts")
        s = q.sort("pid", "ts")
        back = s.join_asof(names, on="ts", by="pid", strategy="backward", check_sortedness=False)
        fwd = s.join_asof(names, on="ts", by="pid", strategy="forward", check_sortedness=False)
        got = back.with_columns(name=pl.coalesce(pl.col("name"), fwd["name"])).sort("row")
        return _defaults(got["pid"], got["name"])


def _defaults(pid: pl.Series, name: pl.Series) -> pl.Series:
    return pl.select(pl.when(pid == 0).then(pl.lit("<idle>")).when(name.is_not_null()).then(name)
                     .otherwise(pl.lit("<...>")).alias("comm")).to_series()
