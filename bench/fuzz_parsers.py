"""Fuzz every trace parser with hypothesis: only ParseError (naming the file and line/offset) may escape.

    python bench/fuzz_parsers.py [--examples 25000]      # per parser; 4 parsers -> >= 100k inputs by default

Inputs are real traces (the test fixtures) with bytes flipped, inserted, deleted and cut, plus random bytes.
Also checks that a cut file keeps every complete record (ftrace text: all lines before the cut line).
Prints, per parser: inputs, how many parsed, how many raised ParseError, and the time taken.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mobiperf.collectors.parse.blktrace import parse_blktrace
from mobiperf.collectors.parse.ftrace_raw import parse_ftrace_raw  # noqa: E402
from mobiperf.collectors.parse.ftrace_text import parse_ftrace_text  # noqa: E402
from mobiperf.collectors.parse.strace import parse_strace  # noqa: E402
from mobiperf.errors import ParseError  # noqa: E402

FIX = REPO / "tests" / "fixtures"
SEEDS = {
    "ftrace text": [p.read_bytes()[:4000] for p in sorted((FIX / "ftrace").glob("*.txt"))],
    "strace": [(FIX / "strace" / "dd-fsync-threads.strace").read_bytes()],
    "blktrace": [(FIX / "blktrace" / "loop-dd-4k-direct.blkbin").read_bytes()[:3000]],
    "ftrace raw": [(FIX / "ftrace" / "raw-6.18-dd12" / "ftrace_raw" / "cpu1").read_bytes()[:4096 * 3]],
}
RAW_FORMATS = FIX / "ftrace" / "raw-6.18-dd12" / "formats"
PARSERS = {"ftrace text": lambda p: parse_ftrace_text(p), "strace": lambda p: parse_strace(p),
           "blktrace": lambda p: parse_blktrace([p]),
           "ftrace raw": lambda p: parse_ftrace_raw(p.parent, RAW_FORMATS)}


def mutations(kind: str):
    edits = st.lists(st.tuples(st.integers(0, 12500), st.sampled_from(["flip", "insert", "delete", "cut"]),
                               st.binary(min_size=1, max_size=16)), max_size=8)

    def apply(args):
        data, todo = args
        buf = bytearray(data)
        for pos, op, blob in todo:
            pos %= len(buf) + 1
            if op == "flip" and buf:
                buf[pos % len(buf)] ^= blob[0] or 1
            elif op == "insert":
                buf[pos:pos] = blob
            elif op == "delete":
                del buf[pos:pos + len(blob)]
            else:
                del buf[pos:]
        return bytes(buf)

    return st.tuples(st.sampled_from(SEEDS[kind]), edits).map(apply) | st.binary(max_size=400)


def fuzz(kind: str, examples: int, path: Path) -> dict:
    counts = {"inputs": 0, "parsed": 0, "parse_errors": 0}

    @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(mutations(kind))
    def one(data):
        counts["inputs"] += 1
        path.write_bytes(data)
        try:
            PARSERS[kind](path)
            counts["parsed"] += 1
        except ParseError as e:
            assert str(path) in str(e), f"ParseError without the file name: {e}"
            counts["parse_errors"] += 1

    start = time.perf_counter()
    one()
    counts["seconds"] = time.perf_counter() - start
    return counts


def truncation_keeps_complete_lines() -> str:
    data = (FIX / "ftrace" / "k6.18-dd-4k-direct-dsync.txt").read_bytes()
    bad = 0
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "cut.txt"
        for cut in range(1000, len(data), len(data) // 200):
            path.write_bytes(data[:cut])
            complete = data[:cut].count(b"\n")
            if len(parse_ftrace_text(path).block_event) not in (complete, complete + 1):
                bad += 1
    return "ok" if not bad else f"{bad} cuts lost complete lines"


def main() -> None:
    ap = argparse.ArgumentParser(description="fuzz the trace parsers")
    ap.add_argument("--examples", type=int, default=25000, help="inputs per parser")
    ap.add_argument("--parsers", nargs="*", default=list(PARSERS), help=f"some of {list(PARSERS)}")
    args = ap.parse_args()
    total = 0
    with tempfile.TemporaryDirectory() as d:
        print(f"{'parser':<14}{'inputs':>9}{'parsed':>9}{'ParseError':>12}{'seconds':>9}")
        for kind in args.parsers:
            c = fuzz(kind, args.examples, Path(d) / ("cpu0" if kind == "ftrace raw" else "input"))
            total += c["inputs"]
            print(f"{kind:<14}{c['inputs']:>9}{c['parsed']:>9}{c['parse_errors']:>12}{c['seconds']:>9.0f}")
    print(f"total inputs {total}; any other exception would have stopped the run")
    print(f"truncated ftrace text keeps every complete line: {truncation_keeps_complete_lines()}")


if __name__ == "__main__":
    main()
