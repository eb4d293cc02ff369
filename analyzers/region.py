"""File system region of a block request: data, metadata or journal; on f2fs, its own areas (f2fs_region.py).

Definition, first rule that applies:
  journal   the request lies in the journal's extents of the layout snapshot (file_extent, region `journal`),
            or, without a snapshot, was submitted by the journal thread (comm `jbd2/<dev>`; the journal
            writes of ext4 in ordered mode come from there, the `M` flag or not);
  metadata  it lies in the metadata regions of the snapshot (group descriptors, bitmaps, inode tables), or the
            request carries REQ_META (rwbs `M`: ext4 sets it on inode, directory and bitmap buffers);
  data      everything else with sectors;
  none      requests without sectors (flushes).
A request is "in" a region when its first sector is (requests do not straddle the journal).

On f2fs (its bio events or its layout snapshot), the region is f2fs's: superblock, checkpoint, sit, nat, ssa,
node or data (analyzers/f2fs_region.py; region_class maps them to the four above where a figure needs those).

Limits: metadata written back by the flusher without REQ_META counts as data unless the snapshot covers it;
the journal-thread rule needs the comm, which the blktrace binary lacks on kernels that write no process notes.
"""

from __future__ import annotations

import polars as pl

from mobiperf.analyzers.f2fs_region import F2FS_REGIONS, classify_f2fs_regions

REGIONS = tuple(dict.fromkeys(("data", "metadata", "journal", "none", *F2FS_REGIONS)))


def _in_extents(block: pl.DataFrame, extents: pl.DataFrame, region: str) -> pl.Series:
    """For each row of block (with dev_major, dev_minor, rep, sector): whether its sector lies in an extent of
    that region (as-of join on the extent start, then a bound check)."""
    ext = (extents.filter(pl.col("region") == region)
           .select("rep", "dev_major", "dev_minor", (pl.col("physical_bytes") // 512).alias("_ext_start"),
                   ((pl.col("physical_bytes") + pl.col("length_bytes")) // 512).alias("_ext_end"))
           .sort("_ext_start"))
    if not len(ext):
        return pl.Series([False] * len(block))
    probe = block.select("rep", "dev_major", "dev_minor", pl.col("sector").alias("_ext_start")) \
        .with_row_index("_r").sort("_ext_start")
    hit = probe.join_asof(ext, on="_ext_start", by=["rep", "dev_major", "dev_minor"], strategy="backward",
                          check_sortedness=False)
    hit = hit.with_columns(inside=pl.col("_ext_end").is_not_null() & (pl.col("_ext_start") < pl.col("_ext_end"))
                           & (pl.col("_ext_start") >= 0)).sort("_r")
    return hit["inside"]


def classify_region(block: pl.DataFrame, file_extent: pl.DataFrame | None = None,
                    f2fs_bio: pl.DataFrame | None = None) -> pl.DataFrame:
    """block (block_rq-like rows: sector, size_bytes, is_meta, comm) with a `region` column."""
    f2fs = classify_f2fs_regions(block, file_extent, f2fs_bio)
    generic = _classify_generic(block, file_extent)
    return generic if f2fs is None else generic.with_columns(region=pl.coalesce(f2fs, pl.col("region")))


def _classify_generic(block: pl.DataFrame, file_extent: pl.DataFrame | None) -> pl.DataFrame:
    if file_extent is not None and len(file_extent):
        in_journal = _in_extents(block, file_extent, "journal")
        in_meta = _in_extents(block, file_extent, "metadata")
    else:
        in_journal = in_meta = pl.Series([False] * len(block))
    has_layout_journal = file_extent is not None and bool((file_extent["region"] == "journal").any())
    jbd2 = pl.col("comm").fill_null("").str.starts_with("jbd2/")
    journal = pl.col("_in_journal") if has_layout_journal else (pl.col("_in_journal") | jbd2)
    return block.with_columns(_in_journal=in_journal, _in_meta=in_meta).with_columns(
        region=pl.when((pl.col("size_bytes") <= 0) | (pl.col("sector") < 0)).then(pl.lit("none"))
        .when(journal).then(pl.lit("journal"))
        .when(pl.col("_in_meta") | pl.col("is_meta")).then(pl.lit("metadata"))
        .otherwise(pl.lit("data"))).drop("_in_journal", "_in_meta")
