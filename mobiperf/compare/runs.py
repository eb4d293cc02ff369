"""Before/after comparison of runs: BASE against one or more NEW runs, every repetition kept.

One primary metric decides and guards can veto (mobiperf.compare.verdict); every other metric is context, compared and
shown, never gating. mobiperf.compare.formats writes the result as text, JSON or CSV.

A side is a run directory (its repetitions are the sample) or a directory of run directories (a group: the
repetitions of all its runs are pooled). Each metric of run.json becomes one sample per side (one value per
repetition); `run.workload_time` (the workload's wall time, from each repetition record) is added to every run.
mobiperf.core.stats does the statistics; this module loads the runs, checks that they are comparable, and formats.

Comparable means the same workload on the same kind of target. Differing workload settings (the command and its
arguments) and target settings (device, kernel, partition size) are warned about loudly, naming each setting;
differing stack settings (filesystem, FUSE, scheduler) are the usual subject of a before/after study and are
listed as such. Failed repetitions are left out with a warning; a failed or incomplete run is labelled.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from mobiperf.core import stats
from mobiperf.compare import verdict
from mobiperf.core.errors import UsageError
from mobiperf.core.exit_status import describe_exit_status
from mobiperf.core.metrics import metric
from mobiperf.core.run_facts import RunMeta
from mobiperf.core.runstore import RunDir
from mobiperf.core.units import format_size

WORKLOAD_TIME = "run.workload_time"
REGRESSION_EXIT_CODE = 3


@dataclass
class RunGroup:
    """One side of a comparison: one run, or the pooled repetitions of several runs."""

    label: str                              # as the user named it on the command line
    runs: list[RunDir]
    metas: list[dict[str, Any]]
    samples: dict[str, list[float]]         # metric key -> one value per usable repetition
    units: dict[str, str]
    names: dict[str, tuple[str, dict]]      # metric key -> (name, labels)
    warnings: list[str] = field(default_factory=list)

    @property
    def repetitions(self) -> int:
        return sum(len(m.get("repetitions", [])) for m in self.metas)

    @property
    def status(self) -> str:
        statuses = {m.get("status") for m in self.metas}
        for s in ("failed", "incomplete"):
            if s in statuses:
                return s
        return "complete"

    @property
    def stack(self) -> str:
        return ", ".join(sorted({str(m.get("stack")) for m in self.metas}))


PRIMARY, GUARD, CONTEXT = "primary", "guard", "context"


@dataclass
class MetricRow:
    key: str
    name: str
    labels: dict
    unit: str
    result: stats.Comparison
    role: str = CONTEXT
    base_values: list[float] = field(default_factory=list)
    new_values: list[float] = field(default_factory=list)

    @property
    def layer(self) -> str:
        return verdict.metric_layer(self.name)


@dataclass
class Setting:
    """A setting that differs between BASE and a NEW run."""

    kind: str      # workload | target | stack
    name: str
    base: str
    new: str


@dataclass
class PairResult:
    new: RunGroup
    rows: list[MetricRow]               # the primary first, then the guards, then context
    settings: list[Setting]
    only_in_base: list[str]
    only_in_new: list[str]
    verdict: verdict.Verdict | None = None   # None: no primary metric in both BASE and NEW
    same_runs: list[str] = field(default_factory=list)  # run directories on both sides

    @property
    def incomparable(self) -> list[Setting]:
        """The differing settings that make BASE and NEW different experiments."""
        return [s for s in self.settings if s.kind in ("workload", "target")]

    @property
    def primary(self) -> MetricRow | None:
        return next((r for r in self.rows if r.role == PRIMARY), None)

    @property
    def guards(self) -> list[MetricRow]:
        return [r for r in self.rows if r.role == GUARD]

    @property
    def context(self) -> list[MetricRow]:
        return [r for r in self.rows if r.role == CONTEXT]

    @property
    def regressions(self) -> list[MetricRow]:
        """The rows that fail the gate: the primary when it regressed, and every failed guard."""
        if self.verdict is None:
            return []
        failed = {g.key for g in self.verdict.guards if g.failed}
        return [r for r in self.rows if (r.role == PRIMARY and self.verdict.direction == verdict.REGRESSION)
                or (r.role == GUARD and r.key in failed)]


@dataclass
class CompareOptions:
    alpha: float = 0.05
    min_effect: float = 0.05
    method: str = "mwu"
    max_dispersion: float = 0.25
    metric_patterns: tuple[str, ...] = ()     # which context metrics to show (fnmatch); all when empty
    primary: str | None = None                # None: verdict.default_primary
    guards: tuple[verdict.Guard, ...] = ()


@dataclass
class CompareResult:
    base: RunGroup
    pairs: list[PairResult]
    options: CompareOptions
    profile: Any = None          # compare.profile.ProfileDiff: where the time moved (None: see profile_note)
    profile_note: str = ""       # why there is no profile
    latency: Any = None          # compare.latency_shift.LatencyComparison: per layer and op, p50/p99 shifts

    @property
    def has_regression(self) -> bool:
        """Whether the gate fails: a primary regressed or a guard failed, in any pair."""
        return any(p.verdict is not None and p.verdict.gate_failed for p in self.pairs)

    @property
    def warning_items(self) -> list[tuple[str, list[str]]]:
        """What makes the answer doubtful, most serious first, said at the top of every output: (headline,
        details)."""
        out: list[tuple[str, list[str]]] = []
        for p in self.pairs:
            if p.same_runs:
                out.append((f"BASE and NEW {p.new.label} are THE SAME RUN ({', '.join(p.same_runs)}): a run "
                            "compared with itself can only show no change", []))
            if p.incomparable:
                out.append((f"BASE and NEW {p.new.label} ran DIFFERENT WORKLOADS OR TARGETS; differences may come "
                            "from that, not from the change under study:",
                            [f"{s.name}: {s.base} -> {s.new}" for s in p.incomparable]))
            if p.verdict is None:
                out.append((f"NEW {p.new.label}: no primary metric in both BASE and NEW (looked for "
                            f"{', '.join(verdict.PRIMARY_CANDIDATES)}); no verdict, give --primary METRIC", []))
        out += [(f"BASE {self.base.label}: {w}", []) for w in self.base.warnings]
        for p in self.pairs:
            out += [(f"NEW {p.new.label}: {w}", []) for w in p.new.warnings]
        return out

    @property
    def warnings(self) -> list[str]:
        return [head + (" " + "; ".join(details) if details else "") for head, details in self.warning_items]

    @property
    def notes(self) -> list[str]:
        """Facts about the statistics, each said once, at the top: sample sizes that cannot reach alpha."""
        out = []
        for p in self.pairs:
            row = p.primary or (p.rows[0] if p.rows else None)
            if row is None or row.result.floor_reached:
                continue
            n_a, n_b = row.result.n_base, row.result.n_new
            if n_a < 2 or n_b < 2:
                out.append(f"with n={n_a} vs {n_b} repetitions no test is possible; use -n 5 or more (or -n auto)")
            elif self.options.method == "mwu":
                out.append(stats.cannot_be_significant(n_a, n_b, self.options.alpha))
            else:
                out.append(f"with n={n_a} vs {n_b} the bootstrap cannot decide: it needs {stats.MIN_BOOTSTRAP_N} "
                           "repetitions per side")
        return list(dict.fromkeys(n for n in out if n))

    @property
    def context_note(self) -> str:
        """What context rows are, said once, below them."""
        n = max((len(p.context) for p in self.pairs), default=0)
        return (f"context metrics never gate and are not corrected for multiple comparisons: at alpha "
                f"{self.options.alpha:g}, about {self.options.alpha * n:.2g} of {n} can differ by chance alone"
                if n else "")


# --- loading ---

def load_group(path: Path | str, label: str | None = None) -> RunGroup:
    """A run directory, or a directory whose subdirectories are run directories (pooled)."""
    path = Path(path)
    if (path / "run.json").exists():
        runs = [RunDir.open(path)]
    elif path.is_dir():
        runs = [RunDir.open(p) for p in sorted(path.iterdir()) if (p / "run.json").exists()]
        if not runs:
            raise UsageError(f"{path}: neither a run directory (no run.json) nor a directory of run directories")
    else:
        raise UsageError(f"{path}: no such run directory")
    metas = [r.read_meta() for r in runs]
    group = RunGroup(label or str(path), runs, metas, {}, {}, {})
    for run, meta in zip(runs, metas):
        _add_run_samples(group, run, meta)
    if len(runs) > 1:
        first = metas[0]
        for other, run in zip(metas[1:], runs[1:]):
            for s in differing_settings(first, other):
                if s.kind != "stack":
                    group.warnings.append(f"runs pooled in this group differ: {run.path.name}: {s.name}: "
                                          f"{s.base} -> {s.new}")
    return group


def _add_run_samples(group: RunGroup, run: RunDir, meta: RunMeta) -> None:
    name = run.path.name
    if meta.get("status") == "incomplete":
        group.warnings.append(f"run {name} is INCOMPLETE (interrupted before all stages finished)")
    reps = meta.repetitions
    usable = []
    for rec in reps:
        if rec.exit_code not in (0, None):
            group.warnings.append(f"run {name}: repetition {rec.index} failed "
                                  f"({describe_exit_status(rec.exit_code)}) and is left out")
        else:
            usable.append(rec)
    if reps and not usable:
        group.warnings.append(f"run {name}: every repetition failed; it contributes no values")
        return
    per_rep = [rec.metrics for rec in usable]
    if not usable or any(m is None for m in per_rep):
        # An old or partial run.json: only the medians are known, i.e. one value per metric.
        group.warnings.append(f"run {name} has no per-repetition metrics; its medians count as one repetition")
        per_rep = [meta.metrics or []]
    for rec, metrics in zip(usable or [None], per_rep):
        metrics = list(metrics or [])
        if rec is not None and rec.workload_ns is not None:
            metrics.append(metric(WORKLOAD_TIME, rec.workload_ns, "ns"))
        for m in metrics:
            if m.value is None:
                continue
            group.samples.setdefault(m.key, []).append(float(m.value))
            group.units[m.key] = m.unit
            group.names[m.key] = (m.name, dict(m.labels))


# --- comparability ---

def _stack_facts(meta: dict) -> dict[str, str]:
    reps = meta.get("repetitions") or [{}]
    stack = reps[0].get("stack", {}) if isinstance(reps[0], dict) else {}
    return {"image size": format_size(stack["image_size_bytes"]) if "image_size_bytes" in stack else "",
            "mount options": stack.get("mount_options", "")}


def workload_settings(argv: Sequence[str]) -> dict[str, str]:
    """The settings a command line expresses: `key=value` tokens, `-x value` options, flags, positionals."""
    argv = list(argv)
    out: dict[str, str] = {}
    if not argv:
        return out
    out["program"] = Path(argv[0]).name
    i, pos = 1, 0
    while i < len(argv):
        tok = argv[i]
        if tok.startswith("-") and len(tok) > 1 and "=" not in tok:
            if i + 1 < len(argv) and not (argv[i + 1].startswith("-") and len(argv[i + 1]) > 1):
                out[tok] = argv[i + 1]
                i += 2
                continue
            out[tok] = "(set)"
        elif "=" in tok:
            k, _, v = tok.partition("=")
            out[k] = v
        else:
            out[f"argument {pos + 1}"] = tok
            pos += 1
        i += 1
    return out


def differing_settings(base: dict, new: dict) -> list[Setting]:
    """Every setting that differs between two run descriptions, named, with both values."""
    out: list[Setting] = []
    wb, wn = workload_settings(base.get("command", [])), workload_settings(new.get("command", []))
    for k in sorted(set(wb) | set(wn), key=lambda k: (k != "program", k)):
        if wb.get(k) != wn.get(k):
            out.append(Setting("workload", f"command {k}", wb.get(k, "(absent)"), wn.get(k, "(absent)")))
    tb, tn = base.get("target", {}), new.get("target", {})
    for k in ("target", "kernel", "model", "android_version"):
        if tb.get(k) != tn.get(k) and (tb.get(k) or tn.get(k)):
            out.append(Setting("target", k, str(tb.get(k)), str(tn.get(k))))
    sb, sn = _stack_facts(base), _stack_facts(new)
    if sb["image size"] != sn["image size"]:
        out.append(Setting("target", "partition size", sb["image size"] or "?", sn["image size"] or "?"))
    for k, a, b in (("stack", base.get("stack"), new.get("stack")),
                    ("scheduler", base.get("scheduler"), new.get("scheduler")),
                    ("mount options", sb["mount options"], sn["mount options"]),
                    # the phone models around the stack (mobiperf run --device/--dirty-limit/--cpu/--fuse-wakeup)
                    ("device profile", base.get("device"), new.get("device")),
                    ("dirty limit", base.get("dirty_limit"), new.get("dirty_limit")),
                    ("CPU share", _host_none(base.get("cpu_share")), _host_none(new.get("cpu_share"))),
                    ("FUSE wake-up ns", base.get("fuse_wakeup_ns") or None, new.get("fuse_wakeup_ns") or None)):
        if (a or None) != (b or None):
            out.append(Setting("stack", k, str(a or "default"), str(b or "default")))
    return out


def _host_none(value: Any) -> Any:
    return None if value in (None, "", "host") else value


# --- comparing ---

def compare_groups(base: RunGroup, news: Sequence[RunGroup], options: CompareOptions | None = None) -> CompareResult:
    """Compare BASE with every NEW: the primary metric, the guards, then the context metrics."""
    options = options or CompareOptions()
    pairs = []
    for new in news:
        common = set(base.samples) & set(new.samples)
        primary = (verdict.resolve_metric(options.primary, common, base.names, "--primary") if options.primary
                   else verdict.default_primary(common))
        if primary and stats.metric_direction(base.names[primary][0]) == stats.NEUTRAL:
            raise UsageError(f"--primary {primary}: this metric has no better direction (higher or lower), so it "
                             "cannot decide; pick a throughput, a latency or a time")
        guard_keys = {g: verdict.resolve_metric(g.metric, common, base.names, "--guard") for g in options.guards}
        context = sorted(common - {primary, *guard_keys.values()})
        if options.metric_patterns:
            context = [k for k in context if any(fnmatch.fnmatchcase(k, p) or fnmatch.fnmatchcase(base.names[k][0], p)
                                                 for p in options.metric_patterns)]
        roles = ([(primary, PRIMARY)] if primary else []) + [(k, GUARD) for k in guard_keys.values()] + [
            (k, CONTEXT) for k in context]
        rows = [_compare_metric(base, new, key, role, options) for key, role in roles]
        pair = PairResult(new, rows, differing_settings(base.metas[0], new.metas[0]),
                          sorted(set(base.samples) - set(new.samples)), sorted(set(new.samples) - set(base.samples)),
                          same_runs=_same_runs(base, new))
        if primary:
            by_key = {r.key: r for r in rows}
            checks = [verdict.GuardCheck(g, k, options.min_effect if g.max_regression is None else g.max_regression,
                                         by_key[k].result) for g, k in guard_keys.items()]
            pair.verdict = verdict.Verdict(primary, by_key[primary].result, by_key[primary].unit, options.alpha,
                                           options.min_effect, checks, options.method)
        pairs.append(pair)
    if options.metric_patterns and not any(p.context for p in pairs):
        raise UsageError(f"no metric matches {', '.join(options.metric_patterns)} in both BASE and NEW "
                         "(see `mobiperf show RUN` for the metric names)")
    return CompareResult(base, pairs, options)


def _compare_metric(base: RunGroup, new: RunGroup, key: str, role: str, options: CompareOptions) -> MetricRow:
    name, labels = base.names[key]
    result = stats.compare_samples(
        base.samples[key], new.samples[key], direction=stats.metric_direction(name), alpha=options.alpha,
        min_effect=options.min_effect, method=options.method, max_dispersion=options.max_dispersion)
    return MetricRow(key, name, labels, base.units.get(key, ""), result, role, list(base.samples[key]),
                     list(new.samples[key]))


def _same_runs(base: RunGroup, new: RunGroup) -> list[str]:
    """Run directories (by resolved path or by run id and creation time) that are on both sides."""
    def identity(run: RunDir, meta: dict) -> set:
        return {("path", str(run.path.resolve())), ("id", meta.get("id"), meta.get("created"), meta.get("host"))}
    base_ids = {i: r for r, m in zip(base.runs, base.metas) for i in identity(r, m)}
    return sorted({str(base_ids[i].path) for r, m in zip(new.runs, new.metas) for i in identity(r, m)
                   if i in base_ids})
