"""systrace's process dump (`PROCESS DUMP`, Android 9-10: the `ps` listings it writes beside the trace) -> task rows.

The block holds `ps` output, each listing with its header line:
  processes   USER PID PPID VSZ RSS WCHAN PC S NAME [COMM]     (NAME: the command line's first word, the package)
  threads     USER PID TID CMD                                  (CMD: the thread's name)
A dump may hold several of each (systrace takes one at the start and one at the end). Each thread row says which
process (PID) the thread (TID) belongs to; each process row names the process. The rows are task rows of source
`ps` (analyzers/task_identity.py ranks them with a /proc snapshot: the kernel's own task lists).
Limits: a thread born and gone between the dumps is not in them; a line that fits neither layout is skipped.
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from mobiperf.core.schema import TASK

HEADER = "PROCESS DUMP"
_PROCESS_HEADER = re.compile(r"^USER\s+PID\s+PPID\s+VSZ\s+RSS\s+WCHAN\s+(?:PC|ADDR)\s+S\s+NAME\b")
_THREAD_HEADER = re.compile(r"^USER\s+PID\s+TID\s+CMD\b")


def parse_process_dump(path: Path, rep: int = 0) -> pl.DataFrame:
    """task rows (source ps) of a process dump: every thread with its process, every process with its name."""
    threads: dict[int, tuple[int, str]] = {}
    names: dict[int, str] = {}
    mode = None
    for line in Path(path).read_text(errors="replace").splitlines():
        if _PROCESS_HEADER.match(line):
            mode = "process"
            continue
        if _THREAD_HEADER.match(line):
            mode = "thread"
            continue
        cols = line.split()
        if mode == "process" and len(cols) >= 9 and cols[1].isdigit():
            names[int(cols[1])] = cols[8].removeprefix("[").removesuffix("]")  # ps brackets kernel threads
        elif mode == "thread" and len(cols) >= 3 and cols[1].isdigit() and cols[2].isdigit():
            threads[int(cols[2])] = (int(cols[1]), " ".join(cols[3:]))
    for pid in names:
        threads.setdefault(pid, (pid, ""))
    rows = [(rep, tid, pid, name or None, names.get(pid)) for tid, (pid, name) in sorted(threads.items())]
    df = pl.DataFrame(rows, schema=["rep", "tid", "pid", "thread", "process"], orient="row")
    return TASK.validate(df.with_columns(source=pl.lit("ps")))
