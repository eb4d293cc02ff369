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
    op = pl.col("op")

    def part(value: pl.Expr, when: pl.Expr) -> pl.Expr:
        return pl.when(when).then(value)

    def num(c: str) -> pl.Expr:
        return pl.col(c).fill_null(0).cast(pl.Int64).cast(pl.Utf8)

    # each op's arguments, in the order the generator reads them (mb_rs_parse.c): one concatenation of the parts
    # an op has (the others null): open h f p, dup h h2, fallocate h 0 o z, pread h o z, lseek h o, read h z ...
    parts = [
        part(num("handle"), ~op.is_in(["rename", "unlink", "mkdir", "rmdir"])),
        part(pl.col("flags"), op == "open"), part(pl.lit("0"), op == "fallocate"),
        part(num("handle2"), op == "dup"),
        part(num("offset"), op.is_in(["pread", "pwrite", "preadv", "pwritev", "lseek", "ftruncate", "fallocate"])),
        part(num("size"), op.is_in(["read", "write", "readv", "writev", "pread", "pwrite", "preadv", "pwritev",
                                    "fallocate"])),
        part(pl.col("path").replace_strict(escaped, default="", return_dtype=pl.Utf8),
             op.is_in(["open", "rename", "unlink", "mkdir", "rmdir"])),
        part(pl.col("path2").replace_strict(escaped, default="", return_dtype=pl.Utf8), op == "rename")]
    line = pl.concat_str(pl.lit("c"), pl.col("thread").cast(pl.Utf8), pl.col("think_ns").cast(pl.Utf8), op, *parts,
                         separator=" ", ignore_nulls=True) + pl.col("_waits").fill_null("")
    return calls.select(line.alias("line"))["line"]


def _check_paths(w: ReplayWorkload) -> None:
    """Every path the script names is under the root (paths.py made them so: this is the second lock)."""
    named = set(w.calls["path"].drop_nulls().to_list()) | set(w.calls["path2"].drop_nulls().to_list())
    named |= set(w.state.dirs) | {p for p, _ in w.state.files}
    bad = sorted(p for p in named - {""} if not is_safe(p))
    if bad:
        raise UsageError(f"replay: {len(bad)} path(s) would leave the replay's directory, e.g. {bad[0]!r}")
