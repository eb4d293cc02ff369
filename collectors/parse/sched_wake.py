"""sched_waking events -> sched_wake rows: which thread woke which.

  sched_waking   comm=%s pid=%d prio=%d target_cpu=%03d

The event fires in the waker's context (try_to_wake_up, before the wake-up is queued on any CPU, unlike
sched_wakeup, which may run on the woken task's CPU), so the line's own pid and comm are the waker's and the
body names the woken thread. That is the link the kernel records between a FUSE request's requester and the daemon
thread that serves it, where no FUSE event exists (collectors/parse/fuse_dev_calls.py): sending a request wakes a
daemon thread asleep on /dev/fuse, and its reply wakes the requester. A comm may hold spaces and `=`: the pid is
taken from the last ` pid=`.
"""

from __future__ import annotations

import polars as pl

from mobiperf.core.schema import SCHED_WAKE

SCHED_WAKE_EVENTS = ("sched_waking",)
BODY = r"^comm=(?P<woken_comm>.*) pid=(?P<woken_pid>-?\d+) prio=-?\d+ target_cpu=\d+"


def parse_sched_wakes(head: pl.DataFrame, rep: int, unparsed: dict[str, int]) -> pl.DataFrame | None:
    """sched_wake rows of the sched_waking lines of head (ts, cpu, pid, comm, event, body), None if none; lines
    whose body does not match are counted in unparsed."""
    rows = head.filter(pl.col("event").is_in(SCHED_WAKE_EVENTS))
    if not len(rows):
        return None
    groups = rows["body"].str.extract_groups(BODY).struct.unnest()
    got = pl.concat([rows.drop("body"), groups], how="horizontal")
    ok = got.filter(pl.col("woken_pid").is_not_null())
    if len(ok) < len(got):
        unparsed["sched_waking"] = unparsed.get("sched_waking", 0) + len(got) - len(ok)
    return SCHED_WAKE.validate(ok.select(
        pl.lit(rep, pl.Int32).alias("rep"), "ts", "cpu", "pid", "comm",
        pl.col("woken_pid").cast(pl.Int32, strict=False), "woken_comm").sort("ts", maintain_order=True))
