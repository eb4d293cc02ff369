"""The tracefs events mobiperf reads, declared once: the ftrace event sets (what `--event-set` names and how each is
filtered to the stack), and which events each event table is made of.

    EVENT_SETS      set name -> EventSet: its tracefs system, its events, the field a filter keeps to the stack
    BLOCK_EVENTS    the block layer's request life cycle, in the order a request meets them (the `block` set)
    TABLE_EVENTS    event table -> the events it is made of, "system:event" (the parse stage's tables)
    DERIVED_TABLES  a table the parse stage builds from an event table (block_rq from block_event) -> that table

Who reads it: collectors/ftrace.py (the specs it enables), collectors/plan.py (which events a run gets: those of
the tables the analyzers need, events_for_tables), analyzers/__init__.py (what to collect for a missing table),
and the parse stage's test of the table each event lands in (tests/unit/test_trace_events.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable


@dataclass(frozen=True)
class EventSet:
    system: str  # the tracefs system (events/<system>/)
    events: tuple[str, ...]
    # how a filter keeps the set to the stack: "dev" (the kernel dev_t of its devices), "bdi" (their bdi name),
    # "connection" (the FUSE connection of its mounts), None (no field to filter on)
    filter_field: str | None


BLOCK_EVENTS = (
    "block_bio_queue",
    "block_bio_backmerge",
    "block_bio_frontmerge",
    "block_getrq",
    "block_rq_insert",
    "block_rq_merge",
    "block_rq_issue",
    "block_rq_requeue",
    "block_rq_complete",
    "block_split",
    "block_plug",
    "block_unplug",
)
# Events that carry no device: a device filter cannot apply to them.
DEVICELESS_EVENTS = frozenset({"block_plug", "block_unplug"})

SYSCALL_EVENTS = tuple(
    f"sys_{edge}_{call}"
    for call in (
        "read",
        "write",
        "pread64",
        "pwrite64",
        "readv",
        "writev",
        "preadv",
        "pwritev",
        "preadv2",
        "pwritev2",
        "lseek",
        "fsync",
        "fdatasync",
        "msync",
        "sync_file_range",
        "fallocate",
        "sync",
        "syncfs",
        "io_submit",
        "io_uring_enter",
        # what parse/fd_flags.py needs to know each fd's open flags (O_SYNC, O_DSYNC, O_DIRECT)
        "open",
        "openat",
        "openat2",
        "creat",
        "close",
        "close_range",
        "dup",
        "dup2",
        "dup3",
        "fcntl",
        "clone",
        "clone3",
        "fork",
        "vfork",
        "execve",
        "unlink",
        "unlinkat",
        "rename",
        "renameat",
        "renameat2",
        # metadata calls that send FUSE requests and start journal handles: the calls of the layer model
        "ftruncate",
        "truncate",
        "mkdir",
        "mkdirat",
        "rmdir",
        "fchown",
        "fchownat",
        "fchmod",
        "fchmodat",
        "utimensat",
        "access",
        "faccessat",
        "faccessat2",
        "newfstatat",
        "newfstat",
        "statx",
        "getdents64",
        # a FUSE daemon may read /dev/fuse by splice (collectors/parse/fuse_dev_calls.py)
        "splice",
        # what a FUSE daemon asks the lower file system to answer GETXATTR, LOOKUP, GETATTR, STATFS, READLINK:
        # its calls there are the layer under FUSE, their block IO included
        "getxattr",
        "lgetxattr",
        "fgetxattr",
        "setxattr",
        "lsetxattr",
        "fsetxattr",
        "listxattr",
        "llistxattr",
        "flistxattr",
        "removexattr",
        "lremovexattr",
        "fremovexattr",
        "newstat",
        "newlstat",
        "statfs",
        "fstatfs",
        "readlinkat",
    )
    for edge in ("enter", "exit")
)

EVENT_SETS: dict[str, EventSet] = {
    "block": EventSet("block", BLOCK_EVENTS, "dev"),
    "ext4": EventSet(
        "ext4",
        (
            "ext4_sync_file_enter",
            "ext4_sync_file_exit",
            "ext4_writepages",
            "ext4_writepages_result",
            "ext4_ext_map_blocks_exit",
            "ext4_free_blocks",
            "ext4_discard_blocks",
        ),
        "dev",
    ),
    "jbd2": EventSet(
        "jbd2",
        (
            "jbd2_start_commit",
            "jbd2_commit_locking",
            "jbd2_commit_flushing",
            "jbd2_commit_logging",
            "jbd2_end_commit",
            "jbd2_run_stats",
        ),
        "dev",
    ),
    # f2fs: each bio with its block type (node/data/meta: analyzers/f2fs_region.py), the checkpoints (its journal
    # commits: analyzers/f2fs_sync.py), the flushes its fsyncs issue and its sync_fs calls
    "f2fs": EventSet(
        "f2fs",
        (
            "f2fs_sync_file_enter",
            "f2fs_sync_file_exit",
            "f2fs_write_checkpoint",
            "f2fs_issue_flush",
            "f2fs_submit_write_bio",
            "f2fs_submit_read_bio",
            "f2fs_sync_fs",
        ),
        "dev",
    ),
    "fuse": EventSet("fuse", ("fuse_request_send", "fuse_request_end"), "connection"),
    # Android kernels: file data IO with its path (no device field: unfiltered); planned when the kernel has them
    "android_fs": EventSet(
        "android_fs",
        (
            "android_fs_dataread_start",
            "android_fs_dataread_end",
            "android_fs_datawrite_start",
            "android_fs_datawrite_end",
        ),
        None,
    ),
    "writeback": EventSet(
        "writeback",
        (
            "writeback_dirty_folio",
            "writeback_dirty_page",
            "writeback_start",
            "writeback_written",
            "writeback_single_inode",
        ),
        "bdi",
    ),
    # the scheduler: who ran, who slept uninterruptibly and where (sched_blocked_reason: Android kernels); every
    # context switch of the machine (no field to filter on), so only when asked (`--event-set sched`, `record`)
    "sched": EventSet("sched", ("sched_switch", "sched_waking", "sched_wakeup", "sched_blocked_reason"), None),
    # threads and processes born or renamed during the trace: who is who (one event per thread: every run)
    "task": EventSet("task", ("task_newtask", "task_rename"), None),
    # the syscalls source's set (an instance of its own, the workload's pids): not an --event-set choice
    "syscalls": EventSet("syscalls", SYSCALL_EVENTS, None),
}
# What `--event-set` may name: every set but the syscalls source's.
USER_EVENT_SETS = tuple(name for name in EVENT_SETS if name != "syscalls")


def _named(system: str, events: Iterable[str]) -> tuple[str, ...]:
    return tuple(f"{system}:{e}" for e in events)


# The event tables the analyzers read, each with the events it is made of. A run gets the events of the tables
# its analyzers need (collectors/plan.py); the heavier events of a set (ext4_writepages, the writeback events:
# one per page or inode, the fs_event table) come only with --event-set.
TABLE_EVENTS: dict[str, tuple[str, ...]] = {
    "block_event": _named("block", (e for e in BLOCK_EVENTS if e not in DEVICELESS_EVENTS)),
    "fsync_event": _named("ext4", ("ext4_sync_file_enter", "ext4_sync_file_exit"))
    + _named("f2fs", ("f2fs_sync_file_enter", "f2fs_sync_file_exit")),
    "jbd2_commit": _named(
        "jbd2",
        ("jbd2_start_commit", "jbd2_commit_locking", "jbd2_commit_flushing", "jbd2_commit_logging", "jbd2_end_commit"),
    ),
    "jbd2_run_stats": _named("jbd2", ("jbd2_run_stats",)),
    "fuse_event": _named("fuse", EVENT_SETS["fuse"].events),
    "android_fs_event": _named("android_fs", EVENT_SETS["android_fs"].events),
    # one event per bio f2fs submits (no more than the block events of the same IO) and per checkpoint step
    "f2fs_bio": _named("f2fs", ("f2fs_submit_write_bio", "f2fs_submit_read_bio")),
    "f2fs_checkpoint": _named("f2fs", ("f2fs_write_checkpoint",)),
    "sched_switch": _named("sched", ("sched_switch",)),
    "sched_wakeup": _named("sched", ("sched_waking", "sched_wakeup")),
    "sched_blocked_reason": _named("sched", ("sched_blocked_reason",)),
    "task": _named("task", EVENT_SETS["task"].events),
}


# Tables the parse stage derives from event tables (collectors/parse/__init__.py, derive_tables).
DERIVED_TABLES = {"block_rq": "block_event", "fuse_req": "fuse_event"}


def table_events(table: str) -> tuple[str, ...]:
    """The events ("system:event") a table is made of, a derived table's through the table it comes from."""
    return TABLE_EVENTS.get(DERIVED_TABLES.get(table, table), ())


def events_for_tables(tables: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """The events that make these tables, by tracefs system (tables without events of their own are passed over:
    syscall_io is the syscalls source's, file_extent the layout snapshot's, results the analyzers')."""
    out: dict[str, list[str]] = {}
    for table in tables:
        for named in table_events(table):
            system, event = named.split(":", 1)
            if event not in out.setdefault(system, []):
                out[system].append(event)
    return {system: tuple(events) for system, events in out.items()}
