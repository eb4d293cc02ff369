"""ftrace text parser: kernel 3.x to 6.x and trace-cmd layouts, fast path against the regex oracle, other events."""

from __future__ import annotations

import functools

from pathlib import Path

import polars as pl
import pytest

from mobiperf.collectors.parse.ftrace_text import parse_ftrace_text, parse_ftrace_text_regex
from mobiperf.core.errors import ParseError

FIXTURES = Path(__file__).parents[1] / "fixtures" / "ftrace"
ALL = sorted(FIXTURES.glob("*.txt"))


@pytest.mark.parametrize("path", ALL, ids=[p.name for p in ALL])
def test_fast_path_equals_regex_oracle(path):
    fast, oracle = parse_ftrace_text(path, compiled=True), parse_ftrace_text_regex(path)
    assert (fast.lines, fast.other_events, fast.truncated_at, fast.lost_events, fast.span) == \
        (oracle.lines, oracle.other_events, oracle.truncated_at, oracle.lost_events, oracle.span)
    assert fast.block_event.equals(oracle.block_event)
    assert fast.trace_marker.equals(oracle.trace_marker)
    assert sorted(fast.events) == sorted(oracle.events)
    for name, table in fast.events.items():
        assert table.equals(oracle.events[name]), name
    assert fast.unparsed_by_event == oracle.unparsed_by_event == {}


def _row(df: pl.DataFrame, **where) -> dict:
    rows = df.filter(pl.all_horizontal(pl.col(k) == v for k, v in where.items())).to_dicts()
    assert len(rows) == 1, (where, rows)
    return rows[0]


def test_kernel_3_4_bytes_zero_and_errors():
    t = parse_ftrace_text(FIXTURES / "k3.4-mmc-fsync.txt")
    block = t.block_event
    assert len(block) == 12 and t.lines == 14
    insert = _row(block, event="block_rq_insert", sector=4202496)
    # 3.x prints bytes 0 for file system requests: the size comes from the sector count.
    assert (insert["size_bytes"], insert["nr_sector"], insert["rwbs"], insert["comm"]) == (4096, 8, "WS", "AsyncTask #1")
    failed = _row(block, event="block_rq_complete", sector=1056768)
    assert (failed["error"], failed["rwbs"], failed["size_bytes"]) == (-5, "WFS", 8192)
    assert _row(block, event="block_rq_issue", rwbs="DE")["size_bytes"] == 2048 * 512
    assert _row(block, event="block_unplug")["sector"] == -1
    fsync = t.events["fsync_event"]
    assert fsync.select("phase", "ino", "datasync", "ret").rows() == [("enter", 130562, 1, None),
                                                                      ("exit", 130562, None, 0)]


def test_kernel_4_14_split_requeue_flush_and_jbd2():
    t = parse_ftrace_text(FIXTURES / "k4.14-android-ufs.txt")
    b = t.block_event
    split = _row(b, event="block_split")
    assert (split["sector"], split["nr_sector"], split["size_bytes"]) == (7340032, 128, 65536)
    assert _row(b, event="block_rq_requeue")["size_bytes"] == 65536
    flush_done = _row(b, event="block_rq_complete", rwbs="FF")
    assert flush_done["sector"] == -1 and flush_done["size_bytes"] == 0  # (sector_t)-1: no sector
    assert _row(b, event="block_bio_queue", comm="Binder:1204_3")["size_bytes"] == 131072
    stats = t.events["jbd2_run_stats"].to_dicts()[0]
    assert (stats["tid"], stats["running_ms"], stats["logging_ms"], stats["handle_count"],
            stats["blocks_logged"]) == (88213, 12, 4, 37, 10)
    commit = t.events["jbd2_commit"]
    assert commit["phase"].to_list() == ["start", "flushing", "end"] and commit["head"].to_list()[-1] == 88212
    assert commit["comm"].to_list() == ["jbd2/sda13-8"] * 3  # comm with a dash and digits
    f2fs = t.events["fsync_event"].to_dicts()[0]
    assert (f2fs["fs"], f2fs["phase"], f2fs["dev_minor"], f2fs["ino"], f2fs["ret"]) == ("f2fs", "exit", 4, 5512, 0)


def test_kernel_5_10_tgid_syscalls_and_fuse():
    t = parse_ftrace_text(FIXTURES / "k5.10-tgid-syscalls.txt")
    assert _row(t.block_event, event="block_rq_insert")["pid"] == 5121
    sc = t.events["syscall_io"]
    pw = _row(sc, syscall="pwrite64", ts=3003_000200000)  # format-file style: `fd: 0x00000003, ...`
    assert (pw["fd"], pw["request_bytes"], pw["offset_bytes"], pw["ret"], pw["dur"]) == (3, 4096, 8192, 4096, 60_000)
    assert _row(sc, syscall="fsync", ts=3003_000300000)["dur"] == 2_000_000
    # The kernel's own text: `sys_pwrite64(fd: 3, ..., count: 2000, pos: 10000)` and `sys_pwrite64 -> 0x2000`.
    kpw = _row(sc, syscall="pwrite64", ts=3003_004000000)
    assert (kpw["fd"], kpw["request_bytes"], kpw["offset_bytes"], kpw["ret"], kpw["dur"]) == (
        3, 0x2000, 0x10000, 0x2000, 50_000)
    kfs = _row(sc, syscall="fsync", ts=3003_004100000)
    assert (kfs["ret"], kfs["errno"], kfs["dur"]) == (-5, "EIO", 1_000_000)
    bad = _row(sc, syscall="write")
    assert (bad["ret"], bad["errno"]) == (-9, "EBADF")
    unfinished = _row(sc, syscall="read")
    assert unfinished["dur"] is None and unfinished["request_bytes"] == 512
    fuse = t.events["fuse_event"]
    assert fuse.select("phase", "unique", "opcode_name", "len_bytes").rows() == [
        ("send", 1026, "FUSE_WRITE", 4176), ("end", 1026, None, 16), ("send", 1028, "FUSE_FSYNC", 64)]
    assert _row(fuse, phase="end")["comm"] == "FuseDaemon-7"


def test_trace_cmd_layout_ioprio_hex_and_nanoseconds():
    t = parse_ftrace_text(FIXTURES / "tracecmd-6.18-report.txt")
    b = t.block_event
    assert len(b) == 7 and t.unparsed_by_event == {}
    assert _row(b, event="block_rq_issue", sector=33928)["ts"] == 414_670_992_310  # 9-digit timestamps kept
    assert _row(b, event="block_rq_complete", dev_minor=0)["size_bytes"] == 4096
    wq = _row(b, sector=40960)
    assert (wq["comm"], wq["pid"], wq["size_bytes"]) == ("kworker/u4:2-events_unbound", 77, 524288)
    assert t.trace_marker["text"].to_list() == ["mobibench: timed window begin", "mobibench: timed_start"]
    # An instance's buffer: `name: ` before the comm column.
    inst = _row(b, event="block_rq_complete", dev_minor=1)
    assert (inst["comm"], inst["pid"], inst["cpu"], inst["ts"]) == ("ksoftirqd/1", 22, 1, 1967_018592000)
    assert _row(b, event="block_rq_issue", dev_minor=1)["comm"] == "dd"


def test_kernel_6_18_counts_match_the_trace():
    t = parse_ftrace_text(FIXTURES / "k6.18-dd-4k-direct-dsync.txt")
    counts = dict(t.block_event.group_by("event").len().iter_rows())
    text = (FIXTURES / "k6.18-dd-4k-direct-dsync.txt").read_text()
    assert sum(counts.values()) == 11360
    assert counts == {ev: text.count(f" {ev}: ") for ev in counts}
    assert set(t.block_event.filter(pl.col("event") == "block_rq_issue")["size_bytes"].to_list()) >= {4096}


def test_unknown_lines_are_counted_not_dropped(tmp_path):
    src = (FIXTURES / "k6.18-dd-512k-direct.txt").read_text().splitlines()
    src.insert(3, "              dd-10548   [000] .....   399.246100: block_rq_issue: garbage body")
    src.insert(5, "this line has no ftrace header at all")
    path = tmp_path / "t.txt"
    path.write_text("\n".join(src) + "\n")
    for compiled in (True, False):
        t = parse_ftrace_text(path, compiled=compiled)
        assert t.unparsed_by_event == {"block_rq_issue": 1, "(no header)": 1}
        assert len(t.block_event) == 733
        assert any("block_rq_issue" in w for w in t.warnings)


def test_lost_event_notes_are_counted(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("cpus=2\n              dd-1 [000]   1.000001: block_plug: [dd]\nCPU:1 [LOST 1234 EVENTS]\n"
                    "              dd-1 [000]   1.000002: block_unplug: [dd] 1\n")
    for parse in (functools.partial(parse_ftrace_text, compiled=True), parse_ftrace_text_regex):
        t = parse(path)
        assert t.lost_events == 1234 and len(t.block_event) == 2 and t.unparsed_by_event == {}


def test_truncated_file_keeps_complete_lines_and_warns(tmp_path):
    data = (FIXTURES / "k6.18-dd-512k-direct.txt").read_bytes()
    cut = data[:data.rindex(b"\n", 0, len(data) - 1) + 40]  # 40 bytes into the last line
    path = tmp_path / "cut.txt"
    path.write_bytes(cut)
    for compiled in (True, False):
        t = parse_ftrace_text(path, compiled=compiled)
        assert len(t.block_event) == 732 and t.truncated_at == len(cut) - 39  # where the cut line starts
        assert any("truncated" in w for w in t.warnings) and t.unparsed_by_event == {}


def test_not_ftrace_is_a_parse_error_naming_the_line(tmp_path):
    path = tmp_path / "x.txt"
    path.write_text("hello\nworld\n")
    for compiled in (True, False):
        with pytest.raises(ParseError) as err:
            parse_ftrace_text(path, compiled=compiled)
        assert str(err.value).startswith(f"{path}:1:")


def test_empty_file_gives_empty_tables(tmp_path):
    path = tmp_path / "empty.txt"
    path.write_text("# tracer: nop\n#\n")
    for compiled in (True, False):
        t = parse_ftrace_text(path, compiled=compiled)
        assert len(t.block_event) == 0 and t.lines == 0


SPLIT_CASES = ALL + ["unknown-lines", "truncated", "lost-notes"]


@pytest.mark.parametrize("how", ["threads", "chunks"])
@pytest.mark.parametrize("case", SPLIT_CASES, ids=[getattr(c, "name", c) for c in SPLIT_CASES])
def test_scan_in_line_ranges_on_threads_equals_one_scan(case, how, tmp_path, monkeypatch):
    """Big files are read in chunks of whole lines and each chunk is scanned in one line range per CPU: the
    joined tables must equal a single scan's."""
    import mobiperf.collectors.parse.ftrace_text as ftrace_text

    if isinstance(case, Path):
        path = case
    else:
        lines = (FIXTURES / "k5.10-tgid-syscalls.txt").read_text().splitlines()
        lines.insert(7, "this line has no ftrace header at all")
        lines.insert(9, "CPU:1 [LOST 12 EVENTS]")
        path = tmp_path / "t.txt"
        data = "\n".join(lines) + "\n"
        path.write_text(data[:-30] if case == "truncated" else data)
    whole = parse_ftrace_text(path, compiled=True)
    if how == "threads":
        monkeypatch.setattr(ftrace_text, "PARALLEL_MIN_BYTES", 1)
        monkeypatch.setattr(ftrace_text.os, "cpu_count", lambda: 7)  # more ranges than this machine has CPUs
    else:
        monkeypatch.setattr(ftrace_text, "CHUNK_BYTES", 333)  # lines cut by chunk ends, some longer than one
    split = parse_ftrace_text(path, compiled=True)
    assert split.block_event.equals(whole.block_event)
    assert split.trace_marker.equals(whole.trace_marker)
    assert sorted(split.events) == sorted(whole.events)
    for name, table in split.events.items():
        assert table.equals(whole.events[name]), name
    assert (split.lines, split.unparsed_by_event, split.other_events, split.truncated_at, split.lost_events,
            split.span) == (whole.lines, whole.unparsed_by_event, whole.other_events, whole.truncated_at,
                            whole.lost_events, whole.span)
    assert len(whole.block_event) + sum(map(len, whole.events.values())) > 0
