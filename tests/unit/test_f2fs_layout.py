"""f2fs's on-disk layout (mobiperf/core/f2fs_disk.py, collectors/parse/f2fs_layout.py) read from real images made
by Debian's mkfs.f2fs (f2fs-tools) on this host, checked field by field against dump.f2fs's own print of the same
image. The host's kernel has no f2fs: formatting and reading an image need none."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import polars as pl
import pytest

from mobiperf.collectors.layout import LayoutCollector
from mobiperf.collectors.parse.layout import parse_layout
from mobiperf.core.f2fs_disk import (BLOCK_BYTES, F2fsFormatError, SUM_FOOTER_TYPE_OFFSET, decode_checkpoint,
                                     decode_super, decode_segment_types, decode_summary_types)
from mobiperf.target.transport import LocalTransport

pytestmark = pytest.mark.skipif(not (shutil.which("mkfs.f2fs") and shutil.which("dump.f2fs")),
                                reason="f2fs-tools is not installed (make setup installs it)")


def make_image(path: Path, size: str) -> Path:
    subprocess.run(["truncate", "-s", size, str(path)], check=True)
    subprocess.run(["mkfs.f2fs", "-q", "-f", str(path)], check=True, stdout=subprocess.DEVNULL, timeout=60)
    return path


def head(image: Path, nbytes: int) -> bytes:
    with open(image, "rb") as f:
        return f.read(nbytes)


def dump_fields(image: Path) -> dict[str, int]:
    """dump.f2fs's superblock and checkpoint print: `name   [0x   hex : decimal]` lines."""
    text = subprocess.run(["dump.f2fs", "-d", "1", str(image)], capture_output=True, text=True, timeout=60).stdout
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\S+)\s+\[0x\s*[0-9a-f]+ : (\d+)\]", text, re.M)}


@pytest.fixture(scope="module")
def image_1g(tmp_path_factory) -> Path:
    return make_image(tmp_path_factory.mktemp("f2fs") / "data.img", "1G")


@pytest.mark.parametrize("size", ["512M", "1G", "4G"])
def test_superblock_fields_equal_dump_f2fs(tmp_path, size):
    image = make_image(tmp_path / "data.img", size)
    sb = decode_super(head(image, BLOCK_BYTES))
    dumped = dump_fields(image)
    for name in ("log_blocks_per_seg", "block_count", "segment_count", "segment_count_ckpt", "segment_count_sit",
                 "segment_count_nat", "segment_count_ssa", "segment_count_main", "segment0_blkaddr", "cp_blkaddr",
                 "sit_blkaddr", "nat_blkaddr", "ssa_blkaddr", "main_blkaddr", "root_ino", "node_ino", "meta_ino"):
        assert sb.fields[name] == dumped[name], name
    # the areas follow each other without a gap, as the kernel's sanity check (sanity_check_area_boundary) requires
    areas = sb.areas()
    assert [a[0] for a in areas] == ["superblock", "checkpoint", "sit", "nat", "ssa", "main"]
    assert all(prev[2] == nxt[1] for prev, nxt in zip(areas, areas[1:]))
    assert areas[1][2] - areas[1][1] == sb.segment_count_ckpt * 512     # two packs of one 512-block segment each
    assert areas[-1][2] == sb.segment0_blkaddr + sb.segment_count * 512  # the last whole segment


def test_checkpoint_current_segments_equal_dump_f2fs(image_1g):
    raw = head(image_1g, 32 << 20)
    sb = decode_super(raw)
    packs = b"".join(raw[b * BLOCK_BYTES:(b + 1) * BLOCK_BYTES] for b in (sb.cp_blkaddr, sb.cp_blkaddr + 512))
    cp = decode_checkpoint(packs)
    dumped = dump_fields(image_1g)
    assert cp.version == dumped["checkpoint_ver"]
    for i, temp in enumerate(("hot", "warm", "cold")):
        assert cp.current[f"{temp} node"] == dumped[f"cur_node_segno[{i}]"]
        assert cp.current[f"{temp} data"] == dumped[f"cur_data_segno[{i}]"]
    # a fresh image has written no summary block yet: every segment's kind comes from the checkpoint alone
    ssa = raw[sb.ssa_blkaddr * BLOCK_BYTES:(sb.ssa_blkaddr + sb.segment_count_main) * BLOCK_BYTES]
    assert set(decode_summary_types(ssa)) == {None}
    kinds = decode_segment_types(ssa, cp)
    assert {i: k for i, k in enumerate(kinds) if k} == {dumped["cur_node_segno[0]"]: "node",
                                                        dumped["cur_node_segno[1]"]: "node",
                                                        dumped["cur_node_segno[2]"]: "node",
                                                        dumped["cur_data_segno[0]"]: "data",
                                                        dumped["cur_data_segno[1]"]: "data",
                                                        dumped["cur_data_segno[2]"]: "data"}


def test_summary_footer_says_node_or_data():
    node, data = bytearray(BLOCK_BYTES), bytearray(BLOCK_BYTES)
    node[0] = data[0] = 7                      # an entry: the block is in use
    node[SUM_FOOTER_TYPE_OFFSET] = 1           # SUM_TYPE_NODE
    assert decode_summary_types(bytes(node) + bytes(data) + bytes(BLOCK_BYTES)) == ["node", "data", None]


def test_snapshot_of_an_image_gives_its_areas_as_extents(image_1g, tmp_path):
    """The layout collector over a real image (through the local transport: dd as on a phone), then the parser."""
    collector = LayoutCollector(LocalTransport(), str(image_1g), "f2fs", str(tmp_path), tmp_path / "raw",
                                dev_major=254, dev_minor=0)
    got = collector.stop()
    assert {"f2fs_sb.bin", "f2fs_cp.bin"} <= set(got["files"])
    assert len((tmp_path / "raw" / "layout" / "f2fs_sb.bin").read_bytes()) == BLOCK_BYTES
    extents, warnings = parse_layout(tmp_path / "raw" / "layout")
    assert warnings == []
    dumped = dump_fields(image_1g)
    area = {r["region"]: (r["physical_bytes"], r["length_bytes"]) for r in extents.iter_rows(named=True)
            if r["path"] in {"f2fs superblock", "f2fs checkpoint", "f2fs sit", "f2fs nat", "f2fs ssa"}}
    assert area["checkpoint"] == (dumped["cp_blkaddr"] * 4096, (dumped["sit_blkaddr"] - dumped["cp_blkaddr"]) * 4096)
    assert area["ssa"] == (dumped["ssa_blkaddr"] * 4096, (dumped["main_blkaddr"] - dumped["ssa_blkaddr"]) * 4096)
    main = extents.filter(pl.col("path").str.starts_with("f2fs main"))
    # the main area is covered once, in order: the six current segments typed, the rest of unknown kind
    assert main["length_bytes"].sum() == dumped["segment_count_main"] * 512 * 4096
    assert main.filter(pl.col("region") == "node")["length_bytes"].sum() == 3 * 512 * 4096
    assert main.filter(pl.col("region") == "data")["length_bytes"].sum() == 3 * 512 * 4096
    assert set(extents["dev_major"]) == {254}


def test_not_f2fs_is_refused_in_one_line(tmp_path):
    with pytest.raises(F2fsFormatError, match=r"magic 0x0 at byte 1024, not f2fs's 0xf2f52010"):
        decode_super(bytes(BLOCK_BYTES))
    with pytest.raises(F2fsFormatError, match="needs the device's first 1132 bytes"):
        decode_super(b"\0" * 100)
    # the collector keeps going (the layout is context) and says why in its summary
    (tmp_path / "ext.img").write_bytes(bytes(1 << 20))
    got = LayoutCollector(LocalTransport(), str(tmp_path / "ext.img"), "f2fs", str(tmp_path), tmp_path / "raw").stop()
    assert got["skipped"]["f2fs_sb.bin"].startswith("not an f2fs superblock: magic 0x0")
    assert "f2fs_cp.bin" not in got["files"]
    extents, warnings = parse_layout(tmp_path / "raw" / "layout")
    assert extents.filter(pl.col("path").str.starts_with("f2fs")).height == 0
    assert warnings and "not f2fs's 0xf2f52010" in warnings[0]
