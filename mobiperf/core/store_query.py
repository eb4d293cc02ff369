"""SQL across the runs of a store (embedded DuckDB, no server), and the same tables as lazy Polars frames.

Views of a store's DuckDB connection:

    runs        the index (mobiperf.core.store): one row per run, its facts and headline metrics; damaged runs have
                `error` set
    metric      every metric of every run, long: run_id, target, kernel, stack, workload, name, labels, key,
                value, unit
    <table>     every event and result table (block_rq, io_class, waterfall, ...): the rows of all readable runs
                that have it, with the run's facts run_id, target, kernel, stack, workload in front; `rep` is the
                repetition within the run. Columns a run's table lacks (an older analysis) are NULL.

A run whose table turns out unreadable while a query runs (damaged after it was indexed) is marked damaged in
the index, with the reason, and the query runs again without it: one damaged run never stops a query.
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from mobiperf.core.errors import UsageError
from mobiperf.core.store import FACTS, Store, _check_table, table_files, update_index, write_index

_FILE_COL = "_mobiperf_file"
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _sql_list(items: list[str]) -> str:
    return "[" + ", ".join("'" + s.replace("'", "''") + "'" for s in items) + "]"


def connect(store: Store, index: pl.DataFrame, sql: str | None = None):
    """An in-memory DuckDB connection with the store's views (see the module docstring). Given the query, only
    the table views it names are made: binding a view reads the footer of every file of its table."""
    import duckdb

    con = duckdb.connect()
    if not store.is_local:
        con.register_filesystem(store.fs)
    con.register("_mobiperf_index", index.to_arrow())
    con.execute("CREATE VIEW runs AS SELECT * FROM _mobiperf_index")
    facts = ", ".join(f"r.{f}" for f in FACTS)
    con.execute(f"CREATE VIEW metric AS SELECT {facts}, m.name, m.labels, m.key, m.value, m.unit "
                "FROM _mobiperf_index r, unnest(r.metrics) AS u(m) WHERE r.error IS NULL")
    for name, files in sorted(table_files(store, index).items()):
        if not _IDENT.match(name) or name in ("runs", "metric"):
            continue  # a file name that is no SQL name, or would hide a view: left out
        if sql is not None and not re.search(rf"\b{name}\b", sql, re.IGNORECASE):
            continue
        mapping = pl.DataFrame({_FILE_COL: [f for f, _ in files], "run_id": [r for _, r in files]})
        con.register(f"_files_{name}", mapping.to_arrow())
        con.execute(
            f"CREATE VIEW {name} AS SELECT {facts}, t.* EXCLUDE ({_FILE_COL}) "
            f"FROM read_parquet({_sql_list([f for f, _ in files])}, union_by_name = true, "
            f"filename = '{_FILE_COL}') t "
            f"JOIN _files_{name} f ON t.{_FILE_COL} = f.{_FILE_COL} "
            f"JOIN _mobiperf_index r ON r.run_id = f.run_id")
    return con


def query_store(store: Store, sql: str, *, retries: int = 20) -> tuple[pl.DataFrame, list[str]]:
    """The result of `sql` over the store, and notes (the runs skipped, with their reasons). UsageError naming
    the views when the query is wrong."""
    import duckdb

    index = update_index(store).index
    for _ in range(retries + 1):
        con = None
        try:
            con = connect(store, index, sql)
            rel = con.sql(sql)
            return (rel.pl() if rel is not None else pl.DataFrame()), _notes(index)
        except duckdb.Error as e:
            damaged = _find_damaged(store, index, str(e))
            if damaged is None:
                views = sorted({"runs", "metric", *table_files(store, index)})
                raise UsageError(f"query failed: {_first_line(e)}\n  tables: {', '.join(views)}") from None
            index = _mark_damaged(index, *damaged)
            write_index(store, index)
        finally:
            if con is not None:
                con.close()
    raise UsageError(f"query failed: more than {retries} runs turned out damaged while it ran")


def _first_line(e: Exception) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


def _find_damaged(store: Store, index: pl.DataFrame, message: str) -> tuple[str, str] | None:
    """(run_id, reason) of the run whose table the error names, if the file is indeed unreadable."""
    for run_id, tables in index.filter(pl.col("error").is_null()).select("run_id", "tables").iter_rows():
        for entry in tables or []:
            path = store.path(run_id, f"{entry}.parquet")
            if path in message or store.file_url(path) in message:
                problem = _check_table(store, path) or _first_line(Exception(message))
                return run_id, f"{run_id}/{entry}.parquet is damaged: {problem}"
    return None


def _mark_damaged(index: pl.DataFrame, run_id: str, reason: str) -> pl.DataFrame:
    hit = pl.col("run_id") == run_id
    return index.with_columns(error=pl.when(hit).then(pl.lit(reason)).otherwise(pl.col("error")),
                              tables=pl.when(hit).then(pl.lit([], dtype=pl.List(pl.String)))
                              .otherwise(pl.col("tables")))


def _notes(index: pl.DataFrame) -> list[str]:
    from mobiperf.core.store import describe_damage

    return describe_damage(index)


def list_views(store: Store) -> list[tuple[str, list[str]]]:
    """(view name, its columns) of every view a query can read."""
    index = update_index(store).index
    con = connect(store, index)
    try:
        names = [r[0] for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal "
                                           "ORDER BY view_name").fetchall()]
        return [(n, [c[0] for c in con.execute(f"DESCRIBE {n}").fetchall()]) for n in names]
    finally:
        con.close()


# --- Polars ---------------------------------------------------------------------------------------------------

def load_store(url: Any) -> dict[str, pl.LazyFrame]:
    """The store's views as lazy Polars frames, for notebooks: {"runs": ..., "metric": ..., "block_io": ...}.

    The index is brought up to date first. Each table frame has the facts (run_id, target, kernel, stack,
    workload) in front of the table's own columns, like the SQL views; nothing is read until `.collect()`."""
    store = url if isinstance(url, Store) else Store.open(url)
    index = update_index(store).index
    facts = index.filter(pl.col("error").is_null()).select(FACTS)
    frames: dict[str, pl.LazyFrame] = {"runs": index.lazy()}
    frames["metric"] = (index.lazy().filter(pl.col("error").is_null()).select(*FACTS, "metrics")
                        .explode("metrics").drop_nulls("metrics").unnest("metrics")
                        .select(*FACTS, "name", "labels", "key", "value", "unit"))
    for name, files in sorted(table_files(store, index).items()):
        scans = [(pl.scan_parquet(f) if store.is_local else _scan_fsspec(store, f)).with_columns(run_id=pl.lit(run_id))
                 for f, run_id in files]
        table = pl.concat(scans, how="diagonal_relaxed")
        frames[name] = table.join(facts.lazy(), on="run_id", how="left").select(
            *FACTS, pl.all().exclude(*FACTS))
    return frames


def _scan_fsspec(store: Store, url: str) -> pl.LazyFrame:
    """A file of a store that Polars cannot reach itself (an fsspec-only filesystem): through pyarrow's dataset
    over the fsspec filesystem, still lazy."""
    import pyarrow.dataset as ds
    from pyarrow.fs import FSSpecHandler, PyFileSystem

    path = store.fs._strip_protocol(url)
    return pl.scan_pyarrow_dataset(ds.dataset(path, format="parquet", filesystem=PyFileSystem(FSSpecHandler(store.fs))))
