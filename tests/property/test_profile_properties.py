"""Properties of where the time moved: on random nests, every instant of a call goes to exactly one span (a call's
self times add up to its duration, a layer's to waterfall's exclusive time); on random profiles, the node
differences add up to their parent's at every level and to the total, and the shares to 1; the profile of a real
capture's io_span gives the layer times waterfall gives."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mobiperf.analyzers.io_span import LAYERS as LAYER_NAMES
from mobiperf.analyzers.time_profile import profile_span_time
from mobiperf.analyzers.waterfall import build_waterfall
from mobiperf.compare.profile import LEVELS, SideProfile, diff_profiles
from mobiperf.core.runstore import RunDir
from mobiperf.core.schema import IO_SPAN
from mobiperf.orchestration import pipeline

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "layers"


@st.composite
def nests(draw) -> pl.DataFrame:
    """io_span of 1-4 calls, each a random tree: children inside their parent, of a deeper layer (or, once, the
    same layer, as a sync_file in the daemon's fsync), siblings free to overlap."""
    rows, next_id = [], 0
    for call in range(draw(st.integers(1, 4))):
        duration = draw(st.integers(1, 10_000))
        todo = [(next_id, None, 0, 0, duration, False)]
        next_id += 1
        while todo:
            span, parent, rank, t0, t1, nested_same = todo.pop()
            rows.append((span, parent, call, LAYER_NAMES[rank], f"op{rank}", t0, t1))
            if rank == len(LAYER_NAMES) - 1 or len(rows) > 40:
                continue
            for _ in range(draw(st.integers(0, 3))):
                a = draw(st.integers(t0, t1))
                b = draw(st.integers(a, t1))
                same = rank > 0 and not nested_same and draw(st.booleans()) and draw(st.booleans())
                child = rank if same else draw(st.integers(rank + 1, len(LAYER_NAMES) - 1))
                todo.append((next_id, span, child, a, b, same))
                next_id += 1
    df = pl.DataFrame(rows, schema=["span_id", "parent_id", "call_id", "layer", "name", "ts", "end_ts"], orient="row")
    return IO_SPAN.validate(df.with_columns(
        rep=pl.lit(0), tid=pl.lit(1), comm=pl.lit("app"), size_bytes=pl.lit(0), is_primary=pl.lit(True),
        **{c: pl.lit(None) for c in IO_SPAN.columns if c not in df.columns and c not in (
            "rep", "tid", "comm", "size_bytes", "is_primary")}))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nests())
def test_every_instant_of_a_call_goes_to_one_span_and_layers_equal_waterfalls(io_span):
    profile = profile_span_time(io_span)
    calls = io_span.filter(pl.col("layer") == "syscall")
    assert profile["time_ns"].sum() == pytest.approx((calls["end_ts"] - calls["ts"]).sum(), abs=len(profile))
    wf = build_waterfall(io_span)
    for layer in LAYER_NAMES:
        got = profile.filter(pl.col("layer") == layer)["time_ns"].sum()
        assert got == pytest.approx(wf[f"{layer}_self_ns"].sum(), abs=profile.height), layer


@st.composite
def profiles(draw) -> tuple[SideProfile, SideProfile]:
    names = {"layer": ["fuse", "fs", "device"], "call": ["WRITE", "pwrite64"], "process": ["app", "daemon"],
             "thread": ["t1", "t2"], "file": ["a", "b", "(unknown)"]}
    sides = []
    for label in ("base", "new"):
        samples = draw(st.integers(1, 6))
        n = draw(st.integers(1, 30))
        rows = [(draw(st.integers(0, samples - 1)), *(draw(st.sampled_from(names[lv])) for lv in LEVELS),
                 draw(st.integers(0, 10**9)), draw(st.integers(0, 100)), draw(st.integers(0, 10**6)))
                for _ in range(n)]
        leaves = pl.DataFrame(rows, schema=["sample", *LEVELS, "time_ns", "count", "bytes"], orient="row")
        sides.append(SideProfile(label, leaves, samples))
    return sides[0], sides[1]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(profiles())
def test_node_differences_add_up_to_their_parent_at_every_level(sides):
    base, new = sides
    d = diff_profiles(base, [new])
    tree, ch = d.tree, d.tree.changes[0]
    total = (new.leaves["time_ns"].sum() / new.samples) - (base.leaves["time_ns"].sum() / base.samples)
    assert ch.diff_ns[0] == pytest.approx(total, rel=1e-9, abs=1e-3)
    for depth in range(1, len(LEVELS) + 1):
        at = [i for i, k in enumerate(tree.keys) if len(k) == depth]
        assert ch.diff_ns[at].sum() == pytest.approx(total, rel=1e-9, abs=1e-3)
        if total != 0:
            assert np.nansum(ch.share_of_diff[at]) == pytest.approx(1.0, rel=1e-6)
    assert d.movers.changes[0].diff_ns.sum() == pytest.approx(total, rel=1e-9, abs=1e-3)


@pytest.mark.parametrize("name", ["fuse-fdatasync", "bfuse-fsync", "xfs-fsync", "fuse-sqlite-delete"])
def test_a_real_captures_profile_gives_waterfalls_layer_times(name, tmp_path):
    dest = tmp_path / name
    shutil.copytree(FIXTURES / name, dest)
    for sub in ("tables", "results"):
        (dest / sub).mkdir(exist_ok=True)
    results = pipeline.analyze(RunDir.open(dest), reparse=True)
    profile, wf = results["time_profile"], results["waterfall"]
    for layer in LAYER_NAMES:
        assert profile.filter(pl.col("layer") == layer)["time_ns"].sum() == pytest.approx(
            wf[f"{layer}_self_ns"].sum(), abs=profile.height), layer
    assert profile["time_ns"].sum() == pytest.approx(wf["dur_ns"].sum(), abs=profile.height)
