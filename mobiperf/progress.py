"""Progress bars for long stages (rich), silent when stderr is not a terminal.

    from mobiperf.progress import stage

    with stage("parse", total=len(files)) as advance:
        for f in files:
            parse(f)
            advance()            # one step; advance(n) for n steps, advance(description="rep 2") to relabel

`total=None` shows a spinner with elapsed time instead of a bar. Bars go to stderr, so stdout stays clean for
`--format json|csv`; they are off when stderr is not a terminal (pipes, CI logs, tests) or MOBIPERF_PROGRESS=0,
and forced on with MOBIPERF_PROGRESS=1. Stages may nest: an inner stage adds a line under the outer one.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Iterator, Protocol


class Advance(Protocol):
    def __call__(self, steps: float = 1, *, description: str | None = None) -> None: ...


_active = None     # the rich Progress shared by nested stages
_depth = 0


def enabled() -> bool:
    """Whether progress is shown: MOBIPERF_PROGRESS=0/1 decides, else whether stderr is a terminal."""
    setting = os.environ.get("MOBIPERF_PROGRESS", "").strip().lower()
    if setting in ("0", "no", "false", "off"):
        return False
    if setting in ("1", "yes", "true", "on"):
        return True
    return sys.stderr.isatty()


def _noop(steps: float = 1, *, description: str | None = None) -> None:
    return None


@contextmanager
def stage(name: str, total: float | None = None) -> Iterator[Advance]:
    """A progress line for the stage `name` while the block runs; yields the function that advances it."""
    global _active, _depth
    if not enabled():
        yield _noop
        return
    from rich.console import Console
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn,
                               TimeElapsedColumn, TimeRemainingColumn)

    owner = _active is None
    if owner:
        _active = Progress(SpinnerColumn(), TextColumn("[bold]{task.description}"), BarColumn(),
                           MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn(),
                           console=Console(stderr=True), transient=False)
        _active.start()
    progress = _active
    task = progress.add_task(("  " * _depth) + name, total=total)
    _depth += 1

    def advance(steps: float = 1, *, description: str | None = None) -> None:
        if description is not None:
            progress.update(task, description=("  " * (_depth - 1)) + f"{name}: {description}")
        progress.advance(task, steps)

    try:
        yield advance
        if total is not None:
            progress.update(task, completed=total)
    finally:
        _depth -= 1
        if owner:
            progress.stop()
            _active = None


def track(items, name: str, total: int | None = None) -> Iterator:
    """Iterate over `items` with a progress line (total from len() when it has one)."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)
    with stage(name, total=total) as advance:
        for item in items:
            yield item
            advance()

