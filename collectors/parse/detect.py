"""What a plain trace file is, from its content (never from its name).

  blktrace    blk_io_trace records: the magic 0x654174xx in either byte order (per-CPU files, blkparse -d, the
              kernel's blk tracer)
  trace-cmd   a .dat: `\\x17\\x08Dtracing`
  ftrace      ftrace text (`trace`, `trace_pipe`, `trace-cmd report`, atrace and systrace payloads)
  strace      strace output, with or without -f, -t/-tt/-ttt, -T
  blkparse    blkparse's default text output (`  8,0    3        1     0.000000000  4162  Q   R 1234 + 8 [fio]`)
  unknown     none of these
The text kinds are voted on the first lines that are neither blank nor comments: the kind most of them match,
if at least half do (a few stray lines, e.g. atrace's `capturing trace...`, do not decide).
"""

from __future__ import annotations

import re

TRACE_CMD_MAGIC = b"\x17\x08\x44tracing"
FTRACE_LINE = re.compile(r"^\s*(?:\S+:\s+)?.*-\d+\s+(?:\(\s*[-\d]+\)\s+)?\[\d+\]\s+(?:\S{1,8}\s+)?\d+\.\d+:\s+\w+")
TRACE_CMD_PREAMBLE = re.compile(r"^(?:cpus=\d+|version = \d+|CPU \d+ is empty|CPU:\s*\d+ \[)")
STRACE_LINE = re.compile(r"^(?:\[pid\s+\d+\]\s+|\d+\s+)?(?:\d+\.\d+\s+|\d\d:\d\d:\d\d(?:\.\d+)?\s+)?"
                         r"(?:[a-z_]\w*\(|<\.\.\. \w+ resumed>|\+\+\+ |--- )")
BLKPARSE_LINE = re.compile(r"^\s*\d+,\d+\s+\d+\s+\d+\s+\d+\.\d+\s+\d+\s+[A-Z]{1,2}\s+[A-Z]+\b")
VOTE_LINES = 40


def is_blktrace_magic(head: bytes) -> bool:
    return len(head) >= 4 and (int.from_bytes(head[:4], "little") & 0xFFFFFF00 == 0x65617400
                               or int.from_bytes(head[:4], "big") & 0xFFFFFF00 == 0x65617400)


def sniff_plain(head: bytes) -> str:
    """The kind of a plain (uncompressed) trace from its first bytes."""
    if is_blktrace_magic(head):
        return "blktrace"
    if head.startswith(TRACE_CMD_MAGIC):
        return "trace-cmd"
    if not head or b"\x00" in head[:1024]:
        return "unknown"
    if head.lstrip().startswith(b"PROCESS DUMP"):  # systrace's `ps` listings (parse/process_dump.py)
        return "process-dump"
    text = head.decode("utf-8", errors="replace")
    lines = text.split("\n")
    if len(head) >= 4096:
        lines = lines[:-1]  # the last one may be cut
    lines = [ln for ln in lines if ln.strip() and not ln.lstrip().startswith("#")][:VOTE_LINES]
    if not lines:
        return "unknown"
    votes = {"ftrace": sum(bool(FTRACE_LINE.match(ln) or TRACE_CMD_PREAMBLE.match(ln)) for ln in lines),
             "strace": sum(bool(STRACE_LINE.match(ln)) for ln in lines),
             "blkparse": sum(bool(BLKPARSE_LINE.match(ln)) for ln in lines)}
    kind, n = max(votes.items(), key=lambda kv: kv[1])
    return kind if n and 2 * n >= len(lines) else "unknown"


def describe_head(head: bytes) -> str:
    """A short, printable description of a file's start for error messages: its first text line, or `binary
    data (1f 8b 08 00 ...)` when it is not text (never raw bytes in a message)."""
    sample = head[:256]
    if not sample:
        return "an empty file"
    printable = sum(32 <= c < 127 or c in (9, 10, 13) for c in sample)
    if printable < 0.9 * len(sample):
        return f"binary data ({sample[:8].hex(' ')} ...)"
    first = next((ln.strip() for ln in sample.decode("ascii", errors="replace").splitlines() if ln.strip()), "")
    return f"first line {first[:80]!r}"
