"""mobibench's output: Mobibench's exact text (misspellings included), the --json extra, the trace markers,
the -L/-k files, the replay report, and mobiperf's parser of all of it (mobiperf.collectors.parse.mobibench)."""

from __future__ import annotations

import json
import math
import re
import subprocess
from pathlib import Path

import pytest

from mobiperf.collectors.parse.mobibench import MobibenchOutputError, parse_mobibench_result, read_generator_output

DASHES = "-" * 41


def run(binary: Path, tmp_path: Path, *args: str, marker: str | None = "", timeout: float = 60):
    env = {"PATH": "/usr/bin:/bin", "MOBIBENCH_TRACE_MARKER": str(tmp_path / "marker") if marker is None else marker}
    proc = subprocess.run([str(binary), "--no-drop-caches", *args], capture_output=True, timeout=timeout, env=env)
    # decoded by hand: text=True would turn the progress's carriage returns into newlines
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode(), proc.stderr.decode())


def lines_of(stdout: str) -> list[str]:
    """stdout split as a terminal shows it: progress lines end with a carriage return."""
    return [line for line in re.split(r"\r|\n", stdout) if line != ""]


FILE_OUTPUT = [
    DASHES,
    r"\[mobibench measurement setup\]",
    DASHES,
    r"File size per thread : 4096 KB",
    r"IO size : 4 KB",
    r"IO count : 1024 ",
    r"Access Mode 1, Sync Mode 0",
    r"# of Threads : 1",
    r"setState: 1",
    *[f"{p:02d}%" for p in range(101)],   # stands for the pre-creation progress, checked apart
    r"setState: 2",
    *[f"{p:02d}%" for p in range(101)],
    DASHES,
    r"\[Messurement Result\]",
    DASHES,
    r"\[CPU\] : Active,Idle,IoWait : -?(\d+\.\d\d|nan) -?(\d+\.\d\d|nan) -?(\d+\.\d\d|nan)",
    r"\[TIME\] : {7}\d sec \d{6}us\. \t\d+ B/sec, \t\d+\.\d\d KB/sec, \t\d+\.\d\d MB/sec\. \d+\.\d\d IOPS\(4KB\) ",
    r"\[CON SWITCHES\] : \d+ \d+",
    r"setState: 3",
    r"Err string : No error",
]


def test_file_mode_text_is_mobibenchs_line_for_line(reference_binary, tmp_path):
    proc = run(reference_binary("mobibench"), tmp_path, "-p", str(tmp_path / "w"), "-f", "4096", "-r", "4",
               "-a", "1")
    assert proc.returncode == 0, proc.stderr
    lines = lines_of(proc.stdout)
    progress_before = [line for line in lines[9:lines.index("setState: 2")]]
    # the pre-creation pass prints only the percentages it reaches (8 chunks of 512 KiB)
    assert progress_before == [f"{p:02d}%" for p in (0, 12, 25, 37, 50, 62, 75, 87, 100)]
    lines = lines[:9] + [f"{p:02d}%" for p in range(101)] + lines[9 + len(progress_before):]
    assert len(lines) == len(FILE_OUTPUT), lines
    for pattern, line in zip(FILE_OUTPUT, lines):
        assert re.fullmatch(pattern, line), (pattern, line)
    assert "\n100%\r" not in proc.stdout and "99%\r100%\r" + DASHES in proc.stdout


def test_quiet_db_mode_text(reference_binary, tmp_path):
    work = tmp_path / "w"
    proc = run(reference_binary("mobibench"), tmp_path, "-q", "-p", str(work), "-d", "1", "-n", "20", "-j", "3",
               "-i", "1")
    assert proc.returncode == 0, proc.stderr
    expected = [
        DASHES, r"\[mobibench measurement setup\]", DASHES,
        r"DB teset mode enabled\.", r"DB time interval : 1 ms", r"Operation : 1",
        r"Transactions per thread: 20", r"# of Tables : 3", r"# of Databases : 1", r"# of Threads : 1",
        r"setState: 1", r"122880", r"122880", r"init_db_for_update", r"trs : 296", r"init end",
        DASHES, re.escape(f"[DB information of db {work}/test.db0_0]"), DASHES,
        r"sqlite_version=3\.\d+\.\d+", r"page_size=4096", r"journal_mode=wal", r"synchronous=2",
        r"setState: 2", DASHES, r"\[Messurement Result\]", DASHES,
        r"\[CPU\] : Active,Idle,IoWait : .*",
        r"\[TIME\] : {7}\d sec \d{6}us\. \t\d+\.\d\d Transactions/sec",
        r"\[CON SWITCHES\] : \d+ \d+", r"setState: 3", r"Err string : No error",
    ]
    lines = lines_of(proc.stdout)
    assert len(lines) == len(expected), lines
    for pattern, line in zip(expected, lines):
        assert re.fullmatch(pattern, line), (pattern, line)
    sqlite_version = subprocess.run(["sqlite3", "--version"], capture_output=True, text=True).stdout.split()[0]
    assert f"sqlite_version={sqlite_version}" in lines


def test_banner_help_and_compat_help(reference_binary, tmp_path):
    binary = reference_binary("mobibench")
    banner = subprocess.run([str(binary)], capture_output=True, text=True, timeout=10)
    assert banner.returncode == 0
    assert banner.stdout == "\tMobibench 1.0.8\n\n\tUsage: For usage information type mobibench -h \n\n"
    help_text = subprocess.run([str(binary), "-h"], capture_output=True, text=True, timeout=10).stdout
    assert help_text.startswith(" Mobibench 1.0.8\n")
    for needle in ("--compat=1.0.1", "--json=FILE", "exit 1 (the original exits 0)", "MOBIBENCH_TRACE_MARKER"):
        assert needle in help_text
    old = subprocess.run([str(binary), "--compat=1.0.1", "-h"], capture_output=True, text=True, timeout=10)
    assert old.stdout.startswith(" Mobibench 1.0.1\n")


def test_json_matches_the_text_and_has_latency_percentiles(reference_binary, tmp_path):
    out = tmp_path / "r.json"
    proc = run(reference_binary("mobibench"), tmp_path, "-q", "-p", str(tmp_path / "w"), "-f", "2048", "-r", "4",
               "-a", "1", "-y", "2", f"--json={out}")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    res = data["results"]
    assert data["workload"] == "file" and data["config"]["io_count"] == 512 and data["error"] is None
    text = parse_mobibench_result(proc.stdout)
    assert text["workload.elapsed"]["value"] == pytest.approx(res["elapsed_s"], abs=2e-6)
    assert res["throughput_bytes_per_s"] == pytest.approx(2048 * 1024 / res["elapsed_s"], rel=1e-4)
    assert res["iops"] == pytest.approx(512 / res["elapsed_s"], rel=1e-4)
    lat = res["latency_ns"]
    assert lat["count"] == 512
    assert 0 < lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["p99.9"] <= lat["max"]
    # each latency covers write + fsync, which together cannot take longer than the whole window
    assert lat["mean"] * 512 <= res["elapsed_s"] * 1e9


def test_json_to_stdout_after_the_text_and_parsed_together(reference_binary, tmp_path):
    proc = run(reference_binary("mobibench"), tmp_path, "-q", "-p", str(tmp_path / "w"), "-d", "0", "-n", "10",
               "--json=-")
    assert proc.returncode == 0, proc.stderr
    text, blob = proc.stdout.split("Err string : No error\n")
    assert json.loads(blob)["results"]["latency_ns"]["what"] == "transaction"
    metrics = parse_mobibench_result(proc.stdout)
    assert metrics["workload.tps"]["unit"] == "tx/s"
    # the elapsed time is rounded to the microsecond: on a 4 ms run that alone moves tps by 2.5e-4
    elapsed = metrics["workload.elapsed"]["value"]
    assert metrics["workload.tps"]["value"] == pytest.approx(10 / elapsed, rel=max(1e-4, 1.5e-6 / elapsed))
    assert metrics["workload.latency.p99"]["unit"] == "ns" and metrics["workload.latency.p99"]["value"] > 0
    assert "workload.throughput" not in metrics and "workload.iops" not in metrics


def test_trace_markers_bracket_the_window_and_are_optional(reference_binary, tmp_path):
    binary = reference_binary("mobibench")
    marker = tmp_path / "marker"
    marker.write_text("before\n")
    proc = run(binary, tmp_path, "-q", "-p", str(tmp_path / "w"), "-f", "64", marker=None)
    assert proc.returncode == 0
    # the workload's name first (mobiperf tells SQLite from file IO by it), then the window
    assert marker.read_text() == "before\nmobibench: workload file\nmobibench: timed_start\nmobibench: timed_end\n"
    # an unwritable marker file (here: missing) means no markers, and the run still succeeds
    proc = run(binary, tmp_path, "-q", "-p", str(tmp_path / "w"), "-f", "64",
               marker=str(tmp_path / "no" / "marker"))
    assert proc.returncode == 0 and "Err string : No error" in proc.stdout
    assert not (tmp_path / "no").exists()


def test_latency_and_per_second_files(reference_binary, tmp_path):
    lat, kps = tmp_path / "lat.txt", tmp_path / "kps.txt"
    proc = run(reference_binary("mobibench"), tmp_path, "-q", "-p", str(tmp_path / "w"), "-f", "256", "-r", "4",
               "-a", "3", "-L", str(lat), "-k", str(kps))
    assert proc.returncode == 0, proc.stderr
    lines = lat.read_text().split("\n")
    assert lines[:2] == ["", "#In 3 IO mode and 0 sync mode"]
    assert len([line for line in lines if re.fullmatch(r"\d+\tusec", line)]) == 64
    time_line = next(line for line in proc.stdout.splitlines() if line.startswith("[TIME]"))
    assert lat.read_text().endswith(time_line)   # the [TIME] text, without its newline
    assert kps.read_text() == "\n#In 3 IO mode and 0 sync mode\n"   # less than a second of IO


def test_compat_101_refuses_newer_options(reference_binary, tmp_path):
    proc = run(reference_binary("mobibench"), tmp_path, "--compat=1.0.1", "-p", str(tmp_path), "-T", "2",
               "-d", "0")
    assert proc.returncode == 1
    assert "-T is not an option of Mobibench 1.0.1" in proc.stderr


def test_replay_of_a_mobigen_script(reference_binary, tmp_path):
    work = tmp_path / "w"
    work.mkdir()
    script = tmp_path / "script.txt"
    script.write_text(
        '1 1000 open "/data/app/db" O_RDWR|O_CREAT 5\n'
        "1 1500 write 5 4096\n"
        "1 2000 pwrite 5 8192 4096\n"
        "1 2500 fsync 5\n"
        '2 3000 open "/data/ro" O_RDONLY 7\n'
        "2 3500 pread 7 0 8192\n"
        "2 4000 close 7\n"
        "1 21000 close 5\n")
    proc = run(reference_binary("mobibench"), tmp_path, "-p", str(work), "-g", str(script))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[:7] == [
        "replay_script start", f"Write target : {work}/mobigen_temp", "line count : 8", "script_thread_num: 2",
        "open count : 2", "max size : W 12288, R 8192", "original execution time : 0.020 sec"]
    assert "Total IO count : 8 " in proc.stdout
    assert "Total Write: 8192 bytes, Read: 8192 bytes" in proc.stdout
    assert (work / "mobigen_temp" / "temp_1_0.dat").stat().st_size == 12288
    bad = tmp_path / "bad.txt"
    bad.write_text("1 100 frobnicate 3\n")
    proc = run(reference_binary("mobibench"), tmp_path, "-p", str(work), "-g", str(bad))
    assert proc.returncode == 1 and "bad.txt:1: not a MobiGen line" in proc.stderr


# ---------------------------------------------------------------- the parser on fixed texts

SAMPLE = """-----------------------------------------
[mobibench measurement setup]
-----------------------------------------
File size per thread : 65536 KB
IO size : 512 KB
IO count : 128 
Access Mode 0, Sync Mode 0
# of Threads : 1
setState: 1
setState: 2
00%\r01%\r99%\r100%\r-----------------------------------------
[Messurement Result]
-----------------------------------------
[CPU] : Active,Idle,IoWait : 33.33 44.44 22.22
[TIME] :       0 sec 041223us. \t1627947117 B/sec, \t1589792.11 KB/sec, \t1552.53 MB/sec.
[CON SWITCHES] : 5 3
setState: 3
Err string : No error
"""


def test_parse_the_specs_sample_output():
    metrics = parse_mobibench_result(SAMPLE)
    assert metrics == {
        "workload.elapsed": {"value": 0.041223, "unit": "s"},
        "workload.throughput": {"value": 1627947117.0, "unit": "B/s"},
        "workload.cpu.active": {"value": 33.33, "unit": "%"},
        "workload.cpu.idle": {"value": 44.44, "unit": "%"},
        "workload.cpu.iowait": {"value": 22.22, "unit": "%"},
        "workload.ctx_switches": {"value": 5.0, "unit": "count"},
        "workload.ctx_switches.voluntary": {"value": 3.0, "unit": "count"},
    }


def test_parse_random_mode_iops_and_db_tps_and_nan_cpu():
    rand = SAMPLE.replace("MB/sec.\n", "MB/sec. 3105.50 IOPS(512KB) \n")
    assert parse_mobibench_result(rand)["workload.iops"] == {"value": 3105.5, "unit": "IOPS"}
    db = SAMPLE.replace(
        "[TIME] :       0 sec 041223us. \t1627947117 B/sec, \t1589792.11 KB/sec, \t1552.53 MB/sec.",
        "[TIME] :      12 sec 000500us. \t83.33 Transactions/sec").replace("33.33 44.44 22.22", "-nan -nan -nan")
    metrics = parse_mobibench_result(db)
    assert metrics["workload.tps"] == {"value": 83.33, "unit": "tx/s"}
    assert metrics["workload.elapsed"]["value"] == pytest.approx(12.0005)
    assert math.isnan(metrics["workload.cpu.idle"]["value"])
    assert "workload.throughput" not in metrics


@pytest.mark.parametrize("text, message", [
    ("", "empty"),
    ("hello world\n", "not Mobibench output"),
    (SAMPLE.replace("[TIME] :       0 sec", "[TIME] : zero sec"), "unreadable [TIME] line"),
    (SAMPLE.replace("Err string : No error", "Err string : File write error"), "the run failed: File write error"),
    ("setState: 1\n/x/test.dat0 Open failed 13\nsetState: 4\nErr string : Open failed\n",
     "the run failed: Open failed"),
    (SAMPLE + '{"mobibench_version": "1.0.8", "results": ', "the JSON part does not parse"),
])
def test_parse_rejects_what_is_not_a_result(text, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_mobibench_result(text)
    with pytest.raises(MobibenchOutputError):
        parse_mobibench_result(text)


def test_a_runs_generator_output_is_read_in_one_place(tmp_path):
    """read_generator_output: the figures of a stdout file when the generator wrote it, {} for another workload's
    output or no file, an error for the generator's output without a result (run metrics and sweep units alike)."""
    out = tmp_path / "stdout.txt"
    assert read_generator_output(out) == {}
    out.write_text("1+0 records in\n1+0 records out\n")                      # dd's output: not the generator's
    assert read_generator_output(out) == {}
    out.write_text(SAMPLE)
    assert read_generator_output(out) == parse_mobibench_result(SAMPLE)
    assert read_generator_output(out)["workload.elapsed"]["unit"] == "s"
    out.write_text(SAMPLE.replace("Err string : No error", "Err string : File write error"))
    with pytest.raises(MobibenchOutputError, match="the run failed: File write error"):
        read_generator_output(out)
