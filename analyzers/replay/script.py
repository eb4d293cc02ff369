"""The replay script the generator reads (reference-impl/mobibench/mb_rs.h has the format): a header, the
directories and files that existed, then one line per call, in start order (each thread's calls in its order).

    mobiperf-replay 1
    threads 2
    handles 3
    need 1052672
    dir data
    file data/notes.db 98304
    c 0 0 open 0 rdwr data/notes.db
    c 0 1250 pread 0 0 16384
    c 1 40 pwrite 1 0 4096 @0:2
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from mobiperf.analyzers.replay.paths import escape_path, is_safe
from mobiperf.analyzers.replay.workload import ReplayWorkload
from mobiperf.core.errors import UsageError

MAGIC = "mobiperf-replay 1"


def script_text(w: ReplayWorkload) -> str:
    """The whole script (module docstring)."""
    _check_paths(w)
    head = [MAGIC, f"threads {w.nthreads}", f"handles {w.nhandles}", f"need {w.state.need_bytes}"]
    head += [f"dir {escape_path(d)}" for d in w.state.dirs]
    head += [f"file {escape_path(p)} {size}" for p, size in w.state.files]
    lines = call_lines(w)
    return "\n".join(head) + "\n" + ("\n".join(lines.to_list()) + "\n" if len(lines) else "")


def write_script(w: ReplayWorkload, path: Path) -> Path:
    path = Path(path)
    path.write_text(script_text(w))
    return path


def call_lines(w: ReplayWorkload) -> pl.Series:
    """One `c ...` line per call."""
    calls = w.calls
    paths = pl.concat([calls["path"], calls["path2"]]).unique().drop_nulls().to_list()
    escaped = {p: escape_path(p) for p in paths}
    waits = w.waits.group_by("thread", "index").agg(
        pl.concat_str(pl.lit(" @"), pl.col("wait_thread").cast(pl.Utf8), pl.lit(":"),
                      pl.col("wait_count").cast(pl.Utf8)).str.join("").alias("_waits"))
    calls = calls.join(waits, on=["thread", "index"], how="left", maintain_order="left")
    num = {c: pl.col(c).fill_null(0).cast(pl.Int64).cast(pl.Utf8) for c in ("handle", "handle2", "offset", "size")}
    path = pl.col("path").replace_strict(escaped, default="", return_dtype=pl.Utf8)
    path2 = pl.col("path2").replace_strict(escaped, default="", return_dtype=pl.Utf8)
    op = pl.col("op")
    sp = pl.lit(" ")
    args = (pl.when(op == "open").then(pl.concat_str(num["handle"], sp, pl.col("flags"), sp, path))
            .when(op.is_in(["close", "fsync", "fdatasync"])).then(num["handle"])
            .when(op.is_in(["read", "write", "readv", "writev"])).then(pl.concat_str(num["handle"], sp, num["size"]))
            .when(op.is_in(["pread", "pwrite", "preadv", "pwritev"]))
            .then(pl.concat_str(num["handle"], sp, num["offset"], sp, num["size"]))
            .when(op.is_in(["lseek", "ftruncate"])).then(pl.concat_str(num["handle"], sp, num["offset"]))
            .when(op == "fallocate").then(pl.concat_str(num["handle"], pl.lit(" 0 "), num["offset"], sp,
                                                        num["size"]))
            .when(op == "dup").then(pl.concat_str(num["handle"], sp, num["handle2"]))
            .when(op == "rename").then(pl.concat_str(path, sp, path2))
            .otherwise(path))
    line = pl.concat_str(pl.lit("c "), pl.col("thread").cast(pl.Utf8), sp, pl.col("think_ns").cast(pl.Utf8), sp,
                         op, sp, args, pl.col("_waits").fill_null(""))
    return calls.select(line.alias("line"))["line"]


def _check_paths(w: ReplayWorkload) -> None:
    """Every path the script names is under the root (paths.py made them so: this is the second lock)."""
    named = set(w.calls["path"].drop_nulls().to_list()) | set(w.calls["path2"].drop_nulls().to_list())
    named |= set(w.state.dirs) | {p for p, _ in w.state.files}
    bad = sorted(p for p in named - {""} if not is_safe(p))
    if bad:
        raise UsageError(f"replay: {len(bad)} path(s) would leave the replay's directory, e.g. {bad[0]!r}")
