"""The who figures: where the IO time went by process, thread, file and layer (an icicle), and which threads waited
on it (a bar per thread, split by what it waited on). Pure functions of the result tables (io_by_owner, blocked)."""

from __future__ import annotations

import plotly.graph_objects as go
import polars as pl

from mobiperf.reports.figures import WATERFALL_LAYERS, _layout
from mobiperf.core.units import format_duration_ns, format_size

MAX_FILES = 40   # file nodes drawn; the rest folded into one node per process
OWNER_COLOR = "#cfd8dc"  # processes, threads and files; layers in their waterfall colours
WAIT_COLORS = {"block": "#6baed6", "journal": "#8c564b", "fs": "#2ca02c", "file": "#bcbd22", "fuse": "#ff7f0e",
               "call": "#9467bd", "unknown": "#bdbdbd"}


def fig_who_icicle(io_by_owner: pl.DataFrame, max_files: int = MAX_FILES) -> go.Figure:
    """IO time by process -> thread -> file -> layer (exclusive times: the layers of a file add up to it), the
    top max_files files by time, the rest folded into `(N more files)` under their process."""
    df = io_by_owner.with_columns(
        proc=pl.col("process").fill_null("?") + pl.when(pl.col("pid").is_not_null()).then(
            " (" + pl.col("pid").cast(pl.Utf8) + ")").otherwise(pl.lit("")),
        thr=pl.col("thread").fill_null("?") + " (" + pl.col("tid").cast(pl.Utf8) + ")",
        file=pl.col("path").fill_null("(no file)"))
    files = df.group_by("proc", "thr", "file").agg(pl.col("self_ns").sum()).sort("self_ns", descending=True)
    keep = files.head(max_files).select("proc", "thr", "file")
    kept = df.join(keep, on=["proc", "thr", "file"])
    rest = df.join(keep, on=["proc", "thr", "file"], how="anti")
    ids, labels, parents, values, hover = [], [], [], [], []

    def node(node_id: str, label: str, parent: str, value: int, extra: str = "") -> None:
        ids.append(node_id)
        labels.append(label)
        parents.append(parent)
        values.append(value)
        hover.append(f"{label}<br>{format_duration_ns(value)}{extra}")

    root = f"every process: {format_duration_ns(int(df['self_ns'].sum()))}"
    node(root, root, "", int(df["self_ns"].sum()))
    for (proc,), g in kept.group_by(["proc"], maintain_order=True):
        folded = rest.filter(pl.col("proc") == proc)
        node(proc, proc, root, int(g["self_ns"].sum() + folded["self_ns"].sum()))
        if folded.height:
            n = folded.select("thr", "file").unique().height
            node(f"{proc}/…", f"({n} more files)", proc, int(folded["self_ns"].sum()))
        for (thr,), t in g.group_by(["thr"], maintain_order=True):
            node(f"{proc}/{thr}", thr, proc, int(t["self_ns"].sum()))
            for (file,), f in t.group_by(["file"], maintain_order=True):
                fid = f"{proc}/{thr}/{file}"
                node(fid, file.rsplit("/", 1)[-1] or file, f"{proc}/{thr}", int(f["self_ns"].sum()),
                     f"<br>{file}<br>block {format_size(int(f['block_bytes'].sum()))}")
                for row in f.sort("self_ns", descending=True).iter_rows(named=True):
                    node(f"{fid}/{row['layer']}", row["layer"], fid, int(row["self_ns"]))
    for (proc,), g in rest.join(kept.select("proc").unique(), on="proc", how="anti").group_by(["proc"]):
        node(proc, proc, root, int(g["self_ns"].sum()), f"<br>{g.select('thr', 'file').unique().height} files, folded")
    fig = go.Figure(go.Icicle(ids=ids, labels=labels, parents=parents, values=values, branchvalues="total",
                              hovertext=hover, hoverinfo="text", maxdepth=4,
                              marker=dict(colors=_colors(ids, parents, labels)), tiling=dict(orientation="h")))
    return _layout(fig, "IO time by process, thread, file and layer (click a box to zoom; exclusive times)",
                   height=560, margin=dict(l=10, r=10, t=50, b=10))


def _colors(ids: list[str], parents: list[str], labels: list[str]) -> list[str]:
    """A colour per node: each process its own (its threads and files the same), layers in their waterfall
    colours."""
    layer = dict(WATERFALL_LAYERS)
    palette = ("#a6cee3", "#b2df8a", "#fdbf6f", "#cab2d6", "#fb9a99", "#ffff99", "#8dd3c7", "#bebada", "#fccde5",
               "#d9d9d9")
    of: dict[str, str] = {}
    out = []
    for node, parent, label in zip(ids, parents, labels):
        if not parent:
            of[node] = OWNER_COLOR
        elif parent not in of or of[parent] == OWNER_COLOR and parent == ids[0]:
            of[node] = palette[len([p for p in of if of[p] in palette and "/" not in p]) % len(palette)]
        else:
            of[node] = of[parent]
        out.append(layer.get(label, of[node]) if "/" in node and node.count("/") >= 3 else of[node])
    return out


def fig_blocked(blocked: pl.DataFrame, top: int = 15) -> go.Figure:
    """Time in uninterruptible sleep of the top threads, stacked by what they waited on; main and UI threads
    marked."""
    from mobiperf.analyzers.who import top_blocked

    per = blocked.group_by("process", "pid", "thread", "tid", "waited_on").agg(pl.col("blocked_ns").sum())
    order = top_blocked(blocked, top).filter(pl.col("tid").is_not_null())  # by IO wait, the workload's first
    label = {r["tid"]: f"{r['thread']} ({r['tid']})" + (f" ★{r['role']}" if r["role"] else "")
             for r in order.iter_rows(named=True)}
    names = [label[t] for t in order["tid"]]
    fig = go.Figure()
    causes = per.group_by("waited_on").agg(pl.col("blocked_ns").sum()).sort("blocked_ns", descending=True)
    for cause in causes["waited_on"]:
        rows = dict(per.filter(pl.col("waited_on") == cause).select("tid", "blocked_ns").iter_rows())
        base = "block" if cause.startswith("io:") else cause.split(":", 1)[0]
        fig.add_bar(name=cause, y=names, x=[rows.get(t, 0) / 1e6 for t in order["tid"]], orientation="h",
                    marker_color=WAIT_COLORS.get(base), hovertemplate=f"{cause}: %{{x:.2f}} ms<extra></extra>")
    return _layout(fig, "Time in uninterruptible sleep (D) by thread and what it waited on (the threads that "
                        "waited longest on IO)", barmode="stack",
                   height=max(300, 28 * len(names) + 120), xaxis_title="ms", yaxis=dict(autorange="reversed"))
