"""One list of events (mobiperf/core/trace_events.py): the analyzers' tables decide what collect enables, and every
event the list gives a table is one the parse stage turns into that table."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from mobiperf.analyzers import needed_tables, registry, table_sources
from mobiperf.collectors.parse.android_fs import ANDROID_FS_EVENTS
from mobiperf.collectors.parse.block_requests import KINDS
from mobiperf.collectors.parse.f2fs_events import BIO_EVENTS
from mobiperf.collectors.parse.ftrace_events import FSYNC_BODIES, FUSE_BODIES, JBD2_PHASES
from mobiperf.collectors.parse.sched import SCHED_EVENTS
from mobiperf.collectors.plan import check_trace_choice, plan_collectors
from mobiperf.core.errors import UsageError
from mobiperf.core.trace_events import EVENT_SETS, TABLE_EVENTS
from mobiperf.target.target import Target

# a kernel with every event but Android's (those come in every run of a kernel that has them)
KERNEL = {system: list(s.events) for system, s in EVENT_SETS.items() if system != "android_fs"}


def planned(tmp_path, stack_fs: str, layers: list, tables) -> set[str]:
    transport = SimpleNamespace(name="local", is_local=True,
                                read_file=lambda path: b"", run=lambda *a, **k: SimpleNamespace(returncode=1))
    caps = SimpleNamespace(events=KERNEL, tracefs_path="/sys/kernel/tracing")
    stack = SimpleNamespace(traced_devices=[(7, 0)], dev_major=7, dev_minor=0, filesystem=stack_fs, layers=layers,
                            fuse_servers=[])
    (ftrace,) = plan_collectors(Target(transport, caps), stack, tmp_path, sources=("ftrace",), tables=tables,
                                recorder="tracefs")
    return {f"{e.system}:{e.name}" for e in ftrace.events}


def test_the_analyzers_needs_decide_the_events_of_a_run(tmp_path):
    block = {f"block:{e}" for e in EVENT_SETS["block"].events if e not in ("block_plug", "block_unplug")}
    jbd2 = {f"jbd2:{e}" for e in EVENT_SETS["jbd2"].events}
    fsync = {"ext4:ext4_sync_file_enter", "ext4:ext4_sync_file_exit"}
    fuse = {"fuse:fuse_request_send", "fuse:fuse_request_end"}
    task = {"task:task_newtask", "task:task_rename"}  # every run's: who the threads born during it are
    assert planned(tmp_path, "ext4", [{"mountpoint": "/m"}], needed_tables()) == block | jbd2 | fsync | fuse | task
    assert planned(tmp_path, "ext4", [], needed_tables()) == block | jbd2 | fsync | task
    # f2fs: its fsyncs, its bios (node vs data) and its checkpoints (the journal layer), not its per-page events
    assert planned(tmp_path, "f2fs", [], needed_tables()) == block | task | {
        "f2fs:f2fs_sync_file_enter", "f2fs:f2fs_sync_file_exit", "f2fs:f2fs_submit_write_bio",
        "f2fs:f2fs_submit_read_bio", "f2fs:f2fs_write_checkpoint"}
    # an analyzer set that reads no fsync or jbd2 table gets none of their events: the needs drive it
    without = needed_tables() - {"fsync_event", "jbd2_commit", "jbd2_run_stats", "task"}
    assert planned(tmp_path, "ext4", [], without) == block
    # the scheduler's events (every context switch of the machine) only when asked
    assert not {e for e in planned(tmp_path, "ext4", [], needed_tables()) if e.startswith("sched:")}


def test_every_table_an_analyzer_names_is_made_somewhere():
    produced = {a.produces for a in registry()}
    for table in needed_tables() - produced:
        assert table_sources([table]), f"{table}: no event or source makes it"


@pytest.mark.parametrize("table,parsed", [
    ("block_event", set(KINDS)), ("fsync_event", set(FSYNC_BODIES)), ("jbd2_commit", set(JBD2_PHASES)),
    ("jbd2_run_stats", {"jbd2_run_stats"}), ("fuse_event", set(FUSE_BODIES)),
    ("android_fs_event", set(ANDROID_FS_EVENTS)), ("f2fs_bio", set(BIO_EVENTS)),
    ("f2fs_checkpoint", {"f2fs_write_checkpoint"}), ("sched_switch", {"sched_switch"}),
    ("sched_wakeup", {"sched_waking", "sched_wakeup"}), ("sched_blocked_reason", {"sched_blocked_reason"}),
    ("task", {"task_newtask", "task_rename"})])
def test_each_listed_event_is_parsed_into_its_table(table, parsed):
    assert {named.split(":", 1)[1] for named in TABLE_EVENTS[table]} <= parsed
    if table.startswith(("sched", "task")):  # sched.py: each of its events lands in the table it is listed for
        assert parsed <= set(SCHED_EVENTS)


def test_trace_choices_are_checked_in_one_place():
    check_trace_choice(("ftrace", "strace"), ("ext4", "block"))
    with pytest.raises(UsageError, match="unknown trace source ftrac; choose from ftrace, ftrace_raw"):
        check_trace_choice(("ftrac",), None)
    with pytest.raises(UsageError, match="unknown event set syscalls; choose from block, ext4"):
        check_trace_choice(None, ("syscalls",))
