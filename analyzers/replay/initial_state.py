"""The state the recorded workload started from: the directories and files that existed, and their sizes.

The generator makes them before its timed part (mb_rs_files.c), so a replay reads what the recording read and
creates what it created. From the calls alone (a trace does not list the files that were there):

  position    a read or write without an offset works at its handle's position: the last lseek's result (0 at
              the open) plus what the calls since moved (their return values); an O_APPEND write's real position
              (the file's end) is not known and counts as that position
  a file existed   when its first reference needs it: an open without O_CREAT (or of a descriptor opened before
              the recording, handles.py), an unlink, a rename's source; or when a read returned data beyond
              everything the recording wrote to it before (the data was there). An open with O_CREAT|O_EXCL as
              the first reference says it did not.
  its size    the end of the furthest such read (0 when only its existence is known)
  a directory existed  when it holds a referenced path, or was opened or removed as one, unless the recording
              made it (its mkdir comes before any use of it or of anything under it); what is under a directory
              the recording made did not exist either. The replay's root (`.`) always exists.
  need        what the replay can occupy: for every file its largest extent (initial size, furthest write, a
              truncate's length, a fallocate's end), plus 4 KiB per file and directory; files deleted on the way
              are still counted, so it is an upper bound, which the generator checks against the target's free
              space before it writes anything.
Limits: a file truncated and read again, or one written by another process during the recording, can be given a
size it did not have; a file never read keeps size 0 even if it was larger.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from mobiperf.analyzers.replay.from_syscalls import READS, WRITES
from mobiperf.analyzers.replay.paths import DROP_CACHES, parents

BLOCK = 4096


@dataclass
class InitialState:
    dirs: list[str]                     # outermost first
    files: list[tuple[str, int]]        # (path, size)
    need_bytes: int


def with_positions(calls: pl.DataFrame) -> pl.DataFrame:
    """calls with `at`: where each read or write worked (its offset, else its handle's position), and `moved`."""
    data = pl.col("op").is_in([*READS, *WRITES])
    moved = pl.when(data & (pl.col("ret") > 0)).then(pl.col("ret")).otherwise(0)
    seg = (pl.col("op") == "lseek").cast(pl.Int64).cum_sum().over("handle")
    calls = calls.with_row_index("_o").with_columns(_moved=moved, _seg=seg)
    calls = calls.with_columns(_base=pl.when(pl.col("op") == "lseek").then(pl.col("offset")).otherwise(None)
                               .first().over(["handle", "_seg"]).fill_null(0))
    calls = calls.with_columns(_pos=pl.col("_base") + pl.col("_moved").cum_sum().over(["handle", "_seg"])
                               - pl.col("_moved"))
    return calls.with_columns(
        at=pl.when(pl.col("op").is_in(["pread", "pwrite", "preadv", "pwritev"])).then(pl.col("offset"))
        .when(data).then(pl.col("_pos")).otherwise(None), moved=pl.col("_moved")
    ).sort("_o").drop("_o", "_moved", "_seg", "_base", "_pos")


def infer_initial_state(calls: pl.DataFrame, *, known_sizes: dict[str, int] | None = None,
                        all_exist: bool = False) -> InitialState:
    """The directories and files to make before the timed part (module docstring); calls carry `at`.
    known_sizes: sizes the trace recorded (a phone's i_size), at least what the reads show; all_exist: every file
    existed (a phone's file events name no creation)."""
    calls = calls.filter(pl.col("path") != DROP_CACHES).with_row_index("_o")
    refs = pl.concat([calls.select("_o", "op", "flags", "path", pl.lit(1).alias("_side")),
                      calls.filter(pl.col("op") == "rename").select("_o", "op", "flags",
                                                                    pl.col("path2").alias("path"),
                                                                    pl.lit(2).alias("_side"))])
    paths = set(refs["path"].unique().to_list()) - {"."}
    holders = {p for path in paths for p in parents(path)}
    as_dir = set(refs.filter(pl.col("op").is_in(["mkdir", "rmdir"])
                             | pl.col("flags").fill_null("").str.contains("directory"))["path"].to_list())
    dirs = (holders | as_dir | (paths & holders)) - {"."}
    made = _made_dirs(refs, dirs)
    existing_dirs = sorted((d for d in dirs if not any(d == m or d.startswith(m + "/") for m in made)),
                           key=lambda d: (d.count("/"), d))
    files = _existing_files(calls, refs, dirs, made)
    if all_exist:
        files += [(p, 0) for p in sorted(paths - dirs - {f for f, _ in files})]
    if known_sizes:
        files = [(p, max(size, known_sizes.get(p) or 0)) for p, size in files]
    extents = _extents(calls.filter(~pl.col("path").is_in(list(dirs))))
    sizes = dict(files)
    need = sum(max(extents.get(p, 0), sizes.get(p, 0)) for p in set(extents) | set(sizes))
    need += BLOCK * (len(paths) + len(existing_dirs))
    return InitialState(existing_dirs, sorted(files), need)


def _made_dirs(refs: pl.DataFrame, dirs: set[str]) -> set[str]:
    """Directories the recording made: its mkdir comes first among the uses of it and of what is under it."""
    mkdirs = refs.filter(pl.col("op") == "mkdir").group_by("path").agg(pl.col("_o").min().alias("_mk"))
    made = set()
    for d, mk in mkdirs.rows():
        under = refs.filter((pl.col("path") == d) | pl.col("path").str.starts_with(d + "/"))
        if under.height and int(under["_o"].min()) >= mk:
            made.add(d)
    return made


def _existing_files(calls: pl.DataFrame, refs: pl.DataFrame, dirs: set[str], made: set[str]) -> list[tuple]:
    """(path, size) of every file that existed before the recording (module docstring)."""
    first = refs.sort("_o").group_by("path", maintain_order=True).first()
    first = first.filter(~pl.col("path").is_in([*dirs, "."]))
    synthetic = (calls.filter(pl.col("is_synthetic").fill_null(False))["path"].unique().to_list()
                 if "is_synthetic" in calls.columns else [])
    needs = first.filter(
        ((pl.col("op") == "open") & ~pl.col("flags").fill_null("").str.contains("creat"))
        | pl.col("path").is_in(synthetic) | pl.col("op").is_in(["unlink", "truncate", "ftruncate", "fallocate"])
        | ((pl.col("op") == "rename") & (pl.col("_side") == 1)) | pl.col("op").is_in([*READS, *WRITES]))
    excl = set(first.filter((pl.col("op") == "open") & pl.col("flags").fill_null("").str.contains("excl"))["path"]
               .to_list())
    sizes = _read_evidence(calls)
    existing = (set(needs["path"].to_list()) | {p for p, s in sizes.items() if s > 0}) - excl
    existing = {p for p in existing if not any(p.startswith(m + "/") for m in made)}
    return [(p, sizes.get(p, 0)) for p in existing]


def _read_evidence(calls: pl.DataFrame) -> dict[str, int]:
    """Per file, the end of the furthest read that went beyond everything written to it before."""
    data = calls.filter(pl.col("op").is_in([*READS, *WRITES]) & pl.col("at").is_not_null())
    data = data.with_columns(_end=pl.col("at") + pl.col("moved"))
    data = data.with_columns(_written=pl.when(pl.col("op").is_in(WRITES)).then(pl.col("_end")).otherwise(0)
                             .cum_max().shift(1, fill_value=0).over("path"))
    reads = data.filter(pl.col("op").is_in(READS) & (pl.col("moved") > 0) & (pl.col("_end") > pl.col("_written")))
    return dict(reads.group_by("path").agg(pl.col("_end").max()).rows())


def _extents(calls: pl.DataFrame) -> dict[str, int]:
    """Per file, the furthest byte a write, truncate or fallocate reached."""
    ends = pl.when(pl.col("op").is_in(WRITES)).then(pl.col("at") + pl.col("moved")) \
        .when(pl.col("op") == "ftruncate").then(pl.col("offset")) \
        .when(pl.col("op") == "fallocate").then(pl.col("offset") + pl.col("size")).otherwise(None)
    return dict(calls.select("path", ends.alias("_e")).drop_nulls().group_by("path").agg(pl.col("_e").max()).rows())
