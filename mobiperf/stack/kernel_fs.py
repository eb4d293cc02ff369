"""Whether a target can build a file system stack (`--stack f2fs`, `--stack xfs` ...): its kernel has the file
system and the target has its mkfs. Checked before a run directory exists, so a stack the target cannot build is
refused in one line that says why, and nothing is left behind.

A file system built as a module is not in /proc/filesystems until something loads it; mount would load it on
demand, so a root target is asked to load it first (`modprobe NAME`, which changes nothing when no module exists).
"""

from __future__ import annotations

from mobiperf.core.errors import StackError, TargetError
from mobiperf.stack.spec import MKFS
from mobiperf.target.target import Target

PACKAGES = {"ext4": "e2fsprogs", "xfs": "xfsprogs", "btrfs": "btrfs-progs", "f2fs": "f2fs-tools"}


def kernel_has(target: Target, name: str) -> bool:
    """Whether the target's kernel knows the file system, loading its module if it has one (as root)."""
    if name in _listed(target):
        return True
    if target.is_root:
        try:
            target.transport.run(["modprobe", name], timeout=30)
        except TargetError:  # no modprobe on the target: only /proc/filesystems says
            return False
        return name in _listed(target)
    return False


def require_filesystem(target: Target, name: str, shown: str) -> None:
    """StackError (one line, the reason) unless the target can make and mount `name`; `shown` is the stack."""
    if name not in MKFS:
        return
    if not kernel_has(target, name):
        raise StackError(f"stack {shown!r}: this kernel ({target.caps.kernel}) has no {name}: it is not in "
                         f"/proc/filesystems and no module of it loads (CONFIG_{name.upper()}_FS is not set); "
                         f"run it on a kernel with {name} (e.g. a guest: the virtual phone of `make vphone`)")
    mkfs = MKFS[name][0][0]
    if not target.transport.which(mkfs):
        raise StackError(f"stack {shown!r}: {mkfs} is not installed on the target (Debian: {PACKAGES[name]})")


def _listed(target: Target) -> set[str]:
    try:
        text = target.transport.read_file("/proc/filesystems").decode(errors="replace")
    except TargetError:
        return set()
    return {line.split()[-1] for line in text.splitlines() if line.strip()}
