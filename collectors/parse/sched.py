"""The scheduler's events (sched_switch, sched_waking/sched_wakeup, Android's sched_blocked_reason) and the task
events (task_newtask, task_rename) -> sched_switch, sched_wakeup, sched_blocked_reason and task rows.

The kernel's TP_printk formats (include/trace/events/sched.h, task.h; sched_blocked_reason from the Android common
kernels), the same since 4.x where it matters here:

  sched_switch          prev_comm=%s prev_pid=%d prev_prio=%d prev_state=%s%s ==> next_comm=%s next_pid=%d
                        next_prio=%d            (prev_state: R, or flags S|D|T|t|X|Z|P|I with `+` when preempted;
                                                 4.x kernels also print K, W, x, N; D is uninterruptible sleep)
  sched_waking/wakeup   comm=%s pid=%d prio=%d [success=1 ]target_cpu=%03d
  sched_blocked_reason  pid=%d iowait=%d caller=%pS     (the function the task blocked in: io_schedule's caller)
  task_newtask          pid=%d comm=%s clone_flags=%lx oom_score_adj=%hd   (in the parent's context)
  task_rename           pid=%d oldcomm=%s newcomm=%s oom_score_adj=%hd

comm may hold spaces (`Jit thread pool`): each field ends where the next ` name=` begins. Lines that match no
pattern are counted per event, never dropped silently.

task rows: a task_newtask makes its child known, a thread of the parent's process when clone_flags has
CLONE_THREAD (pid: the parent's tgid where the line says it, else unknown, with the parent's tid in parent_tid for
analyzers/task_identity.py to follow), else a process of its own (pid = its tid); its comm names it (a task_rename
renames it: the last name wins for the thread).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from mobiperf.collectors.parse.body_fields import extract_fields
from mobiperf.core.schema import SCHED_BLOCKED_REASON, SCHED_SWITCH, SCHED_WAKEUP, TASK

CLONE_THREAD = 0x10000
SWITCH_FIELDS = {"prev_comm": r"^prev_comm=(.*?) prev_pid=", "prev_pid": r" prev_pid=(-?\d+) prev_prio=",
                 "prev_state": r" prev_state=(\S+) ==> ", "next_comm": r" ==> next_comm=(.*?) next_pid=",
                 "next_pid": r" next_pid=(-?\d+) next_prio=-?\d+$"}
WAKE_FIELDS = {"comm_": r"^comm=(.*?) pid=-?\d+ prio=", "tid": r" pid=(-?\d+) prio=-?\d+ (?:success=\d+ )?target_cpu="}
BLOCKED_BODY = r"^pid=(?P<tid>-?\d+) iowait=(?P<iowait>\d+) caller=(?P<caller>\S+)"
NEWTASK_BODY = r"^pid=(?P<tid>-?\d+) comm=(?P<comm_>.*) clone_flags=(?P<flags>[0-9a-fA-F]+) oom_score_adj=-?\d+"
RENAME_BODY = r"^pid=(?P<tid>-?\d+) oldcomm=(?P<old>.*) newcomm=(?P<new>.*) oom_score_adj=-?\d+"
SCAN_MIN_ROWS = 20_000  # below this, the patterns (numba's start-up costs more than they take)
SCHED_EVENTS = ("sched_switch", "sched_waking", "sched_wakeup", "sched_blocked_reason", "task_newtask", "task_rename")


def parse_sched_events(head: pl.DataFrame, rep: int, unparsed: dict[str, int]) -> dict[str, pl.DataFrame]:
    """The sched and task tables of head's rows (ts, cpu, pid, comm, event, body, and tgid where the text had it)."""
    out: dict[str, pl.DataFrame] = {}
    events = set(head["event"].unique().to_list()) & set(SCHED_EVENTS)
    if not events:
        return out
    rows = head.filter(pl.col("event").is_in(list(events)))
    if "sched_switch" in events:
        got = _fields(rows, "sched_switch", SWITCH_FIELDS, unparsed)
        out["sched_switch"] = SCHED_SWITCH.validate(got.select(
            pl.lit(rep, pl.Int32).alias("rep"), "ts", "cpu", pl.col("prev_pid").cast(pl.Int32).alias("prev_tid"),
            "prev_comm", "prev_state", pl.col("next_pid").cast(pl.Int32).alias("next_tid"), "next_comm"))
    wakes = [(_fields(rows, ev, WAKE_FIELDS, unparsed), ev.removeprefix("sched_")) for ev in
             ("sched_waking", "sched_wakeup") if ev in events]
    if wakes:
        out["sched_wakeup"] = SCHED_WAKEUP.validate(pl.concat([got.select(
            pl.lit(rep, pl.Int32).alias("rep"), "ts", "cpu", pl.col("tid").cast(pl.Int32),
            pl.col("comm_").alias("comm"), pl.col("pid").alias("waker_tid"), pl.col("comm").alias("waker_comm"),
            pl.lit(kind).alias("event"))
            for got, kind in wakes]).sort("ts", maintain_order=True))
    if "sched_blocked_reason" in events:
        got = extract_fields(rows, "sched_blocked_reason", BLOCKED_BODY, unparsed)
        out["sched_blocked_reason"] = SCHED_BLOCKED_REASON.validate(got.select(
            pl.lit(rep, pl.Int32).alias("rep"), "ts", pl.col("tid").cast(pl.Int32),
            (pl.col("iowait").cast(pl.Int32) != 0).alias("is_io_wait"), "caller"))
    task = _task_rows(rows, events, rep, unparsed)
    if task is not None:
        out["task"] = task
    return out


def _task_rows(rows: pl.DataFrame, events: set[str], rep: int, unparsed: dict[str, int]) -> pl.DataFrame | None:
    frames = []
    tgid = pl.col("tgid") if "tgid" in rows.columns else pl.lit(None, pl.Int32)
    if "task_newtask" in events:
        got = extract_fields(rows, "task_newtask", NEWTASK_BODY, unparsed).with_columns(
            _thread=(pl.col("flags").str.to_integer(base=16, strict=False) & CLONE_THREAD) != 0, _tgid=tgid)
        frames.append(got.select(
            pl.col("tid").cast(pl.Int32), pl.when(pl.col("_thread")).then(pl.col("_tgid"))
            .otherwise(pl.col("tid")).cast(pl.Int32).alias("pid"), pl.col("comm_").alias("thread"), "ts",
            pl.when(pl.col("_thread") & pl.col("_tgid").is_null()).then(pl.col("pid")).cast(pl.Int32)
            .alias("parent_tid")))
    if "task_rename" in events:
        got = extract_fields(rows, "task_rename", RENAME_BODY, unparsed)
        frames.append(got.select(pl.col("tid").cast(pl.Int32), pl.lit(None, pl.Int32).alias("pid"),
                                 pl.col("new").alias("thread"), "ts", pl.lit(None, pl.Int32).alias("parent_tid")))
    if not frames:
        return None
    seen = pl.concat(frames).sort("ts").group_by("tid", maintain_order=True).agg(
        pl.col("pid").drop_nulls().first(), pl.col("thread").last(), pl.col("parent_tid").drop_nulls().first())
    return TASK.validate(seen.select(pl.lit(rep, pl.Int32).alias("rep"), "tid", "pid", "thread",
                                     pl.lit(None, pl.Utf8).alias("process"), pl.lit("task_newtask").alias("source"),
                                     "parent_tid"))


def _fields(rows: pl.DataFrame, event: str, fields: dict[str, str], unparsed: dict[str, int]) -> pl.DataFrame:
    """The event's rows with one column per field: by the compiled scanner (sched_scan.py) where they are many,
    else each by a short anchored pattern of its own; a row missing any field is counted as unparsed."""
    of = rows.filter(pl.col("event") == event)
    if len(of) >= SCAN_MIN_ROWS:
        got = _scanned(of, event)
    else:
        got = of.with_columns([pl.col("body").str.extract(pattern, 1).alias(name)
                               for name, pattern in fields.items()])
    ok = got.filter(pl.all_horizontal(pl.col(name).is_not_null() for name in fields)).drop("body")
    if len(ok) < len(got):
        unparsed[event] = unparsed.get(event, 0) + len(got) - len(ok)
    return ok


def _scanned(of: pl.DataFrame, event: str) -> pl.DataFrame:
    """_fields' columns by the compiled scanner (the same fields its patterns find)."""
    from mobiperf.collectors.parse.sched_scan import body_buffers, scan_switch, scan_wake, span_strings

    buf, offsets = body_buffers(of["body"])
    if event == "sched_switch":
        pids, spans = scan_switch(buf, offsets, len(of))
        ok = pids[:, 0] >= 0
        cols = {"prev_comm": span_strings(buf, np.where(ok, spans[:, 0], -1), spans[:, 1], "prev_comm"),
                "prev_pid": pl.Series("prev_pid", pids[:, 0]).set(pl.Series(~ok), None),
                "prev_state": span_strings(buf, np.where(ok, spans[:, 2], -1), spans[:, 3], "prev_state"),
                "next_comm": span_strings(buf, np.where(ok, spans[:, 4], -1), spans[:, 5], "next_comm"),
                "next_pid": pl.Series("next_pid", pids[:, 1]).set(pl.Series(~ok), None)}
    else:
        tids, spans = scan_wake(buf, offsets, len(of))
        ok = tids >= 0
        cols = {"comm_": span_strings(buf, np.where(ok, spans[:, 0], -1), spans[:, 1], "comm_"),
                "tid": pl.Series("tid", tids).set(pl.Series(~ok), None)}
    return of.with_columns(**cols)
