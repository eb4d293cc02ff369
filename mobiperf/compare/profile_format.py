"""The differential profile for people and machines: the top movers as text (what `mobiperf compare` prints), and
as data (`compare --format json`: `movers`, each NEW's, and `profile`, the whole tree with one column per NEW).

A mover is named the way an engineer says it: the layer and the call (`FUSE WRITE`, `device write`,
`journal commit`), then who ran it and on which file; its change beside the counts that explain it
("FUSE WRITE: -412 ms (-81%), 131,072 -> 257 requests").
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from mobiperf.compare.profile import LEVELS, MOVER_LEVELS, TOTAL, NodeTable, ProfileDiff
from mobiperf.compare.text_layout import WIDTH, elide, wrap
from mobiperf.core import stats
from mobiperf.core.units import format_duration_ns

LAYER_NAMES = {"syscall": "syscall", "fuse": "FUSE", "fs": "fs", "journal": "journal", "block": "block",
               "device": "device"}
COUNT_NOUNS = {"syscall": "calls", "fuse": "requests", "fs": "calls", "journal": "commits", "block": "requests",
               "device": "requests"}
TEXT_MOVERS = 8
JSON_MOVERS = 200
MARKS = {True: "*", False: "", None: "?"}
NOISE_WORDS = {True: "beyond noise", False: "within noise", None: "undecided (too few repetitions)"}


def call_name(layer: str, call: str) -> str:
    """`FUSE WRITE`, `device write`, `journal commit`, `syscall fsync`."""
    short = call.removeprefix("FUSE_") if layer == "fuse" else ("commit" if call == "jbd2_commit" else call)
    return f"{LAYER_NAMES.get(layer, layer)} {short}"


def signed_ns(ns: float) -> str:
    return ("+" if ns > 0 else "-" if ns < 0 else "±") + format_duration_ns(abs(ns))


def _pct(diff: float, base: float) -> str:
    if base > 0:
        pct = 100 * diff / base
        return f"{pct:+.1f}%" if abs(pct) < 10 else f"{pct:+.0f}%"
    return "new" if diff > 0 else "±0%"


def _count(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 or value == int(value) else f"{value:,.1f}"


def mover_sentence(table: NodeTable, k: int, i: int) -> str:
    """`FUSE WRITE: -412 ms (-81%), 131,072 -> 257 requests` for mover i of the k-th NEW."""
    layer, call = table.keys[i][:2]
    ch = table.changes[k]
    base_t, base_c, new_c = table.base.mean_time[i], table.base.mean_count[i], ch.figures.mean_count[i]
    text = f"{call_name(layer, call)}: {signed_ns(ch.diff_ns[i])} ({_pct(ch.diff_ns[i], base_t)})"
    if base_c != new_c:
        text += f", {_count(base_c)} -> {_count(new_c)} {COUNT_NOUNS.get(layer, 'spans')}"
    return text


def movers_text(diff: ProfileDiff, k: int = 0, top: int = TEXT_MOVERS) -> list[str]:
    """The k-th NEW's top movers as lines of text: a sentence of the largest, then a table (module docstring)."""
    table, ch = diff.movers, diff.movers.changes[k]
    order = [i for i in diff.mover_order(k) if ch.diff_ns[i] != 0]
    n_b, n_n = diff.base.samples, diff.news[k].samples
    tree_total = diff.tree.changes[k]
    head = (f"where the time moved: all calls {format_duration_ns(diff.tree.base.mean_time[0])} -> "
            f"{format_duration_ns(tree_total.figures.mean_time[0])} per repetition (mean of {n_b} vs {n_n}), "
            f"{signed_ns(tree_total.diff_ns[0])} ({_pct(tree_total.diff_ns[0], diff.tree.base.mean_time[0])}), "
            f"{NOISE_WORDS[tree_total.significant(0)]}")
    if not order:
        return _wrap(head) + ["   no call, layer, process or file moved"]
    out = _wrap(head) + _wrap("   " + "; ".join(mover_sentence(table, k, i) for i in order[:3]))
    rows = [("mover", "process", "file", "base", "new", "change", "share", "count base -> new", "")]
    for i in order[:top]:
        layer, call, process, file = table.keys[i]
        share = ch.share_of_diff[i]
        rows.append((call_name(layer, call), process, file, format_duration_ns(table.base.mean_time[i]),
                     format_duration_ns(ch.figures.mean_time[i]),
                     f"{signed_ns(ch.diff_ns[i])} ({_pct(ch.diff_ns[i], table.base.mean_time[i])})",
                     "-" if math.isnan(share) else f"{100 * share:.0f}%",
                     f"{_count(table.base.mean_count[i])} -> {_count(ch.figures.mean_count[i])}",
                     MARKS[ch.significant(i)]))
    out += _aligned(rows)
    rest = len(order) - min(top, len(order))
    out += background_text(diff, k)
    out += _wrap(f"   share: of the total change; * beyond noise (Mann-Whitney U on the repetitions, alpha "
                 f"{diff.alpha:g}, minimum effect {100 * diff.min_effect:g}%), ? undecided (too few repetitions)"
                 + (f"; {rest} more in --format json (movers)" if rest else ""))
    return out


def _wrap(text: str) -> list[str]:
    return wrap(text, "     ")


def _aligned(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for col, room in ((2, 28), (1, 20), (0, 24)):  # file, process, then mover give way to fit WIDTH
        if 3 + sum(widths) + 2 * (len(widths) - 1) > WIDTH and widths[col] > room:
            rows = [tuple(elide(c, room) if j == col else c for j, c in enumerate(r)) for r in rows]
            widths[col] = room
    left = {0, 1, 2, 8}
    return [("   " + "  ".join(c.ljust(widths[j]) if j in left else c.rjust(widths[j]) for j, c in enumerate(r)))
            .rstrip() for r in rows]


def background_order(diff: ProfileDiff, k: int = 0) -> list[int]:
    """The background nodes of the k-th NEW whose count or time changed, largest time difference first."""
    bg = diff.background
    if bg is None:
        return []
    ch = bg.changes[k]
    moved = (bg.base.mean_count != ch.figures.mean_count) | (ch.diff_ns != 0)
    return [int(i) for i in np.argsort(-np.abs(ch.diff_ns), kind="stable") if moved[i]]


def background_text(diff: ProfileDiff, k: int = 0, top: int = 3) -> list[str]:
    """The IO no call caused that moved most, in one sentence (its time is its spans' summed durations)."""
    from mobiperf.core.units import format_size

    bg = diff.background
    order = background_order(diff, k)[:top]
    if not order:
        return []
    ch = bg.changes[k]
    parts = []
    for i in order:
        layer, call, process = bg.keys[i]
        size = (f"{format_size(bg.base.mean_bytes[i])} -> {format_size(ch.figures.mean_bytes[i])}, "
                if bg.base.mean_bytes[i] or ch.figures.mean_bytes[i] else "")
        parts.append(f"{call_name(layer, call)} ({process}): {_count(bg.base.mean_count[i])} -> "
                     f"{_count(ch.figures.mean_count[i])} {COUNT_NOUNS.get(layer, 'spans')}, {size}"
                     f"{signed_ns(ch.diff_ns[i])} of span time {MARKS[ch.significant(i)]}".rstrip())
    return _wrap("   IO no call caused (apart from the calls' time, per repetition): " + "; ".join(parts))


# --- as data ---

def _num(v: float) -> float | None:
    return None if v is None or not math.isfinite(v) else round(float(v), 3)


def movers_json(diff: ProfileDiff, k: int = 0, limit: int = JSON_MOVERS) -> list[dict]:
    """The k-th NEW's movers, largest absolute difference first: exactly the fields of issue 26."""
    table, ch = diff.movers, diff.movers.changes[k]
    return [{"path": list(table.keys[i]), "base_ns": _num(table.base.mean_time[i]),
             "new_ns": _num(ch.figures.mean_time[i]), "diff_ns": _num(ch.diff_ns[i]),
             "share_of_diff": _num(ch.share_of_diff[i]), "base_count": _num(table.base.mean_count[i]),
             "new_count": _num(ch.figures.mean_count[i]), "significant": ch.significant(i)}
            for i in diff.mover_order(k)[:limit]]


def background_json(diff: ProfileDiff, k: int = 0, limit: int = JSON_MOVERS) -> list[dict]:
    """The k-th NEW's IO no call caused, per (layer, call, process), largest time difference first."""
    bg = diff.background
    if bg is None:
        return []
    ch = bg.changes[k]
    return [{"path": list(bg.keys[i]), "base_ns": _num(bg.base.mean_time[i]), "new_ns": _num(ch.figures.mean_time[i]),
             "diff_ns": _num(ch.diff_ns[i]), "base_count": _num(bg.base.mean_count[i]),
             "new_count": _num(ch.figures.mean_count[i]), "base_bytes": _num(bg.base.mean_bytes[i]),
             "new_bytes": _num(ch.figures.mean_bytes[i]), "significant": ch.significant(i)}
            for i in background_order(diff, k)[:limit]]


def profile_json(diff: ProfileDiff) -> dict[str, Any]:
    """The whole tree: every node with BASE's figures and one column per NEW (module docstring of profile)."""
    tree = diff.tree
    children: dict[tuple[str, ...], list[int]] = {}
    for i, key in enumerate(tree.keys[1:], start=1):
        children.setdefault(key[:-1], []).append(i)
    size = np.maximum.reduce([tree.base.mean_time, *(c.figures.mean_time for c in tree.changes)])

    def node(i: int) -> dict[str, Any]:
        key = tree.keys[i]
        kids = sorted(children.get(key, []), key=lambda j: -size[j])
        return {"name": key[-1] if key else TOTAL, "level": LEVELS[len(key) - 1] if key else "total",
                "path": list(key), "base": _side(tree, None, i),
                "news": [_side(tree, k, i) for k in range(len(tree.changes))],
                "children": [node(j) for j in kids]}

    return {"unit": "ns per repetition (the mean over the repetitions); count and bytes the same way",
            "levels": list(LEVELS), "mover_levels": list(MOVER_LEVELS), "alpha": diff.alpha,
            "min_effect": diff.min_effect, "test": "Mann-Whitney U, two-sided, exact, on the per-repetition times",
            "base": {"label": diff.base.label, "repetitions": diff.base.samples},
            "news": [{"label": s.label, "repetitions": s.samples} for s in diff.news],
            "tree": node(0)}


def _side(tree: NodeTable, k: int | None, i: int) -> dict[str, Any]:
    fig = tree.base if k is None else tree.changes[k].figures
    out = {"ns": _num(fig.mean_time[i]), "ns_per_rep": [_num(v) for v in fig.time[i]],
           "count": _num(fig.mean_count[i]), "bytes": _num(fig.mean_bytes[i])}
    if k is not None:
        ch = tree.changes[k]
        out.update(label=ch.label, diff_ns=_num(ch.diff_ns[i]), share_of_diff=_num(ch.share_of_diff[i]),
                   p_value=_num(ch.p_value[i]), verdict=_verdict_word(ch.verdict[i]),
                   significant=ch.significant(i))
    return out


def _verdict_word(verdict: str) -> str:
    """A node's verdict in the words of time: less time, more time, not significant, undecided."""
    return {stats.IMPROVEMENT: "less time", stats.REGRESSION: "more time"}.get(verdict, verdict)
