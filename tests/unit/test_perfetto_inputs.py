"""The Perfetto reader on traces from elsewhere (the Perfetto authors' test traces) and on bad input: a cut or
corrupt trace keeps every complete packet and names the byte offset; an event nobody types is kept; a trace
without storage events says so; `mobiperf ingest` takes a .pftrace end to end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from google.protobuf import text_format
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
from polars.testing import assert_frame_equal

from mobiperf.collectors.parse import perfetto_wire as wire
from mobiperf.collectors.parse.perfetto_trace import parse_perfetto
from mobiperf.core.errors import ParseError

PUBLIC = Path(__file__).parents[1] / "fixtures" / "perfetto"
MOBIPERF = [sys.executable, "-m", "mobiperf"]


def _trace(tmp_path: Path, name: str, trace: pb.Trace) -> Path:
    path = tmp_path / name
    path.write_bytes(trace.SerializeToString())
    return path


def _public(tmp_path: Path, name: str) -> Path:
    return _trace(tmp_path, f"{name}.pftrace", text_format.Parse((PUBLIC / f"{name}.textproto").read_text(),
                                                                 pb.Trace()))


def test_android_fs_reads_of_the_perfetto_authors(tmp_path):
    got = parse_perfetto(_public(tmp_path, "android-fs-dataread"))
    fs = got.events["android_fs_event"]  # the same rows as the kernel's text gives (parse/android_fs.py)
    assert fs.select("ts", "pid", "op", "phase", "path", "size_bytes", "cmdline", "task_pid", "ino").rows() == [
        (46448185788840, 5892, "read", "start", "/system/bin/cmd", 4096, "am", 5892, 836),
        (46448185789530, 156, "read", "end", None, 4096, None, None, 836)]
    assert set(fs["comm"]) == {"<...>"}  # no process tree or rename names these pids


def test_f2fs_iostat_devices(tmp_path):
    fs = parse_perfetto(_public(tmp_path, "f2fs-iostat")).events["fs_event"]
    # dev 0xfe2e is the kernel dev_t 65070: major 0 (>> 20), minor 65070, as the kernel prints MAJOR/MINOR.
    assert fs.select("dev_major", "dev_minor").rows() == [(0, 65070), (0, 65056), (0, 65070), (0, 65070), (0, 65056)]
    assert fs["body"].str.starts_with("dev 0,650").all() and fs["body"][0].count("=") == 22  # its 22 counters


def test_task_renames_and_atrace_counter_but_no_storage(tmp_path):
    got = parse_perfetto(_public(tmp_path, "task-rename-atrace"))
    assert got.trace_marker.select("ts", "pid", "text").rows() == [(7527501668984, 643, "C|643|binder_proxies|442")]
    assert got.other_events == {}  # the renames are read: who the threads are (task table, parse/sched.py)
    assert sorted(got.events["task"].select("tid", "thread").rows()) == [(20578, "Thread-236"), (20579, "Thread-237")]
    assert any("no storage events" in w and "task (2 rows)" in w for w in got.warnings)


def _fsync_trace() -> pb.Trace:
    """A process tree naming 100 'app', then ext4_sync_file_enter by 100 before and after it renames itself, and
    by 101 (a thread the tree lists) and 7 (nobody)."""
    t = pb.Trace()
    tree = t.packet.add()
    tree.timestamp = 1000
    p = tree.process_tree.processes.add()
    p.pid, p.ppid = 100, 1
    p.cmdline.append("/system/bin/app_process64")
    th = tree.process_tree.threads.add()
    th.tid, th.tgid, th.name = 101, 100, "RenderThread"
    bundle = t.packet.add().ftrace_events
    bundle.cpu = 1
    for ts, pid in ((2000, 100), (2500, 101), (2600, 7)):
        ev = bundle.event.add()
        ev.timestamp, ev.pid = ts, pid
        ev.ext4_sync_file_enter.dev, ev.ext4_sync_file_enter.ino = (259 << 20) | 40, 12
    ev = bundle.event.add()
    ev.timestamp, ev.pid = 3000, 100
    ev.task_rename.pid, ev.task_rename.oldcomm, ev.task_rename.newcomm = 100, "app_process64", "com.example"
    ev = bundle.event.add()
    ev.timestamp, ev.pid = 4000, 100
    ev.ext4_sync_file_enter.dev, ev.ext4_sync_file_enter.ino, ev.ext4_sync_file_enter.datasync = (259 << 20) | 40, 12, 1
    return t


def test_thread_names_follow_the_process_tree_and_renames(tmp_path):
    fsync = parse_perfetto(_trace(tmp_path, "names.pftrace", _fsync_trace())).events["fsync_event"]
    assert fsync.select("ts", "pid", "comm", "dev_major", "dev_minor", "ino", "datasync").rows() == [
        (2000, 100, "app_process64", 259, 40, 12, 0), (2500, 101, "RenderThread", 259, 40, 12, 0),
        (2600, 7, "<...>", 259, 40, 12, 0), (4000, 100, "com.example", 259, 40, 12, 1)]


def test_truncated_trace_keeps_every_complete_packet(tmp_path):
    data = _fsync_trace().SerializeToString()
    offs, lens, _ = wire.split_packets(np.frombuffer(data, np.uint8), 0, len(data))
    second = int(offs[1]) - 2  # tag and one length byte of the ftrace packet: where the damage begins
    cut = tmp_path / "cut.pftrace"
    cut.write_bytes(data[:second + 10])
    got = parse_perfetto(cut)
    assert isinstance(got.damage, ParseError) and got.damage.where == f"offset {second}"
    assert got.packets == 1 and got.events_total == 0 and any(f"offset {second}" in w for w in got.warnings)
    # A cut inside the last packet keeps the first ones whole: three packets, the third cut.
    t = _fsync_trace()
    extra = t.packet.add().ftrace_events
    extra.cpu = 0
    extra.event.add().timestamp = 5000
    data = t.SerializeToString()
    whole = tmp_path / "whole.pftrace"
    whole.write_bytes(data[:len(_fsync_trace().SerializeToString())])
    (tmp_path / "cut2.pftrace").write_bytes(data[:-3])
    got, want = parse_perfetto(tmp_path / "cut2.pftrace"), parse_perfetto(whole)
    assert got.damage is not None and want.damage is None
    assert_frame_equal(got.events["fsync_event"], want.events["fsync_event"])


def test_corrupt_packet_framing_names_its_offset(tmp_path):
    data = bytearray(_fsync_trace().SerializeToString())
    offs, _, _ = wire.split_packets(np.frombuffer(bytes(data), np.uint8), 0, len(data))
    at = int(offs[1]) - 2
    data[at] = 0x0F  # field 1 with wire type 7: no such wire type
    path = tmp_path / "corrupt.pftrace"
    path.write_bytes(bytes(data))
    got = parse_perfetto(path)
    assert got.damage.where == f"offset {at}" and got.packets == 1
    (tmp_path / "junk.pftrace").write_bytes(b"\x0f" + bytes(data[1:]))
    with pytest.raises(ParseError, match=r"offset 0.*not a Perfetto trace"):
        parse_perfetto(tmp_path / "junk.pftrace")


def test_unknown_and_generic_events_are_kept_or_counted(tmp_path):
    t = pb.Trace()
    bundle = t.packet.add().ftrace_events
    bundle.cpu = 0
    ev = bundle.event.add()
    ev.timestamp, ev.pid = 10, 5
    ev.generic.event_name = "ufs_vendor_cmd"
    f = ev.generic.field.add()
    f.name, f.uint_value = "tag", 17
    f = ev.generic.field.add()
    f.name, f.str_value = "cmd", "WRITE_10"
    ev = bundle.event.add()
    ev.timestamp, ev.pid = 11, 5
    # A field number that neither the protos nor any descriptor of the bundle name (a newer traced's event).
    ev.MergeFromString(bytes([0xFA, 0xFF, 0x3F, 2, 8, 1]))  # tag (131071 << 3 | 2), length 2: {1: 1}
    got = parse_perfetto(_trace(tmp_path, "unknown.pftrace", t))
    assert got.events["generic_event"].select("ts", "pid", "event", "body").rows() == [
        (10, 5, "ufs_vendor_cmd", "tag=17 cmd=WRITE_10")]
    assert got.undecoded == {"ftrace event field 131071": 1}
    assert any("unknown type" in w and "131071" in w for w in got.warnings)


def test_ingest_a_pftrace_end_to_end(tmp_path):
    path = _trace(tmp_path, "phone.perfetto-trace", _fsync_trace())
    out = tmp_path / "run"
    done = subprocess.run([*MOBIPERF, "ingest", str(path), "-o", str(out)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert "perfetto   1 file(s)" in done.stdout and "table      fsync_event" in done.stdout
    fsync = pl.read_parquet(out / "tables" / "fsync_event.parquet")
    assert fsync["comm"].to_list() == ["app_process64", "RenderThread", "<...>", "com.example"]
    assert (out / "report.html").exists()


def test_losses_are_counted_from_bundles_stats_and_dropped_packets(tmp_path):
    t = _fsync_trace()
    t.packet[1].ftrace_events.lost_events = True
    for phase, overrun in ((1, 5), (2, 12)):  # START_OF_TRACE, END_OF_TRACE: 7 overruns and 1 drop in between
        stats = t.packet.add().ftrace_stats
        stats.phase = phase
        cpu = stats.cpu_stats.add()
        cpu.cpu, cpu.overrun, cpu.dropped_events = 1, overrun, phase
    t.packet.add().previous_packet_dropped = 1
    snap = t.packet.add().clock_snapshot
    for clock_id, ts in ((6, 5_000_000), (3, 4_000_000)):
        c = snap.clocks.add()
        c.clock_id, c.timestamp = clock_id, ts
    got = parse_perfetto(_trace(tmp_path, "lossy.pftrace", t))
    assert got.lost_events == 7 + 1 and got.summary["bundles_with_lost_events"] == 1
    assert got.summary["packets_dropped_before"] == 1
    assert got.summary["boottime_minus_monotonic_ns"] == 1_000_000 and got.summary["clock"] == ["boot"]
    assert any("8 ftrace events were lost" in w for w in got.warnings)
    assert any("dropped before them" in w for w in got.warnings)
