"""The store's side of the CLI: `mobiperf index STORE`, and what `analyze`, `report` and `query` do when they are
given a store (a directory of run directories, or an fsspec URL) instead of one run directory."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click

from mobiperf.core.errors import UsageError


def is_store_arg(path: str | os.PathLike) -> bool:
    """A store rather than a run directory: a URL, or a local directory without run.json at its top."""
    from mobiperf.core.store import is_run_dir

    text = os.fspath(path)
    return "://" in text or (os.path.isdir(text) and not is_run_dir(text))


def _refuse_one_run(path: str, option: str) -> None:
    from mobiperf.core.store import is_run_dir

    if "://" not in path and is_run_dir(path):
        raise UsageError(f"{option} is for a store of runs; {path} is one run directory (give the directory "
                         "that holds it)")


def analyze_store_cli(store: str, cluster: str | None, fmt: str) -> None:
    """`mobiperf analyze STORE [--cluster ...]`: every run re-analysed, one line per run that failed, a summary."""
    from mobiperf.orchestration.cluster import analyze_store, open_client, parse_cluster

    _refuse_one_run(store, "--cluster")
    def done(outcome: dict, i: int, n: int) -> None:
        if outcome["error"]:
            click.echo(f"[{i}/{n}] {outcome['run_id']}: FAILED: {outcome['error']}", err=True)
        elif fmt == "text" and (i == n or i % max(1, n // 10) == 0):
            click.echo(f"[{i}/{n}] analysed", err=True)

    if cluster:
        spec = parse_cluster(cluster)
        with open_client(spec) as client:
            outcomes = analyze_store(store, client, on_done=done)
    else:
        outcomes = analyze_store(store, on_done=done)
    failed = [o for o in outcomes if o["error"]]
    if fmt == "json":
        click.echo(json.dumps(outcomes, indent=2))
    elif fmt == "csv":
        click.echo("run_id,error,worker,seconds")
        for o in outcomes:
            click.echo(f"{o['run_id']},{(o['error'] or '').replace(',', ';')},{o['worker'] or ''},{o['seconds']}")
    else:
        workers = sorted({str(o["worker"]) for o in outcomes if o["worker"] is not None})
        where = f" on {len(workers)} workers" if workers else ""
        click.echo(f"{len(outcomes) - len(failed)} of {len(outcomes)} runs analysed{where}; "
                   f"{len(failed)} failed")


def fleet_report_cli(store: str, by: str | None, output: Path | None, base: str | None) -> None:
    """`mobiperf report STORE --by kernel,stack -o fleet.html`."""
    from mobiperf.compare.fleet import build_fleet
    from mobiperf.reports.fleet_page import write_fleet_page
    from mobiperf.core.store import Store, update_index

    _refuse_one_run(store, "--by")
    if not by:
        raise UsageError(f"{store} is a store of runs: say how to group them, e.g. --by kernel,stack")
    s = Store.open(store)
    fleet = build_fleet(update_index(s).index, by.split(","), base=base)
    out = output or (Path(s.root) / "fleet.html" if s.is_local else Path("fleet.html"))
    click.echo(write_fleet_page(fleet, os.path.basename(s.root.rstrip("/")) or s.url, out))


@click.command("index", epilog="\n\n\b\nExamples:\n  mobiperf index runs/\n  mobiperf index runs/ --format json\n"
               "  mobiperf index s3://lab/runs   # any fsspec URL whose filesystem is installed")
@click.argument("store")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "csv"]), default="text", show_default=True,
              help="Output format.")
def cmd_index(store: str, fmt: str) -> None:
    """Bring a store's index (STORE/index.parquet) up to date and print what it holds: one row per run directory,
    its facts and headline metrics; damaged runs with the reason they are skipped."""
    import polars as pl

    from mobiperf.core.store import Store, describe_damage, index_summary, update_index

    update = update_index(Store.open(store))
    facts = update.index.select("run_id", "status", "target", "kernel", "stack", "repetitions", "error")
    if fmt == "json":
        click.echo(json.dumps(facts.to_dicts(), indent=2))
        return
    if fmt == "csv":
        click.echo(facts.write_csv(), nl=False)
        return
    with pl.Config(tbl_rows=40, tbl_hide_dataframe_shape=True, tbl_width_chars=160):
        click.echo(facts.drop("error"))
    for line in describe_damage(update.index):
        click.echo(line)
    click.echo(index_summary(update))


def register(group: click.Group) -> None:
    group.add_command(cmd_index)
