"""A process's exit status in words: "exit status 3", "killed by SIGABRT" (Python reports a signal as -6)."""

from __future__ import annotations

import signal
from typing import Iterable


def describe_exit_status(code: int | None) -> str:
    """`exit status N`, or `killed by SIGNAME` for a negative status (subprocess's spelling of a signal)."""
    if code is None:
        return "no exit status (still running or never started)"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"killed by {name}"
    return f"exit status {code}"


def describe_exit_statuses(codes: Iterable[int | None]) -> str:
    """One phrase for the statuses of several repetitions: `killed by SIGABRT (rep 1); exit status 0 (rep 0)`,
    with runs of the same status grouped (`exit status 3 (reps 0-2)`)."""
    groups: dict[str, list[int]] = {}
    for rep, code in enumerate(codes):
        groups.setdefault(describe_exit_status(code), []).append(rep)
    parts = []
    for text, reps in groups.items():
        which = f"rep {reps[0]}" if len(reps) == 1 else (
            f"reps {reps[0]}-{reps[-1]}" if reps == list(range(reps[0], reps[-1] + 1))
            else "reps " + ", ".join(map(str, reps)))
        parts.append(f"{text} ({which})")
    return "; ".join(parts)
