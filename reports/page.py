"""The report page of one run: one self-contained HTML file (plotly.js inlined once, no network), built from
run.json and the result tables.

Every figure and table says what it aggregates over the repetitions: the tiles are medians of per-repetition
values (with their range, the spread that matters when judging a change), most figures pool every request of
every repetition, and the access pattern shows one repetition, named.

Every section declares the result tables it needs; a section none of whose tables the run has is left out, with
one line in the summary naming the table and why it is absent (the analyzer's own reason from run.json when it
was skipped). The first section after the summary is who: the processes, threads and files the IO time went to
(reports/who_page.py). An incomplete or
failed run says so in the title, in a banner and in the sticky navigation bar.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from typing import Any, Callable

import polars as pl

from mobiperf.analyzers.f2fs_region import region_class
from mobiperf.core.exit_status import describe_exit_statuses
from mobiperf.core.layer_sources import layer_sources
from mobiperf.core.metrics import format_quantity, format_value, metric_key
from mobiperf.reports import figures
from mobiperf.reports.html import esc, figure_div, missing, page, status_label, table_html
from mobiperf.reports.replay_section import replay_banner, replay_section
from mobiperf.reports.who_page import header_facts, page_title, who_section
from mobiperf.core.units import format_duration_ns, format_size

# Per-request FUSE table: an event table, shown when the caller passes it along with the results.
FUSE_REQUESTS = ("fuse_req",)
LATENCY_TABLES = ("latency_summary", "syscall_latency", "fs_latency", "fuse_latency")

KEY_METRICS = (("workload.throughput", {}), ("workload.elapsed", {}), ("workload.tps", {}), ("workload.iops", {}),
               ("block.requests", {"op": "write"}), ("block.bytes", {"op": "write"}),
               ("block.requests", {"op": "read"}), ("block.requests", {"op": "flush"}),
               ("block.sequential_share", {"op": "write"}), ("latency.d2c.p50", {"op": "write"}),
               ("latency.d2c.p99", {"op": "write"}), ("latency.q2c.p99", {"op": "write"}))


@dataclass
class Section:
    anchor: str
    title: str
    render: Callable[[dict[str, Any], dict[str, pl.DataFrame]], str]
    needs: tuple[str, ...] = ()  # any one of these tables fills it; with none, it is left out with one line


def first_table(tables: dict[str, pl.DataFrame], names: tuple[str, ...]) -> tuple[str | None, pl.DataFrame | None]:
    for name in names:
        if name in tables:
            return name, tables[name]
    return None, None


def absence_reason(meta: dict[str, Any], table: str) -> str:
    """Why a result table is not in this run, in the words of the analysis that skipped it (for an ingested
    run, which cannot be collected again, what its traces lack instead of what to enable)."""
    why = _absence_reason(meta, table)
    if meta.get("target", {}).get("target") == "ingested":
        why = re.sub(r"; (?:enable|add) .* when collecting$", "; the ingested traces have no such events", why)
    return why


def _absence_reason(meta: dict[str, Any], table: str) -> str:
    analysis = meta.get("analysis", {})
    skipped = analysis.get("skipped", {})
    if table in skipped:
        return f"no {table} table: {skipped[table]}"
    for name, why in skipped.items():
        if name.split("+")[0] == table:
            return f"no {table} table: {why}"
    try:
        from mobiperf.analyzers import registry

        producers = [a for a in registry() if a.produces == table]
    except Exception:  # a report must render even if the analyzers cannot be imported
        producers = []
    if producers:
        a = producers[0]
        if a.name in skipped:
            return f"no {table} table: {skipped[a.name]}"
        return (f"no {table} table in this run (it was analysed by an older mobiperf or not analysed: run "
                f"`mobiperf analyze RUNDIR`)")
    if meta.get("status") == "incomplete":
        return f"no {table} table: the run is incomplete and was not analysed that far"
    return f"no {table} table: this mobiperf has no analyzer producing it yet"


def call_timing_note(syscall_class: pl.DataFrame | None) -> str:
    """How the calls were placed on the trace clock (analyzers/syscall.py), in one sentence."""
    if syscall_class is None or not len(syscall_class) or "timing" not in syscall_class.columns:
        return ""
    n = dict(syscall_class.group_by("timing").len().iter_rows())
    parts = [f"{n['kernel']:,} calls timed by the kernel (syscalls events)"] if n.get("kernel") else []
    if n.get("strace"):
        err = syscall_class.filter(pl.col("timing") == "strace")["clock_error_ns"].max() or 0
        parts.append(f"{n['strace']:,} by strace's stamps, placed on the trace clock to within "
                     f"{format_duration_ns(err)}")
    if n.get("wall"):
        parts.append(f"{n['wall']:,} left on the wall clock (no clock readings or markers): not nested")
    return "Call timing: " + "; ".join(parts) + "."


def _need(meta, tables, *names: str) -> str | None:
    for n in names:
        if n not in tables:
            return absence_reason(meta, n)
    return None


# --- sections ---

def _summary(meta: dict[str, Any], tables: dict[str, pl.DataFrame]) -> str:
    reps = meta.get("repetitions", [])
    facts = [*header_facts(meta), ("stack", meta.get("stack")), ("scheduler", meta.get("scheduler") or "default"),
             ("repetitions", f"{len(reps)} ({describe_exit_statuses(r.get('exit_code') for r in reps)})"
              if reps else "none recorded"),
             ("status", meta.get("status")), *layer_sources(meta)]
    out = ["<table>" + "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in facts) + "</table>"]
    by_key = {metric_key(m): m for m in meta.get("metrics", [])}
    per_rep = per_repetition_values(meta)
    cards = []
    for name, labels in KEY_METRICS:
        m = by_key.get(metric_key({"name": name, "labels": labels}))
        if m is not None:
            label = name + ("" if not labels else " " + ",".join(labels.values()))
            cards.append(_card(format_value(m), label, per_rep.get(metric_key(m), []), m.get("unit", "")))
    times = [float(r["workload_ns"]) for r in reps if r.get("workload_ns") and r.get("exit_code", 0) == 0]
    if times:
        cards.insert(0, _card(format_duration_ns(statistics.median(times)), "workload wall time", times, "ns"))
    if cards:
        out.append("<div class='cards'>" + "".join(cards) + "</div>")
        if len(reps) > 1:
            out.append(f"<p class='sub'>tiles: the median of the {len(reps)} repetitions' values, their range "
                       "below it; the figures and tables below pool the requests of every repetition unless "
                       "they say otherwise.</p>")
    auto = meta.get("auto_repeat")
    if auto:
        out.append(f"<p class='sub'>-n auto: {esc(auto.get('reason', ''))}</p>")
    warnings = meta.get("warnings", [])
    if warnings:
        out.append("<h3>Warnings</h3><ul>" + "".join(f"<li>{esc(w)}</li>" for w in warnings) + "</ul>")
    return "".join(out)


def per_repetition_values(meta: dict[str, Any]) -> dict[str, list[float]]:
    """metric key -> its value in each repetition that has per-repetition metrics."""
    out: dict[str, list[float]] = {}
    for rec in meta.get("repetitions", []):
        for m in rec.get("metrics") or []:
            out.setdefault(metric_key(m), []).append(float(m["value"]))
    return out


def _card(value: str, label: str, values: list[float], unit: str) -> str:
    """A tile: the median, what it is, and over how many repetitions with their range."""
    spread = ""
    if len(values) > 1:
        lo, hi = min(values), max(values)
        spread = (f"<div class='k'>median of {len(values)}; range {esc(format_quantity(lo, unit))} – "
                  f"{esc(format_quantity(hi, unit))}</div>")
    return f"<div class='card'><div class='v'>{esc(value)}</div><div class='k'>{esc(label)}</div>{spread}</div>"


def _repetitions(meta: dict[str, Any]) -> int:
    return len(meta.get("repetitions", [])) or 1


def scoped(fig, scope: str):
    """The figure with what it aggregates under its title."""
    if scope:
        fig.update_layout(title_text=f"{fig.layout.title.text}<br><sup>{scope}</sup>")
    return fig


def pooled(meta: dict[str, Any]) -> str:
    n = _repetitions(meta)
    return f"every request of all {n} repetitions, pooled" if n > 1 else ""


def _characterisation(meta, tables) -> str:
    why = _need(meta, tables, "io_class")
    if why:
        return missing("The IO characterisation (seed 000 Fig. 4)", why)
    io_class = tables["io_class"]
    out = []
    layers = io_class["layer"].unique().sort().to_list() if "layer" in io_class.columns else ["block"]
    for layer in sorted(layers, key=lambda x: (x != "syscall", x)):
        fig = figures.fig_io_characterisation(io_class, tables.get("block_io") if layer == "block" else None, layer)
        out.append(figure_div(scoped(fig, pooled(meta)), f"fig-characterisation-{layer}"))
    keys = (["layer"] if "layer" in io_class.columns else []) + ["op"]
    per_rep = (io_class.group_by(*keys, "rep").agg(pl.col("count").sum().alias("n"), pl.col("bytes").sum().alias("b"))
               if "rep" in io_class.columns else None)
    totals = (io_class.group_by(*keys).agg(pl.col("count").sum().alias("requests_all_reps"),
                                           pl.col("bytes").sum().alias("bytes_all_reps")).sort(pl.all()))
    if per_rep is not None and _repetitions(meta) > 1:
        medians = per_rep.group_by(*keys).agg(pl.col("n").median().alias("requests_per_rep_median"),
                                              pl.col("n").min().alias("min"), pl.col("n").max().alias("max"),
                                              pl.col("b").median().alias("bytes_per_rep_median"))
        totals = totals.join(medians, on=keys, how="left").sort(keys)
    out.append("<p class='sub'>percentages are of the requests of each direction; counts (of all repetitions) are "
               "inside the bars. "
               "Locality is strict (starts where the previous request ended): at the block layer per device and "
               "direction in issue order, at the syscall layer per process and file; a stream's first request "
               "is left out.</p>" + table_html(totals))
    return "".join(out)


def _latency(meta, tables) -> str:
    why = _need(meta, tables, "block_io")
    if why:
        return missing("The per-layer latency breakdown", why)
    block_io = tables["block_io"]
    waterfall = tables.get("waterfall")
    scope = pooled(meta)
    figs = [figure_div(scoped(figures.fig_layer_breakdown(block_io, waterfall), scope), "fig-layer-breakdown")]
    if waterfall is not None:  # the block phases stay visible next to the cross-layer view
        figs.append(figure_div(scoped(figures.fig_layer_breakdown(block_io), scope), "fig-block-phases"))
    if "layer_breakdown" in tables and len(tables["layer_breakdown"]):
        figs.append(figure_div(scoped(figures.fig_layer_shares(tables["layer_breakdown"]), scope),
                               "fig-layer-shares"))
    figs.append(figure_div(scoped(figures.fig_latency_cdf(block_io), scope), "fig-latency-cdf"))
    if "syscall_class" in tables and len(tables["syscall_class"]):
        figs.append(figure_div(scoped(figures.fig_syscall_cdf(tables["syscall_class"]), scope), "fig-syscall-cdf"))
    figs.append(figure_div(figures.fig_io_waterfall(block_io, waterfall, tables.get("io_span")), "fig-waterfall"))
    out = ["<div class='grid'>" + "".join(figs) + "</div>"]
    if waterfall is None:
        out.append(missing("The cross-layer breakdown and waterfall (syscall, file system, FUSE, block)",
                           absence_reason(meta, "waterfall") + "; the block layer's phases are shown"))
    else:
        out.append(f"<p class='sub'>{esc(call_timing_note(tables.get('syscall_class')))} Layers nest: a call's"
                   " FUSE requests, the daemon's calls into the lower file system, the journal commits and block"
                   " requests they waited for; each layer's exclusive time is the time it was the deepest one"
                   " active, so the shares of a call add up to 100 %.</p>")
    if "io_background" in tables and len(tables["io_background"]):
        bg = (tables["io_background"].group_by("scope", "comm", "layer", "name")
              .agg(pl.col("count").sum(), pl.col("bytes").sum(), pl.col("time_ns").sum())
              .sort("scope", "bytes", "count", descending=[False, True, True]).head(30))
        out.append("<h3>IO no call of the workload caused (all repetitions, by scope and task)</h3>"
                   "<p class='sub'>Writeback, periodic journal commits, a daemon's own threads, mobiperf and other"
                   " processes: reported here, never charged to a call. Scopes mobiperf and other are not in the"
                   " run's block figures.</p>" + table_html(bg))
    lat = [tables[n] for n in LATENCY_TABLES if n in tables]
    if lat:
        agg = (pl.concat(lat, how="vertical_relaxed")
               .group_by("layer", "phase", "op").agg(pl.col("count").sum().alias("count_all_reps"),
                                                     pl.col("p50_ns").median(),
                                                     pl.col("p90_ns").median(), pl.col("p99_ns").median(),
                                                     pl.col("max_ns").max())
               .sort("layer", "phase", "op"))
        out.append("<h3>Latency percentiles per layer</h3><p class='sub'>each percentile is the median of the "
                   "repetitions' percentiles; max is the largest of any repetition; count_all_reps adds them all</p>"
                   + table_html(agg))
    return "".join(out)


def _access_pattern(meta, tables) -> str:
    why = _need(meta, tables, "block_io")
    if why:
        return missing("The block access pattern (seed 000 Fig. 12/15)", why)
    block_io = tables["block_io"]
    note = ""
    if not ({"file_type", "region"} & set(block_io.columns)):
        note = ("<p class='sub'>coloured by direction: the block_io table has no region or file type column "
                "(the region/file-type analyzer did not run).</p>")
    out = figure_div(figures.fig_lba_scatter(block_io), "fig-lba") + note
    if "file_type" in block_io.columns:
        known = block_io.filter(~pl.col("file_type").is_in(["unknown", "none", ""]) & (pl.col("size_bytes") > 0))
        if len(known):
            out += figure_div(figures.fig_lba_scatter(block_io, "file_type"), "fig-lba-file-type")
            out += (f"<p class='sub'>coloured by file type where the layout snapshot's extents name the file "
                    f"({len(known):,} requests).</p>")
    share = _attributed_share(tables)
    if share is not None:
        out += (f"<p class='sub'>{100 * share:.0f}% of the data requests are attributed to a file (by the call,"
                " file operation or inode whose nest they are in: the who section).</p>")
    return out


def _attributed_share(tables) -> float | None:
    if "io_span" not in tables or "span_owner" not in tables:
        return None
    from mobiperf.analyzers.who import data_file_share

    return data_file_share(tables["io_span"], tables["span_owner"])


def _throughput(meta, tables) -> str:
    why = _need(meta, tables, "block_io")
    if why:
        return missing("Throughput over time", why)
    out = figure_div(figures.fig_throughput(tables["block_io"]), "fig-throughput")  # one line per repetition
    amp = tables.get("amplification")
    if amp is None:
        return out + missing("Amplification (application vs FUSE vs block bytes)",
                             absence_reason(meta, "amplification"))
    ratios = (amp.filter(pl.col("region") == "all").group_by("layer", "op")
              .agg(pl.col("count").median(), pl.col("bytes").median(), pl.col("ratio_to_app").median())
              .sort("op", "layer"))
    figs = [figure_div(figures.fig_amplification(amp), "fig-amplification")]
    if "syscall_class" in tables:
        figs.append(figure_div(figures.fig_layer_throughput(tables["syscall_class"], tables["block_io"]),
                               "fig-layer-throughput"))
    return (out + "<div class='grid'>" + "".join(figs) + "</div><h3>Amplification (median over repetitions)</h3>"
            + table_html(ratios))


def _sqlite(meta, tables) -> str:
    txn, summary = tables.get("sqlite_txn"), tables.get("sqlite_summary")
    if txn is None and summary is None:
        return missing("The SQLite per-transaction table (seed 002)", absence_reason(meta, "sqlite_txn"))
    out = []
    if summary is not None:
        per_mode = (summary.group_by("journal_mode").agg(pl.col("transactions").sum(),
                    *[pl.col(c).median() for c in ("fsync_per_txn", "block_writes_per_txn", "block_kib_per_txn",
                                                   "fs_journal_kib_per_txn", "journal_meta_share")])
                    .sort("journal_mode"))
        out.append("<h3>Per transaction (seed 002's per-insert table; medians over repetitions)</h3>"
                   + table_html(per_mode))
    if txn is not None:
        out.append("<h3>Every transaction</h3>" + table_html(txn.drop("start_ts", "end_ts"), max_rows=300))
    return "".join(out)


def _fuse(meta, tables) -> str:
    name, fuse = first_table(tables, FUSE_REQUESTS)
    if fuse is not None:
        return figure_div(scoped(figures.fig_fuse_requests(fuse), pooled(meta)), "fig-fuse")
    if "fuse_latency" in tables and len(tables["fuse_latency"]):
        sizes = ""
        amp = tables.get("amplification")
        if amp is not None:
            fuse = amp.filter((pl.col("layer") == "fuse") & (pl.col("count") > 0))
            sizes = " ".join(f"Mean FUSE {r['op'].upper()} request: {format_size(r['bytes'] / r['count'])} "
                             f"({r['count']:,} requests, rep {r['rep']})." for r in fuse.iter_rows(named=True))
        return (figure_div(scoped(figures.fig_fuse_counts(tables["fuse_latency"]), pooled(meta)), "fig-fuse")
                + f"<p class='sub'>{esc(sizes)} The size histogram needs the per-request fuse_req table, which "
                  "this report was not given.</p>")
    return missing("FUSE request sizes and counts", absence_reason(meta, "fuse_latency")
                   + " (a stack without FUSE has none)")


def syscall_count_rows(tables: dict[str, pl.DataFrame]) -> dict[str, dict[Any, float]]:
    """Seed 000 Table 3's rows for one run: {row label: {repetition: value}}: calls per IO system call (by
    process when several were traced), FUSE WRITE requests, block write requests and metadata/journal updates
    (block writes to those regions)."""
    rows: dict[str, dict[Any, float]] = {}
    calls = tables.get("syscall_class")
    if calls is not None and len(calls):
        by_comm = calls["comm"].n_unique() > 1
        keys = ["syscall", "comm", "rep"] if by_comm else ["syscall", "rep"]
        for r in calls.group_by(keys).agg(pl.len().alias("n")).sort(keys).iter_rows(named=True):
            label = f"# of {r['syscall']}()" + (f" by {r['comm']}" if by_comm else "")
            rows.setdefault(label, {})[r["rep"]] = r["n"]
    fuse = tables.get("fuse_latency")
    if fuse is not None:
        for r in fuse.filter(pl.col("op").str.to_lowercase().is_in(["fuse_write", "write"])).iter_rows(named=True):
            rows.setdefault("# of FUSE WRITE requests", {})[r["rep"]] = r["count"]
    if "block_io" in tables:
        bio = tables["block_io"].filter(pl.col("op") == "write")
        region = figures.region_column(bio)
        for r in bio.group_by("rep").agg(pl.len().alias("n")).sort("rep").iter_rows(named=True):
            rows.setdefault("# of IO requests (block writes)", {})[r["rep"]] = r["n"]
        if region is not None:
            # f2fs's node, table and checkpoint writes are its metadata and journal (analyzers/f2fs_region.py)
            meta_rows = bio.filter(region_class(region).is_in(["metadata", "journal"])).group_by("rep").agg(
                pl.len().alias("n"))
            for rep in bio["rep"].unique().sort().to_list():
                n = meta_rows.filter(pl.col("rep") == rep)["n"]
                rows.setdefault("Metadata/journal updates", {})[rep] = int(n[0]) if len(n) else 0
    return rows


def _syscalls(meta, tables) -> str:
    rows = syscall_count_rows(tables)
    out = []
    if "syscall_class" not in tables:
        out.append(missing("System call counts", absence_reason(meta, "syscall_class")
                           + "; the FUSE and block rows of Table 3 are shown"))
    if not rows:
        return "".join(out) or missing("Table 3", "no syscall, FUSE or block table")
    cols = sorted({c for v in rows.values() for c in v})
    head = "<tr><th></th>" + "".join(f"<th>rep {c}</th>" for c in cols) + "</tr>"
    body = "".join(f"<tr><th>{esc(label)}</th>" + "".join(
        f"<td class='num'>{vals[c]:,.0f}</td>" if c in vals else "<td></td>" for c in cols) + "</tr>"
        for label, vals in rows.items())
    out.append(f"<table>{head}{body}</table><p class='sub'>The shape of seed 000 Table 3 (one column per "
               f"repetition here; `mobiperf compare` puts runs side by side).</p>")
    return "".join(out)


def _metadata(meta, tables) -> str:
    target = meta.get("target", {})
    items = {"run": meta.get("id"), "created": meta.get("created"), "status": meta.get("status"),
             "mobiperf": meta.get("mobiperf"), "host": meta.get("host"), "target": target.get("target"),
             "kernel": target.get("kernel"), "root": target.get("is_root"), "stack": meta.get("stack"),
             "scheduler": meta.get("scheduler"), "command": " ".join(meta.get("command", [])),
             "timings": meta.get("timings")}
    out = ["<table>" + "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in items.items()
                               if v is not None) + "</table>"]
    reps = []
    for r in meta.get("repetitions", []):
        stack = r.get("stack", {})
        lost = sum(v.get("lost_events", 0) for v in r.values() if isinstance(v, dict) and "lost_events" in v)
        reps.append({"rep": r.get("index"), "exit_code": r.get("exit_code"), "workload_ns": r.get("workload_ns"),
                     "device": stack.get("device"), "filesystem": stack.get("filesystem"),
                     "mount_options": stack.get("mount_options"), "lost_events": lost})
    if reps:
        out.append("<h3>Repetitions</h3>" + table_html(pl.DataFrame(reps, infer_schema_length=None)))
    analysis = meta.get("analysis", {})
    if analysis:
        out.append("<h3>Analysis</h3><p>result tables: " + esc(", ".join(analysis.get("results", []))) + "</p>")
        for name, why in analysis.get("skipped", {}).items():
            out.append(f"<p class='missing'>{esc(name)} skipped: {esc(why)}</p>")
    return "".join(out)


SECTIONS = (
    Section("summary", "Summary", _summary),
    Section("who", "Who: processes, threads, files", who_section, needs=("io_by_owner", "blocked")),
    Section("replay", "Replay", replay_section),  # a replay run's only (render_report)
    Section("characterisation", "IO characterisation", _characterisation, needs=("io_class",)),
    Section("latency", "Latency by layer", _latency, needs=("block_io",)),
    Section("access", "Block access pattern", _access_pattern, needs=("block_io",)),
    Section("throughput", "Throughput", _throughput, needs=("block_io",)),
    Section("sqlite", "SQLite transactions", _sqlite, needs=("sqlite_txn", "sqlite_summary")),
    Section("fuse", "FUSE requests", _fuse, needs=(*FUSE_REQUESTS, "fuse_latency")),
    Section("syscalls", "System calls (Table 3)", _syscalls, needs=("syscall_class", "fuse_latency", "block_io")),
    Section("run", "Run metadata", _metadata),
)


def status_banner(meta: dict[str, Any]) -> str:
    status = meta.get("status")
    if status == "complete":
        return ""
    if status == "failed":
        codes = [r.get("exit_code") for r in meta.get("repetitions", [])]
        return (f'<p class="banner failed"><b>This run FAILED:</b> the workload: '
                f'{esc(describe_exit_statuses(codes))}; its figures describe a failed run.</p>')
    return ('<p class="banner"><b>This run is INCOMPLETE:</b> it was interrupted before all stages finished; '
            'figures cover only what was collected and analysed.</p>')


def render_report(meta: dict[str, Any], tables: dict[str, pl.DataFrame]) -> str:
    """The HTML page of a run, from run.json and the result tables that exist."""
    parts = [f"<h1>{esc(page_title(meta))}</h1>",
             f"<p class='sub'>{esc(meta.get('id'))} · {esc(' '.join(meta.get('command', [])))}</p>",
             status_banner(meta), replay_banner(meta, tables)]
    shown = [s for s in SECTIONS if (not s.needs or any(t in tables for t in s.needs))
             and (s.anchor != "replay" or meta.get("replay"))]
    left_out = [f"{s.title}: {absence_reason(meta, s.needs[-1])}" for s in SECTIONS if s not in shown and s.needs]
    for section in shown:
        try:
            content = section.render(meta, tables)
        except Exception as e:  # one broken figure must not take the whole report down; say which and why
            content = missing(section.title, f"it could not be drawn ({type(e).__name__}: {e})")
        if section.anchor == "summary" and left_out:  # what this trace cannot fill, one line each
            content += ("<h3>Not in this report</h3><ul class='sub'>"
                        + "".join(f"<li>{esc(line)}</li>" for line in left_out) + "</ul>")
        parts.append(f'<section id="{section.anchor}"><h2>{esc(section.title)}</h2>{content}</section>')
    status = status_label([meta.get("status")])
    return page(f"mobiperf: {meta.get('id')}", [(s.anchor, s.title) for s in shown], "".join(parts), status)
