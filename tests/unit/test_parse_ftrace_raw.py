"""Binary ftrace pages (trace_pipe_raw): a real capture, synthetic pages with every header type, damage."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import polars as pl
import pytest

from mobiperf.collectors.parse.ftrace_raw import parse_ftrace_raw
from mobiperf.core.errors import ParseError

RAW = Path(__file__).parents[1] / "fixtures" / "ftrace" / "raw-6.18-dd12"


def test_real_capture_decodes_block_events_with_ns_timestamps():
    t = parse_ftrace_raw(RAW / "ftrace_raw", RAW / "formats")
    b = t.block_event
    counts = dict(b.group_by("event").len().iter_rows())
    for ev in ("block_bio_queue", "block_getrq", "block_rq_issue", "block_rq_complete"):
        assert counts[ev] == 12, ev
    issues = b.filter(pl.col("event") == "block_rq_issue")
    assert set(issues["size_bytes"]) == {4096} and set(issues["rwbs"]) == {"WS"} and set(issues["comm"]) == {"dd"}
    assert issues["sector"].to_list() == list(range(0, 96, 8))
    assert (b["ts"] % 1000 != 0).any()  # exact nanoseconds, not the text's microseconds
    assert b["ts"].is_sorted() and t.pages_with_lost_events == 0 and t.warnings == []
    assert t.trace_marker["text"].to_list() == ["hello marker"]
    assert set(b.filter(pl.col("event") == "block_plug")["sector"]) == {-1}


def _fmt_dir(tmp_path: Path) -> Path:
    formats = tmp_path / "formats"
    shutil.copytree(RAW / "formats", formats)
    return formats


def _issue_payload(type_id: int, sector: int, nbytes: int) -> bytes:
    # block_rq_issue on 6.18: dev@8 sector@16 nr_sector@24 bytes@28 ioprio@32 rwbs[10]@34 comm[16]@44 cmd@60
    p = bytearray(64)
    struct.pack_into("<HBBi", p, 0, type_id, 0, 0, 4242)
    struct.pack_into("<I", p, 8, (7 << 20) | 5)
    struct.pack_into("<QII", p, 16, sector, nbytes // 512, nbytes)
    p[34:36] = b"WS"
    p[44:48] = b"fio\0"
    return bytes(p)


def test_synthetic_page_with_extend_padding_and_long_events(tmp_path):
    formats = _fmt_dir(tmp_path)
    issue_id = int((formats / "block" / "block_rq_issue" / "format").read_text().split("ID:")[1].split()[0])
    payload = _issue_payload(issue_id, 2048, 8192)
    events = b""
    events += struct.pack("<I", (100 << 5) | (len(payload) // 4))  # small event: type_len = words
    events += payload
    events += struct.pack("<II", (5 << 5) | 30, 2)  # time extend: + (2 << 27) + 5
    events += struct.pack("<II", (7 << 5) | 0, len(payload) + 4) + payload  # type_len 0: length word first
    events += struct.pack("<II", (3 << 5) | 29, 12) + b"\0" * 8  # a discarded event: 4 + 12 bytes, no delta
    events += struct.pack("<I", (1 << 5) | (len(payload) // 4)) + payload
    page = struct.pack("<QQ", 1_000_000, len(events)) + events
    page += b"\0" * (4096 - len(page))
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "cpu3").write_bytes(page + page[:100])  # and a cut second page
    t = parse_ftrace_raw(raw, formats)
    b = t.block_event
    assert b["ts"].to_list() == [1_000_100, 1_000_100 + (2 << 27) + 5 + 7, 1_000_100 + (2 << 27) + 5 + 7 + 1]
    assert set(b["cpu"]) == {3} and set(b["pid"]) == {4242} and set(b["comm"]) == {"fio"}
    assert set(b["dev_major"]) == {7} and set(b["dev_minor"]) == {5} and set(b["size_bytes"]) == {8192}
    assert any("truncated" in w for w in t.warnings)


def test_lost_event_pages_are_counted(tmp_path):
    formats = _fmt_dir(tmp_path)
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "cpu0").write_bytes(struct.pack("<QQ", 5, 1 << 31) + b"\0" * 4080)
    assert parse_ftrace_raw(raw, formats).pages_with_lost_events == 1


def test_pages_without_formats_are_a_parse_error(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "cpu0").write_bytes(b"\0" * 4096)
    with pytest.raises(ParseError, match="no event format files"):
        parse_ftrace_raw(raw, tmp_path / "formats")
