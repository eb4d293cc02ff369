"""Layout snapshot parser: ext4 metadata and journal, xfs log, FIEMAP extents, and ext4 block-mapping events."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from mobiperf.collectors.parse.ftrace_text import parse_ftrace_text
from mobiperf.collectors.parse.layout import layout_block_size, mapped_extents, parse_layout

FIX = Path(__file__).parents[1] / "fixtures" / "ftrace"


def test_ext4_layout():
    df, warnings = parse_layout(FIX / "layout-ext4-1g", rep=2)
    assert warnings == [] and set(df["rep"]) == {2} and set(zip(df["dev_major"], df["dev_minor"])) == {(7, 4)}
    journal = df.filter(pl.col("region") == "journal")
    assert journal["length_bytes"].sum() == 32 << 20  # mkfs.ext4's 32 MiB journal on a 1 GiB device
    meta = df.filter(pl.col("region") == "metadata")
    assert len(meta.filter(pl.col("path").str.ends_with("inode table"))) == 8  # 8 groups of 128 MiB
    first = meta.filter(pl.col("path") == "group 0 superblock").row(0, named=True)
    assert (first["physical_bytes"], first["length_bytes"]) == (0, 4096)
    files = df.filter(pl.col("region") == "file")
    assert files.select("path", "length_bytes").rows() == [("keep", 12288)]
    assert layout_block_size(FIX / "layout-ext4-1g") == 4096


def test_xfs_log_location():
    df, _ = parse_layout(FIX / "layout-xfs")
    log = df.filter(pl.col("region") == "journal").row(0, named=True)
    assert (log["path"], log["length_bytes"], log["flags"]) == ("xfs log", 64 << 20, "internal")
    assert log["physical_bytes"] > 0 and log["physical_bytes"] % 4096 == 0
    assert df.filter(pl.col("region") == "file")["length_bytes"].to_list() == [655360]


def test_block_mappings_of_short_lived_files():
    fs_event = parse_ftrace_text(FIX / "k6.18-ext4-map-blocks.txt").events["fs_event"]
    mapped = mapped_extents(fs_event, 4096)
    # ret 0 (nothing mapped) is left out; the 64-block mapping of a file deleted before the snapshot stays.
    assert mapped.select("path", "logical_bytes", "physical_bytes", "length_bytes").rows() == [
        ("ino:2", 0, 4241 * 4096, 4096), ("ino:12", 0, 32960 * 4096, 64 * 4096)]
    assert set(mapped["region"]) == {"mapped"}
