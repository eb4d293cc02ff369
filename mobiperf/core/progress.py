"""Progress for long stages: a rich bar on a terminal, plain lines on stderr otherwise (CI logs, pipes).

    from mobiperf.core.progress import stage

    with stage("parse", total=len(files)) as advance:
        for f in files:
            parse(f)
            advance()            # one step; advance(n) for n steps, advance(description="rep 2") to relabel

`total=None` shows a spinner with elapsed time instead of a bar. Progress goes to stderr, so stdout stays clean
for `--format json|csv`. On a terminal it is a rich bar (forced with MOBIPERF_PROGRESS=1); elsewhere it is one
line per step of an outermost stage (`mobiperf: collect: rep 2 (2/5, 14 s)`) and one when it ends, so a CI log
shows what a 10-minute run is doing; MOBIPERF_PROGRESS=0 silences both. Stages may nest: an inner stage adds a
line under the outer one on a terminal, and says nothing in lines.
"""

from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager
from typing import Iterator, Protocol


class Advance(Protocol):
    def __call__(self, steps: float = 1, *, description: str | None = None) -> None: ...


_active = None     # the rich Progress shared by nested stages
_depth = 0


def mode() -> str:
    """"bar", "lines" or "off": MOBIPERF_PROGRESS=0/1 decides, else whether stderr is a terminal."""
    setting = os.environ.get("MOBIPERF_PROGRESS", "").strip().lower()
    if setting in ("0", "no", "false", "off"):
        return "off"
    if setting in ("1", "yes", "true", "on"):
        return "bar"
    return "bar" if sys.stderr.isatty() else "lines"


def enabled() -> bool:
    """Whether the rich bar is shown."""
    return mode() == "bar"


@contextmanager
def _lines(name: str, total: float | None) -> Iterator[Advance]:
    """Plain progress lines for an outermost stage; nested stages are silent."""
    global _depth
    if _depth > 0:
        _depth += 1
        try:
            yield _noop
        finally:
            _depth -= 1
        return
    _depth += 1
    started = time.monotonic()
    done = [0.0]
    count = (lambda: f"{done[0]:g}/{total:g}, " if total is not None else "")  # noqa: E731

    def advance(steps: float = 1, *, description: str | None = None) -> None:
        done[0] += steps
        if description is not None:
            print(f"mobiperf: {name}: {description} ({count()}{time.monotonic() - started:.0f} s)",
                  file=sys.stderr, flush=True)

    print(f"mobiperf: {name} ...", file=sys.stderr, flush=True)
    try:
        yield advance
        print(f"mobiperf: {name} done ({count()}{time.monotonic() - started:.1f} s)", file=sys.stderr, flush=True)
    finally:
        _depth -= 1


def _noop(steps: float = 1, *, description: str | None = None) -> None:
    return None


@contextmanager
def stage(name: str, total: float | None = None) -> Iterator[Advance]:
    """A progress line for the stage `name` while the block runs; yields the function that advances it."""
    global _active, _depth
    how = mode()
    if how == "off":
        yield _noop
        return
    if how == "lines":
        with _lines(name, total) as advance:
            yield advance
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

