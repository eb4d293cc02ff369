"""`mobiperf record -t adb:SERIAL --app PACKAGE` on the Android-shaped device: an installed app, launched the way the
launcher launches one (monkey -> the zygote stand-in forks the app's process, tests/support/app_standin.py), is
found by its uid; its processes are the workload, its threads named, its files on top.

What the stand-in app does (app_standin.c), the known answer: its main thread writes files/asset.bin (256 KiB) and
files/texture.bin (64 KiB), one fdatasync each, then reads asset.bin; SQLiteThread 16 x (4 KiB to notes.db-journal
+ fdatasync, 4 KiB to notes.db + fdatasync); RenderThread reads texture.bin. The host kernel has no android_fs events, so the files are named through the inodes of the
syncs (ext4_sync_file) and the listing of the app's data directory record takes.
"""

from __future__ import annotations

import json

import polars as pl
import pytest

from android_device import mobiperf_via
from app_standin import install_app
from mobiperf.core.runstore import RunDir

pytest_plugins = ["adb_fixtures", "android_device"]

PACKAGE = "com.example.notes"
UID = 10123


@pytest.fixture(scope="module")
def recorded(android_device, tmp_path_factory):
    install_app(android_device, PACKAGE, UID)
    out = tmp_path_factory.mktemp("record") / "notes"
    done = mobiperf_via(android_device, "record", "-t", f"adb:{android_device.serial}", "--app", PACKAGE,
                        "--duration", "8s", "-o", str(out), timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done, RunDir.open(out)


def test_the_app_is_launched_and_its_processes_are_the_workload(recorded):
    done, run = recorded
    meta = run.read_meta()
    app = meta["repetitions"][0]["app"]
    assert app["package"] == PACKAGE and app["uid"] == UID and app["launched"].startswith("monkey -p " + PACKAGE)
    assert meta["command"] == ["record", "--app", PACKAGE] and meta["status"] == "complete"
    tasks = json.loads((run.raw_dir(0) / "tasks.json").read_text())
    assert tasks["app_pids"] and set(tasks["app_pids"]) <= set(tasks["workload_tids"])
    markers = run.read_table("trace_marker")["text"].to_list()
    assert markers.index("timed_start") < markers.index("timed_end")  # the launch is the timed window
    # the app's process was forked by the zygote stand-in, not by the shell that ran monkey: found by uid
    assert f"{PACKAGE} (uid {UID}): processes" in done.stdout


def test_its_threads_and_files_are_on_top(recorded):
    _, run = recorded
    owners = run.read_table("io_by_owner")
    app = owners.filter(pl.col("scope") == "workload")
    assert set(app["process"]) == {PACKAGE}
    assert {"SQLiteThread", PACKAGE[:15]} <= set(app["thread"])
    files = app.filter(pl.col("thread") == "SQLiteThread").group_by("path").agg(pl.col("self_ns").sum())
    named = {p.rsplit("/", 1)[-1] for p in files["path"].drop_nulls()}
    assert {"notes.db", "notes.db-journal"} <= named
    by_file = run.read_table("io_by_file").filter((pl.col("scope") == "workload") & (pl.col("layer") == "fs"))
    syncs = dict(by_file.group_by("path").agg(pl.col("requests").sum()).iter_rows())
    # SQLiteThread's 16 + 16 fdatasyncs, and the one the main thread made of each file it wrote before reading
    assert {p.rsplit("/", 1)[-1]: n for p, n in syncs.items() if p} == {"notes.db": 16, "notes.db-journal": 16,
                                                                       "asset.bin": 1, "texture.bin": 1}


def test_the_text_summary_leads_with_the_app(recorded):
    done, _ = recorded
    lines = done.stdout.splitlines()
    head = lines.index(next(line for line in lines if line.startswith("== Who: IO time")))
    table = lines[head + 3:]
    assert any(PACKAGE in line and "SQLiteThread" in line for line in table[:10]), done.stdout
