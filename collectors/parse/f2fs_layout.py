"""The f2fs part of the layout snapshot (raw/layout/f2fs_*.bin, collectors/layout.py) -> file_extent rows.

  f2fs_sb.bin          the device's first block: the superblock places the areas -> one row each, region
                       superblock, checkpoint, sit, nat, ssa (path `f2fs <area>`)
  f2fs_cp.bin          the two checkpoint packs' first blocks: the newer one names the six current segments
  f2fs_ssa.bin[.gz]    one summary block per main segment: node or data
The main area becomes one row per run of consecutive segments of one kind: region node, data, or main where
neither the SSA nor the checkpoint says (a segment never closed and not current; segments past the SSA that was
read). Offsets are bytes from the start of the device (the file system is the whole device in mobiperf's stacks
and on the virtual phone's /data).
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

from mobiperf.core.f2fs_disk import BLOCK_BYTES, F2fsFormatError, decode_checkpoint, decode_super, decode_segment_types


def f2fs_extent_rows(layout: Path, row) -> tuple[list[dict], list[str]]:
    """file_extent rows of the f2fs snapshot in `layout` (none without f2fs_sb.bin), and warnings. `row` makes a
    row from (region, path, physical_bytes, length_bytes, flags)."""
    sb_file = layout / "f2fs_sb.bin"
    if not sb_file.exists():
        return [], []
    try:
        sb = decode_super(sb_file.read_bytes())
    except F2fsFormatError as e:
        return [], [f"{sb_file}: {e}"]
    warnings: list[str] = []
    rows = [row(area, f"f2fs {area}", start * BLOCK_BYTES, (end - start) * BLOCK_BYTES, "")
            for area, start, end in sb.areas() if area != "main" and end > start]
    cp_file = layout / "f2fs_cp.bin"
    checkpoint = decode_checkpoint(cp_file.read_bytes()) if cp_file.exists() else None
    ssa = _read_ssa(layout, warnings)
    kinds = decode_segment_types(ssa, checkpoint)
    kinds += [None] * (sb.segment_count_main - len(kinds))
    per_segment = sb.blocks_per_segment * BLOCK_BYTES
    first = 0
    for segno in range(1, len(kinds) + 1):
        if segno < len(kinds) and kinds[segno] == kinds[first]:
            continue
        kind = kinds[first] or "main"
        rows.append(row(kind, f"f2fs main segments {first}-{segno - 1}", sb.main_blkaddr * BLOCK_BYTES
                        + first * per_segment, (segno - first) * per_segment, ""))
        first = segno
    return rows, warnings


def _read_ssa(layout: Path, warnings: list[str]) -> bytes:
    for name in ("f2fs_ssa.bin.gz", "f2fs_ssa.bin"):
        path = layout / name
        if not path.exists():
            continue
        data = path.read_bytes()
        if name.endswith(".gz"):
            try:
                data = gzip.decompress(data)
            except (OSError, EOFError, zlib.error) as e:
                warnings.append(f"{path}: {e}")
                return b""
        return data
    return b""
