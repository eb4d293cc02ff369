"""`mobiperf compare BASE NEW --until LIMIT`: add repetitions to both runs until the comparison is precise.

BASE and NEW must each be one run directory made by `mobiperf run` on this target. Their run.json says how they
were run (stack, phone models, command, trace sources); more repetitions are collected into the same run
directories, alternating BASE and NEW so that a drift of the machine hits both, up to the next look of the fixed
schedule (mobiperf.core.stopping_rule: 5, 8, 12, ... per side, alpha spent over the looks), until the interval of
the ratio of the primary metric's medians is narrower than the minimum effect, or lies wholly beyond or within it
(the verdict is settled), or each side has LIMIT repetitions.
Then both runs are analysed again (and their reports redrawn), and compared as usual.

The primary metric must be known right after each repetition: the workload's own figures (Mobibench's
workload.*) or run.workload_time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from mobiperf.orchestration.auto_repeat import repetition_values
from mobiperf.orchestration.reanalysis import forget_repetition
from mobiperf.orchestration.run_request import request_from_meta
from mobiperf.core.errors import MobiperfError, UsageError
from mobiperf.core.run_facts import Repetition
from mobiperf.core.runstore import RunDir
from mobiperf.core.stopping_rule import FIRST_LOOK, Plan
from mobiperf.compare.verdict import PRIMARY_CANDIDATES

if TYPE_CHECKING:
    from mobiperf.target.target import Target


@dataclass
class Side:
    label: str
    run: RunDir
    request: object
    values: list[float] = field(default_factory=list)


def _side(label: str, path, primary: str) -> Side:
    run = RunDir.open(path)
    meta = run.read_meta()
    if meta.get("status") == "incomplete":
        raise UsageError(f"{path}: an incomplete run cannot be extended (--until); run it again")
    values = []
    for rec in meta.get("repetitions", []):
        if rec.get("exit_code") == 0:
            v = repetition_values(run, rec).get(primary)
            if v is not None and not math.isnan(v):
                values.append(v)
    return Side(label, run, request_from_meta(meta, report=(run.path / "report.html").exists()), values)


def extend_until(base_path, new_path, *, limit: int, min_effect: float, alpha: float, primary: str | None,
                 target: Target, say: Callable[[str], None]) -> Plan:
    """Collect repetitions into BASE and NEW until the plan stops; returns the plan (its reason says why)."""
    from mobiperf.orchestration import pipeline

    primary = primary or _primary_of(base_path)
    if primary not in PRIMARY_CANDIDATES:
        raise UsageError(f"--until needs a primary metric known right after each repetition: one of "
                         f"{', '.join(PRIMARY_CANDIDATES)}, not {primary}")
    sides = [_side("BASE", base_path, primary), _side("NEW", new_path, primary)]
    for s in sides:
        ran_on = s.run.read_meta().get("target", {}).get("target")
        if ran_on and ran_on != target.name and not str(ran_on).startswith(target.name):
            raise UsageError(f"{s.label} {s.run.path} ran on {ran_on}; --until adds repetitions on "
                             f"{target.name} (give -t {ran_on})")
    plan = Plan(primary, limit, min_effect, alpha, first=FIRST_LOOK)
    have = min(len(s.values) for s in sides)
    if have >= plan.looks[-1]:
        raise UsageError(f"--until {limit}: BASE and NEW already have {have} repetitions each; give a larger limit")
    say(plan.describe().replace("-n auto", "--until"))
    for n in plan.looks:
        if n < have:  # a look of the schedule the runs are already past
            continue
        while min(len(s.values) for s in sides) < n:
            for s in sides:  # alternate, so that a drift of the machine hits both sides
                if len(s.values) < n:
                    _add_repetition(target, s, primary, say)
        if min(len(s.values) for s in sides) >= n:
            look = plan.look_two(sides[0].values, sides[1].values)
            width = "unbounded" if math.isinf(look.relative_width) else f"{100 * look.relative_width:.3g}% wide"
            say(f"--until: look at {n} per side: {100 * look.confidence:.3g}% interval of the ratio of {primary} "
                f"{width} (stop below {100 * min_effect:g}%)")
            if plan.stopped:
                break
    for s in sides:
        with _stage(f"analyze {s.label}"):
            pipeline.analyze(s.run, reparse=True)
            failed = any(r["exit_code"] != 0 for r in s.run.read_meta()["repetitions"])
            s.run.update_meta(status="failed" if failed else "complete")
            if s.request.report:
                pipeline.report(s.run)
        s.run.update_meta(until=plan.as_dict())
    return plan


def _primary_of(base_path) -> str:
    from mobiperf.compare.verdict import default_primary

    run = RunDir.open(base_path)
    rec = next((r for r in run.read_meta().get("repetitions", []) if r.get("exit_code") == 0), None)
    if rec is None:
        raise UsageError(f"{base_path}: no successful repetition to learn the primary metric from")
    return default_primary(repetition_values(run, rec)) or "run.workload_time"


def _add_repetition(target: Target, side: Side, primary: str, say) -> None:
    from mobiperf.orchestration.collect import collect_repetition

    meta = side.run.read_meta()
    # After every repetition recorded and every raw directory on disk (one left by an interrupted run is not
    # overwritten).
    rep = max([r.index for r in meta.repetitions] + [i for i, _ in side.run.raw_dirs()], default=-1) + 1
    say(f"--until: {side.label} {side.run.path}: repetition {rep} ...")
    record = collect_repetition(target, side.request, side.run, rep)
    meta = side.run.read_meta()
    forget_repetition(meta.get("parse"), rep)
    meta.repetitions.append(Repetition.from_dict(record))
    meta["status"] = "incomplete"   # until it is analysed again
    side.run.write_meta(meta)
    if record["exit_code"] != 0:
        from mobiperf.core.exit_status import describe_exit_status

        raise MobiperfError(f"{side.label} repetition {rep} failed ({describe_exit_status(record['exit_code'])}); "
                            f"stopped adding repetitions; `mobiperf analyze {side.run.path}` restores its tables")
    value = repetition_values(side.run, record).get(primary)
    if value is None:
        raise UsageError(f"{side.label} repetition {rep} did not report {primary}")
    side.values.append(value)


def _stage(name: str):
    from mobiperf.core.progress import stage

    return stage(name)
