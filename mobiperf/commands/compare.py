"""`mobiperf compare BASE NEW [NEW...]`: did a change help? One primary metric decides, guards can veto, every
other metric is context."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from mobiperf.core.errors import UsageError
from mobiperf.cli import fraction

EPILOG = """

\b
A side is a run directory (its repetitions are the sample) or a directory of run directories (pooled).
The primary metric is the workload's own throughput when it reports one (workload.throughput, .tps, .iops),
else its elapsed time (workload.elapsed, else run.workload_time): lower is better.

\b
Exit status:
  0  no regression of the primary or a guard (or --fail-on-regression not given)
  3  with --fail-on-regression: the primary or a guard regressed significantly, beyond the minimum effect
  2  usage error (bad option, no such run, unknown metric); 1 other errors

\b
Examples:
  mobiperf compare runs/fuse runs/bfuse
  mobiperf compare runs/fuse runs/bfuse -o compare.html
  mobiperf compare runs/base runs/new --guard 'latency.d2c.p99{op=write}:10%' --fail-on-regression
  mobiperf compare runs/base runs/new --primary run.workload_time --min-effect 10%
  mobiperf compare runs/base runs/new --format json | jq .verdict
  mobiperf compare runs/fuse runs/bfuse --until 20      # add repetitions until the ratio is precise or settled
  mobiperf compare runs/fuse runs/bfuse --format json | jq '.movers[:3]'   # where the time moved
  mobiperf compare runs/noop runs/blk runs/ext4 runs/fuse --metric 'latency.*' --format csv > overhead.csv
"""


@click.command("compare", epilog=EPILOG)
@click.argument("base", type=click.Path(path_type=Path))
@click.argument("new", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["text", "json", "csv"]), default="text", show_default=True,
              help="Output format.")
@click.option("-o", "--output", type=click.Path(path_type=Path),
              help="Also write the compare page (HTML: the verdict, every repetition, the context by layer, the "
                   "runs' figures overlaid).")
@click.option("--primary", metavar="METRIC", help="The metric that decides (default: the workload's throughput, "
              "else its elapsed time).")
@click.option("--guard", "guards", multiple=True, metavar="METRIC[:MAX]",
              help="Also fail the gate when METRIC regresses by more than MAX (default: the minimum effect); "
                   "repeatable.")
@click.option("--metric", "metrics", multiple=True, metavar="PATTERN",
              help="Show only the context metrics matching PATTERN (fnmatch; repeatable).")
@click.option("--alpha", default="0.05", show_default=True, help="Significance level.")
@click.option("--min-effect", default="5%", show_default=True,
              help="Smallest change worth calling significant.")
@click.option("--method", type=click.Choice(["mwu", "bootstrap"]), default="mwu", show_default=True,
              help="Mann-Whitney U p-value, or bootstrap confidence interval of the ratio of medians.")
@click.option("--max-dispersion", default="25%", show_default=True,
              help="Warn when a side's robust coefficient of variation exceeds this.")
@click.option("--until", "until", type=click.IntRange(2, 100), metavar="LIMIT",
              help="Add repetitions to BASE and NEW (run again, alternately) until the primary metric's ratio is "
                   "known within the minimum effect or the verdict is settled, up to LIMIT per side.")
@click.option("-t", "--target", default="local", show_default=True,
              help="With --until: where to run the added repetitions: local, or adb[:SERIAL].")
@click.option("--fail-on-regression", is_flag=True,
              help="Exit with status 3 when the primary metric or a guard regresses significantly.")
def cmd_compare(base, new, fmt, output, primary, guards, metrics, alpha, min_effect, method, max_dispersion,
                until, target, fail_on_regression) -> None:
    """Did the change help? Compare BASE with NEW (and more NEW runs): a verdict on one primary metric, guards,
    and every other metric as context."""
    from mobiperf.compare import runs as compare
    from mobiperf.compare import formats as compare_format
    from mobiperf.compare.verdict import parse_guard

    options = compare.CompareOptions(alpha=fraction(alpha, "--alpha"), min_effect=fraction(min_effect,
                                     "--min-effect"), method=method,
                                     max_dispersion=fraction(max_dispersion, "--max-dispersion"),
                                     metric_patterns=tuple(metrics), primary=primary,
                                     guards=tuple(parse_guard(g) for g in guards))
    if options.alpha <= 0:
        raise UsageError("--alpha must be above 0")
    if until:
        _extend(base, new, until, options, target)
    groups = [compare.load_group(p) for p in (base, *new)]
    result = compare.compare_groups(groups[0], groups[1:], options)
    from mobiperf.compare.moved import attach_profile

    attach_profile(result)  # where the time moved
    if fmt != "text":  # the text form has them at its top; machines' stdout stays parseable
        for w in result.warnings:
            click.echo(f"WARNING: {w}", err=True)
    if fmt == "json":
        click.echo(compare_format.dump_json(result), nl=False)
    elif fmt == "csv":
        click.echo(compare_format.to_csv(result), nl=False)
    else:
        click.echo(compare_format.format_text(result), nl=False)
    if output:
        from mobiperf.reports.compare_page import write_compare_page

        click.echo(f"compare page: {write_compare_page(result, output)}", err=True)
    if fail_on_regression and result.has_regression:
        names = sorted({r.key for p in result.pairs for r in p.regressions})
        click.echo(f"gate failed: significant regression of {', '.join(names)}", err=True)
        sys.exit(compare.REGRESSION_EXIT_CODE)


def _extend(base, new, limit: int, options, target: str) -> None:
    """--until: repetitions added to both runs before they are compared."""
    from mobiperf.cli import _target
    from mobiperf.orchestration.until import extend_until

    if len(new) != 1:
        raise UsageError("--until compares one NEW run with BASE; give one NEW")
    plan = extend_until(base, new[0], limit=limit, min_effect=options.min_effect, alpha=options.alpha,
                        primary=options.primary, target=_target(target),
                        say=lambda text: click.echo(text, err=True))
    click.echo(f"--until: {plan.reason}", err=True)


def register(group: click.Group) -> None:
    group.add_command(cmd_compare)
