"""The mobiperf command line. Handlers are thin: they parse options, call the pipeline, and print.

One option vocabulary across subcommands: -t/--target, -o/--output, -n/--repeat, --format text|json|csv,
sizes as 4k/512k/8M, durations as 10ms/2s.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import click

from mobiperf.core.errors import MobiperfError, UsageError
from mobiperf.core.stopping_rule import MAX_REPEAT, parse_repeat


def _examples(*lines: str) -> str:
    return "\n\n\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)


class LazyEpilogCommand(click.Command):
    """A command whose epilog names lists that take imports to make (the studies, the sweep parameters): written
    by `epilog_of()` when the command's help is shown, not at every start of mobiperf."""

    epilog_of = None  # () -> str, set by the module that registers the command

    def format_epilog(self, ctx, formatter) -> None:
        if self.epilog_of is not None:
            self.epilog = self.epilog_of()
        super().format_epilog(ctx, formatter)


def _target(spec: str):
    """The Target -t names (its facts are probed when first asked for)."""
    from mobiperf.target.target import Target

    return Target(_transport(spec))


def _transport(target: str):
    from mobiperf.target.transport import LocalTransport

    if target == "local":
        return LocalTransport()
    if target == "adb" or target.startswith("adb:"):
        from mobiperf.target.adb import from_target_spec

        return from_target_spec(target)
    raise UsageError(f"unknown target {target!r}; targets are `local` and `adb[:SERIAL]` (see `mobiperf targets`)")


target_option = click.option("-t", "--target", default="local", show_default=True,
                             help="Where to run: local, or adb[:SERIAL].")
format_option = click.option("--format", "fmt", type=click.Choice(["text", "json", "csv"]), default="text",
                             show_default=True, help="Output format.")


# The option vocabulary shared by the subcommands, so that the same option means the same thing everywhere.
#
#     -n/--repeat N           repetitions, 1..100, in run, sweep and study; run also takes auto[:LIMIT]
#     --primary METRIC        the one metric that decides (compare, run -n auto) or that a matrix shows (sweep)
#     --metric PATTERN        which metrics to show (fnmatch pattern; repeatable)
#     --min-effect PCT        the smallest change worth a verdict (5%)
#     --format text|json|csv  output for people or machines


class RepeatParam(click.ParamType):
    """N in 1..100, or (when `allow_auto`) auto / auto:LIMIT, returned as ("auto", LIMIT)."""

    name = "N"

    def __init__(self, allow_auto: bool = False):
        self.allow_auto = allow_auto
        if allow_auto:
            self.name = "N|auto[:LIMIT]"

    def convert(self, value, param, ctx):
        if isinstance(value, (int, tuple)):
            return value
        try:
            return parse_repeat(value, allow_auto=self.allow_auto)
        except UsageError as e:
            self.fail(str(e).removeprefix(f"-n {value}: "), param, ctx)


def repeat_option(default: int | None, *, allow_auto: bool = False, what: str = "Repetitions",
                  note: str = "") -> callable:
    auto = " auto[:LIMIT] adds repetitions until the primary metric is precise (limit 20)." if allow_auto else ""
    return click.option("-n", "--repeat", default=default, show_default=default is not None,
                        type=RepeatParam(allow_auto),
                        help=f"{what} (1..{MAX_REPEAT}), each on a fresh stack.{auto}{note}")


def fraction(text: str, what: str) -> float:
    """A percentage (5%) or a fraction (0.05) in [0, 1)."""
    try:
        value = float(text[:-1]) / 100 if str(text).endswith("%") else float(text)
    except ValueError:
        raise UsageError(f"{what}: not a number or percentage: {text!r} (examples: 5%, 0.05)") from None
    if not 0 <= value < 1:
        raise UsageError(f"{what}: {text} is outside [0, 1)")
    return value


def _absolute(ctx, param, value):
    """A path given by the user, made absolute before anything else sees it: the FUSE daemons and the workload
    run in other working directories, and a relative path would mean something else to them."""
    return None if value is None else Path(os.path.abspath(value))


def _recover_leftovers(transport) -> None:
    """Undo what killed mobiperf processes left on the target, saying what it was (mobiperf.target.leftovers)."""
    from mobiperf.core import signals
    from mobiperf.target.leftovers import recover

    recover(transport, fix=True, say=signals.say)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110},
             epilog=_examples("mobiperf run --stack ext4+fuse -n auto -o runs/fuse -- mobibench -p . -f 65536 -r 4",
                              "mobiperf run --stack ext4+bfuse -n auto -o runs/bfuse -- mobibench -p . -f 65536 -r 4",
                              "mobiperf compare runs/fuse runs/bfuse -o compare.html --fail-on-regression",
                              "mobiperf study bfuse --quick -o /tmp/bfuse",
                              "mobiperf COMMAND --help"))
@click.version_option(package_name="mobiperf")
def cli() -> None:
    """Where does a phone's storage IO time go, and did a change help?

    mobiperf runs a workload on a target's storage stack, traces every layer, classifies every IO and draws an
    HTML report.
    """


@cli.command("targets", epilog=_examples("mobiperf targets", "mobiperf targets --format json"))
@format_option
def cmd_targets(fmt: str) -> None:
    """List the targets mobiperf can run on."""
    from mobiperf.target.adb import list_adb_devices

    rows = [{"target": "local", "kind": "host", "description": "this machine (emulated phone storage stack)"}]
    try:
        for dev in list_adb_devices():
            facts = [f"{dev.get('model') or '?'}", f"Android {dev.get('android_version') or '?'}",
                     f"{dev.get('abi') or '?'}", f"kernel {dev.get('kernel') or '?'}",
                     "root" if dev.get("root") else "no root"]
            rows.append({"target": f"adb:{dev['serial']}", "kind": "adb", "description": ", ".join(facts), **dev})
    except MobiperfError as e:
        click.echo(f"note: adb devices not listed: {e}", err=True)
    if fmt == "json":
        click.echo(json.dumps(rows, indent=2))
    else:
        for r in rows:
            click.echo(f"{r['target']:<24} {r['kind']:<6} {r['description']}")


@cli.command("run", epilog=_examples(
    "mobiperf run -t local --stack ext4 -- dd if=/dev/zero of=f bs=512k count=64 oflag=direct",
    "mobiperf run --stack ext4 --scheduler bfq -n 3 -o runs/seq -- mobibench -p . -f 65536 -r 512 -a 0",
    "mobiperf run --stack ext4+fuse -- mobibench -p . -d 0 -n 100 -j 1",
    "mobiperf run --stack ext4+bfuse -n auto --baseline runs/fuse -o runs/bfuse -- mobibench -p . -f 65536 -r 512 -a 0",
    "mobiperf run --stack ext4+fuse --phone galaxy-s3-2012 -- mobibench -p . -f 262144 -r 512 -a 4",
    "mobiperf run --stack raw --device emmc-2012 -- sh -c 'dd if=/dev/zero of=$MOBIPERF_DEVICE bs=512k count=256'",
    "mobiperf run --stack ext4 --source ftrace --source strace --source layout -- mobibench -p . -d 0 -n 50 -j 3",
    "mobiperf run -t adb:SERIAL --stack dir:/data/local/tmp -- mobibench -p . -f 16384 -r 4 -a 1 -y 2"))
@target_option
@click.option("--stack", "stack_spec", default="ext4", show_default=True,
              help="Storage stack, bottom first: ext4, xfs, btrfs, ext4+fuse, ext4+bfuse:io_unit=512k, ...")
@click.option("--scheduler", help="IO scheduler of the stack's device: none, mq-deadline, bfq, kyber.")
@repeat_option(1, allow_auto=True)
@click.option("--min-effect", default="5%", show_default=True,
              help="With -n auto: stop when the primary metric's interval is narrower than this.")
@click.option("--primary", metavar="METRIC",
              help="With -n auto: the metric to make precise (default: the workload's throughput, else its "
                   "elapsed time).")
@click.option("--baseline", type=click.Path(path_type=Path), metavar="RUN",
              help="With -n auto: compare every look with RUN's repetitions; stop when the ratio is precise or "
                   "the verdict is settled (a clear effect, however noisy).")
@click.option("-o", "--output", type=click.Path(path_type=Path), callback=_absolute,
              help="Run directory to create (never overwritten).")
@click.option("--image-size", default="1G", show_default=True, help="Size of the emulated data partition.")
@click.option("--device", "device_profile", help="Device profile under the loop device: emmc-2012, ufs-2020, host.")
@click.option("--phone", help="Phone profile: the four models below at once (galaxy-s3-2012); explicit options win.")
@click.option("--dirty-limit", default="host", show_default=True,
              help="Phone memory model: dirty page limit of the stack's device (e.g. 64M), or host.")
@click.option("--cpu", "cpu_share", default="host", show_default=True,
              help="Phone CPU model: share of one core for the workload and the FUSE daemons (e.g. 15%), or host.")
@click.option("--fuse-wakeup", default="0", show_default=True,
              help="Phone scheduler model: each FUSE request reaches its daemon this much later (e.g. 430us).")
@click.option("--source", "sources", multiple=True,
              help="Trace source (repeatable): ftrace, ftrace_raw, syscalls, raw_syscalls, strace, blktrace, layout, "
                   "facts. Default: ftrace, syscalls, layout, facts (the syscalls events of the workload and its FUSE "
                   "daemons: the top of the layer-by-layer breakdown, from raw_syscalls where the kernel has no "
                   "syscalls events; add strace for paths).")
@click.option("--event-set", "event_sets", multiple=True,
              help="Whole ftrace event set (repeatable): ext4, jbd2, f2fs, fuse, writeback. Default: the stack's "
                   "light events (fsync, jbd2 commits, FUSE requests).")
@click.option("--event", "events", multiple=True, help="Extra trace event system:name (repeatable).")
@click.option("--recorder", type=click.Choice(("auto", "perfetto", "tracefs")), default="auto", show_default=True,
              help="How ftrace records: the device's perfetto (adb targets that have it; auto) or tracefs directly.")
@click.option("--timeout", help="Kill the workload after this long (e.g. 10m).")
@click.option("--no-report", is_flag=True, help="Skip the HTML page (mobiperf report RUNDIR draws it later).")
@click.option("--scope", type=click.Choice(["workload", "all"]), default="workload", show_default=True,
              help="Whose IO the figures count: the workload (its processes, its FUSE daemons, the kernel threads "
                   "writing for them; everything else is reported apart) or all of the device's (whole-device "
                   "studies).")
@click.option("--request", "request_file", type=click.Path(path_type=Path, dir_okay=False),
              help="A run request file (JSON: the stack as typed layers, the workload, its options), as a sweep "
                   "hands each cell to its run; -t and -o stay on the command line.")
@click.argument("command", nargs=-1)
def cmd_run(target, stack_spec, scheduler, repeat, min_effect, primary, baseline, output, image_size, device_profile,
            phone, dirty_limit, cpu_share, fuse_wakeup, sources, event_sets, events, recorder, timeout, no_report,
            scope, request_file, command) -> None:
    """Set up the stack, run COMMAND in its working directory while tracing, tear the stack down, then parse,
    analyze and report."""
    from mobiperf.orchestration import pipeline
    from mobiperf.orchestration.run_request import default_run_path

    if request_file:
        request = _request_from_file(request_file, command)
    elif not command:
        raise UsageError("give the workload after --, e.g. mobiperf run --stack ext4 -- dd if=/dev/zero of=f "
                         "bs=1M count=64 (or --request FILE)")
    else:
        request = run_request_from_options(
            stack_spec=stack_spec, scheduler=scheduler, repeat=repeat, min_effect=min_effect, primary=primary,
            baseline=baseline, image_size=image_size, device_profile=device_profile, phone=phone,
            dirty_limit=dirty_limit, cpu_share=cpu_share, fuse_wakeup=fuse_wakeup, sources=sources,
            event_sets=event_sets, events=events, recorder=recorder, timeout=timeout, no_report=no_report, scope=scope,
            command=command)
    auto = request.auto
    if request.device:
        from mobiperf.stack.device_model import resolve_profile

        resolve_profile(request.device)  # an unknown profile is a usage error before anything is set up
    out = output or Path(os.path.abspath(default_run_path(request)))
    target = _target(target)
    if is_root(target.transport):
        _recover_leftovers(target.transport)  # before probing: a leftover stack would look like part of the machine
    try:
        rundir = pipeline.run(target, request, out)
    except KeyboardInterrupt as e:
        from mobiperf.core import signals

        kept = f"the partial run is kept at {out} (marked incomplete)" if (out / "run.json").exists() else \
            "before the run directory was created"
        signals.say(f"\n{signals.signal_name(e)}: stopped; {kept}")
        signals.flush_std_streams()
        sys.exit(signals.exit_status(e))
    meta = rundir.read_meta()
    if auto is not None:
        click.echo(f"repetitions: {len(meta['repetitions'])} of at most {auto.limit} (-n auto): {auto.plan.reason}")
    _print_summary(meta, headline_only=True)
    _print_layer_shares(meta)
    for warning in dict.fromkeys(re.sub(r"\brep \d+: ", "", w) for w in meta.get("warnings", [])):
        click.echo(f"warning: {warning}", err=True)   # once, whatever the repetitions (what a kernel lacks ...)
    click.echo(f"all metrics: mobiperf show {rundir.path}")
    if request.report:
        click.echo(f"report: {rundir.path / 'report.html'}")
    if meta["status"] == "failed":
        from mobiperf.core.exit_status import describe_exit_statuses

        codes = [r["exit_code"] for r in meta["repetitions"]]
        first = next(r["index"] for r in meta["repetitions"] if r["exit_code"] != 0)
        tail = _stderr_tail(rundir.path / "raw" / f"rep{first}" / "stderr.txt")
        if tail:
            click.echo(f"the workload's last stderr lines (rep {first}):", err=True)
            click.echo("".join(f"  | {line}\n" for line in tail), err=True, nl=False)
        raise MobiperfError(f"the workload failed ({describe_exit_statuses(codes)}); the run is kept at "
                            f"{rundir.path}")

# The options of `run` that a request file carries: given beside --request, they would be silently ignored.
_REQUEST_OPTIONS = {"stack_spec": "--stack", "scheduler": "--scheduler", "repeat": "-n", "image_size": "--image-size",
                    "device_profile": "--device", "phone": "--phone", "dirty_limit": "--dirty-limit",
                    "cpu_share": "--cpu", "fuse_wakeup": "--fuse-wakeup", "sources": "--source",
                    "event_sets": "--event-set", "events": "--event", "recorder": "--recorder", "timeout": "--timeout",
                    "no_report": "--no-report", "scope": "--scope"}


def _request_from_file(path: Path, command: tuple[str, ...]):
    from click.core import ParameterSource

    from mobiperf.orchestration.run_request import read_request

    ctx = click.get_current_context()
    given = [flag for name, flag in _REQUEST_OPTIONS.items()
             if ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE]
    if command or given:
        raise UsageError(f"--request {path} holds the workload and its options: leave out "
                         + ", ".join(given + (["the command after --"] if command else [])))
    return read_request(path)


def run_request_from_options(*, stack_spec, scheduler, repeat, min_effect, primary, image_size, device_profile,
                             phone, dirty_limit, cpu_share, fuse_wakeup, sources, event_sets, events, recorder,
                             timeout, no_report, scope, command, baseline=None):
    """The RunRequest that `mobiperf run`'s options and COMMAND ask for (a phone profile fills the models the
    options leave at their defaults)."""
    from mobiperf.collectors.ftrace import parse_event_names
    from mobiperf.core.units import parse_duration_ns
    from mobiperf.orchestration.run_request import RunRequest
    from mobiperf.stack.cpu_share import parse_cpu_share
    from mobiperf.stack.dirty_limit import parse_dirty_limit
    from mobiperf.stack.spec import parse_image_size, parse_stack_spec

    if phone:
        from mobiperf.stack.phone import resolve_phone

        model = resolve_phone(phone)
        device_profile = device_profile or model.device
        dirty_limit = model.dirty if dirty_limit == "host" else dirty_limit
        cpu_share = model.cpu if cpu_share == "host" else cpu_share
        fuse_wakeup = model.fuse_wakeup if fuse_wakeup in ("", "0") else fuse_wakeup
    auto = None
    if isinstance(repeat, tuple):
        from mobiperf.orchestration.auto_repeat import AutoRepeat

        auto = AutoRepeat(repeat[1], fraction(min_effect, "--min-effect"), primary=primary, baseline=baseline)
    elif primary or baseline:
        raise UsageError(f"{'--primary' if primary else '--baseline'} applies to -n auto (compare decides on a "
                         "primary metric of its own)")
    return RunRequest(
        stack=parse_stack_spec(stack_spec), command=list(command), scheduler=scheduler,
        repeat=repeat if auto is None else auto.limit, auto=auto,
        image_size=parse_image_size(image_size), extra_events=parse_event_names(list(events)),
        timeout_s=parse_duration_ns(timeout) / 1e9 if timeout else None, device=device_profile,
        sources=tuple(sources) or None, event_sets=tuple(event_sets) or None, report=not no_report, recorder=recorder,
        dirty_limit=parse_dirty_limit(dirty_limit), cpu_share=parse_cpu_share(cpu_share),
        fuse_wakeup_ns=parse_duration_ns(fuse_wakeup) if fuse_wakeup not in ("", "0") else 0, scope=scope)


def _stderr_tail(path: Path, lines: int = 10) -> list[str]:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return []
    return [line[:200] for line in text.splitlines()[-lines:]]


@cli.command("analyze", epilog=_examples("mobiperf analyze runs/20261122-ext4-dd",
                                         "mobiperf analyze runs/x --format json | jq 'keys'",
                                         "mobiperf analyze runs/x --format csv > breakdown.csv",
                                         "mobiperf analyze runs/ --cluster local:2",
                                         "mobiperf analyze /shared/runs --cluster tcp://scheduler:8786"))
@click.argument("rundir")
@format_option
@click.option("--cluster", help="A store's runs in parallel on Dask, each run a task: local, local:N, or the "
                                "scheduler's tcp://HOST:PORT (needs mobiperf[cluster]).")
@click.option("--force", is_flag=True, help="Re-analyse even if the raw traces now hold fewer events than the run "
                                            "recorded (a damaged file); the loss is recorded in run.json.")
def cmd_analyze(rundir: str, fmt: str, cluster: str | None, force: bool) -> None:
    """Re-parse and re-analyze a run directory offline, and print its IO classification (text: 120 columns, the
    first 40 rows of each table; json and csv: every row); given a store (a directory of run directories, or an
    fsspec URL), re-analyse every run in it."""
    from mobiperf.commands.store import analyze_store_cli, is_store_arg

    if cluster or is_store_arg(rundir):
        analyze_store_cli(rundir, cluster, fmt)
        return
    from mobiperf.orchestration import pipeline
    from mobiperf.core.runstore import RunDir

    from mobiperf.analyzers import breakdown_tables

    run = RunDir.open(rundir)
    run.release_reserve()  # the space a collecting run set aside (a killed one leaves it)
    results = pipeline.analyze(run, reparse=True, force=force)
    tables = breakdown_tables(results, text=fmt == "text")
    if fmt == "json":
        click.echo(json.dumps({title: df.to_dicts() for title, df in tables.items()}, indent=2, default=str))
        return
    for title, df in tables.items():
        click.echo(f"\n== {title}" if fmt == "text" else f"# {title}")  # csv: one commented title per table
        if fmt == "text":
            from mobiperf.reports.text_table import format_table

            click.echo(format_table(df, more_hint=f" (mobiperf analyze {rundir} --format csv prints every row)"),
                       nl=False)
        else:
            _print_table(df, fmt)
    from mobiperf.core.layer_sources import layer_sources

    meta = run.read_meta()
    for layer, line in layer_sources(meta):
        click.echo(f"note: {layer}: {line}", err=True)
    for note in skipped_notes(meta):
        click.echo(f"note: {note}", err=True)


def skipped_notes(meta: dict) -> list[str]:
    """What the analysis left out, said once per cause rather than once per table: for a collected run, the
    source to add when collecting; for an ingested one (nothing can be collected again), the tables its traces
    lack."""
    import re

    from mobiperf.reports.text_table import group_notes

    skipped = meta.get("analysis", {}).get("skipped", {})
    if meta.get("target", {}).get("target") == "ingested" and skipped:
        from mobiperf.core.schema import TABLES

        lacking = sorted({m for why in skipped.values() for m in re.findall(r"no (\w+) table", why)} & set(TABLES))
        if lacking:  # event tables: what a trace holds or not
            return [f"not computed from these traces: {', '.join(skipped)} (they have no {', '.join(lacking)} "
                    "events)"]
    return group_notes(skipped)


@cli.command("report", epilog=_examples("mobiperf report runs/x", "mobiperf report runs/x -o /tmp/x.html",
                                        "mobiperf report runs/ --by kernel,stack -o fleet.html"))
@click.argument("rundir")
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Write the HTML here instead of RUNDIR.")
@click.option("--by", help="A store's fleet report: group its runs by these facts (kernel,stack,target,...).")
@click.option("--base", help="Fleet report: the group the others are compared with (default: the first).")
def cmd_report(rundir: str, output: Path | None, by: str | None, base: str | None) -> None:
    """Draw the HTML report of a run directory from its result tables; given a store, the fleet report: the
    headline metrics of its runs grouped --by facts, every group compared with BASE."""
    from mobiperf.commands.store import fleet_report_cli, is_store_arg

    if by or is_store_arg(rundir):
        fleet_report_cli(rundir, by, output, base)
        return
    from mobiperf.orchestration import pipeline
    from mobiperf.core.runstore import RunDir

    run = RunDir.open(rundir)
    if not run.has_table("io_class"):
        pipeline.analyze(run)
    click.echo(pipeline.report(run, output))


@cli.command("show", epilog=_examples("mobiperf show runs/x", "mobiperf show runs/x --format json"))
@click.argument("rundir", type=click.Path(path_type=Path))
@format_option
def cmd_show(rundir: Path, fmt: str) -> None:
    """Print a run's description and metrics."""
    from mobiperf.core.runstore import RunDir

    meta = RunDir.open(rundir).read_meta()
    if fmt == "json":
        click.echo(json.dumps(meta.to_json(), indent=2))
        return
    if fmt == "csv":
        click.echo("metric,labels,value,unit")
        for m in meta.get("metrics", []):
            labels = ";".join(f"{k}={v}" for k, v in m.get("labels", {}).items())
            click.echo(f"{m['name']},{labels},{m['value']},{m['unit']}")
        return
    click.echo(f"run      {meta.get('id')}  ({meta.get('status')})")
    if meta.get("stopped"):
        click.echo(f"stopped  {meta['stopped'].get('stage')}: {meta['stopped'].get('reason')}")
    click.echo(f"stack    {meta.get('stack')}  scheduler: {meta.get('scheduler') or 'default'}")
    click.echo(f"command  {' '.join(meta.get('command', []))}")
    parsed = meta.get("parse", {}).get("repetitions", {})
    for r in meta.get("repetitions", []):
        lost = parsed.get(str(r["index"]), {}).get("lost_events", {})
        lost_text = ", ".join(f"{source} {n}" for source, n in sorted(lost.items())) if lost else "none"
        took = f"{r['workload_ns'] / 1e9:.3f} s" if r.get("workload_ns") is not None else "unknown"
        if r.get("workload_window") and r.get("workload_ns") is not None:  # an ingested trace: what says so
            took += f" ({r['workload_window']})"
        click.echo(f"rep {r['index']}    exit {r['exit_code']}  workload {took}"
                   f"  lost events: {lost_text}" + (f"  stopped: {r['stopped']}" if r.get("stopped") else "")
                   + ("  TRUNCATED traces" if r.get("truncated") else ""))
    for w in meta.get("warnings", []):
        click.echo(f"warning  {w}")
    from mobiperf.core.layer_sources import layer_sources

    for layer, line in layer_sources(meta):
        click.echo(f"layers   {layer}: {line}")
    _print_summary(meta)


HEADLINE_METRICS = ("block.requests", "block.bytes", "block.sequential_share", "latency.d2c.p50", "latency.d2c.p99",
                    "latency.q2c.p99")


def _print_summary(meta: dict, *, headline_only: bool = False) -> None:
    from mobiperf.core.metrics import format_value, metric_key

    for m in sorted(meta.get("metrics", []), key=metric_key):
        if headline_only and m["name"] not in HEADLINE_METRICS and not m["name"].startswith("workload."):
            continue
        click.echo(f"  {metric_key(m):<58} {format_value(m)}")


def _print_layer_shares(meta: dict) -> None:
    """Where the synchronous calls' time went, layer by layer (exclusive shares; FUSE also inclusive)."""
    by_call: dict[str, dict[str, float]] = {}
    for m in meta.get("metrics", []):
        if m["name"] in ("layer.share", "layer.inclusive_share"):
            kind = "incl" if m["name"] == "layer.inclusive_share" else "self"
            by_call.setdefault(m["labels"]["syscall"], {})[f"{kind}:{m['labels']['layer']}"] = m["value"]
    for call, v in sorted(by_call.items()):
        parts = [f"{layer} {100 * v[f'self:{layer}']:.0f}%" for layer in ("syscall", "fuse", "fs", "journal", "block",
                                                                       "device") if v.get(f"self:{layer}")]
        incl = f" (FUSE inclusive {100 * v['incl:fuse']:.0f}%)" if v.get("incl:fuse") else ""
        click.echo(f"  {call} time by layer: {', '.join(parts)}{incl}")
    from mobiperf.core.layer_sources import layer_sources

    for layer, line in layer_sources(meta):
        click.echo(f"  {layer}: {line}")


def _print_table(df, fmt: str) -> None:
    if fmt == "json":
        click.echo(json.dumps(df.to_dicts(), indent=2))
    elif fmt == "csv":
        click.echo(df.write_csv(), nl=False)
    else:
        import polars as pl

        with pl.Config(tbl_rows=200, tbl_cols=20, tbl_hide_dataframe_shape=True):
            click.echo(df)


def is_root(transport) -> bool:
    """Whether leftovers can be looked for (and undone) on the target: they need root to see and to undo."""
    try:
        return transport.run(["id", "-u"], timeout=10).text.strip() == "0"
    except MobiperfError:
        return False


def main() -> None:
    from mobiperf.core import signals
    from mobiperf.commands import register_all

    signals.install()  # SIGTERM and SIGHUP stop every command the way Ctrl-C does
    try:
        register_all(cli)
        cli.main(standalone_mode=False)
        signals.finished()
    except click.exceptions.Abort as e:  # click's name for a KeyboardInterrupt (a Stopped by any stop signal)
        stop = e.__cause__ if isinstance(e.__cause__, KeyboardInterrupt) else KeyboardInterrupt()
        signals.say(f"{signals.signal_name(stop)}: stopped")
        signals.flush_std_streams()
        sys.exit(signals.exit_status(stop))
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except MobiperfError as e:
        signals.say(f"mobiperf: error: {e}")
        sys.exit(e.exit_code)
    except KeyboardInterrupt as e:
        signals.say(f"{signals.signal_name(e)}: stopped")
        signals.flush_std_streams()
        sys.exit(signals.exit_status(e))
    except OSError as e:
        if isinstance(e.__context__, KeyboardInterrupt):  # click's echo after a stop, to a terminal gone (SIGHUP)
            signals.flush_std_streams()
            sys.exit(signals.exit_status(e.__context__))
        from mobiperf.core.run_stop import is_storage_error  # the run facts' model: on this path only

        if not is_storage_error(e):
            raise
        # A full or failing disk is not a bug: one line, no traceback.
        signals.say(f"mobiperf: error: {e.strerror}" + (f": {e.filename}" if e.filename else ""))
        sys.exit(1)


if __name__ == "__main__":
    main()
