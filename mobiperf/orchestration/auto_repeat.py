"""`mobiperf run -n auto`: the repetition loop asks, after each repetition, whether it has enough.

The primary metric of a run is read straight from each repetition, without the full analysis: the workload's own
throughput when it reports one (Mobibench's workload.throughput, .tps, .iops), else its elapsed time
(workload.elapsed, else run.workload_time, the wall time mobiperf measured). `--primary` picks one of those. The
decision follows mobiperf.core.stopping_rule's fixed look schedule and alpha spending.

With a baseline (`--baseline RUN`: a run of the same workload, already made), each look compares the repetitions
so far with the baseline's, as `compare --until` does, and stops when the ratio is precise or the verdict against
the baseline is settled (mobiperf.core.stopping_rule); without one, when the median is precise.
"""

from __future__ import annotations

import sys
from typing import Callable

from mobiperf.core.errors import UsageError
from mobiperf.core.stopping_rule import FIRST_LOOK, FIRST_LOOK_ONE_RUN, Plan
from mobiperf.compare.verdict import PRIMARY_CANDIDATES

WORKLOAD_TIME = "run.workload_time"


def repetition_values(rundir, record: dict) -> dict[str, float]:
    """The per-repetition metrics known right after the repetition: the workload's own, and its wall time."""
    from mobiperf.orchestration.pipeline import workload_metrics

    values = {m["name"]: float(m["value"]) for m in workload_metrics(rundir, record["index"])}
    values[WORKLOAD_TIME] = float(record["workload_ns"])
    return values


def baseline_values(path, primary: str | None) -> tuple[str, list[float]]:
    """(the primary metric, its value in every successful repetition of the baseline run at `path`)."""
    import math

    from mobiperf.compare.verdict import default_primary
    from mobiperf.core.runstore import RunDir

    run = RunDir.open(path)
    records = [r for r in run.read_meta().get("repetitions", []) if r.get("exit_code") == 0]
    if not records:
        raise UsageError(f"--baseline {path}: no successful repetition to compare with")
    per_rep = [repetition_values(run, r) for r in records]
    primary = primary or default_primary(per_rep[0]) or WORKLOAD_TIME
    values = [v[primary] for v in per_rep if primary in v and not math.isnan(v[primary])]
    if len(values) < 2:
        raise UsageError(f"--baseline {path}: {len(values)} repetition(s) with {primary}; a comparison needs 2 or "
                         "more (run it with -n 5)")
    return primary, values


class AutoRepeat:
    """Decides, repetition by repetition, when a run has enough; `say` reports each look (stderr by default)."""

    def __init__(self, limit: int, min_effect: float, *, primary: str | None = None, alpha: float = 0.05,
                 say: Callable[[str], None] | None = None, baseline=None):
        if primary is not None and primary not in PRIMARY_CANDIDATES:
            raise UsageError(f"--primary {primary}: with -n auto the primary metric must be known right after each "
                             f"repetition: one of {', '.join(PRIMARY_CANDIDATES)}")
        self.baseline: list[float] | None = None
        if baseline is not None:
            primary, self.baseline = baseline_values(baseline, primary)
        self.plan = Plan(primary or "(the primary metric)", limit, min_effect, alpha,
                         first=FIRST_LOOK if self.baseline is not None else FIRST_LOOK_ONE_RUN)
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
            if self.baseline is not None:
                look = self.plan.look_two(self.baseline, self.values)
                what = f"the ratio of {self.primary} to the baseline's, [{look.low:.4g}, {look.high:.4g}]"
            else:
                look = self.plan.look_one(self.values)
                what = self.primary
            width = "unbounded" if look.relative_width == float("inf") else f"{100 * look.relative_width:.3g}% wide"
            self.say(f"-n auto: look at {n} repetitions: {100 * look.confidence:.3g}% interval of {what} "
                     f"{width} (stop below {100 * self.plan.min_effect:g}%"
                     + (", or when it lies wholly beyond or within that" if self.baseline is not None else "") + ")")
        return self.plan.stopped

    def as_dict(self) -> dict:
        return {**self.plan.as_dict(), "values": self.values, "repetitions": len(self.values)}
