"""Paths given by the user are made absolute before anything sees them: the FUSE daemons run in another working
directory (libfuse changes to /), and with a relative run directory they used to lose their counters silently.
A daemon that cannot write its counters now fails its set-up, and run.json says which counters each part of the
stack produced."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

from conftest import needs_fuse, needs_root

REPO = Path(__file__).resolve().parents[2]
MOBIPERF = [sys.executable, "-m", "mobiperf"]


def demo_command() -> list[str]:
    """The command `make demo` runs, read from the Makefile (so this test follows it)."""
    text = (REPO / "Makefile").read_text()
    recipe = re.search(r"^demo:.*\n((?:\t.*\n)+)", text, re.M).group(1)
    words = shlex.split(recipe.replace("\\\n", " "))
    assert words[0] == "$(BIN)/mobiperf", words
    return [*MOBIPERF, *words[1:]]


@needs_root
@needs_fuse
def test_the_demo_with_its_default_relative_output_records_the_daemon_counters(tmp_path, clean_machine):
    argv = demo_command()
    assert "-o" not in argv   # the default run directory, runs/<stamp>-..., is relative
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, MOBIPERF_PROGRESS="0", PYTHONPATH=str(REPO)))
    assert done.returncode == 0, done.stderr[-3000:]
    [run] = (tmp_path / "runs").iterdir()
    rep = json.loads((run / "run.json").read_text())["repetitions"][0]
    assert rep["layer_counters"] == {"fuse": "ok"}
    counters = rep["counters"]["fuse-counters"]
    # 200 SQLite inserts in TRUNCATE journal mode through legacy FUSE: every write a 4 KiB pwrite() of the daemon
    assert counters["ops"]["write"]["requests"] >= 200
    assert counters["counters"]["daemon_pwrite_calls"] == counters["ops"]["write"]["requests"]
    assert rep["stack"]["layers"][0]["counters_path"] == str(run / "raw" / "rep0" / "fuse-counters.json")


def test_a_daemon_that_cannot_write_its_counters_does_not_mount(tmp_path, reference_binary):
    bfuse = reference_binary("bfuse")
    src, mnt = tmp_path / "src", tmp_path / "mnt"
    src.mkdir()
    mnt.mkdir()
    done = subprocess.run([str(bfuse), "-f", "-o", f"preset=legacy,counters={tmp_path}/missing/c.json", str(src),
                           str(mnt)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 1
    assert f"bfuse: cannot write counters to '{tmp_path}/missing/c.json': No such file or directory" in done.stderr
    assert not os.path.ismount(mnt) and list(tmp_path.glob("missing*")) == []


@needs_root
@needs_fuse
def test_a_relative_counters_path_is_taken_from_where_the_daemon_was_started(tmp_path, reference_binary):
    bfuse = reference_binary("bfuse")
    for d in ("src", "mnt", "out"):
        (tmp_path / d).mkdir()
    daemon = subprocess.Popen([str(bfuse), "-f", "-o", "preset=legacy,counters=out/c.json", "src", "mnt"],
                              cwd=tmp_path, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 10
        while not os.path.ismount(tmp_path / "mnt"):
            assert daemon.poll() is None and time.monotonic() < deadline, daemon.stderr.read()
            time.sleep(0.05)
        (tmp_path / "mnt" / "f").write_bytes(b"x" * 8192)
    finally:
        subprocess.run(["fusermount3", "-u", str(tmp_path / "mnt")], timeout=30)
        daemon.wait(30)
    counters = json.loads((tmp_path / "out" / "c.json").read_text())
    assert counters["ops"]["write"]["bytes"] == 8192
