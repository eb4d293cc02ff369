"""Figures of where the time moved (mobiperf.compare.profile): the differential icicle of one NEW against BASE.

Each box is a node of the tree (layer, call, process, thread, file, top to bottom); its width is the larger of
the node's two times (per repetition), so what took time on either side is visible, its colour the signed
difference NEW - BASE (red: more time, blue: less, white: none), the same scale for every box. A click zooms into
a box. Boxes narrower than FOLD_SHARE of the whole are folded, per parent, into one box saying how many it holds
(their figures summed), so the picture stays readable and light with thousands of files.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from mobiperf.compare.profile import LEVELS, TOTAL, ProfileDiff
from mobiperf.compare.profile_format import COUNT_NOUNS, LAYER_NAMES, call_name, signed_ns
from mobiperf.core.units import format_duration_ns
from mobiperf.reports.figures import _layout

FOLD_SHARE = 0.004
SEP = "\x1f"   # between the parts of a box id: no name holds it
DIVERGING = [[0.0, "#2166ac"], [0.25, "#92c5de"], [0.5, "#f7f7f7"], [0.75, "#f4a582"], [1.0, "#b2182b"]]


@dataclass
class _Box:
    id: str
    parent: str
    label: str
    where: str           # the node's path, for the hover
    width: float
    base: float
    new: float
    diff: float
    count: str
    verdict: str


def fig_profile_icicle(diff: ProfileDiff, k: int = 0, title: str | None = None) -> go.Figure:
    """The icicle of the k-th NEW against BASE (module docstring)."""
    boxes = _boxes(diff, k)
    scale = max((abs(b.diff) for b in boxes if b.parent), default=0.0) or 1.0
    unit, name = next((u, n) for u, n in ((1e9, "s"), (1e6, "ms"), (1e3, "µs"), (1.0, "ns")) if scale >= u or u == 1)
    total = diff.tree.changes[k].diff_ns[0]
    fig = go.Figure(go.Icicle(
        ids=[b.id for b in boxes], parents=[b.parent for b in boxes], values=[b.width for b in boxes],
        branchvalues="total", sort=False, maxdepth=4, tiling=dict(orientation="v", pad=1),
        labels=[b.label for b in boxes],
        texttemplate="<b>%{label}</b><br>%{customdata[2]}",
        customdata=[[b.where, format_duration_ns(b.base), signed_ns(b.diff), format_duration_ns(b.new),
                     _share(b.diff, total), b.count, b.verdict] for b in boxes],
        hovertemplate="<b>%{customdata[0]}</b><br>BASE %{customdata[1]} → NEW %{customdata[3]} per repetition<br>"
                      "change %{customdata[2]} (%{customdata[4]} of the total change)<br>%{customdata[5]}<br>"
                      "%{customdata[6]}<extra></extra>",
        marker=dict(colors=[b.diff / unit for b in boxes], colorscale=DIVERGING, cmid=0, cmin=-scale / unit,
                    cmax=scale / unit, line=dict(color="#ffffff", width=1),
                    colorbar=dict(title=dict(text=f"NEW − BASE<br>{name} per rep", side="top"), thickness=14)),
        insidetextfont=dict(size=12), outsidetextfont=dict(size=12)))
    name = title or f"Where the time moved: {diff.news[k].label} against {diff.base.label}"
    # text that would be under 10 px is hidden, not shrunk: a small box says what it is on hover or zoom
    return _layout(fig, name, height=560, margin=dict(l=10, r=10, t=60, b=10),
                   uniformtext=dict(minsize=10, mode="hide"))


def _share(d: float, total: float) -> str:
    return "-" if total == 0 or not math.isfinite(total) else f"{100 * d / total:.0f}%"


def _boxes(diff: ProfileDiff, k: int) -> list[_Box]:
    """The tree's nodes as boxes, small ones folded per parent, each width the sum of its children's."""
    tree, ch = diff.tree, diff.tree.changes[k]
    base, new = tree.base.mean_time, ch.figures.mean_time
    width = np.maximum(base, new)
    children: dict[tuple, list[int]] = {}
    for i, key in enumerate(tree.keys[1:], start=1):
        children.setdefault(key[:-1], []).append(i)
    floor = FOLD_SHARE * width[0]
    out: list[_Box] = []

    def visit(i: int, box_id: str, parent: str) -> float:
        key = tree.keys[i]
        kids = sorted(children.get(key, []), key=lambda j: -width[j])
        big, small = [j for j in kids if width[j] >= floor], [j for j in kids if width[j] < floor]
        at = len(out)
        out.append(_node_box(diff, k, i, box_id, parent))
        if not kids:
            out[at].width = float(width[i])
            return out[at].width
        total = sum(visit(j, f"{box_id}{SEP}{tree.keys[j][-1]}", box_id) for j in big)
        if small:
            total += _fold(diff, k, small, box_id, out)
        out[at].width = total
        return total

    visit(0, TOTAL, "")
    return out


def _node_box(diff: ProfileDiff, k: int, i: int, box_id: str, parent: str) -> _Box:
    tree, ch = diff.tree, diff.tree.changes[k]
    key = tree.keys[i]
    label = TOTAL if not key else (LAYER_NAMES.get(key[0], key[0]) if len(key) == 1 else
                                   call_name(key[0], key[1]).split(" ", 1)[1] if len(key) == 2 else key[-1])
    where = " › ".join([LAYER_NAMES.get(key[0], key[0]), *key[1:]]) if key else TOTAL
    mark = {True: " *", False: "", None: " ?"}[ch.significant(i)]
    noun = COUNT_NOUNS.get(key[0], "spans") if key else "spans of every layer"
    counts = f"{tree.base.mean_count[i]:,.0f} → {ch.figures.mean_count[i]:,.0f} {noun} per repetition"
    verdict = {True: "beyond noise", False: "within noise", None: "undecided (too few repetitions)"}[
        ch.significant(i)] + ("" if math.isnan(ch.p_value[i]) else f" (p={ch.p_value[i]:.2g})")
    return _Box(box_id, parent, label + mark, where, 0.0, float(tree.base.mean_time[i]),
                float(ch.figures.mean_time[i]), float(ch.diff_ns[i]), counts, verdict)


def _fold(diff: ProfileDiff, k: int, rows: list[int], parent: str, out: list[_Box]) -> float:
    """One box for the small children of a node, their figures summed (widths: each child's larger side)."""
    tree, ch = diff.tree, diff.tree.changes[k]
    base = float(tree.base.mean_time[rows].sum())
    new = float(ch.figures.mean_time[rows].sum())
    width = float(np.maximum(tree.base.mean_time[rows], ch.figures.mean_time[rows]).sum())
    level = LEVELS[len(tree.keys[rows[0]]) - 1]
    out.append(_Box(f"{parent}{SEP}(+{len(rows)})", parent, f"{len(rows)} more", f"{len(rows)} smaller {level} nodes",
                    width, base, new, new - base, "", "folded: each under "
                    f"{100 * FOLD_SHARE:g}% of the whole"))
    return width
