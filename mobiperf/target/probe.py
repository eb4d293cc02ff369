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
from mobiperf.target.script_sections import script_sections
from mobiperf.target.transport import Transport

TRACEFS_CANDIDATES = ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")
# The tracefs systems of every event set mobiperf reads (android_fs on Android kernels; sched and task: `record`),
# and raw_syscalls: the call layer where a kernel has no syscalls:* events (collectors/plan.py).
EVENT_SYSTEMS = (*dict.fromkeys(s.system for s in EVENT_SETS.values()), "raw_syscalls")
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
    perfetto: str | None = None       # the device's perfetto (Android 10+), the recorder runs use where present

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


# Everything the probe asks, as one script (one round trip to a phone: it used to take 30), in sections introduced
# by @@name lines. Shell builtins only where a phone's shell has them: every fork and exec costs there.
PROBE_SCRIPT = r"""
echo @@uid; id -u
echo @@kernel; read -r k < /proc/sys/kernel/osrelease; echo "$k"
t=; for d in {tracefs}; do [ -e "$d/events" ] && {{ t=$d; break; }}; done
echo @@tracefs; echo "$t"
if [ -n "$t" ]; then
  echo @@writable; [ -w "$t/tracing_on" ] && echo yes
  echo @@instances; [ -e "$t/instances" ] && echo yes
  cd "$t/events" && for s in {systems}; do
    [ -d "$s" ] || continue
    echo "@@events $s"; set -- "$s"/*; echo "$*"   # one glob per system: a loop per event costs seconds
  done
fi
echo @@programs; for p in {programs}; do command -v "$p"; done
[ -x /system/bin/perfetto ] && echo /system/bin/perfetto
echo @@devices; for f in /dev/fuse /dev/loop-control; do [ -e "$f" ] && echo "$f"; done
echo @@filesystems; while read -r a b; do echo "${{b:-$a}}"; done < /proc/filesystems
for m in {mkfs}; do [ -e "/sys/module/$m" ] && echo "$m"; done
echo @@schedulers; for f in /sys/block/*/queue/scheduler; do [ -r "$f" ] && read -r l < "$f" && echo "$l"; done
echo @@memory; while read -r k v u; do [ "$k" = MemTotal: ] && echo "$v"; done < /proc/meminfo
echo @@cpus; nproc
echo @@governor; f=/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor; [ -r "$f" ] && read -r g < "$f" && echo "$g"
echo @@end
""".format(tracefs=" ".join(TRACEFS_CANDIDATES), systems=" ".join(EVENT_SYSTEMS),
           programs=" ".join(("strace", "fusermount3", "fusermount", "perfetto", *MKFS.values())),
           mkfs=" ".join(MKFS))


def probe(transport: Transport) -> Capabilities:
    done = transport.run(["sh", "-c", PROBE_SCRIPT], timeout=60)
    if "@@end" not in done.text:
        raise TargetError(f"{transport.name}: the probe did not finish: {done.stderr.decode(errors='replace')}")
    s = script_sections(done.text)
    first = lambda name: (s.get(name) or [""])[0].strip()  # noqa: E731
    is_root = first("uid") == "0"
    tracefs = first("tracefs") or None
    if tracefs is None and is_root:
        tracefs = find_tracefs(transport)   # not mounted anywhere: mount it (and look at it again)
        if tracefs:
            return probe(transport)
    caps = Capabilities(target=transport.name, is_root=is_root, kernel=first("kernel"), tracefs_path=tracefs,
                        tracefs_writable=is_root and first("writable") == "yes",
                        tracefs_instances=first("instances") == "yes")
    caps.events = {name.split()[1]: sorted(n for n in (w.split("/", 1)[-1] for line in lines for w in line.split())
                                           if n not in ("enable", "filter", "*"))
                   for name, lines in s.items() if name.startswith("events ")}
    programs = {path.rsplit("/", 1)[-1]: path for path in s.get("programs", []) if path.startswith("/")}
    caps.strace = programs.get("strace")
    caps.perfetto = programs.get("perfetto")
    caps.fuse = "/dev/fuse" in s.get("devices", [])
    caps.fusermount = programs.get("fusermount3") or programs.get("fusermount")
    caps.loop_devices = "/dev/loop-control" in s.get("devices", [])
    kernel_fs = set(s.get("filesystems", []))   # and the module directories of those not loaded yet
    caps.filesystems = {fs: tool in programs and fs in kernel_fs for fs, tool in MKFS.items()}
    caps.schedulers = sorted({n for line in s.get("schedulers", []) for n in re.sub(r"[\[\]]", "", line).split()})
    caps.memory_bytes = int(first("memory")) * 1024 if first("memory").isdigit() else None
    caps.cpus = int(first("cpus")) if first("cpus").isdigit() else None
    caps.cpufreq_governor = first("governor") or None
    return caps
