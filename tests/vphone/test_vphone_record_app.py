"""`mobiperf record -t adb:SERIAL --app PACKAGE` on the virtual phone: a kernel of its own (Debian's 6.1), /data on
f2fs, no android_fs events. The app stand-in (tests/support/app_standin.py: pm, monkey, a zygote stand-in forking
app_standin.c as the package's uid) is launched the way the launcher launches one; mobiperf finds it by its uid.

The known answer (app_standin.c): SQLiteThread writes 4 KiB to databases/notes.db-journal and 4 KiB to
databases/notes.db 16 times, fdatasyncing each write; the main thread writes files/asset.bin (256 KiB) and
files/texture.bin (64 KiB), one fdatasync each, then reads asset.bin, and RenderThread reads texture.bin (both
dropped from the page cache first). Each f2fs_sync_file names its inode, which the listing of the app's data
directory names. Slow: the phone runs under TCG here (a recording of 10 s takes about two minutes).
"""

from __future__ import annotations

import os
import subprocess
import sys

import polars as pl
import pytest

from app_standin import install_app_on_phone, uninstall_app_on_phone
from mobiperf.core.runstore import RunDir

pytest_plugins = ["adb_fixtures", "vphone_fixtures"]
pytestmark = pytest.mark.slow

PACKAGE = "com.example.notes"
UID = 10123
KIB = 1024


@pytest.fixture(scope="module")
def recorded(vphone, tmp_path_factory):
    install_app_on_phone(vphone, PACKAGE, UID)
    try:
        out = tmp_path_factory.mktemp("record") / "notes"
        env = dict(os.environ, ANDROID_ADB_SERVER_PORT=str(vphone.server_port))
        done = subprocess.run([sys.executable, "-m", "mobiperf", "record", "-t", f"adb:{vphone.serial}", "--app",
                               PACKAGE, "--duration", "10s", "--no-report", "-o", str(out)],
                              capture_output=True, text=True, timeout=1200, env=env)
        assert done.returncode == 0, done.stderr[-3000:]
        yield done, RunDir.open(out)
    finally:
        uninstall_app_on_phone(vphone, PACKAGE)


def test_the_app_launched_through_the_zygote_stand_in_is_the_workload(recorded, vphone):
    done, run = recorded
    app = run.read_meta()["repetitions"][0]["app"]
    assert (app["package"], app["uid"]) == (PACKAGE, UID) and app["launched"].startswith("monkey -p " + PACKAGE)
    owners = run.read_table("io_by_owner").filter(pl.col("scope") == "workload")
    assert set(owners["process"]) == {PACKAGE} and set(owners["pid"]) == set(app["processes"])
    assert {"SQLiteThread", "RenderThread", PACKAGE[:15]} <= set(owners["thread"])
    assert run.read_meta()["target"]["kernel"] == vphone.kernel


def test_its_files_bytes_and_syncs_are_the_known_answer(recorded):
    _, run = recorded
    rows = run.read_table("io_by_file").filter(pl.col("scope") == "workload").with_columns(
        file=pl.col("path").str.split("/").list.last())
    syncs = rows.filter(pl.col("op") == "f2fs_sync_file").group_by("file").agg(pl.col("requests").sum())
    assert dict(syncs.iter_rows()) == {"notes.db": 16, "notes.db-journal": 16, "asset.bin": 1, "texture.bin": 1}
    block = rows.filter(pl.col("layer") == "block").group_by("thread", "file", "op").agg(
        pl.col("requests").sum(), pl.col("bytes").sum())
    got = {(t, f, op): (n, b) for t, f, op, n, b in block.iter_rows()}
    main = PACKAGE[:15]
    # SQLiteThread: each fdatasync writes the page's 4 KiB block, with f2fs's node block of the file when the sync
    # must persist a new block address or size (every append to notes.db; the journal's first write: on a fresh
    # /data, 32 and 17 requests; overwriting in place, 16), and flushes the device's cache once
    for name in ("notes.db", "notes.db-journal"):
        n, size = got[("SQLiteThread", name, "write")]
        assert size == n * 4 * KIB and 16 <= n <= 32, (name, n, size)
        assert got[("SQLiteThread", name, "flush")][0] == 16
    # the main thread's files: every data byte, by it, to its file (plus at most a node block of each)
    assert 256 * KIB <= got[(main, "asset.bin", "write")][1] <= 260 * KIB
    assert 64 * KIB <= got[(main, "texture.bin", "write")][1] <= 68 * KIB
    # the reads: every byte of the two files read back, by the thread that read it (no file: no android_fs event
    # or sync names the inode of a read)
    reads = rows.filter((pl.col("layer") == "block") & (pl.col("op") == "read")).group_by("thread").agg(
        pl.col("bytes").sum())
    assert dict(reads.iter_rows()) == {main: 256 * KIB, "RenderThread": 64 * KIB}
    # and the app's block bytes are those of the block requests its threads issued, counted from the trace alone
    tids = set(run.read_table("io_by_owner").filter(pl.col("scope") == "workload")["tid"])
    issued = run.read_table("block_rq").filter(pl.col("pid").is_in(list(tids)) & pl.col("op").is_in(["read", "write"]))
    assert rows.filter(pl.col("layer") == "block")["bytes"].sum() == issued["size_bytes"].sum()


def test_the_text_leads_with_the_app(recorded):
    done, _ = recorded
    lines = done.stdout.splitlines()
    head = lines.index(next(line for line in lines if line.startswith("== Who: IO time")))
    first = lines[head + 3:head + 7]
    assert all(line.startswith("workload") and PACKAGE in line for line in first), done.stdout
    assert any("db-journal" in line for line in first), done.stdout
