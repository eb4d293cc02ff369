"""The kernel's mount tables, parsed in one place (mobiperf/core/mounts.py): mountinfo and /proc/mounts lines with
the kernel's octal escapes, optional fields, bind mounts, FUSE's 0:N devices; the mount a path lives on."""

from __future__ import annotations

from pathlib import Path

from mobiperf.core.mounts import is_mounted, mount_of, parse_mountinfo, parse_proc_mounts

# proc(5)'s example line, a phone's /data and its FUSE /storage/emulated, a mount point with a space and a tab in
# it (the kernel writes \040 and \011), a bind mount of a subdirectory, and a line cut short.
MOUNTINFO = r"""36 35 98:0 /mnt1 /mnt/parent rw,noatime master:1 - ext3 /dev/root rw,errors=continue
30 1 253:6 / /data rw,nosuid,nodev,noatime shared:22 - f2fs /dev/block/dm-6 rw,lazytime,background_gc=on
91 30 0:61 / /storage/emulated rw,nosuid,nodev,noexec,noatime shared:44 master:41 - fuse /dev/fuse rw,user_id=0
120 22 7:3 / /tmp/mp\040run\011x rw,relatime - ext4 /dev/loop3 rw
121 22 7:3 /sub /tmp/bind rw,relatime shared:7 - ext4 /dev/loop3 rw
122 22 7:4
"""
PROC_MOUNTS = r"""/dev/block/dm-6 /data f2fs rw,lazytime 0 0
/dev/fuse /storage/emulated fuse rw,nosuid 0 0
/dev/loop3 /tmp/mp\040run\011x ext4 rw,relatime 0 0
short line
"""


def test_mountinfo_fields_and_escapes():
    mounts = parse_mountinfo(MOUNTINFO)
    assert [m.mountpoint for m in mounts] == ["/mnt/parent", "/data", "/storage/emulated", "/tmp/mp run\tx",
                                              "/tmp/bind"]
    parent, data, fuse, spaced, bind = mounts
    assert (parent.dev, parent.root, parent.fstype, parent.source, parent.options) == (
        "98:0", "/mnt1", "ext3", "/dev/root", "rw,noatime")
    assert (data.fstype, data.source, data.has_block_device) == ("f2fs", "/dev/block/dm-6", True)
    assert (fuse.dev, fuse.fstype, fuse.has_block_device) == ("0:61", "fuse", False)   # two optional fields
    assert (bind.root, bind.dev) == ("/sub", "7:3")


def test_proc_mounts_fields_and_escapes():
    mounts = parse_proc_mounts(PROC_MOUNTS)
    assert [(m.source, m.mountpoint, m.fstype, m.options) for m in mounts] == [
        ("/dev/block/dm-6", "/data", "f2fs", "rw,lazytime"), ("/dev/fuse", "/storage/emulated", "fuse", "rw,nosuid"),
        ("/dev/loop3", "/tmp/mp run\tx", "ext4", "rw,relatime")]
    assert mounts[0].as_fact() == {"mountpoint": "/data", "fstype": "f2fs", "source": "/dev/block/dm-6",
                                   "options": "rw,lazytime"}


def test_the_mount_a_path_lives_on():
    mounts = parse_mountinfo("1 0 8:1 / / rw - ext4 /dev/sda1 rw\n" + MOUNTINFO)
    assert mount_of("/data/local/tmp", mounts).mountpoint == "/data"
    assert mount_of("/database", mounts).mountpoint == "/"           # a prefix of the name is not a parent
    assert mount_of("/storage/emulated/0", mounts).fstype == "fuse"
    over = mounts + parse_mountinfo("200 30 0:99 / /data rw - tmpfs tmpfs rw\n")
    assert mount_of("/data/x", over).fstype == "tmpfs"              # the last mount on a point hides the others
    assert is_mounted("/tmp/mp run\tx", mounts) and not is_mounted("/tmp/mp", mounts)
    assert is_mounted("/data", mounts, fstype="f2fs") and not is_mounted("/data", mounts, fstype="ext4")


def test_this_machines_two_tables_agree():
    """The kernel's own mountinfo and mounts of this process list the same mount points in the same order."""
    info = parse_mountinfo(Path("/proc/self/mountinfo").read_text())
    plain = parse_proc_mounts(Path("/proc/self/mounts").read_text())
    assert info and [m.mountpoint for m in info] == [m.mountpoint for m in plain]
    assert [m.fstype for m in info] == [m.fstype for m in plain]
