"""The spans of a run and their parent links, for the Perfetto exporter (perfetto_track.py): one function,
run_spans(), whatever the run holds.

A span is one interval of the nest of DESIGN.md (app call ⊃ FUSE request ⊃ lower file system call ⊃ journal
commit / block request), with the thread it ran on (or the block device it was a request of) and its parent:

  rep, span_id, parent_id (null at the top), layer (syscall | fuse | fs | journal | block), name, ts, end_ts,
  tid, comm, dev_major, dev_minor, size_bytes, and the arguments shown in the UI: path, offset_bytes, sync_mode,
  file_type, op, sector, plus q2g_ns, g2i_ns, i2d_ns, d2c_ns, queue_ts, issue_ts of block requests (their phases)

Sources, in order of preference:
  results/io_span      the layer-by-layer model (analyzers/io_span.py): its primary spans (an interval two calls
                       waited for once, under the first) and links as they are (device spans, issue -> complete,
                       are the D2C phase of their block request here)
  the event tables     where a run has no io_span: calls of syscall_class, FUSE requests of fuse_req on the
                       daemon thread that replied (fuse_event's end), ext4/f2fs sync_file of fsync_event, jbd2
                       commits (start -> end of one transaction, on the thread that ran it), block requests of
                       block_io; linked by what the kernel records: a FUSE request to the call its requesting
                       thread was in when it sent it; an fs call or block request to the innermost span open on its
                       own thread at its start (the commit's for the jbd2 thread's requests); a commit to the
                       earliest sync of its device that was running when it ended (the one it was charged to).
                       A block request on no thread's span (writeback, readahead) has no parent.
"""

from __future__ import annotations

import polars as pl

from mobiperf.core.runstore import RunDir

LAYERS = ("syscall", "fuse", "file", "fs", "journal", "block")
DEPTH = {name: i for i, name in enumerate(LAYERS)}
SPAN_SCHEMA = {
    "rep": pl.Int32, "span_id": pl.Int64, "parent_id": pl.Int64, "layer": pl.Utf8, "name": pl.Utf8, "ts": pl.Int64,
    "end_ts": pl.Int64, "tid": pl.Int32, "comm": pl.Utf8, "dev_major": pl.Int32, "dev_minor": pl.Int32,
    "size_bytes": pl.Int64, "path": pl.Utf8, "offset_bytes": pl.Int64, "sync_mode": pl.Utf8, "file_type": pl.Utf8,
    "op": pl.Utf8, "sector": pl.Int64, "queue_ts": pl.Int64, "issue_ts": pl.Int64, "q2g_ns": pl.Int64,
    "g2i_ns": pl.Int64, "i2d_ns": pl.Int64, "d2c_ns": pl.Int64,
    "_from": pl.Int32,  # a FUSE request's requesting thread, while linking
}
PHASES = (("Q2G", "q2g_ns"), ("G2I", "g2i_ns"), ("I2D", "i2d_ns"), ("D2C", "d2c_ns"))


def run_spans(run: RunDir) -> tuple[pl.DataFrame, str]:
    """(spans, source): source is "io_span" (nests that start at calls or at a phone's file layer) or "tables"
    (a run without either: the requests of each table, linked by thread and time, FUSE on the daemon's threads)."""
    if run.has_table("io_span"):
        io_span = run.read_table("io_span")
        if io_span.filter(pl.col("layer").is_in(["syscall", "file"])).height:
            return spans_from_io_span(io_span, _opt(run, "block_io")), "io_span"
    return spans_from_tables({name: _opt(run, name) for name in ("syscall_class", "fuse_req", "fuse_event",
                                                                 "fsync_event", "jbd2_commit", "block_io")}), "tables"


def _opt(run: RunDir, name: str) -> pl.DataFrame | None:
    return run.read_table(name) if run.has_table(name) else None


def _conform(df: pl.DataFrame) -> pl.DataFrame:
    return df.select([(pl.col(c) if c in df.columns else pl.lit(None)).cast(t).alias(c)
                      for c, t in SPAN_SCHEMA.items()])


def spans_from_io_span(io_span: pl.DataFrame, block_io: pl.DataFrame | None) -> pl.DataFrame:
    """io_span as export spans: layer fs as it is, device spans folded into their block request's D2C phase
    (their children, none in practice, re-hung on the request), phases from the request's block_io row."""
    # each interval once: a commit two syncs waited for is nested under both, its second copy not primary
    io_span = io_span.filter(pl.col("is_primary"))
    device = io_span.filter(pl.col("layer") == "device").select("rep", "span_id", "parent_id")
    spans = io_span.filter(pl.col("layer") != "device")
    if len(device):  # a child of a device span hangs from the device span's request
        spans = spans.join(device.rename({"span_id": "parent_id", "parent_id": "_up"}), on=["rep", "parent_id"],
                           how="left").with_columns(parent_id=pl.coalesce("_up", "parent_id")).drop("_up")
    if block_io is not None and "source_row" in spans.columns:
        phases = block_io.with_row_index("source_row").select(
            pl.col("source_row").cast(pl.Int64), "rep", "queue_ts", "issue_ts", *[c for _, c in PHASES])
        spans = spans.join(phases, on=["rep", "source_row"], how="left").with_columns(
            *[pl.when(pl.col("layer") == "block").then(pl.col(c)).alias(c) for c in
              ("queue_ts", "issue_ts", *[c for _, c in PHASES])])
    return _conform(spans).drop("_from").sort("rep", "ts", "span_id")


def spans_from_tables(t: dict[str, pl.DataFrame | None]) -> pl.DataFrame:
    parts = []
    if t["syscall_class"] is not None:
        c = t["syscall_class"].filter(pl.col("dur").is_not_null())
        parts.append(c.select("rep", layer=pl.lit("syscall"), name=pl.col("syscall"), ts=pl.col("ts"),
                              end_ts=pl.col("ts") + pl.col("dur"), tid=pl.col("pid"), comm=pl.col("comm"),
                              size_bytes=pl.col("size_bytes"), path=pl.col("path"), offset_bytes=pl.col("offset_bytes"),
                              sync_mode=pl.col("sync_mode"), file_type=pl.col("file_type"), op=pl.col("op")))
    if t["fuse_req"] is not None:
        parts.append(_fuse_spans(t["fuse_req"], t["fuse_event"]))
    if t["fsync_event"] is not None:
        parts.append(_sync_file_spans(t["fsync_event"]))
    if t["jbd2_commit"] is not None:
        parts.append(_commit_spans(t["jbd2_commit"]))
    if t["block_io"] is not None:
        b = t["block_io"]
        parts.append(b.select(
            "rep", layer=pl.lit("block"), name=pl.col("op"), ts=pl.coalesce("queue_ts", "issue_ts", "complete_ts"),
            end_ts=pl.coalesce("complete_ts", "issue_ts", "queue_ts"), tid=pl.col("pid"), comm=pl.col("comm"),
            dev_major=pl.col("dev_major"), dev_minor=pl.col("dev_minor"), size_bytes=pl.col("size_bytes"),
            path=pl.col("path"), sync_mode=pl.col("sync_mode"), file_type=pl.col("file_type"), op=pl.col("op"),
            sector=pl.col("sector"), queue_ts=pl.col("queue_ts"), issue_ts=pl.col("issue_ts"),
            **{c: pl.col(c) for _, c in PHASES}))
    if not parts:
        return pl.DataFrame(schema=SPAN_SCHEMA).drop("_from")
    spans = pl.concat([_conform(p) for p in parts]).filter(pl.col("ts").is_not_null() & pl.col("end_ts").is_not_null())
    spans = spans.sort("rep", "ts", "layer").with_columns(span_id=pl.int_range(pl.len(), dtype=pl.Int64))
    return link_parents(spans).sort("rep", "ts", "span_id")


def _fuse_spans(req: pl.DataFrame, events: pl.DataFrame | None) -> pl.DataFrame:
    """FUSE requests on the daemon thread that replied (the requester's thread where no end was seen); the
    requester's thread is kept in _from for the link to its call."""
    if events is not None:
        ends = events.filter(pl.col("phase") == "end").unique(["rep", "connection", "unique"], keep="first").select(
            "rep", "connection", "unique", daemon_tid=pl.col("pid"), daemon_comm=pl.col("comm"))
        req = req.join(ends, on=["rep", "connection", "unique"], how="left")
    else:
        req = req.with_columns(daemon_tid=pl.lit(None, pl.Int32), daemon_comm=pl.lit(None, pl.Utf8))
    return req.filter(pl.col("end_ts").is_not_null()).select(
        "rep", layer=pl.lit("fuse"), name=pl.col("opcode_name").str.replace("^FUSE_", ""), ts=pl.col("send_ts"),
        end_ts=pl.col("end_ts"), tid=pl.coalesce("daemon_tid", "pid"), comm=pl.coalesce("daemon_comm", "comm"),
        size_bytes=pl.col("len_bytes"), op=pl.col("opcode_name"), _from=pl.col("pid"))


def _sync_file_spans(ev: pl.DataFrame) -> pl.DataFrame:
    """ext4/f2fs sync_file enter -> the next exit of the same thread."""
    ev = ev.sort("rep", "pid", "ts").with_columns(
        nxt_phase=pl.col("phase").shift(-1).over(["rep", "pid"]), nxt_ts=pl.col("ts").shift(-1).over(["rep", "pid"]))
    pairs = ev.filter((pl.col("phase") == "enter") & (pl.col("nxt_phase") == "exit"))
    return pairs.select("rep", layer=pl.lit("fs"), name=pl.col("fs") + "_sync_file", ts=pl.col("ts"),
                        end_ts=pl.col("nxt_ts"), tid=pl.col("pid"), comm=pl.col("comm"), dev_major=pl.col("dev_major"),
                        dev_minor=pl.col("dev_minor"),
                        op=pl.when(pl.col("datasync") == 1).then(pl.lit("fdatasync")).otherwise(pl.lit("fsync")))


def _commit_spans(ev: pl.DataFrame) -> pl.DataFrame:
    key = ["rep", "dev_major", "dev_minor", "tid"]
    start = ev.filter(pl.col("phase") == "start").unique(key, keep="first")
    end = ev.filter(pl.col("phase") == "end").unique(key, keep="first").select(*key, end_ts=pl.col("ts"))
    both = start.join(end, on=key, how="inner")
    return both.select("rep", layer=pl.lit("journal"), name=pl.lit("jbd2 commit ") + pl.col("tid").cast(pl.Utf8),
                       ts=pl.col("ts"), end_ts=pl.col("end_ts"), tid=pl.col("pid"), comm=pl.col("comm"),
                       dev_major=pl.col("dev_major"), dev_minor=pl.col("dev_minor"))


def link_parents(spans: pl.DataFrame) -> pl.DataFrame:
    """parent_id of every span from the tables' links (module docstring)."""
    spans = spans.with_columns(parent_id=pl.lit(None, pl.Int64))
    calls = spans.filter(pl.col("layer") == "syscall")
    fuse = spans.filter(pl.col("layer") == "fuse")
    fs = spans.filter(pl.col("layer") == "fs")
    commits = spans.filter(pl.col("layer") == "journal")
    links = []
    # FUSE request -> the call its requesting thread was in
    links.append(_enclosing(fuse.with_columns(tid=pl.col("_from") if "_from" in fuse.columns else pl.col("tid")),
                            [calls]))
    links.append(_enclosing(fs, [fuse, calls]))  # fs call -> the request its daemon thread serves, or the call
    # commit -> the earliest sync of its device running when it ended
    if len(commits) and len(fs):
        c = commits.select("rep", "span_id", "dev_major", "dev_minor", "end_ts")
        s = fs.select("rep", "dev_major", "dev_minor", p_id=pl.col("span_id"), p_ts=pl.col("ts"),
                      p_end=pl.col("end_ts"))
        hit = c.join(s, on=["rep", "dev_major", "dev_minor"]).filter(
            (pl.col("p_ts") <= pl.col("end_ts")) & (pl.col("end_ts") <= pl.col("p_end")))
        links.append(hit.sort("p_ts").unique("span_id", keep="first").select("span_id", parent=pl.col("p_id")))
    links.append(_enclosing(spans.filter(pl.col("layer") == "block"), [commits, fs, fuse, calls]))
    link = pl.concat([x for x in links if x is not None and len(x)]) if any(
        x is not None and len(x) for x in links) else None
    if link is not None:
        spans = spans.join(link, on="span_id", how="left").with_columns(parent_id=pl.col("parent")).drop("parent")
    return spans.drop([c for c in ("_from",) if c in spans.columns])


def _enclosing(children: pl.DataFrame, parents: list[pl.DataFrame]) -> pl.DataFrame | None:
    """span_id -> parent: for each child the innermost span (first of parents' layers, deepest first) on its own
    thread open at its start: the latest-started span of that layer there, if it has not ended yet."""
    if not len(children):
        return None
    found = children.select("rep", "span_id", "tid", "ts").with_columns(parent=pl.lit(None, pl.Int64))
    for layer in parents:
        if not len(layer):
            continue
        cand = layer.select("rep", "tid", p_ts=pl.col("ts"), p_end=pl.col("end_ts"), p_id=pl.col("span_id")).sort(
            "p_ts")
        hit = found.sort("ts").join_asof(cand, left_on="ts", right_on="p_ts", by=["rep", "tid"],
                                         strategy="backward", check_sortedness=False)
        hit = hit.with_columns(p_id=pl.when(pl.col("ts") <= pl.col("p_end")).then(pl.col("p_id")))
        found = hit.select("rep", "span_id", "tid", "ts", parent=pl.coalesce("parent", "p_id"))
    return found.filter(pl.col("parent").is_not_null()).select("span_id", "parent")
