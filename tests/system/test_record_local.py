"""`mobiperf record -t local`: this host's own devices traced system-wide, no stack built, while a process of this
test writes and fsyncs a file on the host's file system: it is named with its process and thread, its fsync's
block writes are its own, and its wait on them is blocked time (root needed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import polars as pl
import pytest

from mobiperf.core.runstore import RunDir

pytestmark = pytest.mark.slow  # a recording of the whole machine, parsed: tens of seconds on a loaded one

WRITER = ("import os, sys, time\n"
          "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)\n"
          "for _ in range(8):\n"
          "    os.write(fd, b'w' * 65536)\n"
          "    os.fsync(fd)\n"
          "    time.sleep(0.05)\n")


@pytest.mark.skipif(os.geteuid() != 0, reason="recording needs root (tracefs)")
def test_record_names_the_writer_and_its_wait(tmp_path):
    out = tmp_path / "rec"
    rec = subprocess.Popen([sys.executable, "-m", "mobiperf", "record", "-t", "local", "--duration", "6s", "-o",
                            str(out), "--no-report"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (out / "raw" / "rep0" / "ftrace.txt").exists():  # the reader runs: tracing is on
            assert rec.poll() is None and time.monotonic() < deadline, rec.stderr.read() if rec.poll() else "late"
            time.sleep(0.1)
        time.sleep(0.5)
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path / "written.bin")])
        writer.wait(timeout=60)
        stdout, stderr = rec.communicate(timeout=600)
    finally:
        if rec.poll() is None:
            rec.kill()
    assert rec.returncode == 0, stderr[-2000:]
    run = RunDir.open(out)
    meta = run.read_meta()
    assert meta["command"] == ["record"] and meta["status"] == "complete" and meta["scope"] == "all"
    owners = run.read_table("io_by_file").filter(pl.col("pid") == writer.pid)
    assert set(owners["process"]) == {"python3"} or set(owners["process"]) <= {"python", "python3",
                                                                              sys.executable.rsplit("/", 1)[-1]}
    syncs = owners.filter((pl.col("layer") == "fs") & (pl.col("op") == "ext4_sync_file"))
    assert int(syncs["requests"].sum()) == 8  # its 8 fsyncs, each an ext4_sync_file span of its own thread
    writes = owners.filter((pl.col("layer") == "block") & (pl.col("op") == "write"))
    assert int(writes["bytes"].sum()) >= 8 * 65536  # its data, written in its fsyncs (and the journal they waited on)
    blocked = run.read_table("blocked").filter(pl.col("tid") == writer.pid)
    assert blocked["blocked_ns"].sum() > 0 and set(blocked["waited_on"]) & {"block", "journal", "fs"}
    assert "== Who: IO time" in stdout and json.loads((out / "raw" / "rep0" / "tasks.json").read_text())
