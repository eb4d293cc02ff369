"""The report's first section: who the IO time went to and who waited on it (the tables of analyzers/who.py,
reports/who_figures.py), and the facts of where the trace comes from that the header names."""

from __future__ import annotations

from typing import Any

import polars as pl

from mobiperf.analyzers.who import top_blocked, top_files
from mobiperf.reports import who_figures
from mobiperf.reports.html import esc, figure_div, format_cell, missing, sortable_table

TABLE_ROWS = 25


def header_facts(meta: dict[str, Any]) -> list[tuple[str, str]]:
    """What the header says about the trace: for an ingested one its files and the device and kernel where the
    trace names them (Perfetto's system info), for a recording the device and what was recorded, else the
    workload's command."""
    target = meta.get("target", {})
    system = _trace_system(meta)
    if target.get("target") == "ingested":
        device = system.get("android_build") or system.get("machine") or "not named by the trace"
        return [("trace", ", ".join(target.get("inputs") or []) or "?"), ("device", device),
                ("kernel", system.get("kernel") or "not named by the trace")]
    android = target.get("android") or {}
    device = " ".join(str(x) for x in (target.get("target"), android.get("model"),
                                       f"Android {android['android_version']}" if android.get("android_version")
                                       else None) if x)
    facts = [("device", device or "?"), ("kernel", str(target.get("kernel") or "?"))]
    if (meta.get("command") or [""])[0] == "record":
        recorded = meta.get("recorded") or {}
        what = f"the whole device, {recorded.get('duration_s') or 'until stopped'}" + (
            f" s; app {recorded['app']}" if recorded.get("app") else (" s" if recorded.get("duration_s") else ""))
        return [("recorded", what), *facts]
    return [("workload", " ".join(meta.get("command", [])) or "?"), *facts]


def page_title(meta: dict[str, Any]) -> str:
    """The page's heading: the trace's file for an ingested run, what was recorded, else the stack and command."""
    target = meta.get("target", {})
    command = meta.get("command") or []
    if target.get("target") == "ingested":
        names = [str(p).rsplit("/", 1)[-1] for p in target.get("inputs") or []]
        return f"trace: {', '.join(names) or meta.get('stack', '?')}"
    if command[:1] == ["record"]:
        app = (meta.get("recorded") or {}).get("app")
        return f"recorded: {target.get('target', '?')}" + (f", {app}" if app else "")
    return f"{meta.get('stack', '?')}: {' '.join(command[:1]) or 'run'}"


def _trace_system(meta: dict[str, Any]) -> dict[str, Any]:
    for rep in (meta.get("parse") or {}).get("repetitions", {}).values():
        for summary in rep.values():
            if isinstance(summary, dict) and isinstance(summary.get("system"), dict):
                return summary["system"]
    return {}


def who_section(meta: dict[str, Any], tables: dict[str, pl.DataFrame]) -> str:
    out = []
    owners = tables.get("io_by_owner")
    if owners is not None and len(owners):
        out.append(figure_div(who_figures.fig_who_icicle(owners), "fig-who"))
        out.append("<p class='sub'>Each box is a process, one of its threads, a file, then the layers of that"
                   " file's IO time (exclusive: they add up to the file's). The time of a call, a phone's file"
                   " operation or sync counts for the thread that made it, with everything it caused (the FUSE"
                   " daemon's work, the journal commit its sync waited for, its block requests); IO no call"
                   " caused counts for the task that did it (writeback, periodic commits). Pooled over every"
                   " repetition.</p>")
        out.append(_files_table(top_files(owners, TABLE_ROWS)))
    else:
        out.append(missing("Who the IO time went to", _why(meta, "io_by_owner")))
    blocked = tables.get("blocked")
    if blocked is not None and len(blocked):
        out.append("<h3>Who waited: time in uninterruptible sleep</h3>")
        out.append(figure_div(who_figures.fig_blocked(blocked), "fig-blocked"))
        out.append("<p class='sub'>From each context switch that left a thread in D until its wake-up, split by"
                   " what its own nests had in flight then (block: a block request; journal: the commit its sync"
                   " waited for; fuse: the FUSE reply; call: inside its call, nothing below), else the kernel"
                   " function Android's sched_blocked_reason names (io: an IO wait). Threads ranked by their time"
                   " waiting on IO. ★main: the thread whose id is its process's (an app's UI thread); ★ui:"
                   " RenderThread.</p>")
        out.append(_blocked_table(top_blocked(blocked, TABLE_ROWS)))
    return "".join(out)


def _why(meta: dict[str, Any], table: str) -> str:
    skipped = meta.get("analysis", {}).get("skipped", {})
    return skipped.get(table) or f"no {table} table in this run (re-run `mobiperf analyze RUNDIR`)"


def _cell(column: str, value: Any) -> tuple[str, Any]:
    text, _ = format_cell(column, value)
    return text, value if isinstance(value, (int, float)) and not isinstance(value, bool) else (value or "")


def _files_table(df: pl.DataFrame) -> str:
    rows = [[(esc(r["scope"] or ""), r["scope"] or ""), (esc(_named(r["process"], r["pid"])), r["process"] or ""),
             (esc(_named(r["thread"], r["tid"])), r["thread"] or ""), (esc(r["path"] or "(no file)"), r["path"] or ""),
             _cell("time_ns", r["time_ns"]), _cell("block_bytes", r["block_bytes"]),
             (esc(f"{r['top_layer']} {100 * r['top_layer_share']:.0f}%") if r["top_layer"] else "",
              r["top_layer"] or "")] for r in df.iter_rows(named=True)]
    return ("<h3>By process, thread and file (the workload's first; click a column to sort)</h3>"
            + sortable_table("who-files", ["scope", "process", "thread", "file", "IO time", "block bytes",
                                           "mostly"], rows))


def _blocked_table(df: pl.DataFrame) -> str:
    rows = [[(esc(r["scope"] or ""), r["scope"] or ""), (esc(_named(r["process"], r["pid"])), r["process"] or ""),
             (esc(_named(r["thread"], r["tid"])), r["thread"] or ""), (esc(r["role"] or ""), r["role"] or ""),
             _cell("io_ns", r["io_ns"]), _cell("blocked_ns", r["blocked_ns"]), _cell("count", r["count"]),
             (esc(f"{r['waited_on']} {100 * r['waited_on_share']:.0f}%") if r["waited_on"] else "",
              r["waited_on"] or "")] for r in df.iter_rows(named=True)]
    return sortable_table("who-blocked", ["scope", "process", "thread", "role", "waiting on IO", "in D",
                                          "intervals", "mostly on"], rows)


def _named(name: str | None, ident: int | None) -> str:
    return f"{name or '?'} ({ident})" if ident is not None else (name or "")
