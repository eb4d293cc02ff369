"""End to end on the embedded default: real loop devices, ext4, tracefs, dd; asserts on the tables produced."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from conftest import needs_root

pytestmark = needs_root
MOBIPERF = [sys.executable, "-m", "mobiperf"]


def mobiperf(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([*MOBIPERF, *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def dd_512k_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "dd512k"
    done = mobiperf("run", "-t", "local", "--stack", "ext4", "-o", str(out), "--",
                    "dd", "if=/dev/zero", "of=f", "bs=512k", "count=64", "oflag=direct")
    assert done.returncode == 0, done.stderr
    return out, done


def test_direct_512k_writes_are_large_and_sequential(dd_512k_run, clean_machine):
    out, done = dd_512k_run
    io = pl.read_parquet(out / "results" / "block_io.parquet")
    dd_writes = io.filter((pl.col("op") == "write") & (pl.col("comm") == "dd"))
    assert dd_writes["size_bytes"].sum() == 32 << 20  # the 32 MiB dd wrote, all of it, once
    writes = io.filter(pl.col("op") == "write")
    assert writes["size_bytes"].sum() >= 32 << 20
    large = writes.filter(pl.col("size_class") == ">256k")
    assert large["size_bytes"].sum() / writes["size_bytes"].sum() > 0.95
    assert len(large) >= 0.8 * len(writes)
    seq = dd_writes.filter(pl.col("locality") == "sequential")
    assert len(seq) >= len(dd_writes) - 1  # all but the first of the stream
    assert "report: " in done.stdout and str(out / "report.html") in done.stdout


def test_run_json_describes_the_run(dd_512k_run):
    out, _ = dd_512k_run
    meta = json.loads((out / "run.json").read_text())
    assert meta["format"] == "mobiperf-run" and meta["status"] == "complete"
    assert meta["command"] == ["dd", "if=/dev/zero", "of=f", "bs=512k", "count=64", "oflag=direct"]
    rep = meta["repetitions"][0]
    assert rep["exit_code"] == 0 and rep["ftrace"]["lost_events"] == 0
    assert rep["stack"]["filesystem"] == "ext4" and "data=ordered" in rep["stack"]["mount_options"]
    assert meta["parse"]["derived"]["block_pairing"]["fully_matched_share"] > 0.9
    by_key = {(m["name"], tuple(sorted(m["labels"].items()))): m["value"] for m in meta["metrics"]}
    assert by_key[("block.pairing.matched_share", ())] > 0.9
    assert by_key[("block.bytes", (("op", "write"),))] >= 32 << 20
    assert 0 < by_key[("latency.d2c.p50", (("op", "write"),))] < 1e9


def test_report_is_self_contained(dd_512k_run):
    out, _ = dd_512k_run
    page = (out / "report.html").read_text()
    scripts = _script_tags(page)
    assert scripts and all("src" not in attrs for attrs in scripts)  # everything inline: works offline
    assert "plotly.js v" in page  # the library itself, inlined
    for title in ("IO characterisation (block layer)", "Block latency CDF", "Block access pattern"):
        assert title in page
    assert page.count('class="mp-fig plotly-graph-div"') >= 6


def test_offline_stages_rebuild_from_files(dd_512k_run, tmp_path):
    out, _ = dd_512k_run
    analyzed = mobiperf("analyze", str(out), "--format", "json")
    assert analyzed.returncode == 0, analyzed.stderr
    classes = json.loads(analyzed.stdout)["IO classes (block and syscall layers)"]
    assert sum(r["bytes"] for r in classes if r["op"] == "write") >= 32 << 20
    page = tmp_path / "again.html"
    reported = mobiperf("report", str(out), "-o", str(page))
    assert reported.returncode == 0 and page.stat().st_size > 1_000_000  # plotly.js inlined
    shown = mobiperf("show", str(out))
    assert "block.bytes{op=write}" in shown.stdout and "(complete)" in shown.stdout


def test_4k_dsync_writes_are_small_and_sync(tmp_path, clean_machine):
    out = tmp_path / "dd4k"
    done = mobiperf("run", "--stack", "ext4", "-o", str(out), "--",
                    "dd", "if=/dev/zero", "of=f", "bs=4k", "count=200", "oflag=direct,dsync")
    assert done.returncode == 0, done.stderr
    io = pl.read_parquet(out / "results" / "block_io.parquet")
    dd_writes = io.filter((pl.col("op") == "write") & (pl.col("comm") == "dd"))
    assert len(dd_writes) == 200
    assert set(dd_writes["size_class"]) == {"<=4k"} and set(dd_writes["size_bytes"]) == {4096}
    assert set(dd_writes["sync_mode"]) <= {"sync", "fua"}
    # O_DSYNC makes every write durable: at least one cache flush (or FUA) per write reaches the device.
    flushes = io.filter((pl.col("op") == "flush") | (pl.col("sync_mode").is_in(["fua", "preflush"])))
    assert len(flushes) >= 200


def test_failed_command_is_recorded(tmp_path, clean_machine):
    out = tmp_path / "fails"
    done = mobiperf("run", "--stack", "ext4", "-o", str(out), "--", "sh", "-c", "echo oops >&2; exit 3")
    assert done.returncode != 0
    assert "the workload failed (exit status 3 (rep 0))" in done.stderr
    assert "the workload's last stderr lines (rep 0):\n  | oops\n" in done.stderr
    meta = json.loads((out / "run.json").read_text())
    assert meta["status"] == "failed" and meta["repetitions"][0]["exit_code"] == 3
    assert (out / "raw" / "rep0" / "stderr.txt").read_text() == "oops\n"
    assert "This run FAILED" in (out / "report.html").read_text()


def test_a_workload_killed_by_a_signal_is_said_in_words(tmp_path, clean_machine):
    out = tmp_path / "abort"
    done = mobiperf("run", "--stack", "ext4", "-o", str(out), "--", "sh", "-c",
                    "echo 'free(): invalid pointer' >&2; kill -ABRT $$")
    assert done.returncode == 1
    assert "the workload failed (killed by SIGABRT (rep 0))" in done.stderr and "[-6]" not in done.stderr
    assert "  | free(): invalid pointer" in done.stderr
    assert "killed by SIGABRT" in (out / "report.html").read_text()


def test_unknown_event_refused_before_anything_is_created(tmp_path, clean_machine):
    out = tmp_path / "never"
    done = mobiperf("run", "--stack", "ext4", "--event", "block:no_such_event", "-o", str(out), "--", "true")
    assert done.returncode == 2
    assert "unknown trace event block:no_such_event" in done.stderr and "block_rq_issue" in done.stderr
    assert not out.exists()


def test_bad_run_dirs_are_clear_errors(tmp_path):
    done = mobiperf("show", str(tmp_path / "missing"))
    assert done.returncode == 2 and "no such run directory" in done.stderr
    (tmp_path / "run.json").write_text("{truncated")
    done = mobiperf("analyze", str(tmp_path))
    assert done.returncode == 2 and "corrupt" in done.stderr and "Traceback" not in done.stderr


def test_ctrl_c_keeps_an_incomplete_run_and_cleans_up(tmp_path, clean_machine):
    out = tmp_path / "interrupted"
    proc = subprocess.Popen([*MOBIPERF, "run", "--stack", "ext4", "-o", str(out), "--", "sleep", "61.25"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (out / "raw" / "rep0" / "stdout.txt").exists():  # the workload has started
            assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read()
            time.sleep(0.1)
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    assert "partial run is kept" in stderr
    assert json.loads((out / "run.json").read_text())["status"] == "incomplete"
    assert ["sleep", "61.25"] not in list(_processes())  # the workload went down with the stack


def _script_tags(page: str) -> list[dict]:
    from html.parser import HTMLParser

    class Scripts(HTMLParser):  # script bodies are CDATA here, so strings inside plotly.js are not tags
        tags: list[dict] = []

        def handle_starttag(self, tag, attrs):
            if tag == "script":
                self.tags.append(dict(attrs))

    parser = Scripts()
    parser.tags = []
    parser.feed(page)
    return parser.tags


def _processes():
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                yield Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
            except OSError:
                continue
