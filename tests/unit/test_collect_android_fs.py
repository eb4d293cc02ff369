"""A kernel with Android's android_fs events gets them in every run (collectors/plan.py plan_collectors),
unfiltered (they carry no device), whatever event sets were asked; a kernel without them is not asked for them."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from mobiperf.collectors.plan import plan_collectors
from mobiperf.collectors.ftrace import EVENT_SETS, event_set_specs
from mobiperf.target.target import Target

ANDROID_FS = list(EVENT_SETS["android_fs"].events)


def planned_events(tmp_path: Path, available: dict, event_sets=None) -> list[tuple[str, str, str | None]]:
    transport = SimpleNamespace(name="local", is_local=True)
    caps = SimpleNamespace(events=available, tracefs_path="/sys/kernel/tracing")
    stack = SimpleNamespace(traced_devices=[(259, 32)], dev_major=259, dev_minor=32, filesystem="f2fs", layers=[])
    notes: list[str] = []
    (ftrace,) = plan_collectors(Target(transport, caps), stack, tmp_path, sources=("ftrace",), event_sets=event_sets,
                                notes=notes)
    return [(e.system, e.name, e.filter) for e in ftrace.events]


@pytest.mark.parametrize("event_sets", [None, ("block",), ("f2fs", "writeback")])
def test_android_fs_events_are_traced_when_the_kernel_has_them(tmp_path, event_sets):
    available = {"block": ["block_rq_issue", "block_rq_complete"], "f2fs": ["f2fs_sync_file_enter"],
                 "android_fs": ANDROID_FS + ["android_fs_fsync_start"]}
    events = planned_events(tmp_path, available, event_sets)
    assert [e for e in events if e[0] == "android_fs"] == [("android_fs", name, None) for name in ANDROID_FS]


def test_no_android_fs_events_on_other_kernels(tmp_path):
    events = planned_events(tmp_path, {"block": ["block_rq_issue"], "f2fs": ["f2fs_sync_file_enter"]})
    assert not [e for e in events if e[0] == "android_fs"]


def test_the_android_fs_set_names_what_the_kernel_lacks():
    specs, missing = event_set_specs("android_fs", {"android_fs": ANDROID_FS[:2]}, [(259, 32)])
    assert [s.name for s in specs] == ANDROID_FS[:2]
    assert missing == [f"android_fs:{n}" for n in ANDROID_FS[2:]]
