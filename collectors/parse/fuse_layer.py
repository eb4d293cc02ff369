"""The FUSE layer of a run (fuse_req) from the best source each repetition has, and one line saying which.

Sources, best first (fuse_req.source says which made each row):

  fuse_events             fuse_request_send and fuse_request_end paired by (connection, unique id)
                          (fuse_requests.py): the kernel's own times, the requesting thread (the send runs in it)
                          and the daemon thread that replied (the end runs in its write to /dev/fuse).
  fuse_events+daemon_log  sends without their id (Debian 6.12 fires the send before the id is set: `req 0`)
                          paired with the ends through the bundled daemon's request log, whose line for the
                          end's id names the request's opcode and requesting thread (fuse_order.py).
  fuse_events_by_order    the same without a log: by connection, order, time and reply length (fuse_order.py).
  daemon_log              no FUSE events (Linux 6.1, Android's GKI): the bundled daemon's log itself
                          (fuse_daemon_log.py). A request spans from its send to its reply: the send is the
                          requester's wake-up of an idle daemon thread inside its call (sched_waking), else,
                          where the daemon was busy, its read (the time it waited in the queue is then not in it);
                          the requesting thread is the request header's pid.
  dev_fuse_calls          any other FUSE daemon: its threads' reads and writes of /dev/fuse (fuse_dev_calls.py).

A repetition whose FUSE events cannot be paired (sends without ids, no log, nothing that fits) falls to the next
source, and the line says why. No source at all for a stack that has a FUSE layer is said too: an empty FUSE layer
is never silent.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from mobiperf.collectors.parse.fuse_protocol import FUSE_READ, FUSE_WRITE, OUT_HEADER_BYTES, IN_HEADER_BYTES, \
    WRITE_IN_BYTES
from mobiperf.collectors.parse.fuse_requests import pair_fuse_requests
from mobiperf.core.schema import FUSE_REQ

# The share of a connection's sends with id 0 above which its sends are taken to carry none.
NO_ID_SHARE = 0.5


def make_fuse_layer(tables: dict[str, pl.DataFrame], parsed: dict | None = None) -> tuple[pl.DataFrame | None, dict]:
    """(fuse_req or None, summary): per repetition the best source it has (module docstring); the summary has
    the totals, the sources used, and `note`, one line for run.json, `mobiperf analyze` and the report. parsed:
    each repetition's parse summary, for the FUSE events a trace holds in a shape mobiperf cannot read."""
    events, log = tables.get("fuse_event"), tables.get("fuse_daemon_req")
    unread = _unreadable_fuse_events(parsed or {})
    reps = sorted({*_reps(events), *_reps(log), *_reps(_fuse_daemons(tables.get("task_role"))), *unread})
    parts, notes, sources = [], [], {}
    for rep in reps:
        req, source, note = _layer_of_rep(rep, _of(events, rep), _of(log, rep), tables, bool(unread.get(rep)),
                                          _trace_window((parsed or {}).get(rep)))
        if unread.get(rep):
            note = (f"{unread[rep]} FUSE events of a shape mobiperf cannot read (their kernel prints other fields; "
                    f"see the parse warnings); {note}")
        if req is not None and req.height:
            parts.append(req)
        sources[rep] = source
        notes.append(note)
    if not reps:
        return None, {}
    fuse_req = FUSE_REQ.validate(pl.concat(parts)) if parts else None
    n = fuse_req.height if fuse_req is not None else 0
    answered = int(fuse_req["end_ts"].is_not_null().sum()) if fuse_req is not None else 0
    distinct = list(dict.fromkeys(notes))
    note = distinct[0] if len(distinct) == 1 else "; ".join(f"rep {r}: {t}" for r, t in zip(reps, notes))
    return fuse_req, {"requests": n, "unfinished": n - answered, "source": _one(sources), "sources": sources,
                      "note": note}


def _layer_of_rep(rep: int, events: pl.DataFrame | None, log: pl.DataFrame | None, tables: dict,
                  unread: bool = False, window: tuple[int, int] | None = None
                  ) -> tuple[pl.DataFrame | None, str | None, str]:
    why = ""
    if events is not None and events.height:
        sends = events.filter(pl.col("phase") == "send")
        if not len(sends):
            why = f"{events.height} FUSE ends without a send to pair them with; "
        elif (sends["unique"] == 0).mean() <= NO_ID_SHARE:
            req, _ = pair_fuse_requests(events)
            req = req.with_columns(source=pl.lit("fuse_events"))
            return req, "fuse_events", (f"FUSE layer from fuse_request_send/end paired by request id: "
                                        f"{_answered(req)}")
        else:
            req, note = _pair_sends_without_ids(events, log)
            if req is not None and req["end_ts"].is_not_null().any():
                return req, req["source"][0], note
            why = note + "; "
    if log is not None and log.height:
        from mobiperf.collectors.parse.fuse_dev_calls import wakings

        log, outside = _within(log, window)
        req = daemon_log_requests(log, _comms(tables.get("syscall_io"), rep), wakings(tables.get("sched_wakeup"), rep),
                                  _of(tables.get("syscall_io"), rep))
        left = f" ({outside} more logged outside the traced window: its mount, the set-up)" if outside else ""
        return req, "daemon_log", (f"{why}FUSE layer from {_daemon_name(log)}'s request log (the trace has no "
                                   f"usable FUSE events): {_answered(req)}{left}")
    from mobiperf.collectors.parse.fuse_dev_calls import dev_fuse_requests

    req, note = dev_fuse_requests(rep, tables)
    if req is not None and req.height:
        return req, "dev_fuse_calls", why + note
    daemons = _fuse_daemons(tables.get("task_role"))
    if why or unread or (daemons is not None and daemons.filter(pl.col("rep") == rep).height):
        return None, None, (f"{why}no FUSE layer: no FUSE events to pair, no request log of the daemon's, and "
                            f"{note or 'no /dev/fuse calls of its threads were traced'}")
    return None, None, "no FUSE layer in this stack"


def _trace_window(summary: dict | None) -> tuple[int, int] | None:
    """The repetition's traced span: from the first to the last event of its ftrace sources (None if unknown)."""
    spans = [s["span_ns"] for s in (summary or {}).values() if isinstance(s, dict) and s.get("span_ns")]
    return (min(a for a, _ in spans), max(b for _, b in spans)) if spans else None


def _within(log: pl.DataFrame, window: tuple[int, int] | None) -> tuple[pl.DataFrame, int]:
    """The log's requests read while the trace ran (the log covers the daemon's whole life: its FUSE_INIT, the
    set-up's requests), and how many fell outside."""
    if window is None:
        return log, 0
    inside = log.filter(pl.col("read_ts").is_between(*window) | pl.col("read_ts").is_null())
    return inside, log.height - inside.height


def _unreadable_fuse_events(parsed: dict) -> dict[int, int]:
    """rep -> FUSE event lines the parsers counted as unparsed (any trace source of that repetition)."""
    out: dict[int, int] = {}
    for rep, per_source in parsed.items():
        for summary in (per_source or {}).values():
            unparsed = summary.get("unparsed") if isinstance(summary, dict) else None
            if isinstance(unparsed, dict):
                n = sum(int(v) for k, v in unparsed.items() if str(k).startswith("fuse_request_"))
                if n:
                    out[int(rep)] = out.get(int(rep), 0) + n
    return out


def _pair_sends_without_ids(events: pl.DataFrame, log: pl.DataFrame | None) -> tuple[pl.DataFrame | None, str]:
    """Sends with id 0 paired with the ends of their connection by order (through the log where there is one)."""
    from mobiperf.collectors.parse.fuse_order import pair_by_order

    parts, cut, sends_total = [], False, 0
    via_log = log is not None and log.height > 0
    for (conn,), group in events.group_by(["connection"], maintain_order=True):
        sends = group.filter(pl.col("phase") == "send").sort("ts", maintain_order=True)
        ends = group.filter((pl.col("phase") == "end") & (pl.col("unique") != 0)).sort("unique")
        sends_total += sends.height
        end_op = end_pid = None
        if via_log:
            named = ends.select("unique").join(_log_of_connection(log, conn), on="unique", how="left")
            end_op = named["opcode"].fill_null(-1).to_numpy()
            end_pid = named["pid"].fill_null(-1).to_numpy()
        si, ej, band_cut = pair_by_order(
            sends["ts"].to_numpy(), sends["opcode"].fill_null(-1).to_numpy(), sends["pid"].fill_null(-1).to_numpy(),
            ends["ts"].to_numpy(), ends["error"].fill_null(0).to_numpy(), ends["len_bytes"].fill_null(0).to_numpy(),
            end_op, end_pid)
        cut |= band_cut
        parts.append(_paired_rows(sends, ends, si, ej))
    source = "fuse_events+daemon_log" if via_log else "fuse_events_by_order"
    req = pl.concat(parts).with_columns(source=pl.lit(source)) if parts else None
    paired = int(req["end_ts"].is_not_null().sum()) if req is not None else 0
    how = f"through {_daemon_name(log)}'s request log" if via_log else "by connection, order, time and reply length"
    note = (f"FUSE layer from fuse_request_send/end, whose sends carry no request id (req 0, as on Debian's 6.12), "
            f"paired {how}: {paired} of {sends_total}"
            + (" (cut short: the ends stray too far from the sends' order)" if cut else ""))
    if not paired:
        note = f"FUSE events: {sends_total} sends carry no request id and none could be paired {how}"
    return req, note


def _paired_rows(sends: pl.DataFrame, ends: pl.DataFrame, si: np.ndarray, ej: np.ndarray) -> pl.DataFrame:
    """One row per send (paired or not) in fuse_req's shape, the end's id and reply where it has one."""
    end_of = pl.DataFrame({"_s": si, "_e": ej}, schema={"_s": pl.Int64, "_e": pl.Int64})
    e = ends.with_row_index("_e", ).with_columns(pl.col("_e").cast(pl.Int64)).select(
        "_e", pl.col("unique").alias("_unique"), pl.col("ts").alias("end_ts"),
        pl.col("len_bytes").alias("reply_len_bytes"), pl.col("error").alias("end_error"),
        pl.col("pid").alias("daemon_tid"))
    s = sends.with_row_index("_s").with_columns(pl.col("_s").cast(pl.Int64)).join(end_of, on="_s", how="left") \
        .join(e, on="_e", how="left")
    return s.select(
        "rep", "connection", pl.coalesce("_unique", "unique").alias("unique"), "opcode", "opcode_name",
        pl.col("ts").alias("send_ts"), "end_ts", (pl.col("end_ts") - pl.col("ts")).alias("dur"), "len_bytes",
        "reply_len_bytes", pl.col("end_error").alias("error"), "pid", "comm", "daemon_tid",
        _data_bytes(pl.col("len_bytes") - IN_HEADER_BYTES - WRITE_IN_BYTES, pl.col("end_error")))


def daemon_log_requests(log: pl.DataFrame, comms: pl.DataFrame | None = None, wakes: pl.DataFrame | None = None,
                        calls: pl.DataFrame | None = None) -> pl.DataFrame:
    """fuse_req rows from a daemon's request log: a request spans from its send to its reply; its requester is
    the header's pid (none for the kernel's own requests, pid 0); the replying thread is the daemon's. The send is
    the requester's waking of an idle daemon thread inside its call (fuse_dev_calls.with_send_times; calls: the
    run's syscall_io), else the daemon's read."""
    from mobiperf.collectors.parse.fuse_dev_calls import with_send_times

    tids = [t for t in {*log["tid"].drop_nulls().to_list(), *log["reply_tid"].drop_nulls().to_list()}]
    log = with_send_times(log, wakes, calls, tids)
    req = log.select(
        "rep", "connection", "unique", "opcode", "opcode_name", "send_ts",
        pl.col("reply_ts").alias("end_ts"), (pl.col("reply_ts") - pl.col("send_ts")).alias("dur"), "len_bytes",
        "reply_len_bytes", "error", pl.when(pl.col("pid") > 0).then(pl.col("pid")).alias("pid"),
        pl.col("reply_tid").alias("daemon_tid"), _data_bytes(pl.col("size_bytes"), pl.col("error")),
        source=pl.lit("daemon_log"))
    if comms is not None and comms.height:
        req = req.join(comms, on=["rep", "pid"], how="left")
    else:
        req = req.with_columns(comm=pl.lit(None, pl.Utf8))
    return FUSE_REQ.validate(req.sort("rep", "send_ts", nulls_last=True))


def _data_bytes(write_bytes: pl.Expr, error: pl.Expr) -> pl.Expr:
    ok = error.fill_null(-1) == 0
    return (pl.when((pl.col("opcode") == FUSE_WRITE) & ok).then(write_bytes.clip(lower_bound=0))
            .when((pl.col("opcode") == FUSE_READ) & ok)
            .then((pl.col("reply_len_bytes") - OUT_HEADER_BYTES).clip(lower_bound=0))
            .otherwise(0).cast(pl.Int64).alias("data_bytes"))


def _log_of_connection(log: pl.DataFrame, connection: int) -> pl.DataFrame:
    """The log lines that may name this connection's requests: its own, or every line when the log's connection
    is unknown and one daemon wrote it."""
    own = log.filter(pl.col("connection") == connection)
    if not own.height and log["connection"].is_null().all() and log["layer"].n_unique() == 1:
        own = log
    return own.select("unique", "opcode", "pid").unique("unique", keep="first")


def _comms(syscall_io: pl.DataFrame | None, rep: int) -> pl.DataFrame | None:
    """(rep, pid, comm) of the threads the syscall source saw (the requesters' names)."""
    if syscall_io is None or not syscall_io.height:
        return None
    return syscall_io.filter(pl.col("rep") == rep).group_by("rep", "pid").agg(pl.col("comm").last())


def _answered(req: pl.DataFrame) -> str:
    n, done = req.height, int(req["end_ts"].is_not_null().sum())
    return f"{n:,} requests" + ("" if done == n else f", {n - done:,} never answered")


def _daemon_name(log: pl.DataFrame | None) -> str:
    return "the daemon" if log is None or not log.height else str(log["layer"][0])


def _fuse_daemons(task_role: pl.DataFrame | None) -> pl.DataFrame | None:
    return None if task_role is None else task_role.filter(pl.col("role") == "fuse_daemon")


def _reps(df: pl.DataFrame | None) -> list[int]:
    return [] if df is None or not df.height else df["rep"].unique().to_list()


def _of(df: pl.DataFrame | None, rep: int) -> pl.DataFrame | None:
    return None if df is None else df.filter(pl.col("rep") == rep)


def _one(sources: dict) -> str | None:
    found = [s for s in dict.fromkeys(sources.values()) if s]
    return found[0] if len(found) == 1 else (" ".join(found) or None)
