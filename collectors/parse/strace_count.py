"""`strace -c -U calls,name` -> the strace_count table: how many times the workload made each system call.

strace -c prints its table on stderr when the traced command ends, after whatever the command itself wrote there:

      calls    errors syscall
    --------- --------- ----------------
          412           pwrite64
           12         3 openat
    --------- --------- ----------------
          624         3 total

The errors column is optional (strace prints it when asked for, or by default in some versions); the total row is
not a system call. A repetition's stderr.txt without such a table gives no rows.
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from mobiperf.core.schema import STRACE_COUNT

_HEADER = re.compile(r"^\s*calls\s+(errors\s+)?syscall\s*$")
_ROW = re.compile(r"^\s*(\d+)\s+(?:(\d+)\s+)?([a-z_0-9]+)\s*$")


def parse_strace_counts(text: str) -> dict[str, float]:
    """{syscall: calls} from the `strace -c -U calls,name` table (errors column optional); {} if absent."""
    out: dict[str, float] = {}
    in_table = False
    for line in text.splitlines():
        if _HEADER.match(line):
            in_table = True
            continue
        if not in_table or line.startswith("-"):
            continue
        m = _ROW.match(line)
        if m and m.group(3) != "total":
            out[m.group(3)] = out.get(m.group(3), 0.0) + float(m.group(1))
    return out


def strace_count_table(stderr: Path, rep: int) -> pl.DataFrame:
    """strace_count rows of one repetition's stderr (empty without a `strace -c` table)."""
    try:
        text = stderr.read_text(errors="replace")
    except OSError:
        text = ""
    counts = parse_strace_counts(text)
    return STRACE_COUNT.validate(pl.DataFrame({
        "rep": [rep] * len(counts), "syscall": list(counts), "calls": [int(v) for v in counts.values()]},
        schema={"rep": pl.Int32, "syscall": pl.Utf8, "calls": pl.Int64}))
