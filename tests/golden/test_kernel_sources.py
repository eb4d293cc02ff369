"""Each layer's sources against each other on one real run, and the FUSE and call layers of kernels whose events
differ (tests/fixtures/kernels/, capture.py there says how each was taken).

The workload of every fixture is known: 4 KiB writes, each followed by fdatasync, through a FUSE daemon (bFUSE,
or Debian's bindfs where the daemon is not mobiperf's): per write one FUSE_WRITE of 4096 bytes, per fdatasync one
FUSE_FSYNC, answered by the daemon's own pwrite/fdatasync into the lower file system.
"""

from __future__ import annotations

import shutil
import tarfile
from pathlib import Path

import polars as pl
import pytest

from mobiperf.analyzers.io_span import nest_calls
from mobiperf.analyzers.waterfall import build_waterfall
from mobiperf.collectors.parse import derive_tables, parse_raw_dir
from mobiperf.collectors.parse.fuse_dev_calls import wakings
from mobiperf.collectors.parse.fuse_layer import daemon_log_requests
from mobiperf.collectors.parse.raw_syscalls import raw_syscall_io
from mobiperf.core.runstore import RunDir
from mobiperf.orchestration import pipeline

KERNELS = Path(__file__).resolve().parents[1] / "fixtures" / "kernels"
SELF = ["syscall_self_ns", "fuse_self_ns", "fs_self_ns", "journal_self_ns", "block_self_ns", "device_self_ns"]


@pytest.fixture(scope="module")
def fixture_dir(tmp_path_factory):
    """A fixture's run directory: as committed, or unpacked from NAME.tar.xz (the 6.12 run, 6 MB of text)."""
    unpacked = {}

    def get(name: str) -> Path:
        if (KERNELS / name).is_dir():
            return KERNELS / name
        if name not in unpacked:
            dest = tmp_path_factory.mktemp("unpacked")
            with tarfile.open(KERNELS / f"{name}.tar.xz") as tar:
                tar.extractall(dest, filter="data")
            unpacked[name] = dest / name
        return unpacked[name]
    return get


@pytest.fixture(scope="module")
def parsed(fixture_dir):
    cache = {}

    def get(name: str):
        if name not in cache:
            raw = fixture_dir(name) / "raw" / "rep0"
            p = parse_raw_dir(raw, 0)
            derived, summary = derive_tables(p.tables, {0: p.summary})
            cache[name] = ({**p.tables, **derived}, summary, p)
        return cache[name]
    return get


def _fuse_share(tables: dict, fuse_req: pl.DataFrame) -> pl.DataFrame:
    """Per call of the workload: its FUSE inclusive time over its duration, with this FUSE layer."""
    spans = nest_calls(tables["syscall_io"], tables.get("trace_marker"), tables.get("task_role"), fuse_req)
    return build_waterfall(spans).select("call_id", "syscall", "dur_ns", "fuse_ns",
                                         (pl.col("fuse_ns") / pl.col("dur_ns")).alias("share"))


def _compare_shares(tables: dict, a: pl.DataFrame, b: pl.DataFrame) -> pl.DataFrame:
    both = _fuse_share(tables, a).join(_fuse_share(tables, b), on="call_id", suffix="_b")
    return both.with_columns(diff=(pl.col("share") - pl.col("share_b")).abs())


def test_host_fuse_events_and_the_daemons_log_pair_the_same_requests(parsed):
    tables, summary, _ = parsed("host618-bfuse")
    events = tables["fuse_req"]
    assert set(events["source"]) == {"fuse_events"} and events["end_ts"].is_not_null().all()
    log = daemon_log_requests(tables["fuse_daemon_req"], None, wakings(tables.get("sched_wakeup"), 0), tables["syscall_io"])
    logged = log.join(events.select("unique", pl.col("send_ts").alias("ev_send"), pl.col("end_ts").alias("ev_end"),
                                    pl.col("opcode").alias("ev_op"), pl.col("pid").alias("ev_pid"),
                                    pl.col("daemon_tid").alias("ev_daemon")), on="unique")
    # every request the events saw is in the log, with the same opcode, requester and replying thread
    assert logged.height == events.height >= 200   # 100 writes, 100 fdatasyncs, the file's create/flush/release
    assert (logged["opcode"] == logged["ev_op"]).all() and (logged["daemon_tid"] == logged["ev_daemon"]).all()
    assert logged.filter(pl.col("pid").is_not_null()).select((pl.col("pid") == pl.col("ev_pid")).all()).item()
    # and the log's times lie inside the kernel's: the daemon reads after the send, answers before the end
    daemon = tables["fuse_daemon_req"].join(events.select("unique", "send_ts", "end_ts"), on="unique")
    assert (daemon["read_ts"] >= daemon["send_ts"]).all() and (daemon["reply_ts"] <= daemon["end_ts"]).all()
    # the log holds nothing more inside the traced window
    window = tables["fuse_daemon_req"].filter(pl.col("read_ts").is_between(events["send_ts"].min(),
                                                                          events["end_ts"].max()))
    assert window.height == events.height


def test_host_fuse_inclusive_per_call_is_the_same_from_either_source(parsed):
    """Tolerance: a fdatasync is a few ms, its FUSE time the same to 10 points from either source; a 4 KiB write
    is tens of us, and what the log cannot see (the kernel's queueing before the daemon's read when no wake-up
    says when it was sent, and the reply's way back after the daemon's write began) may be 20 points of it."""
    tables, _, _ = parsed("host618-bfuse")
    log = daemon_log_requests(tables["fuse_daemon_req"], None, wakings(tables.get("sched_wakeup"), 0), tables["syscall_io"])
    shares = _compare_shares(tables, tables["fuse_req"], log)
    syncs, writes = shares.filter(pl.col("syscall") == "fdatasync"), shares.filter(pl.col("syscall") == "write")
    assert syncs.height == 100 and writes.height >= 100
    assert syncs["diff"].max() <= 0.10, syncs.sort("diff").tail(3)
    assert writes["diff"].median() <= 0.10 and (writes["diff"] <= 0.20).mean() >= 0.95


def test_host_raw_syscalls_and_the_syscalls_events_make_the_same_calls(parsed):
    tables, _, p = parsed("host618-bfuse")
    assert p.summary["raw_syscalls_decoded"]["abi"] == "x86_64" and p.summary["raw_syscalls_decoded"]["used"] is False
    events = tables["syscall_io"]
    raw, bad = raw_syscall_io(tables["raw_syscall_event"], "x86_64", 0)
    assert bad == {} and set(raw["source"]) == {"raw_syscalls"}
    # the two instances start at the workload's exec (the outer one also saw the inner wrapper's set-up)
    t0 = events.filter((pl.col("syscall") == "execve") & (pl.col("ret") == 0))["ts"].max()
    cols = ["syscall", "fd", "request_bytes", "offset_bytes", "ret", "errno", "open_flags"]

    def numbered(df):
        return df.filter(pl.col("ts") >= t0 - 5_000).sort("pid", "ts").with_columns(
            k=pl.int_range(pl.len()).over("pid"))
    a, b = numbered(events), numbered(raw)
    assert a.height == b.height >= 1000
    both = a.join(b, on=["pid", "k"], suffix="_raw")
    assert both.height == a.height
    for c in cols:
        assert (both[c] == both[f"{c}_raw"]).all(), both.filter(both[c] != both[f"{c}_raw"]).head()
    assert set(a["syscall"]) >= {"pwritev", "fdatasync", "openat", "write", "splice"}
    # each event is recorded by each instance on its own: the stamps differ by a moment, not a call
    assert (both["ts"] - both["ts_raw"]).abs().median() <= 2_000
    assert (both["ts"] - both["ts_raw"]).abs().max() <= 200_000


def test_host_bindfs_calls_on_dev_fuse_and_the_fuse_events_pair_the_same_requests(parsed):
    tables, summary, _ = parsed("host618-bindfs")
    events = tables["fuse_req"]
    assert set(events["source"]) == {"fuse_events"}
    no_events = {k: v for k, v in tables.items() if k not in ("fuse_event", "fuse_req")}
    derived, s = derive_tables(no_events, {})
    calls = derived["fuse_req"]
    assert set(calls["source"]) == {"dev_fuse_calls"} and s["fuse_pairing"]["source"] == "dev_fuse_calls"
    # the kernel's end of each request runs inside the daemon's reply: the same thread, during that write
    replies = tables["syscall_io"].filter(pl.col("syscall") == "writev").select(
        pl.col("pid").alias("daemon_tid"), pl.col("ts").alias("reply_ts"), (pl.col("ts") + pl.col("dur")).alias("w1"))
    ev = events.sort("end_ts").join_asof(replies.sort("reply_ts"), left_on="end_ts", right_on="reply_ts",
                                         by="daemon_tid", strategy="backward", check_sortedness=False)
    ev = ev.filter(pl.col("end_ts") <= pl.col("w1"))
    matched = ev.join(calls.select(pl.col("end_ts").alias("reply_ts"), "daemon_tid", pl.col("pid").alias("dev_pid"),
                                   pl.col("opcode_name").alias("dev_name"), "data_bytes"),
                      on=["reply_ts", "daemon_tid"], suffix="_dev")
    assert matched.height >= 0.97 * events.height
    tied = matched.filter(pl.col("dev_pid").is_not_null())
    assert tied.height >= 0.97 * matched.height and (tied["dev_pid"] == tied["pid"]).all()
    writes = matched.filter(pl.col("opcode_name") == "FUSE_WRITE")
    assert writes.height == 200 and (writes["dev_name"] == "FUSE_WRITE").all() and (writes["data_bytes"] == 4096).all()
    syncs = _compare_shares(tables, events, calls).filter(pl.col("syscall") == "fdatasync")
    assert syncs.height == 100 and (syncs["diff"] <= 0.10).mean() >= 0.95


# --- kernels whose FUSE events differ: Debian's 6.12 (sends without ids) and 6.1 (none at all) ---

@pytest.fixture(scope="module")
def analyzed(tmp_path_factory, fixture_dir):
    cache = {}

    def get(name: str):
        if name not in cache:
            dest = tmp_path_factory.mktemp("kernels") / name
            shutil.copytree(fixture_dir(name), dest)
            for sub in ("tables", "results"):
                (dest / sub).mkdir(exist_ok=True)
            run = RunDir.open(dest)
            cache[name] = (run, pipeline.analyze(run, reparse=True))
        return cache[name]
    return get


def _assert_layers_nest(results: dict, writes: int, tied: float = 1.0) -> pl.DataFrame:
    """Per call: FUSE inclusive <= the call, the lower fs <= FUSE, block <= fs, device <= block; the exclusive
    times add up to the call; each call type's shares add up to 1; each fdatasync charged its 4 KiB data write.
    tied: the share of fdatasyncs whose FUSE request must be tied to them (a request of the daemon's /dev/fuse calls
    whose reply woke no traced thread stays untied: its call keeps the time as its own)."""
    wf = results["waterfall"]
    assert wf.select((pl.sum_horizontal(SELF) == pl.col("dur_ns")).all()).item()
    assert (wf["fuse_ns"] <= wf["dur_ns"]).all()
    assert wf.filter(pl.col("fuse_ns") > 0).select((pl.col("fs_ns") <= pl.col("fuse_ns")).all()).item()
    assert wf.filter(pl.col("fs_ns") > 0).select((pl.col("block_ns") <= pl.col("fs_ns")).all()).item()
    assert (wf["device_ns"] <= wf["block_ns"]).all()
    shares = results["layer_breakdown"].group_by("rep", "syscall", "sync_mode").agg(pl.col("share").sum())
    assert ((shares["share"] - 1).abs() <= 0.01).all(), shares
    syncs = wf.filter(pl.col("syscall") == "fdatasync")
    assert syncs.height == writes
    assert (syncs["fuse_requests"] >= 1).mean() >= tied and (syncs["fs_ns"] > 0).mean() >= min(tied, 0.99)
    own = syncs.filter(pl.col("data_bytes") >= 4096)
    assert own.height >= min(tied, 0.99) * writes, f"{own.height} of {writes} fdatasyncs were charged their data"
    return wf


def _assert_writes(req: pl.DataFrame, n: int, unit: int = 512 << 10) -> None:
    """n writes of 4 KiB, and before them the generator's one write creating the file (n * 4 KiB, cut into FUSE
    requests of the daemon's IO unit: bFUSE's 512 KiB, bindfs's 4 KiB: libfuse 2 without big_writes)."""
    writes = req.filter(pl.col("opcode_name") == "FUSE_WRITE")
    setup = n if unit == 4096 else -(-n * 4096 // unit)
    assert writes.filter(pl.col("data_bytes") == 4096).height == n + (setup if unit == 4096 else 0)
    assert writes.height == n + setup and writes["data_bytes"].sum() == 2 * n * 4096


def _fuse_inclusive(results: dict, call: str = "fdatasync") -> float:
    """The median over the calls of each call's FUSE inclusive share. Not the share of the summed times: under TCG
    on a loaded host a guest loses its CPU for hundreds of ms at times, and the few calls it happens in (after
    the reply, before the call returns) would outweigh the hundred others."""
    wf = results["waterfall"].filter(pl.col("syscall") == call)
    return float((wf["fuse_ns"] / wf["dur_ns"]).median())


def test_612_sends_without_ids_are_all_paired_through_the_daemons_log(parsed, analyzed):
    tables, summary, _ = parsed("k612-bfuse")
    req, pairing = tables["fuse_req"], summary["fuse_pairing"]
    sends = tables["fuse_event"].filter(pl.col("phase") == "send")
    assert (sends["unique"] == 0).all() and sends.height >= 2000   # Debian 6.12: every send says `req 0`
    assert pairing["source"] == "fuse_events+daemon_log" and set(req["source"]) == {"fuse_events+daemon_log"}
    assert req["end_ts"].is_not_null().all() and req.height == sends.height
    assert pairing["note"] == (f"FUSE layer from fuse_request_send/end, whose sends carry no request id (req 0, as on "
                               f"Debian's 6.12), paired through bfuse's request log: {sends.height} of {sends.height}")
    _assert_writes(req, 1000)
    assert req.filter(pl.col("opcode_name") == "FUSE_FSYNC").height >= 1000
    # by order alone (no log): the very same pairs
    no_log = {k: v for k, v in tables.items() if k not in ("fuse_daemon_req", "fuse_req")}
    by_order, s = derive_tables(no_log, {})
    assert s["fuse_pairing"]["source"] == "fuse_events_by_order"
    same = req.select("send_ts", "unique").join(by_order["fuse_req"].select("send_ts", "unique"), on="send_ts",
                                                 suffix="_order")
    assert same.height == req.height and (same["unique"] == same["unique_order"]).all()
    run, results = analyzed("k612-bfuse")
    _assert_layers_nest(results, 1000)
    assert "paired through bfuse's request log" in run.read_meta()["parse"]["derived"]["fuse_pairing"]["note"]


def test_61_bfuse_layer_from_its_request_log(parsed, analyzed):
    tables, summary, p = parsed("k61-bfuse")
    assert "fuse_event" not in tables and summary["fuse_pairing"]["source"] == "daemon_log"
    req = tables["fuse_req"]
    _assert_writes(req, 100)
    assert req.filter(pl.col("opcode_name").is_in(["FUSE_WRITE", "FUSE_FSYNC"]))["pid"].is_not_null().all()
    assert p.summary["raw_syscalls_decoded"]["used"] and p.summary["raw_syscalls_decoded"]["abi"] == "x86_64"
    assert set(tables["syscall_io"]["source"]) == {"raw_syscalls"}   # the call layer from raw_syscalls too
    _, results = analyzed("k61-bfuse")
    _assert_layers_nest(results, 100)
    _, host = analyzed("host618-bfuse")
    assert abs(_fuse_inclusive(results) - _fuse_inclusive(host)) <= 0.10   # FUSE events there, the log here


def test_vphone_sdcard_layer_from_its_daemons_dev_fuse_calls(parsed, analyzed):
    """The virtual phone's /sdcard, served by a daemon that is not mobiperf's (bindfs over /data/media)."""
    tables, summary, _ = parsed("vphone-sdcard")
    assert "fuse_event" not in tables and "fuse_daemon_req" not in tables
    assert summary["fuse_pairing"]["source"] == "dev_fuse_calls"
    req = tables["fuse_req"]
    _assert_writes(req, 100, unit=4096)
    assert req["pid"].is_not_null().mean() >= 0.95   # tied to their requesters by the wake-ups
    _, results = analyzed("vphone-sdcard")
    _assert_layers_nest(results, 100, tied=0.99)
    _, host = analyzed("host618-bindfs")
    assert abs(_fuse_inclusive(results) - _fuse_inclusive(host)) <= 0.10


@pytest.mark.parametrize("name", ["host618-bfuse", "host618-bindfs"])
def test_host_runs_nest_as_the_guests_must(name, analyzed):
    _, results = analyzed(name)
    _assert_layers_nest(results, 100)
