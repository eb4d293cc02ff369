"""`mobiperf run -n auto`: the repetition loop asks, after each repetition, whether it has enough.

The primary metric of a run is read straight from each repetition, without the full analysis: the workload's own
throughput when it reports one (Mobibench's workload.throughput, .tps, .iops), else its elapsed time
(workload.elapsed, else run.workload_time, the wall time mobiperf measured). `--primary` picks one of those. The
decision follows mobiperf.core.stopping_rule's fixed look schedule and alpha spending.
"""

from __future__ import annotations

import sys
from typing import Callable

from mobiperf.core.errors import UsageError
from mobiperf.core.stopping_rule import FIRST_LOOK_ONE_RUN, Plan
from mobiperf.compare.verdict import PRIMARY_CANDIDATES

WORKLOAD_TIME = "run.workload_time"


def repetition_values(rundir, record: dict) -> dict[str, float]:
    """The per-repetition metrics known right after the repetition: the workload's own, and its wall time."""
    from mobiperf.orchestration.pipeline import workload_metrics

    values = {m["name"]: float(m["value"]) for m in workload_metrics(rundir, record["index"])}
    values[WORKLOAD_TIME] = float(record["workload_ns"])
    return values


class AutoRepeat:
    """Decides, repetition by repetition, when a run has enough; `say` reports each look (stderr by default)."""

    def __init__(self, limit: int, min_effect: float, *, primary: str | None = None, alpha: float = 0.05,
                 say: Callable[[str], None] | None = None):
        if primary is not None and primary not in PRIMARY_CANDIDATES:
            raise UsageError(f"--primary {primary}: with -n auto the primary metric must be known right after each "
                             f"repetition: one of {', '.join(PRIMARY_CANDIDATES)}")
        self.plan = Plan(primary or "(the primary metric)", limit, min_effect, alpha, first=FIRST_LOOK_ONE_RUN)
        self.primary = primary
        self.values: list[float] = []
        self.say = say or (lambda text: print(text, file=sys.stderr, flush=True))

    @property
    def limit(self) -> int:
        return self.plan.limit

    def after_repetition(self, rundir, record: dict) -> bool:
        """Record the repetition; True when the loop should stop."""
        if record.get("exit_code") != 0:
            self.plan.stopped = True
            from mobiperf.core.exit_status import describe_exit_status

            self.plan.reason = (f"repetition {record['index']} failed ({describe_exit_status(record.get('exit_code'))})"
                                "; no more repetitions")
            return True
        values = repetition_values(rundir, record)
        if self.primary is None:
            self.primary = next(m for m in PRIMARY_CANDIDATES if m in values)
            self.plan.metric = self.primary
        if self.primary not in values:
            self.plan.stopped = True
            self.plan.reason = f"repetition {record['index']} did not report {self.primary}; no more repetitions"
            return True
        self.values.append(values[self.primary])
        n = len(self.values)
        if self.plan.wants_look(n):
            look = self.plan.look_one(self.values)
            width = "unbounded" if look.relative_width == float("inf") else f"{100 * look.relative_width:.3g}% wide"
            self.say(f"-n auto: look at {n} repetitions: {100 * look.confidence:.3g}% interval of {self.primary} "
                     f"{width} (stop below {100 * self.plan.min_effect:g}%)")
        return self.plan.stopped

    def as_dict(self) -> dict:
        return {**self.plan.as_dict(), "values": self.values, "repetitions": len(self.values)}
