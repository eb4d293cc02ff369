"""Android's file layer as spans: each android_fs read or write (file_io.py) in the thread that did it.

The span runs from the start event to the end event file_io.py paired with it (a start without an end is a span
of no length: its op and bytes still count). io_span.py nests them inside the calls when the trace has calls,
file_nest.py lets them start nests of their own when it has not.
"""

from __future__ import annotations

import polars as pl


def file_entities(file_io: pl.DataFrame | None) -> pl.DataFrame | None:
    """The file layer's spans as io_span entities (without ids): one per android_fs read or write, in the thread
    that did it (tid and thread, else pid and comm in a file_io written before it kept them)."""
    if file_io is None or not len(file_io):
        return None
    tid = pl.col("tid") if "tid" in file_io.columns else pl.col("pid")
    thread = pl.col("thread") if "thread" in file_io.columns else pl.col("comm")
    return file_io.with_row_index("source_row").select(
        "rep", pl.lit("file").alias("layer"), pl.col("op").alias("name"), tid.cast(pl.Int32).alias("tid"),
        thread.alias("comm"), pl.col("ts").alias("start"), (pl.col("ts") + pl.col("dur").fill_null(0)).alias("end"),
        "size_bytes", "op", "path", "file_type", "ino", pl.col("source_row").cast(pl.Int64))
