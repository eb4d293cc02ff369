"""`mobiperf sweep`: one workload over a grid of stack and workload parameters, resumable, with a matrix report."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from mobiperf.core.errors import UsageError
from mobiperf.cli import LazyEpilogCommand, repeat_option

EPILOG = """

\b
Parameters (-p NAME=V1,V2,...; every combination is a cell):
{params}

\b
A sweep directory holds sweep.json (the cells, the seeded order, each unit's status, run directory and metrics)
and runs/ (one `mobiperf run` per cell and repetition). Re-running the same command, or `mobiperf sweep -o DIR`
alone, continues where it stopped; a failed cell is recorded and the sweep goes on (--retry-failed runs failed
units again). Cells that cannot run here (a filesystem the kernel lacks) are skipped with the reason.

\b
Examples:
  mobiperf sweep -o sweeps/fs -p fs=ext4,xfs,btrfs -p scheduler=none,mq-deadline,bfq -n 3
  mobiperf sweep -o sweeps/unit -p layer=bfuse -p io_unit=4k,64k,512k -p device=emmc-2012 -p file_size=128M
  mobiperf sweep -o sweeps/sync -p sync=fsync,fdatasync -p access=rand-write -p record=4k -p file_size=4M
  mobiperf sweep -o sweeps/fs                       # resume, then draw the matrix
  mobiperf sweep -o sweeps/fs --status --primary workload.ctx_switches
  mobiperf sweep -o sweeps/fs --status --baseline fs=xfs,scheduler=none   # every cell against another
  mobiperf sweep -o sweeps/fs -p fs=ext4,xfs --dry-run > cells.sh   # one pasteable `mobiperf run` per cell
  mobiperf sweep -o /shared/sw -p target=adb:SERIAL1,adb:SERIAL2 -p sync=fsync,fdatasync --cluster tcp://sched:8786
"""


@click.command("sweep", cls=LazyEpilogCommand)
@click.option("-o", "--output", required=True, type=click.Path(path_type=Path),
              help="Sweep directory (created, or resumed when it holds a sweep).")
@click.option("-p", "--param", "params", multiple=True, metavar="NAME=V1,V2",
              help="A swept parameter and its values (repeatable).")
@repeat_option(3, what="Repetitions of every cell")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the randomised run order.")
@click.option("--primary", metavar="METRIC",
              help="Metric of the matrix (default: run.throughput, or run.tps for SQLite: what the cell moved over "
                   "the workload's wall time).")
@click.option("--timeout", default="30m", show_default=True, help="Kill a cell's workload after this long.")
@click.option("--retry-failed", is_flag=True, help="Run failed units again.")
@click.option("--status", "status_only", is_flag=True, help="Only print the matrix and status; run nothing.")
@click.option("--dry-run", is_flag=True, help="Print the cells and their `mobiperf run` commands; run nothing.")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "csv"]), default="text", show_default=True,
              help="Output format of the matrix.")
@click.option("--baseline", metavar="CELL", help="The cell every other is compared with (its id, c000, or "
              "NAME=VALUE[,NAME=VALUE]; default: the first cell).")
@click.option("--cluster", help="Send the cells to Dask workers that offer their target as a resource "
                                "(`dask worker --resources \"adb:SERIAL=1\"`, or local=1): tcp://HOST:PORT, or "
                                "local:N (N cells at once on this host).")
def cmd_sweep(output, params, repeat, seed, primary, timeout, retry_failed, status_only, dry_run, fmt, baseline,
              cluster) -> None:
    """Run WORKLOAD cells over a grid of stack and workload parameters, in a seeded random order, resumable;
    write SWEEP/matrix.html (heatmap + table with confidence intervals)."""
    from mobiperf.orchestration import sweep
    from mobiperf.core.units import parse_duration_ns

    metric = sweep.canonical_metric(primary) if primary else None
    definition = None
    if params:
        grid = sweep.parse_grid(params)
        cells = sweep.grid_cells(grid)
        if metric is None:
            metric = "run.tps" if grid.get("workload", ["file"])[0].startswith("sqlite") else sweep.DEFAULT_METRIC
        definition = sweep.SweepDefinition(cells=cells, repeat=repeat, seed=seed, metric=metric,
                                           name=output.name, timeout_s=parse_duration_ns(timeout) / 1e9)
    sdir = sweep.SweepDir(output)
    if dry_run:
        cells = definition.cells if definition else [c["params"] for c in sdir.read()["cells"]]
        n = definition.repeat if definition else sdir.read()["repeat"]
        timeout_s = int(definition.timeout_s if definition else sdir.read().get("timeout_s", 1800))
        click.echo(sweep.dry_run_script(cells, output, n, timeout_s), nl=False)
        return
    if not status_only:
        if definition is None and not sdir.exists():
            raise UsageError(f"{output}: no sweep to resume; give its parameters (-p NAME=V1,V2); "
                             f"valid parameters: {', '.join(sweep.PARAMETERS)}")
        progress = sweep.Progress(
            unit_started=lambda u, i, n: click.echo(f"[{i}/{n}] {u['cell']} rep {u['rep']}: "
                                                    f"{_params_text(sdir, u['cell'])} ...", err=True),
            unit_finished=lambda u, i, n: click.echo(
                f"[{i}/{n}] {u['cell']} rep {u['rep']}: {u['status']}"
                + (f" ({u['error'][:200]})" if u.get("error") else ""), err=True))
        try:
            if cluster:
                data = _run_on_cluster(cluster, output, definition, retry_failed, progress)
            else:
                data = sweep.run_sweep(output, definition, retry_failed=retry_failed, progress=progress)
        except KeyboardInterrupt as e:
            from mobiperf.core import signals

            signals.say(f"\n{signals.signal_name(e)}: stopped; `mobiperf sweep -o {output}` continues where it "
                        "stopped")
            sys.exit(signals.exit_status(e))
    else:
        data = sdir.read()
    metric = sweep.canonical_metric(metric or data.get("metric") or sweep.DEFAULT_METRIC)
    page = sweep.write_matrix_page(data, output / "matrix.html", metric=metric, baseline=baseline)
    base, versus = sweep.cell_comparisons(data, metric, baseline)
    if fmt == "json":
        import json

        click.echo(json.dumps([{"cell": s.cell, "params": s.params, "status": s.status, "reason": s.reason,
                                **s.stat(metric), **_versus_fields(base, s.cell, versus)}
                               for s in sweep.summarize(data)], indent=2))
    elif fmt == "csv":
        click.echo("cell,params,status,n,median,ci_low,ci_high,baseline,change,p_value,verdict")
        for s in sweep.summarize(data):
            st, v = s.stat(metric), _versus_fields(base, s.cell, versus)
            p = ";".join(f"{k}={v}" for k, v in s.params.items())
            click.echo(f"{s.cell},{p},{s.status},{st['n']},{st['median']},{st['ci_low']},{st['ci_high']},"
                       f"{v['baseline']},{_csv(v['change'])},{_csv(v['p_value'])},{v['verdict']}")
    else:
        click.echo(sweep.format_matrix_text(data, metric, baseline), nl=False)
        counts = ", ".join(f"{v} {k}" for k, v in sweep.status_counts(data).items())
        click.echo(f"units: {counts}")
        click.echo(f"matrix: {page}")


def _run_on_cluster(cluster: str, output: Path, definition, retry_failed: bool, progress) -> dict:
    """The sweep with every unit a Dask task (mobiperf.orchestration.sweep.cluster); a LocalCluster's workers
    offer `local`."""
    from mobiperf.orchestration.cluster import open_client, parse_cluster
    from mobiperf.orchestration.sweep.cluster import run_sweep_on_cluster

    spec = parse_cluster(cluster)
    with open_client(spec, resources={"local": 1} if spec.is_local else None) as client:
        return run_sweep_on_cluster(output, definition, client, retry_failed=retry_failed, progress=progress)


def _versus_fields(base: str, cell: str, versus: dict) -> dict:
    """A cell's comparison with the baseline cell as data (compare's fields); `-` for a cell without values."""
    c = versus.get(cell)
    if c is None:
        return {"baseline": base, "change": None, "p_value": None, "verdict": "baseline" if cell == base else "-"}
    num = (lambda v: None if v != v else v)  # noqa: E731  (NaN -> null)
    return {"baseline": base, "change": num(c.change), "p_value": num(c.p_value), "verdict": c.verdict,
            "verdict_reason": c.reason}


def _csv(value) -> str:
    return "" if value is None else f"{value:.6g}"


def _params_text(sdir, cell_id: str) -> str:
    try:
        cell = next(c for c in sdir.read()["cells"] if c["id"] == cell_id)
    except StopIteration:
        return ""
    return " ".join(f"{k}={v}" for k, v in cell["params"].items())


def _epilog() -> str:
    from mobiperf.orchestration.sweep import describe_parameters

    return EPILOG.format(params=describe_parameters())


def register(group: click.Group) -> None:
    cmd_sweep.epilog_of = _epilog
    group.add_command(cmd_sweep)
