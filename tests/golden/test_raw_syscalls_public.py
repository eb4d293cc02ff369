"""raw_syscalls from a phone that is not ours, decoded by its ABI (collectors/parse/raw_syscalls.py): an arm64
Android trace (adbd and sh, `cat /d/tracing/trace` with raw_syscalls enabled) published in a kernel tracing write-up
(tests/fixtures/README.md: pwl999/Doc, ftrace_syscall_event.md; not redistributable, so read where a copy was
placed in tests/fixtures/unlicensed/). What is checked holds without mobiperf: the numbers are arm64's (asm-generic:
63 read, 24 dup3, 57 close, 135 rt_sigprocmask, 72 pselect6, 73 ppoll), and adbd's second read continues where
its first stopped: 3 bytes read into buf, then buf + 3 asked for 0x1000 - 3 bytes."""

from __future__ import annotations

import hashlib
from pathlib import Path

import polars as pl
import pytest

from mobiperf.collectors.parse.ftrace_text import parse_ftrace_text_regex
from mobiperf.collectors.parse.raw_syscalls import raw_syscall_io

DOC = Path(__file__).parents[1] / "fixtures" / "unlicensed" / "pwl999-Doc-ftrace_syscall_event.md"
DOC_SHA256 = "2b95367e208f273a0166ff393001e8c4a25223d36c2cd5685891a2033dcc2916"


@pytest.fixture(scope="module")
def calls(tmp_path_factory):
    if not DOC.exists():
        pytest.skip(f"{DOC.name} is not here: git show e53dce54dee1d1d61513432114cb612d0283cd4c:"
                    "ftrace_syscall_event.md of github.com/pwl999/Doc, into tests/fixtures/unlicensed/")
    data = DOC.read_bytes()
    assert hashlib.sha256(data).hexdigest() == DOC_SHA256
    text = data.decode()
    block = text[text.index("# entries-in-buffer/entries-written: 444/444"):]
    block = block[:block.index("```")]                    # the raw_syscalls capture, as the kernel printed it
    trace = tmp_path_factory.mktemp("pwl999") / "trace.txt"
    trace.write_text(block)
    parsed = parse_ftrace_text_regex(trace, 0)
    out, bad = raw_syscall_io(parsed.events["raw_syscall_event"], "arm64-v8a", 0)
    assert bad == {} and parsed.unparsed_by_event == {}
    return out


def test_every_call_is_named_by_arm64s_numbers(calls):
    by_task = calls.group_by("comm").agg(pl.col("syscall")).sort("comm")
    assert dict(by_task.iter_rows()) == {"adbd": ["read", "read"],
                                         "sh": ["dup3", "close", "rt_sigprocmask", "pselect6"]}


def test_arguments_and_returns_where_the_arm64_registers_carry_them(calls):
    sh = calls.filter(pl.col("comm") == "sh").select("syscall", "fd", "ret").rows()
    assert sh[:2] == [("dup3", 11, 1), ("close", 11, 0)]   # dup3(11, 1, 0) = 1, then close(11)
    assert sh[3] == ("pselect6", -1, None)   # pselect6(n, ...) names no fd; still waiting when the capture ended
    reads = calls.filter(pl.col("syscall") == "read").select("fd", "request_bytes", "ret", "errno").rows()
    assert reads == [(64, 4096, 3, ""), (64, 4096 - 3, -11, "EAGAIN")]
