"""A phone's own trace gets the layer model: android_fs (file) ⊃ block ⊃ device per thread (analyzers/file_nest.py),
every request owned by the thread that read or wrote the file (span_owner), summed by process, thread and file
(io_by_file), with a waterfall and a layer breakdown of the layers the trace has.

tests/fixtures/android/k4.14-android-fs.txt (README there): an atrace capture's layout (tgid column) of a 16 KiB
read of notes.db by SQLiteThread (4711 of com.example.notes, 4690), three 4 KiB writes of notes.db-wal by the same
thread, a 128 KiB read of a camera JPEG by MediaScannerSe (2134 of android.process.media, 2120), a 64 KiB read of
libhwui.so by RenderThread (4712 of 4690), each read missing the page cache into one block read issued by the
reading thread, and a 4 KiB write by a kworker to a file the kernel could not name. The expected rows below are
counted by hand from the file's lines (times: end event - start event; block: complete - issue).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from mobiperf.commands.ingest import ingest

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "android"
NOTES = "/data/data/com.example.notes/databases/notes.db"
JPEG = "/storage/emulated/0/DCIM/Camera/IMG_20190412_101500.jpg"
LIB = "/system/lib64/libhwui.so"

# (process, pid, thread, tid, path, layer, op) -> (requests, bytes, time_ns)
EXPECTED = {
    ("com.example.notes", 4690, "SQLiteThread", 4711, NOTES, "file", "read"): (1, 16384, 550_000),
    ("com.example.notes", 4690, "SQLiteThread", 4711, NOTES, "block", "read"): (1, 16384, 470_000),
    ("com.example.notes", 4690, "SQLiteThread", 4711, NOTES, "device", "read"): (1, 16384, 470_000),
    ("com.example.notes", 4690, "SQLiteThread", 4711, NOTES + "-wal", "file", "write"): (3, 12288, 35_000),
    ("android.process.media", 2120, "MediaScannerSe", 2134, JPEG, "file", "read"): (1, 131072, 1_960_000),
    ("android.process.media", 2120, "MediaScannerSe", 2134, JPEG, "block", "read"): (1, 131072, 1_889_000),
    ("android.process.media", 2120, "MediaScannerSe", 2134, JPEG, "device", "read"): (1, 131072, 1_889_000),
    ("com.example.notes", 4690, "RenderThread", 4712, LIB, "file", "read"): (1, 65536, 830_000),
    ("com.example.notes", 4690, "RenderThread", 4712, LIB, "block", "read"): (1, 65536, 780_000),
    ("com.example.notes", 4690, "RenderThread", 4712, LIB, "device", "read"): (1, 65536, 780_000),
    ("kworker/u16:3", 91, "kworker", 91, None, "file", "write"): (1, 4096, 0),
}


@pytest.fixture(scope="module")
def phone(tmp_path_factory):
    run = ingest([FIX / "k4.14-android-fs.txt"], tmp_path_factory.mktemp("phone") / "run", report=False)
    return run, {name: run.read_table(name) for name in ("io_by_file", "span_owner", "io_span", "waterfall",
                                                         "layer_breakdown", "block_io")}


def test_io_by_file_equals_the_hand_count(phone):
    _, r = phone
    got = {(x["process"], x["pid"], x["thread"], x["tid"], x["path"], x["layer"], x["op"]):
           (x["requests"], x["bytes"], x["time_ns"]) for x in r["io_by_file"].iter_rows(named=True)}
    assert got == EXPECTED


def test_every_block_request_of_the_trace_is_owned_by_its_file(phone):
    _, r = phone
    blocks = r["io_span"].filter(pl.col("layer") == "block").join(r["span_owner"], on=["rep", "span_id"],
                                                                  suffix="_owner")
    assert blocks.height == r["block_io"].height == 3
    assert blocks["path_owner"].is_not_null().all() and (blocks["path_from"] == "file").all()
    assert (blocks["tid"] == blocks["tid_owner"]).all()  # each issued by the thread that read the file


def test_the_waterfall_and_breakdown_hold_the_layers_the_trace_has(phone):
    run, r = phone
    wf = r["waterfall"]
    assert set(wf["root_layer"]) == {"file"} and wf.height == 7
    self_cols = [c for c in wf.columns if c.endswith("_self_ns")]
    assert wf.select((pl.sum_horizontal(self_cols) == pl.col("dur_ns")).all()).item()
    jpeg = wf.filter(pl.col("path") == JPEG).row(0, named=True)
    assert (jpeg["dur_ns"], jpeg["device_self_ns"], jpeg["file_self_ns"]) == (1_960_000, 1_889_000, 71_000)
    layers = set(r["layer_breakdown"]["layer"])
    assert layers == {"file", "block", "device"}, layers  # no syscall, FUSE, fs or journal events in this trace
    assert "io_span" in run.read_meta()["analysis"]["results"]
