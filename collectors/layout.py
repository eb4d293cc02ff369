"""File system layout snapshot: where the journal, the metadata and the workload's files sit on the device.

Taken at stop(), after the workload and after tracing stopped (it is a snapshot collector: its own reads must not
be traced as the workload's), before the stack is torn down, into raw/layout/:
  dumpe2fs.txt       ext4: every group's superblock copy, descriptors, bitmaps and inode table (`dumpe2fs`)
  journal.txt        ext4: the journal inode's extents (`debugfs -R "stat <8>"`)
  xfs_sb.txt         xfs: superblock fields that place the internal log (`xfs_db -r -c "sb 0" -c print`)
  f2fs_sb.bin        f2fs: the device's first 4 KiB block (the superblock), read with dd; then
  f2fs_cp.bin        the first block of each checkpoint pack (the current segments of the six logs), and
  f2fs_ssa.bin[.gz]  the segment summary area's block of each main segment (node or data), the first
                     F2FS_SSA_SEGMENTS segments at most, gzip'ed on the target where it has gzip (mostly zeros).
                     Before reading, `blockdev --flushbufs` syncs the file system (a checkpoint, so the current
                     segments on disk are the run's) and drops the device's cached blocks (f2fs writes its
                     metadata around them: a second snapshot would read stale ones)
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
from mobiperf.core.f2fs_disk import BLOCK_BYTES, F2fsFormatError, decode_super
from mobiperf.target.transport import Transport


F2FS_SSA_SEGMENTS = 8192    # 32 MiB of summaries: a 16 GiB main area; beyond, node/data comes from the events


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
        if self.filesystem == "f2fs":
            self._snapshot_f2fs(taken, skipped)
        (self.out_dir / "source.txt").write_text(f"device {self.device}\nfilesystem {self.filesystem}\n"
                                                 f"files_dir {self.files_dir}\ndev {self.dev[0]}:{self.dev[1]}\n")
        return {"files": taken, "skipped": skipped}

    def _snapshot_f2fs(self, taken: list[str], skipped: dict[str, str]) -> None:
        """The superblock, the checkpoint packs' first blocks and the SSA, each read with dd (phones have it)."""
        dev = shlex.quote(self.device)
        if not self.transport.which("dd"):
            skipped["f2fs_sb.bin"] = "dd is not installed on the target"
            return
        try:  # best effort (see above): without it the snapshot may be older than the run's end
            self.transport.run(["blockdev", "--flushbufs", self.device], timeout=120)
        except TargetError:
            pass
        sb_bytes = self._dd(f"dd if={dev} bs={BLOCK_BYTES} count=1", "f2fs_sb.bin", taken, skipped)
        try:
            sb = decode_super(sb_bytes or b"")
        except F2fsFormatError as e:
            skipped.setdefault("f2fs_sb.bin", f"not an f2fs superblock: {e}")
            return
        cp, per_pack = sb.cp_blkaddr, sb.blocks_per_segment
        self._dd(f"dd if={dev} bs={BLOCK_BYTES} skip={cp} count=1 && dd if={dev} bs={BLOCK_BYTES} "
                 f"skip={cp + per_pack} count=1", "f2fs_cp.bin", taken, skipped)
        count = min(sb.segment_count_main, F2FS_SSA_SEGMENTS)
        ssa = f"dd if={dev} bs={BLOCK_BYTES} skip={sb.ssa_blkaddr} count={count}"
        if self.transport.which("gzip"):
            self._dd(f"{ssa} | gzip -1", "f2fs_ssa.bin.gz", taken, skipped)
        else:
            self._dd(ssa, "f2fs_ssa.bin", taken, skipped)

    def _dd(self, script: str, name: str, taken: list[str], skipped: dict[str, str]) -> bytes | None:
        try:
            done = self.transport.run(["sh", "-c", f"{script} 2>/dev/null"], timeout=120)
        except TargetError as e:
            skipped[name] = str(e)
            return None
        if done.returncode != 0 or not done.stdout:
            skipped[name] = done.stderr.decode(errors="replace").strip()[-200:] or f"dd exited {done.returncode}"
            return None
        (self.out_dir / name).write_bytes(done.stdout)
        taken.append(name)
        return done.stdout
