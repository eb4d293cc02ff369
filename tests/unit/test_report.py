"""The report page and its figures, without a browser: sections appear when their tables exist and say why when
they do not, incomplete and failed runs are labelled, figures carry the right numbers, big runs are thinned."""

import json
import shutil

import numpy as np
import polars as pl
import pytest

from mobiperf.orchestration import pipeline
from mobiperf.reports import figures
from mobiperf.reports.page import render_report, syscall_count_rows
from synthetic import make_synthetic_run
from mobiperf.core.runstore import RunDir

FIGURE_IDS = ("fig-characterisation-block", "fig-layer-breakdown", "fig-latency-cdf", "fig-waterfall", "fig-lba",
              "fig-throughput")


@pytest.fixture(scope="module")
def synthetic_run(tmp_path_factory):
    return make_synthetic_run(tmp_path_factory.mktemp("reports") / "syn", n_requests=3000, repetitions=3)


def _copy(run: RunDir, tmp_path) -> RunDir:
    dest = tmp_path / run.path.name
    shutil.copytree(run.path, dest)
    return RunDir(dest)


def _tables(run: RunDir) -> dict[str, pl.DataFrame]:
    from mobiperf.core.schema import RESULTS

    return {n: run.read_table(n) for n in RESULTS if run.has_table(n)}


def test_complete_report_has_every_block_figure_and_says_why_others_are_absent(synthetic_run):
    html = pipeline.report(synthetic_run).read_text()
    for fig_id in FIGURE_IDS:
        assert f'id="{fig_id}"' in html
    assert "[INCOMPLETE]" not in html and "run-status" not in html and "This run" not in html
    assert "<script src=" not in html and "<link " not in html  # offline: plotly.js is inlined
    # sections the run cannot fill are left out, one line each in the summary
    assert "<li>SQLite transactions: no sqlite_summary table" in html and 'id="sqlite"' not in html
    assert "<li>FUSE requests: no fuse_latency table" in html and 'id="fuse"' not in html
    # Table 3's block rows, one column per repetition, equal to the block_io counts.
    bio = synthetic_run.read_table("block_io")
    writes = bio.filter(pl.col("op") == "write").group_by("rep").len().sort("rep")["len"].to_list()
    assert "<th># of IO requests (block writes)</th>" in html
    for n in writes:
        assert f"<td class='num'>{n:,}</td>" in html


def test_missing_table_omits_its_section_and_names_the_reason(synthetic_run, tmp_path):
    run = _copy(synthetic_run, tmp_path)
    (run.path / "results" / "block_io.parquet").unlink()
    meta = run.read_meta()
    meta["analysis"]["skipped"] = {"block_io": "needs the block_rq table; enable block:block_rq_issue when collecting"}
    run.write_meta(meta)
    html = pipeline.report(run).read_text()
    assert 'id="fig-lba"' not in html and 'id="fig-waterfall"' not in html
    assert ("<li>Block access pattern: no block_io table: needs the block_rq table; enable block:block_rq_issue "
            "when collecting</li>") in html and 'id="access"' not in html
    assert 'id="fig-characterisation-block"' in html  # io_class is still there


def test_incomplete_run_is_labelled_in_title_banner_and_navigation(synthetic_run, tmp_path):
    run = _copy(synthetic_run, tmp_path)
    run.update_meta(status="incomplete")
    html = pipeline.report(run).read_text()
    assert "<title>[INCOMPLETE] mobiperf:" in html
    assert 'id="run-status">INCOMPLETE</span>' in html
    assert "This run is INCOMPLETE" in html


def test_failed_run_is_labelled(synthetic_run, tmp_path):
    run = _copy(synthetic_run, tmp_path)
    meta = run.read_meta()
    meta["status"] = "failed"
    meta["repetitions"][1]["exit_code"] = 1
    run.write_meta(meta)
    html = pipeline.report(run).read_text()
    assert "<title>[FAILED]" in html and "This run FAILED" in html and "exit status 0 (reps 0, 2); exit status 1 (rep 1)" in html


def test_report_of_a_run_without_any_result_table_still_renders():
    meta = {"id": "empty", "status": "incomplete", "stack": "ext4", "command": ["dd"], "repetitions": []}
    html = render_report(meta, {})
    assert "<li>IO characterisation: no io_class table" in html
    assert "[INCOMPLETE]" in html


def test_characterisation_bars_carry_the_counts_of_io_class(synthetic_run):
    io_class = synthetic_run.read_table("io_class")
    fig = figures.fig_io_characterisation(io_class, synthetic_run.read_table("block_io"))
    size_traces = [t for t in fig.data if t.legendgroup == "size_class"]
    writes = {t.name: int(t.text[1].replace(",", "") or 0) for t in size_traces}
    expected = dict(io_class.filter(pl.col("op") == "write").group_by("size_class").agg(pl.col("count").sum())
                    .iter_rows())
    assert writes == {k: v for k, v in expected.items() if k in writes}
    shares = [t.y[1] for t in size_traces]
    assert sum(shares) == pytest.approx(100)


def test_layer_breakdown_stacks_the_btt_phases_to_the_mean_q2c(synthetic_run):
    bio = synthetic_run.read_table("block_io")
    fig = figures.fig_layer_breakdown(bio)
    idx = next(i for i, x in enumerate(fig.data[0].x) if x.startswith(">256k (n="))
    stacked = sum(t.y[idx] for t in fig.data)
    mean_q2c = bio.filter((pl.col("op") == "write") & (pl.col("size_class") == ">256k"))["q2c_ns"].mean() / 1e3
    assert stacked == pytest.approx(mean_q2c, rel=1e-6)


def test_waterfall_offers_the_median_to_slowest_io(synthetic_run):
    fig = figures.fig_io_waterfall(synthetic_run.read_table("block_io"))
    labels = [b.label for b in fig.layout.updatemenus[0].buttons]
    assert [label.split()[0] for label in labels] == ["median", "p90", "p99", "slowest"]
    slowest = fig.data[3]
    assert sum(slowest.x) == pytest.approx(synthetic_run.read_table("block_io").filter(
        pl.col("op") == "write")["q2c_ns"].max() / 1e3)


def test_thinning_keeps_rare_requests_and_bounds_points():
    rng = np.random.default_rng(0)
    n = 1_000_000
    df = pl.DataFrame({"ts": np.sort(rng.integers(0, 10**10, n)), "sector": rng.integers(0, 2**21, n),
                       "region": ["data"] * n})
    df = df.with_columns(pl.when(pl.int_range(pl.len()) % 200_000 == 7).then(pl.lit("journal"))
                         .otherwise(pl.col("region")).alias("region"))
    thin = figures.thin_scatter(df, "ts", "sector", "region")
    assert len(thin) <= figures.MAX_SCATTER_POINTS
    assert thin.filter(pl.col("region") == "journal").height == 5


def test_cdf_keeps_the_exact_tail():
    values = np.arange(1, 100_001)
    xs, ys = figures._cdf_points(values)
    assert len(xs) <= figures.MAX_CDF_POINTS + 50
    assert xs[-1] == 100_000 and ys[-1] == 1.0
    assert xs[-2] == 99_999


def test_syscall_count_rows_use_the_syscall_table_when_present(synthetic_run):
    tables = _tables(synthetic_run)
    calls = ["pwrite64"] * 5 + ["fsync"] * 2 + ["pwrite64"] * 3
    tables["syscall_class"] = pl.DataFrame({"rep": [0] * 7 + [1] * 3, "syscall": calls, "comm": ["mobibench"] * 10})
    tables["fuse_latency"] = pl.DataFrame({"rep": [0, 1], "op": ["fuse_write", "fuse_write"], "count": [128, 9]})
    rows = syscall_count_rows(tables)
    assert rows["# of pwrite64()"] == {0: 5, 1: 3}
    assert rows["# of fsync()"] == {0: 2}
    assert rows["# of FUSE WRITE requests"] == {0: 128, 1: 9}
    assert set(rows["Metadata/journal updates"]) == {0, 1, 2}


def test_fuse_figure_counts_requests_and_sizes():
    # the message lengths carry the 80-byte header of a WRITE: the figure plots the data, in KiB
    fuse = pl.DataFrame({"opcode_name": ["WRITE"] * 6 + ["READ", "GETATTR"],
                         "len_bytes": [4176] * 4 + [524368] * 2 + [80, 40],
                         "data_bytes": [4096] * 4 + [524288] * 2 + [4096, 0]})
    fig = figures.fig_fuse_requests(fuse)
    counts = dict(zip(fig.data[0].x, fig.data[0].y))
    assert counts == {"WRITE": 6, "READ": 1, "GETATTR": 1}
    write = next(t for t in fig.data[1:] if t.name == "write")
    assert dict(zip(write.x, write.y)) == {"4": 4, "512": 2}
    read = next(t for t in fig.data[1:] if t.name == "read")
    assert dict(zip(read.x, read.y)) == {"4": 1}  # the data the reply carried, not the 80-byte request
    assert "KiB" in fig.layout.xaxis2.title.text


def test_report_is_json_free_of_nan(synthetic_run):
    # NaN in figure JSON is a console error in some browsers; figures must not emit it.
    html = pipeline.report(synthetic_run).read_text()
    assert "NaN" not in html.split("</script>", 1)[1]
    assert json.dumps  # keeps the import honest for readers


@pytest.fixture(scope="module")
def layer_tables(synthetic_run):
    from synthetic import synthetic_layer_tables

    return synthetic_layer_tables(synthetic_run.read_table("block_io"))


def test_waterfall_of_a_call_draws_its_nest_within_the_call(synthetic_run, layer_tables):
    fig = figures.fig_io_waterfall(synthetic_run.read_table("block_io"), layer_tables["waterfall"],
                                   layer_tables["io_span"])
    assert fig.layout.title.text == "Waterfall of a selected call, layer by layer"
    for trace in fig.data:
        call, *layers = zip(trace.y, trace.base, trace.x)
        assert call[0].startswith("syscall: ") and call[1] == 0
        assert [name.split(":")[0] for name, _, _ in layers] == ["fuse", "fs", "journal", "block", "device"]
        for _, base, width in layers:  # every span lies within the call
            assert base >= 0 and base + width <= call[2] + 1e-9


def test_layer_shares_add_up_to_100_percent(layer_tables):
    fig = figures.fig_layer_shares(layer_tables["layer_breakdown"])
    totals = [sum(t.y[i] for t in fig.data) for i in range(len(fig.data[0].x))]
    assert totals == pytest.approx([100.0] * len(totals))
    assert set(fig.data[0].x) == {"fdatasync (fdatasync)", "pwrite64 (o_sync)"}


def test_layer_breakdown_by_size_class_from_the_waterfall(synthetic_run, layer_tables):
    wf = layer_tables["waterfall"]
    fig = figures.fig_layer_breakdown(synthetic_run.read_table("block_io"), wf)
    assert [t.name for t in fig.data] == ["syscall", "fuse", "fs", "journal", "block", "device"]
    labels = list(fig.data[0].x)
    assert labels[-1].startswith("fdatasync (n=")  # calls without a size are grouped by name, after the sizes
    i = next(k for k, x in enumerate(labels) if x.startswith(">256k"))
    calls = wf.filter(pl.col("size_bytes") > 256 << 10)
    assert sum(t.y[i] for t in fig.data) == pytest.approx(calls["dur_ns"].mean() / 1e3)  # the layers add up


def test_every_section_renders_with_the_layer_tables(synthetic_run, layer_tables):
    meta = synthetic_run.read_meta()
    html = render_report(meta, {**_tables(synthetic_run), **layer_tables})
    for fig_id in ("fig-layer-shares", "fig-syscall-cdf", "fig-amplification", "fig-fuse", "fig-block-phases"):
        assert f'id="{fig_id}"' in html
    assert "is not shown" not in html.split("Run metadata")[0].replace(
        "FUSE request sizes", "")  # only the run-metadata notes may mention skipped analyzers
    assert "<th># of pwrite64()</th>" in html and "<th># of FUSE WRITE requests</th>" in html


def test_layer_throughput_follows_seed_004_definitions():
    calls = pl.DataFrame({"op": ["write", "write", "read"], "dur": [1_000_000, 1_000_000, 5],
                          "size_bytes": [1 << 20, 1 << 20, 10]})
    blocks = pl.DataFrame({"op": ["write"] * 3, "d2c_ns": [500_000] * 3, "size_bytes": [1 << 20, 1 << 20, 1 << 20]})
    got = dict(figures.layer_throughput(calls, blocks))
    assert got["application (syscall)"] == pytest.approx(1000.0)   # 2 MiB in 2 ms
    assert got["block, app IO"] == pytest.approx(2 / 1.5e-3)        # the app's 2 MiB over 1.5 ms of D2C
    assert got["block, pure"] == pytest.approx(3 / 1.5e-3)          # 3 MiB the device wrote: 1 MiB is the OS's


def test_report_says_what_it_aggregates(synthetic_run):
    html = pipeline.report(synthetic_run).read_text()
    meta = synthetic_run.read_meta()
    # Tiles: the median of the 3 repetitions, with their range; figures: pooled, said under their titles.
    times = sorted(r["workload_ns"] for r in meta["repetitions"])
    from mobiperf.core.units import format_duration_ns

    assert (f"median of 3; range {format_duration_ns(times[0])} – {format_duration_ns(times[-1])}"
            in html)
    assert "every request of all 3 repetitions, pooled" in html
    assert "requests_per_rep_median" in html and "requests_all_reps" in html
    # The access pattern shows one repetition and says which.
    assert "Block access pattern by region (repetition 0 of 3, " in html


def test_a_mean_of_one_request_does_not_set_the_scale(synthetic_run):
    bio = synthetic_run.read_table("block_io")
    writes = bio.filter(pl.col("op") == "write")
    typical = writes.filter(pl.col("size_class") == "<=4k")
    assert len(typical) >= figures.MIN_MEAN_N
    # One extra request of a size class of its own, 100 times slower than anything else.
    lone = typical.head(1).with_columns(size_class=pl.lit("64k-256k"), size_bytes=pl.lit(128 << 10),
                                        d2c_ns=pl.col("d2c_ns") * 0 + 10 * int(bio["q2c_ns"].max()),
                                        q2c_ns=pl.col("q2c_ns") * 0 + 10 * int(bio["q2c_ns"].max()))
    fig = figures.fig_layer_breakdown(pl.concat([bio, lone], how="vertical_relaxed"))
    labels = list(fig.data[0].x)
    lone_label = next(x for x in labels if x.startswith("64k-256k"))
    assert lone_label == "64k-256k (n=1: too few)"
    solid_max = max(sum(t.y[i] for t in fig.data) for i, x in enumerate(labels) if x != lone_label)
    assert fig.layout.yaxis.range[1] == pytest.approx(1.25 * solid_max)
    (note,) = fig.layout.annotations
    assert note.x == lone_label and "(n=1), off scale" in note.text
    assert all(t.marker.opacity[labels.index(lone_label)] == 0.35 for t in fig.data)
