"""Android's file IO tracepoints (android_fs) -> android_fs_event rows.

Android kernels (android_fs.h, android_fs_template.h in the Android common kernels since 4.4) trace file data IO
at the file system, with the file's path, for ext4 and f2fs:

  android_fs_dataread_start    entry_name %s, offset %llu, bytes %d, cmdline %s, pid %d, i_size %llu, ino %lu
  android_fs_datawrite_start   the same
  android_fs_dataread_end      ino %lu, offset %llu, bytes %d
  android_fs_datawrite_end     the same

A read is traced where the page cache misses (readpages: `bytes` is what goes to storage, not the read call's
size); a write where it enters the page cache (write_begin, one event per page or per direct IO). entry_name
is the path as the kernel can name it (d_path, spaces replaced by `_`; `<unknown>` or the name alone for files
it cannot), cmdline the task's command line (spaces replaced), pid the task's tgid. An end event carries no
path: parse_android_fs_events keeps it as it is, and analyzers/file_io.py pairs it with its start.
Newer Android kernels print `uid=%d` among these fields on some event classes; a field that is missing reads as
null, an unknown one is ignored.
"""

from __future__ import annotations

import polars as pl

from mobiperf.core.schema import ANDROID_FS_EVENT

ANDROID_FS_EVENTS = {
    "android_fs_dataread_start": ("read", "start"), "android_fs_dataread_end": ("read", "end"),
    "android_fs_datawrite_start": ("write", "start"), "android_fs_datawrite_end": ("write", "end"),
}
START_BODY = (r"^entry_name (?P<path>.*?), offset (?P<offset>\d+), bytes (?P<bytes>-?\d+), cmdline (?P<cmdline>.*?), "
              r"pid (?P<task_pid>-?\d+),(?: uid[= ]-?\d+,)? i_size (?P<i_size>\d+), ino (?P<ino>\d+)")
END_BODY = r"^ino (?:= )?(?P<ino>\d+), offset (?:= )?(?P<offset>\d+), bytes (?:= )?(?P<bytes>-?\d+)"


def parse_android_fs_events(head: pl.DataFrame, rep: int, unparsed: dict[str, int]) -> pl.DataFrame | None:
    """android_fs_event rows of the android_fs lines of head (ts, cpu, pid, comm, event, body), None if none;
    lines that match neither body are counted in unparsed under their event name."""
    rows = head.filter(pl.col("event").is_in(list(ANDROID_FS_EVENTS)))
    if not len(rows):
        return None
    frames = []
    for event, (op, phase) in ANDROID_FS_EVENTS.items():
        of = rows.filter(pl.col("event") == event)
        if not len(of):
            continue
        groups = of["body"].str.strip_chars().str.extract_groups(START_BODY if phase == "start" else END_BODY) \
            .struct.unnest()
        got = pl.concat([of.drop("body"), groups], how="horizontal")
        ok = got.filter(pl.col("ino").is_not_null())
        if len(ok) < len(got):
            unparsed[event] = unparsed.get(event, 0) + len(got) - len(ok)
        frames.append(ok.select(
            pl.lit(rep, pl.Int32).alias("rep"), "ts", "cpu", "pid", "comm", pl.lit(op).alias("op"),
            pl.lit(phase).alias("phase"),
            (pl.col("path") if "path" in ok.columns else pl.lit(None, pl.Utf8)).alias("path"),
            pl.col("offset").cast(pl.Int64, strict=False).alias("offset_bytes"),
            pl.col("bytes").cast(pl.Int64, strict=False).alias("size_bytes"),
            (pl.col("cmdline") if "cmdline" in ok.columns else pl.lit(None, pl.Utf8)).alias("cmdline"),
            (pl.col("task_pid").cast(pl.Int32, strict=False) if "task_pid" in ok.columns
             else pl.lit(None, pl.Int32)).alias("task_pid"),
            (pl.col("i_size").cast(pl.Int64, strict=False) if "i_size" in ok.columns
             else pl.lit(None, pl.Int64)).alias("i_size_bytes"),
            pl.col("ino").cast(pl.Int64, strict=False)))
    return ANDROID_FS_EVENT.validate(pl.concat(frames).sort("ts", maintain_order=True))
