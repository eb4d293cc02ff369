"""`mobiperf export RUNDIR --perfetto FILE`: a run's calls, FUSE requests, file system and journal spans and block
requests for the Perfetto UI, as a protobuf TrackEvent trace (reports/perfetto_track.py) or, with --format json,
the Chrome JSON trace of reports/perfetto_json.py."""

from __future__ import annotations

from pathlib import Path

import click

EPILOG = """

\b
Open FILE at https://ui.perfetto.dev (Open trace file). protobuf (the default, and for FILE ending in .pftrace,
.perfetto-trace or .pb): a track per thread and per block device, slices nested layer by layer, flow arrows from
each call to what it caused, counters (in flight, throughput, dirty pages). json (the default for FILE ending in
.json or .json.gz): the older Chrome JSON trace, gzip-compressed when FILE ends in .gz.

\b
Examples:
  mobiperf export runs/x --perfetto x.pftrace
  mobiperf export runs/x --perfetto x.json.gz
  mobiperf export runs/x --perfetto x.trace --format protobuf
"""


def export_format(path: Path, asked: str) -> str:
    if asked != "auto":
        return asked
    return "json" if path.name.endswith((".json", ".json.gz")) else "protobuf"


@click.command("export", epilog=EPILOG)
@click.argument("rundir", type=click.Path(path_type=Path))
@click.option("--perfetto", "perfetto_file", required=True, type=click.Path(path_type=Path),
              help="Write a trace for the Perfetto UI here.")
@click.option("--format", "fmt", type=click.Choice(("auto", "protobuf", "json")), default="auto", show_default=True,
              help="protobuf TrackEvents, or the Chrome JSON trace; auto: json for *.json(.gz), else protobuf.")
def cmd_export(rundir: Path, perfetto_file: Path, fmt: str) -> None:
    """Export a run's calls, FUSE requests, file system and journal spans and block requests (with their btt
    phases) as a trace for the Perfetto UI."""
    from mobiperf.core.runstore import RunDir

    run = RunDir.open(rundir)
    status = run.read_meta().get("status")
    if status != "complete":
        click.echo(f"note: this run is {status}; the trace covers what was collected", err=True)
    if export_format(perfetto_file, fmt) == "json":
        from mobiperf.reports.perfetto_json import write_trace

        counts = write_trace(run, perfetto_file)
        spans = ", ".join(f"{n:,} {k}" for k, n in sorted(counts.items()) if k not in ("M",))
    else:
        from mobiperf.reports.perfetto_track import write_track_trace

        counts = write_track_trace(run, perfetto_file)
        spans = ", ".join(f"{n:,} {k}" for k, n in sorted(counts.items()) if isinstance(n, int)) + \
            f" (spans from {counts['source']})"
    click.echo(f"{perfetto_file}: {spans}")


def register(group: click.Group) -> None:
    group.add_command(cmd_export)
