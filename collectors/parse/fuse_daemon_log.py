"""A bundled FUSE daemon's request log (raw/<layer>-requests.tsv) -> fuse_daemon_req: one row per request it read.

fusecore writes the log (reference-impl/fusecore/fc_reqlog.c, `-o requests=PATH`) when it unmounts: a header
(format version, daemon, the clocks when it started), one tab-separated line per request, the clocks when it wrote
the log and an end line with the record count. Each line holds what the kernel wrote into the request's header
(unique id, opcode, node id, length, and in.h.pid: the thread that made the request), a READ's or WRITE's size and
offset, the daemon thread that read the request from /dev/fuse and when, and the thread, time, error and length of
its reply (empty when it had none: FORGET and INTERRUPT never have one, any other was still being served).

Times are CLOCK_MONOTONIC, the trace clock of mobiperf's tracefs recorder. A trace on the boot clock (Perfetto's)
gets them moved by boot - mono as the log read them together (constant unless the device slept).

What is said, never silently dropped: a log without its end line was cut short (the daemon killed while writing
it, a copy interrupted): the lines before are kept and the warning says so; a partial last line is dropped and
counted; a log of another format version is refused with its first line.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import polars as pl

from mobiperf.collectors.parse.fuse_protocol import OPCODES
from mobiperf.core.schema import FUSE_DAEMON_REQ

FORMAT_LINE = "# mobiperf fuse requests 1"
COLUMNS = ("unique", "opcode", "nodeid", "len", "size", "offset", "pid", "tid", "read_ns", "reply_tid", "reply_ns",
           "error", "reply_len")
_CLOCKS = re.compile(r"^# clocks (start|end) mono_ns (\d+) boot_ns (\d+)$")
_END = re.compile(r"^# end (\d+) records (\d+) dropped$")
_DAEMON = re.compile(r"^# daemon (\S+) pid (\d+)$")


def parse_fuse_daemon_log(path: Path, rep: int, layer: str, *, clock: str = "mono",
                          connection: int | None = None) -> tuple[pl.DataFrame, dict, list[str]]:
    """(fuse_daemon_req rows, summary, warnings) of one request log; clock is the trace's (mono or boot)."""
    name = path.name
    text = path.read_text(errors="replace")
    lines = text.split("\n")
    cut_line = lines.pop() if lines else ""   # '' after the last newline; else a line cut in the middle
    if not lines or lines[0] != FORMAT_LINE:
        first = lines[0][:80] if lines else ""
        return FUSE_DAEMON_REQ.empty(), {"records": 0}, [
            f"{name}: not a fusecore request log of format 1 (first line {first!r}): not read"]
    head = {m.group(1): (int(m.group(2)), int(m.group(3))) for m in map(_CLOCKS.match, lines) if m}
    daemon = next((m for m in map(_DAEMON.match, lines[:3]) if m), None)
    end = next((m for m in map(_END.match, reversed(lines[-3:])) if m), None)
    body = [ln for ln in lines if ln and not ln.startswith("#")]
    header, records = (body[0], body[1:]) if body else ("", [])
    warnings = []
    whole = [r for r in records if r.count("\t") == len(COLUMNS) - 1]
    partial = len(records) - len(whole) + bool(cut_line and not cut_line.startswith("#"))
    if header.split("\t") != list(COLUMNS):
        return FUSE_DAEMON_REQ.empty(), {"records": 0}, [f"{name}: unknown columns {header[:120]!r}: not read"]
    if end is None:
        warnings.append(f"{name}: the daemon's request log was cut short (no end line): {len(whole)} requests "
                        f"kept{', a partial last line dropped' if partial else ''}; requests after them are "
                        "missing from the FUSE layer")
    elif partial:
        warnings.append(f"{name}: {partial} malformed lines dropped")
    if end is not None and int(end.group(2)):
        warnings.append(f"{name}: the daemon dropped {end.group(2)} requests (its log was full)")
    df = pl.read_csv(io.StringIO("\n".join([header, *whole])), separator="\t", infer_schema=False) \
        if whole else pl.DataFrame(schema={c: pl.Utf8 for c in COLUMNS})
    shift = 0
    if clock == "boot" and "start" in head:
        mono, boot = head["start"]
        shift = boot - mono
    num = {c: pl.col(c).cast(pl.Int64, strict=False) for c in COLUMNS}
    out = df.select(
        pl.lit(rep, pl.Int32).alias("rep"), pl.lit(layer).alias("layer"),
        pl.lit(int(daemon.group(2)) if daemon else None, pl.Int32).alias("daemon_pid"),
        pl.lit(connection, pl.Int64).alias("connection"),
        num["unique"].alias("unique"), num["opcode"].cast(pl.Int32).alias("opcode"),
        num["opcode"].replace_strict(OPCODES, default=None, return_dtype=pl.Utf8).alias("opcode_name"),
        num["nodeid"].alias("nodeid"), num["len"].alias("len_bytes"), num["size"].alias("size_bytes"),
        num["offset"].alias("offset_bytes"), num["pid"].cast(pl.Int32).alias("pid"),
        num["tid"].cast(pl.Int32).alias("tid"), (num["read_ns"] + shift).alias("read_ts"),
        num["reply_tid"].cast(pl.Int32).alias("reply_tid"), (num["reply_ns"] + shift).alias("reply_ts"),
        num["error"].cast(pl.Int32).alias("error"), num["reply_len"].alias("reply_len_bytes"))
    summary = {"records": out.height, "unanswered": int(out["reply_ts"].is_null().sum()),
               "complete": end is not None, "daemon": daemon.group(1) if daemon else None}
    return FUSE_DAEMON_REQ.validate(out.sort("read_ts", nulls_last=True)), summary, warnings
