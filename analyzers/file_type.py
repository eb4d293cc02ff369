"""File type of an IO: SQLite database, its rollback journal, WAL and shared-memory files, media, or other.

From a path (exact, at the syscall layer with strace -y paths and the path arguments of unlink and rename, so a
DELETE-mode journal's deletion is seen; at the block layer through the FIEMAP extents
of the layout snapshot, file_extent region `file`):
  db-journal  name ends in `-journal` (SQLite rollback journal: DELETE, TRUNCATE, PERSIST modes)
  db-wal      name ends in `-wal`;  db-shm: ends in `-shm`
  db          name ends in .db, .sqlite, .sqlite3, .db3, or a Mobibench database `test.db<k>[_<d>]`
  media       jpg, jpeg, png, gif, webp, heic, mp4, 3gp, mkv, webm, mov, mp3, m4a, aac, ogg, wav, flac
  other       any other path
  unknown     the IO could not be attributed to a file (block layer: no extent covers its first sector;
              syscall layer: no path, e.g. ftrace syscalls without strace)
The attributed share (requests whose type is not unknown, among data requests) says how much the block-level
file-type breakdown can be trusted.

Limits: the snapshot is taken at the end of the run, so files deleted during it (a DELETE-mode journal) and
blocks reallocated since are not attributed at the block layer; journal and metadata blocks are never files.
"""

from __future__ import annotations

import polars as pl

FILE_TYPES = ("db", "db-journal", "db-wal", "db-shm", "media", "other", "unknown")
_MEDIA = r"\.(jpe?g|png|gif|webp|heic|mp4|3gp|mkv|webm|mov|mp3|m4a|aac|ogg|wav|flac)$"
_DB = r"(\.(db|sqlite|sqlite3|db3)|(^|/)test\.db\d+(_\d+)?)$"


def file_type_of_path(path: pl.Expr) -> pl.Expr:
    p = path.fill_null("").str.to_lowercase()
    return (pl.when(p == "").then(pl.lit("unknown"))
            .when(p.str.ends_with("-journal")).then(pl.lit("db-journal"))
            .when(p.str.ends_with("-wal")).then(pl.lit("db-wal"))
            .when(p.str.ends_with("-shm")).then(pl.lit("db-shm"))
            .when(p.str.contains(_DB)).then(pl.lit("db"))
            .when(p.str.contains(_MEDIA)).then(pl.lit("media"))
            .otherwise(pl.lit("other")))


def attribute_files(block: pl.DataFrame, file_extent: pl.DataFrame | None) -> pl.DataFrame:
    """block rows (rep, dev_major, dev_minor, sector) with `path` and `file_type` from the file extents."""
    if file_extent is None or not len(file_extent.filter(pl.col("region") == "file")):
        return block.with_columns(path=pl.lit(None, pl.Utf8), file_type=pl.lit("unknown"))
    ext = (file_extent.filter(pl.col("region") == "file")
           .select("rep", "dev_major", "dev_minor", (pl.col("physical_bytes") // 512).alias("_fx_start"),
                   ((pl.col("physical_bytes") + pl.col("length_bytes")) // 512).alias("_fx_end"),
                   pl.col("path").alias("_fx_path"))
           .sort("_fx_start"))
    probe = block.select("rep", "dev_major", "dev_minor", pl.col("sector").alias("_fx_start")) \
        .with_row_index("_r").sort("_fx_start")
    hit = probe.join_asof(ext, on="_fx_start", by=["rep", "dev_major", "dev_minor"], strategy="backward",
                          check_sortedness=False).sort("_r")
    inside = hit["_fx_end"].is_not_null() & (hit["_fx_start"] < hit["_fx_end"]) & (hit["_fx_start"] >= 0)
    path = pl.select(pl.when(inside).then(hit["_fx_path"])).to_series()
    return block.with_columns(path=path).with_columns(file_type=file_type_of_path(pl.col("path")))
