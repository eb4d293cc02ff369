"""f2fs's on-disk layout, decoded from its own bytes: the superblock's areas, the checkpoint's current segments
and the segment summary area's (SSA) node/data mark of each main-area segment.

The layout (include/linux/f2fs_fs.h; Documentation/filesystems/f2fs.rst), in 4 KiB blocks from the start of the
device:

    0 .. segment0_blkaddr      superblock (two copies, at byte 1024 of blocks 0 and 1) and alignment padding
    cp_blkaddr                 checkpoint: two packs (one segment each), written alternately at each checkpoint
    sit_blkaddr                segment information table: valid-block count and bitmap of every main segment
    nat_blkaddr                node address table: node id -> block address
    ssa_blkaddr                segment summary area: one 4 KiB summary block per main segment
    main_blkaddr .. block_count  the main area: segments of node blocks (inodes, direct and indirect nodes)
                               and of data blocks, six logs (hot/warm/cold x node/data)

Segment numbers (the checkpoint's cur_*_segno, the SSA's index) count from main_blkaddr. A summary block ends
with a footer whose first byte is the segment's type (SUM_TYPE_NODE 1, SUM_TYPE_DATA 0); a summary block that
is all zeros was never written (the segment was never closed), and says nothing.

Only what mobiperf needs is decoded; every offset below is the kernel's struct, little-endian. Tested against
dump.f2fs's print of images made by Debian's mkfs.f2fs (tests/unit/test_f2fs_layout.py).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

F2FS_MAGIC = 0xF2F52010
SUPER_OFFSET = 1024               # the superblock's byte offset in blocks 0 and 1
BLOCK_BYTES = 4096                # F2FS_BLKSIZE: the only block size Linux mounts
SUM_FOOTER_TYPE_OFFSET = BLOCK_BYTES - 5   # struct summary_footer {u8 entry_type; __le32 check_sum} at the end
SUM_TYPE_NODE, SUM_TYPE_DATA = 1, 0
ACTIVE_LOGS = 3                   # hot, warm, cold: what the checkpoint names in each of its 8-slot arrays
TEMPERATURES = ("hot", "warm", "cold")

# struct f2fs_super_block: (name, offset, format)
_SUPER_FIELDS = (
    ("magic", 0, "<I"), ("major_ver", 4, "<H"), ("minor_ver", 6, "<H"), ("log_sectorsize", 8, "<I"),
    ("log_sectors_per_block", 12, "<I"), ("log_blocksize", 16, "<I"), ("log_blocks_per_seg", 20, "<I"),
    ("segs_per_sec", 24, "<I"), ("secs_per_zone", 28, "<I"), ("block_count", 36, "<Q"),
    ("section_count", 44, "<I"), ("segment_count", 48, "<I"), ("segment_count_ckpt", 52, "<I"),
    ("segment_count_sit", 56, "<I"), ("segment_count_nat", 60, "<I"), ("segment_count_ssa", 64, "<I"),
    ("segment_count_main", 68, "<I"), ("segment0_blkaddr", 72, "<I"), ("cp_blkaddr", 76, "<I"),
    ("sit_blkaddr", 80, "<I"), ("nat_blkaddr", 84, "<I"), ("ssa_blkaddr", 88, "<I"), ("main_blkaddr", 92, "<I"),
    ("root_ino", 96, "<I"), ("node_ino", 100, "<I"), ("meta_ino", 104, "<I"),
)
# struct f2fs_checkpoint: checkpoint_ver at 0, cur_node_segno[8] at 36, cur_data_segno[8] at 84
_CP_VERSION = (0, "<Q")
_CP_NODE_SEGNO = 36
_CP_DATA_SEGNO = 84


class F2fsFormatError(ValueError):
    """The bytes are not an f2fs superblock (or are cut short)."""


@dataclass(frozen=True)
class F2fsSuper:
    """The superblock's fields mobiperf reads, and the areas they make (block addresses, 4 KiB blocks)."""

    fields: dict[str, int]

    def __getattr__(self, name: str) -> int:
        try:
            return self.fields[name]
        except KeyError:
            raise AttributeError(name) from None

    @property
    def blocks_per_segment(self) -> int:
        return 1 << self.fields["log_blocks_per_seg"]

    def areas(self) -> list[tuple[str, int, int]]:
        """(region, first block, end block) of each area in device order; the main area is `main`, its end that
        of its last whole segment (a device's tail beyond it is in no segment)."""
        f = self.fields
        main_end = f["main_blkaddr"] + f["segment_count_main"] * self.blocks_per_segment
        return [("superblock", 0, f["segment0_blkaddr"]), ("checkpoint", f["cp_blkaddr"], f["sit_blkaddr"]),
                ("sit", f["sit_blkaddr"], f["nat_blkaddr"]), ("nat", f["nat_blkaddr"], f["ssa_blkaddr"]),
                ("ssa", f["ssa_blkaddr"], f["main_blkaddr"]), ("main", f["main_blkaddr"], main_end)]


@dataclass
class F2fsCheckpoint:
    """The current checkpoint pack: its version and the six current segments (main-area segment numbers)."""

    version: int
    current: dict[str, int] = field(default_factory=dict)   # "hot node" -> segno, ... "cold data" -> segno


def decode_super(block0: bytes) -> F2fsSuper:
    """The superblock from the device's first 4 KiB (or more); F2fsFormatError if it is not f2fs."""
    if len(block0) < SUPER_OFFSET + 108:
        raise F2fsFormatError(f"{len(block0)} bytes: an f2fs superblock needs the device's first 1132 bytes")
    fields = {name: struct.unpack_from(fmt, block0, SUPER_OFFSET + off)[0] for name, off, fmt in _SUPER_FIELDS}
    if fields["magic"] != F2FS_MAGIC:
        raise F2fsFormatError(f"magic {fields['magic']:#x} at byte {SUPER_OFFSET}, not f2fs's {F2FS_MAGIC:#x}")
    if fields["log_blocksize"] != 12:
        raise F2fsFormatError(f"block size 2^{fields['log_blocksize']}: Linux's f2fs has 4 KiB blocks")
    return F2fsSuper(fields)


def decode_checkpoint(packs: bytes) -> F2fsCheckpoint | None:
    """The newer of the two checkpoint packs' first blocks (8 KiB: pack 1's then pack 2's), None if neither
    decodes. The kernel also checks each pack's CRC and its end block; a pack torn by a crash has an older
    version in its end block, which this does not read: a snapshot of a mounted file system has no torn pack."""
    best = None
    for start in range(0, len(packs) - BLOCK_BYTES + 1, BLOCK_BYTES):
        block = packs[start:start + BLOCK_BYTES]
        if not any(block):
            continue
        version = struct.unpack_from(_CP_VERSION[1], block, _CP_VERSION[0])[0]
        if best is None or version > best.version:
            node = struct.unpack_from("<3I", block, _CP_NODE_SEGNO)
            data = struct.unpack_from("<3I", block, _CP_DATA_SEGNO)
            best = F2fsCheckpoint(version, {**{f"{t} node": s for t, s in zip(TEMPERATURES, node)},
                                            **{f"{t} data": s for t, s in zip(TEMPERATURES, data)}})
    return best


def decode_summary_types(ssa: bytes) -> list[str | None]:
    """Per main-area segment, from its summary block: `node`, `data`, or None (never written: all zeros)."""
    out: list[str | None] = []
    for start in range(0, len(ssa) - BLOCK_BYTES + 1, BLOCK_BYTES):
        block = ssa[start:start + BLOCK_BYTES]
        if not any(block):
            out.append(None)
        else:
            out.append("node" if block[SUM_FOOTER_TYPE_OFFSET] == SUM_TYPE_NODE else "data")
    return out


def decode_segment_types(ssa: bytes, checkpoint: F2fsCheckpoint | None) -> list[str | None]:
    """Per main-area segment: node or data, from the SSA, with the checkpoint's current segments overriding it
    (a current segment's summary lives in the checkpoint pack until the segment is closed: its SSA block may
    still hold a former life's)."""
    types = decode_summary_types(ssa)
    for log, segno in (checkpoint.current.items() if checkpoint else ()):
        if segno < len(types):
            types[segno] = log.split()[1]
    return types
