"""A traced run on the virtual phone (its own kernel, f2fs /data): a bFUSE daemon over /data/local/tmp, 100
fdatasyncs of 4 KiB, every call's layers checked (tests/support/layer_checks.py), its times all the phone's (its
wall clock is set 25 years back, its monotonic clock started at its own boot), and nothing left on the phone.

On 6.1 (Android 14's kernel) there are no FUSE events: the FUSE layer comes from the daemon's side where this
mobiperf has that source; without it the FUSE assertions are expected to fail, and say why."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import polars as pl
import pytest

from android_device import mobiperf_via
from layer_checks import WORKLOAD, check_calls, check_fuse_nest, fuse_inclusive, results_of, tables_of
from vphone_fixtures import PhoneDevice

pytest_plugins = ["adb_fixtures", "vphone_fixtures"]


def device_uptime_ns(phone: PhoneDevice) -> int:
    """The phone's CLOCK_MONOTONIC (its uptime) now, in ns, to within its 10 ms resolution."""
    return int(float(phone.shell("cat /proc/uptime").stdout.split()[0]) * 1e9)


@pytest.fixture(scope="module")
def bfuse_run(vphone: PhoneDevice, tmp_path_factory):
    out = tmp_path_factory.mktemp("vphone-run") / "bfuse"
    before = device_uptime_ns(vphone)
    done = mobiperf_via(vphone, "run", "-t", f"adb:{vphone.serial}", "--stack", "dir:/data/local/tmp/x+bfuse",
                        "-o", str(out), "--no-report", "--", *WORKLOAD, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    done.device_window = (before - 10_000_000, device_uptime_ns(vphone) + 10_000_000)
    return out, done


def test_the_run_is_the_phones_and_says_what_its_kernel_lacks(vphone: PhoneDevice, bfuse_run):
    out, done = bfuse_run
    meta = json.loads((out / "run.json").read_text())
    facts = meta["repetitions"][0]["facts"]["target"]
    assert (facts["kernel"], facts["data_fstype"], facts["android_version"]) == (vphone.kernel, "f2fs", "14")
    assert meta["status"] == "complete"
    lacks = [w for w in meta["warnings"] if "lacks fuse:fuse_request_send" in w]
    said = [line for line in done.stderr.splitlines() if "lacks fuse:fuse_request_send" in line]
    assert len(lacks) == 1 and said == ["warning: collect: ftrace: this kernel lacks fuse:fuse_request_send, "
                                        "fuse:fuse_request_end"]   # said once, in one line


def test_the_workloads_calls_and_the_daemons_f2fs_syncs_are_traced(bfuse_run):
    out, _ = bfuse_run
    check_calls(out)
    tables = tables_of(out)
    syncs = tables["fsync_event"].filter(pl.col("fs") == "f2fs") if "fs" in tables["fsync_event"].columns else \
        tables["fsync_event"]
    # bFUSE passes every fdatasync down: at least one f2fs sync per synchronous write, in the daemon's threads
    assert len(syncs) >= 100 and set(syncs["comm"].unique()) <= {"bfuse"}
    writes = tables["block_rq"].filter(pl.col("op") == "write")
    assert len(writes) >= 100 and (writes["size_bytes"] % 4096 == 0).all()


def test_every_fdatasync_nests_fuse_fs_block_and_its_own_data_write(vphone: PhoneDevice, bfuse_run):
    out, _ = bfuse_run
    events = json.loads((out / "run.json").read_text())["target"]["events"]
    assert not events.get("fuse")    # 6.1: no FUSE events at all
    check_fuse_nest(out, events_fall_short="this kernel has no FUSE events")


def test_nothing_of_the_run_stays_on_the_phone(vphone: PhoneDevice, bfuse_run):
    said = vphone.shell("su 0 sh -c 'ls -A /data/local/tmp/x /data/local/tmp/mobiperf /data/local/tmp/mobiperf-journal"
                        " 2>&1; grep -c fuse /proc/mounts; ls /sys/kernel/tracing/instances'").stdout.split("\n")
    assert [line for line in said if line.strip()] == [
        f"ls: /data/local/tmp/{name}: No such file or directory" for name in ("x", "mobiperf", "mobiperf-journal")
    ] + ["1"]   # no directory, binary or journal of the run; of FUSE mounts /sdcard's bindfs only; no instance


def test_the_runs_times_are_the_phones_own(vphone: PhoneDevice, bfuse_run):
    out, done = bfuse_run
    lo, hi = done.device_window
    device_wall = int(vphone.shell("date +%s").stdout.strip())
    assert time.time() - device_wall > 20 * 365 * 86400    # the phone's wall clock: 25 years back
    host_mono = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    if host_mono < hi + 60e9:
        pytest.skip("this host booted too recently for its monotonic clock to differ from the phone's")
    # Every event table: on the phone's trace clock, inside this run, none on the host's monotonic or wall clock.
    tables = tables_of(out)
    for name in ("block_event", "syscall_io", "trace_marker", "fsync_event"):
        ts = tables[name]["ts"]
        assert len(ts) and lo <= ts.min() and ts.max() <= hi, (name, ts.min(), ts.max(), lo, hi)
    # The run's record: its own dates are the host's (when mobiperf ran), never the phone's 2001.
    text = (out / "run.json").read_text()
    meta = json.loads(text)
    assert meta["created"].startswith(time.strftime("%Y", time.gmtime())) and '"2001-' not in text


@pytest.mark.slow
def test_fuse_inclusive_is_within_10_points_of_the_same_run_on_this_host(bfuse_run, tmp_path):
    """The same workload on this host's kernel (FUSE events with ids, ext4 under bFUSE): the FUSE layer's share of
    the fdatasyncs' time, whatever made it on the phone, within 10 points of the host's."""
    out, _ = bfuse_run
    check_fuse_nest(out, events_fall_short="this kernel has no FUSE events")
    host = tmp_path / "host"
    done = subprocess.run([sys.executable, "-m", "mobiperf", "run", "-t", "local", "--stack", "ext4+bfuse", "-o",
                           str(host), "--no-report", "--", *WORKLOAD], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    phone_share, host_share = fuse_inclusive(out), fuse_inclusive(host)
    assert host_share > 0.5 and abs(phone_share - host_share) <= 0.10, (phone_share, host_share)


@pytest.mark.slow
def test_strace_on_the_phone_is_placed_on_its_trace_clock_by_its_own_markers(vphone: PhoneDevice, tmp_path):
    """strace stamps calls with the phone's wall clock (2001 here): a phone has no host-side clock reading, so the
    calls are placed on the trace clock by the generator's trace markers alone, never by the host's clocks."""
    out = tmp_path / "strace"
    before = device_uptime_ns(vphone)
    done = mobiperf_via(vphone, "run", "-t", f"adb:{vphone.serial}", "--stack", "dir:/data/local/tmp/st",
                        "--source", "ftrace", "--source", "strace", "--source", "facts", "-o", str(out),
                        "--no-report", "--", "mobibench", "-p", ".", "-f", "40", "-r", "4", "-a", "0", "-y", "8",
                        timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    after = device_uptime_ns(vphone)
    first = (out / "raw" / "rep0" / "strace.log").read_text().split()[1]    # "<pid> <epoch seconds> ..."
    assert time.gmtime(float(first)).tm_year == 2001                         # the phone's wall clock, as it was
    tasks = json.loads((out / "raw" / "rep0" / "tasks.json").read_text())
    assert tasks["clock"] == []                       # no clock reading of the host's for a phone's trace
    calls = results_of(out)["syscall_class"].filter(pl.col("syscall") == "fdatasync")
    assert len(calls) == 10 and set(calls["timing"]) == {"strace"}
    assert calls["clock_error_ns"].max() < 50_000_000    # within the markers' writes, on an emulated CPU
    assert before <= calls["ts"].min() and calls["ts"].max() <= after   # on the phone's monotonic clock
