"""`mobiperf compare BASE NEW [NEW...]`: did a change help? Per metric medians, ratios and significance."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from mobiperf.errors import UsageError

EPILOG = """

\b
A side is a run directory (its repetitions are the sample) or a directory of run directories (pooled).
Exit status: 0, or 3 with --fail-on-regression when a regression is significant; 1/2 on errors.

\b
Examples:
  mobiperf compare runs/fuse runs/bfuse
  mobiperf compare runs/fuse runs/bfuse -o compare.html
  mobiperf compare runs/base runs/new --metric 'latency.*' --min-effect 10% --fail-on-regression
  mobiperf compare runs/noop runs/blk runs/ext4 runs/fuse --format csv > overhead.csv
"""


def _fraction(text: str, what: str) -> float:
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise UsageError(f"{what}: not a number or percentage: {text!r} (examples: 5%, 0.05)") from None
    if not 0 <= value < 1:
        raise UsageError(f"{what}: {text} is outside [0, 1)")
    return value


@click.command("compare", epilog=EPILOG)
@click.argument("base", type=click.Path(path_type=Path))
@click.argument("new", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["text", "json", "csv"]), default="text", show_default=True,
              help="Output format.")
@click.option("-o", "--output", type=click.Path(path_type=Path),
              help="Also write the HTML page overlaying both runs' figures, with the deltas.")
@click.option("--metric", "metrics", multiple=True, help="Only metrics matching this pattern (repeatable).")
@click.option("--alpha", default="0.05", show_default=True, help="Significance level.")
@click.option("--min-effect", default="5%", show_default=True,
              help="Smallest change worth calling significant.")
@click.option("--method", type=click.Choice(["mwu", "bootstrap"]), default="mwu", show_default=True,
              help="Mann-Whitney U p-value, or bootstrap confidence interval of the ratio of medians.")
@click.option("--max-dispersion", default="25%", show_default=True,
              help="Warn when a side's robust coefficient of variation exceeds this.")
@click.option("--fail-on-regression", is_flag=True, help="Exit with status 3 when any regression is significant.")
def cmd_compare(base, new, fmt, output, metrics, alpha, min_effect, method, max_dispersion,
                fail_on_regression) -> None:
    """Compare BASE with NEW (and more NEW runs), metric by metric, with statistics."""
    from mobiperf import compare

    options = compare.CompareOptions(alpha=_fraction(alpha, "--alpha"), min_effect=_fraction(min_effect,
                                     "--min-effect"), method=method,
                                     max_dispersion=_fraction(max_dispersion, "--max-dispersion"),
                                     metric_patterns=tuple(metrics))
    if options.alpha <= 0:
        raise UsageError("--alpha must be above 0")
    groups = [compare.load_group(p) for p in (base, *new)]
    result = compare.compare_groups(groups[0], groups[1:], options)
    if fmt == "json":
        click.echo(compare.dump_json(result), nl=False)
    elif fmt == "csv":
        click.echo(compare.to_csv(result), nl=False)
    else:
        click.echo(compare.format_text(result), nl=False)
    for w in result.warnings:
        if fmt != "text":
            click.echo(f"WARNING: {w}", err=True)
    if output:
        from mobiperf.reports.compare_page import write_compare_page

        click.echo(f"compare page: {write_compare_page(result, output)}", err=True)
    if fail_on_regression and result.has_regression:
        names = sorted({r.key for p in result.pairs for r in p.regressions})
        click.echo(f"significant regression in {len(names)} metric(s): {', '.join(names)}", err=True)
        sys.exit(compare.REGRESSION_EXIT_CODE)


def register(group: click.Group) -> None:
    group.add_command(cmd_compare)
