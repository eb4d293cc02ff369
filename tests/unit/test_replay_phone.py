"""The replay of a phone's file events (analyzers/replay/phone.py): android_fs reads and writes, the file system's
syncs, one handle per thread and file, the files' sizes from the i_size the events recorded."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from mobiperf.analyzers.replay.phone import build_from_android_fs
from mobiperf.analyzers.replay.script import script_text
from mobiperf.collectors.parse.ftrace_text import parse_ftrace_text
from mobiperf.core.schema import FSYNC_EVENT

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "android" / "k4.14-android-fs.txt"


def events() -> pl.DataFrame:
    return parse_ftrace_text(FIXTURE).events["android_fs_event"]


def test_the_fixtures_file_events_are_its_calls():
    w = build_from_android_fs(events(), None, 0)
    calls = w.calls.filter(~pl.col("is_synthetic"))
    # counted by hand from the fixture: a 16 KiB read of notes.db, three 4 KiB writes to notes.db-wal at 0, 4096,
    # 8192, a 128 KiB read of the JPEG, a 64 KiB read of libhwui.so at 1 MiB, a 4 KiB write to an unnamed inode
    assert calls.select("tid", "op", "path", "offset", "size").rows() == [
        (4711, "pread", "data/data/com.example.notes/databases/notes.db", 0, 16384),
        (4711, "pwrite", "data/data/com.example.notes/databases/notes.db-wal", 0, 4096),
        (4711, "pwrite", "data/data/com.example.notes/databases/notes.db-wal", 4096, 4096),
        (4711, "pwrite", "data/data/com.example.notes/databases/notes.db-wal", 8192, 4096),
        (2134, "pread", "storage/emulated/0/DCIM/Camera/IMG_20190412_101500.jpg", 0, 131072),
        (4712, "pread", "system/lib64/libhwui.so", 1048576, 65536),
        (91, "pwrite", "unnamed/ino-9", 0, 4096)]
    # each from its start to its end event: 2031.400100 -> .400650 (550 us) ...; the kworker's write has no end
    assert (calls["end_ns"] - calls["start_ns"]).to_list() == [550_000, 12_000, 11_000, 12_000, 1_960_000,
                                                                830_000, 0]
    assert w.nthreads == 4 and w.nhandles == 5
    assert w.counts() == {"close": 5, "open": 5, "pread": 3, "pwrite": 4}
    # every file existed, with the i_size of its first event
    assert dict(w.state.files) == {
        "data/data/com.example.notes/databases/notes.db": 98304,
        "data/data/com.example.notes/databases/notes.db-wal": 0,
        "storage/emulated/0/DCIM/Camera/IMG_20190412_101500.jpg": 2412544,
        "system/lib64/libhwui.so": 5193728, "unnamed/ino-9": 0}
    assert "data/data/com.example.notes/databases" in w.state.dirs
    assert w.waits.height == 0  # nothing a thread did orders another's (the replay's opens are no events)
    text = script_text(w)
    assert "c 0 0 open 0 rdonly data/data/com.example.notes/databases/notes.db\nc 0 0 pread 0 0 16384\n" in text
    # the wal's first write 350 us after the db read ended (2031.400650 -> .401000)
    assert "c 0 350000 open 1 rdwr data/data/com.example.notes/databases/notes.db-wal\n" in text


def test_one_process_and_its_syncs():
    fs = events()
    tgid_4690 = build_from_android_fs(fs, None, 0, "4690")
    assert set(tgid_4690.calls["tid"].to_list()) == {4711, 4712}
    by_name = build_from_android_fs(fs, None, 0, "com.example.notes")
    assert by_name.calls.height == tgid_4690.calls.height
    assert dict(tgid_4690.left_out)["file events of other processes than 4690"] == 2
    syncs = FSYNC_EVENT.validate(pl.DataFrame([
        {"rep": 0, "ts": 2031_401_100_000, "cpu": 2, "pid": 4711, "comm": "SQLiteThread", "fs": "f2fs",
         "phase": "enter", "dev_major": 259, "dev_minor": 32, "ino": 131097, "datasync": None, "ret": None},
        {"rep": 0, "ts": 2031_402_100_000, "cpu": 2, "pid": 4711, "comm": "SQLiteThread", "fs": "f2fs",
         "phase": "exit", "dev_major": 259, "dev_minor": 32, "ino": 131097, "datasync": 1, "ret": 0},
        {"rep": 0, "ts": 2031_403_000_000, "cpu": 2, "pid": 4711, "comm": "SQLiteThread", "fs": "f2fs",
         "phase": "enter", "dev_major": 259, "dev_minor": 32, "ino": 555, "datasync": None, "ret": None}]))
    w = build_from_android_fs(fs, syncs, 0, "4690")
    synced = w.calls.filter(pl.col("op").is_in(["fsync", "fdatasync"]))
    # f2fs says datasync on the exit: an fdatasync of the wal (ino 131097), 1 ms long
    assert synced.select("op", "path").rows() == [("fdatasync", "data/data/com.example.notes/databases/notes.db-wal")]
    assert (synced["end_ns"] - synced["start_ns"]).to_list() == [1_000_000]
    assert dict(w.left_out)["syncs of a file no android_fs event named"] == 1
