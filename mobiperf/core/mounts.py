"""The kernel's mount tables, parsed in one place: /proc/self/mountinfo and /proc/mounts text -> Mount records.

    mountinfo   36 35 98:0 /mnt1 /mnt/parent rw,noatime master:1 - ext3 /dev/root rw,errors=continue
                (mount id, parent id, major:minor, root, mount point, mount options, optional fields ending at
                `-`, filesystem type, source, super options: proc(5))
    /proc/mounts  /dev/root /mnt/parent ext3 rw,noatime 0 0
                (source, mount point, filesystem type, options, dump, pass: fstab(5))

Paths are escaped by the kernel's seq_file: a space, tab, newline or backslash is written as its three octal
digits (\\040 \\011 \\012 \\134); unescape_mount_field undoes every \\NNN. Lines too short to be mounts are passed
over. Both are text from the target, read by the caller (a transport's read_file): nothing here touches a device.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Iterable

_OCTAL = re.compile(r"\\([0-7]{3})")


@dataclass(frozen=True)
class Mount:
    mountpoint: str
    fstype: str
    source: str
    options: str  # the mount's options (mountinfo: the per-mount ones)
    dev: str | None = None  # "major:minor" of the mounted device (mountinfo only; "0:N" for FUSE, tmpfs)
    root: str | None = None  # the directory of the filesystem mounted there (mountinfo only)

    def as_fact(self) -> dict[str, str]:
        """The mount as run.json's facts keep it: source, mountpoint, fstype, options (and dev, root if known)."""
        return {k: v for k, v in asdict(self).items() if v is not None}

    @property
    def has_block_device(self) -> bool:
        """Whether a block device is mounted (major 0: FUSE, sdcardfs, tmpfs, overlay have none of their own)."""
        return self.dev is not None and not self.dev.startswith("0:")


def unescape_mount_field(field: str) -> str:
    return _OCTAL.sub(lambda m: chr(int(m.group(1), 8)), field)


def parse_mountinfo(text: str) -> list[Mount]:
    """The mounts of a /proc/<pid>/mountinfo text, in its order (the last mount on a mount point last)."""
    mounts = []
    for line in text.splitlines():
        fields = line.split()
        if "-" not in fields[6:]:
            continue
        sep = fields.index("-", 6)
        if len(fields) < sep + 3:
            continue
        mounts.append(
            Mount(
                mountpoint=unescape_mount_field(fields[4]),
                fstype=fields[sep + 1],
                source=unescape_mount_field(fields[sep + 2]),
                options=fields[5],
                dev=fields[2],
                root=unescape_mount_field(fields[3]),
            )
        )
    return mounts


def parse_proc_mounts(text: str) -> list[Mount]:
    """The mounts of a /proc/mounts (or /proc/self/mounts) text, in its order."""
    mounts = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 4:
            mounts.append(
                Mount(
                    mountpoint=unescape_mount_field(fields[1]),
                    fstype=fields[2],
                    source=unescape_mount_field(fields[0]),
                    options=fields[3],
                )
            )
    return mounts


def mount_of(path: str, mounts: Iterable[Mount]) -> Mount | None:
    """The mount a (resolved) path lives on: the one with the longest mount point that holds it, the last mounted
    of equals (it hides the others)."""
    best = None
    for m in mounts:
        mp = m.mountpoint
        inside = path == mp or path.startswith(mp.rstrip("/") + "/") or mp == "/"
        if inside and (best is None or len(mp) >= len(best.mountpoint)):
            best = m
    return best


def is_mounted(path: str, mounts: Iterable[Mount], fstype: str | None = None) -> bool:
    """Whether something (of that filesystem type, when given) is mounted at path."""
    return any(m.mountpoint == path and (fstype is None or m.fstype == fstype) for m in mounts)
