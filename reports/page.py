"""The report page of one run: one self-contained HTML file (plotly.js inlined once, no network), built from
run.json and the result tables.

Every section declares the result tables it needs; a section whose table is absent is replaced by a line naming
the table and why it is absent (the analyzer's own reason from run.json when it was skipped). An incomplete or
failed run says so in the title, in a banner and in the sticky navigation bar.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import polars as pl

from mobiperf.metrics import format_value, metric_key
from mobiperf.reports import figures
from mobiperf.reports.html import esc, figure_div, missing, page, status_label, table_html
from mobiperf.units import format_duration_ns

# Result tables the analyzers produce under these names (first present wins).
LAYER_LATENCY = ("latency_by_layer", "layer_latency")
WATERFALL = ("waterfall", "io_waterfall")
SQLITE_TXN = ("sqlite_txn", "sqlite_transaction", "txn_io")
FUSE_REQUESTS = ("fuse_request", "fuse_io", "fuse_req")
SYSCALL_COUNTS = ("syscall_count", "syscall_counts")
AMPLIFICATION = ("amplification",)

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


def first_table(tables: dict[str, pl.DataFrame], names: tuple[str, ...]) -> tuple[str | None, pl.DataFrame | None]:
    for name in names:
        if name in tables:
            return name, tables[name]
    return None, None


def absence_reason(meta: dict[str, Any], table: str) -> str:
    """Why a result table is not in this run, in the words of the analysis that skipped it."""
    analysis = meta.get("analysis", {})
    skipped = analysis.get("skipped", {})
    for name, why in skipped.items():
        if name == table or table in name or name in table:
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


def _need(meta, tables, *names: str) -> str | None:
    for n in names:
        if n not in tables:
            return absence_reason(meta, n)
    return None


# --- sections ---

def _summary(meta: dict[str, Any], tables: dict[str, pl.DataFrame]) -> str:
    target = meta.get("target", {})
    reps = meta.get("repetitions", [])
    facts = [("workload", " ".join(meta.get("command", [])) or "?"), ("stack", meta.get("stack")),
             ("scheduler", meta.get("scheduler") or "default"),
             ("target", " ".join(str(x) for x in (target.get("target"), target.get("model"),
                                                   f"kernel {target.get('kernel')}") if x)),
             ("repetitions", f"{len(reps)} (exit status {', '.join(str(r.get('exit_code')) for r in reps)})"
              if reps else "none recorded"),
             ("status", meta.get("status"))]
    out = ["<table>" + "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in facts) + "</table>"]
    by_key = {metric_key(m): m for m in meta.get("metrics", [])}
    cards = []
    for name, labels in KEY_METRICS:
        m = by_key.get(metric_key({"name": name, "labels": labels}))
        if m is not None:
            label = name + ("" if not labels else " " + ",".join(labels.values()))
            n = f" (median of {m['n']})" if m.get("n", 1) > 1 else ""
            cards.append(f"<div class='card'><div class='v'>{esc(format_value(m))}</div>"
                         f"<div class='k'>{esc(label)}{esc(n)}</div></div>")
    times = [r["workload_ns"] for r in reps if r.get("workload_ns")]
    if times:
        med = sorted(times)[len(times) // 2]
        cards.insert(0, f"<div class='card'><div class='v'>{format_duration_ns(med)}</div>"
                        f"<div class='k'>workload wall time (median)</div></div>")
    if cards:
        out.append("<div class='cards'>" + "".join(cards) + "</div>")
    warnings = meta.get("warnings", [])
    if warnings:
        out.append("<h3>Warnings</h3><ul>" + "".join(f"<li>{esc(w)}</li>" for w in warnings) + "</ul>")
    return "".join(out)


def _characterisation(meta, tables) -> str:
    why = _need(meta, tables, "io_class")
    if why:
        return missing("The IO characterisation (seed 000 Fig. 4)", why)
    io_class = tables["io_class"]
    out = []
    layers = io_class["layer"].unique().sort().to_list() if "layer" in io_class.columns else ["block"]
    for layer in sorted(layers, key=lambda x: (x != "syscall", x)):
        fig = figures.fig_io_characterisation(io_class, tables.get("block_io") if layer == "block" else None, layer)
        out.append(figure_div(fig, f"fig-characterisation-{layer}"))
    totals = (io_class.group_by(*(["layer"] if "layer" in io_class.columns else []), "op")
              .agg(pl.col("count").sum().alias("requests"), pl.col("bytes").sum()).sort(pl.all()))
    out.append("<p class='sub'>percentages are of the requests of each direction; counts are inside the bars. "
               "Locality: strict, per device and direction in issue order.</p>" + table_html(totals))
    return "".join(out)


def _latency(meta, tables) -> str:
    why = _need(meta, tables, "block_io")
    if why:
        return missing("The per-layer latency breakdown", why)
    block_io = tables["block_io"]
    _, layer_lat = first_table(tables, LAYER_LATENCY)
    _, waterfall = first_table(tables, WATERFALL)
    figs = [figure_div(figures.fig_layer_breakdown(block_io, layer_lat), "fig-layer-breakdown"),
            figure_div(figures.fig_latency_cdf(block_io), "fig-latency-cdf"),
            figure_div(figures.fig_io_waterfall(block_io, waterfall), "fig-waterfall")]
    out = ["<div class='grid'>" + "".join(figs) + "</div>"]
    if layer_lat is None:
        out.append(missing("The cross-layer breakdown (syscall, file system, FUSE, block)",
                           absence_reason(meta, LAYER_LATENCY[0]) + "; the block layer's phases are shown"))
    if "latency_summary" in tables:
        lat = tables["latency_summary"]
        agg = (lat.group_by("layer", "phase", "op").agg(pl.col("count").sum(), pl.col("p50_ns").median(),
                                                         pl.col("p90_ns").median(), pl.col("p99_ns").median(),
                                                         pl.col("max_ns").max())
               .sort("layer", "phase", "op"))
        out.append("<h3>Latency percentiles (median over repetitions)</h3>" + table_html(agg))
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
    return figure_div(figures.fig_lba_scatter(block_io), "fig-lba") + note


def _throughput(meta, tables) -> str:
    why = _need(meta, tables, "block_io")
    if why:
        return missing("Throughput over time", why)
    out = figure_div(figures.fig_throughput(tables["block_io"]), "fig-throughput")
    _, amp = first_table(tables, AMPLIFICATION)
    if amp is not None:
        out += "<h3>Amplification (application vs FUSE vs block bytes)</h3>" + table_html(amp)
    return out


def _sqlite(meta, tables) -> str:
    name, txn = first_table(tables, SQLITE_TXN)
    if txn is None:
        return missing("The SQLite per-transaction table (seed 002)", absence_reason(meta, SQLITE_TXN[0]))
    numeric = [c for c, t in txn.schema.items() if t.is_numeric() and c not in ("rep", "txn", "txn_id", "index")]
    keys = [c for c in ("journal_mode", "mode", "label") if c in txn.columns]
    out = []
    if numeric:
        summary = (txn.group_by(keys or pl.lit("all").alias("transactions"))
                   .agg(pl.len().alias("transactions"), *[pl.col(c).mean().alias(f"{c}") for c in numeric]))
        out.append("<h3>Mean per transaction</h3>" + table_html(summary))
    out.append("<h3>Every transaction</h3>" + table_html(txn, max_rows=300))
    return "".join(out)


def _fuse(meta, tables) -> str:
    name, fuse = first_table(tables, FUSE_REQUESTS)
    if fuse is None:
        return missing("FUSE request sizes and counts", absence_reason(meta, FUSE_REQUESTS[0])
                       + " (runs on a stack without FUSE have none)")
    return figure_div(figures.fig_fuse_requests(fuse), "fig-fuse")


def syscall_count_rows(tables: dict[str, pl.DataFrame]) -> dict[str, dict[Any, float]]:
    """Seed 000 Table 3's rows for one run: {row label: {column: value}}, columns being repetitions: calls per
    syscall, block IO requests (writes) and metadata/journal updates (block writes to those regions)."""
    rows: dict[str, dict[Any, float]] = {}
    _, counts = first_table(tables, SYSCALL_COUNTS)
    if counts is not None and {"syscall", "count"} <= set(counts.columns):
        by = ["syscall"] + (["rep"] if "rep" in counts.columns else [])
        agg = counts.group_by(by).agg(pl.col("count").sum()).sort(by)
        for r in agg.iter_rows(named=True):
            rows.setdefault(f"# of {r['syscall']}()", {})[r.get("rep", 0)] = r["count"]
    if "block_io" in tables:
        bio = tables["block_io"].filter(pl.col("op") == "write")
        region = figures.region_column(bio)
        for r in bio.group_by("rep").agg(pl.len().alias("n")).sort("rep").iter_rows(named=True):
            rows.setdefault("# of IO requests (block writes)", {})[r["rep"]] = r["n"]
        if region is not None:
            meta_rows = bio.filter(region.is_in(["metadata", "journal"])).group_by("rep").agg(pl.len().alias("n"))
            for rep in bio["rep"].unique().sort().to_list():
                n = meta_rows.filter(pl.col("rep") == rep)["n"]
                rows.setdefault("Metadata/journal updates", {})[rep] = int(n[0]) if len(n) else 0
    return rows


def _syscalls(meta, tables) -> str:
    rows = syscall_count_rows(tables)
    name, _ = first_table(tables, SYSCALL_COUNTS)
    out = []
    if name is None:
        out.append(missing("System call counts", absence_reason(meta, SYSCALL_COUNTS[0])
                           + "; the block rows of Table 3 are shown"))
    if not rows:
        return "".join(out) or missing("Table 3", "no syscall or block table")
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
    Section("characterisation", "IO characterisation", _characterisation),
    Section("latency", "Latency by layer", _latency),
    Section("access", "Block access pattern", _access_pattern),
    Section("throughput", "Throughput", _throughput),
    Section("sqlite", "SQLite transactions", _sqlite),
    Section("fuse", "FUSE requests", _fuse),
    Section("syscalls", "System calls (Table 3)", _syscalls),
    Section("run", "Run metadata", _metadata),
)


def status_banner(meta: dict[str, Any]) -> str:
    status = meta.get("status")
    if status == "complete":
        return ""
    if status == "failed":
        codes = [r.get("exit_code") for r in meta.get("repetitions", [])]
        return (f'<p class="banner failed"><b>This run FAILED:</b> the workload exited with status {esc(codes)}; '
                f'its figures describe a failed run.</p>')
    return ('<p class="banner"><b>This run is INCOMPLETE:</b> it was interrupted before all stages finished; '
            'figures cover only what was collected and analysed.</p>')


def render_report(meta: dict[str, Any], tables: dict[str, pl.DataFrame]) -> str:
    """The HTML page of a run, from run.json and the result tables that exist."""
    parts = [f"<h1>{esc(meta.get('stack', '?'))}: {esc(' '.join(meta.get('command', [])[:1]) or 'run')}</h1>",
             f"<p class='sub'>{esc(meta.get('id'))} · {esc(' '.join(meta.get('command', [])))}</p>",
             status_banner(meta)]
    for section in SECTIONS:
        try:
            content = section.render(meta, tables)
        except Exception as e:  # one broken figure must not take the whole report down; say which and why
            content = missing(section.title, f"it could not be drawn ({type(e).__name__}: {e})")
        parts.append(f'<section id="{section.anchor}"><h2>{esc(section.title)}</h2>{content}</section>')
    status = status_label([meta.get("status")])
    return page(f"mobiperf: {meta.get('id')}", [(s.anchor, s.title) for s in SECTIONS], "".join(parts), status)
