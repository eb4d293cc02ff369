"""`mobiperf query RUNDIR "SQL"`: SQL over a run's tables, for any question the breakdowns do not answer;
`mobiperf query STORE "SQL"`: SQL across every run of a store (mobiperf.core.store_query, embedded DuckDB).

A run directory (run.json at its top) and a store (a directory of run directories, or an fsspec URL) are told
apart by content. Over one run, every event table (tables/*.parquet) and result table (results/*.parquet) of the run
is registered under its
name (block_event, block_rq, block_io, syscall_class, waterfall, ...) in a Polars SQL context; the tables are
scanned lazily, so a query that reads one column of one table does not load the others.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from mobiperf.core.errors import UsageError

if TYPE_CHECKING:  # polars where a query runs: not at every start of mobiperf
    import polars as pl


def run_query(rundir: Path, sql: str) -> pl.DataFrame:
    """The result of `sql` over the run's tables; UsageError naming the tables when the query is wrong."""
    import polars as pl

    from mobiperf.core.runstore import RunDir

    run = RunDir.open(rundir)
    # categorical columns (block_event's comm, event, rwbs) read as the strings they are: LIKE and string
    # functions work on them
    frames = {p.stem: pl.scan_parquet(p).with_columns(pl.col(pl.Categorical).cast(pl.Utf8))
              for sub in ("tables", "results") for p in sorted((run.path / sub).glob("*.parquet"))}
    if not frames:
        raise UsageError(f"{rundir}: no tables yet (run `mobiperf analyze {rundir}` first)")
    ctx = pl.SQLContext(frames=frames)
    try:
        return ctx.execute(sql, eager=True)
    except (pl.exceptions.PolarsError, ValueError) as e:
        raise UsageError(f"query failed: {str(e).splitlines()[0]}\n  tables: {', '.join(sorted(frames))}") from None


@click.command("query", epilog="\n\n\b\nExamples:\n"
               "  mobiperf query runs/x \"SELECT region, count(*) AS n, sum(size_bytes) AS bytes FROM block_io "
               "GROUP BY region\"\n"
               "  mobiperf query runs/x \"SELECT * FROM waterfall ORDER BY dur_ns DESC LIMIT 10\" --format csv\n"
               "  mobiperf query runs/x --tables\n"
               "  mobiperf query runs/ \"SELECT kernel, stack, median(latency_d2c_p99_write) FROM runs GROUP BY ALL\"\n"
               "  mobiperf query runs/ \"SELECT stack, op, count(*) AS n FROM block_io GROUP BY ALL ORDER BY ALL\"")
@click.argument("rundir")
@click.argument("sql", required=False)
@click.option("--tables", "list_tables", is_flag=True, help="List the run's tables and their columns.")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "csv"]), default="text", show_default=True,
              help="Output format.")
def cmd_query(rundir: str, sql: str | None, list_tables: bool, fmt: str) -> None:
    """Run SQL over a run directory's event and result tables (Polars SQL), or across every run of a store
    (DuckDB; views runs, metric and every table with the run's facts run_id, target, kernel, stack, workload)."""
    from mobiperf.commands.store import is_store_arg

    if is_store_arg(rundir):
        _query_store(rundir, sql, list_tables, fmt)
        return
    rundir = Path(rundir)
    if list_tables:
        import polars as pl

        from mobiperf.core.runstore import RunDir

        run = RunDir.open(rundir)
        for sub in ("tables", "results"):
            for p in sorted((run.path / sub).glob("*.parquet")):
                cols = ", ".join(pl.read_parquet_schema(p))
                click.echo(f"{sub[:-1]:<6} {p.stem}: {cols}")
        return
    if not sql:
        raise UsageError("give a SQL query (or --tables to see what there is to query)")
    _print_frame(run_query(rundir, sql), fmt)


def _query_store(store: str, sql: str | None, list_tables: bool, fmt: str) -> None:
    from mobiperf.core.store import Store
    from mobiperf.core.store_query import list_views, query_store

    s = Store.open(store)
    if list_tables:
        for name, cols in list_views(s):
            click.echo(f"view   {name}: {', '.join(cols)}")
        return
    if not sql:
        raise UsageError("give a SQL query (or --tables to see what there is to query)")
    df, notes = query_store(s, sql)
    for note in notes:
        click.echo(f"note: {note}", err=True)
    _print_frame(df, fmt)


def _print_frame(df: pl.DataFrame, fmt: str) -> None:
    if fmt == "json":
        click.echo(json.dumps(df.to_dicts(), indent=2, default=str))
    elif fmt == "csv":
        click.echo(df.write_csv(), nl=False)
    else:
        import polars as pl

        with pl.Config(tbl_rows=100, tbl_cols=30, tbl_hide_dataframe_shape=True, tbl_width_chars=200):
            click.echo(df)


def register(group: click.Group) -> None:
    group.add_command(cmd_query)
