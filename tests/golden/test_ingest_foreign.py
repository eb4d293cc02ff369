"""Traces from elsewhere read right (issue 14): systrace HTML old and new, atrace -z, compressed and zipped inputs,
blkparse text, 3.x print events and markers, re-dispatches, android_fs, strace without -ttt; and what ingest says
about them (pairing matched for what the trace holds, workload time, refusals naming the user's file).

Expected figures are counted by hand in the fixtures (tests/fixtures/README.md says where each comes from)."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import polars as pl
import pytest

from mobiperf.commands.ingest import ingest
from mobiperf.core.errors import UsageError
from mobiperf.core.runstore import RunDir

FIX = Path(__file__).parents[1] / "fixtures"
MOBIPERF = [sys.executable, "-m", "mobiperf"]


def table(run: RunDir, name: str) -> pl.DataFrame:
    return run.read_table(name)


def metric(run: RunDir, name: str, **labels) -> float:
    got = [m["value"] for m in run.read_meta()["metrics"] if m["name"] == name and m.get("labels", {}) == labels]
    assert len(got) == 1, (name, labels)
    return got[0]


def test_legacy_systrace_html_is_unescaped_and_its_old_markers_kept(tmp_path):
    run = ingest([FIX / "systrace" / "catapult-trivial_systrace.html"], tmp_path / "trivial")
    # the four `0: C|pid|name` lines of an old kernel are trace_marker writes, without the trailing `\n\`
    assert table(run, "trace_marker").select("ts", "pid", "text").rows() == [
        (50260929925000, 336, "C|124|VSYNC|1"), (50260935656000, 340, "C|124|StatusBar|1"),
        (50260946573000, 336, "C|124|VSYNC|0"), (50262538578000, 419, "C|360|iq|1")]
    meta = run.read_meta()
    assert meta["repetitions"][0]["workload_ns"] == 50262538578000 - 50260929925000
    assert meta["repetitions"][0]["workload_window"] == "trace span"


def test_legacy_systrace_excerpt_counts(tmp_path):
    run = ingest([FIX / "systrace" / "catapult-android_systrace-excerpt.html"], tmp_path / "excerpt")
    markers = table(run, "trace_marker")
    assert len(markers) == 81  # 38 `0: B|...`, 38 `0: E`, 5 `0: C|...`
    assert int(markers["text"].str.starts_with("B|").sum()) == 38
    assert markers["text"][0] == "C|124|VSYNC|1" and not markers["text"].str.contains(r"\\").any()
    name = f"{FIX / 'systrace' / 'catapult-android_systrace-excerpt.html'}:linuxPerfData"  # the file's own name
    summary = run.read_meta()["parse"]["repetitions"]["0"][name]
    assert summary["other_events"] == {} and summary["unparsed"] == {}  # the scheduler's events are read now
    assert (len(table(run, "sched_switch")), len(table(run, "sched_wakeup"))) == (582, 333)


def test_current_systrace_html_with_tgid_column(tmp_path):
    run = ingest([FIX / "systrace" / "trappy-trace_systrace.html"], tmp_path / "current")
    assert table(run, "trace_marker")["text"].to_list() == [
        "E", "trace_event_clock_sync: realtime_ts=1448979311493"]


def test_atrace_z_output_is_inflated(tmp_path):
    run = ingest([FIX / "systrace" / "catapult-compressed_atrace_data.txt"], tmp_path / "atrace")
    markers = table(run, "trace_marker")
    assert len(markers) == 1042  # every line of catapult's decompressed_atrace_data.txt is a tracing_mark_write
    assert markers["text"][0] == "trace_event_clock_sync: parent_ts=683201.375000"


@pytest.mark.parametrize("wrap", ["gz", "zst", "zip", "zip-of-gz"])
def test_compressed_and_zipped_inputs(tmp_path, wrap):
    """A systrace HTML shared as .gz, .zst, .zip, or a .zip holding a .gz, reads as the HTML itself."""
    import zstandard

    html = (FIX / "systrace" / "catapult-trivial_systrace.html").read_bytes()
    path = tmp_path / f"trace.{wrap}"
    if wrap == "gz":
        path.write_bytes(gzip.compress(html))
    elif wrap == "zst":
        path.write_bytes(zstandard.ZstdCompressor().compress(html))
    else:
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("README.txt", "a bugreport's other files are skipped\n")
            if wrap == "zip":
                z.writestr("systrace/trace.html", html)
            else:
                z.writestr("trace.html.gz", gzip.compress(html))
    run = ingest([path], tmp_path / "run")
    assert len(table(run, "trace_marker")) == 4
    labels = json.loads((run.raw_dir(0) / "inputs.json").read_text())
    assert list(labels.values()) == [{"gz": f"{path}:linuxPerfData", "zst": f"{path}:linuxPerfData",
                                      "zip": f"{path}:systrace/trace.html:linuxPerfData",
                                      "zip-of-gz": f"{path}:trace.html.gz:linuxPerfData"}[wrap]]
    assert not (run.raw_dir(0) / "unpacked").exists()


def test_blkparse_text_gives_the_tables_of_the_binary_records(tmp_path):
    """The same 963 reads from the blktrace stream, its blkparse text and a custom -f format; D2C, Q2C and Q2G as
    btt computes them (avg 55.949 µs, 56.609 µs, 0.287 µs)."""
    binary = ingest([FIX / "blktrace" / "takeoverjp-sample.blktrace.0"], tmp_path / "bin")
    text = ingest([FIX / "blkparse" / "takeoverjp-sample.blkparse.txt.gz"], tmp_path / "text")
    custom = ingest([FIX / "blkparse" / "takeoverjp-sample.custom-f.txt.xz"], tmp_path / "custom", kind="blkparse",
                    blkparse_format="%5T.%9t %p %a %d %S %n [%C]\\n")
    b, t = (table(r, "block_event").with_columns(ts=pl.col("ts") - pl.col("ts").min()) for r in (binary, text))
    assert len(b) == len(t) == 5778  # 6741 records less 963 remaps (A), which make no row in either
    # the text prints no comm on completions (it prints the error there): pid 0's name came from a note
    assert b.drop("comm").equals(t.drop("comm"))
    assert b.filter(pl.col("event") != "block_rq_complete")["comm"].equals(
        t.filter(pl.col("event") != "block_rq_complete")["comm"])
    for run in (binary, text, custom):
        lat = {r["phase"]: r for r in table(run, "latency_summary").iter_rows(named=True)}
        assert lat["d2c"]["count"] == 963 and round(lat["d2c"]["mean_ns"]) == 55949
        assert round(lat["q2c"]["mean_ns"]) == 56609 and round(lat["q2g"]["mean_ns"]) == 287
        assert metric(run, "block.requests", op="read") == 963 and metric(run, "block.bytes", op="read") == 3944448
        assert metric(run, "block.pairing.matched_share") == 1.0
    assert any("has no device" in w for w in custom.read_meta()["warnings"])


def test_workload_time_is_the_span_of_every_event_line(tmp_path):
    """LISA's trace holds 6 markers among 3718 other events: the span is the whole trace's (trace-cmd report -t:
    2084.021442860 to 2084.449525380), not the markers' 0.26 ms."""
    with tarfile.open(FIX / "trace-cmd" / "lisa-sched_load-3.x-raw.tar.gz") as tar:
        tar.extractall(tmp_path / "pages", filter="data")
    record = ingest([tmp_path / "pages" / "ftrace_raw"], tmp_path / "run").read_meta()["repetitions"][0]
    assert record["workload_window"] == "trace span"
    assert record["workload_ns"] == 2084_449_525_380 - 2084_021_442_860


def test_old_kernel_print_events_with_char_buf_of_size_0(tmp_path):
    """LISA's 3.x trace: `field:char buf; size:0` in the print format; its 6 markers were lost before."""
    from mobiperf.collectors.parse.ftrace_raw import parse_ftrace_raw

    with tarfile.open(FIX / "trace-cmd" / "lisa-sched_load-3.x-raw.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    got = parse_ftrace_raw(tmp_path / "ftrace_raw", tmp_path / "formats", 0)
    assert got.trace_marker.select("ts", "pid").rows()[0] == (2084238796500, 3106)
    assert got.trace_marker["text"].to_list() == [
        f"cpu_frequency_devlib:        state={s} cpu_id={c}"
        for s, c in ((450000, 0), (800000, 1), (800000, 2), (450000, 3), (450000, 4), (450000, 5))]
    assert got.other_events == {"sched_load_cfs_rq": 2437, "cpu_idle": 474, "sched_load_se": 364,
                                "sched_migrate_task": 28, "cpu_frequency": 16}
    # trace-cmd report counts 399 sched_switch: each one read, with a state the 3.x format printed
    assert len(got.events["sched_switch"]) == 399 and got.unparsed_by_event == {}
    assert not got.unrendered and not got.unparsed_by_event


def test_redispatched_requests_count_once_with_d2c_from_the_last_dispatch(tmp_path):
    run = ingest([FIX / "android" / "k4.14-ufs-redispatch.txt"], tmp_path / "redispatch")
    assert metric(run, "block.requests", op="read") == 8  # 11 issue events
    assert metric(run, "block.bytes", op="read") == (32 + 8 + 64 + 8 + 16 + 8 + 32 + 8) * 512
    lat = {r["phase"]: r for r in table(run, "latency_summary").iter_rows(named=True)}
    assert lat["d2c"]["count"] == 8 and lat["d2c"]["p50_ns"] == 350_000 and lat["d2c"]["mean_ns"] == 350_000
    assert lat["redispatch"]["count"] == 3 and lat["redispatch"]["max_ns"] == 1_400_000
    requests = table(run, "block_io").sort("sector")
    assert requests["dispatches"].to_list() == [1, 2, 1, 2, 1, 1, 2, 1]
    assert requests["redispatch_ns"].drop_nulls().to_list() == [1_400_000, 700_000, 1_400_000]
    summary = table(run, "pairing_summary").row(0, named=True)
    assert (summary["matched"], summary["matched_for"], summary["fully_matched"]) == (8, "issue+complete", 0)
    assert metric(run, "block.pairing.matched_share") == 1.0
    assert run.read_meta()["parse"]["derived"]["block_pairing"]["redispatches"] == 3


def test_3x_empty_flush_is_a_flush_not_a_write(tmp_path):
    """On 3.x kernels a flush prints `FWS` + 0 and its completion is never traced (no bio)."""
    trace = tmp_path / "k3.x-flush.txt"
    trace.write_text(
        "     nand-dev-rw-3714  ( 3714) [001] d..2 37268.879592: block_rq_issue: 93,32 FWS 0 () "
        "18446744073709551615 + 0 [nand-dev-rw]\n"
        "     nand-dev-rw-3714  ( 3714) [001] d..2 37268.891845: block_rq_issue: 93,32 WS 0 () 28368 + 8 "
        "[nand-dev-rw]\n"
        "     nand-dev-rw-3714  ( 3714) [001] d..2 37268.891882: block_rq_complete: 93,32 WS () 28368 + 8 [0]\n"
        "     nand-dev-rw-3714  ( 3714) [001] d..2 37268.891930: block_rq_issue: 93,32 FWS 0 () "
        "18446744073709551615 + 0 [nand-dev-rw]\n"
        "     nand-dev-rw-3714  ( 3714) [001] d..2 37268.894726: block_rq_complete: 93,32 WS () 28368 + 0 [0]\n")
    run = ingest([trace], tmp_path / "flush")
    assert metric(run, "block.requests", op="flush") == 2 and metric(run, "block.requests", op="write") == 1
    assert metric(run, "block.bytes", op="write") == 4096
    summary = table(run, "pairing_summary").row(0, named=True)
    assert (summary["requests"], summary["matched"], summary["no_complete"]) == (3, 1, 2)


def test_android_fs_events_give_the_file_layer(tmp_path):
    run = ingest([FIX / "android" / "k4.14-android-fs.txt"], tmp_path / "fs")
    events = table(run, "android_fs_event")
    assert events.group_by("op", "phase").len().sort("op", "phase").rows() == [
        ("read", "end", 3), ("read", "start", 3), ("write", "end", 3), ("write", "start", 4)]
    files = table(run, "file_io")
    assert files.select("op", "file_type", "size_bytes", "locality").rows() == [
        ("read", "db", 16384, "first"), ("write", "db-wal", 4096, "first"), ("write", "db-wal", 4096, "sequential"),
        ("write", "db-wal", 4096, "sequential"), ("read", "media", 131072, "first"),
        ("read", "other", 65536, "first"), ("write", "unknown", 4096, "first")]
    assert files["dur"].to_list() == [550_000, 12_000, 11_000, 12_000, 1_960_000, 830_000, None]
    assert files["comm"][0] == "com.example.notes" and files["pid"][0] == 4690
    classes = table(run, "io_class").filter(pl.col("layer") == "file").group_by("op", "file_type").agg(
        pl.col("count").sum(), pl.col("bytes").sum()).sort("op", "file_type")
    assert classes.rows() == [("read", "db", 1, 16384), ("read", "media", 1, 131072), ("read", "other", 1, 65536),
                              ("write", "db-wal", 3, 12288), ("write", "unknown", 1, 4096)]


@pytest.mark.parametrize("name, calls, timed", [
    ("dd-dsync-cat.plain.strace", {"write": (8, 32858), "read": (13, 297408)}, False),
    ("dd-dsync.tt.strace", {"write": (7, 16475), "read": (8, 26240)}, True)])
def test_strace_without_ttt_is_read_for_counts_and_sizes(tmp_path, name, calls, timed):
    run = ingest([FIX / "strace" / name], tmp_path / "strace")
    io_ = table(run, "syscall_io")
    got = {c: (n, b) for c, n, b in io_.filter(pl.col("syscall").is_in(list(calls))).group_by("syscall")
           .agg(pl.len(), pl.col("request_bytes").sum()).iter_rows()}
    assert got == calls
    warnings = run.read_meta()["warnings"]
    record = run.read_meta()["repetitions"][0]
    if timed:  # -tt: time of day; -T: durations
        assert io_["ts"].null_count() == 0 and io_.filter(pl.col("syscall") == "write")["dur"].null_count() == 0
        assert any("time of day" in w for w in warnings) and record["workload_window"] == "strace span"
    else:
        assert io_["ts"].null_count() == len(io_) and io_["dur"].null_count() == len(io_)
        assert sum("without timestamps" in w for w in warnings) == 1
        assert "workload_ns" not in record and record["workload_window"] == "unknown"


def test_markers_window_is_the_workload_time(tmp_path):
    trace = tmp_path / "window.txt"
    lines = (FIX / "ftrace" / "k4.14-android-ufs.txt").read_text().splitlines()
    lines.insert(1, "  mobibench-900   [001] ...1  1520.100005: tracing_mark_write: mobibench: timed_start")
    lines.insert(8, "  mobibench-900   [001] ...1  1520.100905: tracing_mark_write: mobibench: timed_end")
    trace.write_text("\n".join(lines) + "\n")
    record = ingest([trace], tmp_path / "win").read_meta()["repetitions"][0]
    assert (record["workload_ns"], record["workload_window"]) == (900_000, "markers")


def test_two_files_keep_their_statistics_apart(tmp_path):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    shutil.copy(FIX / "ftrace" / "k4.14-android-ufs.txt", a)
    b.write_text((FIX / "ftrace" / "k3.4-mmc-fsync.txt").read_text() + "   not a trace line at all\n")
    run = ingest([a, b], tmp_path / "two")
    parsed = run.read_meta()["parse"]["repetitions"]["0"]
    assert parsed[str(a)]["lines"] == 17 and parsed[str(b)]["lines"] == 15
    assert parsed[str(b)]["unparsed"] == {"(no header)": 1} and parsed[str(a)]["unparsed"] == {}
    assert any(w.startswith(f"parse: rep 0: {b}:") for w in run.read_meta()["warnings"])


@pytest.mark.parametrize("content, says", [
    (b"", "an empty file"),
    (b"hello, this is not a trace\nnor is this line\n", "not a trace mobiperf reads (first line 'hello"),
    (bytes(range(256)) * 8, "not a trace mobiperf reads (binary data (00 01 02 03"),
    (gzip.compress(b"\x00\x01garbage" * 50), "not a trace mobiperf reads (binary data"),
    (b"PK\x03\x04 not really a zip", "a damaged zip container"),
])
def test_inputs_that_are_no_trace_are_refused_naming_the_file_and_leave_nothing(tmp_path, content, says):
    bad = tmp_path / "random.txt"
    bad.write_bytes(content)
    out = tmp_path / "run"
    with pytest.raises(UsageError) as e:
        ingest([bad], out)
    assert str(bad) in str(e.value) and says in str(e.value), str(e.value)
    assert "\n" not in str(e.value) and "\\x" not in str(e.value)
    assert not out.exists()  # the same -o can be used again


def test_a_trace_with_no_event_mobiperf_reads_is_refused(tmp_path):
    """trappy's legacy systrace without its 3 sched_switch and 2 sched_wakeup lines (which mobiperf reads: who
    slept, analyzers/blocked.py): only scheduler-statistics events are left."""
    trace = tmp_path / "stats-only.html"
    trace.write_text("".join(line for line in (FIX / "systrace" / "trappy-trace_legacy_systrace.html").read_text()
                             .splitlines(keepends=True) if "sched_switch" not in line and "sched_wakeup" not in line))
    out = tmp_path / "run"
    with pytest.raises(UsageError) as e:
        ingest([trace], out)
    assert "no block, file system, system call or marker event found" in str(e.value)
    assert "sched_load_avg_cpu (5)" in str(e.value) and not out.exists()


def test_a_trace_of_scheduler_events_alone_gives_blocked_time(tmp_path):
    run = ingest([FIX / "systrace" / "trappy-trace_legacy_systrace.html"], tmp_path / "run", report=False)
    assert (len(table(run, "sched_switch")), len(table(run, "sched_wakeup"))) == (3, 2)
    assert "blocked" in run.read_meta()["analysis"]["results"]


def test_cli_refusal_is_one_line_and_the_output_can_be_reused(tmp_path):
    bad = tmp_path / "x.blktrace.0"
    bad.write_bytes(b"")
    out = tmp_path / "run"
    done = subprocess.run([*MOBIPERF, "ingest", str(bad), "-o", str(out)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert str(bad) in done.stderr and not out.exists()
    good = subprocess.run([*MOBIPERF, "ingest", str(FIX / "android" / "k4.14-ufs-redispatch.txt"), "-o", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert good.returncode == 0, good.stderr
    show = subprocess.run([*MOBIPERF, "show", str(out)], capture_output=True, text=True, timeout=60)
    assert "workload 0.007 s (trace span)" in show.stdout and "block.pairing.matched_share" in show.stdout
    notes = subprocess.run([*MOBIPERF, "analyze", str(out)], capture_output=True, text=True, timeout=120).stderr
    assert notes.count("note:") == 1 and "when collecting" not in notes, notes


def test_blktrace_set_with_an_empty_cpu_file(tmp_path):
    """blktrace leaves the file of a CPU that saw no IO empty: it belongs to the set, it is no error."""
    src = tmp_path / "in"
    src.mkdir()
    shutil.copy(FIX / "blktrace" / "loop-dd-4k-direct.blkbin", src / "loop.blktrace.0")
    (src / "loop.blktrace.1").write_bytes(b"")
    run = ingest([src / "loop.blktrace.0", src / "loop.blktrace.1"], tmp_path / "set")
    assert metric(run, "block.requests", op="write") == 50
