"""Layer by layer: every call of the workload as a nest of intervals, one per layer it went through.

    call (syscall)  ⊃  FUSE request(s) it sent  ⊃  Android's file layer (android_fs read/write: file)
                    ⊃  the daemon's calls into the lower file system (fs)
                    ⊃  the file system's sync (ext4/f2fs sync_file)  ⊃  journal commits (f2fs: checkpoints)
                       it waited for
                    ⊃  block requests (queue -> complete)  ⊃  device time (issue -> complete, D2C)

On a stack without FUSE the call's own thread goes straight to fs. Layers a trace has no events for are
skipped: their children hang from the nearest layer that is there. A phone's own trace has no calls: its nests
start at its FUSE requests, file layer and file system syncs (analyzers/file_nest.py).

What "caused" means (each link is something the kernel records, never clock proximity alone):
  call -> FUSE request   fuse_request_send runs in the requesting thread: the request belongs to the call that
                         thread was in when it sent it.
  FUSE request -> daemon fuse_request_end runs in the daemon thread that replied. A daemon thread serves one
                         request at a time, from after its previous reply (or the send, if later) to this reply:
                         what that thread does in between is this request's (its reads and writes of /dev/fuse,
                         the FUSE protocol itself, excepted).
  thread -> file / fs / block
                         a file span (android_fs, in the thread that read or wrote), an fs span (a daemon's call,
                         an ext4/f2fs sync_file) or a block request submitted by a thread belongs to the innermost
                         span of that thread that is open at its start.
  fs sync -> commit      a journal commit is charged to every sync of the file system (sync_file, else a
                         daemon's or the call's own fsync/fdatasync/O_SYNC write) that was running when the commit
                         ended: they all waited for it. Its block requests are those the jbd2 thread that ran the
                         commit submitted during it. f2fs's checkpoints are its commits, and the flushes its
                         flush thread issues for waiting fsyncs are charged the same way (analyzers/f2fs_sync.py).
                         sync(2) and syncfs(2) wait for every commit too (they have no sync_file span).
  request -> flush       a flush without a bio of its own (issued by the block layer's flush machinery for a
                         REQ_PREFLUSH/REQ_FUA write) belongs to the write pending on its device when it was issued.
  block -> device        the request's own issue -> complete.
A call timed by strace only (no kernel syscall events) is placed through the clock readings or the trace
markers (analyzers/syscall.py). strace stamps a call before the kernel runs it, so its thread's events from its
stamp (less the placement's uncertainty) to a little after strace's end are its own; an event between two such
calls goes to the nearer one; the call's interval slides right to cover its children where strace's stamps fall
short.

Time. Each span is clipped to its parent. For each call, at every instant, the time goes to the deepest layer
active then: exclusive (self) time of layer L = time some span of layer >= L is active minus time some span of
layer > L is. The self times add up to the call's duration, so layer shares add up to 100 %, per call and in
aggregate. Inclusive time of L = the union of its spans. Two calls that waited for the same commit are each
charged the time they waited (the shares of each call still add up to 100 %); its bytes and requests are charged
once, to the call whose sync started first (`is_primary`).

IO no call caused (writeback, the periodic journal commit, a daemon's own flush thread, other processes) is not
dropped and not charged: io_background reports it by scope and task.

Limits: fs spans come from the daemon's system calls (syscalls source) and from sync_file events; an app's own
buffered write on a stack without FUSE has no fs span (no ext4 event brackets it), so its time is the call's own.
A call made in mmap'ed memory is invisible (page faults are not calls).
"""

from __future__ import annotations

import polars as pl

from mobiperf.analyzers.f2fs_sync import checkpoint_entities, flush_thread_flushes
from mobiperf.analyzers.file_span import file_entities
from mobiperf.analyzers.file_type import file_type_of_path
from mobiperf.analyzers.flush_owner import machine_flush_owners
from mobiperf.analyzers.syscall import (READS, WRITES, classify_calls, daemon_syscalls, timed_calls,
                                        workload_syscalls)

LAYERS = ("syscall", "fuse", "file", "fs", "journal", "block", "device")
RANK = {name: i for i, name in enumerate(LAYERS)}
OFFSET_STEP_NS = 1_000
SYNC_CALLS = ("fsync", "fdatasync", "sync_file_range", "syncfs", "sync", "msync")

ENTITY = {"rep": pl.Int32, "eid": pl.Int64, "layer": pl.Utf8, "name": pl.Utf8, "tid": pl.Int32, "comm": pl.Utf8,
          "start": pl.Int64, "end": pl.Int64, "size_bytes": pl.Int64, "op": pl.Utf8, "region": pl.Utf8,
          "dev_major": pl.Int32, "dev_minor": pl.Int32, "sector": pl.Int64, "fuse_unique": pl.Int64,
          "path": pl.Utf8, "sync_mode": pl.Utf8, "file_type": pl.Utf8, "source_row": pl.Int64, "ino": pl.Int64}
LINK = {"rep": pl.Int32, "parent": pl.Int64, "child": pl.Int64, "is_primary": pl.Boolean}


def nest_calls(syscall_io: pl.DataFrame, trace_marker: pl.DataFrame | None = None,
               task_role: pl.DataFrame | None = None, fuse_req: pl.DataFrame | None = None,
               fsync_event: pl.DataFrame | None = None, jbd2_commit: pl.DataFrame | None = None,
               block_io: pl.DataFrame | None = None, f2fs_checkpoint: pl.DataFrame | None = None,
               file_io: pl.DataFrame | None = None) -> pl.DataFrame:
    """io_span from the run's tables: the workload's calls (every traced call, IO or not) and what they caused,
    then the IO no call caused (call_id null)."""
    calls = timed_calls(workload_syscalls(syscall_io, trace_marker, task_role, fuse_req)
                        .filter(~pl.col("syscall").is_in(["lseek", "_llseek"])))
    calls = calls.sort("rep", "ts", "pid").with_columns(row=pl.int_range(pl.len(), dtype=pl.Int64).over("rep"))
    io = classify_calls(calls, keep=("row",)).select("rep", "row", "sync_mode", "file_type")
    calls = calls.join(io, on=["rep", "row"], how="left", maintain_order="left").with_columns(
        sync_mode=pl.col("sync_mode").fill_null("none"), file_type=pl.coalesce("file_type", file_type_of_path(
            pl.col("path"))))
    return build_io_spans(calls, fuse_req=fuse_req, daemon_calls=daemon_syscalls(syscall_io, task_role, fuse_req),
                          fsync_event=fsync_event, jbd2_commit=jbd2_commit, block_io=block_io,
                          f2fs_checkpoint=f2fs_checkpoint, files=file_entities(file_io))


def build_io_spans(calls: pl.DataFrame, *, fuse_req: pl.DataFrame | None = None,
                   daemon_calls: pl.DataFrame | None = None, fsync_event: pl.DataFrame | None = None,
                   jbd2_commit: pl.DataFrame | None = None, block_io: pl.DataFrame | None = None,
                   f2fs_checkpoint: pl.DataFrame | None = None, files: pl.DataFrame | None = None,
                   root_layers: tuple[str, ...] = ()) -> pl.DataFrame:
    """io_span: the spans of every call's nest, then those of the IO no call caused (calls: the workload's calls
    on the trace clock, analyzers/syscall.py timed_calls; daemon_calls: the FUSE daemons' calls into the lower fs;
    files: the file layer's spans, file_span.py; root_layers: layers whose spans no call contains start nests of
    their own, file_nest.py)."""
    ids = _Ids()
    call_e = ids.tag(calls.select(
        "rep", pl.lit("syscall").alias("layer"), pl.col("syscall").alias("name"), pl.col("pid").alias("tid"),
        "comm", pl.col("ts").alias("start"), pl.col("end_ts").alias("end"), "slack_ns", "row",
        pl.col("path").fill_null(""), pl.col("row").alias("source_row"), "is_strace_timed", "sync_mode",
        "file_type",
        _moved_bytes().alias("size_bytes"), pl.col("open_flags").fill_null("").alias("flags")))
    fuse = _fuse_entities(fuse_req, ids)
    blocks = _block_entities(block_io, ids)
    call_e = _refine_strace_offset(call_e, [e for e in (fuse, blocks) if e is not None])
    entities, links = [call_e], []
    app_hosts = call_e.select("rep", "tid", pl.col("start").alias("h0"), pl.col("end").alias("h1"), "eid",
                              pl.col("is_strace_timed").alias("loose"), pl.col("slack_ns").alias("slack"))
    levels = [app_hosts]
    if fuse is not None:
        entities.append(fuse)
        links.append(_contained(_starts(fuse), [app_hosts]))
        service = _as_hosts(fuse.filter(pl.col("daemon_tid").is_not_null()).with_columns(
            tid=pl.col("daemon_tid"), start=pl.col("svc_start")))
        levels = [pl.concat([app_hosts, service])]
    fs_calls = _daemon_call_entities(daemon_calls, ids)
    if fs_calls is not None:
        entities.append(fs_calls)
        links.append(_contained(_starts(fs_calls), levels))
        levels = [_as_hosts(fs_calls), *levels]
    if files is not None and files.height:
        files = ids.tag(files)
        entities.append(files)
        links.append(_contained(_starts(files), levels))
        levels = [_as_hosts(files), *levels]
    sync_files = _sync_file_entities(fsync_event, ids)
    if sync_files is not None:
        entities.append(sync_files)
        links.append(_contained(_starts(sync_files), levels))
        levels = [_as_hosts(sync_files), *levels]
    commits = _concat([_commit_entities(jbd2_commit, ids), checkpoint_entities(f2fs_checkpoint, ids.tag)])
    waiters = _sync_waiters(call_e, fs_calls, sync_files)
    if commits is not None:
        entities.append(commits)
        links.append(_waited_commits(commits, waiters))
    if blocks is not None:
        entities.append(blocks)
        flushed = flush_thread_flushes(blocks)
        special = [t for t in (_commit_blocks(blocks, commits) if commits is not None else None,
                               _flush_parents(blocks),
                               _waited_commits(flushed, waiters) if flushed is not None else None) if t is not None]
        rest = blocks
        for t in special:
            rest = rest.join(t.select(pl.col("child").alias("eid")), on="eid", how="anti")
        links += [*special, _contained(_starts(rest), levels)]
        device = ids.tag(blocks.filter(pl.col("issue_ts").is_not_null()).select(
            "rep", pl.lit("device").alias("layer"), "name", "tid", "comm", pl.col("issue_ts").alias("start"), "end",
            "size_bytes", "op", "region", "dev_major", "dev_minor", "sector", "source_row",
            pl.col("eid").alias("block_eid")))
        entities.append(device)
        links.append(device.select("rep", pl.col("block_eid").alias("parent"), pl.col("eid").alias("child"),
                                   pl.lit(True).alias("is_primary")))
    entity = pl.concat([e.select([pl.col(c).cast(t) if c in e.columns else pl.lit(None, t).alias(c)
                                  for c, t in ENTITY.items()]) for e in entities])
    link = pl.concat([lk.select([pl.col(c).cast(t) for c, t in LINK.items()]) for lk in links]) if links else \
        pl.DataFrame(schema=LINK)
    entity = _slide_strace_calls(entity, link, call_e)
    return _expand_nests(call_e, entity, link, root_layers)


def _expand_nests(call_e: pl.DataFrame, entity: pl.DataFrame, link: pl.DataFrame,
                  root_layers: tuple[str, ...]) -> pl.DataFrame:
    """The spans of every call's nest, then those of the rest: every entity no call reached, nested the same way
    from the roots among them; a root of one of root_layers (a trace without calls: file_nest.py) starts a nest
    of its own thread, as a call would."""
    caused = _expand(call_e.select("rep", "eid", "row"), entity, link)
    unreached = entity.filter(pl.col("layer") != "syscall").join(
        caused.select("rep", "eid").unique(), on=["rep", "eid"], how="anti")
    has_parent = link.join(unreached.select("rep", pl.col("eid").alias("parent")), on=["rep", "parent"])
    roots = unreached.join(has_parent.select("rep", pl.col("child").alias("eid")), on=["rep", "eid"], how="anti")
    own = pl.col("layer").is_in(list(root_layers))
    first_row = int(call_e["row"].max()) + 1 if call_e.height else 0
    promoted = roots.filter(own).sort("rep", "start", "eid").select(
        "rep", "eid", (pl.int_range(pl.len(), dtype=pl.Int64).over("rep") + first_row).alias("row"))
    caused = pl.concat([caused, _expand(promoted, entity, link, first_id=_next_id(caused))])
    background = _expand(roots.filter(~own).select("rep", "eid", pl.lit(None, pl.Int64).alias("row")), entity, link,
                         first_id=_next_id(caused))
    return pl.concat([caused, background]).drop("eid")


def _next_id(spans: pl.DataFrame) -> int:
    return int(spans["span_id"].max()) + 1 if spans.height else 0


class _Ids:
    """Entity ids unique across layers (eid)."""

    def __init__(self):
        self.next = 0

    def tag(self, df: pl.DataFrame) -> pl.DataFrame:
        out = df.with_columns(eid=pl.int_range(self.next, self.next + df.height, dtype=pl.Int64))
        self.next += df.height
        return out


def _moved_bytes() -> pl.Expr:
    """What a read or write call transferred (its return value); 0 for every other call."""
    return pl.when(pl.col("syscall").is_in([*READS, *WRITES]) & (pl.col("ret") > 0)).then(pl.col("ret")).otherwise(0)


def _starts(entities: pl.DataFrame) -> pl.DataFrame:
    return entities.select("rep", "tid", pl.col("start").alias("x"), pl.col("eid").alias("child"))


def _as_hosts(entities: pl.DataFrame) -> pl.DataFrame:
    return entities.select("rep", "tid", pl.col("start").alias("h0"), pl.col("end").alias("h1"), "eid",
                           loose=pl.lit(False), slack=pl.lit(0, pl.Int64))


# How long after strace's end of a call the kernel may still run it: strace stamps a call when it sees the
# entry stop, and the kernel starts it only after strace lets it go (13-90 us measured here, under load more).
STRACE_LEAD_NS = 1_000_000


def _contained(events: pl.DataFrame, levels: list[pl.DataFrame]) -> pl.DataFrame:
    """(parent, child) for each event (rep, tid, x, child): the span of its thread open at x, innermost level
    first. Within a level a thread's spans do not overlap, so the latest start <= x is the only candidate that
    can contain x. A strace-timed call (loose) is a candidate in a wider band: from its stamp less the placement's
    slack to its end plus STRACE_LEAD_NS; between two such bands the event goes to the nearer call."""
    found, todo = [], events.sort("x")
    for hosts in levels:
        if not todo.height:
            break
        hosts = hosts.sort("h0")
        back = todo.join_asof(hosts, left_on="x", right_on="h0", by=["rep", "tid"], strategy="backward",
                              check_sortedness=False)
        ahead = todo.join_asof(hosts.rename({c: f"{c}_f" for c in ("h0", "h1", "eid", "loose", "slack")}),
                               left_on="x", right_on="h0_f", by=["rep", "tid"], strategy="forward",
                               check_sortedness=False)
        m = pl.concat([back, ahead.select("eid_f", "h0_f", "loose_f", "slack_f")], how="horizontal")
        d_back = (pl.col("x") - pl.col("h1")).clip(lower_bound=0)
        ok_back = pl.col("eid").is_not_null() & ((d_back == 0) | (pl.col("loose") & (d_back <= STRACE_LEAD_NS
                                                                                        + pl.col("slack"))))
        d_ahead = pl.col("h0_f") - pl.col("x")
        ok_ahead = pl.col("eid_f").is_not_null() & pl.col("loose_f") & (d_ahead <= pl.col("slack_f"))
        pick = pl.when(ok_back & (~ok_ahead | (d_back <= d_ahead))).then(pl.col("eid")) \
            .when(ok_ahead).then(pl.col("eid_f"))
        m = m.with_columns(parent=pick)
        found.append(m.filter(pl.col("parent").is_not_null()).select("rep", "parent", "child"))
        todo = m.filter(pl.col("parent").is_null()).select(events.columns)
    out = pl.concat(found) if found else pl.DataFrame(schema={"rep": pl.Int32, "parent": pl.Int64,
                                                              "child": pl.Int64})
    return out.with_columns(is_primary=pl.lit(True))


def _fuse_entities(fuse_req: pl.DataFrame | None, ids: _Ids) -> pl.DataFrame | None:
    if fuse_req is None or not len(fuse_req):
        return None
    req = fuse_req.with_row_index("source_row").filter(pl.col("end_ts").is_not_null())
    if "daemon_tid" not in req.columns:  # a run directory written before fuse_req had it
        req = req.with_columns(daemon_tid=pl.lit(None, pl.Int32), data_bytes=pl.lit(None, pl.Int64))
    # A daemon thread serves one request at a time: from its previous reply (or this send, if later) to this reply.
    req = req.sort("rep", "end_ts").with_columns(
        svc_start=pl.max_horizontal("send_ts", pl.col("end_ts").shift(1).over(["rep", "daemon_tid"])))
    return ids.tag(req.select(
        "rep", pl.lit("fuse").alias("layer"), pl.col("opcode_name").alias("name"), pl.col("pid").alias("tid"),
        "comm", pl.col("send_ts").alias("start"), pl.col("end_ts").alias("end"),
        pl.col("data_bytes").alias("size_bytes"), "daemon_tid", "svc_start", pl.col("unique").alias("fuse_unique"),
        "source_row"))


def _daemon_call_entities(daemon_calls: pl.DataFrame | None, ids: _Ids) -> pl.DataFrame | None:
    if daemon_calls is None or not len(daemon_calls):
        return None
    return ids.tag(daemon_calls.filter(pl.col("dur").is_not_null()).select(
        "rep", pl.lit("fs").alias("layer"), pl.col("syscall").alias("name"), pl.col("pid").alias("tid"), "comm",
        pl.col("ts").alias("start"), (pl.col("ts") + pl.col("dur")).alias("end"),
        _moved_bytes().alias("size_bytes"), pl.col("syscall").alias("op")))


def _sync_file_entities(fsync_event: pl.DataFrame | None, ids: _Ids) -> pl.DataFrame | None:
    if fsync_event is None or not len(fsync_event):
        return None
    from mobiperf.analyzers.latency import sync_file_calls

    sf = sync_file_calls(fsync_event)
    return ids.tag(sf.select(
        "rep", pl.lit("fs").alias("layer"), (pl.col("fs") + "_sync_file").alias("name"), pl.col("pid").alias("tid"),
        "comm", pl.col("ts").alias("start"), (pl.col("ts") + pl.col("dur")).alias("end"), "op", "dev_major",
        "dev_minor", "ino"))


def _commit_entities(jbd2_commit: pl.DataFrame | None, ids: _Ids) -> pl.DataFrame | None:
    """One span per jbd2 transaction: from jbd2_start_commit (else the first phase seen) to jbd2_end_commit."""
    if jbd2_commit is None or not len(jbd2_commit):
        return None
    c = jbd2_commit.group_by("rep", "dev_major", "dev_minor", "tid").agg(
        start=pl.col("ts").min(), end=pl.col("ts").filter(pl.col("phase") == "end").max(),
        jbd2_tid=pl.col("pid").first(), comm=pl.col("comm").first()).filter(pl.col("end").is_not_null()).sort(
        "rep", "start", "dev_major", "dev_minor", "tid")  # ids in time order, the same every time
    return ids.tag(c.select(
        "rep", pl.lit("journal").alias("layer"), pl.lit("jbd2_commit").alias("name"), pl.col("jbd2_tid").alias("tid"),
        "comm", "start", "end", "dev_major", "dev_minor", pl.col("tid").alias("transaction")))


def _block_entities(block_io: pl.DataFrame | None, ids: _Ids) -> pl.DataFrame | None:
    if block_io is None or not len(block_io):
        return None
    b = block_io.with_row_index("source_row").filter(
        pl.col("complete_ts").is_not_null() & pl.coalesce("queue_ts", "issue_ts").is_not_null())
    return ids.tag(b.select(
        "rep", pl.lit("block").alias("layer"), pl.col("op").alias("name"), pl.col("pid").alias("tid"), "comm",
        pl.coalesce("queue_ts", "issue_ts").alias("start"), pl.col("complete_ts").alias("end"), "size_bytes", "op",
        "region", "dev_major", "dev_minor", "sector", "issue_ts", pl.col("queue_ts").is_null().alias("no_bio"),
        "sync_mode", "file_type", "path",
        pl.col("source_row").cast(pl.Int64)))


def _concat(frames: list[pl.DataFrame | None]) -> pl.DataFrame | None:
    present = [f for f in frames if f is not None]
    return pl.concat(present, how="diagonal_relaxed") if present else None


def _sync_waiters(calls: pl.DataFrame, fs_calls: pl.DataFrame | None,
                  sync_files: pl.DataFrame | None) -> pl.DataFrame:
    """The spans that wait for journal commits: the file system's sync_file spans where the trace has them (and the
    workload's sync/syncfs calls, which have none), else the daemons' sync calls, else the workload's sync calls
    and synchronous writes. Only one kind along a nest, so a commit is never charged twice along one (fdatasync >
    FUSE_FSYNC > the daemon's fdatasync > ext4_sync_file)."""
    none = pl.lit(None, pl.Int32)
    if sync_files is not None and sync_files.height:
        whole_fs = calls.filter(pl.col("name").is_in(["sync", "syncfs"]))  # no sync_file span inside them
        return pl.concat([sync_files.select("rep", "eid", "tid", "start", "end", "dev_major", "dev_minor"),
                          whole_fs.select("rep", "eid", "tid", "start", "end", dev_major=none, dev_minor=none)],
                         how="vertical_relaxed")
    if fs_calls is not None and (daemon := fs_calls.filter(pl.col("name").is_in(SYNC_CALLS))).height:
        return daemon.select("rep", "eid", "tid", "start", "end", dev_major=none, dev_minor=none)
    syncs = calls.filter(pl.col("name").is_in(SYNC_CALLS) | pl.col("flags").str.contains(r"O_D?SYNC"))
    return syncs.select("rep", "eid", "tid", "start", "end", dev_major=none, dev_minor=none)


def _waited_commits(commits: pl.DataFrame, waiters: pl.DataFrame) -> pl.DataFrame:
    """(waiter, commit) for every sync running when the commit ended (on its device, where the sync names one):
    they all waited for it. The first to start is primary. A thread runs one sync at a time, so per thread the
    latest sync started before the commit's end is the only candidate."""
    threads = waiters.select("rep", "tid").unique()
    c = commits.select("rep", pl.col("eid").alias("child"), pl.col("end").alias("c1"), "dev_major", "dev_minor") \
        .join(threads, on="rep").sort("c1")
    w = waiters.rename({"eid": "parent", "start": "w0", "end": "w1", "dev_major": "w_major",
                        "dev_minor": "w_minor"}).sort("w0")
    m = c.join_asof(w, left_on="c1", right_on="w0", by=["rep", "tid"], strategy="backward", check_sortedness=False)
    same_dev = pl.col("w_major").is_null() | ((pl.col("w_major") == pl.col("dev_major"))
                                              & (pl.col("w_minor") == pl.col("dev_minor")))
    m = m.filter(pl.col("parent").is_not_null() & (pl.col("c1") > pl.col("w0")) & (pl.col("c1") <= pl.col("w1"))
                 & same_dev).sort("child", "w0", "parent")
    return m.with_columns(is_primary=pl.int_range(pl.len()).over("child") == 0).select(
        "rep", "parent", "child", "is_primary")


def _commit_blocks(blocks: pl.DataFrame, commits: pl.DataFrame) -> pl.DataFrame:
    """Block requests the committing jbd2 thread submitted during its commit."""
    return _contained(_starts(blocks), [_as_hosts(commits)])


def _flush_parents(blocks: pl.DataFrame) -> pl.DataFrame | None:
    """A flush with no bio (the flush machinery's, for a REQ_PREFLUSH/REQ_FUA write) -> the write it was issued
    for (analyzers/flush_owner.py)."""
    pairs = machine_flush_owners(blocks, key="eid", start="start", end="end", no_bio=pl.col("no_bio"))
    if not pairs.height:
        return None
    return pairs.select("rep", pl.col("owner").alias("parent"), pl.col("flush").alias("child"),
                        is_primary=pl.lit(True))


def _refine_strace_offset(calls: pl.DataFrame, children: list[pl.DataFrame]) -> pl.DataFrame:
    """Calls placed from strace's stamps with an uncertain offset (the markers: tens of us) are moved, within that
    uncertainty, to the offset that puts the most of their threads' FUSE sends and block requests inside strace's
    own interval of some call: the kernel runs a call only between strace's stamps of its entry and exit. The
    search is on a 1 us grid over twice the uncertainty, the middle of the best plateau wins; the calls' slack
    becomes the grid step."""
    loose = calls.filter(pl.col("is_strace_timed") & (pl.col("slack_ns") > OFFSET_STEP_NS))
    if not loose.height or not children:
        return calls
    threads = loose.select("rep", "tid").unique()
    events = pl.concat([c.select("rep", "tid", pl.col("start").alias("x")) for c in children]).join(
        threads, on=["rep", "tid"])
    if not events.height:
        return calls
    hosts = loose.select("rep", "tid", "start", "end").sort("start")
    shifts = {}
    for rep in loose["rep"].unique().to_list():
        # twice the uncertainty: the best plateau must fit whole for its middle to be found wherever it lies
        err = 2 * int(loose.filter(pl.col("rep") == rep)["slack_ns"].max())
        ev = events.filter(pl.col("rep") == rep).sort("x")
        h = hosts.filter(pl.col("rep") == rep)
        grid = list(range(-err // OFFSET_STEP_NS * OFFSET_STEP_NS, err + 1, OFFSET_STEP_NS))
        scores = []
        for d in grid:
            m = ev.join_asof(h.with_columns(pl.col("start") + d, pl.col("end") + d), left_on="x", right_on="start",
                             by=["rep", "tid"], strategy="backward", check_sortedness=False)
            scores.append(int(((pl.Series(m["x"] <= m["end"])).fill_null(False)).sum()))
        best = max(scores)
        plateau = [d for d, sc in zip(grid, scores) if sc == best]
        shifts[rep] = plateau[len(plateau) // 2]
    shift = pl.col("rep").replace_strict(shifts, default=0, return_dtype=pl.Int64)
    moved = pl.col("is_strace_timed") & (pl.col("slack_ns") > OFFSET_STEP_NS)
    return calls.with_columns(
        start=pl.when(moved).then(pl.col("start") + shift).otherwise(pl.col("start")),
        end=pl.when(moved).then(pl.col("end") + shift).otherwise(pl.col("end")),
        slack_ns=pl.when(moved).then(pl.lit(OFFSET_STEP_NS, pl.Int64)).otherwise(pl.col("slack_ns")))


def _slide_strace_calls(entity: pl.DataFrame, link: pl.DataFrame, calls: pl.DataFrame) -> pl.DataFrame:
    """A call timed by strace keeps strace's duration, but strace stamps it before the kernel runs it: where its
    children end after strace's end, the call slides right to cover them (at most STRACE_LEAD_NS + its slack)."""
    timed = calls.filter(pl.col("is_strace_timed")).select("rep", "eid", "slack_ns")
    if not timed.height:
        return entity
    kids = link.join(timed.select("rep", pl.col("eid").alias("parent")), on=["rep", "parent"]).join(
        entity.select("rep", pl.col("eid").alias("child"), pl.col("end").alias("_kid_end")), on=["rep", "child"])
    reach = kids.group_by("rep", "parent").agg(pl.col("_kid_end").max()).rename({"parent": "eid"})
    moved = timed.join(reach, on=["rep", "eid"]).join(entity.select("rep", "eid", "start", "end"), on=["rep", "eid"])
    shift = pl.min_horizontal(pl.col("_kid_end") - pl.col("end"), STRACE_LEAD_NS + pl.col("slack_ns")).clip(0)
    moved = moved.select("rep", "eid", (pl.col("start") + shift).alias("_s"), (pl.col("end") + shift).alias("_e"))
    return entity.join(moved, on=["rep", "eid"], how="left").with_columns(
        start=pl.coalesce("_s", "start"), end=pl.coalesce("_e", "end")).drop("_s", "_e")


def _clip(x: pl.Expr, lo: pl.Expr, hi: pl.Expr) -> pl.Expr:
    return pl.min_horizontal(pl.max_horizontal(x, lo), hi)


def _expand(roots: pl.DataFrame, entity: pl.DataFrame, link: pl.DataFrame, first_id: int = 0) -> pl.DataFrame:
    """Walk the links down from every root (rep, eid, row): one span per (root, path), clipped to its parent."""
    times = entity.select("rep", "eid", "start", "end")
    frontier = roots.join(times, on=["rep", "eid"]).select(
        "rep", "eid", pl.col("row").alias("call_id"), pl.col("start").alias("s"), pl.col("end").alias("e"),
        pl.lit(True).alias("is_primary"), pl.lit(None, pl.Int64).alias("parent_id"))
    # joins keep no order: each level sorted before its ids are given, so an analysis gives the same ids every time
    frontier = frontier.sort("rep", "call_id", "eid", nulls_last=True).with_columns(
        span_id=pl.int_range(first_id, first_id + pl.len(), dtype=pl.Int64))
    spans, next_id = [frontier], first_id + frontier.height
    for _ in range(16):  # the deepest nest has 8 links (call, fuse, fs, sync_file, commit, block, flush, device)
        kids = frontier.join(link, left_on=["rep", "eid"], right_on=["rep", "parent"]).join(
            times, left_on=["rep", "child"], right_on=["rep", "eid"])
        if not kids.height:
            break
        start = _clip(pl.col("start"), pl.col("s"), pl.col("e"))
        kids = kids.select(
            "rep", pl.col("child").alias("eid"), "call_id", start.alias("s"),
            _clip(pl.col("end"), start, pl.col("e")).alias("e"),
            (pl.col("is_primary") & pl.col("is_primary_right")).alias("is_primary"),
            pl.col("span_id").alias("parent_id"))
        kids = kids.sort("rep", "parent_id", "eid").with_columns(
            span_id=pl.int_range(next_id, next_id + pl.len(), dtype=pl.Int64))
        next_id += kids.height
        spans.append(kids.select(frontier.columns))
        frontier = kids
    s = pl.concat(spans).join(entity, on=["rep", "eid"])
    return s.select(
        "rep", "span_id", "parent_id", "call_id", "layer", "name", pl.col("s").alias("ts"),
        pl.col("e").alias("end_ts"), "tid", "comm", "size_bytes", "is_primary", "op", "region", "dev_major",
        "dev_minor", "sector", "fuse_unique", "path", "sync_mode", "file_type", "source_row", "ino", "eid").sort(
        "rep", "span_id")
