"""The FUSE layer of any daemon, from its threads' reads and writes of /dev/fuse (fuse_req rows, source
dev_fuse_calls): for a kernel without FUSE events and a daemon that keeps no request log of mobiperf's (Android's
MediaProvider; the virtual phone's /sdcard daemon).

What the kernel records, and what each link rests on:
  a request arrives  a daemon thread's read (or readv, or splice from) of its /dev/fuse descriptor returns it:
                     the request begins at the call's return (read_ts), its length is the return value.
  it is answered     the next write (or writev) of the same thread on /dev/fuse, before it reads again: a
                     daemon thread serves one request at a time (a read followed by another read had no reply:
                     FORGET and INTERRUPT never have one; a thread that died serving one leaves one too).
  who asked          the reply wakes the requesting thread, which sleeps in its system call until it comes: the
                     sched_waking the reply's write causes (it runs in the daemon thread's context and names the
                     woken thread) of a thread then inside a traced call names the requester (an interrupt during
                     the write may wake other threads: they are in no call). A reply that woke nobody (one CPU:
                     the daemon answered before the requester slept) is the request of the thread that woke the
                     daemon thread out of the read that got it (_woken_by_sender). No wake-up at all, no
                     requester: the request is kept, unnested.
  when it was sent   sending wakes a daemon thread idle on /dev/fuse: the requester's last sched_waking of a daemon
                     thread inside its call, before the read, is the send (with_send_times); where the daemon was
                     busy the request waited in the queue unseen, and send_ts is its read_ts.
The descriptors are known from the run (tasks.json: every /dev/fuse descriptor each daemon held), the threads too.
Nothing is matched by clock proximity alone: each time above comes from a call or wake-up of a named thread.

What the calls cannot tell: the request's unique id and opcode. A WRITE is recognised by its lengths (a request
of 80 bytes plus its data answered by 24 bytes, fuse_write_out), and its data_bytes are exact; other requests
are named FUSE_? with their lengths. A reply spliced from a pipe (a daemon using splice for READ replies) is not a
write of /dev/fuse and is not seen: such a request reads as unanswered.
"""

from __future__ import annotations

import polars as pl

from mobiperf.collectors.parse.fuse_protocol import IN_HEADER_BYTES, OUT_HEADER_BYTES, WRITE_IN_BYTES
from mobiperf.core.schema import FUSE_REQ

RECEIVES = ("read", "readv", "splice")
REPLIES = ("write", "writev")
WRITE_REPLY_BYTES = OUT_HEADER_BYTES + 8   # fuse_out_header + fuse_write_out


def wakings(sched_wakeup: pl.DataFrame | None, rep: int) -> pl.DataFrame | None:
    """One repetition's sched_waking rows seen from the waker (pid, comm: the thread whose context the event ran
    in; woken_pid, woken_comm), the link this module follows; sched_wakeup rows may run on the woken thread's CPU,
    so they are left out."""
    if sched_wakeup is None:
        return None
    return sched_wakeup.filter((pl.col("rep") == rep) & (pl.col("event") == "waking")).select(
        "rep", "ts", "cpu", pl.col("waker_tid").alias("pid"), pl.col("waker_comm").alias("comm"),
        pl.col("tid").alias("woken_pid"), pl.col("comm").alias("woken_comm"))


def dev_fuse_requests(rep: int, tables: dict[str, pl.DataFrame]) -> tuple[pl.DataFrame | None, str]:
    """(fuse_req rows or None, one line saying what was found) for one repetition."""
    calls = _dev_fuse_calls(rep, tables.get("syscall_io"), tables.get("task_role"))
    if calls is None:
        return None, "no /dev/fuse descriptors of a FUSE daemon are known for this run"
    if not calls.height:
        return None, "no reads or writes of the daemons' /dev/fuse descriptors were traced"
    req = _requests(calls)
    wakes = wakings(tables.get("sched_wakeup"), rep)
    req = _with_requesters(req, wakes, _calls_of(rep, tables.get("syscall_io")))
    out = FUSE_REQ.validate(req.select(
        pl.lit(rep, pl.Int32).alias("rep"), pl.lit(None, pl.Int64).alias("connection"),
        pl.lit(None, pl.Int64).alias("unique"), pl.lit(None, pl.Int32).alias("opcode"), _name().alias("opcode_name"),
        "send_ts", pl.col("reply_ts").alias("end_ts"), (pl.col("reply_ts") - pl.col("send_ts")).alias("dur"),
        pl.col("req_len").alias("len_bytes"), pl.col("reply_len").alias("reply_len_bytes"),
        pl.when(pl.col("reply_len") == OUT_HEADER_BYTES).then(pl.lit(None, pl.Int32)).otherwise(0)
        .alias("error"), "pid", "comm", pl.col("reply_tid").alias("daemon_tid"),
        pl.when(_is_write()).then(pl.col("req_len") - IN_HEADER_BYTES - WRITE_IN_BYTES).otherwise(0)
        .alias("data_bytes"), source=pl.lit("dev_fuse_calls")).sort("send_ts"))
    n, answered = out.height, int(out["end_ts"].is_not_null().sum())
    tied = int(out["pid"].is_not_null().sum())
    note = (f"FUSE layer from the daemon's /dev/fuse reads and writes ({', '.join(_daemons(tables, rep))}): "
            f"{n:,} requests, {answered:,} answered, {tied:,} tied to their requesting thread by wake-ups")
    if wakes is None:
        note += " (no sched_waking events in the trace: none could be tied)"
    return out, note


def _dev_fuse_calls(rep: int, syscall_io: pl.DataFrame | None, task_role: pl.DataFrame | None) -> pl.DataFrame | None:
    """The daemons' calls on their /dev/fuse descriptors, in each thread's order (None: no descriptor known)."""
    if task_role is None or syscall_io is None:
        return None
    fds = task_role.filter((pl.col("rep") == rep) & (pl.col("role") == "fuse_daemon") & (pl.col("fuse_fd") >= 0)
                           & (pl.col("fd_kind") == "fuse"))
    if not fds.height:
        return None
    return syscall_io.filter((pl.col("rep") == rep) & pl.col("syscall").is_in([*RECEIVES, *REPLIES])).join(
        fds.select("pid", pl.col("fuse_fd").alias("fd")).unique(), on=["pid", "fd"]).sort("pid", "ts")


def _requests(calls: pl.DataFrame) -> pl.DataFrame:
    """One row per request a thread received (read_ts, req_len), with its reply (reply_ts, reply_len, reply_tid)
    when the thread's next call on /dev/fuse is a write."""
    receive = pl.col("syscall").is_in(RECEIVES)
    calls = calls.filter(~receive | ((pl.col("ret") > 0) & pl.col("dur").is_not_null())).with_columns(
        **{f"_next_{c}": pl.col(c).shift(-1).over("pid") for c in ("syscall", "ts", "dur", "ret")})
    answered = pl.col("_next_syscall").is_in(REPLIES).fill_null(False)
    return calls.filter(receive).select(
        pl.col("pid").alias("tid"), pl.col("ts").alias("read_call_ts"),
        (pl.col("ts") + pl.col("dur")).alias("read_ts"), pl.col("ret").alias("req_len"),
        pl.when(answered).then(pl.col("_next_ts")).alias("reply_ts"),
        pl.when(answered).then(pl.col("_next_dur")).alias("reply_dur"),
        pl.when(answered).then(pl.col("_next_ret")).alias("reply_len"),
        pl.when(answered).then(pl.col("pid")).alias("reply_tid"))


def _with_requesters(req: pl.DataFrame, wakes: pl.DataFrame | None,
                     calls: pl.DataFrame | None) -> pl.DataFrame:
    """pid/comm: the thread the reply's write woke that was waiting in a system call (the first such; a thread an
    interrupt happened to wake during the write is in none); send_ts: see with_send_times."""
    if wakes is None or not wakes.height:
        return req.with_columns(pid=pl.lit(None, pl.Int32), comm=pl.lit(None, pl.Utf8), send_ts=pl.col("read_ts"))
    woke = wakes.select(pl.col("pid").alias("_waker"), pl.col("ts").alias("_w"), pl.col("woken_pid").alias("pid"),
                        pl.col("woken_comm").alias("comm"))
    answered = req.filter(pl.col("reply_ts").is_not_null()).select(
        "tid", "read_ts", "reply_tid", "reply_ts", (pl.col("reply_ts") + pl.col("reply_dur")).alias("_reply_end"))
    found = answered.join_where(woke, pl.col("_waker") == pl.col("reply_tid"), pl.col("_w") >= pl.col("reply_ts"),
                                pl.col("_w") <= pl.col("_reply_end"))
    found = found.filter(~pl.col("pid").is_in(req["tid"].unique().to_list()))
    if calls is not None and calls.height:   # the requester sleeps in its call until the reply wakes it
        spans = calls.filter(pl.col("dur").is_not_null()).select(
            "pid", pl.col("ts").alias("_c0"), (pl.col("ts") + pl.col("dur")).alias("_c1")).sort("_c0")
        found = found.sort("_w").join_asof(spans, left_on="_w", right_on="_c0", by="pid", strategy="backward",
                                           check_sortedness=False).filter(pl.col("_w") <= pl.col("_c1"))
    first = found.sort("_w").unique(["tid", "read_ts"], keep="first").select("tid", "read_ts", "pid", "comm")
    req = _woken_by_sender(req.join(first, on=["tid", "read_ts"], how="left"), wakes, calls)
    return with_send_times(req, wakes, calls, req["tid"].unique().to_list())


def _woken_by_sender(req: pl.DataFrame, wakes: pl.DataFrame, calls: pl.DataFrame | None) -> pl.DataFrame:
    """A request whose reply woke nobody (the requester had not gone to sleep yet: one CPU, the daemon ran first
    and answered before the requester waited) takes as requester the thread that woke the daemon thread while it
    slept in the read that got the request, if that thread was then inside a call that outlasts the reply (it
    waited for it). Exact with one daemon thread; with several, a thread woken by one send may read the next."""
    daemons = req["tid"].unique().to_list()
    sent = wakes.filter(~pl.col("pid").is_in(daemons)).select(
        pl.col("woken_pid").alias("tid"), pl.col("ts").alias("_s"), pl.col("pid").alias("_waker"),
        pl.col("comm").alias("_waker_comm")).sort("_s")
    m = req.sort("read_ts").join_asof(sent, left_on="read_ts", right_on="_s", by="tid", strategy="backward",
                                      check_sortedness=False)
    ok = pl.col("_s").is_not_null() & (pl.col("_s") >= pl.col("read_call_ts"))
    if calls is not None and calls.height:
        spans = calls.filter(pl.col("dur").is_not_null()).select(
            pl.col("pid").alias("_waker"), pl.col("ts").alias("_c0"), (pl.col("ts") + pl.col("dur")).alias("_c1"))
        m = m.join_asof(spans.sort("_c0"), left_on="_s", right_on="_c0", by="_waker", strategy="backward",
                        check_sortedness=False)
        ok = ok & (pl.col("_c1") >= pl.col("reply_ts").fill_null(pl.col("_c1")))
    else:
        ok = pl.lit(False)
    use = pl.col("pid").is_null() & ok
    return m.with_columns(pid=pl.when(use).then(pl.col("_waker")).otherwise(pl.col("pid")),
                          comm=pl.when(use).then(pl.col("_waker_comm")).otherwise(pl.col("comm"))).select(req.columns)


def with_send_times(req: pl.DataFrame, wakes: pl.DataFrame | None, calls: pl.DataFrame | None,
                    daemon_tids: list[int]) -> pl.DataFrame:
    """send_ts of requests read at read_ts for requester `pid` (reply_ts: when each was answered): a synchronous
    request is sent inside its requester's system call, and sending wakes a daemon thread idle on /dev/fuse (not
    always the one that then reads it: a thread already running may take it first). So the send is the
    requester's last waking of a daemon thread before the read, inside the call that holds the read and after the
    requester's previous request was answered; the waking runs in the requester's context and names the daemon
    thread. Where there is none (the daemon was busy: the request waited in the queue, its send unseen; or the
    request is the kernel's own, outside any call), send_ts is read_ts."""
    if wakes is None or not wakes.height or calls is None or not calls.height:
        return req.with_columns(send_ts=pl.col("read_ts"))
    spans = calls.filter(pl.col("dur").is_not_null()).select(
        "pid", pl.col("ts").alias("_c0"), (pl.col("ts") + pl.col("dur")).alias("_c1")).sort("_c0")
    m = req.sort("read_ts").join_asof(spans, left_on="read_ts", right_on="_c0", by="pid", strategy="backward",
                                      check_sortedness=False)
    m = m.with_columns(_prev=pl.col("reply_ts").shift(1).over("pid", order_by="read_ts"))
    sent = wakes.filter(pl.col("woken_pid").is_in(daemon_tids)).select("pid", pl.col("ts").alias("_s")).sort("_s")
    m = m.join_asof(sent, left_on="read_ts", right_on="_s", by="pid", strategy="backward", check_sortedness=False)
    woken = (pl.col("_s").is_not_null() & (pl.col("read_ts") <= pl.col("_c1")) & (pl.col("_s") >= pl.col("_c0"))
             & (pl.col("_s") >= pl.col("_prev").fill_null(-(1 << 62))))
    return m.with_columns(send_ts=pl.when(woken).then(pl.col("_s")).otherwise(pl.col("read_ts"))).drop(
        "_s", "_c0", "_c1", "_prev")


def _calls_of(rep: int, syscall_io: pl.DataFrame | None) -> pl.DataFrame | None:
    return None if syscall_io is None else syscall_io.filter(pl.col("rep") == rep)


def _is_write() -> pl.Expr:
    return (pl.col("reply_len") == WRITE_REPLY_BYTES) & (pl.col("req_len") >= IN_HEADER_BYTES + WRITE_IN_BYTES)


def _name() -> pl.Expr:
    return pl.when(_is_write()).then(pl.lit("FUSE_WRITE")).otherwise(pl.lit("FUSE_?"))


def _daemons(tables: dict, rep: int) -> list[str]:
    roles = tables.get("task_role")
    names = roles.filter((pl.col("rep") == rep) & (pl.col("role") == "fuse_daemon"))["layer"].unique().to_list()
    return sorted(str(n) for n in names if n) or ["the FUSE daemon"]
