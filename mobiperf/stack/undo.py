"""A stack's teardown: the undo steps of its set-up, as an ExitStack of typed callbacks.

Each change a set-up makes is pushed as an UndoStep right after it is made (its undo journal entry, written before
the change, rides along): what it was, in words for the failure message, and the callback that undoes it. Closing
runs the steps newest first, every one of them: a step that fails (a MobiperfError, an OSError) is remembered and
its journal entry stays, for the next run or `mobiperf doctor --fix` to finish; the others still run. A step that
loses the device (`fatal`) ends the teardown at once: nothing more can be done there, and the steps not run are
named as what may be left.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Callable

from mobiperf.core.errors import MobiperfError


@dataclass(frozen=True)
class UndoStep:
    what: str                          # e.g. "umount /var/tmp/mobiperf/stack-1-ab/data"
    undo: Callable[[], None]
    entries: tuple[Any, ...] = ()      # undo journal entries this step takes care of, done when it succeeds


@dataclass
class Teardown:
    journal: Any                       # the target's undo journal (mobiperf.target.undo_journal)
    fatal: tuple[type[BaseException], ...] = ()
    failures: list[str] = field(default_factory=list)
    lost: BaseException | None = None  # the fatal error that ended the teardown
    not_run: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._steps = contextlib.ExitStack()

    def push(self, what: str, undo: Callable[[], None], *entries: Any) -> None:
        self._steps.callback(self._run, UndoStep(what, undo, entries))

    def _run(self, step: UndoStep) -> None:
        if self.lost is not None:
            self.not_run.append(step.what)
            return
        try:
            step.undo()
        except self.fatal as e:
            self.lost = e
            self.not_run.append(step.what)
            return
        except (MobiperfError, OSError) as e:
            self.failures.append(f"{step.what}: {e}")
            return
        for entry in step.entries:
            self.journal.done(entry)

    def close(self) -> list[str]:
        """Run every step pushed so far, newest first, and return the failures in words (their journal entries
        stay). After a fatal error the steps not run are in `not_run`, and the error in `lost`. The caller holds
        stop signals back around it (its stack decides how)."""
        self._steps.close()
        failures, self.failures = self.failures, []
        return failures
