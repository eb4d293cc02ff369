"""The replayable calls of a run's system calls: which are kept, under which name, on which mapped path.

Input: the workload's calls of one repetition, each once (analyzers/syscall.py's workload_syscalls: strace's paths
and flags on the kernel's times where both were traced), with the file behind every descriptor (strace -y).
Replayed, under the generator's names (reference-impl/mobibench/mb_rs.h):
  open (open, openat, openat2, creat), close, read, write, readv, writev, pread (pread64), pwrite (pwrite64),
  preadv (preadv, preadv2), pwritev (pwritev, pwritev2), lseek (_llseek; replayed as an absolute seek to the
  position it returned), fsync, fdatasync, ftruncate, fallocate (its mode is not in syscall_io: replayed as 0),
  rename (rename, renameat, renameat2), unlink (unlink, unlinkat), mkdir (mkdir, mkdirat), rmdir, dup (dup, dup2,
  dup3: the copy shares the file description, as in the kernel).
Left out, each counted in the notes:
  failed      a call that returned an error or never returned (the replay would not do what the recording did)
  not replayable  mmap'ed IO (mmap, msync: loads and stores are no system calls), sync_file_range, sendfile,
              splice, copy_file_range, io_submit, io_uring_enter
  not storage /proc, /sys, /dev, pipes, sockets (paths.py); /proc/sys/vm/drop_caches is kept (paths.py)
  outside     a run on a stack: files outside the stack's directory (the host's libraries, the run's stdout)
  no path     a descriptor whose file strace did not name (ftrace syscalls alone carry no paths; without -y the
              path comes from the descriptor's open: fill_descriptor_paths)
Sizes: what the call moved (its return value) for writes, what it asked for (request_bytes, else its return value)
for reads, so a read at the end of a file asks for as much as it did.
"""

from __future__ import annotations

from collections import Counter

import polars as pl

from mobiperf.analyzers.replay.paths import map_paths

OPS = {
    "open": "open", "openat": "open", "openat2": "open", "creat": "open", "close": "close", "read": "read",
    "write": "write", "readv": "readv", "writev": "writev", "pread64": "pread", "pwrite64": "pwrite",
    "preadv": "preadv", "preadv2": "preadv", "pwritev": "pwritev", "pwritev2": "pwritev", "lseek": "lseek",
    "_llseek": "lseek", "fsync": "fsync", "fdatasync": "fdatasync", "ftruncate": "ftruncate",
    "fallocate": "fallocate", "rename": "rename", "renameat": "rename", "renameat2": "rename",
    "unlink": "unlink", "unlinkat": "unlink", "mkdir": "mkdir", "mkdirat": "mkdir", "rmdir": "rmdir",
    "dup": "dup", "dup2": "dup", "dup3": "dup",
}
NOT_REPLAYABLE = ("mmap", "mmap2", "msync", "sync_file_range", "sendfile", "sendfile64", "splice",
                  "copy_file_range", "io_submit", "io_uring_enter")
FD_OPS = ("close", "read", "write", "readv", "writev", "pread", "pwrite", "preadv", "pwritev", "lseek", "fsync",
          "fdatasync", "ftruncate", "fallocate", "dup")
PATH_OPS = ("rename", "unlink", "mkdir", "rmdir")
READS = ("read", "readv", "pread", "preadv")
WRITES = ("write", "writev", "pwrite", "pwritev")

# strace's open flag names -> the generator's (mb_rs_parse.c); others are dropped (and said)
FLAG_NAMES = {f"O_{n.upper()}": n for n in (
    "rdonly", "wronly", "rdwr", "creat", "excl", "trunc", "append", "sync", "dsync", "direct", "directory",
    "nofollow", "noatime", "cloexec", "nonblock", "largefile", "noctty")}
FLAG_NAMES["O_NDELAY"] = "nonblock"

CALL_COLUMNS = {"tid": pl.Int32, "start_ns": pl.Int64, "end_ns": pl.Int64, "op": pl.Utf8, "fd": pl.Int64,
                "new_fd": pl.Int64, "path": pl.Utf8, "path2": pl.Utf8, "flags": pl.Utf8, "offset": pl.Int64,
                "size": pl.Int64, "ret": pl.Int64}


def script_flags(open_flags: str) -> tuple[str, list[str]]:
    """strace's `O_RDWR|O_CREAT|O_CLOEXEC` as `rdwr,creat,cloexec`, and the names the generator has no use for."""
    names, dropped = [], []
    for name in (open_flags or "O_RDONLY").split("|"):
        if name in FLAG_NAMES:
            names.append(FLAG_NAMES[name])
        elif name:
            dropped.append(name)
    if not any(n in ("rdonly", "wronly", "rdwr") for n in names):
        names.insert(0, "rdonly")
    return ",".join(names), dropped


def replayable_calls(calls: pl.DataFrame, workdir: str | None) -> tuple[pl.DataFrame, Counter]:
    """(the calls to replay, CALL_COLUMNS, in start order; what was left out, by reason)."""
    left_out: Counter = Counter()
    named = calls.filter(pl.col("syscall").is_in([*OPS, *NOT_REPLAYABLE]))
    for name, n in named.filter(pl.col("syscall").is_in(NOT_REPLAYABLE)).group_by("syscall").len().rows():
        left_out[f"not replayable: {name}"] += n
    named = named.filter(pl.col("syscall").is_in(list(OPS))).sort("ts", maintain_order=True).with_row_index("_row")
    named = fill_descriptor_paths(named)
    failed = pl.col("ret").is_null() | (pl.col("ret") < 0)
    left_out["failed or unfinished"] += int(named.filter(failed).height)
    ok = named.filter(~failed).with_columns(op=pl.col("syscall").replace_strict(OPS, return_dtype=pl.Utf8),
                                            path=pl.col("path").fill_null("").str.replace(r" \(deleted\)$", ""))
    where = map_paths(ok["path"], workdir)
    where2 = map_paths(ok["new_path"].fill_null(""), workdir)
    ok = ok.with_columns(_kind=where["kind"], _rel=where["rel"], _kind2=where2["kind"], _rel2=where2["rel"])
    for kind, n in ok.filter(pl.col("_kind") != "inside").group_by("_kind").len().rows():
        left_out[_KIND_NOTES.get(kind, kind)] += n
    mapped = pl.col("_kind").is_in(["inside", "climbed"])
    two = pl.col("op") == "rename"
    keep = mapped & (~two | pl.col("_kind2").is_in(["inside", "climbed"]))
    left_out["rename with one side outside the replayed files"] += int(
        ok.filter(two & mapped & ~pl.col("_kind2").is_in(["inside", "climbed"])).height)
    root = pl.col("op").is_in(PATH_OPS) & ((pl.col("_rel") == ".") | (pl.col("_rel2") == "."))
    left_out["calls that would make, remove or rename the replay's root itself"] += int(ok.filter(keep & root).height)
    ok = ok.filter(keep & ~root)
    flags, dropped = _flags(ok)
    for name, n in dropped.items():
        left_out[f"open flag not replayed: {name}"] += n
    is_read = pl.col("op").is_in(READS)
    return ok.select(
        pl.col("pid").cast(pl.Int32).alias("tid"), pl.col("ts").alias("start_ns"),
        (pl.col("ts") + pl.col("dur").fill_null(0)).alias("end_ns"), "op",
        pl.when(pl.col("op").is_in(FD_OPS)).then(pl.col("fd")).otherwise(None).cast(pl.Int64).alias("fd"),
        pl.when(pl.col("op").is_in(["open", "dup"])).then(pl.col("ret")).otherwise(None).alias("new_fd"),
        pl.col("_rel").alias("path"), pl.when(two).then(pl.col("_rel2")).otherwise(pl.lit("")).alias("path2"),
        flags.alias("flags"),
        pl.when(pl.col("op").is_in(["pread", "pwrite", "preadv", "pwritev", "fallocate"]))
        .then(pl.col("offset_bytes")).when(pl.col("op") == "lseek").then(pl.col("ret"))
        .when(pl.col("op") == "ftruncate").then(pl.col("offset_bytes")).otherwise(None).alias("offset"),
        pl.when(is_read & (pl.col("request_bytes") >= 0)).then(pl.col("request_bytes"))
        .when(is_read | pl.col("op").is_in(WRITES)).then(pl.col("ret"))
        .when(pl.col("op") == "fallocate").then(pl.col("request_bytes")).otherwise(None).alias("size"),
        "ret",
    ).cast(CALL_COLUMNS), left_out


FILE_PROOF = ("pread64", "pwrite64", "preadv", "preadv2", "pwritev", "pwritev2", "lseek", "_llseek", "fsync",
              "fdatasync", "ftruncate", "fallocate")
UNNAMED_FD = "/unnamed/fd-"


def fill_descriptor_paths(calls: pl.DataFrame) -> pl.DataFrame:
    """A log without strace -y names no descriptor's file: a call on descriptor `fd` with no path takes the path of
    the latest successful open (or dup, itself named so) that returned `fd` before it, unless `fd` was closed since
    (calls in start order, `_row`), in any thread: the threads of one process share their descriptors. A descriptor
    opened before the log began is named unnamed/fd-N when the log proves it a regular file (FILE_PROOF)."""
    blank = (pl.col("path").fill_null("") == "") & pl.col("syscall").is_in([n for n, op in OPS.items() if op in FD_OPS])
    if not calls.filter(blank).height:
        return calls
    calls = calls.with_columns(pl.col("path").fill_null(""))
    for _ in range(2):  # a dup of an opened descriptor, then a dup of that one
        binders = calls.filter(pl.col("syscall").is_in(["open", "openat", "openat2", "creat", "dup", "dup2", "dup3"])
                               & (pl.col("ret") >= 0) & (pl.col("path") != "")).select(
            pl.col("_row").alias("_b"), pl.col("ret").cast(pl.Int64).alias("_fd"), pl.col("path").alias("_bpath"))
        # a close ends the binding: the number may come back as a socket, a pipe, an eventfd the log never opened
        closes = calls.filter((pl.col("syscall") == "close") & (pl.col("ret") == 0)).select(
            pl.col("_row").alias("_b"), pl.col("fd").cast(pl.Int64).alias("_fd"), pl.lit("").alias("_bpath"))
        binders = pl.concat([binders, closes])
        probe = calls.filter(blank).select("_row", pl.col("fd").cast(pl.Int64).alias("_fd"))
        found = probe.sort("_row").join_asof(binders.sort("_b"), left_on="_row", right_on="_b", by="_fd",
                                             strategy="backward", allow_exact_matches=False, check_sortedness=False)
        calls = calls.join(found.select("_row", "_bpath"), on="_row", how="left", maintain_order="left") \
            .with_columns(path=pl.when(blank).then(pl.col("_bpath").fill_null("")).otherwise(pl.col("path"))) \
            .drop("_bpath")
    # opened before the log began: a descriptor that a positional call, a seek or a sync used successfully is a
    # regular file (pipes, sockets and eventfds refuse them), replayed as unnamed/fd-N
    proven = calls.filter(blank & pl.col("syscall").is_in(FILE_PROOF) & (pl.col("ret") >= 0))["fd"].unique()
    return calls.with_columns(path=pl.when(blank & pl.col("fd").is_in(proven.implode()))
                              .then(pl.lit(UNNAMED_FD) + pl.col("fd").cast(pl.Utf8)).otherwise(pl.col("path")))


_KIND_NOTES = {"climbed": "calls on a relative path that climbed above its directory (`..`): mapped inside the root",
               "pseudo": "not storage (/proc, /sys, /dev, pipes, sockets)",
               "outside": "outside the stack's directory (the host's files: libraries, the run's output)",
               "none": "no path (a descriptor strace did not name)"}


def _flags(calls: pl.DataFrame) -> tuple[pl.Expr, Counter]:
    """The generator's flags of every open (from open_flags; creat's are its own), and the flag names it has no
    use for, counted per call."""
    opens = calls.filter((pl.col("op") == "open") & (pl.col("syscall") != "creat"))
    dropped: Counter = Counter()
    mapping = {}
    for text, n in opens.group_by(pl.col("open_flags").fill_null("")).len().rows():
        mapping[text], names = script_flags(text)
        for name in names:
            dropped[name] += n
    expr = (pl.when(pl.col("syscall") == "creat").then(pl.lit("wronly,creat,trunc"))
            .when(pl.col("op") == "open").then(pl.col("open_flags").fill_null("")
                                               .replace_strict(mapping, default="rdonly", return_dtype=pl.Utf8))
            .otherwise(pl.lit("")))
    return expr, dropped
