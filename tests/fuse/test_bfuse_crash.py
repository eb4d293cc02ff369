"""kill -9 of the bFUSE daemon: every byte fsync'ed before the kill is on the native filesystem afterwards.

Three files grow by random appends through a buffered mount (flush_ms=60s, so unsynced data really is only in the
daemon's memory); after random fsync/fdatasync calls the synced length of each file is recorded. After kill -9 the
native file must hold at least that many bytes, equal to what was written.
"""

from __future__ import annotations

import os
import random

import pytest

from conftest import needs_fuse
from bfuse_mounts import bfuse_mount, bfuse_binary  # noqa: F401  (fixtures)

pytestmark = needs_fuse


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_fsynced_bytes_survive_kill_9(bfuse_mount, seed):
    rng = random.Random(seed)
    mount = bfuse_mount("preset=bfuse,flush_ms=60s")
    names = ["a", "b", "c"]
    fds = {name: os.open(mount.mountpoint / name, os.O_WRONLY | os.O_CREAT, 0o644) for name in names}
    written = {name: bytearray() for name in names}
    synced = {name: 0 for name in names}
    for _ in range(300):
        name = rng.choice(names)
        if rng.random() < 0.1:
            (os.fsync if rng.random() < 0.5 else os.fdatasync)(fds[name])
            synced[name] = len(written[name])
        else:
            chunk = rng.randbytes(rng.choice([1, 100, 4096, 65536, rng.randint(1, 300_000)]))
            os.write(fds[name], chunk)
            written[name] += chunk
    unsynced_somewhere = any(synced[n] < len(written[n]) for n in names)
    mount.kill()
    for fd in fds.values():
        try:
            os.close(fd)
        except OSError:
            pass   # the daemon is gone
    for name in names:
        native = (mount.source / name).read_bytes()
        assert len(native) >= synced[name], f"{name}: {len(native)} bytes on disk, {synced[name]} were fsync'ed"
        assert native[:synced[name]] == written[name][:synced[name]]
        assert native == written[name][:len(native)]   # whatever else reached the disk is correct too
    assert unsynced_somewhere   # the test would prove nothing if everything had been synced
