"""The one place that sequences the stages: collect -> parse -> analyze -> report.

Each stage reads the files of the previous one from the run directory and writes its own, so `analyze` and
`report` can be re-run offline, and nothing after `collect` touches a device.
"""

from __future__ import annotations

import os
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from mobiperf.core import metrics as metrics_mod
from mobiperf.analyzers import ANALYSIS_PARAMS, headline_metrics, registry, table_sources
from mobiperf.collectors.parse import derive_tables, parse_raw_dir
from mobiperf.core.vocabulary import SQLITE_JOURNALS
from mobiperf.core.errors import MissingTableError, MobiperfError, NotApplicable, TargetError, UsageError
from mobiperf.core.progress import stage
from mobiperf.orchestration.reanalysis import WeakerDataError, events_lost
from mobiperf.core.run_stop import add_missing_repetitions, keep_incomplete
from mobiperf.core.run_facts import Repetition, RunMeta, new_run_meta
from mobiperf.core.runstore import RunDir
from mobiperf.core.signals import raise_if_stopping
from mobiperf.core.schema import RESULTS, TABLES

if TYPE_CHECKING:  # imported where used: analysing an ingested trace needs no stack, collector or plotly
    from mobiperf.orchestration.run_request import RunRequest
    from mobiperf.target.target import Target


def run(target: Target, request: RunRequest, out: Path) -> RunDir:
    """Collect every repetition, then parse, analyze and report. The run is kept whatever happens: a run that
    stops early says at which stage and why (mobiperf.core.run_stop)."""
    _check_can_trace(target, request)
    _check_target_stack(target, request)
    out = Path(os.path.abspath(out))  # the daemons and the workload run elsewhere: every path they get is absolute
    rundir = RunDir.create(out, new_run_meta(
        out.name, target=target.caps.as_dict(), stack=str(request.stack), command=request.command,
        scheduler=request.scheduler, device=request.device, dirty_limit=request.dirty_limit,
        cpu_share=request.cpu_share, fuse_wakeup_ns=request.fuse_wakeup_ns, scope=request.scope,
        sources=request.sources, event_sets=request.event_sets,  # to add repetitions later (compare --until)
        warnings=[]))
    rundir.reserve_space()
    where: dict = {"stage": "collect", "rep": None}
    try:
        _run_stages(target, request, rundir, where)
    except BaseException as e:
        raise keep_incomplete(rundir, e, **where)
    rundir.release_reserve()
    return rundir


def _run_stages(target: Target, request: RunRequest, rundir: RunDir, where: dict) -> None:
    from mobiperf.orchestration.collect import collect_repetition

    timings = {}
    started = time.time()
    auto = request.auto
    with stage("collect", total=auto.limit if auto else request.repeat) as advance:
        for rep in range(auto.limit if auto else request.repeat):
            raise_if_stopping()
            where.update(stage=f"collect rep {rep}", rep=rep)
            advance(0, description=f"collect rep {rep}")
            record = collect_repetition(target, request, rundir, rep)
            meta = rundir.read_meta()
            meta.repetitions.append(Repetition.from_dict(record))
            rundir.write_meta(meta)
            advance()
            if auto is not None and auto.after_repetition(rundir, record):
                break
    if auto is not None:
        rundir.update_meta(auto_repeat=auto.as_dict())
    timings["collect_s"] = round(time.time() - started, 3)
    raise_if_stopping()
    where.update(stage="parse and analyze", rep=None)
    with stage("parse and analyze"):
        t0 = time.time()
        analyze(rundir, reparse=True)
        timings["analyze_s"] = round(time.time() - t0, 3)
    failed = any(r.exit_code != 0 for r in rundir.read_meta().repetitions)
    rundir.update_meta(status="failed" if failed else "complete", timings=timings)
    if request.report:
        where.update(stage="report")
        with stage("report"):
            report(rundir)


def _check_can_trace(target: Target, request: RunRequest) -> None:
    """Refuse before anything is created: a run that cannot trace would only leave a broken run directory."""
    from mobiperf.collectors.plan import check_trace_choice

    caps = target.caps
    # A phone gets root (adb root, su) or says how to get it; this host's user is who ran mobiperf.
    if (not caps.tracefs_path or not caps.tracefs_writable) and not target.is_local and not target.is_root:
        target.require_root("tracing (a tracefs instance of mobiperf's own)")
        target.refresh()   # root came from `adb root`: look again
        caps = target.caps
    if not caps.tracefs_path or not caps.tracefs_writable:
        raise TargetError("tracing needs a writable tracefs: run as root (tracefs is mounted at "
                          "/sys/kernel/tracing when absent)")
    check_trace_choice(request.sources, request.event_sets)
    for ev in request.extra_events:
        if not target.transport.exists(f"{caps.tracefs_path}/{ev.path}/format"):
            known = caps.events.get(ev.system)
            hint = (f"this kernel's {ev.system} events are {', '.join(known)}" if known
                    else f"this kernel has no {ev.system} events")
            raise UsageError(f"unknown trace event {ev.system}:{ev.name}; {hint}")


def _check_target_stack(target: Target, request: RunRequest) -> None:
    """A dir: stack (the target's own storage) is checked before the run directory exists: the host's phone
    models do not apply to it, and a FUSE daemon over it needs its path, its build and root on the target."""
    if request.stack.filesystem.name != "dir":
        return
    from mobiperf.stack.directory import plan_device_stack, refuse_host_models

    refuse_host_models(request.stack_options())
    if request.stack.layers:
        plan_device_stack(target, request.stack)


def parse(rundir: RunDir, *, recorded: dict | None = None, force: bool = False) -> tuple[dict, list[str]]:
    """raw/ -> tables/: the event tables of every repetition, then the tables derived from them.

    recorded: the parse summary run.json holds from an earlier parse. If this parse finds fewer events, the raw
    traces lost something since (a damaged or truncated file): nothing is written and WeakerDataError says what,
    unless force, when the loss goes into the warnings and run.json's `reanalysis`
    (mobiperf.orchestration.reanalysis)."""
    summary, warnings, tables = _parse_tables(rundir)
    loss = events_lost(recorded, summary) if recorded else []
    if loss and not force:
        raise WeakerDataError(rundir.path, loss)
    if loss:
        summary["reanalysis_loss"] = loss
        warnings += [f"parse: fewer events than the earlier parse (forced): {item}" for item in loss]
    for name, df in tables.items():
        rundir.write_table(TABLES[name], df)
    return summary, warnings


def _parse_tables(rundir: RunDir) -> tuple[dict, list[str], dict[str, pl.DataFrame]]:
    per_table: dict[str, list[pl.DataFrame]] = {}
    summary: dict = {"repetitions": {}}
    warnings: list[str] = []
    for rep, raw in rundir.raw_dirs():
        parsed = parse_raw_dir(raw, rep)
        for name, df in parsed.tables.items():
            per_table.setdefault(name, []).append(df)
        summary["repetitions"][rep] = parsed.summary
        warnings += [f"parse: rep {rep}: {w}" for w in parsed.warnings]
    if not per_table:
        raise MissingTableError(f"{rundir.path}: nothing to parse in raw/rep*/ (was collection interrupted "
                                "before tracing started?)")
    tables = {name: pl.concat(frames, how="vertical_relaxed") for name, frames in per_table.items()}
    derived, summary["derived"] = derive_tables(tables)
    all_tables = {**tables, **derived}
    summary["table_rows"] = {name: len(df) for name, df in all_tables.items()}
    return summary, warnings, all_tables


def analyze(rundir: RunDir, *, reparse: bool = False, force: bool = False) -> dict[str, pl.DataFrame]:
    """tables/ -> results/ and the metrics in run.json; re-parses first when asked or when tables are missing.
    A re-parse that finds fewer events than run.json recorded refuses unless force (see parse)."""
    meta = rundir.read_meta()
    add_missing_repetitions(meta, rundir)
    if reparse or not rundir.has_table("block_rq"):
        meta["parse"], parse_warnings = parse(rundir, recorded=meta.get("parse"), force=force)
        if meta["parse"].get("reanalysis_loss"):
            meta.setdefault("reanalysis", []).append({
                "at": datetime.now(timezone.utc).isoformat(timespec="seconds"), "forced": True,
                "loss": meta["parse"].pop("reanalysis_loss")})
        # Lost events are counted per source by the parsers and come back among their warnings.
        notes = [f"collect: rep {r.index}: {n}" for r in meta.repetitions for n in r.get("notes", [])]
        meta.warnings = notes + [w for w in meta.warnings or []
                                    if not w.startswith(("parse:", "collect:"))] + parse_warnings
    results: dict[str, pl.DataFrame] = {}
    available = _TablesOnDemand(rundir)  # read when an analyzer needs one (block_event is large, none reads it)
    params = analysis_params(meta)
    skipped, without = {}, {}
    producers: dict[str, str] = {}  # result table -> the (last) analyzer that was to produce it
    for analyzer in registry():
        producers.setdefault(analyzer.produces, analyzer.name)
        inputs = [results.get(need, available.get(need)) for need in analyzer.needs]
        missing = [need for need, table in zip(analyzer.needs, inputs) if table is None]
        if missing:
            # Not an error: a run without syscall events has no syscall layer. `mobiperf analyze` says why, once
            # per cause: an analyzer whose input was itself skipped carries that one's reason.
            upstream = [skipped[p] for p in (producers.get(m) for m in missing) if p in skipped]
            first = missing[0]  # one cause per line: the first table it lacks
            skipped[analyzer.name] = upstream[0] if upstream else (
                f"no {first} table; add {' or '.join(table_sources([first])) or 'its collector'} when collecting")
            continue
        extra = {name: t for name in analyzer.optional
                 if (t := results.get(name, available.get(name))) is not None}
        extra.update({name: params[name] for name in analyzer.params})
        if len(extra) < len(analyzer.optional):
            lacking = [n for n in analyzer.optional if n not in extra]
            without[analyzer.name] = (f"computed without {', '.join(lacking)} (from "
                                      f"{', '.join(table_sources(lacking))})")
        try:
            produced = analyzer.run(*inputs, **extra)
        except NotApplicable as e:
            skipped[analyzer.name] = str(e)
            continue
        results[analyzer.produces] = RESULTS[analyzer.produces].validate(produced)
        rundir.write_table(RESULTS[analyzer.produces], results[analyzer.produces])
    # another source produced the same table: this one's absence is no news
    produced_by = {a.name: a.produces for a in registry()}
    skipped = {name: why for name, why in skipped.items() if produced_by[name] not in results}
    meta["analysis"] = {"results": sorted(results), "skipped": skipped, "without": without}
    per_rep = []
    for record in meta.repetitions:
        rep_metrics = headline_metrics(results, record.index)
        rep_metrics += workload_metrics(rundir, record.index)
        record.metrics = rep_metrics
        per_rep.append(rep_metrics)
    meta.metrics = metrics_mod.median_metrics(per_rep)
    rundir.write_meta(meta)
    return results


def analysis_params(meta: RunMeta) -> dict:
    """The run's parameters of the analysis (analyzers.ANALYSIS_PARAMS): its scope, and whether its device was
    its own (an emulated stack) or shared (a `dir:` stack on a phone's partition)."""
    params = dict(ANALYSIS_PARAMS)
    params["scope"] = meta.get("scope") or params["scope"]
    stacks = [str((r.get("stack") or {}).get("spec", "")) for r in meta.repetitions]
    params["device_private"] = not any(s.startswith("dir:") for s in stacks)
    params["sqlite_journal"] = generator_journal_mode(meta.command)
    return params


MOBIBENCH_JOURNALS = {str(code): name for name, code in SQLITE_JOURNALS.items()}   # -j code -> journal mode


def generator_journal_mode(command: list[str]) -> str | None:
    """The SQLite journal mode of a Mobibench-compatible generator's command line (-d: SQLite; -j J, default
    TRUNCATE), or None for any other workload: what a run without paths or workload markers knows of SQLite."""
    if not command or Path(command[0]).name != "mobibench" or "-d" not in command:
        return None
    j = command.index("-j") + 1 if "-j" in command else None
    return MOBIBENCH_JOURNALS.get(command[j] if j is not None and j < len(command) else "1", "unknown")


class _TablesOnDemand(dict):
    """The run's event tables, each read from its file the first time it is asked for (.get, [])."""

    def __init__(self, rundir: RunDir):
        super().__init__()
        self.rundir = rundir

    def __missing__(self, name: str) -> pl.DataFrame:
        if name not in TABLES or not self.rundir.has_table(name):
            raise KeyError(name)
        self[name] = self.rundir.read_table(name)
        return self[name]

    def get(self, name: str, default=None):
        try:
            return self[name]
        except KeyError:
            return default


def workload_metrics(rundir: RunDir, rep: int) -> list[dict]:
    """The workload's own figures, when it is the Mobibench-compatible generator."""
    from mobiperf.collectors.parse.mobibench import MobibenchOutputError, read_generator_output

    try:
        parsed = read_generator_output(rundir.path / "raw" / f"rep{rep}" / "stdout.txt")
    except MobibenchOutputError:   # the generator's output, but no result (it failed): the run says so elsewhere
        return []
    return [metrics_mod.metric(name, v["value"], v["unit"]) for name, v in parsed.items()]


# Event tables the report draws directly, beside the results.
REPORT_EVENT_TABLES = ("fuse_req",)


def report(rundir: RunDir, out: Path | None = None) -> Path:
    meta = rundir.read_meta()
    tables = {}
    for name in (*RESULTS, *REPORT_EVENT_TABLES):
        if not rundir.has_table(name):
            continue
        try:
            tables[name] = rundir.read_table(name)
        except MobiperfError as e:  # written by another mobiperf version: the section says it is missing
            meta.setdefault("warnings", []).append(f"report: {name} skipped: {e} (re-run `mobiperf analyze`)")
    path = out or rundir.path / "report.html"
    tmp = Path(f"{path}.tmp")
    from mobiperf.reports.page import render_report

    tmp.write_text(render_report(meta, tables))
    os.replace(tmp, path)
    return path

