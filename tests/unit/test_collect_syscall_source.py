"""Which events make the call layer (collectors/plan.py): the syscalls:* events where the kernel has them,
raw_syscalls filtered to the calls the layer reads on the device's ABI where it has not (Android's GKI builds) or
where asked, and sched_waking beside a FUSE daemon (how its /dev/fuse calls are tied to their requesters)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from mobiperf.core.trace_events import EVENT_SETS
from mobiperf.collectors.plan import plan_collectors
from mobiperf.core.errors import TargetError
from mobiperf.core.syscall_abi import numbers_of

SYSCALLS = list(EVENT_SETS["syscalls"].events)
RAW = ["sys_enter", "sys_exit"]


def _plan(tmp_path: Path, events: dict, *, abi: str = "arm64-v8a", sources=("syscalls",), daemon: bool = False):
    transport = SimpleNamespace(name="adb:x", is_local=False,
                                run=lambda argv, timeout: SimpleNamespace(returncode=0, text="700 701"))
    target = SimpleNamespace(transport=transport, is_local=False, abi=abi,
                             caps=SimpleNamespace(events=events, tracefs_path="/sys/kernel/tracing"))
    daemons = [{"layer": "bfuse", "daemon_pid": 700, "fuse_fds": [5], "mountpoint": "/m"}] if daemon else []
    stack = SimpleNamespace(traced_devices=[(254, 0)], dev_major=254, dev_minor=0, filesystem="f2fs", layers=daemons,
                            fuse_daemons=daemons, fuse_servers=[])
    notes: list[str] = []
    collectors = plan_collectors(target, stack, tmp_path, sources=sources, notes=notes)
    return collectors, notes


def test_the_syscalls_events_where_the_kernel_has_them(tmp_path):
    (collector,), notes = _plan(tmp_path, {"syscalls": SYSCALLS, "raw_syscalls": RAW})
    assert collector.name == "syscalls" and collector.trace_name == "syscalls.txt" and collector.facts == {}
    assert {e.system for e in collector.events} == {"syscalls"} and notes == []


def test_raw_syscalls_where_it_has_none_filtered_to_the_abis_numbers(tmp_path):
    (collector,), notes = _plan(tmp_path, {"raw_syscalls": RAW})
    assert collector.name == "raw_syscalls" and collector.trace_name == "raw_syscalls.txt"
    assert collector.facts == {"syscall_abi": "arm64-v8a"} and collector.workload_pids_only
    enter, leave = collector.events
    assert (enter.system, enter.name, leave.name) == ("raw_syscalls", "sys_enter", "sys_exit")
    ids = {int(part.split("==")[1]) for part in enter.filter.split("||")}
    assert ids == set(numbers_of("arm64-v8a")) and 64 in ids and 82 in ids   # write, fsync on arm64
    assert enter.filter == leave.filter
    assert notes == ["syscalls: this kernel has no syscalls:* events: the call layer comes from raw_syscalls, "
                     "decoded for arm64-v8a"]


def test_raw_syscalls_when_asked_beside_the_syscalls_events(tmp_path):
    collectors, _ = _plan(tmp_path, {"syscalls": SYSCALLS, "raw_syscalls": RAW}, abi="x86_64",
                          sources=("syscalls", "raw_syscalls"))
    assert [c.name for c in collectors] == ["syscalls", "raw_syscalls"]
    assert collectors[1].facts == {"syscall_abi": "x86_64"}


def test_an_abi_without_a_table_keeps_every_call(tmp_path):
    (collector,), notes = _plan(tmp_path, {"raw_syscalls": RAW}, abi="mips")
    assert collector.events[0].filter is None
    assert notes[-1] == "raw_syscalls: no system call table for ABI mips: every call is kept, named nr_<N>"


def test_neither_is_an_error_that_says_what_to_use(tmp_path):
    with pytest.raises(TargetError, match="neither syscalls:sys_enter_\\* events .* nor raw_syscalls; use the strace"):
        _plan(tmp_path, {"block": ["block_rq_issue"]})


def test_sched_waking_and_the_daemons_threads_beside_a_fuse_daemon(tmp_path):
    (collector,), _ = _plan(tmp_path, {"raw_syscalls": RAW, "sched": ["sched_waking", "sched_switch"]}, daemon=True)
    assert ("sched", "sched_waking") in [(e.system, e.name) for e in collector.events]
    assert collector.extra_pids == [700, 701]
    (without,), _ = _plan(tmp_path, {"raw_syscalls": RAW, "sched": ["sched_waking"]})
    assert "sched_waking" not in [e.name for e in without.events]
