"""`mobiperf record`: trace a device as it is used (the whole device, or an app's processes as the workload), then
parse, analyse and report it like a run (mobiperf/orchestration/record.py)."""

from __future__ import annotations

import os
import sys
from datetime import datetime
from pathlib import Path

import click

EPILOG = """

\b
Examples:
  mobiperf record -t adb:SERIAL --app com.example.notes --duration 30s -o runs/notes
  mobiperf record -t adb:SERIAL -o runs/phone          (until Ctrl-C: use the phone, then stop)
  mobiperf record -t local --duration 10s -o runs/host  (this host's own devices, system-wide)
  mobiperf record -t adb:SERIAL --app com.example.notes --no-report -o runs/quick   (the tables, no HTML page)
"""


@click.command("record", epilog=EPILOG)
@click.option("-t", "--target", default="local", show_default=True, help="Where to record: local, or adb[:SERIAL].")
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Run directory to create (never overwritten; "
              "default runs/record-TIME).")
@click.option("--duration", help="How long to record (e.g. 30s, 2m); default: until Ctrl-C.")
@click.option("--app", "package", metavar="PACKAGE", help="An app whose processes are the workload (found by the "
              "package's uid); launched as the launcher does when none of them runs, the launch being the timed "
              "window.")
@click.option("--recorder", type=click.Choice(("auto", "perfetto", "tracefs")), default="auto", show_default=True,
              help="How ftrace records: the device's perfetto (adb targets that have it; auto) or tracefs directly.")
@click.option("--no-report", is_flag=True, help="Skip the HTML page (mobiperf report RUNDIR draws it later).")
def cmd_record(target: str, output: Path | None, duration: str | None, package: str | None, recorder: str,
               no_report: bool) -> None:
    """Record a device while it is used: block, file system, Android file (android_fs), scheduler and task events
    of the whole device, then the report: which process, thread and file the IO time went to, and which threads
    waited on it. Nothing is set up on the device but a tracefs instance, removed afterwards."""
    from mobiperf.cli import _recover_leftovers, _target, is_root
    from mobiperf.core.units import parse_duration_ns
    from mobiperf.orchestration.record import RecordRequest, record
    from mobiperf.target.android_app import check_package_name

    request = RecordRequest(duration_s=parse_duration_ns(duration) / 1e9 if duration else None,
                            app=check_package_name(package) if package else None, recorder=recorder,
                            report=not no_report)
    out = Path(os.path.abspath(output or f"runs/record-{datetime.now():%Y%m%d-%H%M%S}"))
    tgt = _target(target)
    if is_root(tgt.transport):
        _recover_leftovers(tgt.transport)
    if request.duration_s is None:
        click.echo("recording until Ctrl-C ...", err=True)
    try:
        rundir = record(tgt, request, out)
    except KeyboardInterrupt as e:
        from mobiperf.core import signals

        signals.say(f"\n{signals.signal_name(e)}: stopped; the partial recording is kept at {out} (incomplete)")
        signals.flush_std_streams()
        sys.exit(signals.exit_status(e))
    print_who(rundir)
    click.echo(f"all tables: mobiperf analyze {rundir.path}")
    if request.report:
        click.echo(f"report: {rundir.path / 'report.html'}")


def print_who(rundir) -> None:
    """What the recording holds, in a few lines, then the who tables (analyzers/who.py)."""
    from mobiperf.analyzers import who_tables
    from mobiperf.core.schema import RESULTS
    from mobiperf.reports.text_table import format_table

    meta = rundir.read_meta()
    rep = (meta.get("repetitions") or [{}])[0]
    took = rep.get("workload_ns")
    app = rep.get("app") or {}
    line = f"recorded {took / 1e9:.1f} s" if took else "recorded"
    if app:
        line += (f"; {app['package']} (uid {app['uid']}): processes {', '.join(map(str, app['processes']))}"
                 + (f", launched by `{app['launched']}`" if app.get("launched") else ", already running"))
    click.echo(line)
    results = {name: rundir.read_table(name) for name in ("io_by_owner", "blocked") if rundir.has_table(name)
               and name in RESULTS}
    for title, df in who_tables(results, text=True).items():
        click.echo(f"\n== {title}")
        click.echo(format_table(df), nl=False)
    for note in rep.get("notes", []):
        click.echo(f"note: {note}", err=True)


def register(group: click.Group) -> None:
    group.add_command(cmd_record)
