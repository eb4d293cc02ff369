"""A Perfetto trace of a real capture gives the tables of the capture's own text, row for row.

Oracle: tests/fixtures/ftrace/raw-6.18-rawdec.tar.gz, one capture seen twice (the text `trace` file and the binary
per-CPU pages, tests/support/ftrace_raw_capture.py: block, ext4, jbd2, writeback, fuse, write/fsync syscalls and
raw_syscalls while dd wrote and fsynced a file on ext4 and on bFUSE). tests/support/perfetto_capture.py writes the pages
as a Perfetto trace with the perfetto package's protos (typed events as typed messages, the others as generic
events in both of perfetto's encodings); the reader must give the text's tables.
"""

from __future__ import annotations

import gzip
import tarfile
import zipfile
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from perfetto_capture import to_perfetto
from mobiperf.collectors.parse.ftrace_raw import parse_ftrace_raw
from mobiperf.collectors.parse.ftrace_text import parse_ftrace_text
from mobiperf.collectors.parse.perfetto_trace import parse_perfetto
from raw_decode_checks import FIXTURE, _text_ts, assert_same_durations, assert_same_rows

FS_TABLES = {"fsync_event", "jbd2_commit", "jbd2_run_stats", "fuse_event", "fs_event", "syscall_io", "raw_syscall_event"}


@pytest.fixture(scope="module")
def capture(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("pf-rawdec")
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(dest, filter="data")
    return dest / "raw-6.18-rawdec"


@pytest.fixture(scope="module", params=["descriptor", "list"])
def trace(request, capture, tmp_path_factory) -> Path:
    """The capture as a .pftrace: generic events self-described (perfetto v53+) or as name/value lists."""
    path = tmp_path_factory.mktemp("pf") / f"rawdec-{request.param}.pftrace"
    path.write_bytes(to_perfetto(capture, request.param))
    return path


@pytest.fixture(scope="module")
def text(capture):
    return parse_ftrace_text(capture / "ftrace.txt")


def _hz(capture: Path) -> int:
    return int((capture / "ftrace_raw" / "kernel_hz").read_text())


def test_tables_equal_the_text_of_the_same_capture(trace, capture, text):
    got = parse_perfetto(trace, formats=capture / "formats", hz=_hz(capture))
    assert got.damage is None and got.undecoded == {} and got.unparsed_by_event == {}
    assert_frame_equal(_text_ts(got.block_event), text.block_event)
    assert_frame_equal(_text_ts(got.trace_marker), text.trace_marker)
    assert got.trace_marker["text"].to_list() == ["rawdec start", "rawdec end"]
    assert set(got.events) - {"generic_event", "task"} == set(text.events) == FS_TABLES
    # the Perfetto trace also says who is whose thread (process_tree packets): the text has no such packets
    assert set(got.events["task"]["source"]) <= {"perfetto", "task_newtask"}
    for name, want in text.events.items():
        mine = _text_ts(got.events[name])
        if name == "syscall_io":
            assert_same_durations(mine, want)
            mine, want = mine.drop("dur"), want.drop("dur")
        if name == "fs_event":  # as the binary decoder: %pS pointers and unresolved enums are printed raw
            exact = ~pl.col("event").is_in(list(got.unrendered))
            assert_frame_equal(mine.filter(exact), want.filter(exact))
            mine, want = mine.drop("body"), want.drop("body")
        assert_same_rows(mine, want)
    # Events that no table reads: typed ones counted as the text counts them, the protos' generic ones kept.
    generic = dict(got.events["generic_event"].group_by("event").len().iter_rows())
    assert {**got.other_events, **generic} == text.other_events
    assert set(generic) == {"track_foreign_dirty", "sb_mark_inode_writeback", "folio_wait_writeback",
                            "sb_clear_inode_writeback"}
    assert got.events_total == text.lines


def test_exact_nanoseconds_as_the_binary_pages(trace, capture):
    got = parse_perfetto(trace, formats=capture / "formats", hz=_hz(capture))
    binary = parse_ftrace_raw(capture / "ftrace_raw", capture / "formats")
    assert_frame_equal(got.block_event, binary.block_event)
    assert_frame_equal(got.events["fsync_event"], binary.events["fsync_event"])
    assert (got.block_event["ts"] % 1000 != 0).any()


def test_without_the_kernels_formats_the_tables_are_still_the_texts(trace, capture, text):
    """A phone's trace comes alone: the built-in formats give the fsync, journal, FUSE and syscall tables; other
    fs events keep their device and inode (their body is name=value fields where no format is known)."""
    got = parse_perfetto(trace, hz=_hz(capture))
    for name in ("fsync_event", "jbd2_commit", "jbd2_run_stats", "fuse_event"):
        assert_same_rows(_text_ts(got.events[name]), text.events[name])
    mine, want = _text_ts(got.events["syscall_io"]), text.events["syscall_io"]
    assert_same_durations(mine, want)
    assert_same_rows(mine.drop("dur"), want.drop("dur"))
    mine, want = _text_ts(got.events["fs_event"]), text.events["fs_event"]
    assert_same_rows(mine.drop("body", "ino"), want.drop("body", "ino"))
    # The text's ino regex misses `inode 12` (ext4_mballoc_*); the field gives it. Elsewhere the same.
    key = ["ts", "event", "cpu", "pid", "dev_minor"]
    pair = mine.sort(key).select(*key, "ino").hstack(want.sort(key).select(pl.col("ino").alias("text_ino"),
                                                                           pl.col("body").alias("text_body")))
    differ = pair.filter(pl.col("ino") != pl.col("text_ino"))
    assert (differ["text_ino"] == -1).all() and set(differ["event"]) <= {"ext4_mballoc_alloc", "ext4_mballoc_prealloc"}
    assert all(f"inode {i} " in b for i, b in zip(differ["ino"], differ["text_body"]))
    pairs = got.events["fs_event"].filter(pl.col("event") == "ext4_writepages")["body"]
    assert len(pairs) and pairs.str.contains(r"^dev \d+,\d+ ino=\d+ nr_to_write=").all()


def test_without_hz_run_stats_are_not_guessed(trace, capture, text):
    got = parse_perfetto(trace)
    assert "HZ" in got.unrendered["jbd2_run_stats"]
    assert len(got.events.get("jbd2_run_stats", [])) == 0
    assert got.unparsed_by_event == {"jbd2_run_stats": len(text.events["jbd2_run_stats"])}
    assert any("jbd2_run_stats" in w and "skipped" in w for w in got.warnings)


def test_gzip_and_bugreport_zip_hold_the_same_trace(trace, tmp_path, capture):
    plain = parse_perfetto(trace, formats=capture / "formats")
    gz = tmp_path / "t.pftrace.gz"
    gz.write_bytes(gzip.compress(trace.read_bytes()))
    bugreport = tmp_path / "bugreport-x.zip"
    with zipfile.ZipFile(bugreport, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("bugreport-x.txt", "== dumpstate ==\n" * 100)
        z.writestr("FS/data/misc/perfetto-traces/bugreport/systrace.pftrace", trace.read_bytes())
    for other in (gz, bugreport):
        got = parse_perfetto(other, formats=capture / "formats")
        assert_frame_equal(got.block_event, plain.block_event)
        assert_frame_equal(got.events["syscall_io"], plain.events["syscall_io"])


def test_chunks_of_any_size_give_the_same_tables(trace, capture):
    """The reader goes through a trace a chunk of packets at a time: one packet per chunk changes nothing."""
    whole = parse_perfetto(trace, formats=capture / "formats", hz=_hz(capture))
    small = parse_perfetto(trace, formats=capture / "formats", hz=_hz(capture), chunk_bytes=1)
    assert small.packets == whole.packets > 10 and small.events_total == whole.events_total
    assert_frame_equal(small.block_event, whole.block_event)
    assert_frame_equal(small.trace_marker, whole.trace_marker)
    assert set(small.events) == set(whole.events)
    for name, df in whole.events.items():
        assert_frame_equal(small.events[name], df)
    assert small.other_events == whole.other_events and small.summary == whole.summary
