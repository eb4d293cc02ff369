"""The parameter vocabulary: the names stacks, sweeps and studies speak in, declared once.

    FILESYSTEMS       what an emulated stack formats its data partition with (raw: no filesystem, the bare loop
                      device)
    EXT4_DATA_MODES   ext4's journal modes (data=)
    SCHEDULERS        the blk-mq IO schedulers a loop device may get
    FUSE_LAYERS       a FUSE layer's name -> the reference daemon that serves it and its preset when none is given
                      (fuse: the legacy Android sdcard daemon, i.e. bfuse with its legacy preset)
    BFUSE_PRESETS     bfuse's presets (reference-impl/bfuse/bfuse.c, bf_preset)
    FJORD_PRESETS     fjord's presets (reference-impl/fjord/fj_policy.c, fj_preset_names)
    ACCESS_MODES      the workload generator's -a codes (reference-impl/mobibench/mb.h, enum mb_access)
    SYNC_MODES        its -y codes (enum mb_sync)
    SQLITE_JOURNALS   its -j codes (mb_db.c, mb_journal_sql, in order)
    SQLITE_SYNC       its -s codes (SQLite's PRAGMA synchronous levels; the generator also takes 3, EXTRA)
    SQLITE_OPS        its -d codes: a SQLite workload's name -> the operation
    WORKLOADS         what a sweep cell runs: the generator's file IO, or its SQLite inserts/updates/deletes

tests/unit/test_vocabulary.py holds the C side to these names: it reads the presets, enums and tables of the C
sources, asks the built daemons to take each preset (and refuse one they lack), and reads the generator's -h.
"""

from __future__ import annotations

FILESYSTEMS = ("ext4", "xfs", "btrfs", "f2fs", "raw")
RAW = "raw"
EXT4_DATA_MODES = ("ordered", "journal", "writeback")
SCHEDULERS = ("none", "mq-deadline", "bfq", "kyber")
FUSE_LAYERS = {
    # layer name: (daemon in the reference binaries, preset used when none is given)
    "fuse": ("bfuse", "legacy"),
    "bfuse": ("bfuse", "bfuse"),
    "fjord": ("fjord", "fjord-ram"),
}
LAYERS = ("native", *FUSE_LAYERS)  # native: no FUSE layer over the filesystem
BFUSE_PRESETS = ("legacy", "bfuse", "nobuf", "zerocopy", "passthrough")
FJORD_PRESETS = ("native", "logging", "rambuf", "both", "fjord-ram", "fjord-both")
PRESETS = {"fuse": BFUSE_PRESETS, "bfuse": BFUSE_PRESETS, "fjord": FJORD_PRESETS}

ACCESS_MODES = {"seq-write": 0, "rand-write": 1, "seq-read": 2, "rand-read": 3, "append": 4}
SYNC_MODES = {
    "buffered": 0,
    "osync": 1,
    "fsync": 2,
    "direct": 3,
    "osync-direct": 4,
    "mmap": 5,
    "mmap-async": 6,
    "mmap-sync": 7,
    "fdatasync": 8,
}
SQLITE_JOURNALS = {"delete": 0, "truncate": 1, "persist": 2, "wal": 3, "memory": 4, "off": 5}
SQLITE_SYNC = {"off": 0, "normal": 1, "full": 2}
SQLITE_OPS = {"sqlite-insert": 0, "sqlite-update": 1, "sqlite-delete": 2}
WORKLOADS = ("file", *SQLITE_OPS)
