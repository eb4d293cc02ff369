"""fsx-style random operation tester with a reference model, for any mounted directory.

One file is driven through a seeded random sequence of operations (pwrite, sequential pwrite bursts, O_APPEND
writes, pread, truncate up and down, fsync, fdatasync, stat by fd and by path, mmap reads, mmap writes with and
without msync, close and reopen, a second read-only descriptor, rename) while a bytearray models what the file must
contain. Every read, mmap read and stat is compared with the model; the first disagreement is a miscompare, and the
run stops there (as xfstests' fsx does) with the recent operation log.

If `native_dir` is given (the filesystem under a passthrough daemon), the native file is also compared with the model
after every fsync/fdatasync and at the end (after close): that is what "fsync makes buffered data durable" means.

Usable from tests (`run_fsx(directory, ops=...)`) and from a shell:

    python tests/support/fsx_model.py MOUNTDIR [--native SRCDIR] [--ops 100000] [--seed 1] [--max-len 512k]
"""

from __future__ import annotations

import argparse
import mmap
import os
import random
import sys
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path

OPERATIONS = {
    # name: relative weight
    "write": 14, "write_seq": 10, "append": 4, "read": 16, "read_fd2": 4, "truncate": 4, "fsync": 2, "fdatasync": 2,
    "stat": 5, "stat_path": 3, "mmap_read": 4, "mmap_write": 4, "reopen": 3, "rename": 2,
    # O_DIRECT bypasses the kernel's page cache, so these reach a FUSE daemon as READ/WRITE requests; on a
    # filesystem that refuses (unaligned) O_DIRECT they fall back to the plain read/write operations
    "read_direct": 4, "write_direct": 3,
}


@dataclass
class FsxResult:
    ops_done: int
    miscompares: int
    seed: int
    op_counts: Counter = field(default_factory=Counter)
    failure: str = ""
    recent_ops: list[str] = field(default_factory=list)

    def summary(self) -> str:
        counts = ", ".join(f"{name} {n}" for name, n in sorted(self.op_counts.items()))
        text = f"fsx seed {self.seed}: {self.ops_done} ops, {self.miscompares} miscompares ({counts})"
        if self.failure:
            text += f"\nFAILURE: {self.failure}\nlast operations:\n  " + "\n  ".join(self.recent_ops)
        return text


class Miscompare(Exception):
    pass


class FsxRun:
    """The file under test, its descriptors, and the model of its content."""

    def __init__(self, directory: Path, native_dir: Path | None, seed: int, max_len: int, max_op: int):
        self.directory = Path(directory)
        self.native_dir = Path(native_dir) if native_dir else None
        self.rng = random.Random(seed)
        self.max_len = max_len
        self.max_op = max_op
        self.names = [f"fsx-{seed}-a", f"fsx-{seed}-b"]
        self.name = self.names[0]
        self.model = bytearray()
        self.seq_cursor = 0
        self.log: deque[str] = deque(maxlen=40)
        self.fd = self.fd_append = self.fd_read = -1
        self.direct_ok = True
        path = self.path()
        for old in self.names:
            (self.directory / old).unlink(missing_ok=True)
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        self.open_others()

    def path(self) -> Path:
        return self.directory / self.name

    def open_others(self) -> None:
        self.fd_append = os.open(self.path(), os.O_WRONLY | os.O_APPEND)
        self.fd_read = os.open(self.path(), os.O_RDONLY)

    def close_all(self) -> None:
        for fd in (self.fd, self.fd_append, self.fd_read):
            if fd >= 0:
                os.close(fd)
        self.fd = self.fd_append = self.fd_read = -1

    def data(self, size: int) -> bytes:
        # random bytes, never all zero, so that a lost write cannot pass as a hole
        return self.rng.randbytes(size)

    def expect(self, what: str, got: bytes, off: int) -> None:
        want = bytes(self.model[off:off + len(got)])
        if len(got) != min(len(want), len(got)) or got != want:
            first = next((k for k in range(min(len(got), len(want))) if got[k] != want[k]), min(len(got), len(want)))
            raise Miscompare(f"{what}: {len(got)} bytes at {off}, first difference at file offset {off + first} "
                             f"(got {got[first:first + 8].hex()} want {want[first:first + 8].hex()}), "
                             f"model size {len(self.model)}")

    def model_write(self, off: int, data: bytes) -> None:
        end = off + len(data)
        if end > len(self.model):
            self.model.extend(bytes(end - len(self.model)))
        self.model[off:end] = data

    def random_range(self) -> tuple[int, int]:
        off = self.rng.randrange(0, self.max_len)
        size = self.rng.randint(1, min(self.max_op, self.max_len - off))
        return off, size

    # --- operations; each returns a log line ---

    def op_write(self) -> str:
        off, size = self.random_range()
        data = self.data(size)
        if os.pwrite(self.fd, data, off) != size:
            raise Miscompare(f"short pwrite at {off}")
        self.model_write(off, data)
        self.seq_cursor = off + size
        return f"write {off} +{size}"

    def op_write_seq(self) -> str:
        # a burst of contiguous writes, the pattern the write buffer coalesces
        burst = self.rng.randint(2, 8)
        size = self.rng.choice([4096, 16384, 65536, self.rng.randint(1, 65536)])
        off = self.seq_cursor if self.seq_cursor + size <= self.max_len else 0
        start = off
        for _ in range(burst):
            if off + size > self.max_len:
                break
            data = self.data(size)
            os.pwrite(self.fd, data, off)
            self.model_write(off, data)
            off += size
        self.seq_cursor = off
        return f"write_seq {start} .. {off} in {size}"

    def op_append(self) -> str:
        size = self.rng.randint(1, min(self.max_op, 16384))
        if len(self.model) + size > self.max_len:
            return self.op_truncate()
        data = self.data(size)
        off = len(self.model)
        os.write(self.fd_append, data)
        self.model_write(off, data)
        return f"append {off} +{size}"

    def op_read(self, fd: int | None = None, label: str = "read") -> str:
        off, size = self.random_range()
        got = os.pread(self.fd if fd is None else fd, size, off)
        self.expect(label, got, off)
        if len(got) != max(0, min(size, len(self.model) - off)):
            raise Miscompare(f"{label}: {len(got)} bytes at {off}, model has {len(self.model)} bytes")
        return f"{label} {off} +{size}"

    def open_direct(self, flags: int) -> int:
        """An O_DIRECT descriptor, or -1 (and no more tries) where the filesystem refuses O_DIRECT."""
        if not self.direct_ok:
            return -1
        try:
            return os.open(self.path(), flags | os.O_DIRECT)
        except OSError:
            self.direct_ok = False
            return -1

    def op_read_direct(self) -> str:
        fd = self.open_direct(os.O_RDONLY)
        if fd < 0:
            return self.op_read()
        try:
            off, size = self.random_range()
            got = os.pread(fd, size, off)
        except OSError:
            self.direct_ok = False   # unaligned O_DIRECT refused: not a daemon under test
            return self.op_read()
        finally:
            os.close(fd)
        self.expect("read_direct", got, off)
        if len(got) != max(0, min(size, len(self.model) - off)):
            raise Miscompare(f"read_direct: {len(got)} bytes at {off}, model has {len(self.model)} bytes")
        return f"read_direct {off} +{size}"

    def op_write_direct(self) -> str:
        fd = self.open_direct(os.O_WRONLY)
        if fd < 0:
            return self.op_write()
        off, size = self.random_range()
        data = self.data(size)
        try:
            written = os.pwrite(fd, data, off)
        except OSError:
            self.direct_ok = False
            return self.op_write()
        finally:
            os.close(fd)
        if written != size:
            raise Miscompare(f"write_direct: short write {written} of {size} at {off}")
        self.model_write(off, data)
        return f"write_direct {off} +{size}"

    def op_read_fd2(self) -> str:
        return self.op_read(self.fd_read, "read_fd2")

    def op_truncate(self) -> str:
        size = self.rng.randrange(0, self.max_len)
        os.ftruncate(self.fd, size)
        del self.model[size:]
        self.model.extend(bytes(size - len(self.model)))
        return f"truncate {size}"

    def check_native(self, what: str) -> None:
        if self.native_dir is None:
            return
        native = (self.native_dir / self.name).read_bytes()
        if len(native) != len(self.model):
            raise Miscompare(f"{what}: native file has {len(native)} bytes, model {len(self.model)}")
        if native != self.model:
            first = next(k for k in range(len(native)) if native[k] != self.model[k])
            raise Miscompare(f"{what}: native file differs from the model at offset {first}")

    def op_fsync(self) -> str:
        os.fsync(self.fd)
        self.check_native("after fsync")
        return "fsync"

    def op_fdatasync(self) -> str:
        os.fdatasync(self.fd)
        self.check_native("after fdatasync")
        return "fdatasync"

    def op_stat(self) -> str:
        size = os.fstat(self.fd).st_size
        if size != len(self.model):
            raise Miscompare(f"fstat size {size}, model {len(self.model)}")
        return f"stat {size}"

    def op_stat_path(self) -> str:
        size = os.stat(self.path()).st_size
        if size != len(self.model):
            raise Miscompare(f"stat(path) size {size}, model {len(self.model)}")
        return f"stat_path {size}"

    def op_mmap_read(self) -> str:
        if not self.model:
            return self.op_write()
        with mmap.mmap(self.fd, len(self.model), mmap.MAP_SHARED, mmap.PROT_READ) as view:
            off = self.rng.randrange(0, len(self.model))
            size = self.rng.randint(1, min(self.max_op, len(self.model) - off))
            self.expect("mmap_read", view[off:off + size], off)
        return f"mmap_read {off} +{size}"

    def op_mmap_write(self) -> str:
        if not self.model:
            return self.op_write()
        with mmap.mmap(self.fd, len(self.model), mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE) as view:
            off = self.rng.randrange(0, len(self.model))
            size = self.rng.randint(1, min(self.max_op, len(self.model) - off))
            data = self.data(size)
            view[off:off + size] = data
            self.model_write(off, data)
            synced = self.rng.random() < 0.5
            if synced:
                view.flush()
        return f"mmap_write {off} +{size}{' msync' if synced else ''}"

    def op_reopen(self) -> str:
        self.close_all()
        self.fd = os.open(self.path(), os.O_RDWR)
        self.open_others()
        return "reopen"

    def op_rename(self) -> str:
        new = self.names[1] if self.name == self.names[0] else self.names[0]
        os.rename(self.directory / self.name, self.directory / new)
        self.name = new
        return f"rename -> {new}"

    def finish(self) -> None:
        self.close_all()
        size = os.stat(self.path()).st_size
        if size != len(self.model):
            raise Miscompare(f"final stat size {size}, model {len(self.model)}")
        with open(self.path(), "rb") as f:
            self.expect("final read", f.read(), 0)
        self.check_native("after close")


def run_fsx(directory: Path | str, ops: int = 10_000, seed: int = 1, native_dir: Path | str | None = None,
            max_len: int = 512 * 1024, max_op: int = 64 * 1024, cleanup: bool = True) -> FsxResult:
    """Run `ops` random operations on a file in `directory`; stop at the first miscompare."""
    run = FsxRun(Path(directory), Path(native_dir) if native_dir else None, seed, max_len, max_op)
    names, weights = zip(*OPERATIONS.items())
    result = FsxResult(ops_done=0, miscompares=0, seed=seed)
    try:
        for step in range(ops):
            name = run.rng.choices(names, weights)[0]
            line = getattr(run, f"op_{name}")()
            run.log.append(f"#{step} {line}")
            result.op_counts[name] += 1
            result.ops_done += 1
        run.finish()
    except Miscompare as err:
        result.miscompares = 1
        result.failure = str(err)
    finally:
        result.recent_ops = list(run.log)
        run.close_all()
        if cleanup and not result.failure:
            (run.directory / run.name).unlink(missing_ok=True)
    return result


def parse_size(text: str) -> int:
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    text = text.strip().lower()
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="fsx-style random operation test with a reference model",
                                     epilog="example: python tests/support/fsx_model.py /mnt/bfuse --native /data/src "
                                            "--ops 100000 --seed 7")
    parser.add_argument("directory", type=Path)
    parser.add_argument("--native", type=Path, help="the native directory under a passthrough mount")
    parser.add_argument("--ops", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-len", type=parse_size, default=512 * 1024)
    parser.add_argument("--max-op", type=parse_size, default=64 * 1024)
    args = parser.parse_args(argv)
    result = run_fsx(args.directory, args.ops, args.seed, args.native, args.max_len, args.max_op)
    print(result.summary())
    return 1 if result.miscompares else 0


if __name__ == "__main__":
    sys.exit(main())
