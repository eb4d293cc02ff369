"""Who is who on the target when tracing starts and when it stops: every thread with its process, every process's
command line, into raw/proc/ (parse/proc_snapshot.py makes task rows of them, source proc).

Two commands per snapshot, each one process on the target however many tasks it has:
  {when}-comm.txt      `grep -H '' /proc/[0-9]*/task/[0-9]*/comm`: `/proc/PID/task/TID/comm:NAME` per thread
  {when}-cmdline.bin   `head -c 512 /proc/[0-9]*/cmdline`: each process's command line (NUL-separated
                       arguments) after a `==> /proc/PID/cmdline <==` header (GNU and toybox head alike)
Threads born and gone between the two snapshots are named by task_newtask events instead (parse/sched.py). A
snapshot that fails (a process gone mid-read is normal: its lines are missing) is noted, never fatal.
"""

from __future__ import annotations

from pathlib import Path

from mobiperf.collectors.collector import Collector
from mobiperf.core.errors import TargetError
from mobiperf.target.transport import Transport

COMMANDS = {"comm.txt": "grep -H '' /proc/[0-9]*/task/[0-9]*/comm 2>/dev/null",
            "cmdline.bin": "head -c 512 /proc/[0-9]*/cmdline 2>/dev/null"}


class ProcSnapshotCollector(Collector):
    name = "proc"

    def __init__(self, transport: Transport, raw_dir: Path):
        self.transport = transport
        self.out_dir = Path(raw_dir) / "proc"
        self.notes: list[str] = []

    def take(self, when: str) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        for suffix, command in COMMANDS.items():
            try:
                done = self.transport.run(["sh", "-c", command], timeout=120)
            except TargetError as e:
                self.notes.append(f"{when} {suffix}: {e}")
                continue
            (self.out_dir / f"{when}-{suffix}").write_bytes(done.stdout)

    def start(self) -> None:
        self.take("start")

    def stop(self) -> dict:
        self.take("end")
        return {"snapshots": sorted(p.name for p in self.out_dir.iterdir()), "notes": self.notes}
