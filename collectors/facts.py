"""Target facts of a repetition: what the numbers depend on besides the workload.

Kernel, the mount options of the stack's filesystem, the device's IO scheduler and queue settings (read-ahead,
nr_requests, rotational), the CPU frequency governors, memory and the VM writeback knobs, and what the target is
(mobiperf.target.android.RUN_FACTS: Android version and ABI, SELinux mode, who else uses tracefs (traced_probes,
atrace), how /sdcard is served: FUSE, FUSE passthrough, sdcardfs). Read before the workload
starts (the state it ran in) and returned from stop(), so they land in run.json under the repetition. Every fact
is read with a plain `cat` through the transport; a fact the target does not have is recorded as null.
"""

from __future__ import annotations

import re
from pathlib import Path

from mobiperf.collectors.collector import Collector
from mobiperf.core.errors import TargetError
from mobiperf.core.mounts import Mount, parse_proc_mounts
from mobiperf.target.transport import Transport

VM_KNOBS = ("dirty_ratio", "dirty_background_ratio", "dirty_expire_centisecs", "dirty_writeback_centisecs",
            "swappiness")
QUEUE_KNOBS = ("scheduler", "read_ahead_kb", "nr_requests", "rotational", "max_sectors_kb", "logical_block_size",
               "write_cache")


class FactsCollector(Collector):
    name = "facts"
    snapshot = True

    def __init__(self, transport: Transport, device: str | None = None, mount_root: str | None = None):
        self.transport = transport
        self.device = device
        self.mount_root = mount_root  # mounts at or under this path (the stack's) are recorded
        self.facts: dict = {}

    def start(self) -> None:
        self.facts = self.read_facts()

    def stop(self) -> dict:
        return self.facts

    def read_facts(self) -> dict:
        facts: dict = {"kernel": self._cat("/proc/version"), "uname": self._run(["uname", "-a"])}
        if self.device:
            name = Path(self.device).name
            queue = {k: self._cat(f"/sys/block/{name}/queue/{k}") for k in QUEUE_KNOBS}
            if queue["scheduler"] and "[" in queue["scheduler"]:
                queue["scheduler"] = queue["scheduler"].split("[")[1].split("]")[0]
            facts["device"] = {"path": self.device, **queue}
        facts["mounts"] = [line for line in (self._cat("/proc/self/mounts") or "").splitlines()
                           if any(self._is_stack_mount(m) for m in parse_proc_mounts(line))]
        governors = {}
        listing = self._run(["ls", "/sys/devices/system/cpu"]) or ""
        for cpu in sorted(c for c in listing.split() if re.fullmatch(r"cpu\d+", c)):
            gov = self._cat(f"/sys/devices/system/cpu/{cpu}/cpufreq/scaling_governor")
            if gov is not None:
                governors[cpu] = gov
        facts["cpufreq_governor"] = governors or None
        meminfo = self._cat("/proc/meminfo") or ""
        mem = {}
        for key in ("MemTotal", "MemFree", "MemAvailable", "Cached", "Dirty", "Writeback"):
            m = re.search(rf"^{key}:\s+(\d+) kB", meminfo, re.M)
            if m:
                mem[f"{key}_bytes"] = int(m.group(1)) * 1024
        facts["memory"] = mem or None
        facts["vm"] = {k: self._cat(f"/proc/sys/vm/{k}") for k in VM_KNOBS}
        facts["target"] = self._target_facts()
        return facts

    def _target_facts(self) -> dict | None:
        from mobiperf.target.android import android_facts, run_facts

        try:
            return run_facts(android_facts(self.transport))
        except TargetError:
            return None

    def _is_stack_mount(self, mount: Mount) -> bool:
        """A mount of the stack's device, or at or under its mount root."""
        return bool((self.device and mount.source == self.device)
                    or (self.mount_root and mount.mountpoint.startswith(self.mount_root)))

    def _cat(self, path: str) -> str | None:
        try:
            return self.transport.read_file(path, timeout=10).decode(errors="replace").strip()
        except TargetError:
            return None

    def _run(self, argv: list[str]) -> str | None:
        try:
            done = self.transport.run(argv, timeout=10)
        except TargetError:
            return None
        return done.text.strip() if done.returncode == 0 else None
