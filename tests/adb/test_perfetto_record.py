"""Recording through the device's perfetto: `mobiperf run -t adb:...` against the loopback device (commands run
on this host) with tests/support/perfetto_standin.py as its `perfetto` (the real binary's command line, a real tracefs
capture of this machine written as a Perfetto trace with the perfetto package's protos). What is tested is the
recorder's protocol and the native parse of what it pulls; a phone's own traced_probes is not."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import polars as pl
import pytest

from conftest import needs_root
from mobiperf.collectors.perfetto import choose_recorder, device_perfetto, trace_config
from mobiperf.collectors.ftrace import EventSpec
from mobiperf.target.transport import LocalTransport

pytest_plugins = ["adb_fixtures"]
MOBIPERF = [sys.executable, "-m", "mobiperf"]
STANDIN = Path(__file__).resolve().parents[1] / "support" / "perfetto_standin.py"


def _phone(start_loopback, version: int):
    """A loopback device with the stand-in (as perfetto vVERSION) as `perfetto` on its PATH, Android 14's props."""
    home = Path(tempfile.mkdtemp(prefix="pf-lb-"))  # short: su's socket lives there
    (home / "bin").mkdir()
    tool = home / "bin" / "perfetto"
    tool.write_text(f"#!/bin/sh\nPERFETTO_STANDIN_VERSION={version} exec {sys.executable} {STANDIN} \"$@\"\n")
    tool.chmod(0o755)
    try:
        yield start_loopback("--home", str(home), "--prop", "persist.traced.enable=1",
                             "--prop", "ro.build.version.sdk=34")
    finally:
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def phone_with_perfetto(start_loopback):
    yield from _phone(start_loopback, 50)


@pytest.fixture
def phone_with_old_perfetto(start_loopback):
    yield from _phone(start_loopback, 35)


def run_via(device, base: Path, out: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, ANDROID_ADB_SERVER_PORT=str(device.server_port))
    return subprocess.run([*MOBIPERF, "run", "-t", f"adb:{device.serial}", "--stack", f"dir:{base}", "-o", str(out),
                           "--", "mobibench", "-p", ".", "-f", "4096", "-r", "4", "-a", "1", "-y", "2"],
                          capture_output=True, text=True, timeout=600, env=env)


def test_hosts_record_through_tracefs():
    assert choose_recorder(LocalTransport())[:2] == ("tracefs", "a host target: tracefs directly")


def test_a_device_without_perfetto_falls_back_and_says_why(loopback_device):
    kind, why, facts = choose_recorder(loopback_device.transport())
    assert (kind, facts["path"]) == ("tracefs", None) and why == "the device has no perfetto binary: tracefs directly"


def test_the_device_perfetto_is_found_with_its_facts(phone_with_perfetto):
    facts = device_perfetto(phone_with_perfetto.transport())
    assert facts["path"].endswith("/bin/perfetto") and facts["enabled"] == "1" and facts["sdk"] == 34
    assert facts["background_wait"] is True
    kind, why, _ = choose_recorder(phone_with_perfetto.transport())
    assert kind == "perfetto" and "persist.traced.enable=1" in why and "sdk 34" in why


def test_the_trace_config_asks_for_the_run_s_events():
    from google.protobuf import text_format

    from mobiperf.core.perfetto_protos import message_class

    events = [EventSpec("block", "block_rq_issue", "dev == 8388624"), EventSpec("ext4", "ext4_sync_file_enter")]
    text = trace_config(events, buffer_kb=65536, ftrace_buffer_kb=8192, instance="mobiperf-1-abc")
    cfg = text_format.Parse(text, message_class("TraceConfig")())
    ftrace = cfg.data_sources[0].config.ftrace_config
    assert list(ftrace.ftrace_events) == ["block/block_rq_issue", "ext4/ext4_sync_file_enter"]
    assert (ftrace.buffer_size_kb, ftrace.instance_name, cfg.write_into_file) == (8192, "mobiperf-1-abc", True)
    assert cfg.data_sources[1].config.name == "linux.process_stats" and cfg.buffers[0].size_kb == 65536


@needs_root
def test_run_records_through_the_device_perfetto(phone_with_perfetto, tmp_path, clean_machine):
    base = tmp_path / "device-storage"
    base.mkdir()
    out = tmp_path / "pfrun"
    done = run_via(phone_with_perfetto, base, out)
    assert done.returncode == 0, done.stderr
    meta = json.loads((out / "run.json").read_text())
    ftrace = meta["repetitions"][0]["ftrace"]
    assert ftrace["recorder"] == "perfetto" and "sdk 34" in ftrace["why"] and ftrace["instance"]
    raw = out / "raw" / "rep0"
    assert (raw / "trace.pftrace").stat().st_size == ftrace["trace_bytes"] > 0
    assert "block/block_rq_issue" in (raw / "perfetto_config.pbtxt").read_text()
    parsed = meta["parse"]["repetitions"]["0"]["perfetto"]
    assert parsed["events"] > 2048 and parsed["clock"] == ["boot"] and parsed["lost_events"] == 0
    # 1024 random 4 KiB writes, each fsynced, seen at the block layer through the pulled Perfetto trace.
    io = pl.read_parquet(out / "results" / "block_io.parquet")
    assert len(io.filter((pl.col("comm") == "mobibench") & (pl.col("op") == "write"))) >= 1024
    # The generator's window markers went to the instance perfetto recorded.
    markers = pl.read_parquet(out / "tables" / "trace_marker.parquet")["text"].to_list()
    assert markers == ["mobibench: workload file", "mobibench: timed_start", "mobibench: timed_end"]
    fsync = pl.read_parquet(out / "tables" / "fsync_event.parquet").filter(pl.col("comm") == "mobibench")
    phases = dict(fsync.group_by("phase").len().iter_rows())
    assert phases["enter"] == phases["exit"] >= 1024  # one per write, and the generator's own of its file
    assert not list(Path("/tmp").glob(f"{ftrace['instance']}*")) and list(base.iterdir()) == []


@needs_root
def test_a_perfetto_without_instances_records_at_the_top_level_and_says_so(phone_with_old_perfetto, tmp_path,
                                                                          clean_machine):
    base = tmp_path / "device-storage"
    base.mkdir()
    out = tmp_path / "oldrun"
    done = run_via(phone_with_old_perfetto, base, out)
    assert done.returncode == 0, done.stderr
    ftrace = json.loads((out / "run.json").read_text())["repetitions"][0]["ftrace"]
    assert ftrace["recorder"] == "perfetto" and ftrace["instance"] is None
    assert "perfetto refused it" in ftrace["instance_note"] and "instance_name" in ftrace["instance_note"]
    assert "instance_name" not in (out / "raw" / "rep0" / "perfetto_config.pbtxt").read_text()
    io = pl.read_parquet(out / "results" / "block_io.parquet")
    assert len(io.filter((pl.col("comm") == "mobibench") & (pl.col("op") == "write"))) >= 1024
