"""`mobiperf replay SOURCE`: a recording's file-level IO replayed on a stack, or on several with a verdict each."""

from __future__ import annotations

import os
import shutil
import tempfile
from datetime import datetime
from pathlib import Path

import click

from mobiperf.cli import _absolute, _examples, _target, fraction, is_root, repeat_option, target_option
from mobiperf.core.errors import UsageError

EPILOG = _examples(
    "mobiperf replay runs/sqlite                       # on the stack it was recorded on: fidelity",
    "mobiperf replay runs/sqlite --timing closed -n 5  # as fast as possible, five times",
    "mobiperf replay phone.perfetto-trace --stack ext4+fuse --stack ext4+bfuse --phone galaxy-s3-2012 -n auto",
    "mobiperf replay trace.txt --stack ext4+fuse --stack ext4+fuse:passthrough --process com.example.notes",
    "mobiperf replay runs/app -t adb:SERIAL --stack dir:/data/local/tmp/r+bfuse",
    "mobiperf replay runs/app --write-script app.replay   # the generator's script only")

# the run options a replay shares with `mobiperf run`; unset ones come from the recording's run when it has one
MODEL_OPTIONS = ("scheduler", "image_size", "device_profile", "dirty_limit", "cpu_share", "fuse_wakeup")
META_KEYS = {"scheduler": "scheduler", "device_profile": "device", "dirty_limit": "dirty_limit",
             "cpu_share": "cpu_share", "fuse_wakeup": "fuse_wakeup_ns"}


@click.command("replay", epilog=EPILOG)
@click.argument("source", type=click.Path(path_type=Path))
@target_option
@click.option("--stack", "stacks", multiple=True,
              help="Stack to replay on (repeatable: each is compared with the first). Default: the stack the run "
                   "was recorded on.")
@click.option("--timing", type=click.Choice(("open", "closed")), default="open", show_default=True,
              help="open: each call after its recorded think time (as recorded); closed: as fast as possible. Both "
                   "keep the order between threads the trace showed.")
@repeat_option(1, allow_auto=True)
@click.option("-o", "--output", type=click.Path(path_type=Path), callback=_absolute,
              help="Run directory to create (a directory of run directories, one per stack, with several).")
@click.option("--dependencies", type=click.Choice(("all", "file", "none")), default="all", show_default=True,
              help="Which waits between threads: after any sync or namespace change of another thread (all), only "
                   "those on the same file or its directories (file), or none but the handles'.")
@click.option("--rep", type=int, help="Which repetition of the recording to replay (default: its first good one).")
@click.option("--process", help="A phone trace: replay only this process's file events (its pid or a part of its "
                                "command line).")
@click.option("--phone", help="Phone profile: the models below at once (galaxy-s3-2012).")
@click.option("--device", "device_profile", help="Device profile under the loop device: emmc-2012, ufs-2020, host.")
@click.option("--dirty-limit", default="host", show_default=True, help="Dirty page limit of the stack's device.")
@click.option("--cpu", "cpu_share", default="host", show_default=True, help="CPU share of the workload and daemons.")
@click.option("--fuse-wakeup", default="0", show_default=True, help="Delay of every FUSE request a daemon reads.")
@click.option("--scheduler", help="IO scheduler of the stack's device.")
@click.option("--image-size", default="1G", show_default=True, help="Size of the emulated data partition.")
@click.option("--source", "sources", multiple=True,
              help="Trace source of the replay runs (as in `mobiperf run`). Default: the recording's but strace "
                   "(the think times a replay waits out already hold what strace cost the recording; tracing the "
                   "replay with it would pay that again), else `mobiperf run`'s.")
@click.option("--min-effect", default="5%", show_default=True, help="The smallest change worth a verdict.")
@click.option("--no-report", is_flag=True, help="Skip the HTML pages.")
@click.option("--write-script", type=click.Path(path_type=Path, dir_okay=False),
              help="Write the generator's script to this file and stop (nothing runs).")
def cmd_replay(source, target, stacks, timing, repeat, output, dependencies, rep, process, phone, device_profile,
               dirty_limit, cpu_share, fuse_wakeup, scheduler, image_size, sources, min_effect, no_report,
               write_script) -> None:
    """Replay a recording's file-level IO (a run's system calls with their paths, or a phone trace's android_fs
    events) on a stack, with the calls, threads, think times and waits between threads it recorded; measure how
    faithful the replay was (replay_fidelity); with several --stack, compare each with the first."""
    from mobiperf.orchestration.replay import check_space, load_source, replay_request
    from mobiperf.orchestration.what_if import format_what_if, replay_on_stacks

    with _source_run(source) as run:
        src = load_source(run, str(source), rep=rep, process=process, dependencies=dependencies)
        click.echo(f"replaying {src.describe()}")
        for note in src.workload.notes():
            click.echo(f"  left out or added: {note}")
        if write_script:
            from mobiperf.orchestration.replay import write_replay_script

            click.echo(f"script: {write_replay_script(src, write_script)}")
            return
        if not stacks and not src.collected:
            raise UsageError(f"{source} was not recorded on a stack of this host: say where to replay it "
                             "(--stack ext4+fuse, repeatable)")
        options = dict(scheduler=scheduler, image_size=image_size, device_profile=device_profile, phone=phone,
                       dirty_limit=dirty_limit, cpu_share=cpu_share, fuse_wakeup=fuse_wakeup)
        if not sources and src.collected:  # traced as the recording was, but for strace (see --source)
            sources = tuple(s for s in src.meta.get("sources") or () if s != "strace")
        requests = [replay_request(src, _base_request(src, stack, options, repeat, min_effect, timing, sources,
                                                      no_report), timing=timing)
                    for stack in (stacks or [src.meta["stack"]])]
        t = _target(target)
        for request in requests:
            check_space(t, request, src.workload.state.need_bytes)
        if is_root(t.transport):
            from mobiperf.cli import _recover_leftovers

            _recover_leftovers(t.transport)
        out = output or Path(os.path.abspath(Path("runs") / f"{datetime.now():%Y%m%d-%H%M%S}-replay-{source.name}"))
        what_if = replay_on_stacks(t, src, requests, out, say=lambda s: click.echo(s, err=True),
                                   min_effect=fraction(min_effect, "--min-effect"))
    for run, label in zip(what_if.runs, what_if.labels):
        _print_run(run, label, not no_report)
    text = format_what_if(what_if)
    if text:
        click.echo(text, nl=False)
        if not no_report:
            from mobiperf.reports.compare_page import write_compare_page

            click.echo(f"compare page: {write_compare_page(what_if.comparison, out / 'compare.html')}")


def _base_request(src, stack: str, options: dict, repeat, min_effect: str, timing: str, sources, no_report: bool):
    """`mobiperf run`'s request for this stack, the recording's models and scheduler where none was given."""
    from click.core import ParameterSource

    from mobiperf.cli import run_request_from_options
    from mobiperf.orchestration.what_if import PRIMARY

    ctx = click.get_current_context()
    given = {name for name in (*MODEL_OPTIONS, "phone")
             if ctx.get_parameter_source(name if name != "phone" else "phone") == ParameterSource.COMMANDLINE}
    values = dict(options)
    if src.collected and not given and stack == src.meta.get("stack"):
        meta = src.meta
        for name, key in META_KEYS.items():
            value = meta.get(key)
            if value not in (None, "", 0):
                values[name] = f"{value}ns" if name == "fuse_wakeup" else str(value)
        image = ((meta.get("repetitions") or [{}])[0].get("stack") or {}).get("image_size_bytes")
        values["image_size"] = str(image) if image else values["image_size"]
    return run_request_from_options(
        stack_spec=stack, scheduler=values["scheduler"], repeat=repeat, min_effect=min_effect,
        primary=PRIMARY[timing] if isinstance(repeat, tuple) else None, image_size=values["image_size"],
        device_profile=values["device_profile"], phone=values["phone"], dirty_limit=values["dirty_limit"],
        cpu_share=values["cpu_share"], fuse_wakeup=values["fuse_wakeup"], sources=sources, event_sets=(),
        events=(), recorder="auto", timeout=None, no_report=no_report, scope="workload", command=("mobibench",))


class _source_run:
    """The recording as a run directory: SOURCE itself, or a trace file ingested into a scratch one (removed
    afterwards: the replay run keeps what it needs, the recording's figures)."""

    def __init__(self, source: Path):
        self.source = source
        self.tmp = None

    def __enter__(self):
        from mobiperf.core.runstore import RunDir

        if (self.source / "run.json").exists():
            return RunDir.open(self.source)
        if not self.source.exists():
            raise UsageError(f"{self.source}: no such run directory or trace file")
        if self.source.is_dir():
            raise UsageError(f"{self.source}: not a run directory (no run.json)")
        from mobiperf.commands.ingest import ingest

        self.tmp = Path(tempfile.mkdtemp(prefix="mobiperf-replay-"))
        return ingest([self.source], self.tmp / "source", report=False)

    def __exit__(self, *exc):
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)


def _print_run(run, label: str, report: bool) -> None:
    from mobiperf.cli import _print_summary
    from mobiperf.orchestration.replay import fidelity_summary

    meta = run.read_meta()
    held, made, failed = fidelity_summary(run)
    replay = meta.get("replay") or {}
    where = "the stack it was recorded on" if replay.get("same_stack") else "another stack than the recording's"
    click.echo(f"\n{label}: {run.path} ({meta.get('status')}; {replay.get('timing')} loop, on {where})")
    if failed and made:
        click.echo(f"  FIDELITY FAILED: {made - held} of {made} checks outside their bounds:")
        for line in failed:
            click.echo(f"    {line}")
    elif made:
        click.echo(f"  fidelity: all {made} checks within their bounds (replay_fidelity)")
    else:
        click.echo(f"  fidelity: {failed[0] if failed else 'no checks'}")
    _print_summary({"metrics": [m for m in meta.get("metrics", []) if m["name"].startswith(("workload.", "block."))
                                and m["name"] not in ("block.size_class_share",)]}, headline_only=True)
    if report:
        click.echo(f"  report: {run.path / 'report.html'}")


def register(group: click.Group) -> None:
    group.add_command(cmd_replay)
