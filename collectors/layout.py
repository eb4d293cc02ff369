"""File system layout snapshot: where the journal, the metadata and the workload's files sit on the device.

Taken at stop(), after the workload and after tracing stopped (it is a snapshot collector: its own reads must not
be traced as the workload's), before the stack is torn down, into raw/layout/:
  dumpe2fs.txt       ext4: every group's superblock copy, descriptors, bitmaps and inode table (`dumpe2fs`)
  journal.txt        ext4: the journal inode's extents (`debugfs -R "stat <8>"`)
  xfs_sb.txt         xfs: superblock fields that place the internal log (`xfs_db -r -c "sb 0" -c print`)
  filefrag.txt       FIEMAP extents of every file left in the workload's directory (`filefrag -v -b512`),
                     read from the file system under any FUSE layer (FUSE has no FIEMAP)
  inodes.txt         `inode path` of every file and directory there (`find -printf`)
Files the workload created and deleted before the end are not in filefrag.txt; enable the ext4 event set to get
their block mappings from ext4_ext_map_blocks_exit events (fs_event table). A tool that is missing on the target
is skipped and named in the summary, never fatal: the layout is context, not the measurement.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from mobiperf.collectors.collector import Collector
from mobiperf.core.errors import TargetError
from mobiperf.target.transport import Transport


class LayoutCollector(Collector):
    name = "layout"
    snapshot = True

    def __init__(self, transport: Transport, device: str, filesystem: str, files_dir: str, out_dir: Path, *,
                 dev_major: int = -1, dev_minor: int = -1):
        self.transport = transport
        self.device = device
        self.dev = (dev_major, dev_minor)
        self.filesystem = filesystem
        self.files_dir = files_dir
        self.out_dir = Path(out_dir) / "layout"

    def stop(self) -> dict:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        taken, skipped = [], {}
        files = shlex.quote(self.files_dir)
        commands = {"filefrag.txt": ["sh", "-c", f"find {files} -xdev -type f -print0 | xargs -0 -r filefrag -v -b512"],
                    # inode -> path: the ext4/f2fs events name files by inode only
                    "inodes.txt": ["find", self.files_dir, "-xdev", "-printf", "%i %p\\n"]}
        if self.filesystem == "ext4":
            commands["dumpe2fs.txt"] = ["dumpe2fs", self.device]
            commands["journal.txt"] = ["debugfs", "-R", "stat <8>", self.device]
        elif self.filesystem == "xfs":
            commands["xfs_sb.txt"] = ["xfs_db", "-r", "-c", "sb 0", "-c", "print", self.device]
        tools = {"filefrag.txt": "filefrag", "inodes.txt": "find", "dumpe2fs.txt": "dumpe2fs", "journal.txt": "debugfs",
                 "xfs_sb.txt": "xfs_db"}
        for name, argv in commands.items():
            if not self.transport.which(tools[name]):
                skipped[name] = f"{tools[name]} is not installed on the target"
                continue
            try:
                done = self.transport.run(argv, timeout=120)
            except TargetError as e:
                skipped[name] = str(e)
                continue
            if done.returncode != 0 and not done.stdout:
                skipped[name] = done.stderr.decode(errors="replace").strip()[-200:]
                continue
            (self.out_dir / name).write_bytes(done.stdout)
            taken.append(name)
        (self.out_dir / "source.txt").write_text(f"device {self.device}\nfilesystem {self.filesystem}\n"
                                                 f"files_dir {self.files_dir}\ndev {self.dev[0]}:{self.dev[1]}\n")
        return {"files": taken, "skipped": skipped}
