"""What a target can do, found by looking: root, tracefs, trace events, strace, FUSE, loop devices, filesystems,
IO schedulers, and the facts a run records (kernel, memory, CPU frequency governor).

Facts are data, not subclasses: the same probe runs over any Transport, and an Android device simply answers
differently (tracefs under /sys/kernel/debug/tracing, no mkfs.xfs, ...).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from mobiperf.core.errors import TargetError
from mobiperf.core.trace_events import EVENT_SETS
from mobiperf.target.transport import Transport

TRACEFS_CANDIDATES = ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")
# The tracefs systems of every event set mobiperf reads (android_fs on Android kernels; sched and task: `record`).
EVENT_SYSTEMS = tuple(dict.fromkeys(s.system for s in EVENT_SETS.values()))
MKFS = {"ext4": "mkfs.ext4", "xfs": "mkfs.xfs", "btrfs": "mkfs.btrfs", "f2fs": "mkfs.f2fs"}


@dataclass
class Capabilities:
    target: str
    is_root: bool
    kernel: str
    tracefs_path: str | None
    tracefs_writable: bool
    tracefs_instances: bool
    events: dict[str, list[str]] = field(default_factory=dict)
    strace: str | None = None
    fuse: bool = False
    fusermount: str | None = None
    loop_devices: bool = False
    filesystems: dict[str, bool] = field(default_factory=dict)
    schedulers: list[str] = field(default_factory=list)
    memory_bytes: int | None = None
    cpus: int | None = None
    cpufreq_governor: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def find_tracefs(transport: Transport) -> str | None:
    """The tracefs directory, mounting it at /sys/kernel/tracing if it is not mounted anywhere (needs root)."""
    for path in TRACEFS_CANDIDATES:
        if transport.exists(f"{path}/events"):
            return path
    done = transport.run(["mount", "-t", "tracefs", "nodev", TRACEFS_CANDIDATES[0]], timeout=10)
    if done.returncode == 0 and transport.exists(f"{TRACEFS_CANDIDATES[0]}/events"):
        return TRACEFS_CANDIDATES[0]
    return None


def probe(transport: Transport) -> Capabilities:
    is_root = transport.run(["id", "-u"], timeout=10).text.strip() == "0"
    kernel = transport.run(["uname", "-r"], timeout=10).text.strip()
    tracefs = find_tracefs(transport) if is_root else next(
        (p for p in TRACEFS_CANDIDATES if transport.exists(f"{p}/events")), None)
    caps = Capabilities(target=transport.name, is_root=is_root, kernel=kernel, tracefs_path=tracefs,
                        tracefs_writable=False, tracefs_instances=False)
    if tracefs:
        caps.tracefs_writable = is_root and transport.run(["test", "-w", f"{tracefs}/tracing_on"],
                                                          timeout=10).returncode == 0
        caps.tracefs_instances = transport.exists(f"{tracefs}/instances")
        caps.events = _list_events(transport, tracefs)
    caps.strace = transport.which("strace")
    caps.fuse = transport.exists("/dev/fuse")
    caps.fusermount = transport.which("fusermount3") or transport.which("fusermount")
    caps.loop_devices = transport.exists("/dev/loop-control")
    kernel_fs = _kernel_filesystems(transport)
    caps.filesystems = {fs: bool(transport.which(tool)) and fs in kernel_fs for fs, tool in MKFS.items()}
    caps.schedulers = _schedulers(transport)
    caps.memory_bytes = _meminfo_total(transport)
    caps.cpus = _count_cpus(transport)
    gov = transport.run(["cat", "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"], timeout=10)
    caps.cpufreq_governor = gov.text.strip() if gov.returncode == 0 else None
    return caps


def _list_events(transport: Transport, tracefs: str) -> dict[str, list[str]]:
    found = {}
    for system in EVENT_SYSTEMS:
        done = transport.run(["ls", f"{tracefs}/events/{system}"], timeout=10)
        if done.returncode == 0:
            names = [n for n in done.text.split() if n not in ("enable", "filter")]
            found[system] = sorted(names)
    return found


def _kernel_filesystems(transport: Transport) -> set[str]:
    try:
        text = transport.read_file("/proc/filesystems").decode()
    except TargetError:
        return set()
    names = {line.split()[-1] for line in text.splitlines() if line.strip()}
    # A filesystem built as a module is absent from /proc/filesystems until loaded; modprobe may still find it.
    for fs in MKFS:
        if fs not in names and transport.exists(f"/sys/module/{fs}"):
            names.add(fs)
    return names


def _schedulers(transport: Transport) -> list[str]:
    done = transport.run(["sh", "-c", "cat /sys/block/*/queue/scheduler 2>/dev/null"], timeout=10)
    names: set[str] = set()
    for line in done.text.splitlines():
        names.update(re.sub(r"[\[\]]", "", line).split())
    return sorted(names)


def _meminfo_total(transport: Transport) -> int | None:
    try:
        text = transport.read_file("/proc/meminfo").decode()
    except TargetError:
        return None
    m = re.search(r"^MemTotal:\s+(\d+) kB", text, re.M)
    return int(m.group(1)) * 1024 if m else None


def _count_cpus(transport: Transport) -> int | None:
    done = transport.run(["nproc"], timeout=10)
    return int(done.text) if done.returncode == 0 and done.text.strip().isdigit() else None
