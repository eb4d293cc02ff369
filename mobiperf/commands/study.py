"""`mobiperf study NAME`: a paper's experiment in one command, our figures beside the paper's."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from mobiperf.core.errors import UsageError
from mobiperf.cli import LazyEpilogCommand, repeat_option

EPILOG = """

\b
Studies:
{studies}

\b
The study directory is a sweep directory (sweep.json, runs/): re-running the same command continues where it
stopped. study.json holds the tables and checks, study.html draws them beside the paper's numbers.
--quick is the reduced size the tests use (small files, few cells and repetitions).

\b
Examples:
  mobiperf study --list
  mobiperf study bfuse -o studies/bfuse                 # full size on the galaxy-s3-2012 phone profile
  mobiperf study bfuse --quick -o /tmp/bfuse-quick
  mobiperf study journal-modes --quick --device emmc-2012 -o /tmp/jm
  mobiperf study bfuse -o studies/bfuse --report-only   # redraw from what was measured
  mobiperf study bfuse -t adb:SERIAL -o studies/bfuse-phone   # on a phone: its /data, the daemons for its ABI
"""


@click.command("study", cls=LazyEpilogCommand)
@click.argument("name", required=False)
@click.option("-o", "--output", type=click.Path(path_type=Path),
              help="Study directory (default studies/NAME, or studies/NAME-quick).")
@click.option("--quick", is_flag=True, help="Reduced size (what the tests run).")
@click.option("--device", "device_profile", help="Device profile under the stack (default: the study's own).")
@click.option("--cpu", default="host", show_default=True,
              help="CPU share of one core for the workload and FUSE daemon (e.g. 20%), a phone CPU model.")
@click.option("--phone", help="Phone profile around the stack: device + dirty limit + CPU share + FUSE wake-up "
                              "(galaxy-s3-2012, or none; default: the study's own).")
@repeat_option(None, what="Repetitions per cell", note=" Default: the study's own.")
@click.option("-t", "--target", default="local", show_default=True,
              help="Where to run: local (the emulated stack), or adb[:SERIAL] (the phone's own storage).")
@click.option("--report-only", is_flag=True, help="Only redraw study.json/study.html from the measured cells.")
@click.option("--list", "list_only", is_flag=True, help="List the studies.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="Output format.")
def cmd_study(name, output, quick, device_profile, cpu, phone, repeat, target, report_only, list_only, fmt) -> None:
    """Run the study NAME (bfuse, journal-modes, fjord, zero-copy, layers) and print its tables."""
    from mobiperf.orchestration import study as study_mod
    from mobiperf.orchestration.sweep import PARAMETERS, Progress

    studies = study_mod.registry()
    if list_only or not name:
        for s in studies.values():
            click.echo(f"{s.name:<14} {s.title}\n{'':<14} paper {s.paper}")
        if not name:
            return
    if list_only:
        return
    if name not in studies:
        raise UsageError(f"unknown study {name!r}; studies: {', '.join(studies)}")
    if device_profile:
        PARAMETERS["device"].check(device_profile)
    PARAMETERS["cpu"].check(cpu)
    if phone:
        phone = PARAMETERS["phone"].check(phone)
    target = PARAMETERS["target"].check(target)
    if target != "local" and (device_profile or phone or cpu != "host"):
        raise UsageError("--device, --phone and --cpu model a phone around the emulated stack on this host; "
                         f"-t {target} measures the phone itself")
    config = study_mod.Config(quick=quick, device=device_profile, repeat=repeat, cpu=cpu, phone=phone, target=target)
    out = output or Path("studies") / (f"{name}-quick" if quick else name)
    progress = Progress(
        unit_started=lambda u, i, n: click.echo(f"[{i}/{n}] {u['cell']} rep {u['rep']} ...", err=True),
        unit_finished=lambda u, i, n: click.echo(
            f"[{i}/{n}] {u['cell']} rep {u['rep']}: {u['status']}"
            + (f" ({u['error'][:200]})" if u.get("error") else ""), err=True))
    try:
        result = study_mod.run_study(name, out, config, progress=progress, report_only=report_only)
    except KeyboardInterrupt as e:
        from mobiperf.core import signals

        signals.say(f"\n{signals.signal_name(e)}: stopped; the same command continues where it stopped ({out})")
        sys.exit(signals.exit_status(e))
    if fmt == "json":
        click.echo(json.dumps(result, indent=2))
    else:
        click.echo(study_mod.format_study_text(result), nl=False)
        click.echo(f"report: {out / 'study.html'}")
    failed = _failed_units(out)
    if failed is not None:
        click.echo(f"error: every unit of the study failed ({failed}); nothing was measured", err=True)
        sys.exit(1)


def _failed_units(out: Path) -> str | None:
    """The first failed unit's error when no unit of the study's sweep is done (None when one is, or none ran):
    a study that measured nothing is a failure, not a table of blanks."""
    from mobiperf.orchestration.sweep import SweepDir

    units = SweepDir(out).read().get("units", []) if SweepDir(out).exists() else []
    if not units or any(u["status"] in ("done", "pending") for u in units):
        return None
    errors = [u["error"] for u in units if u.get("error")]
    return f"{len(units)} of {len(units)}" + (f", first: {errors[0][:200]}" if errors else "")


def _epilog() -> str:
    from mobiperf.orchestration.study import registry

    return EPILOG.format(studies="\n".join(f"  {s.name:<14}{s.title}" for s in registry().values()))


def register(group: click.Group) -> None:
    cmd_study.epilog_of = _epilog
    group.add_command(cmd_study)
