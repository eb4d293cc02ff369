"""Who each span belongs to (analyzers/attribution.py: span_owner) and IO by process, thread and file
(analyzers/io_by_file.py), on a capture whose true answer is known and on hand-made nests.

tests/fixtures/layers/fuse-fdatasync-strace (capture.py there): the generator pre-creates test.dat0 with one
200 KiB write and fsyncs it, then writes 50 random 4 KiB blocks into it through /sdcard (the bFUSE daemon over ext4),
each followed by fdatasync, traced by strace (paths) and ftrace. The daemon's thread issues every data write;
by causality they are the generator's, on the file it named.
"""

from __future__ import annotations

import polars as pl

from mobiperf.analyzers.attribution import attribute_spans
from mobiperf.analyzers.io_by_file import sum_io_by_file
from mobiperf.core.schema import IO_BY_FILE, IO_SPAN, SPAN_OWNER, TASK

from tests.golden.test_layer_model import analyzed  # noqa: F401  (the module-scoped fixture)

FILE = "/sdcard/test.dat0"


def _file_rows(results) -> pl.DataFrame:
    return results["io_by_file"].filter(pl.col("path").fill_null("").str.ends_with(FILE))


def test_every_data_request_goes_to_the_file_the_generator_named(analyzed):
    _, results = analyzed("fuse-fdatasync-strace")
    spans = results["io_span"].join(results["span_owner"].rename({"path": "owner_path"}), on=["rep", "span_id"])
    data = spans.filter((pl.col("layer") == "block") & (pl.col("region") == "data"))
    block_io = results["block_io"].filter(pl.col("region") == "data")
    assert data.height == block_io.height == 51
    assert data["owner_path"].str.ends_with(FILE).all()
    # issued by the daemon's thread, owned by the generator's: the FUSE request links them
    issuers = set(block_io["comm"].unique())
    assert issuers == {"bfuse"}, issuers
    assert set(data["thread"].unique()) == {"mobibench"} and set(data["scope"].unique()) == {"workload"}
    assert int(data["size_bytes"].sum()) == 200 * 1024 + 50 * 4096


def test_io_by_file_counts_the_calls_and_the_requests_of_the_file(analyzed):
    _, results = analyzed("fuse-fdatasync-strace")
    rows = _file_rows(results)
    assert IO_BY_FILE.validate(rows).columns == list(IO_BY_FILE.columns)

    def one(layer: str, op: str) -> dict:
        got = rows.filter((pl.col("layer") == layer) & (pl.col("op") == op))
        assert got.height == 1, (layer, op, got)
        return got.row(0, named=True)

    assert one("syscall", "fdatasync")["requests"] == 50
    assert one("fuse", "fsync")["requests"] == 52  # the 50 fdatasyncs and the 2 setup fsyncs
    writes = one("syscall", "write")  # the generator seeks, then writes: the 200 KiB one and the 50 of 4 KiB
    assert (writes["requests"], writes["bytes"]) == (51, 200 * 1024 + 50 * 4096)
    # the block writes of the file: its data, and the journal blocks its syncs waited for
    owned = results["io_span"].join(results["span_owner"].select("rep", "span_id", "path"), on=["rep", "span_id"],
                                    suffix="_owner").filter(pl.col("path_owner").str.ends_with(FILE)
                                                            & (pl.col("layer") == "block") & (pl.col("op") == "write"))
    journal = int(owned.filter(pl.col("region") == "journal")["size_bytes"].sum())
    assert journal > 0
    assert one("block", "write")["bytes"] == 200 * 1024 + 50 * 4096 + journal
    # time: the calls' own durations, summed
    calls = results["io_span"].join(results["span_owner"].select("rep", "span_id", "path"), on=["rep", "span_id"],
                                    suffix="_owner").filter(
        (pl.col("layer") == "syscall") & (pl.col("name") == "fdatasync")
        & pl.col("path_owner").str.ends_with(FILE))
    assert one("syscall", "fdatasync")["time_ns"] == int((calls["end_ts"] - calls["ts"]).sum())


def test_the_nest_lends_its_owner_to_every_span_and_background_keeps_its_task():
    """A call with a path, its FUSE request, the daemon's call, a block request the daemon submitted, its device
    time; and a writeback block request no call caused, whose file the layout named."""
    spans = pl.DataFrame([
        # span_id, parent_id, call_id, layer, name, tid, comm, path, size, op
        (0, None, 0, "syscall", "fdatasync", 100, "app-main", "/sdcard/a.db", 0, None),
        (1, 0, 0, "fuse", "FUSE_FSYNC", 100, "app-main", None, 0, None),
        (2, 1, 0, "fs", "fdatasync", 7, "daemon", None, 0, "fdatasync"),
        (3, 2, 0, "block", "write", 7, "daemon", "/data/media/0/a.db", 4096, "write"),
        (4, 3, 0, "device", "write", 7, "daemon", None, 4096, "write"),
        (5, None, None, "block", "write", 55, "kworker/u8:1", "/data/media/0/b.jpg", 8192, "write"),
    ], schema=["span_id", "parent_id", "call_id", "layer", "name", "tid", "comm", "path", "size_bytes", "op"],
        orient="row")
    io_span = IO_SPAN.validate(spans.with_columns(
        rep=pl.lit(0), ts=pl.col("span_id") * 10, end_ts=pl.col("span_id") * 10 + 5, is_primary=pl.lit(True),
        region=pl.lit("data"), dev_major=pl.lit(8), dev_minor=pl.lit(0), sector=pl.lit(0),
        fuse_unique=pl.lit(None), sync_mode=pl.lit("fdatasync"), file_type=pl.lit(None), source_row=pl.lit(0)))
    task = TASK.validate(pl.DataFrame({"rep": [0, 0], "tid": [100, 101], "pid": [100, 100],
                                       "thread": ["app-main", "RenderThread"], "process": ["com.example.app", None],
                                       "source": ["proc", "proc"]}))
    owner = SPAN_OWNER.validate(attribute_spans(io_span, task=task))
    got = {r["span_id"]: r for r in owner.iter_rows(named=True)}
    for sid in range(5):  # the whole nest: the app's thread and process, the app's name of the file
        assert (got[sid]["tid"], got[sid]["pid"], got[sid]["process"], got[sid]["path"]) == \
            (100, 100, "com.example.app", "/sdcard/a.db"), got[sid]
        assert got[sid]["path_from"] == "syscall" and got[sid]["file_type"] == "db"
    bg = got[5]  # background: the kworker, the file the layout named, scope kernel
    assert (bg["tid"], bg["thread"], bg["pid"], bg["process"], bg["path"], bg["path_from"], bg["scope"]) == \
        (55, "kworker/u8:1", None, "kworker/u8:1", "/data/media/0/b.jpg", "block", "kernel")
    by_file = sum_io_by_file(io_span, owner)
    block = by_file.filter((pl.col("layer") == "block") & (pl.col("tid") == 100)).row(0, named=True)
    assert (block["path"], block["requests"], block["bytes"], block["time_ns"]) == ("/sdcard/a.db", 1, 4096, 5)
    fuse = by_file.filter(pl.col("layer") == "fuse").row(0, named=True)
    assert fuse["op"] == "fsync"


def test_a_thread_known_only_by_its_android_fs_events_gets_its_process():
    io_span = IO_SPAN.validate(pl.DataFrame({
        "rep": [0], "span_id": [0], "parent_id": [None], "call_id": [None], "layer": ["block"], "name": ["read"],
        "ts": [0], "end_ts": [10], "tid": [4711], "comm": ["SQLiteThread"], "size_bytes": [4096],
        "is_primary": [True], "op": ["read"], "region": ["none"], "dev_major": [259], "dev_minor": [32],
        "sector": [0], "fuse_unique": [None], "path": [None], "sync_mode": ["sync"], "file_type": [None],
        "source_row": [0]}))
    fs = pl.DataFrame({"rep": [0], "ts": [0], "cpu": [0], "pid": [4711], "comm": ["SQLiteThread"], "op": ["read"],
                       "phase": ["start"], "path": ["/data/x.db"], "offset_bytes": [0], "size_bytes": [4096],
                       "cmdline": ["com.example.notes"], "task_pid": [4690], "i_size_bytes": [8192], "ino": [9]})
    row = attribute_spans(io_span, android_fs_event=fs).row(0, named=True)
    assert (row["pid"], row["process"], row["thread"], row["tid"]) == (4690, "com.example.notes", "SQLiteThread", 4711)
