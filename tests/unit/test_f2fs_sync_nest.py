"""f2fs's sync in the nest of a call (analyzers/f2fs_sync.py through io_span.py), on event tables written out by
hand for the cases the kernel's code gives (fs/f2fs/file.c f2fs_do_sync_file, checkpoint.c, segment.c):
  - an fsync that needs a checkpoint, written by the f2fs_ckpt thread (checkpoint_merge) or by its own thread;
  - two fsyncs that wait for one flush the f2fs_flush thread issued (flush_merge with others waiting);
  - sync(2), which has no sync_file span, waiting for a checkpoint.
Times are ns on the trace clock; every expected figure follows from the rows written here."""

from __future__ import annotations

import polars as pl

from mobiperf.analyzers.block_io import classify_block_io
from mobiperf.analyzers.io_span import nest_calls
from mobiperf.analyzers.waterfall import break_down_layers, build_waterfall
from mobiperf.core.schema import BLOCK_IO, BLOCK_RQ, F2FS_CHECKPOINT, FSYNC_EVENT, IO_SPAN, SYSCALL_IO, TASK_ROLE

DEV = (254, 0)


def calls(*rows) -> pl.DataFrame:
    """(pid, syscall, fd, ts, end) -> syscall_io rows traced by the syscalls source."""
    return SYSCALL_IO.validate(pl.DataFrame([{
        "rep": 0, "ts": ts, "dur": end - ts, "pid": pid, "comm": "app", "syscall": name, "fd": fd, "path": "",
        "request_bytes": -1, "offset_bytes": -1, "ret": 0, "errno": "", "source": "ftrace", "open_flags": "",
        "new_path": "", "clock_error_ns": None} for pid, name, fd, ts, end in rows], schema=SYSCALL_IO.columns))


def sync_files(*rows) -> pl.DataFrame:
    """(pid, enter, exit) -> f2fs_sync_file enter/exit rows (fdatasync)."""
    out = []
    for pid, t0, t1 in rows:
        for ts, phase in ((t0, "enter"), (t1, "exit")):
            out.append({"rep": 0, "ts": ts, "cpu": 0, "pid": pid, "comm": "app", "fs": "f2fs", "phase": phase,
                        "dev_major": DEV[0], "dev_minor": DEV[1], "ino": 26, "datasync": 1,
                        "ret": 0 if phase == "exit" else None})
    return FSYNC_EVENT.validate(pl.DataFrame(out, schema=FSYNC_EVENT.columns))


def checkpoints(*rows) -> pl.DataFrame:
    """(pid, comm, start, end) -> f2fs_write_checkpoint's three states."""
    out = []
    for pid, comm, t0, t1 in rows:
        for ts, phase, state in ((t0, "start", "start block_ops"), ((t0 + t1) // 2, "block_ops", "finish block_ops"),
                                 (t1, "end", "finish checkpoint")):
            out.append({"rep": 0, "ts": ts, "cpu": 0, "pid": pid, "comm": comm, "dev_major": DEV[0],
                        "dev_minor": DEV[1], "reason": "sync", "phase": phase, "state": state})
    return F2FS_CHECKPOINT.validate(pl.DataFrame(out, schema=F2FS_CHECKPOINT.columns))


def blocks(*rows) -> pl.DataFrame:
    """(pid, comm, op, region, sector, size, queue, issue, complete) -> block_io rows; queue None: a flush the
    block layer's flush machinery made (no bio)."""
    out = []
    for pid, comm, op, region, sector, size, q, i, c in rows:
        row = {name: None for name in BLOCK_IO.columns}
        row.update(rep=0, ts=q if q is not None else i, dev_major=DEV[0], dev_minor=DEV[1], sector=sector,
                   size_bytes=size, op=op, region=region, queue_ts=q, issue_ts=i, complete_ts=c, pid=pid, comm=comm,
                   sync_mode="sync", file_type="unknown", path="", scope="workload", dispatches=1, nr_bios=1)
        out.append(row)
    return BLOCK_IO.validate(pl.DataFrame(out, schema=BLOCK_IO.columns))


def nest(sys, fsync, cps, blk) -> pl.DataFrame:
    return IO_SPAN.validate(nest_calls(sys, fsync_event=fsync, f2fs_checkpoint=cps, block_io=blk))


def tree(spans: pl.DataFrame, call: str) -> set[tuple[str, str, str]]:
    """(layer, name or region, parent layer) of every span under the call named `call`."""
    cid = spans.filter((pl.col("layer") == "syscall") & (pl.col("name") == call))["call_id"][0]
    mine = spans.filter(pl.col("call_id") == cid)
    parent = dict(zip(mine["span_id"], mine["layer"]))
    return {(r["layer"], r["region"] if r["layer"] in ("block", "device") else r["name"],
             parent.get(r["parent_id"], "-")) for r in mine.iter_rows(named=True)}


CHECKPOINT_BLOCKS = [  # what a checkpoint writes: node blocks, the NAT/SIT blocks, the pack, its commit block
    ("node", 41168, 12288, 3500, 3600, 4500), ("nat", 20480, 4096, 4600, 4700, 4900),
    ("checkpoint", 12288, 12288, 5000, 5100, 6000), ("checkpoint", 12312, 4096, 6500, 6600, 7400)]


def _fdatasync_with_checkpoint(ckpt_pid: int, ckpt_comm: str):
    sys = calls((10, "fdatasync", 3, 1000, 9000))
    fsync = sync_files((10, 1100, 8900))
    cps = checkpoints((ckpt_pid, ckpt_comm, 3000, 8000))
    blk = blocks((10, "app", "write", "data", 53264, 4096, 1200, 1300, 2000),
                 *[(ckpt_pid, ckpt_comm, "write", region, s, n, q, i, c) for region, s, n, q, i, c in CHECKPOINT_BLOCKS],
                 (38, "kworker/0:1H", "flush", "none", -1, 0, None, 7450, 7600))   # the commit block's post-flush
    return nest(sys, fsync, cps, blk)


def test_a_checkpoint_the_fsync_waited_for_nests_its_writes_under_it():
    for pid, comm in ((20, "f2fs_ckpt-254:0"), (10, "app")):   # checkpoint_merge's thread, or the fsync's own
        spans = _fdatasync_with_checkpoint(pid, comm)
        assert tree(spans, "fdatasync") == {
            ("syscall", "fdatasync", "-"), ("fs", "f2fs_sync_file", "syscall"), ("block", "data", "fs"),
            ("device", "data", "block"), ("journal", "f2fs_checkpoint", "fs"), ("block", "node", "journal"),
            ("block", "nat", "journal"), ("block", "checkpoint", "journal"), ("block", "none", "block"),
            ("device", "node", "block"), ("device", "nat", "block"), ("device", "checkpoint", "block"),
            ("device", "none", "block")}, comm
        wf = build_waterfall(spans)
        row = wf.row(0, named=True)
        # bytes by class: the checkpoint pack is f2fs's journal, node and NAT blocks its metadata
        assert (row["data_bytes"], row["journal_bytes"], row["metadata_bytes"]) == (4096, 16384, 16384)
        assert row["journal_ns"] == 5000                  # the checkpoint, 3000 -> 8000
        shares = break_down_layers(wf)["share"].sum()
        assert abs(shares - 1) < 1e-9


def test_a_flush_of_the_flush_thread_is_charged_to_every_fsync_waiting():
    sys = calls((10, "fdatasync", 3, 1000, 7000), (11, "fdatasync", 4, 2000, 7100))
    fsync = sync_files((10, 1100, 6900), (11, 2100, 7000))
    blk = blocks((10, "app", "write", "data", 100, 4096, 1200, 1300, 1900),
                 (11, "app", "write", "data", 200, 4096, 2200, 2300, 2900),
                 (30, "f2fs_flush-254:0", "flush", "none", -1, 0, 5000, 5100, 6000))
    spans = nest(sys, fsync, None, blk)
    flush = spans.filter((pl.col("layer") == "block") & (pl.col("region") == "none"))
    assert flush.height == 2 and set(flush["call_id"]) == set(
        spans.filter(pl.col("layer") == "syscall")["call_id"])
    # its bytes and requests count once: for the fsync that started first
    primary = flush.filter(pl.col("is_primary"))
    assert primary.height == 1
    first = spans.filter((pl.col("layer") == "syscall") & (pl.col("tid") == 10))["call_id"][0]
    assert primary["call_id"][0] == first
    wf = build_waterfall(spans)
    assert wf.sort("ts")["flushes"].to_list() == [1, 0]


def test_sync_waits_for_the_checkpoint_it_forced():
    sys = calls((10, "fdatasync", 3, 100, 900), (12, "sync", -1, 10000, 20000))
    fsync = sync_files((10, 110, 890))
    cps = checkpoints((20, "f2fs_ckpt-254:0", 11000, 19000))
    blk = blocks((10, "app", "write", "data", 100, 4096, 200, 300, 800),
                 (20, "f2fs_ckpt-254:0", "write", "checkpoint", 8192, 12288, 12000, 12100, 13000),
                 (20, "f2fs_ckpt-254:0", "write", "checkpoint", 8216, 4096, 14000, 14100, 15000))
    spans = nest(sys, fsync, cps, blk)
    assert tree(spans, "sync") == {("syscall", "sync", "-"), ("journal", "f2fs_checkpoint", "syscall"),
                                   ("block", "checkpoint", "journal"), ("device", "checkpoint", "block")}
    # the fdatasync before it waited for no checkpoint
    assert ("journal", "f2fs_checkpoint", "fs") not in tree(spans, "fdatasync")


def test_a_checkpoint_no_call_waited_for_is_background():
    sys = calls((10, "fdatasync", 3, 100, 900))
    spans = nest(sys, sync_files((10, 110, 890)), checkpoints((20, "f2fs_ckpt-254:0", 2000, 3000)),
                 blocks((20, "f2fs_ckpt-254:0", "write", "checkpoint", 8192, 4096, 2100, 2200, 2900)))
    cp = spans.filter(pl.col("layer") == "journal")
    assert cp.height == 1 and cp["call_id"][0] is None
    assert spans.filter((pl.col("layer") == "block") & (pl.col("parent_id") == cp["span_id"][0])).height == 1


def _rq(pid, comm, op, sector, size, q, i, c, rwbs="WS") -> dict:
    row = {name: None for name in BLOCK_RQ.columns}
    row.update(rep=0, dev_major=DEV[0], dev_minor=DEV[1], sector=sector, size_bytes=size, rwbs=rwbs, op=op,
               is_sync=True, is_meta="M" in rwbs, is_fua=False, is_preflush=False, is_readahead=False, queue_ts=q,
               issue_ts=i, complete_ts=c, nr_bios=1 if q else 0, pid=pid, comm=comm, error=0,
               is_complete_match=True, first_issue_ts=i, dispatches=1)
    return row


def test_on_a_shared_device_the_checkpoint_and_its_flushes_are_the_workloads():
    """A phone's /data (device_private False): of the kernel's threads, the file system's journaling ones count
    (the checkpoint the workload's fsync waited for), and so do the flushes the block layer's machinery issued
    for the checkpoint's commit block (a kworker's by their task); a kworker's writeback does not."""
    rq = BLOCK_RQ.validate(pl.DataFrame([
        _rq(10, "app", "write", 100, 4096, 1000, 1100, 1500),
        _rq(20, "f2fs_ckpt-254:0", "write", 8192, 12288, 3000, 3100, 3500, "WSM"),
        _rq(20, "f2fs_ckpt-254:0", "write", 8216, 4096, 6000, 6600, 7000, "FWFSM"),
        _rq(38, "kworker/0:1H", "flush", -1, 0, None, 6100, 6500, "FF"),    # its pre-flush
        _rq(38, "kworker/0:1H", "flush", -1, 0, None, 7010, 7100, "FF"),    # its post-flush (FUA emulated)
        _rq(77, "kworker/u2:1", "write", 50000, 4096, 9000, 9100, 9500, "W"),   # someone's writeback
    ], schema=BLOCK_RQ.columns))
    sys = calls((10, "fdatasync", 3, 900, 8000))
    roles = TASK_ROLE.validate(pl.DataFrame([{"rep": 0, "pid": 10, "role": "workload", "fuse_fd": -1,
                                             "layer": None, "comm": "app"}], schema=TASK_ROLE.columns))
    io = classify_block_io(rq, None, roles, sys, device_private=False)
    assert sorted(io["comm"].to_list()) == ["app", "f2fs_ckpt-254:0", "f2fs_ckpt-254:0", "kworker/0:1H",
                                            "kworker/0:1H"]
    assert set(classify_block_io(rq, None, roles, sys, device_private=True)["comm"]) == {
        "app", "f2fs_ckpt-254:0", "kworker/0:1H", "kworker/u2:1"}
