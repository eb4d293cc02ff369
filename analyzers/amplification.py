"""Amplification: the bytes each layer moves for the application's bytes.

  app    bytes the IO system calls transferred (syscall_class, op read/write)
  fuse   the file data of FUSE READ/WRITE requests (fuse_req.data_bytes: the messages less their protocol headers),
         and the headers themselves as region `header` (not counted in the ratio of region `all`)
  block  bytes of block requests, per region (data, metadata, journal), op read/write
ratio_to_app = bytes / app bytes of the same op (null without app bytes). A write ratio above 1 is the stack's
extra writes (journaling of journal, metadata; seed 002 and seed 004's "additional write" overhead); below 1
means the IO was absorbed (page cache, overwrites before writeback) or is still dirty.

Limits: the block layer sees every process, so traffic from other processes of the target counts too; app bytes
cover the traced processes only; mmap stores make no syscalls.
"""

from __future__ import annotations

import polars as pl


def _rows(df: pl.DataFrame, layer: str, region: pl.Expr) -> pl.DataFrame:
    return df.group_by("rep", "op", region.alias("region")).agg(
        count=pl.len().cast(pl.Int64), bytes=pl.col("size_bytes").sum().cast(pl.Int64)).with_columns(
        layer=pl.lit(layer))


def measure_amplification(syscall_class: pl.DataFrame, block_io: pl.DataFrame,
                          fuse_req: pl.DataFrame | None = None) -> pl.DataFrame:
    rw = pl.col("op").is_in(["read", "write"])
    frames = [_rows(syscall_class.filter(rw), "app", pl.lit("all")),
              _rows(block_io.filter(rw), "block", pl.col("region")),
              _rows(block_io.filter(rw), "block", pl.lit("all"))]
    if fuse_req is not None:
        name = pl.col("opcode_name").str.to_lowercase().str.strip_prefix("fuse_")
        fr = fuse_req.filter(name.is_in(["read", "write"])).with_columns(op=name)
        message = pl.when(pl.col("op") == "write").then(pl.col("len_bytes")).otherwise(pl.col("reply_len_bytes"))
        if "data_bytes" not in fr.columns or fr["data_bytes"].is_null().all():  # a table older than data_bytes
            from mobiperf.collectors.parse.fuse_requests import REPLY_HEADER_BYTES, WRITE_HEADER_BYTES
            header = pl.when(pl.col("op") == "write").then(WRITE_HEADER_BYTES).otherwise(REPLY_HEADER_BYTES)
            fr = fr.with_columns(data_bytes=(message.fill_null(0) - header).clip(lower_bound=0))
        frames.append(_rows(fr.with_columns(size_bytes=pl.col("data_bytes").fill_null(0)), "fuse", pl.lit("all")))
        frames.append(_rows(fr.with_columns(size_bytes=(message.fill_null(0) - pl.col("data_bytes").fill_null(0))
                                            .clip(lower_bound=0)), "fuse", pl.lit("header")))
    out = pl.concat(frames, how="vertical_relaxed")
    app = out.filter(pl.col("layer") == "app").select("rep", "op", pl.col("bytes").alias("_app"))
    out = out.join(app, on=["rep", "op"], how="left").with_columns(
        ratio_to_app=pl.when(pl.col("_app") > 0).then(pl.col("bytes") / pl.col("_app")))
    order = pl.col("layer").replace_strict({"app": 0, "fuse": 1, "block": 2}, default=3)
    return out.sort("rep", "op", order, "region").select("rep", "layer", "region", "op", "count", "bytes",
                                                         "ratio_to_app")

