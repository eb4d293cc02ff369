"""Where the time moved (mobiperf.compare.profile, profile_format, latency_shift) on synthetic runs whose answer is
known (tests/support/profile_synthetic.py): BASE and NEW differ in one node by a known amount, every repetition
scaled by 1 % noise, so that node (and the path above it) and only it is beyond noise, with its size and sign;
the node differences add up to the total difference at every level; the counts that explain a change are
beside it; too few repetitions are undecided; N NEW runs get a column each."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mobiperf.compare.latency_shift import compare_latency
from mobiperf.compare.profile import LEVELS, ProfileUnavailable, profile_groups
from mobiperf.compare.profile_format import background_json, movers_json, movers_text, profile_json
from mobiperf.compare.runs import load_group
from support.profile_synthetic import CallKind, make_profile_run

DAEMON, JBD2 = ("bfuse", 2000), ("jbd2/loop0-8", 77)


def workload(fuse_write_ns: int = 8000, write_requests: int = 1, device_ns: int = 20000) -> list[CallKind]:
    """1000 writes through FUSE to a daemon writing the file, 10 fsyncs waiting for a journal commit."""
    return [
        CallKind("write", 1000, {"syscall": 3000, "fuse": fuse_write_ns, "fs": 5000, "block": 1000,
                                 "device": device_ns}, names={"fuse": "FUSE_WRITE", "fs": "pwrite64"},
                 comm={"fs": DAEMON, "block": DAEMON, "device": DAEMON}),
        CallKind("fsync", 10, {"syscall": 3000, "fuse": 2000, "fs": 5000, "journal": 30000, "block": 1000,
                               "device": 50000}, names={"fuse": "FUSE_FSYNC", "journal": "jbd2_commit"},
                 comm={"fs": DAEMON, "journal": JBD2, "block": JBD2, "device": JBD2}),
    ]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("profile")
    return {
        "base": make_profile_run(d / "base", workload(), reps=5, seed=1),
        "slower_fuse": make_profile_run(d / "slower_fuse", workload(fuse_write_ns=12000), reps=5, seed=2),
        "faster_device": make_profile_run(d / "faster_device", workload(device_ns=14000), reps=5, seed=3),
        "base3": make_profile_run(d / "base3", workload(), reps=3, seed=4),
        "new3": make_profile_run(d / "new3", workload(fuse_write_ns=12000), reps=3, seed=5),
    }


def diff_of(runs, base: str, *news: str):
    return profile_groups(load_group(runs[base]), [load_group(runs[n]) for n in news])


CHANGED = ("fuse", "FUSE_WRITE", "mobibench", "mobibench #1", "test.dat")


def test_only_the_changed_node_and_the_path_above_it_are_beyond_noise_with_the_right_size(runs):
    d = diff_of(runs, "base", "slower_fuse")
    tree, ch = d.tree, d.tree.changes[0]
    beyond = {k for i, k in enumerate(tree.keys) if ch.significant(i)}
    assert beyond == {CHANGED[:n] for n in range(len(CHANGED) + 1)}
    leaf = tree.position[CHANGED]
    assert ch.diff_ns[leaf] == pytest.approx(1000 * 4000, rel=0.05)  # +4 us in each of 1000 calls
    assert ch.verdict[leaf] == "regression" and ch.p_value[leaf] == pytest.approx(2 / 252)
    assert ch.share_of_diff[leaf] == pytest.approx(1.0, abs=0.1)


def test_node_differences_add_up_to_their_parents_and_to_the_total(runs):
    d = diff_of(runs, "base", "slower_fuse", "faster_device")
    tree = d.tree
    for fig in [tree.base.time] + [c.figures.time for c in tree.changes]:
        for i, key in enumerate(tree.keys):
            kids = [j for j, k in enumerate(tree.keys) if len(k) == len(key) + 1 and k[:-1] == key]
            if kids:
                assert fig[kids].sum(axis=0) == pytest.approx(fig[i])
    for ch in tree.changes:
        for depth in range(1, len(LEVELS) + 1):
            at = [i for i, k in enumerate(tree.keys) if len(k) == depth]
            assert ch.diff_ns[at].sum() == pytest.approx(ch.diff_ns[0])
            assert np.nansum(ch.share_of_diff[at]) == pytest.approx(1.0)
        movers = d.movers.changes[tree.changes.index(ch)]
        assert movers.diff_ns.sum() == pytest.approx(ch.diff_ns[0])


def test_movers_json_has_exactly_the_named_fields_largest_first(runs):
    d = diff_of(runs, "base", "faster_device")
    movers = movers_json(d)
    assert set(movers[0]) == {"path", "base_ns", "new_ns", "diff_ns", "share_of_diff", "base_count", "new_count",
                              "significant"}
    assert movers[0]["path"] == ["device", "write", "bfuse", "test.dat"]
    assert movers[0]["diff_ns"] == pytest.approx(-1000 * 6000, rel=0.05) and movers[0]["significant"] is True
    assert movers[0]["base_count"] == movers[0]["new_count"] == 1000
    diffs = [abs(m["diff_ns"]) for m in movers]
    assert diffs == sorted(diffs, reverse=True)
    assert all(m["significant"] is False for m in movers[1:])
    json.dumps(profile_json(d))  # the whole tree is JSON


def test_the_text_names_the_mover_with_the_counts_that_explain_it(tmp_path):
    # 64 writes of 512 KiB: legacy FUSE sends each as 128 WRITE requests of 4 KiB (25 us of FUSE time each, and
    # 5 us of the daemon's pwrite), bFUSE as one of 512 KiB (195 us): 8,192 -> 64 requests, 204.8 - 12.48 =
    # 192.32 ms less FUSE time per repetition (-94 %), 40.96 - 0.32 = 40.64 ms less pwrite time
    write = {"syscall": 2000, "fuse": 25_000, "fs": 5000}
    legacy = [CallKind("write", 64, write, names={"fuse": "FUSE_WRITE", "fs": "pwrite64"}, fanout=("fuse", 128))]
    bfuse = [CallKind("write", 64, {**write, "fuse": 195_000}, names={"fuse": "FUSE_WRITE", "fs": "pwrite64"},
                      fanout=("fuse", 1))]
    d = profile_groups(load_group(make_profile_run(tmp_path / "legacy", legacy, reps=5, seed=6, noise=0)),
                       [load_group(make_profile_run(tmp_path / "bfuse", bfuse, reps=5, seed=7, noise=0))])
    lines = movers_text(d)
    assert lines[0].startswith("where the time moved: all calls ") and "beyond noise" in lines[0]
    assert lines[1].strip().startswith("FUSE WRITE: -192 ms (-94%), 8,192 -> 64 requests; fs pwrite64: -40.6 ms")
    row = next(line for line in lines[3:] if line.lstrip().startswith("FUSE WRITE"))
    assert "8,192 -> 64" in row and row.endswith("*")
    counts = {tuple(m["path"][:2]): (m["base_count"], m["new_count"]) for m in movers_json(d)}
    assert counts[("fuse", "FUSE_WRITE")] == (8192, 64) and counts[("syscall", "write")] == (64, 64)


def test_io_no_call_caused_is_compared_apart_from_the_calls(tmp_path):
    # bFUSE writes the file from its flush thread: 16 pwritev of 2 MiB that no call caused, where legacy FUSE
    # wrote inside the calls; the kernel's writeback is the same on both sides
    writeback = ("kernel", "kworker/u8:3", "block", "write", 64, 32 << 20, 90_000_000)
    legacy = make_profile_run(tmp_path / "legacy", workload(), reps=5, seed=1, background=[writeback])
    bfuse = make_profile_run(tmp_path / "bfuse", workload(), reps=5, seed=2, background=[
        ("fuse_daemon", "bfuse", "fs", "pwritev", 16, 32 << 20, 40_000_000),
        ("kernel", "kworker/u8:1", "block", "write", 64, 32 << 20, 90_000_000)])
    d = profile_groups(load_group(legacy), [load_group(bfuse)])
    bg = {tuple(b["path"]): b for b in background_json(d)}
    assert list(bg) == [("fs", "pwritev", "bfuse")]   # the kworker's name lost its numbers: the same node
    assert bg[("fs", "pwritev", "bfuse")]["new_count"] == 16 and bg[("fs", "pwritev", "bfuse")]["base_count"] == 0
    assert bg[("fs", "pwritev", "bfuse")]["diff_ns"] == 40_000_000 and bg[("fs", "pwritev", "bfuse")]["significant"]
    text = " ".join(line.strip() for line in movers_text(d))
    assert "IO no call caused (apart from the calls' time, per repetition): fs pwritev (bfuse): 0 -> 16 calls, " \
           "0 B -> 32 MiB, +40 ms of span time *" in text
    assert d.tree.changes[0].significant(0) is False   # the calls' time did not move beyond noise


def test_three_repetitions_a_side_are_undecided_whatever_the_difference(runs):
    d = diff_of(runs, "base3", "new3")
    ch = d.tree.changes[0]
    assert set(ch.verdict) == {"undecided"} and ch.significant(0) is None
    assert all(m["significant"] is None for m in movers_json(d))
    assert "undecided (too few repetitions)" in " ".join(line.strip() for line in movers_text(d)[:2])
    row = next(line for line in movers_text(d) if line.lstrip().startswith("FUSE WRITE  "))
    assert row.endswith("?")
    leaf = d.tree.position[CHANGED]
    assert ch.diff_ns[leaf] == pytest.approx(4_000_000, rel=0.05)  # the difference is still said


def test_every_new_run_gets_its_own_column(runs):
    d = diff_of(runs, "base", "slower_fuse", "faster_device")
    tops = [movers_json(d, k)[0]["path"][:2] for k in range(2)]
    assert tops == [["fuse", "FUSE_WRITE"], ["device", "write"]]
    root = profile_json(d)["tree"]
    assert [n["label"] for n in root["news"]] == [str(runs["slower_fuse"]), str(runs["faster_device"])]
    assert root["news"][0]["diff_ns"] > 0 > root["news"][1]["diff_ns"]
    assert len(root["base"]["ns_per_rep"]) == 5 and [c["name"] for c in root["children"]][0] == "device"


def test_a_run_without_time_profile_has_no_profile_and_says_why(runs, tmp_path):
    import shutil

    old = tmp_path / "old"   # analysed before time_profile existed
    shutil.copytree(runs["base"], old)
    (old / "results" / "time_profile.parquet").unlink()
    with pytest.raises(ProfileUnavailable, match=r"old has no time_profile result \(`mobiperf analyze` makes it "
                                                 r"from the run's io_span\)"):
        profile_groups(load_group(runs["base"]), [load_group(old)])
    (old / "results" / "io_span.parquet").unlink()
    with pytest.raises(ProfileUnavailable, match="and no io_span to make one from: that needs the syscalls source"):
        profile_groups(load_group(old), [load_group(runs["base"])])


def test_a_directory_of_runs_is_one_side_with_their_repetitions_pooled(runs, tmp_path):
    import shutil

    pooled = tmp_path / "pooled"
    pooled.mkdir()
    shutil.copytree(runs["base3"], pooled / "a")
    shutil.copytree(runs["base"], pooled / "b")
    d = profile_groups(load_group(pooled), [load_group(runs["slower_fuse"])])
    assert d.base.samples == 8 and d.tree.base.time.shape == (len(d.tree.keys), 8)


def test_latency_shift_of_the_changed_layer_is_its_known_size_with_a_ci_around_it(runs):
    lc = compare_latency(load_group(runs["base"]), [load_group(runs["slower_fuse"])])
    by = {(s.layer, s.op, s.quantile): s for s in lc.shifts[0]}
    fuse = by[("fuse", "FUSE_WRITE", "p50")]
    assert fuse.shift_ns == pytest.approx(4000, rel=0.15) and fuse.ci.low < 4000 * 1.15 and fuse.ci.high > 0
    assert fuse.result.verdict == "regression"
    assert by[("fs", "pwrite64", "p50")].result.verdict == "not significant"
    assert by[("syscall", "write", "p99")].shift_ns == pytest.approx(4000, rel=0.15)
