"""The /proc snapshots of a recording (collectors/proc_snapshot.py) -> task rows, source proc.

{when}-comm.txt lines `/proc/PID/task/TID/comm:NAME` give each thread (TID) its process (PID) and name;
{when}-cmdline.bin gives each process its command line, whose first argument names it (an Android app's process
is its package: zygote writes it there). The end snapshot's names win over the start's (a thread renamed between
them is named as it ended).
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from mobiperf.core.schema import TASK

COMM_LINE = re.compile(r"^/proc/(\d+)/task/(\d+)/comm:(.*)$")
CMDLINE_HEADER = re.compile(rb"(?:^|\n)==> /proc/(\d+)/cmdline <==\n")


def parse_proc_snapshots(proc_dir: Path, rep: int = 0) -> pl.DataFrame | None:
    """task rows of every snapshot in proc_dir (None when there is none)."""
    threads: dict[int, tuple[int, str]] = {}
    names: dict[int, str] = {}
    for when in ("start", "end"):
        comm = proc_dir / f"{when}-comm.txt"
        if comm.exists():
            for line in comm.read_text(errors="replace").splitlines():
                m = COMM_LINE.match(line)
                if m:
                    threads[int(m.group(2))] = (int(m.group(1)), m.group(3))
        cmdline = proc_dir / f"{when}-cmdline.bin"
        if cmdline.exists():
            names.update(_command_names(cmdline.read_bytes()))
    if not threads and not names:
        return None
    for pid in names:
        threads.setdefault(pid, (pid, ""))
    rows = [(rep, tid, pid, name or None, names.get(pid)) for tid, (pid, name) in sorted(threads.items())]
    df = pl.DataFrame(rows, schema=["rep", "tid", "pid", "thread", "process"], orient="row")
    return TASK.validate(df.with_columns(source=pl.lit("proc")))


def _command_names(data: bytes) -> dict[int, str]:
    """{pid: the first argument of its command line} (kernel threads have none)."""
    parts = CMDLINE_HEADER.split(data)
    out = {}
    for pid, body in zip(parts[1::2], parts[2::2]):
        first = body.split(b"\0", 1)[0].strip()
        if first:
            out[int(pid)] = first.decode(errors="replace")
    return out
