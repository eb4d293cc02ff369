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

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

sys.path.insert(0, str(REPO / "tests" / "support"))

from mobiperf.collectors.parse.ftrace_text import parse_ftrace_text  # noqa: E402
from parser_fuzz_inputs import FIX, PARSERS, input_name, mutated, parse_or_parse_error  # noqa: E402


def fuzz(kind: str, examples: int, path: Path) -> dict:
    counts = {"inputs": 0, "parsed": 0, "parse_errors": 0}

    @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(mutated(kind))
    def one(data):
        counts["inputs"] += 1
        counts["parsed" if parse_or_parse_error(kind, path, data) else "parse_errors"] += 1

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
            c = fuzz(kind, args.examples, Path(d) / input_name(kind))
            total += c["inputs"]
            print(f"{kind:<14}{c['inputs']:>9}{c['parsed']:>9}{c['parse_errors']:>12}{c['seconds']:>9.0f}")
    print(f"total inputs {total}; any other exception would have stopped the run")
    print(f"truncated ftrace text keeps every complete line: {truncation_keeps_complete_lines()}")


if __name__ == "__main__":
    main()
