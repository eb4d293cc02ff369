"""Where the time moved: the differential IO profile of BASE against each NEW.

Each side's time profile (analyzers/time_profile.py: every instant of every call of the workload given to one span
of io_span's nest) is summed on one tree, layer -> call -> process -> thread -> file, with one value per
repetition at every node. Per node and side: the time per repetition (the mean over the repetitions, so that a
parent's figure is the sum of its children's and every level adds up to the total), the count and bytes of its
spans per repetition; per NEW: the difference NEW - BASE, its share of the total difference (the shares of a
node's children add up to the node's), and whether it is beyond noise.

Beyond noise uses compare's statistics (mobiperf.core.stats): the two-sided exact Mann-Whitney U test on the
node's per-repetition times, at compare's alpha, and compare's minimum effect on the change of the node's mean
(a node absent from BASE changes infinitely). A node is `undecided` when the repetitions are too few for any
test to reach alpha (fewer than 2, or 3 vs 3: mobiperf.core.stats.smallest_mwu_p), whatever its difference.
The nodes are tested all at once (stats.mann_whitney_rows: the same test and p-values, vectorized). With many
nodes some are beyond noise by chance (about alpha x their number, among nodes whose change passes the minimum
effect): the tree is for finding where to look, the verdict is compare's.

Movers: the same figures per (layer, call, process, file), threads summed: the list `compare` prints and its
JSON's `movers`, largest absolute difference first.

Background: the IO no call caused (io_background: a FUSE daemon's own flush thread, writeback, periodic commits)
is not the calls' time and stays out of the tree; it is compared apart, per (layer, call, process), its time the
sum of its spans' durations, so that work a change moved out of the calls (bFUSE's buffered pwrites) is seen.

A side without a time_profile result has no profile, and the reason is said: a run analysed before it existed
gets it from `mobiperf analyze` (its io_span is enough).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import polars as pl

from mobiperf.core import stats
from mobiperf.core.errors import MissingTableError, MobiperfError
from mobiperf.core.task_names import kernel_process_name

LEVELS = ("layer", "call", "process", "thread", "file")
MOVER_LEVELS = ("layer", "call", "process", "file")
BACKGROUND_LEVELS = ("layer", "call", "process")
TOTAL = "all calls"


class ProfileUnavailable(MobiperfError):
    """A side has no profile (a run without a time_profile result); the message says why and what to do."""


@dataclass
class SideProfile:
    """One side's time profile: the leaves with a sample index (0..samples-1: the usable repetitions of its runs,
    pooled), and its IO no call caused when every run has io_background."""

    label: str
    leaves: pl.DataFrame      # sample, layer, call, process, thread, file, time_ns, count, bytes
    samples: int
    background: pl.DataFrame | None = None   # sample, layer, call, process, time_ns, count, bytes: io_background


@dataclass
class Figures:
    """One side's sums at every node (rows) for every repetition (columns)."""

    time: np.ndarray
    count: np.ndarray
    bytes: np.ndarray

    @property
    def mean_time(self) -> np.ndarray:
        return self.time.mean(axis=1) if self.time.shape[1] else np.full(len(self.time), math.nan)

    @property
    def mean_count(self) -> np.ndarray:
        return self.count.mean(axis=1) if self.count.shape[1] else np.full(len(self.count), math.nan)

    @property
    def mean_bytes(self) -> np.ndarray:
        return self.bytes.mean(axis=1) if self.bytes.shape[1] else np.full(len(self.bytes), math.nan)


@dataclass
class Change:
    """One NEW against BASE at every node: difference, share of the total difference, test and verdict."""

    label: str
    figures: Figures
    diff_ns: np.ndarray
    share_of_diff: np.ndarray     # nan when the total did not change
    p_value: np.ndarray           # nan where no test was made (undecided, below the minimum effect, no time)
    verdict: list[str]            # stats.IMPROVEMENT (less time), REGRESSION (more), NOT_SIGNIFICANT, UNDECIDED

    def significant(self, i: int) -> bool | None:
        """True beyond noise, False within it, None undecided."""
        v = self.verdict[i]
        return None if v == stats.UNDECIDED else v in (stats.IMPROVEMENT, stats.REGRESSION)


@dataclass
class NodeTable:
    """Nodes (tuples of keys: a path from the root, or a mover's (layer, call, process, file)) with BASE's
    figures and each NEW's change, in the same order."""

    keys: list[tuple[str, ...]]
    base: Figures
    changes: list[Change]
    position: dict[tuple[str, ...], int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.position = self.position or {k: i for i, k in enumerate(self.keys)}


@dataclass
class ProfileDiff:
    """The differential profile: the tree (root first, then each level) and the movers, for each NEW."""

    base: SideProfile
    news: list[SideProfile]
    tree: NodeTable
    movers: NodeTable
    alpha: float
    min_effect: float
    background: NodeTable | None = None   # the IO no call caused, per (layer, call, process): apart from the tree

    def mover_order(self, k: int = 0) -> list[int]:
        """The movers of the k-th NEW, largest absolute difference first (nodes with no time on either side
        left out)."""
        ch = self.movers.changes[k]
        busy = (self.movers.base.mean_time > 0) | (ch.figures.mean_time > 0)
        order = np.argsort(-np.abs(ch.diff_ns), kind="stable")
        return [int(i) for i in order if busy[i]]


# --- loading ---

def load_side(group) -> SideProfile:
    """A side's leaves from its runs' time_profile, pooled over its runs (compare.runs.RunGroup)."""
    frames, background, offset = [], [], 0
    for run, meta in zip(group.runs, group.metas):
        reps = [r["index"] for r in meta.get("repetitions", []) if r.get("exit_code", 0) == 0]
        try:
            table = run.read_table("time_profile")
        except MissingTableError:
            why = ("`mobiperf analyze` makes it from the run's io_span" if run.has_table("io_span") else
                   "and no io_span to make one from: that needs the syscalls source, which `mobiperf run` takes by "
                   "default")
            raise ProfileUnavailable(f"{run.path} has no time_profile result ({why})") from None
        sample = {rep: offset + i for i, rep in enumerate(reps)}
        frames.append(_file_names(table.filter(pl.col("rep").is_in(reps)), meta).with_columns(
            sample=pl.col("rep").replace_strict(sample, return_dtype=pl.Int64)))
        background.append(_background(run, reps, sample))
        offset += len(reps)
    leaves = pl.concat(frames).select("sample", pl.col("layer"), pl.col("name").alias("call"), "process", "thread",
                                      "file", "time_ns", "count", "bytes")
    bg = pl.concat(background) if all(b is not None for b in background) else None
    return SideProfile(group.label, leaves, offset, bg)


def _background(run, reps: list[int], sample: dict[int, int]) -> pl.DataFrame | None:
    """A run's io_background (IO no call caused: its spans' count, bytes and summed time per task) as leaves."""
    try:
        bg = run.read_table("io_background")
    except MissingTableError:
        return None
    return bg.filter(pl.col("rep").is_in(reps)).select(
        sample=pl.col("rep").replace_strict(sample, return_dtype=pl.Int64), layer="layer", call="name",
        process=kernel_process_name(pl.col("comm").fill_null("?")), thread=pl.lit(""), file=pl.lit(""),
        time_ns="time_ns", count="count", bytes="bytes")


def _file_names(table: pl.DataFrame, meta: dict) -> pl.DataFrame:
    """`file`: the path relative to the workload's directory (each run's stack lives under a directory of its
    own, so absolute paths never line up), else the file type in parentheses."""
    prefixes = set()
    for rec in meta.get("repetitions", []):
        stack = rec.get("stack") or {}
        prefixes.add(stack.get("workdir"))
        for layer in stack.get("layers") or []:
            prefixes.update((layer.get("source"), layer.get("mountpoint")))
    path = pl.col("path").fill_null("")
    heads = sorted({re.escape(p.rstrip("/") + "/") for p in prefixes if p}, key=len, reverse=True)
    if heads:
        path = path.str.replace(f"^(?:{'|'.join(heads)})", "")
    return table.with_columns(file=pl.when(pl.col("path").fill_null("") != "").then(path).otherwise(
        "(" + pl.col("file_type").fill_null("unknown") + ")"))


def profile_groups(base, news, *, alpha: float = 0.05, min_effect: float = 0.05) -> ProfileDiff:
    """The differential profile of two run sets or more (compare.runs.RunGroup: BASE, then each NEW); raises
    ProfileUnavailable naming the run that has none."""
    return diff_profiles(load_side(base), [load_side(n) for n in news], alpha=alpha, min_effect=min_effect)


# --- the tree and its statistics ---

def diff_profiles(base: SideProfile, news: Sequence[SideProfile], *, alpha: float = 0.05,
                  min_effect: float = 0.05) -> ProfileDiff:
    """The differential profile of BASE against every NEW (module docstring)."""
    sides = [base, *news]
    tree = _node_table(sides, [LEVELS[:k] for k in range(len(LEVELS) + 1)], alpha, min_effect)
    movers = _node_table(sides, [MOVER_LEVELS], alpha, min_effect)
    background = None
    if all(s.background is not None for s in sides):
        background = _node_table([SideProfile(s.label, s.background, s.samples) for s in sides],
                                 [BACKGROUND_LEVELS], alpha, min_effect)
    return ProfileDiff(base, list(news), tree, movers, alpha, min_effect, background=background)


def _node_table(sides: list[SideProfile], groupings: list[tuple[str, ...]], alpha: float,
                min_effect: float) -> NodeTable:
    sums = [_sums(side.leaves, groupings) for side in sides]
    nodes = pl.concat([s.select("_depth", *LEVELS) for s in sums]).unique().sort("_depth", *LEVELS,
                                                                                    nulls_last=False)
    nodes = nodes.with_row_index("_node")
    keys = [_key(row) for row in nodes.iter_rows()]
    figures = [_figures(s.join(nodes, on=["_depth", *LEVELS], nulls_equal=True), len(keys), side.samples)
               for s, side in zip(sums, sides)]
    finest = np.array([len(k) == len(groupings[-1]) for k in keys])  # a partition of all the time
    changes = [_change(side.label, figures[0], fig, finest, alpha, min_effect)
               for side, fig in zip(sides[1:], figures[1:])]
    return NodeTable(keys, figures[0], changes)


def _key(row: tuple) -> tuple[str, ...]:
    """A node's key from its row (_node, _depth, the levels): the levels it is grouped by, in order."""
    return tuple(k for k in row[2:] if k is not None)


def _sums(leaves: pl.DataFrame, groupings: list[tuple[str, ...]]) -> pl.DataFrame:
    """Per node of every grouping (a tuple of level names; the others null) and sample: time, count, bytes."""
    frames = []
    for levels in groupings:
        g = leaves.group_by(*levels, "sample").agg(pl.col("time_ns").sum(), pl.col("count").sum(),
                                                    pl.col("bytes").sum())
        frames.append(g.with_columns(_depth=pl.lit(len(levels), pl.Int32),
                                     **{c: pl.lit(None, pl.Utf8) for c in LEVELS if c not in levels}))
    return pl.concat([f.select("_depth", *LEVELS, "sample", "time_ns", "count", "bytes") for f in frames])


def _figures(sums: pl.DataFrame, nodes: int, samples: int) -> Figures:
    node, sample = sums["_node"].to_numpy(), sums["sample"].to_numpy()
    arrays = []
    for column in ("time_ns", "count", "bytes"):
        a = np.zeros((nodes, samples))
        a[node, sample] = sums[column].to_numpy()
        arrays.append(a)
    return Figures(*arrays)


def _change(label: str, base: Figures, new: Figures, finest: np.ndarray, alpha: float, min_effect: float) -> Change:
    mb, mn = base.mean_time, new.mean_time
    diff = mn - mb
    total = float(diff[finest].sum())
    share = diff / total if total != 0 else np.full(len(diff), math.nan)
    p, verdict = node_tests(base.time, new.time, alpha=alpha, min_effect=min_effect)
    return Change(label, new, diff, share, p, verdict)


def node_tests(base: np.ndarray, new: np.ndarray, *, alpha: float, min_effect: float) -> tuple[np.ndarray, list]:
    """Per row (a node's values per repetition on each side): the Mann-Whitney p-value and the verdict (module
    docstring). Rows whose mean changes by less than the minimum effect are not tested."""
    n_b, n_n = base.shape[1], new.shape[1]
    rows = len(base)
    p = np.full(rows, math.nan)
    if n_b < 2 or n_n < 2 or stats.smallest_mwu_p(n_b, n_n) >= alpha:
        return p, [stats.UNDECIDED] * rows
    mb, mn = base.mean(axis=1), new.mean(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        change = np.where(mb > 0, (mn - mb) / mb, np.where(mn > 0, np.inf, 0.0))
    tested = np.flatnonzero(np.abs(change) >= min_effect)
    if len(tested):
        p[tested] = stats.mann_whitney_rows(base[tested], new[tested])
    verdict = [stats.NOT_SIGNIFICANT] * rows
    for i in tested:
        if p[i] < alpha:
            verdict[i] = stats.REGRESSION if mn[i] > mb[i] else stats.IMPROVEMENT
    return p, verdict
