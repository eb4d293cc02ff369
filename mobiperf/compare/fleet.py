"""The fleet view of a store: its runs grouped by facts (kernel, stack, target, ...), the headline metrics of each
group, and every group compared with the first (BASE) by compare's statistics.

A group's sample of a metric is one value per run: the run's own figure (the median over its repetitions, as
run.json holds it). So compare's rules apply between groups unchanged: medians, the ratio of medians,
Mann-Whitney U (or the bootstrap interval of the ratio), the minimum effect, "not significant" said out loud,
and the warnings when a group has too few runs for any change to be significant. Runs the index marks damaged
and runs that are not complete are left out, and counted.

Grouping keys are index columns (mobiperf.core.store): run facts such as kernel, stack, target, workload, scheduler,
device, host, program, status. BASE is the first group in sorted order unless --base names one.
"""

from __future__ import annotations

import fnmatch
import shlex
from dataclasses import dataclass, field
from typing import Sequence

import polars as pl

from mobiperf.compare import runs as compare
from mobiperf.core.errors import UsageError

HEADLINE_PATTERNS = ("run.workload_time", "e2e.*", "workload.*", "block.requests", "block.bytes",
                     "block.sequential_share", "latency.d2c.p50", "latency.d2c.p99", "latency.q2c.p99",
                     "latency.fs.sync_file.p99", "latency.syscall.p99")
GROUP_KEYS = ("kernel", "stack", "target", "workload", "scheduler", "device", "host", "program", "status",
              "model", "android_version", "scope", "mobiperf")


@dataclass
class Fleet:
    """The groups (compare.RunGroup, BASE first), their comparison, and what was left out."""

    by: list[str]
    groups: list[compare.RunGroup]
    result: compare.CompareResult | None
    run_ids: dict[str, list[str]]            # group label -> its run ids
    left_out: list[str] = field(default_factory=list)


def group_label(by: Sequence[str], values: Sequence) -> str:
    return ", ".join(f"{k}={'-' if v is None else v}" for k, v in zip(by, values))


def is_headline(key: str, name: str, patterns: Sequence[str] = HEADLINE_PATTERNS) -> bool:
    return any(fnmatch.fnmatchcase(name, p) or fnmatch.fnmatchcase(key, p) for p in patterns)


def _meta_of(row: dict) -> dict:
    """The parts of a run description compare.differing_settings reads, from the index row."""
    return {"command": shlex.split(row.get("workload") or ""), "stack": row.get("stack"),
            "scheduler": row.get("scheduler"), "status": row.get("status"),
            "target": {k: row.get(k) for k in ("target", "kernel", "model", "android_version")},
            "repetitions": [{}] * int(row.get("repetitions") or 0)}


def build_group(label: str, rows: list[dict], patterns: Sequence[str]) -> compare.RunGroup:
    """A compare.RunGroup whose sample of each headline metric is one value per run."""
    from pathlib import Path

    from mobiperf.core.runstore import RunDir

    group = compare.RunGroup(label, runs=[RunDir(Path(r["run_id"])) for r in rows], metas=[_meta_of(r) for r in rows],
                             samples={}, units={}, names={})
    for row in rows:
        metrics = list(row.get("metrics") or [])
        if row.get("run_workload_time") is not None:
            metrics.append({"name": compare.WORKLOAD_TIME, "key": compare.WORKLOAD_TIME,
                            "value": row["run_workload_time"], "unit": "ns", "labels": ""})
        for m in metrics:
            if m["value"] is None or not is_headline(m["key"], m["name"], patterns):
                continue
            group.samples.setdefault(m["key"], []).append(float(m["value"]))
            group.units[m["key"]] = m["unit"]
            labels = dict(kv.split("=", 1) for kv in m["labels"].split(",") if "=" in kv) if m["labels"] else {}
            group.names[m["key"]] = (m["name"], labels)
    return group


def build_fleet(index: pl.DataFrame, by: Sequence[str], *, base: str | None = None,
                options: compare.CompareOptions | None = None,
                patterns: Sequence[str] = HEADLINE_PATTERNS) -> Fleet:
    """Group the index's usable runs by `by` and compare every group with BASE."""
    by = [b.strip() for b in by if b.strip()]
    unknown = [b for b in by if b not in index.columns]
    if not by or unknown:
        raise UsageError(f"--by {','.join(unknown) or '(nothing)'}: group by run facts: {', '.join(GROUP_KEYS)}")
    left_out = [f"{r}: damaged ({e})" for r, e in index.filter(pl.col("error").is_not_null())
                .select("run_id", "error").iter_rows()]
    ok = index.filter(pl.col("error").is_null())
    left_out += [f"{r}: status {s}" for r, s in ok.filter(pl.col("status") != "complete")
                 .select("run_id", "status").iter_rows()]
    ok = ok.filter(pl.col("status") == "complete")
    if ok.height == 0:
        raise UsageError("no complete, readable run in the store to report on")
    groups, run_ids = [], {}
    for values, part in sorted(ok.group_by(by, maintain_order=True), key=lambda g: [str(v) for v in g[0]]):
        label = group_label(by, values)
        rows = part.to_dicts()
        groups.append(build_group(label, rows, patterns))
        run_ids[label] = [r["run_id"] for r in rows]
    if base is not None:
        matching = [g for g in groups if g.label == base or base in g.label.split(", ")]
        if len(matching) != 1:
            raise UsageError(f"--base {base!r} matches {len(matching)} groups; groups: "
                             f"{'; '.join(g.label for g in groups)}")
        groups.remove(matching[0])
        groups.insert(0, matching[0])
    result = None
    if len(groups) > 1:
        result = compare.compare_groups(groups[0], groups[1:], options or compare.CompareOptions())
    return Fleet(by, groups, result, run_ids, left_out)


def format_text(fleet: Fleet) -> str:
    """The fleet as text: each group with its run count, then each comparison with BASE."""
    lines = [f"groups by {', '.join(fleet.by)}:"]
    for i, g in enumerate(fleet.groups):
        lines.append(f"  {'BASE ' if i == 0 else '     '}{g.label}: {len(fleet.run_ids[g.label])} runs")
    if fleet.result is None:
        lines.append("one group only: nothing to compare")
    else:
        lines.append(compare.format_text(fleet.result))
    if fleet.left_out:
        lines.append(f"left out: {len(fleet.left_out)} runs")
        lines += [f"  {x}" for x in fleet.left_out[:20]]
    return "\n".join(lines) + "\n"
