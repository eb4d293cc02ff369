"""f2fs region of a block request: which of f2fs's on-disk areas it writes (or reads), and in the main area whether
its blocks are node blocks (inodes, direct and indirect nodes) or data.

Regions (mobiperf/core/f2fs_disk.py has the layout):
  superblock   the first segment0_blkaddr blocks (the two superblock copies)
  checkpoint   the checkpoint area (both packs)
  sit, nat, ssa  the segment information table, node address table, segment summary area
  node, data   main-area blocks of the two kinds
  main         a main-area block whose kind no source says (no f2fs bio event, a segment the snapshot does not type)
  metadata     an f2fs META write outside any known area (a run without the layout snapshot)

Sources, first that applies:
  1. the bio f2fs submitted for it (f2fs_bio: f2fs_submit_write_bio / _read_bio, on by default on f2fs stacks): the
     latest bio of the same device and first sector submitted at or before the request's queue (else issue) time.
     Its type decides node (NODE) and data (DATA, IN-PLACE, OUT-OF-PLACE); META_FLUSH is the checkpoint's commit
     block, always in the checkpoint area; a META bio takes the area its sector lies in.
  2. the layout snapshot's f2fs areas (file_extent rows from the superblock, collectors/parse/f2fs_layout.py): the
     area the request's first sector lies in; in the main area the segment's kind from the SSA and the
     checkpoint's current segments.
A request is "in" an area when its first sector is (f2fs's areas are segment-aligned; a request does not
straddle two).

Limits: a bio the block layer split has its later parts matched through the layout only. The sectors of the f2fs
events and of the block requests must be on the same device: a file system on a partition or on device-mapper
(a phone's /data on dm-N over sdaN) has bio sectors relative to its own device while the requests are on the
disk, so only the layout of the whole device, where the file system is the whole device, classifies it.
"""

from __future__ import annotations

import polars as pl

F2FS_AREAS = ("superblock", "checkpoint", "sit", "nat", "ssa")
F2FS_REGIONS = (*F2FS_AREAS, "node", "data", "main", "metadata")
_LAYOUT_REGIONS = (*F2FS_AREAS, "node", "data", "main")
BIO_KIND = {"node": "node", "data": "data", "in-place": "data", "out-of-place": "data",
            "meta_flush": "checkpoint", "meta": "metadata"}


def has_f2fs_layout(file_extent: pl.DataFrame | None) -> bool:
    return file_extent is not None and bool(file_extent["region"].is_in(list(F2FS_AREAS)).any())


def classify_f2fs_regions(block: pl.DataFrame, file_extent: pl.DataFrame | None = None,
                 f2fs_bio: pl.DataFrame | None = None) -> pl.Series | None:
    """The f2fs region of every row of block (block_rq-like: rep, dev, sector, size_bytes, queue/issue times),
    null where f2fs's sources say nothing; None when the run has neither f2fs bios nor an f2fs layout."""
    with_layout = has_f2fs_layout(file_extent)
    with_bios = f2fs_bio is not None and f2fs_bio.height > 0
    if not (with_layout or with_bios):
        return None
    rows = block.select("rep", "dev_major", "dev_minor", "sector", "size_bytes",
                        pl.coalesce("queue_ts", "issue_ts").alias("_t")).with_row_index("_r")
    area = _layout_area(rows, file_extent) if with_layout else pl.Series("_area", [None] * rows.height, pl.Utf8)
    kind = _bio_kind(rows, f2fs_bio) if with_bios else pl.Series("_kind", [None] * rows.height, pl.Utf8)
    out = rows.with_columns(_area=area, _kind=kind).select(
        pl.when((pl.col("size_bytes") <= 0) | (pl.col("sector") < 0)).then(pl.lit(None, pl.Utf8))
        # a META bio takes its area; in the main area (or none known) it stays generic metadata
        .when(pl.col("_kind") == "metadata").then(
            pl.when(pl.col("_area").is_in(list(F2FS_AREAS))).then("_area").otherwise(pl.lit("metadata")))
        .when(pl.col("_kind").is_not_null()).then("_kind")
        .otherwise("_area").alias("region"))
    return out["region"]


def _layout_area(rows: pl.DataFrame, file_extent: pl.DataFrame) -> pl.Series:
    """Per row, the layout's f2fs region its first sector lies in (as-of join on the extent start, then a bound
    check), null outside every f2fs extent."""
    ext = (file_extent.filter(pl.col("region").is_in(list(_LAYOUT_REGIONS)))
           .select("rep", "dev_major", "dev_minor", pl.col("region").alias("_area"),
                   (pl.col("physical_bytes") // 512).alias("_s0"),
                   ((pl.col("physical_bytes") + pl.col("length_bytes")) // 512).alias("_s1"))
           .sort("_s0"))
    hit = rows.select("_r", "rep", "dev_major", "dev_minor", pl.col("sector").alias("_s0")).sort("_s0").join_asof(
        ext, on="_s0", by=["rep", "dev_major", "dev_minor"], strategy="backward", check_sortedness=False)
    hit = hit.with_columns(_area=pl.when(pl.col("_s0") < pl.col("_s1")).then("_area")).sort("_r")
    return hit["_area"]


def _bio_kind(rows: pl.DataFrame, f2fs_bio: pl.DataFrame) -> pl.Series:
    """Per row, the kind of the latest f2fs bio that started at its first sector on its device no later than it
    was queued (node, data, checkpoint or metadata), null where none did."""
    bios = f2fs_bio.select("rep", "dev_major", "dev_minor", "sector", pl.col("ts").alias("_t"),
                           pl.col("type").replace_strict(BIO_KIND, default=None).alias("_kind")) \
        .filter(pl.col("_kind").is_not_null()).sort("_t")
    hit = rows.filter(pl.col("_t").is_not_null()).sort("_t").join_asof(
        bios, on="_t", by=["rep", "dev_major", "dev_minor", "sector"], strategy="backward", check_sortedness=False)
    return rows.select("_r").join(hit.select("_r", "_kind"), on="_r", how="left").sort("_r")["_kind"]


def region_class(region: pl.Expr) -> pl.Expr:
    """The file-system-neutral class of a region (data, metadata, journal, none): f2fs's checkpoint is its
    journal commit's analogue, its node blocks and table areas its metadata; a main-area block of unknown kind
    counts as data, as ext4's requests do without a snapshot."""
    return region.replace({"checkpoint": "journal", "superblock": "metadata", "sit": "metadata",
                           "nat": "metadata", "ssa": "metadata", "node": "metadata", "main": "data"})
