"""Inode -> path: the file system's events name files by inode only (ext4/f2fs sync_file, writepages), so a path
comes from a listing taken on the device -> inode_path rows.

  layout/inodes.txt   `find DIR -xdev -printf '%i %p\\n'` of the stack's files (collectors/layout.py): `INO PATH`
  inodes/*.txt        `ls -iR DIR` of a recorded app's data directory (mobiperf/orchestration/record.py): `DIR:`
                      headers, then `INO NAME` lines (toybox and GNU ls alike)
Android's android_fs start events pair an inode with its path too (the analyzers take those from
android_fs_event). Inode numbers are per file system: the listings are of one file system each, and the
analyzers match an event's inode to a path only where the number names one path.
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from mobiperf.core.schema import INODE_PATH

_FIND_LINE = re.compile(r"^(\d+) (/.*)$")
_LS_ENTRY = re.compile(r"^\s*(\d+) (.+)$")


def parse_inode_listings(raw: Path, rep: int = 0) -> pl.DataFrame | None:
    """inode_path rows of every listing in the raw directory (None when there is none)."""
    rows: list[tuple[int, str, str]] = []
    find = raw / "layout" / "inodes.txt"
    if find.exists():
        for line in find.read_text(errors="replace").splitlines():
            m = _FIND_LINE.match(line)
            if m:
                rows.append((int(m.group(1)), m.group(2), "layout"))
    for listing in sorted((raw / "inodes").glob("*.txt")) if (raw / "inodes").is_dir() else []:
        rows += [(ino, path, "listing") for ino, path in _ls_entries(listing.read_text(errors="replace"))]
    if not rows:
        return None
    df = pl.DataFrame(rows, schema=["ino", "path", "source"], orient="row").unique(["ino", "path"], keep="first")
    return INODE_PATH.validate(df.with_columns(rep=pl.lit(rep, pl.Int32)))


def _ls_entries(text: str) -> list[tuple[int, str]]:
    out, current = [], ""
    for line in text.splitlines():
        if line.endswith(":") and line.startswith("/"):
            current = line[:-1].rstrip("/")
            continue
        m = _LS_ENTRY.match(line)
        if m and current:
            out.append((int(m.group(1)), f"{current}/{m.group(2)}"))
    return out
