"""Fjord's durability promises, on real FUSE mounts, with the daemon killed by SIGKILL.

- Critical files: every byte acknowledged by fsync/fdatasync survives kill -9 and remount. For the presets with a
  log, the crash also loses the native file's unsynced data (simulated by truncating the native file to zero, which
  is harsher than a real power cut): the bytes must then come back from the log's replay.
- Whitelisted files (fjord-ram, fjord-both): after a crash each 4 KiB block holds its old content or one of the
  contents written to it, never a mix or garbage.
- Damaged logs: a torn tail and a corrupt middle record are replayed up to the last good record, and the replay
  says where and why it stopped (stderr and the counters JSON).
"""

from __future__ import annotations

import os
import random
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import needs_fuse, needs_root
from test_fjord_mount import PRESETS, fjord_mount  # noqa: F401  (fixture)

pytestmark = [needs_root, needs_fuse]

LOG_PRESETS = {"logging", "both", "fjord-both"}

# fj_log.c's record header: magic, type, hdr_len, crc, len, seq, file_id, offset
LOG_RECORD = struct.Struct("<IHHIIQQQ")
LOG_MAGIC = 0x434A5246
LOG_DATA_START = 8192
LOG_ALIGN = 16
REC_DATA = 2


def log_records(path: Path) -> list[tuple[int, int, int]]:
    """(position, type, payload length) of the consecutive records from the start of a fresh log's data area."""
    raw = path.read_bytes()
    records, pos, seq = [], LOG_DATA_START, None
    while pos + LOG_RECORD.size <= len(raw):
        magic, rtype, hdr_len, _crc, length, rseq, _fid, _off = LOG_RECORD.unpack_from(raw, pos)
        if magic != LOG_MAGIC or hdr_len != LOG_RECORD.size or (seq is not None and rseq != seq + 1):
            break
        records.append((pos, rtype, length))
        seq = rseq
        pos += (LOG_RECORD.size + length + LOG_ALIGN - 1) // LOG_ALIGN * LOG_ALIGN
    return records


def flip_byte(path: Path, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([byte ^ 0x5A]))


@pytest.mark.parametrize("preset", PRESETS)
def test_fsync_acknowledged_bytes_survive_kill9(fjord_mount, preset):
    # no timed checkpoint: the log alone must bring back what the crash took from the native file
    m = fjord_mount(preset, whitelist="cache", checkpoint_ms=0, log_size="16M", flush_ms="60s")
    (m.mountpoint / "db").mkdir()
    path = m.mountpoint / "db" / "main.db"
    rng = random.Random(11)
    nblocks, stride = 48, 8192  # blocks never touch, so nothing merges into a bypass-sized extent
    history: dict[int, list[bytes]] = {}
    acked: dict[int, int] = {}  # block -> index in history of the last acknowledged version
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    for round_no in range(25):
        for _ in range(rng.randint(1, 6)):
            block = rng.randrange(nblocks)
            data = rng.randbytes(4096)
            os.pwrite(fd, data, block * stride)
            history.setdefault(block, []).append(data)
        (os.fdatasync if round_no % 2 else os.fsync)(fd)
        acked = {block: len(versions) - 1 for block, versions in history.items()}
    for _ in range(10):  # written after the last fsync: may or may not survive
        block = rng.randrange(nblocks)
        data = rng.randbytes(4096)
        os.pwrite(fd, data, block * stride)
        history.setdefault(block, []).append(data)
    m.kill9()
    try:
        os.close(fd)
    except OSError:
        pass
    native = m.source / "db" / "main.db"
    if preset in LOG_PRESETS:
        os.truncate(native, 0)  # the crash lost every byte the native filesystem had not synced

    m2 = fjord_mount(preset, whitelist="cache", checkpoint_ms=0, log_size="16M")
    replay = m2.counters()["policy"]["replay"]
    content = (m2.mountpoint / "db" / "main.db").read_bytes()
    for block, index in acked.items():
        got = content[block * stride:block * stride + 4096]
        assert got in history[block][index:], f"block {block}: acknowledged data lost ({preset})"
    if preset in LOG_PRESETS:
        assert replay["records_applied"] >= len(acked)
        assert replay["stop_reason"] == "end"
        assert "log replay:" in m2.stderr()
    else:
        assert replay is None
    m2.unmount()


WRITER = r"""
import os, random, struct, sys
path, nblocks = sys.argv[1], int(sys.argv[2])
rng = random.Random(5)
fd = os.open(path, os.O_RDWR)
version = 0
while True:
    version += 1
    block = rng.randrange(nblocks)
    body = random.Random(block * 1_000_003 + version).randbytes(4096 - 12)
    os.pwrite(fd, struct.pack("<4sII", b"FJBK", block, version) + body, block * 4096)
    if version % 7 == 0:
        os.fsync(fd)  # relaxed for a whitelisted file
"""


def block_is_whole(block: int, data: bytes) -> bool:
    magic, index, version = struct.unpack_from("<4sII", data)
    body = random.Random(block * 1_000_003 + version).randbytes(4096 - 12)
    return magic == b"FJBK" and index == block and data[12:] == body


@pytest.mark.parametrize("preset", ["fjord-ram", "fjord-both"])
def test_whitelisted_blocks_are_old_or_new_after_crash(fjord_mount, preset):
    nblocks = 256
    m = fjord_mount(preset, whitelist="cache", flush_ms=150, log_size="8M")
    (m.source / "cache").mkdir()
    with open(m.source / "cache" / "blocks", "wb") as f:  # version 0, written natively before the test
        for block in range(nblocks):
            body = random.Random(block * 1_000_003).randbytes(4096 - 12)
            f.write(struct.pack("<4sII", b"FJBK", block, 0) + body)
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(m.mountpoint / "cache" / "blocks"), str(nblocks)],
                              stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.5)
        assert writer.poll() is None, "the writer died before the crash"
        policy = m.counters()["policy"]
        assert policy["fsyncs_relaxed"] > 0 and policy["fsyncs_honoured"] == 0
        m.kill9()  # mid-write, with data in the RAM buffer
    finally:
        writer.kill()
        writer.wait(timeout=30)
    data = (m.source / "cache" / "blocks").read_bytes()
    assert len(data) == nblocks * 4096
    versions = []
    for block in range(nblocks):
        chunk = data[block * 4096:(block + 1) * 4096]
        assert block_is_whole(block, chunk), f"block {block} is garbage after the crash"
        versions.append(struct.unpack_from("<I", chunk, 8)[0])
    assert max(versions) > 0  # some new contents reached the native file within flush_ms


@pytest.mark.parametrize("damage, applied, after_stop", [("torn_tail", 9, 0), ("corrupt_middle", 3, 6)])
def test_damaged_log_is_replayed_up_to_the_last_good_record(fjord_mount, tmp_path, damage, applied, after_stop):
    log = tmp_path / "fjord.log"
    m = fjord_mount("logging", log=str(log), log_size="4M", checkpoint_ms=0)
    fd = os.open(m.mountpoint / "crit.dat", os.O_RDWR | os.O_CREAT, 0o644)
    blocks = [bytes([65 + k]) * 4096 for k in range(10)]
    for k, block in enumerate(blocks):
        os.pwrite(fd, block, k * 4096)
        os.fdatasync(fd)
    m.kill9()
    try:
        os.close(fd)
    except OSError:
        pass
    os.truncate(m.source / "crit.dat", 0)  # only the log has the data now
    data_records = [(pos, length) for pos, rtype, length in log_records(log) if rtype == REC_DATA]
    assert len(data_records) == 10
    victim = data_records[9] if damage == "torn_tail" else data_records[3]
    flip_byte(log, victim[0] + LOG_RECORD.size + 2000)  # inside the payload: only the CRC can tell

    m2 = fjord_mount("logging", log=str(log), log_size="4M", checkpoint_ms=0)
    replay = m2.counters()["policy"]["replay"]
    assert replay["records_applied"] == applied
    assert replay["bytes_applied"] == applied * 4096
    assert replay["stop_reason"] == "bad crc"
    assert replay["stop_offset"] == victim[0]
    assert replay["records_after_stop"] == after_stop
    assert (f"log replay: {applied} records applied ({applied * 4096} bytes), 0 skipped (file gone), "
            f"stopped at offset {victim[0]}: bad crc; {after_stop} valid-looking records") in m2.stderr()
    content = (m2.mountpoint / "crit.dat").read_bytes()
    assert content == b"".join(blocks[:applied])  # the good prefix, and never the damaged record
    m2.unmount()
    # the replayed log was retired: the next mount replays nothing
    m3 = fjord_mount("logging", log=str(log), log_size="4M")
    assert m3.counters()["policy"]["replay"]["records_applied"] == 0
    assert (m3.mountpoint / "crit.dat").read_bytes() == b"".join(blocks[:applied])


def test_replay_follows_a_renamed_file_and_skips_a_deleted_one(fjord_mount):
    # records name files by handle, not path: the atomic-save pattern (write, fsync, rename) replays correctly
    m = fjord_mount("logging", checkpoint_ms=0, log_size="4M")
    kept = os.open(m.mountpoint / "save.tmp", os.O_RDWR | os.O_CREAT, 0o644)
    os.pwrite(kept, b"K" * 4096, 0)
    os.fdatasync(kept)
    os.pwrite(kept, b"L" * 4096, 4096)
    os.fdatasync(kept)
    os.rename(m.mountpoint / "save.tmp", m.mountpoint / "save.db")
    gone = os.open(m.mountpoint / "scratch", os.O_RDWR | os.O_CREAT, 0o644)
    os.pwrite(gone, b"G" * 4096, 0)
    os.fdatasync(gone)
    os.close(gone)
    os.unlink(m.mountpoint / "scratch")
    m.kill9()
    try:
        os.close(kept)
    except OSError:
        pass
    os.truncate(m.source / "save.db", 0)

    m2 = fjord_mount("logging", checkpoint_ms=0, log_size="4M")
    replay = m2.counters()["policy"]["replay"]
    assert (m2.mountpoint / "save.db").read_bytes() == b"K" * 4096 + b"L" * 4096
    assert not (m2.mountpoint / "scratch").exists()  # a deleted file is not resurrected
    assert not (m2.mountpoint / "save.tmp").exists()
    assert replay["records_applied"] == 2 and replay["records_skipped"] == 1
    assert replay["files"] == 2
