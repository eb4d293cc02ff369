"""The layout snapshot (raw/layout/, see collectors/layout.py) -> file_extent rows.

  filefrag.txt  `filefrag -v -b512`: per file, extents `ext: logical.. end: physical.. end: length: ...` in
                512-byte units -> region "file", path relative to the workload directory
  dumpe2fs.txt  per group: superblock copies, group descriptors, reserved GDT blocks, block/inode bitmaps and the
                inode table, in file system blocks -> region "metadata", path names the structure and group
  journal.txt   debugfs `stat <8>` EXTENTS `(logical-end):physical-end` of the journal inode -> region "journal"
  xfs_sb.txt    xfs_db superblock print: logstart (an AG-encoded fs block) and logblocks -> region "journal"
  f2fs_*.bin    f2fs's superblock, checkpoint and SSA -> its areas and main segments (f2fs_layout.py)
Offsets are bytes from the start of the device (the file system is the whole loop device in mobiperf's stacks).

Files that lived only during the run (created and deleted before the snapshot) are not in filefrag.txt; the ext4
event set's ext4_ext_map_blocks_exit events (`ino %lu flags %s lblk %u pblk %llu len %u ...`) record every block
mapping as it is made, and mapped_extents() turns them into region "mapped" rows (path `ino:<n>`).
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from mobiperf.collectors.parse.f2fs_layout import f2fs_extent_rows
from mobiperf.core.schema import FILE_EXTENT

FILEFRAG_HEAD = re.compile(r"^File size of (.*) is (\d+) \(\d+ blocks? of (\d+) bytes\)")
FILEFRAG_EXTENT = re.compile(r"^\s*\d+:\s+(\d+)\.\.\s*(\d+):\s+(\d+)\.\.\s*(\d+):\s+(\d+):\s*(?:\d+:)?\s*(.*)$")
GROUP = re.compile(r"^Group (\d+):")
META = [(re.compile(r"(Primary|Backup) superblock at (\d+)"), "superblock"),
        (re.compile(r"Group descriptors at (\d+)-(\d+)"), "group descriptors"),
        (re.compile(r"Reserved GDT blocks at (\d+)-(\d+)"), "reserved gdt"),
        (re.compile(r"Block bitmap at (\d+)"), "block bitmap"),
        (re.compile(r"Inode bitmap at (\d+)"), "inode bitmap"),
        (re.compile(r"Inode table at (\d+)-(\d+)"), "inode table")]
JOURNAL_EXTENT = re.compile(r"\((\d+)(?:-(\d+))?\):(\d+)(?:-(\d+))?")


def parse_layout(layout: Path, rep: int = 0) -> tuple[pl.DataFrame, list[str]]:
    rows: list[dict] = []
    warnings: list[str] = []
    dev = (-1, -1)
    files_dir = ""
    source = layout / "source.txt"
    if source.exists():
        for line in source.read_text(errors="replace").splitlines():
            key, _, value = line.partition(" ")
            if key == "dev" and re.fullmatch(r"-?\d+:-?\d+", value):
                dev = tuple(int(v) for v in value.split(":"))
            elif key == "files_dir":
                files_dir = value.rstrip("/") + "/"
    block_size = 4096
    if (layout / "dumpe2fs.txt").exists():
        text = (layout / "dumpe2fs.txt").read_text(errors="replace")
        m = re.search(r"^Block size:\s+(\d+)", text, re.M)
        block_size = int(m.group(1)) if m else block_size
        group = None
        for line in text.splitlines():
            g = GROUP.match(line)
            if g:
                group = int(g.group(1))
                continue
            if group is None:
                continue
            for pattern, what in META:
                for hit in pattern.finditer(line):
                    nums = [int(x) for x in hit.groups() if x and x.isdigit()]
                    start, end = nums[0], nums[-1]
                    rows.append(_row(rep, "metadata", f"group {group} {what}", 0, start * block_size,
                                     (end - start + 1) * block_size, dev, ""))
    if (layout / "journal.txt").exists():
        text = (layout / "journal.txt").read_text(errors="replace")
        extents = text.split("EXTENTS:", 1)[1] if "EXTENTS:" in text else ""
        for hit in JOURNAL_EXTENT.finditer(extents):
            lstart, lend, pstart, pend = (int(x) if x else None for x in hit.groups())
            lend = lstart if lend is None else lend
            rows.append(_row(rep, "journal", "ext4 journal", lstart * block_size, pstart * block_size,
                             (lend - lstart + 1) * block_size, dev, ""))
    if (layout / "xfs_sb.txt").exists():
        sb = dict(re.findall(r"^(\w+) = (\S+)", (layout / "xfs_sb.txt").read_text(errors="replace"), re.M))
        try:
            bsize, agblocks, agblklog = int(sb["blocksize"]), int(sb["agblocks"]), int(sb["agblklog"])
            logstart, logblocks = int(sb["logstart"]), int(sb["logblocks"])
        except (KeyError, ValueError):
            warnings.append(f"{layout / 'xfs_sb.txt'}: no log location in the superblock print")
        else:
            if logstart:  # 0: an external log device
                agno, agbno = logstart >> agblklog, logstart & ((1 << agblklog) - 1)
                rows.append(_row(rep, "journal", "xfs log", 0, (agno * agblocks + agbno) * bsize,
                                 logblocks * bsize, dev, "internal"))
    f2fs_rows, f2fs_warnings = f2fs_extent_rows(layout, lambda region, path, physical, length, flags: _row(
        rep, region, path, 0, physical, length, dev, flags))
    rows += f2fs_rows
    warnings += f2fs_warnings
    if (layout / "filefrag.txt").exists():
        path, unit = None, 512
        for n, line in enumerate((layout / "filefrag.txt").read_text(errors="replace").splitlines(), 1):
            head = FILEFRAG_HEAD.match(line)
            if head:
                path, unit = head.group(1), int(head.group(3))
                if files_dir and path.startswith(files_dir):
                    path = path[len(files_dir):]
                continue
            ext = FILEFRAG_EXTENT.match(line)
            if ext and path is not None:
                lstart, _, pstart, _, length = (int(x) for x in ext.groups()[:5])
                rows.append(_row(rep, "file", path, lstart * unit, pstart * unit, length * unit, dev,
                                 ext.group(6).strip()))
    df = pl.DataFrame(rows, schema=FILE_EXTENT.columns) if rows else FILE_EXTENT.empty()
    return FILE_EXTENT.validate(df), warnings


MAP_EXIT = (r"^dev (?P<major>\d+),(?P<minor>\d+) ino (?P<ino>\d+) flags (?P<flags>\S*) lblk (?P<lblk>\d+) "
            r"pblk (?P<pblk>\d+) len (?P<len>\d+) mflags (?P<mflags>\S*) ret (?P<ret>-?\d+)")


def layout_block_size(layout: Path, default: int = 4096) -> int:
    dump = layout / "dumpe2fs.txt"
    if dump.exists():
        m = re.search(r"^Block size:\s+(\d+)", dump.read_text(errors="replace"), re.M)
        if m:
            return int(m.group(1))
    return default


def mapped_extents(fs_event: pl.DataFrame, block_size: int, rep: int = 0) -> pl.DataFrame:
    """file_extent rows (region "mapped") of the ext4_ext_map_blocks_exit events that mapped blocks."""
    rows = fs_event.filter(pl.col("event") == "ext4_ext_map_blocks_exit")
    got = rows["body"].str.extract_groups(MAP_EXIT).struct.unnest()
    got = got.filter(pl.col("ret").cast(pl.Int64, strict=False) > 0)
    if not len(got):
        return FILE_EXTENT.empty()
    df = got.select(
        pl.lit(rep, pl.Int32).alias("rep"), pl.lit("mapped").alias("region"),
        (pl.lit("ino:") + pl.col("ino")).alias("path"),
        (pl.col("lblk").cast(pl.Int64) * block_size).alias("logical_bytes"),
        (pl.col("pblk").cast(pl.Int64) * block_size).alias("physical_bytes"),
        (pl.col("ret").cast(pl.Int64) * block_size).alias("length_bytes"),
        pl.col("major").cast(pl.Int32).alias("dev_major"), pl.col("minor").cast(pl.Int32).alias("dev_minor"),
        pl.col("mflags").alias("flags")).unique(maintain_order=True)
    return FILE_EXTENT.validate(df)


def _row(rep, region, path, logical, physical, length, dev, flags) -> dict:
    return {"rep": rep, "region": region, "path": path, "logical_bytes": logical, "physical_bytes": physical,
            "length_bytes": length, "dev_major": dev[0], "dev_minor": dev[1], "flags": flags}
