"""Studies: a paper's experiment as one command. A study is a sweep with named cells, plus the paper's numbers as
data, the tables that put ours beside them, and the paper's qualitative claims checked on our figures.

    mobiperf study bfuse -o studies/bfuse            # full size, the paper's device regime (emmc-2012)
    mobiperf study journal-modes --quick             # reduced size, as the tests run it

A study directory is a sweep directory (resumable the same way) plus study.json (sections, checks) and
study.html. Each study is a module in mobiperf/orchestration/studies/ defining STUDY.
"""

from __future__ import annotations

import json
import math
import os
import platform
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from mobiperf.core.errors import UsageError
from mobiperf.orchestration.sweep import (CellSummary, Progress, SweepDefinition, SweepDir, check_params, format_rows,
                            run_sweep, summarize)


ABSENT = "not in this study's size"


@dataclass
class Config:
    """Everything a study's cells depend on: size, device profile, repetitions, CPU model, phone profile."""

    quick: bool = False
    device: str | None = None
    repeat: int | None = None
    cpu: str = "host"
    phone: str | None = None     # mobiperf.stack.phone profile (None: the study's default; "none": no phone model)
    target: str = "local"        # where the cells run: local (emulated stack), or adb[:SERIAL] (the phone itself)


@dataclass
class Check:
    """One qualitative claim of the paper and whether it holds on our figures (None: not measured here)."""

    claim: str
    passed: bool | None
    detail: str


@dataclass
class Row:
    label: str
    ours: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int = 0
    paper: float | str | None = None
    note: str = ""
    cell: str | None = None       # the cell and metric the row's figure is the median of (Results.row)
    metric: str | None = None
    versus: str = ""              # its comparison with the section's baseline row (sweep.versus), said in words
    verdict: str | None = None    # compare's verdict against it; "baseline" for the baseline row
    p_value: float | None = None


@dataclass
class Section:
    title: str
    source: str          # where in the paper (table/figure/section)
    unit: str
    rows: list[Row] = field(default_factory=list)
    chart: bool = True
    baseline: str | None = None   # the row (label) the others are compared with; default: the first measured one


@dataclass
class Study:
    """A paper's experiment. `cells(config)` -> [(label, params)]; `analyse(results, config)` -> sections, checks."""

    name: str
    title: str
    paper: str
    description: str
    cells: Callable[[Config], list[tuple[str, dict[str, str]]]]
    analyse: Callable[["Results", Config], tuple[list[Section], list[Check]]]
    metric: str = "run.throughput"
    default_device: Callable[[Config], str | None] = lambda config: None
    default_phone: Callable[[Config], str | None] = lambda config: None
    repeat: Callable[[Config], int] = lambda config: 2 if config.quick else 3
    needs: tuple[str, ...] = ()          # reference binaries the study cannot do without


class Results:
    """The sweep's figures looked up by the study's cell labels."""

    def __init__(self, data: dict, labels: dict[str, dict[str, str]]):
        self.data = data
        self._by_params = {json.dumps(s.params, sort_keys=True): s for s in summarize(data)}
        self.labels = labels

    def cell(self, label: str) -> CellSummary | None:
        params = self.labels.get(label)
        return None if params is None else self._by_params.get(json.dumps(params, sort_keys=True))

    def values(self, label: str, metric: str) -> list[float]:
        cell = self.cell(label)
        return [] if cell is None else cell.values.get(metric, [])

    def median(self, label: str, metric: str) -> float | None:
        cell = self.cell(label)
        if cell is None:
            return None
        st = cell.stat(metric)
        return None if st["n"] == 0 else st["median"]

    def row(self, label: str, metric: str, *, scale: float = 1.0, paper=None, note: str = "",
            display: str | None = None) -> Row:
        """A table row: our median and CI of `metric` for `label`, times `scale`, beside the paper's value."""
        cell = self.cell(label)
        if cell is None:
            return Row(display or label, paper=paper, note=ABSENT)
        st = cell.stat(metric)
        if st["n"] == 0:
            why = cell.reason or (f"{metric} not measured" if cell.status == "done" else "")
            return Row(display or label, paper=paper, note=f"{cell.status}: {why}"[:200])
        ci = (None, None) if math.isnan(st["ci_low"]) else (st["ci_low"] * scale, st["ci_high"] * scale)
        return Row(display or label, st["median"] * scale, ci[0], ci[1], st["n"], paper, note, cell=label,
                   metric=metric)

    def status(self, label: str) -> str:
        cell = self.cell(label)
        return "absent" if cell is None else cell.status


def ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def registry() -> dict[str, Study]:
    from mobiperf.orchestration.studies import all_studies

    return all_studies()


def get_study(name: str) -> Study:
    studies = registry()
    if name not in studies:
        raise UsageError(f"unknown study {name!r}; studies: {', '.join(studies)}")
    return studies[name]


def plan_study(study: Study, config: Config) -> tuple[SweepDefinition, dict[str, dict[str, str]]]:
    """The sweep of a study, and its cell labels -> parameters."""
    if config.target != "local":   # the phone's own storage: none of this host's models apply
        config.phone, config.device = "none", None
    if config.phone is None:
        config.phone = study.default_phone(config) or "none"
    if config.device is None and config.target == "local":
        config.device = study.default_device(config)
    labelled = study.cells(config)
    labels: dict[str, dict[str, str]] = {}
    cells = []
    for label, params in labelled:
        params = dict(params)
        if config.target != "local":
            params["target"] = config.target
        if config.device:
            params.setdefault("device", config.device)
        if config.cpu != "host":
            params.setdefault("cpu", config.cpu)
        if config.phone and config.phone != "none":
            params.setdefault("phone", config.phone)
        params = check_params(params)
        labels[label] = params
        if params not in cells:
            cells.append(params)
    repeat = config.repeat or study.repeat(config)
    return SweepDefinition(cells=cells, repeat=repeat, seed=0, metric=study.metric, name=study.name,
                           timeout_s=1800.0), labels


def missing_components(study: Study) -> list[str]:
    from mobiperf.core.binaries import reference_bin_dir

    return [f"{reference_bin_dir() / b} (make -C reference-impl)" for b in study.needs
            if not (reference_bin_dir() / b).exists()]


def run_study(name: str, out: Path, config: Config, *, progress: Progress | None = None,
              report_only: bool = False) -> dict:
    """Run (or resume) the study's sweep in `out`, then write study.json and study.html; returns study.json."""
    study = get_study(name)
    missing = missing_components(study)
    if missing:
        raise UsageError(f"study {name} needs {', '.join(missing)}")
    sdir = SweepDir(out)
    stored = _stored_config(out)
    if stored is not None and not report_only:
        if (stored["quick"], stored["device"], stored["cpu"]) != (config.quick, config.device or stored["device"],
                                                                   config.cpu) \
                or config.phone not in (None, stored.get("phone")) \
                or config.target != stored.get("target", "local"):
            raise UsageError(f"{out} holds this study with --quick={stored['quick']}, device "
                             f"{stored['device']}, cpu {stored['cpu']}, phone {stored.get('phone')}, target "
                             f"{stored.get('target', 'local')}; resume it with the same options or choose another -o")
        config.device = stored["device"]
        config.phone = stored.get("phone", "none")
        config.repeat = config.repeat or stored.get("repeat")
    definition, labels = plan_study(study, config)
    if report_only:
        data = sdir.read()
    else:
        out.mkdir(parents=True, exist_ok=True)
        (out / "study-config.json").write_text(json.dumps({**asdict(config), "repeat": definition.repeat,
                                                           "study": name}))
        data = run_sweep(out, definition, progress=progress, grow=True)  # a study that gained cells continues
    return write_study_outputs(study, config, data, labels, out)


def _stored_config(out: Path) -> dict | None:
    try:
        return json.loads((out / "study-config.json").read_text())
    except (FileNotFoundError, ValueError):
        return None


def write_study_outputs(study: Study, config: Config, data: dict, labels: dict[str, dict[str, str]],
                        out: Path) -> dict:
    from mobiperf.orchestration.sweep import sweep_matrix
    from mobiperf.reports.study_page import write_study_page

    results = Results(data, labels)
    sections, checks = study.analyse(results, config)
    for s in sections:  # a reduced study leaves out configurations: say nothing about them
        s.rows = [r for r in s.rows if not (r.ours is None and r.note == ABSENT)]
    sections = [s for s in sections if s.rows]
    for s in sections:
        compare_rows(s, results)
    result = {"name": study.name, "title": study.title, "paper": study.paper, "description": study.description,
              "created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "config": asdict(config),
              "machine_note": machine_note(),
              "sections": [{**asdict(s), "rows": [asdict(r) for r in s.rows]} for s in sections],
              "checks": [asdict(c) for c in checks]}
    tmp = out / ".study.json.tmp"
    tmp.write_text(json.dumps(result, indent=1))
    os.replace(tmp, out / "study.json")
    notes = [phone_note(result["config"])] if phone_note(result["config"]) else []
    write_study_page(result, sweep_matrix(data), out / "study.html", notes=notes)
    return result


def phone_note(config: dict) -> str:
    """What the phone model of a study's cells was, in one line ('' without one)."""
    name = config.get("phone")
    if not name or name == "none":
        return ""
    from mobiperf.stack.phone import PHONES

    p = PHONES.get(name)
    values = f" (device {p.device}, dirty limit {p.dirty}, CPU {p.cpu}, FUSE wake-up {p.fuse_wakeup})" if p else ""
    return f"phone model: {name}{values}"


def compare_rows(section: Section, results: Results) -> None:
    """Each row made from a cell against the section's baseline row of the same metric, with compare's statistics
    (sweep.versus): the baseline is Section.baseline, else the first row with a figure."""
    from mobiperf.orchestration.sweep.versus import compare_to_baseline, verdict_text

    measured = [r for r in section.rows if r.cell and r.n]
    base = next((r for r in measured if r.label == section.baseline), measured[0] if measured else None)
    if base is None:
        return
    same = [r for r in measured if r.metric == base.metric]
    versus = compare_to_baseline({r.label: results.values(r.cell, r.metric) for r in same}, base.label, base.metric)
    base.verdict, base.versus = "baseline", "baseline"
    for r in same:
        c = versus.get(r.label)
        if c is not None and r is not base:
            r.verdict, r.versus = c.verdict, f"vs {base.label}: {verdict_text(c)}"
            r.p_value = None if math.isnan(c.p_value) else c.p_value


def machine_note() -> str:
    try:
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        load = "?"
    return (f"{platform.node()}, {os.cpu_count()} CPUs, load average {load} when the report was written; the "
            "machine is shared, so figures are noisy: medians and bootstrap CIs of the repetitions are shown")


def format_study_text(result: dict) -> str:
    """The study's tables and checks as text (what `mobiperf study` prints and the tests show)."""
    from mobiperf.core.metrics import format_value

    out = [f"== study {result['name']}: {result['title']}", f"   paper: {result['paper']}"]
    if (result.get("config") or {}).get("target", "local") != "local":
        out.append(f"   measured on {result['config']['target']}: the phone's own storage (a directory of /data, "
                   "the FUSE daemons built for its ABI)")
    if phone_note(result.get("config") or {}):
        out.append(f"   {phone_note(result['config'])}")
    for s in result["sections"]:
        out.append(f"\n-- {s['title']}  [{s['source']}]")
        rows = [["configuration", f"ours ({s['unit']})", "95% CI", "n", "paper", "note", "significance"]]
        fmt = (lambda v: "-" if v is None else format_value({"value": v, "unit": s["unit"]}))
        for r in s["rows"]:
            ci = "-" if r["ci_low"] is None else f"[{fmt(r['ci_low'])}, {fmt(r['ci_high'])}]"
            paper = fmt(r["paper"]) if isinstance(r["paper"], (int, float)) else (r["paper"] or "-")
            rows.append([r["label"], fmt(r["ours"]), ci, str(r["n"] or "-"), paper, r["note"],
                         r.get("versus") or ""])
        out.append(format_rows(rows).rstrip())
    if result["checks"]:
        out.append("\n-- the paper's claims, here")
        for c in result["checks"]:
            verdict = {True: "HOLDS", False: "DOES NOT HOLD", None: "NOT MEASURED"}[c["passed"]]
            out.append(f"  [{verdict}] {c['claim']}: {c['detail']}")
    return "\n".join(out) + "\n"


def check(claim: str, values: dict[str, Any], predicate: Callable[..., bool],
          detail: str | Callable[..., str]) -> Check:
    """A Check that is None (not measured) when a value is missing, else predicate(**values); `detail` is a
    format string or a function of the values."""
    if any(v is None for v in values.values()):
        missing = ", ".join(k for k, v in values.items() if v is None)
        return Check(claim, None, f"not measured ({missing} missing)")
    text = detail(**values) if callable(detail) else detail.format(**values)
    return Check(claim, bool(predicate(**values)), text)
