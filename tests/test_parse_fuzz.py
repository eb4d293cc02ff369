"""Fuzzing every parser (a small count here; bench/fuzz_parsers.py runs >= 100k inputs): only ParseError escapes,
and a truncated file keeps every complete record."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mobiperf.collectors.parse.blktrace import parse_blktrace
from mobiperf.collectors.parse.ftrace_raw import parse_ftrace_raw
from mobiperf.collectors.parse.ftrace_text import parse_ftrace_text
from mobiperf.collectors.parse.strace import parse_strace
from mobiperf.errors import ParseError

FIX = Path(__file__).parent / "fixtures"
SEEDS = {
    "ftrace": [p.read_bytes()[:3000] for p in sorted((FIX / "ftrace").glob("*.txt"))],
    "strace": [(FIX / "strace" / "dd-fsync-threads.strace").read_bytes()],
    "blktrace": [(FIX / "blktrace" / "loop-dd-4k-direct.blkbin").read_bytes()[:2000]],
    "ftrace_raw": [(FIX / "ftrace" / "raw-6.18-dd12" / "ftrace_raw" / "cpu1").read_bytes()[:4096 * 3]],
}
RAW_FORMATS = FIX / "ftrace" / "raw-6.18-dd12" / "formats"
PARSERS = {"ftrace": lambda p: parse_ftrace_text(p), "strace": lambda p: parse_strace(p),
           "blktrace": lambda p: parse_blktrace([p]),
           "ftrace_raw": lambda p: parse_ftrace_raw(p.parent, RAW_FORMATS)}


def mutated(kind: str):
    """Real traces with bytes flipped, inserted, deleted and cut: close enough to real to reach deep code."""
    seed = st.sampled_from(SEEDS[kind])
    edits = st.lists(st.tuples(st.integers(0, 12000), st.sampled_from(["flip", "insert", "delete", "cut"]),
                               st.binary(min_size=1, max_size=12)), max_size=6)

    def apply(data_edits):
        data, edits_ = data_edits
        buf = bytearray(data)
        for pos, op, blob in edits_:
            pos = pos % (len(buf) + 1)
            if op == "flip" and buf:
                buf[pos % len(buf)] ^= blob[0] or 1
            elif op == "insert":
                buf[pos:pos] = blob
            elif op == "delete":
                del buf[pos:pos + len(blob)]
            else:
                del buf[pos:]
        return bytes(buf)

    return st.tuples(seed, edits).map(apply) | st.binary(max_size=300)


def check(kind: str, data: bytes) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / ("cpu0" if kind == "ftrace_raw" else "input")
        path.write_bytes(data)
        try:
            PARSERS[kind](path)
        except ParseError as e:
            assert str(path) in str(e)


@pytest.mark.parametrize("kind", sorted(PARSERS))
def test_only_parse_errors_escape(kind):
    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(mutated(kind))
    def run(data):
        check(kind, data)

    run()
