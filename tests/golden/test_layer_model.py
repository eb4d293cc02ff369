"""The layer-by-layer model (analyzers/io_span.py, waterfall.py) on real captures whose true answer is known.

tests/fixtures/layers/ (capture.py there): 50 random 4 KiB writes into a pre-created 200 KiB file, each followed
by fdatasync, fsync or written O_SYNC, on ext4, ext4+fuse (syscalls events, and strace alone), ext4+bfuse and
xfs; 20 SQLite inserts in DELETE mode on ext4+fuse and WAL mode on ext4 (syscalls events and strace). The
generator pre-creates the file with one 200 KiB write and an fsync, so each run has 2 setup fsyncs beside its 50
synchronous writes. Known per synchronous write: its own 4 KiB data write is one block write of 4096 bytes that
it caused; on FUSE it sent the sync as a FUSE request; the layers nest and their exclusive times add up.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest

from mobiperf.orchestration import pipeline
from mobiperf.core.runstore import RunDir

LAYERS = Path(__file__).resolve().parents[1] / "fixtures" / "layers"
SELF = ["syscall_self_ns", "fuse_self_ns", "fs_self_ns", "journal_self_ns", "block_self_ns", "device_self_ns"]
# fixture -> (the per-write sync's call name, its sync mode, FUSE stack?)
PER_WRITE = {
    "ext4-fdatasync": ("fdatasync", "fdatasync", False),
    "fuse-fdatasync": ("fdatasync", "fdatasync", True),
    "fuse-fdatasync-strace": ("fdatasync", "fdatasync", True),
    "bfuse-fsync": ("fsync", "fsync", True),
    "xfs-fsync": ("fsync", "fsync", False),
    "fuse-osync": ("write", "o_sync", True),
}


def analyzed_copy(tmp_path_factory, name: str) -> tuple[RunDir, dict[str, pl.DataFrame]]:
    dest = tmp_path_factory.mktemp("layers") / name
    shutil.copytree(LAYERS / name, dest)
    for sub in ("tables", "results"):
        (dest / sub).mkdir(exist_ok=True)
    run = RunDir.open(dest)
    return run, pipeline.analyze(run, reparse=True)


@pytest.fixture(scope="module")
def analyzed(tmp_path_factory):
    cache: dict[str, tuple[RunDir, dict]] = {}

    def get(name: str):
        if name not in cache:
            cache[name] = analyzed_copy(tmp_path_factory, name)
        return cache[name]

    return get


@pytest.mark.parametrize("name", sorted(PER_WRITE))
def test_each_synchronous_write_is_charged_its_own_4k_data_write(name, analyzed):
    _, results = analyzed(name)
    call, mode, _ = PER_WRITE[name]
    wf = results["waterfall"].filter((pl.col("syscall") == call) & (pl.col("sync_mode") == mode))
    per_write = wf.filter(pl.col("size_bytes") == 4096) if call == "write" else wf
    # 50 per-write syncs (+ the 2 setup fsyncs of the pre-created file, which wrote 200 KiB)
    assert len(per_write) == (50 if call == "write" else 52 if mode == "fsync" else 50)
    own = per_write.filter(pl.col("data_bytes") == 4096)
    assert len(own) == 50, f"{name}: {len(own)} of the 50 synchronous writes were charged their 4 KiB data write"
    assert (own["block_requests"] >= 1).all() and (own["device_ns"] > 0).all()


@pytest.mark.parametrize("name", sorted(PER_WRITE) + ["fuse-sqlite-delete", "ext4-sqlite-wal"])
def test_layers_nest_and_exclusive_times_add_up(name, analyzed):
    _, results = analyzed(name)
    wf = results["waterfall"]
    assert wf.select((pl.sum_horizontal(SELF) == pl.col("dur_ns")).all()).item()
    assert (wf["fuse_ns"] <= wf["dur_ns"]).all()
    assert (wf.filter(pl.col("fuse_ns") > 0).select((pl.col("fs_ns") <= pl.col("fuse_ns")).all()).item())
    assert (wf.filter(pl.col("fs_ns") > 0).select((pl.col("block_ns") <= pl.col("fs_ns")).all()).item())
    assert (wf["device_ns"] <= wf["block_ns"]).all()
    shares = results["layer_breakdown"].group_by("rep", "syscall", "sync_mode").agg(pl.col("share").sum())
    assert ((shares["share"] - 1).abs() <= 0.01).all(), shares
    spans = results["io_span"]
    assert spans.filter(pl.col("parent_id").is_not_null()).join(
        spans.select(pl.col("span_id").alias("parent_id"), pl.col("ts").alias("p0"), pl.col("end_ts").alias("p1")),
        on="parent_id").select(((pl.col("ts") >= pl.col("p0")) & (pl.col("end_ts") <= pl.col("p1"))).all()).item()


@pytest.mark.parametrize("name", [n for n, (_, _, fuse) in PER_WRITE.items() if fuse])
def test_on_fuse_the_sync_goes_through_the_daemon_into_the_lower_fs(name, analyzed):
    _, results = analyzed(name)
    call, mode, _ = PER_WRITE[name]
    wf = results["waterfall"].filter((pl.col("syscall") == call) & (pl.col("sync_mode") == mode)
                                     & (pl.col("data_bytes") == 4096))
    assert (wf["fuse_requests"] >= 1).all()
    assert (wf["fs_ns"] > 0).mean() >= 0.95  # the lower file system's time under FUSE (fs_ns was always 0)
    # the FUSE request is most of such a call: the daemon's fdatasync and the device are inside it
    assert (wf["fuse_ns"] / wf["dur_ns"]).median() > 0.8
    lb = results["layer_breakdown"].filter((pl.col("syscall") == call) & (pl.col("sync_mode") == mode))
    inclusive = dict(lb.select("layer", pl.col("inclusive_ns") / pl.col("total_ns")).iter_rows())
    assert inclusive["fuse"] > 0.8 and inclusive["device"] > 0.1


def test_strace_alone_gives_the_same_answers_and_says_how_it_was_timed(analyzed):
    _, alone = analyzed("fuse-fdatasync-strace")
    sc = alone["syscall_class"]
    assert set(sc["timing"]) == {"strace"} and sc["clock_error_ns"].max() < 10_000  # clock readings: < 10 us
    wf = alone["waterfall"].filter(pl.col("syscall") == "fdatasync")
    assert (wf["fuse_requests"] == 1).all() and (wf["flushes"] == 1).all()


def test_fuse_data_bytes_leave_the_headers_out(analyzed):
    _, results = analyzed("fuse-fdatasync")
    amp = results["amplification"].filter((pl.col("layer") == "fuse") & (pl.col("op") == "write"))
    by_region = dict(amp.select("region", "bytes").iter_rows())
    fuse_writes = results["io_span"].filter((pl.col("layer") == "fuse") & (pl.col("name") == "FUSE_WRITE"))
    assert by_region["all"] == 200 * 1024 + 50 * 4096  # the pre-created file and the 50 writes: data only
    assert by_region["header"] == 80 * fuse_writes.height


@pytest.mark.parametrize("name, mode, syncs_per_txn", [("fuse-sqlite-delete", "delete", 4.0),
                                                        ("ext4-sqlite-wal", "wal", 1.1)])
def test_sqlite_transactions_are_the_inserts(name, mode, syncs_per_txn, analyzed):
    _, results = analyzed(name)
    summary = results["sqlite_summary"].row(0, named=True)
    assert summary["journal_mode"] == mode
    assert summary["transactions"] == 20  # 20 inserts; a WAL checkpoint is not a transaction of its own
    assert summary["fsync_per_txn"] == pytest.approx(syncs_per_txn, abs=0.01)


def test_no_sqlite_results_for_a_workload_without_sqlite(analyzed):
    run, results = analyzed("fuse-fdatasync")
    assert "sqlite_txn" not in results and "sqlite_summary" not in results
    assert "no SQLite" in run.read_meta()["analysis"]["skipped"]["sqlite_txn"]


def test_mobiperf_and_the_wrappers_are_not_the_workload(analyzed):
    _, results = analyzed("fuse-fdatasync-strace")
    bg = results["io_background"]
    mine = bg.filter(pl.col("scope") == "mobiperf")
    assert set(mine["name"]) <= {"FUSE_ACCESS", "FUSE_LOOKUP", "FUSE_GETATTR"}  # its child's chdir into the stack
    calls = results["waterfall"]
    assert not calls.filter(pl.col("path").str.contains("trace_marker|/tracing/")).height
    # the layout snapshot ran after tracing stopped: no dumpe2fs/debugfs/filefrag IO in the run
    assert not results["block_io"].filter(pl.col("comm").is_in(["dumpe2fs", "debugfs", "filefrag"])).height


@pytest.mark.usefixtures("clean_machine")
@pytest.mark.parametrize("stack", ["ext4+fuse", "ext4+bfuse"])
def test_a_fresh_run_by_default_answers_layer_by_layer(tmp_path, reference_binary, stack):
    """A run not in the repository, with the default sources: 100 fdatasyncs of 4 KiB on the emulated /sdcard
    (the legacy daemon, and bFUSE, which splices each request through a pipe of its thread's). Each is charged its
    own data write and its flush; the FUSE request holds nearly all of its time; the run's summary says so in one
    line; the layer under FUSE holds the daemon's calls into ext4, not its reads of /dev/fuse's pipes."""
    import subprocess
    import sys

    from conftest import is_root

    if not is_root() or not Path("/dev/fuse").exists():
        pytest.skip("needs root and /dev/fuse (loop devices, mounts, tracefs)")
    reference_binary("bfuse")
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "mobiperf", "run", "--stack", stack, "--no-report", "-o",
                           str(out), "--", "mobibench", "-p", ".", "-f", "400", "-r", "4", "-a", "1", "-y", "8", "-q",
                           "--no-drop-caches"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stdout.splitlines() if x.strip().startswith("fdatasync time by layer:"))
    assert "FUSE inclusive" in line and "device" in line
    wf = pl.read_parquet(out / "results" / "waterfall.parquet").filter(pl.col("syscall") == "fdatasync")
    assert len(wf) == 100
    assert (wf["data_bytes"] == 4096).sum() >= 95 and (wf["flushes"] >= 1).sum() >= 95
    assert (wf["fuse_ns"] / wf["dur_ns"]).median() > 0.8 and (wf["fs_ns"] > 0).all()
    # a write-only workload's nests hold no read in the layer under FUSE (bFUSE reads 2 pipes per request)
    spans = pl.read_parquet(out / "results" / "io_span.parquet")
    under = spans.filter((pl.col("layer") == "fs") & pl.col("call_id").is_not_null())
    assert {"fdatasync", "ext4_sync_file"} <= set(under["name"])
    assert not {"read", "readv", "splice"} & set(under["name"])
