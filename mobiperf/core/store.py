"""The run store: many run directories under one root, local or at any fsspec URL, and their index.

    STORE/<run>/run.json            run directories, as `mobiperf run` writes them, one level down ...
    STORE/<group>/<run>/run.json    ... or two (a sweep's runs/, one folder per night)
    STORE/index.parquet             the index: one row per run directory

A run's index row holds its facts (run_id = its path under the root; target, kernel, stack, workload, status,
...), its headline metrics (every metric without labels or whose only label is `op`, one column each:
latency.d2c.p99{op=write} -> latency_d2c_p99_write; run_workload_time is the median workload wall time in ns, as
compare counts it), all its metrics (a list column), the tables it has (`tables/block_rq`, `results/io_class`,
...) and the fingerprint of its run.json (size, modification time, inode) when it was indexed. `update_index`
reads only the runs whose fingerprint changed or that are new, and drops the rows of runs that are gone.

A run that cannot be read (run.json corrupt or of a newer format, a table that is not framed as Parquet, or whose
footer a query finds unreadable) keeps a row with `error` saying why, and no tables: queries skip it, never fail
on it.

Limits: run directories are looked for one or two levels below the root, not deeper (a run directory's own
raw/tables/results are not searched); a table's Parquet framing (magic bytes, footer length) is checked when its
run is indexed, its footer and pages when a query reads it; two processes updating one index at once both write
a correct index, the last wins. A query reads every run's file of each table it names: across 10,000 runs that is
10,000 files (seconds); the headline metrics in the index answer in well under a second.
"""

from __future__ import annotations

import io
import os
import re
import shlex
import statistics
import time
from dataclasses import dataclass
from typing import Any

import polars as pl

from mobiperf.core.errors import UsageError
from mobiperf.core.run_facts import Metric, RunMeta

INDEX_NAME = "index.parquet"
FACTS = ("run_id", "target", "kernel", "stack", "workload")   # the columns every table view carries
TABLE_KINDS = ("tables", "results")
INDEX_VERSION = 1


@dataclass(frozen=True)
class Store:
    """A store's root: an fsspec filesystem and the root path on it (no protocol)."""

    url: str
    fs: Any
    root: str

    @classmethod
    def open(cls, url: str | os.PathLike) -> "Store":
        import fsspec

        text = os.fspath(url)
        try:
            fs, root = fsspec.core.url_to_fs(text)
        except (ImportError, ValueError) as e:
            raise UsageError(f"{text}: cannot open this store URL: {e}") from None
        root = root.rstrip("/") or "/"
        if not fs.isdir(root):
            raise UsageError(f"{text}: no such store directory")
        return cls(text, fs, root)

    @property
    def is_local(self) -> bool:
        protocols = self.fs.protocol if isinstance(self.fs.protocol, tuple) else (self.fs.protocol,)
        return "file" in protocols or "local" in protocols

    def path(self, *parts: str) -> str:
        return "/".join([self.root.rstrip("/"), *parts])

    def file_url(self, path: str) -> str:
        """A path of this store as DuckDB and Polars name it: plain for local files, with its protocol otherwise."""
        return path if self.is_local else self.fs.unstrip_protocol(path)


def is_run_dir(path: str | os.PathLike) -> bool:
    """A local run directory: one with a run.json at its top (told by content, not by name)."""
    return os.path.isfile(os.path.join(os.fspath(path), "run.json"))


# --- finding runs -------------------------------------------------------------------------------------------------

def _fingerprint(info: dict) -> str:
    """What changes when run.json is rewritten (RunDir.write_meta renames a new file over it): size, modification
    time, and the inode where the filesystem has one; an object store's ETag otherwise."""
    stamp = info.get("mtime") or info.get("LastModified") or info.get("ETag") or info.get("created") or ""
    return f"{info.get('size')}:{stamp}:{info.get('ino', '')}"


def discover_runs(store: Store) -> dict[str, str]:
    """{run_id: fingerprint of its run.json} of every run directory one or two levels below the root."""
    if store.is_local:
        return _discover_local(store.root)
    root = store.root.rstrip("/")
    found: dict[str, str] = {}
    for path, info in store.fs.glob(f"{root}/*/run.json", detail=True).items():
        found[path[len(root) + 1:-len("/run.json")]] = _fingerprint(info)
    for entry in store.fs.ls(root, detail=True):
        name = entry["name"].rstrip("/").rsplit("/", 1)[-1]
        if entry.get("type") != "directory" or name in found or name.startswith((".", "_")):
            continue
        for path, info in store.fs.glob(f"{root}/{name}/*/run.json", detail=True).items():
            found[path[len(root) + 1:-len("/run.json")]] = _fingerprint(info)
    return found


def _discover_local(root: str) -> dict[str, str]:
    """discover_runs on a local filesystem, with os.scandir (an order of magnitude faster than fsspec's glob)."""
    found: dict[str, str] = {}

    def visit(directory: str, prefix: str, depth: int) -> None:
        try:
            entries = list(os.scandir(directory))
        except OSError:
            return
        for entry in entries:
            if entry.name.startswith((".", "_")) or not entry.is_dir(follow_symlinks=False):
                continue
            try:
                st = os.stat(os.path.join(entry.path, "run.json"))
            except OSError:
                if depth == 1:
                    visit(entry.path, f"{prefix}{entry.name}/", 2)
                continue
            found[prefix + entry.name] = _fingerprint({"size": st.st_size, "mtime": st.st_mtime_ns,
                                                       "ino": st.st_ino})
    visit(root, "", 1)
    return found


# --- one run's index row ------------------------------------------------------------------------------------------

def column_name(m: Metric) -> str | None:
    """The index column of a headline metric: one without labels, or whose only label is `op`, named by its
    name and op in SQL-friendly spelling (latency.d2c.p99{op=write} -> latency_d2c_p99_write); None for the
    others (they are in the `metric` view only)."""
    labels = m.get("labels") or {}
    if set(labels) - {"op"}:
        return None
    name = m["name"] + (f"_{labels['op']}" if labels else "")
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


def workload_text(command: list[str] | None) -> str:
    """The workload fact: the command line as one string (`sh -c SCRIPT` shows the script)."""
    command = list(command or [])
    if len(command) == 3 and command[:2] == ["sh", "-c"]:
        return command[2]
    return shlex.join(command)


def run_facts(run_id: str, meta: RunMeta) -> dict[str, Any]:
    """The facts of one run description: what queries group by."""
    target = meta.target or {}
    times = [r.workload_ns for r in meta.repetitions if r.exit_code in (0, None) and r.workload_ns is not None]
    return {
        "run_id": run_id, "target": target.get("target"), "kernel": target.get("kernel"),
        "stack": meta.stack, "workload": workload_text(meta.command),
        "status": meta.status, "created": meta.created, "host": meta.host,
        "mobiperf": meta.mobiperf, "scheduler": meta.scheduler, "device": meta.get("device"),
        "scope": meta.get("scope"), "model": target.get("model"), "android_version": target.get("android_version"),
        "repetitions": len(meta.repetitions), "program": (meta.command or [""])[0].rsplit("/", 1)[-1],
        "run_workload_time": float(statistics.median(times)) if times else None,
    }


def _check_table(store: Store, path: str) -> str | None:
    """None when the file is framed as Parquet (magic bytes at both ends, a footer length that fits the file);
    the reason otherwise. The footer itself is parsed when a query reads it (store_query marks the run damaged
    then), which keeps indexing at a few file reads per run."""
    try:
        with (open(path, "rb") if store.is_local else store.fs.open(path, "rb")) as f:
            head = f.read(4)
            size = f.seek(0, os.SEEK_END)
            if size < 12:
                return f"{size} bytes: too short for Parquet"
            f.seek(size - 8)
            tail = f.read(8)
    except OSError as e:
        return f"unreadable: {e}"
    footer = int.from_bytes(tail[:4], "little")
    if head != b"PAR1" or tail[4:] != b"PAR1":
        return "not a Parquet file (no PAR1 magic at both ends: truncated or overwritten)"
    if not 0 < footer <= size - 12:
        return f"footer length {footer} does not fit a file of {size} bytes"
    return None


def _list_tables(store: Store, run_id: str, kind: str) -> list[str]:
    """The Parquet files of one kind (tables/ or results/) of a run, sorted."""
    if store.is_local:
        try:
            names = os.listdir(store.path(run_id, kind))
        except OSError:
            return []
        return sorted(store.path(run_id, kind, n) for n in names if n.endswith(".parquet"))
    return sorted(store.fs.glob(store.path(run_id, kind, "*.parquet")))


def index_row(store: Store, run_id: str, fingerprint: str) -> dict[str, Any]:
    """The index row of one run; a damaged run gets a row with `error` and no tables."""
    from mobiperf.core.runstore import check_meta

    row: dict[str, Any] = {"run_id": run_id, "fingerprint": fingerprint, "error": None, "tables": []}
    meta_path = store.path(run_id, "run.json")
    try:
        meta = check_meta(store.fs.cat_file(meta_path), f"{run_id}/run.json")
    except UsageError as e:
        return {**row, "error": str(e)}
    except OSError as e:
        return {**row, "error": f"{run_id}/run.json unreadable: {e}"}
    row.update(run_facts(run_id, meta))
    tables = []
    for kind in TABLE_KINDS:
        for path in _list_tables(store, run_id, kind):
            name = path.rsplit("/", 1)[-1][:-len(".parquet")]
            problem = _check_table(store, path)
            if problem:
                return {**row, "tables": [], "error": f"{run_id}/{kind}/{name}.parquet is damaged: {problem}"}
            tables.append(f"{kind}/{name}")
    row["tables"] = tables
    metrics = meta.metrics or []
    row["metrics"] = [{"name": m.name, "key": m.key, "value": _float(m.value), "unit": m.unit,
                       "labels": ",".join(f"{k}={v}" for k, v in sorted(m.labels.items()))} for m in metrics]
    for m in metrics:
        column = column_name(m)
        if column and column not in _BASE_SCHEMA:
            row[column] = _float(m.value)
    return row


def _float(v: Any) -> float | None:
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


# --- the index ----------------------------------------------------------------------------------------------------

_BASE_SCHEMA = {"run_id": pl.String, "fingerprint": pl.String, "error": pl.String, "tables": pl.List(pl.String),
                "metrics": pl.List(pl.Struct({"name": pl.String, "key": pl.String, "value": pl.Float64,
                                              "unit": pl.String, "labels": pl.String})),
                "target": pl.String, "kernel": pl.String, "stack": pl.String, "workload": pl.String,
                "status": pl.String, "created": pl.String, "host": pl.String, "mobiperf": pl.String,
                "scheduler": pl.String, "device": pl.String, "scope": pl.String, "model": pl.String,
                "android_version": pl.String, "repetitions": pl.Int64, "program": pl.String,
                "run_workload_time": pl.Float64}


@dataclass
class IndexUpdate:
    """What one update of the index did."""

    index: pl.DataFrame
    runs: int
    read: int          # runs (re)read because they are new or their run.json changed
    removed: int
    damaged: int
    seconds: float


def rows_frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    """Index rows as a frame: the fixed columns typed, every headline metric column a Float64."""
    extra = sorted({k for r in rows for k in r} - set(_BASE_SCHEMA))
    schema = {**_BASE_SCHEMA, **{k: pl.Float64 for k in extra}}
    return pl.DataFrame([{k: r.get(k) for k in schema} for r in rows], schema=schema, orient="row")


def read_index(store: Store) -> pl.DataFrame | None:
    """The stored index, or None when there is none (or it is unreadable, or of another version: rebuilt)."""
    path = store.path(INDEX_NAME)
    try:
        if not store.fs.exists(path):
            return None
        df = pl.read_parquet(io.BytesIO(store.fs.cat_file(path)))
    except Exception:  # noqa: BLE001 - a damaged index is only a cache: rebuild it
        return None
    if "fingerprint" not in df.columns or "run_id" not in df.columns:
        return None
    return df


def write_index(store: Store, df: pl.DataFrame) -> bool:
    """Replace the stored index atomically (a local rename; one whole-object write elsewhere). False when the
    store is read-only: the index then lives only for this process."""
    buf = io.BytesIO()
    df.write_parquet(buf)
    path = store.path(INDEX_NAME)
    try:
        if store.is_local:
            tmp = store.path(f".{INDEX_NAME}.{os.getpid()}.tmp")
            with open(tmp, "wb") as f:
                f.write(buf.getvalue())
            os.replace(tmp, path)
        else:
            store.fs.pipe_file(path, buf.getvalue())
        return True
    except PermissionError:
        return False


def update_index(store: Store) -> IndexUpdate:
    """Bring the index up to date with the store: read new and changed runs, drop the rows of removed ones."""
    started = time.perf_counter()
    found = discover_runs(store)
    old = read_index(store)
    kept = pl.DataFrame(schema=_BASE_SCHEMA) if old is None else old.filter(pl.col("run_id").is_in(list(found)))
    known = dict(zip(kept["run_id"].to_list(), kept["fingerprint"].to_list()))
    changed = sorted(r for r, fp in found.items() if known.get(r) != fp)
    removed = 0 if old is None else old.height - kept.height
    if changed or removed or old is None:
        fresh = rows_frame([index_row(store, r, found[r]) for r in changed])
        kept = kept.filter(~pl.col("run_id").is_in(changed))
        index = pl.concat([kept, fresh], how="diagonal_relaxed").sort("run_id")
        write_index(store, index)
    else:
        index = kept.sort("run_id")
    damaged = index.filter(pl.col("error").is_not_null()).height
    return IndexUpdate(index, index.height, len(changed), removed, damaged, time.perf_counter() - started)


def table_files(store: Store, index: pl.DataFrame) -> dict[str, list[tuple[str, str]]]:
    """{table name: [(file URL, run_id), ...]} over the readable runs of the index."""
    out: dict[str, list[tuple[str, str]]] = {}
    ok = index.filter(pl.col("error").is_null()).select("run_id", "tables")
    for run_id, tables in ok.iter_rows():
        for entry in tables or []:
            name = entry.rsplit("/", 1)[-1]
            out.setdefault(name, []).append((store.file_url(store.path(run_id, f"{entry}.parquet")), run_id))
    return out


def describe_damage(index: pl.DataFrame) -> list[str]:
    """One line per run the queries skip, with its reason."""
    bad = index.filter(pl.col("error").is_not_null()).select("run_id", "error")
    return [f"skipped {run_id}: {error}" for run_id, error in bad.iter_rows()]


def index_summary(update: IndexUpdate) -> str:
    return (f"{update.runs} runs indexed ({update.read} read, {update.removed} removed, {update.damaged} "
            f"damaged) in {update.seconds:.2f} s")
