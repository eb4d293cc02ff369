"""The option vocabulary shared by the subcommands, so that the same option means the same thing everywhere.

    -n/--repeat N           repetitions, 1..100, in run, sweep and study; run also takes auto[:LIMIT]
    --primary METRIC        the one metric that decides (compare, run -n auto) or that a matrix shows (sweep)
    --metric PATTERN        which metrics to show (fnmatch pattern; repeatable)
    --min-effect PCT        the smallest change worth a verdict (5%)
    --format text|json|csv  output for people or machines
"""

from __future__ import annotations

import click

from mobiperf.errors import UsageError
from mobiperf.sequential import MAX_REPEAT, parse_repeat


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
