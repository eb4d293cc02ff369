"""bFUSE mounts for tests: start the daemon on tmp dirs, wait for the mount, read its counters, always unmount.

The `bfuse_mount` fixture returns a factory `bfuse_mount("preset=bfuse,flush_ms=60s") -> BfuseMount`; every
mount it made is lazily unmounted (`fusermount3 -uz`) and its daemon reaped or killed in the finalizer. This module
also holds the tests of mounting itself (foreground, daemonized, mount(8) helper argument order, fsname/subtype).
"""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from conftest import needs_fuse

from bfuse_mounts import MOUNT_TIMEOUT_S, bfuse_binary, bfuse_mount, is_mounted, lazy_unmount  # noqa: F401 (fixtures)


# ---- tests of mounting itself ----

@needs_fuse
def test_mount_shows_source_and_type_and_counters_name_the_preset(bfuse_mount):
    mount = bfuse_mount("preset=bfuse")
    fields = next(line.split() for line in open("/proc/mounts") if line.split()[1] == str(mount.mountpoint))
    assert fields[0] == str(mount.source)
    assert fields[2] == "fuse.bfuse"
    (mount.mountpoint / "hello").write_text("hello")
    assert (mount.source / "hello").read_text() == "hello"
    counters = mount.unmount()
    assert counters["daemon"] == "bfuse"
    assert counters["preset"] == "bfuse"
    assert counters["config"]["io_unit"] == 512 * 1024
    assert counters["policy"]["entries"] == 4
    assert counters["policy"]["entry_bytes"] == 2 * 1024 * 1024


def _passthrough_kernel() -> bool:
    major, minor = (int(x) for x in os.uname().release.split(".")[:2])
    return (major, minor) >= (6, 9) and os.geteuid() == 0


@needs_fuse
def test_presets_configure_io_unit_threads_and_buffer(bfuse_mount):
    expected = {
        "legacy": (4096, 1, 0, False, False),
        "nobuf": (512 * 1024, 4, 0, False, False),
        "zerocopy": (512 * 1024, 4, 0, True, False),
        "bfuse": (512 * 1024, 4, 4, True, False),                # spliced in: libfuse's loop
        "bfuse,buffer=16M,entry=4M,io_unit=1M,threads=2": (1024 * 1024, 2, 4, True, False),
        "bfuse,splice=0": (512 * 1024, 4, 4, False, True),      # fusecore's loop: buffers adopted
        "bfuse,splice=0,own_loop=0": (512 * 1024, 4, 4, False, False),
        "passthrough": (512 * 1024, 4, 0, False, True),          # kernel passthrough on fusecore's loop
    }
    if not _passthrough_kernel():
        expected.pop("passthrough")
    for k, (preset, (io_unit, threads, entries, splice, own_loop)) in enumerate(expected.items()):
        counters = bfuse_mount(f"preset={preset}", name=f"p{k}").unmount()
        assert counters["config"] == {"io_unit": io_unit, "threads": threads, "splice": splice,
                                      "writeback_cache": False, "own_loop": own_loop,
                                      "passthrough": preset == "passthrough"}, preset
        assert counters["policy"]["entries"] == entries, preset


@needs_fuse
def test_mount_helper_argument_order(bfuse_binary, tmp_path):
    """`mount -t fuse.bfuse SRC MNT -o opts` runs `bfuse SRC MNT -o opts,dev,suid` (via mount.fuse3) and daemonizes."""
    if not os.path.exists("/sbin/mount.fuse3") or os.geteuid() != 0:
        pytest.skip("needs root and /sbin/mount.fuse3 (package fuse3)")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "bfuse").symlink_to(bfuse_binary)
    source, mountpoint, counters = tmp_path / "src", tmp_path / "mnt", tmp_path / "c.json"
    source.mkdir()
    mountpoint.mkdir()
    # mount(8) resets PATH, so call its helper directly with ours; with bfuse in /usr/local/bin,
    # `mount -t fuse.bfuse SRC MNT -o ...` does exactly this.
    env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}")
    try:
        subprocess.run(["/sbin/mount.fuse3", str(source), str(mountpoint), "-t", "bfuse",
                        "-o", f"preset=legacy,counters={counters}"], env=env, check=True, timeout=20,
                       capture_output=True)
        assert is_mounted(mountpoint)
        (mountpoint / "f").write_bytes(b"x" * 10000)
        subprocess.run(["fusermount3", "-u", str(mountpoint)], check=True, timeout=10)
        deadline = time.monotonic() + MOUNT_TIMEOUT_S
        while not counters.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        result = json.loads(counters.read_text())
        assert result["preset"] == "legacy"
        assert result["ops"]["write"] == {"requests": 3, "bytes": 10000}   # 4 KiB IO unit
        assert (source / "f").stat().st_size == 10000
    finally:
        lazy_unmount(mountpoint)
