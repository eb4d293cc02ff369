"""The nest of a phone's own trace: its FUSE requests, Android's file layer (android_fs) and the file system's
syncs start the nests that a call would start.

A trace the phone recorded (atrace/systrace with the disk and android_fs categories, Perfetto) has no system
calls. What a thread did to a file is still there:
  fuse   a FUSE request, sent by the requesting thread (its daemon's work nested as io_span.py says)
  file   android_fs_dataread_start -> _end (a read that missed the page cache) and android_fs_datawrite_start ->
         _end (a write entering it), in the thread that did it, with the file's path and inode (file_span.py)
  fs     ext4/f2fs sync_file enter -> exit, in the syncing thread
io_span.py nests them as it nests a call's (a sync_file inside a FUSE request's service belongs to that request,
the blocks a thread submitted while its file span or sync was open to that span, the journal commits a sync
waited for to the sync); each one that nothing contains then starts a nest of its own thread, as a call does
(root_layers). A block request none of them was open around (readahead run from a kworker, writeback, a periodic
commit) is background, by task; so is every block request of a trace that has block events alone.

With system calls in the trace, the calls are the roots and the file layer sits inside them (io_span.py's
nest_calls): nest_device_trace then leaves io_span to it.
"""

from __future__ import annotations

import polars as pl

from mobiperf.analyzers.file_span import file_entities
from mobiperf.analyzers.io_span import build_io_spans
from mobiperf.core.errors import NotApplicable

ROOT_LAYERS = ("fuse", "file", "fs")
NO_CALLS = {"rep": pl.Int32, "syscall": pl.Utf8, "pid": pl.Int32, "comm": pl.Utf8, "ts": pl.Int64,
            "end_ts": pl.Int64, "slack_ns": pl.Int64, "row": pl.Int64, "path": pl.Utf8, "is_strace_timed": pl.Boolean,
            "sync_mode": pl.Utf8, "file_type": pl.Utf8, "ret": pl.Int64, "open_flags": pl.Utf8}


def nest_device_trace(block_io: pl.DataFrame, file_io: pl.DataFrame | None = None,
                      fsync_event: pl.DataFrame | None = None, jbd2_commit: pl.DataFrame | None = None,
                      fuse_req: pl.DataFrame | None = None, syscall_io: pl.DataFrame | None = None) -> pl.DataFrame:
    """io_span of a trace without system calls (module docstring)."""
    if syscall_io is not None and len(syscall_io):
        raise NotApplicable("the trace has system calls: their nests (io_span) hold the file layer")
    return build_io_spans(pl.DataFrame(schema=NO_CALLS), fuse_req=fuse_req, fsync_event=fsync_event,
                          jbd2_commit=jbd2_commit, block_io=block_io, files=file_entities(file_io),
                          root_layers=ROOT_LAYERS)
