"""`mobiperf export RUNDIR --perfetto FILE`: a run's classified IOs and layer spans for the Perfetto UI."""

from __future__ import annotations

from pathlib import Path

import click

EPILOG = """

\b
Open FILE at https://ui.perfetto.dev (Open trace file); it is a Chrome JSON trace, gzip-compressed when FILE
ends in .gz.

\b
Examples:
  mobiperf export runs/x --perfetto x.json
  mobiperf export runs/x --perfetto x.json.gz
"""


@click.command("export", epilog=EPILOG)
@click.argument("rundir", type=click.Path(path_type=Path))
@click.option("--perfetto", "perfetto_file", required=True, type=click.Path(path_type=Path),
              help="Write a trace for the Perfetto UI here.")
def cmd_export(rundir: Path, perfetto_file: Path) -> None:
    """Export a run's block requests (with their btt phases), system calls and FUSE requests as a trace."""
    from mobiperf.perfetto import write_trace
    from mobiperf.runstore import RunDir

    run = RunDir.open(rundir)
    status = run.read_meta().get("status")
    if status != "complete":
        click.echo(f"note: this run is {status}; the trace covers what was collected", err=True)
    counts = write_trace(run, perfetto_file)
    spans = ", ".join(f"{n:,} {k}" for k, n in sorted(counts.items()) if k not in ("M",))
    click.echo(f"{perfetto_file}: {spans}")


def register(group: click.Group) -> None:
    group.add_command(cmd_export)
