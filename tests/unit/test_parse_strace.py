"""strace parser: calls, unfinished/resumed pairs across threads, errors, `= ?`, running calls, truncation."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from mobiperf.collectors.parse.strace import parse_strace
from mobiperf.core.errors import ParseError

FIXTURE = Path(__file__).parents[1] / "fixtures" / "strace" / "dd-fsync-threads.strace"


def test_calls_with_paths_sizes_offsets_and_errors():
    t = parse_strace(FIXTURE)
    df = t.syscall_io
    assert t.summary == {"lines": 22, "calls": 17, "unparsed": 0, "unpaired": 1}
    assert set(df["source"]) == {"strace"}
    pw = df.filter(pl.col("syscall") == "pwrite64").row(0, named=True)
    assert (pw["fd"], pw["path"], pw["request_bytes"], pw["offset_bytes"], pw["ret"], pw["dur"]) == (
        1, "/work dir/f", 4096, 8192, 4096, 1_743_000)
    fsync = df.filter(pl.col("syscall") == "fsync").row(0, named=True)  # unfinished + resumed on another thread
    assert (fsync["pid"], fsync["fd"], fsync["ts"], fsync["dur"], fsync["ret"]) == (
        17431, 3, 1795338095_741900000, 6_565_000, 0)
    bad = df.filter((pl.col("syscall") == "write") & (pl.col("fd") == 9)).row(0, named=True)
    assert (bad["ret"], bad["errno"], bad["path"]) == (-1, "EBADF", "")
    falloc = df.filter(pl.col("syscall") == "fallocate").row(0, named=True)
    assert (falloc["offset_bytes"], falloc["request_bytes"]) == (0, 1048576)
    opened = df.filter(pl.col("syscall") == "openat")["path"].to_list()
    assert opened == ["/etc/ld.so.cache", "/work dir/f"]  # the returned fd's path, spaces included
    exits = df.filter(pl.col("syscall") == "exit_group")
    assert exits["ret"].null_count() == 2 and exits["dur"].null_count() == 2
    running = df.filter(pl.col("pid") == 17432).row(0, named=True)  # still in read() when strace stopped
    assert (running["syscall"], running["fd"], running["dur"]) == ("read", 5, None)
    assert df["ts"].is_sorted()


def test_truncated_log_keeps_complete_lines(tmp_path):
    data = FIXTURE.read_bytes()
    path = tmp_path / "cut.strace"
    path.write_bytes(data + b"17430 1795338096.000000 pwrite64(3</work dir/f>, \"\\0\\0")
    t = parse_strace(path)
    assert t.summary["calls"] == 17 and t.truncated_at == len(data)
    assert any("truncated" in w for w in t.warnings)


def test_not_strace_is_a_parse_error(tmp_path):
    path = tmp_path / "x.log"
    path.write_text("random words\nmore words\n")
    with pytest.raises(ParseError, match=r"x.log:1: not strace"):
        parse_strace(path)
