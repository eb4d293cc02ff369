"""Properties of the layer model on real captures: the order of the input rows and an uncertain strace clock
offset (as the trace markers give it: tens of us) do not change which call caused what."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mobiperf.orchestration import pipeline
from mobiperf.analyzers.io_span import nest_calls
from mobiperf.core.runstore import RunDir

LAYERS = Path(__file__).resolve().parents[1] / "fixtures" / "layers"
INPUTS = ("syscall_io", "trace_marker", "task_role", "fuse_req", "fsync_event", "jbd2_commit")


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    cache = {}

    def get(name: str) -> dict[str, pl.DataFrame]:
        if name not in cache:
            dest = tmp_path_factory.mktemp("props") / name
            shutil.copytree(LAYERS / name, dest)
            for sub in ("tables", "results"):
                (dest / sub).mkdir(exist_ok=True)
            run = RunDir.open(dest)
            results = pipeline.analyze(run, reparse=True)
            cache[name] = {**{t: run.read_table(t) for t in INPUTS if run.has_table(t)},
                           "block_io": results["block_io"]}
        return cache[name]

    return get


def attribution(t: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """Which call (its name, thread and rank among the thread's calls of that name) caused each FUSE request and
    block request (by their rows in fuse_req and block_io)."""
    spans = nest_calls(t["syscall_io"], t.get("trace_marker"), t.get("task_role"), t.get("fuse_req"),
                       t.get("fsync_event"), t.get("jbd2_commit"), t["block_io"])
    calls = spans.filter(pl.col("layer") == "syscall").sort("ts").select(
        "rep", "call_id", pl.col("name").alias("call"), "tid").with_columns(k=pl.int_range(pl.len()).over("tid", "call"))
    caused = spans.filter(pl.col("layer").is_in(["fuse", "block"]) & pl.col("call_id").is_not_null()
                          & pl.col("is_primary")).select("rep", "call_id", "layer", "source_row")
    # what each source row is, whatever its position: a FUSE request's unique id, a block request's sector and times
    fuse = t["fuse_req"].with_row_index("source_row").select(
        pl.lit("fuse").alias("layer"), pl.col("source_row").cast(pl.Int64), pl.col("unique").cast(pl.Utf8).alias("what"))
    block = t["block_io"].with_row_index("source_row").select(
        pl.lit("block").alias("layer"), pl.col("source_row").cast(pl.Int64),
        pl.concat_str([pl.col(c).cast(pl.Utf8).fill_null("-") for c in ("sector", "size_bytes", "issue_ts",
                                                                         "complete_ts")], separator=":").alias("what"))
    return caused.join(pl.concat([fuse, block]), on=["layer", "source_row"]).join(calls, on=["rep", "call_id"]) \
        .select("layer", "what", "call", "tid", "k").sort("layer", "what")


def shuffled(df: pl.DataFrame, seed: int) -> pl.DataFrame:
    return df.sample(fraction=1.0, shuffle=True, seed=seed)


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), name=st.sampled_from(["fuse-fdatasync", "fuse-sqlite-delete", "bfuse-fsync"]))
def test_row_order_does_not_matter(tables, seed, name):
    t = tables(name)
    mixed = {k: shuffled(v, seed + i) for i, (k, v) in enumerate(t.items())}
    assert attribution(mixed).equals(attribution(t))


def strace_only(t: dict[str, pl.DataFrame], shift_ns: int, error_ns: int) -> dict[str, pl.DataFrame]:
    """The capture as if strace had timed the workload alone, its offset to the trace clock off by shift_ns and
    known only to within error_ns (the daemons' kernel events stay: they are the lower layers)."""
    calls = t["syscall_io"]
    strace = calls.filter(pl.col("source") == "strace").with_columns(
        ts=pl.col("ts") + shift_ns, clock_error_ns=pl.lit(error_ns, pl.Int64))
    daemons = calls.filter(pl.col("source") != "strace").join(
        t["task_role"].filter(pl.col("role") == "fuse_daemon").select("rep", "pid"), on=["rep", "pid"])
    return {**t, "syscall_io": pl.concat([strace, daemons])}


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shift_us=st.integers(-50, 50), name=st.sampled_from(["fuse-fdatasync-strace", "fuse-sqlite-delete"]))
def test_an_uncertain_strace_offset_does_not_move_the_attribution(tables, shift_us, name):
    t = tables(name)
    assert attribution(strace_only(t, shift_us * 1000 + 137, 50_000)).equals(attribution(strace_only(t, 0, 50_000)))


def test_strace_alone_agrees_with_the_kernel_timed_calls(tables):
    """The SQLite capture has both sources: strace's calls tied to their kernel twins are the reference."""
    t = tables("fuse-sqlite-delete")
    reference, alone = attribution(t), attribution(strace_only(t, 0, 50_000))
    both = reference.join(alone, on=["layer", "what"], how="full", suffix="_s")
    same = ((both["call"] == both["call_s"]) & (both["k"] == both["k_s"])).fill_null(False)
    assert len(reference) > 1000 and same.mean() > 0.99
