"""f2fs on the virtual phone (Debian's 6.1 kernel, /data on f2fs over a virtio disk), from captures re-parsed and
re-analysed offline (tests/fixtures/f2fs/, capture.py there; provenance in tests/fixtures/README.md): every block
request in one of f2fs's regions, and each call's nest as f2fs's design says (tests/support/f2fs_checks.py has
the design and the counts):

  append-fdatasync     100 appending 4 KiB writes + fdatasync each: 100 data writes, one per call; 99 node writes,
                       one per call; the first call's checkpoint (its new file's directory entry) with the node
                       and checkpoint-pack writes nested under it; a flush per call
  overwrite-fdatasync  100 4 KiB overwrites of a 400 KiB file + fdatasync each: in-place data writes, each in
                       its own block of the file (where the generator's first fsync wrote it), no node write, a
                       flush per call
  sync-checkpoint      a buffered write, then sync(2): the checkpoints it waited for, their checkpoint-area writes
                       and their commit blocks' flushes under them
"""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest

from f2fs_checks import check_appending_fdatasyncs, check_overwriting_fdatasyncs, check_sync_checkpoint
from mobiperf.analyzers.f2fs_region import classify_f2fs_regions
from mobiperf.core.runstore import RunDir
from mobiperf.orchestration import pipeline

F2FS = Path(__file__).resolve().parents[1] / "fixtures" / "f2fs"
NAMES = ("append-fdatasync", "overwrite-fdatasync", "sync-checkpoint")


@pytest.fixture(scope="module")
def analyzed(tmp_path_factory):
    cache: dict[str, tuple[RunDir, dict[str, pl.DataFrame]]] = {}

    def get(name: str):
        if name not in cache:
            dest = tmp_path_factory.mktemp("f2fs") / name
            shutil.copytree(F2FS / name, dest)
            for sub in ("tables", "results"):
                (dest / sub).mkdir(exist_ok=True)
            run = RunDir.open(dest)
            cache[name] = run, pipeline.analyze(run, reparse=True)
        return cache[name]

    return get


def test_captured_on_the_6_1_guest_with_f2fs_data(analyzed):
    for name in NAMES:
        run, _ = analyzed(name)
        meta = run.read_meta()
        assert meta["target"]["kernel"].startswith("6.1."), meta["target"]["kernel"]
        assert meta["stack"].startswith("dir:/data/")
        assert set(meta["target"]["events"]["f2fs"]) >= {"f2fs_submit_write_bio", "f2fs_write_checkpoint"}


def test_appending_fdatasyncs_write_data_node_and_a_flush_each(analyzed):
    run, results = analyzed("append-fdatasync")
    check_appending_fdatasyncs(results["io_span"], run.read_table("fsync_event"))


def test_overwriting_fdatasyncs_update_in_place_without_node_writes(analyzed):
    run, results = analyzed("overwrite-fdatasync")
    check_overwriting_fdatasyncs(results["io_span"], run.read_table("file_extent"))


def test_sync_waits_for_a_checkpoint_that_writes_the_checkpoint_area(analyzed):
    _, results = analyzed("sync-checkpoint")
    check_sync_checkpoint(results["io_span"])


@pytest.mark.parametrize("name", NAMES)
def test_every_request_in_one_region_and_the_two_sources_agree(name, analyzed):
    """Every write of the device has an f2fs region; in the main area the bio's type and the snapshot (SSA and
    the checkpoint's current segments) say the same kind for the requests both know."""
    run, results = analyzed(name)
    io = results["block_io"]
    writes = io.filter(pl.col("op") == "write")
    assert writes["region"].is_in(["superblock", "checkpoint", "sit", "nat", "ssa", "node", "data"]).all(), \
        writes.group_by("region").len()
    assert io.filter(pl.col("op") == "flush")["region"].eq("none").all()
    rq = run.read_table("block_rq").filter(pl.col("op") == "write")
    kinds = pl.DataFrame({"bio": classify_f2fs_regions(rq, None, run.read_table("f2fs_bio")),
                          "layout": classify_f2fs_regions(rq, run.read_table("file_extent"), None)})
    main = kinds.filter(pl.col("layout").is_in(["node", "data", "main"]))   # the layout's main area
    both = main.filter(pl.col("bio").is_in(["node", "data"]) & pl.col("layout").is_in(["node", "data"]))
    assert main.height and both.height >= 0.9 * main.height, main.group_by("bio", "layout").len()
    assert (both["bio"] == both["layout"]).all(), both.group_by("bio", "layout").len()
    # outside it, the layout places f2fs's META writes the bio type alone cannot
    assert kinds.filter(~pl.col("layout").is_in(["node", "data", "main"]))["layout"].is_in(
        ["checkpoint", "sit", "nat", "ssa"]).all()


def test_layer_shares_add_up_and_the_checkpoint_is_the_journal_layer(analyzed):
    _, results = analyzed("append-fdatasync")
    shares = results["layer_breakdown"].group_by("syscall").agg(pl.col("share").sum())
    assert ((shares["share"] - 1).abs() <= 0.01).all(), shares
    wf = results["waterfall"].filter(pl.col("syscall") == "fdatasync").sort("ts")
    assert wf["journal_ns"][0] > 0 and (wf["journal_ns"].slice(1) == 0).all()
    # the checkpoint pack's bytes count as the journal's, node blocks as metadata (analyzers/f2fs_region.py)
    assert wf["journal_bytes"][0] >= 8192 and (wf["metadata_bytes"].slice(1) == 4096).all()
