"""A phone's CPU on a fast host: a cgroup that limits its members to a share of one core.

A 2012 phone paid every per-request FUSE cost (the copies, the context switches, the daemon's system calls) on a
1.4 GHz Cortex-A9; this host pays a fraction of it. `CpuShare` is a CFS bandwidth cgroup (v1 `cpu` or v2
`cpu.max`) of our own; the emulated stack puts the processes that ran on the phone's CPU into it (the workload
and the FUSE daemons it starts), never the device model (it models hardware) nor kernel threads (the writeback
flusher and the loop device's workers ran on the phone's other cores).

Where the v1 `cpuacct` hierarchy is mounted apart from `cpu` (as here), a twin group there counts the members'
CPU time, so a run can say how much CPU its workload and daemons used (`usage_ns`).

Share syntax: `15%` (of one core), or `host` (no limit).
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from mobiperf.core.errors import UsageError

CGROUP_ROOT = Path("/sys/fs/cgroup")
PREFIX = "mobiperf-cpu"
REMOVE_TIMEOUT_S = 30.0


def parse_cpu_share(text: str) -> str:
    """Normalised share: `host`, or `N%` with 1 <= N <= 100; UsageError saying what is valid."""
    text = str(text).strip()
    if text.lower() in ("", "host", "none", "100%"):
        return "host"
    m = re.fullmatch(r"(\d+(?:\.\d+)?)%", text)
    if not m or not 1 <= float(m.group(1)) <= 100:
        raise UsageError("a CPU share is a percentage of one core between 1% and 100% (e.g. 15%), or host")
    return text


def share_fraction(share: str) -> float | None:
    """0.15 for `15%`; None for `host`."""
    share = parse_cpu_share(share)
    return None if share == "host" else float(share.rstrip("%")) / 100


class CpuShare:
    """The cgroup of one run's phone CPU. `with CpuShare("15%", "name") as cg: cg.add(pid)`.

    Removed on exit, after its members have gone (a FUSE daemon still unmounting keeps it a few seconds).
    A share of `host` creates nothing: `add` does nothing and `path` is None."""

    def __init__(self, share: str, name: str, root: Path = CGROUP_ROOT):
        from mobiperf.target.undo_journal import local_journal

        self.journal = local_journal()  # each group is written down before it is made (mobiperf.target.undo_journal)
        self._entries: dict[Path, int] = {}
        self.share = parse_cpu_share(share)
        self.name = f"{PREFIX}-{os.getpid()}-{name}"
        self.root = root
        self.path: Path | None = None            # the cgroup that limits (cpu v1, or v2)
        self.accounting: Path | None = None      # the cpuacct v1 twin that counts, when the hierarchies differ
        self.kind = ""

    def __enter__(self) -> "CpuShare":
        fraction = share_fraction(self.share)
        if fraction is None:
            return self
        # A short period makes the throttling look like a slower CPU rather than one that stalls for most of
        # 100 ms; the kernel wants a quota of at least 1 ms.
        period = max(10_000, int(1000 / fraction) + 1)
        quota = max(1000, int(period * fraction))
        v1 = self.root / "cpu"
        try:
            if (v1 / "cpu.cfs_quota_us").exists():
                self.kind = "v1"
                self.path = self._make_group(v1 / self.name)
                (self.path / "cpu.cfs_period_us").write_text(str(period))
                (self.path / "cpu.cfs_quota_us").write_text(str(quota))
                acct = self.root / "cpuacct"
                if (acct / "cpuacct.usage").exists() and acct.resolve() != v1.resolve():
                    self.accounting = self._make_group(acct / self.name)
            elif "cpu" in _read(self.root / "cgroup.controllers").split():
                self.kind = "v2"
                self.path = self._make_group(self.root / self.name)
                (self.path / "cpu.max").write_text(f"{quota} {period}")
            else:
                raise UsageError("a CPU share needs the cgroup cpu controller (v1 /sys/fs/cgroup/cpu or v2 "
                                 "cpu.max)")
        except OSError as e:
            self.__exit__()
            raise UsageError(f"cannot set up the CPU cgroup for a {self.share} share: {e} (needs root)") from None
        return self

    def _make_group(self, path: Path) -> Path:
        self._entries[path] = self.journal.record("cgroup", path=str(path))  # before: __exit__ removes it
        path.mkdir()
        return path

    def add(self, pid: int) -> None:
        """Move a process (all its threads; children it forks later follow) into the share."""
        for group in (self.path, self.accounting):
            if group is not None:
                (group / "cgroup.procs").write_text(str(pid))

    def procs_files(self) -> list[str]:
        """The cgroup.procs files a process writes its pid to, to join the share itself (before an exec)."""
        return [str(g / "cgroup.procs") for g in (self.path, self.accounting) if g is not None]

    def members(self) -> set[int]:
        return {int(p) for p in _read(self.path / "cgroup.procs").split()} if self.path else set()

    def usage_ns(self) -> int | None:
        """CPU time its members used so far (cpuacct v1 or v2 cpu.stat), None when nothing counts it."""
        if self.accounting is not None:
            return int(_read(self.accounting / "cpuacct.usage") or 0)
        if self.kind == "v2" and self.path is not None:
            for line in _read(self.path / "cpu.stat").splitlines():
                key, _, value = line.partition(" ")
                if key == "usage_usec":
                    return int(value) * 1000
        return None

    def throttled(self) -> dict[str, int]:
        """{nr_periods, nr_throttled, throttled_ns} from cpu.stat: how often the quota ran out."""
        out: dict[str, int] = {}
        if self.path is None:
            return out
        for line in _read(self.path / "cpu.stat").splitlines():
            key, _, value = line.partition(" ")
            if key in ("nr_periods", "nr_throttled") and value.isdigit():
                out[key] = int(value)
            elif key == "throttled_time" and value.isdigit():
                out["throttled_ns"] = int(value)
            elif key == "throttled_usec" and value.isdigit():
                out["throttled_ns"] = int(value) * 1000
        return out

    def facts(self) -> dict:
        """What a run records about its CPU model."""
        out: dict = {"share": self.share, "cgroup": str(self.path) if self.path else None}
        usage = self.usage_ns()
        if usage is not None:
            out["usage_ns"] = usage
        out.update(self.throttled())
        return out

    def __exit__(self, *exc) -> None:
        for group in list(self._entries):   # every group made, also one a stop cut short before it was named
            if _remove_cgroup(group):
                self.journal.done(self._entries.pop(group))


def _remove_cgroup(path: Path) -> bool:
    """True once the group is gone; False if a member still kept it after the timeout."""
    deadline = time.monotonic() + REMOVE_TIMEOUT_S
    while path.exists():
        try:
            path.rmdir()  # fails while a straggler is still in it
            return True
        except OSError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.2)
    return True


def remove_stale_cgroups(root: Path = CGROUP_ROOT) -> list[Path]:
    """Cgroups left by a mobiperf process that was killed (named <prefix>-<pid>-...; its pid is gone)."""
    removed = []
    for base in (root / "cpu", root / "cpuacct", root):
        if not base.is_dir():
            continue
        for prefix in (PREFIX, "mobiperf-sweep"):  # mobiperf-sweep-*: the sweep's groups before this module
            for path in base.glob(f"{prefix}-*-*"):
                pid = path.name[len(prefix) + 1:].split("-")[0]
                if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
                    try:
                        path.rmdir()
                        removed.append(path)
                    except OSError:
                        pass
    return removed


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""
