"""Where a replayed file lives: every path of the recording mapped under the replay's root, never outside it.

A recording names files by absolute paths (strace -y, android_fs), sometimes by relative ones (a path argument
strace could not make absolute). A replay writes all of them under one directory of the target (the generator's
root: the stack's directory when it is empty, as a fresh stack's is, else PATH/mobiperf_replay), so:

  map_path(path, workdir)
    pseudo    /proc, /sys, /dev and what is no file at all (pipe:[..], socket:[..], anon_inode:..): not storage
    outside   a run on a stack: a path outside the stack's directory (the host's libraries, the run's own
              stdout): not on the stack under test, left out
    inside    the path relative to the root: the stack's directory is the root itself (a run's
              /var/tmp/.../data/test.db is `test.db`); any other absolute path keeps its components under the root
              (/data/data/app/db is `data/data/app/db`, for a trace from a phone)
  The path is normalised first (posixpath.normpath: `a/./b`, `a//b`, `a/x/../b` are `a/b`). An absolute path
  cannot climb above `/`, so `/../../etc/passwd` is `etc/passwd` under the root. A relative path that still
  starts with `..` after normalising has its leading `..` components dropped (`climbed` in the notes): mapped
  inside, never outside. The generator checks every path again when it reads the script (mb_rs_path_ok:
  relative, no `..` component, no NUL byte).
  DROP_CACHES is the one path outside the root a replay names: the workload's writes to
  /proc/sys/vm/drop_caches decide what its later reads find in the page cache, so they are replayed as such.

escape_path writes a path as one word of the script: `%XX` for a space, `%`, a control character and every byte
above 0x7e (UTF-8 names survive byte for byte).
"""

from __future__ import annotations

import posixpath

import polars as pl

DROP_CACHES = "/proc/sys/vm/drop_caches"
PSEUDO_PREFIXES = ("/proc/", "/sys/", "/dev/")
NOT_FILES = ("pipe:", "socket:", "anon_inode:", "[")


def map_path(path: str, workdir: str | None) -> tuple[str, str]:
    """(kind, relative path): kind is inside, outside, pseudo, climbed (mapped inside, see above) or none."""
    if not path:
        return "none", ""
    if path == DROP_CACHES:
        return "inside", DROP_CACHES
    if path.startswith(NOT_FILES):
        return "pseudo", ""
    norm = posixpath.normpath(path)
    if norm.startswith("//"):
        norm = norm[1:]  # POSIX keeps a leading `//`; it is `/` on Linux
    if workdir and norm.startswith("/"):  # the stack's directory first: it may itself be under /dev/shm
        base = posixpath.normpath(workdir)
        if norm == base:
            return "inside", "."
        if norm.startswith(base.rstrip("/") + "/"):
            return "inside", norm[len(base.rstrip("/")) + 1:]
    if (norm + "/").startswith(PSEUDO_PREFIXES):
        return "pseudo", ""
    if workdir and norm.startswith("/"):
        return "outside", ""
    if norm.startswith("/"):
        return "inside", norm.lstrip("/") or "."
    parts = norm.split("/")
    kept = [p for p in parts if p != ".."]
    return ("climbed" if len(kept) < len(parts) else "inside"), "/".join(kept) or "."


def map_paths(paths: pl.Series, workdir: str | None) -> pl.DataFrame:
    """kind and mapped path of every path in the series (each distinct path worked out once)."""
    distinct = paths.fill_null("").unique().to_list()
    mapped = {p: map_path(p, workdir) for p in distinct}
    kinds = {p: k for p, (k, _) in mapped.items()}
    rel = {p: r for p, (_, r) in mapped.items()}
    s = paths.fill_null("")
    return pl.DataFrame({"kind": s.replace_strict(kinds, return_dtype=pl.Utf8),
                         "rel": s.replace_strict(rel, return_dtype=pl.Utf8)})


_SAFE = frozenset(range(0x21, 0x7f)) - {ord("%")}


def escape_path(path: str) -> str:
    """A path as one word of the replay script (module docstring)."""
    data = path.encode("utf-8", "surrogateescape")
    if all(b in _SAFE for b in data):
        return path
    return "".join(chr(b) if b in _SAFE else f"%{b:02X}" for b in data)


def is_safe(rel: str) -> bool:
    """What the generator accepts: relative, no `..` component, no NUL byte (DROP_CACHES aside)."""
    if rel == DROP_CACHES:
        return True
    return bool(rel) and not rel.startswith("/") and "\0" not in rel and ".." not in rel.split("/")


def parents(rel: str) -> list[str]:
    """The directories above a mapped path, outermost first (`a/b/c` -> `a`, `a/b`)."""
    parts = rel.split("/")[:-1]
    return ["/".join(parts[:i + 1]) for i in range(len(parts))]
