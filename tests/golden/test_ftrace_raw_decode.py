"""The binary pages decoded by their format files give the text parser's tables, row for row.

Oracle: one capture seen twice, the non-consuming text file `trace` read first and then every CPU's
trace_pipe_raw (tests/support/ftrace_raw_capture.py). The fixture is such a capture of this machine (6.18: block, ext4,
jbd2, writeback, fuse, write/fsync syscalls and raw_syscalls filtered to fsync, while dd wrote and fsynced a file
on a journaled ext4 and one on a bFUSE mount); with root the same comparison runs on a fresh capture in a tracefs
instance of the test's own.
"""

from __future__ import annotations

import shutil
import tarfile
from contextlib import nullcontext
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from ftrace_raw_capture import bfuse_mounted, capture_raw_and_text, journaled_ext4
from raw_decode_checks import FIXTURE, _text_ts, assert_same_durations, assert_same_rows
from mobiperf.collectors.parse import parse_raw_dir
from mobiperf.collectors.parse.raw_syscalls import raw_syscall_io
from mobiperf.collectors.parse.ftrace_raw import parse_ftrace_raw
from mobiperf.collectors.parse.ftrace_text import parse_ftrace_text
from conftest import needs_root

# What the binary can hold that the text cannot: the kernel's own symbol lookups and enum names it left unresolved
# in the format file, and print-time values (jiffies now). Any other unrendered reason is a decoder gap.
UNREPRODUCIBLE = ("pointer", "unresolved name")


@pytest.fixture(scope="module")
def capture(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("rawdec")
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(dest, filter="data")
    return dest / "raw-6.18-rawdec"


def assert_same_tables(raw_dir: Path) -> tuple:
    binary = parse_ftrace_raw(raw_dir / "ftrace_raw", raw_dir / "formats")
    text = parse_ftrace_text(raw_dir / "ftrace.txt")
    assert binary.undecoded == {} and binary.unparsed_by_event == {} and text.unparsed_by_event == {}
    assert binary.other_events == text.other_events
    assert len(text.block_event) and len(text.trace_marker)
    assert_frame_equal(_text_ts(binary.block_event), text.block_event)  # both in the kernel's merged order
    assert_frame_equal(_text_ts(binary.trace_marker), text.trace_marker)
    assert set(binary.events) == set(text.events)
    for name, want in text.events.items():
        got = _text_ts(binary.events[name])
        if name == "syscall_io":  # the text's durations are differences of rounded µs
            assert_same_durations(got, want)
            got, want = got.drop("dur"), want.drop("dur")
        if name == "fs_event":
            exact = ~pl.col("event").is_in(list(binary.unrendered))
            assert_frame_equal(got.filter(exact), want.filter(exact))
            got, want = got.drop("body"), want.drop("body")  # the rest of an unrendered row is still exact
        assert_same_rows(got, want)
    for event, why in binary.unrendered.items():
        assert any(w in why for w in UNREPRODUCIBLE) or "jiffies" in why, (event, why)
        assert event in binary.fields and len(binary.fields[event]) == text.other_events.get(event, len(
            text.events["fs_event"].filter(pl.col("event") == event)))
    return binary, text


def test_fixture_binary_tables_equal_the_text_tables(capture):
    binary, text = assert_same_tables(capture)
    # The capture holds every family the text parser tables.
    assert {"fsync_event", "jbd2_commit", "jbd2_run_stats", "fs_event", "syscall_io", "fuse_event"} <= set(
        binary.events)
    assert binary.trace_marker["text"].to_list() == ["rawdec start", "rawdec end"]
    ours = binary.events["fsync_event"].filter((pl.col("comm") == "dd") & (pl.col("phase") == "enter"))["pid"]
    assert len(ours) == 4  # the capture's four dd runs on ext4 (other dd runs of the machine may show up too)
    fuse_writes = binary.events["fuse_event"].filter(pl.col("opcode_name") == "FUSE_WRITE")
    assert len(fuse_writes) == 4 and set(fuse_writes["comm"]) == {"dd"} and (fuse_writes["len_bytes"] > 4096).all()
    calls = binary.events["syscall_io"].filter(pl.col("pid").is_in(ours.to_list()))
    # syscalls:sys_*_write/fsync; raw_syscalls (`NR %ld (%lx, ...)` from args[6]) are kept apart, for the ABI's
    # table to name (NR 74 = fsync on x86_64: collectors/parse/raw_syscalls.py)
    assert sorted(calls["syscall"]) == ["fsync"] * 4 + ["write"] * 4
    raw = binary.events["raw_syscall_event"].filter(pl.col("pid").is_in(ours.to_list()))
    assert raw.select("phase", "nr").unique().sort("phase").rows() == [("enter", 74), ("exit", 74)]
    assert raw.filter(pl.col("phase") == "enter")["arg0"].to_list() == [1] * 4   # fsync(1): dd's stdout
    named, _ = raw_syscall_io(raw, "x86_64", 0)
    assert named.select("syscall", "fd", "ret").unique().rows() == [("fsync", 1, 0)]
    writes = calls.filter(pl.col("syscall") == "write")
    assert set(writes["request_bytes"]) == {4096} and set(writes["ret"]) == {4096} and set(calls["fd"]) == {1}
    assert (binary.block_event["ts"] % 1000 != 0).any()  # exact ns where the text has µs


def test_parse_raw_dir_takes_every_table_from_the_pages(capture, tmp_path):
    text_only, raw_only = tmp_path / "text", tmp_path / "raw"
    text_only.mkdir()
    shutil.copy(capture / "ftrace.txt", text_only / "ftrace.txt")
    raw_only.mkdir()
    shutil.copytree(capture / "ftrace_raw", raw_only / "ftrace_raw")
    shutil.copytree(capture / "formats", raw_only / "formats")
    from_text, from_raw = parse_raw_dir(text_only, 3), parse_raw_dir(raw_only, 3)
    assert set(from_raw.tables) == set(from_text.tables)
    for name in ("block_event", "fsync_event", "jbd2_commit", "jbd2_run_stats"):
        assert_frame_equal(_text_ts(from_raw.tables[name]), from_text.tables[name])
    summary = from_raw.summary["ftrace_raw"]
    assert summary["undecoded"] == {} and summary["other_events"] == from_text.summary["ftrace"]["other_events"]
    assert summary["events"] == from_text.summary["ftrace"]["lines"]  # every record of the buffer, no more


def test_without_kernel_hz_run_stats_keep_their_jiffies(capture, tmp_path):
    raw = tmp_path / "ftrace_raw"
    shutil.copytree(capture / "ftrace_raw", raw)
    hz = int((raw / "kernel_hz").read_text())
    (raw / "kernel_hz").unlink()
    binary = parse_ftrace_raw(raw, capture / "formats")
    text = parse_ftrace_text(capture / "ftrace.txt").events["jbd2_run_stats"]
    assert "HZ" in binary.unrendered["jbd2_run_stats"]
    # Its bodies carry the jiffies in hex instead of ms: no row, and every record is said to be skipped.
    assert len(binary.events.get("jbd2_run_stats", [])) == 0 and binary.unparsed_by_event == {
        "jbd2_run_stats": len(text)}
    jiffies = binary.fields["jbd2_run_stats"]
    assert (jiffies["running"] * 1000 // hz).to_list() == text["running_ms"].to_list()
    assert jiffies["tid"].to_list() == text["tid"].to_list()


@needs_root
@pytest.mark.skipif(not Path("/sys/kernel/tracing/instances").is_dir(), reason="needs tracefs instances")
def test_live_capture_binary_tables_equal_the_text_tables(tmp_path, clean_machine, reference_binary):
    fuse_ok = Path("/dev/fuse").exists() and shutil.which("fusermount3") is not None
    with journaled_ext4(tmp_path) as fs, bfuse_mounted(tmp_path / "fuse", reference_binary("bfuse")) if fuse_ok \
            else nullcontext() as fuse:
        capture_raw_and_text(tmp_path / "cap", fs, fuse_dir=fuse)
    binary, _ = assert_same_tables(tmp_path / "cap")
    dd = binary.events["fsync_event"].filter(pl.col("comm") == "dd")
    assert set(dd["phase"]) == {"enter", "exit"} and set(dd["ret"].drop_nulls()) == {0}
    if fuse_ok:
        assert set(binary.events["fuse_event"].filter(pl.col("comm") == "dd")["opcode_name"]) >= {
            "FUSE_WRITE", "FUSE_FSYNC"}


@pytest.mark.slow
@needs_root
@pytest.mark.skipif(not Path("/sys/kernel/tracing/instances").is_dir(), reason="needs tracefs instances")
def test_big_live_capture_binary_tables_equal_the_text_tables(tmp_path, clean_machine, reference_binary):
    """64 MiB per CPU and 150 dd writes + fsyncs on ext4 and bFUSE, with the rest of the machine traced too
    (0.5 M events on a busy day here)."""
    fuse_ok = Path("/dev/fuse").exists() and shutil.which("fusermount3") is not None
    with journaled_ext4(tmp_path) as fs, bfuse_mounted(tmp_path / "fuse", reference_binary("bfuse")) if fuse_ok \
            else nullcontext() as fuse:
        capture_raw_and_text(tmp_path / "cap", fs, writes=150, buffer_kb=65536, fuse_dir=fuse)
    binary, text = assert_same_tables(tmp_path / "cap")
    assert binary.events_total == text.lines  # every record of the buffers, read both ways
    assert len(binary.events["jbd2_run_stats"].filter(pl.col("dev_major") == 7)) >= 150  # a commit per fsync


def test_lost_events_by_the_counts_the_kernel_stored(capture, tmp_path):
    import struct

    raw = tmp_path / "ftrace_raw"
    raw.mkdir()
    # Page 1: "missed events" with the count stored after its (empty) data (bit 30); page 2: flagged, no count.
    stored = struct.pack("<QQ", 5, (1 << 31) | (1 << 30)) + struct.pack("<Q", 1234)
    (raw / "cpu0").write_bytes(stored.ljust(4096, b"\0") + struct.pack("<QQ", 6, 1 << 31).ljust(4096, b"\0"))
    t = parse_ftrace_raw(raw, capture / "formats")
    assert (t.pages, t.pages_with_lost_events, t.lost_events, t.events_total) == (2, 2, 1235, 0)
    assert any("1235 events" in w for w in t.warnings)


@needs_root
@pytest.mark.skipif(not Path("/sys/kernel/tracing/instances").is_dir(), reason="needs tracefs instances")
def test_collector_binary_pages_give_the_fs_and_journal_tables(tmp_path, clean_machine):
    """The product path: FtraceCollector in raw-pages mode with the ext4 and jbd2 sets of a journaled ext4 of the
    test's own, parse_raw_dir on what it saved (formats, pages, saved_cmdlines, kernel_hz)."""
    import os
    import subprocess

    from mobiperf.collectors.ftrace import FtraceCollector, block_event_specs, event_set_specs
    from mobiperf.target.transport import LocalTransport

    events_dir = Path("/sys/kernel/tracing/events")
    available = {s: os.listdir(events_dir / s) for s in ("ext4", "jbd2")}
    out = tmp_path / "raw"
    with journaled_ext4(tmp_path) as fs:
        major, minor = (int(x) for x in subprocess.run(
            ["findmnt", "-no", "MAJ:MIN", str(fs)], capture_output=True, text=True, check=True,
            timeout=30).stdout.strip().split(":"))
        specs = block_event_specs([(major, minor)])
        for name in ("ext4", "jbd2"):
            specs += event_set_specs(name, available, [(major, minor)])[0]
        name = f"mobiperf-rawdec-col-{os.getpid()}"
        with FtraceCollector(LocalTransport(), "/sys/kernel/tracing", specs, out, name=name,
                             raw_pages=True) as collector:
            collector.start()
            for i in range(3):
                subprocess.run(["dd", "if=/dev/zero", f"of={fs / 'f'}", "bs=4k", "count=1", f"seek={i}",
                                "conv=notrunc,fsync", "status=none"], check=True, timeout=30)
            collector.stop()
        assert not Path(f"/sys/kernel/tracing/instances/{name}").exists()
    parsed = parse_raw_dir(out, 0)
    assert parsed.summary["ftrace_raw"]["undecoded"] == {} and parsed.summary["ftrace_raw"]["unparsed"] == {}
    fsync = parsed.tables["fsync_event"].filter(pl.col("comm") == "dd")
    assert len(fsync) == 6 and set(fsync["dev_minor"]) == {minor} and set(fsync["ret"].drop_nulls()) == {0}
    stats = parsed.tables["jbd2_run_stats"]
    assert len(stats) >= 3 and (stats["dev_minor"] == minor).all() and (stats["blocks_logged"] > 0).all()
    commits = parsed.tables["jbd2_commit"]
    assert {"start", "end"} <= set(commits["phase"]) and set(stats["tid"]) <= set(commits["tid"])


def test_a_format_file_not_matching_the_kernel_skips_its_event_and_says_why(capture, tmp_path):
    """An edited or damaged format file (here the marker's text declared an int array, found by fuzzing): its
    records are counted as skipped, with the reason and their raw fields; every other table is still decoded."""
    formats = tmp_path / "formats"
    shutil.copytree(capture / "formats", formats)
    path = formats / "ftrace" / "print" / "format"
    path.write_text(path.read_text().replace("char buf[];", "int buf[4];"))
    whole = parse_ftrace_raw(capture / "ftrace_raw", capture / "formats")
    damaged = parse_ftrace_raw(capture / "ftrace_raw", formats)
    assert damaged.unparsed_by_event == {"print": len(whole.trace_marker)} and len(damaged.trace_marker) == 0
    assert "buf" in damaged.unrendered["print"] and len(damaged.fields["print"]) == len(whole.trace_marker)
    assert any("print" in w for w in damaged.warnings)
    assert_frame_equal(damaged.block_event, whole.block_event)
    for name, table in whole.events.items():
        assert_frame_equal(damaged.events[name], table)
