"""A run directory on a 20 MB tmpfs that the trace fills up mid-run: one error line, exit 1, the run kept and
marked incomplete with the reason, its trace marked truncated, nothing left on the machine, and the run analysable
(on a copy with room: the full tmpfs cannot take the tables)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import needs_root
from leftover_checks import wait_for_journal, wait_until_gone

pytestmark = needs_root
MOBIPERF = [sys.executable, "-m", "mobiperf"]
# 80 000 direct 4 KiB writes: ~6 trace lines each, about 50 MB of ftrace text for a 20 MB file system.
WORKLOAD = ["sh", "-c", "for i in $(seq 1 40); do dd if=/dev/zero of=f$i bs=4k count=2000 oflag=direct "
            "2>/dev/null; done"]


@pytest.fixture
def small_tmpfs(tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", str(mnt)], check=True, timeout=30)
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], timeout=30)


def test_a_full_run_directory_stops_the_run_in_one_line(small_tmpfs, tmp_path, clean_machine):
    out = small_tmpfs / "run"
    journals = tmp_path / "journals"
    proc = subprocess.Popen([*MOBIPERF, "run", "--stack", "ext4", "--image-size", "256M", "--no-report", "-o",
                             str(out), "--", *WORKLOAD], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, MOBIPERF_PROGRESS="0", MOBIPERF_JOURNAL_DIR=str(journals)),
                            start_new_session=True)
    try:
        header, entries = wait_for_journal(proc.pid, kinds={"dir", "loop", "mount", "tracefs_instance"},
                                           proc=proc, directory=journals)
        stdout, stderr = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=60)
    assert proc.returncode == 1
    lines = stderr.splitlines()
    assert len(lines) == 1 and re.fullmatch(rf"mobiperf: error: collect rep 0: no space left on device"
                                            rf"( \({out}/raw/rep0\))?; the partial run is kept at {out} "
                                            rf"\(marked incomplete\)", lines[0]), stderr
    assert wait_until_gone(header, entries) == []
    meta = json.loads((out / "run.json").read_text())
    assert meta["status"] == "incomplete"
    assert meta["stopped"]["stage"] == "collect rep 0"
    assert meta["stopped"]["reason"].startswith("no space left on device")
    rep = meta["repetitions"][0]
    # every trace being written when the disk filled is cut short: the main instance's and the syscalls' one
    assert rep["exit_code"] is None and "ftrace.txt" in rep["truncated"]["traces"]
    assert set(rep["truncated"]["traces"]) <= {"ftrace.txt", "syscalls.txt"}
    assert "filled up" in rep["truncated"]["why"]
    assert not (out / ".reserve").exists()   # given back so that run.json could say all this
    traces = sum((out / "raw" / "rep0" / name).stat().st_size for name in rep["truncated"]["traces"])
    assert traces > 15 << 20   # the traces are what filled the 20 MB

    # `mobiperf analyze` in place: the full file system cannot take the tables; one line, no traceback
    done = subprocess.run([*MOBIPERF, "analyze", str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and done.stderr.startswith("mobiperf: error: No space left on device"), done.stderr
    assert "Traceback" not in done.stderr
    # Copied where there is room, the truncated run is analysable and says it was cut
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    done = subprocess.run([*MOBIPERF, "analyze", str(copy), "--format", "json"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    meta = json.loads((copy / "run.json").read_text())
    writes = [m for m in meta["metrics"] if m["name"] == "block.requests" and m["labels"] == {"op": "write"}]
    assert writes and writes[0]["value"] > 1000   # thousands of the 80 000 writes made it into the trace
    shown = subprocess.run([*MOBIPERF, "show", str(copy)], capture_output=True, text=True, timeout=60).stdout
    assert "stopped  collect rep 0: no space left on device" in shown and "TRUNCATED traces" in shown
    # The run stopped when the disk was full, not when the workload was done (its 40 files are not all there)
