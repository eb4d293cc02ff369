"""f2fs's bio events from elsewhere: the trace Chaitanya Kulkarni posted to linux-block (tests/fixtures/README.md:
`dd of=/mnt/nvme0n1/data if=/dev/zero bs=4k count=100` on a fresh `mkfs.f2fs -f /dev/nvme0n1`, f2fs-tools 1.12,
kernel for-next of June 2019; the header columns trimmed by the poster). Read by the project's body parser, then
classified twice, by the events' own block type and by the layout of a 1 GiB image from Debian's mkfs.f2fs
alone: the two must agree.

Why the layout fits: every sector of the trace lands where a fresh 1 GiB f2fs puts it (mkfs.f2fs puts the main
area at block 5120 for 1 GiB only: 4096 for 512 MiB, 9728 for 4 GiB; measured here): the checkpoint pack 2 at
block 1024 (sector 8192: the pack's header and summary, then its last block at 8208 with PREFLUSH|FUA), the hot
node log at main segment 0 (block 5121: its second block; mkfs wrote the root inode in the first), the warm node
log at segment 1, the hot data log at segment 3 (from its second block; the root directory's dentry block is
the first) and the warm data log at segment 250 (dd's 100 x 4 KiB, 409600 bytes in one bio): the current segments
of mkfs.f2fs's first checkpoint (cur_node_segno 0 1 2, cur_data_segno 3 250 124, as dump.f2fs prints them)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import polars as pl
import pytest

from mobiperf.analyzers.f2fs_region import classify_f2fs_regions
from mobiperf.collectors.layout import LayoutCollector
from mobiperf.collectors.parse.f2fs_events import f2fs_bio_table
from mobiperf.collectors.parse.layout import parse_layout
from mobiperf.target.transport import LocalTransport

TRACE = Path(__file__).resolve().parents[1] / "fixtures" / "f2fs" / "public" / "linux-block-2019-f2fs-bio.txt"
# (sector, size, type, flags) of the 7 f2fs_submit_write_bio lines, counted by hand from the file
SUBMITTED = [(53256, 4096, "data", "S"), (40968, 4096, "node", "S"), (45056, 4096, "node", "S"),
             (8192, 8192, "meta", "S|M|P"), (8208, 4096, "meta_flush", "S|M|P|PF|FUA"),
             (53264, 40960, "data", ""), (1064960, 409600, "data", "")]
REGION = {53256: "data", 40968: "node", 45056: "node", 8192: "checkpoint", 8208: "checkpoint", 53264: "data",
          1064960: "data"}


def trimmed_lines(path: Path) -> pl.DataFrame:
    """The poster's lines (`event: body`, the ftrace header cut off) as the rows the event parsers read (ts,
    cpu, pid, comm, event, body), in their order, 1 us apart."""
    rows = []
    for n, line in enumerate(path.read_text().splitlines()):
        event, _, body = line.partition(": ")
        rows.append({"ts": n * 1000, "cpu": 0, "pid": -1, "comm": "", "event": event, "body": body})
    return pl.DataFrame(rows, schema={"ts": pl.Int64, "cpu": pl.Int32, "pid": pl.Int32, "comm": pl.Utf8,
                                      "event": pl.Utf8, "body": pl.Utf8})


def test_bio_lines_read_field_by_field():
    bio = f2fs_bio_table(trimmed_lines(TRACE), 0)
    assert bio.select("sector", "size_bytes", "type", "flags").rows() == SUBMITTED
    assert set(bio["op"]) == {"write"}
    assert set(zip(bio["dev_major"], bio["dev_minor"], bio["fs_dev_major"], bio["fs_dev_minor"])) == {(259, 0, 259, 0)}


@pytest.mark.skipif(not shutil.which("mkfs.f2fs"), reason="f2fs-tools is not installed (make setup installs it)")
def test_event_types_and_mkfs_layout_agree(tmp_path):
    bio = f2fs_bio_table(trimmed_lines(TRACE), 0)
    # each bio as the block request it became (the request's first sector is its bio's), queued just after it
    block = bio.select("rep", "dev_major", "dev_minor", "sector", "size_bytes",
                       (pl.col("ts") + 1).alias("queue_ts"), pl.lit(None, pl.Int64).alias("issue_ts"))
    image = tmp_path / "nvme0n1.img"
    subprocess.run(["truncate", "-s", "1G", str(image)], check=True)
    subprocess.run(["mkfs.f2fs", "-q", "-f", str(image)], check=True, stdout=subprocess.DEVNULL, timeout=60)
    LayoutCollector(LocalTransport(), str(image), "f2fs", str(tmp_path), tmp_path / "raw", dev_major=259,
                    dev_minor=0).stop()
    layout, _ = parse_layout(tmp_path / "raw" / "layout")
    by_events = classify_f2fs_regions(block, None, bio).to_list()
    by_layout = classify_f2fs_regions(block, layout, None).to_list()
    both = classify_f2fs_regions(block, layout, bio).to_list()
    expected = [REGION[s] for s in block["sector"]]
    # the events alone cannot place a META write (no layout: generic metadata); the layout alone can
    assert by_events == [("metadata" if r == "checkpoint" and t == "meta" else r)
                         for r, t in zip(expected, bio["type"])]
    assert by_layout == expected
    assert both == expected
