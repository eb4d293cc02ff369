"""mobibench's syscall sequence, checked with strace on real runs in tmp_path.

The timed window is cut with mobibench's own markers: MOBIBENCH_TRACE_MARKER points at a plain file, so
strace shows the main thread's write(fd, "mobibench: timed_start\\n") and "...timed_end"; every other call is
placed by its -ttt time stamp (threads are traced into separate files with -ff, so no line is split).
The random order is compared with an independent Python MT19937-64 and Mobibench's shuffle.
"""

from __future__ import annotations

import re
import shutil
import sqlite3
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace (Debian package strace)")

TRACED = "openat,unlink,lseek,write,read,pwrite64,fsync,fdatasync,msync,ftruncate,mmap"
LINE = re.compile(r"^(?P<ts>\d+\.\d+) (?P<name>\w+)\((?P<args>.*)\)\s+= (?P<ret>-?\d+|0x[0-9a-f]+|\?)")


@dataclass
class Call:
    ts: float
    tid: int
    name: str
    args: str
    ret: int

    @property
    def fd(self) -> int:
        return int(self.args.split(",", 1)[0])


def strace_mobibench(binary: Path, tmp_path: Path, *args: str, timeout: float = 60) -> tuple[str, list[Call]]:
    """Run mobibench under strace -ff; its stdout and every traced call of every thread, in time order."""
    marker = tmp_path / "marker"
    marker.write_text("")
    prefix = tmp_path / "strace" / "t"
    prefix.parent.mkdir(exist_ok=True)
    proc = subprocess.run(
        ["strace", "-ff", "-ttt", "-qq", "-s", "32", "-e", f"trace={TRACED}", "-o", str(prefix),
         str(binary), "-q", "--no-drop-caches", *args],
        capture_output=True, text=True, timeout=timeout,
        env={"MOBIBENCH_TRACE_MARKER": str(marker), "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr
    calls = []
    for path in prefix.parent.glob("t.*"):
        tid = int(path.suffix[1:])
        for line in path.read_text(errors="replace").splitlines():
            match = LINE.match(line)
            if match and match["ret"] != "?":
                ret = int(match["ret"], 16) if match["ret"].startswith("0x") else int(match["ret"])
                calls.append(Call(float(match["ts"]), tid, match["name"], match["args"], ret))
    calls.sort(key=lambda call: call.ts)
    workload = "sqlite journal=" if "-d" in args else "file"
    assert marker.read_text().startswith(f"mobibench: workload {workload}")
    assert marker.read_text().endswith("\nmobibench: timed_start\nmobibench: timed_end\n")
    shutil.rmtree(prefix.parent)
    return proc.stdout, calls


def split_window(calls: list[Call]) -> tuple[list[Call], list[Call]]:
    """(calls before the timed window, calls inside it), marker writes (the workload's name, just before the
    window) and /proc reads left out."""
    start = next(i for i, c in enumerate(calls) if c.name == "write" and "timed_start" in c.args)
    end = next(i for i, c in enumerate(calls) if c.name == "write" and "timed_end" in c.args)
    keep = [c for c in calls if "/proc/" not in c.args and not (c.name == "write" and "mobibench: workload" in c.args)]
    before = [c for c in keep if c.ts < calls[start].ts]
    inside = [c for c in keep if calls[start].ts < c.ts < calls[end].ts]
    return before, inside


def data_fds(calls: list[Call], name: str) -> set[int]:
    return {c.ret for c in calls if c.name == "openat" and f'/{name}"' in c.args and c.ret >= 0}


def shape(calls: list[Call]) -> list[tuple[str, int]]:
    """(syscall, size or offset) per call: what tests compare sequences on."""
    out = []
    for call in calls:
        if call.name in ("write", "read"):
            out.append((call.name, int(call.args.rsplit(",", 1)[1])))
        elif call.name == "lseek":
            out.append(("lseek", int(call.args.split(",")[1])))
        else:
            out.append((call.name, 0))
    return out


# ---------------------------------------------------------------- MT19937-64, independently in Python

MASK64 = (1 << 64) - 1


class MT64:
    """Matsumoto-Nishimura MT19937-64, seeded with init_by_array64."""

    def __init__(self, key: list[int]):
        self.mt = [0] * 312
        self.mt[0] = 19650218
        for i in range(1, 312):
            prev = self.mt[i - 1]
            self.mt[i] = (6364136223846793005 * (prev ^ (prev >> 62)) + i) & MASK64
        i, j = 1, 0
        for _ in range(max(312, len(key))):
            prev = self.mt[i - 1]
            self.mt[i] = ((self.mt[i] ^ ((prev ^ (prev >> 62)) * 3935559000370003845)) + key[j] + j) & MASK64
            i, j = i + 1, j + 1
            if i >= 312:
                self.mt[0], i = self.mt[311], 1
            if j >= len(key):
                j = 0
        for _ in range(311):
            prev = self.mt[i - 1]
            self.mt[i] = ((self.mt[i] ^ ((prev ^ (prev >> 62)) * 2862933555777941757)) - i) & MASK64
            i += 1
            if i >= 312:
                self.mt[0], i = self.mt[311], 1
        self.mt[0] = 1 << 63
        self.index = 312

    def next(self) -> int:
        if self.index >= 312:
            for k in range(312):
                x = (self.mt[k] & 0xFFFFFFFF80000000) | (self.mt[(k + 1) % 312] & 0x7FFFFFFF)
                self.mt[k] = self.mt[(k + 156) % 312] ^ (x >> 1) ^ (0xB5026F5AA96619E9 if x & 1 else 0)
            self.index = 0
        x = self.mt[self.index]
        self.index += 1
        x ^= (x >> 29) & 0x5555555555555555
        x ^= (x << 17) & 0x71D67FFFEDA60000
        x ^= (x << 37) & 0xFFF7EEE000000000
        x ^= x >> 43
        return x & MASK64


def mobibench_order(n: int, overlap_pct: int = 0) -> list[int]:
    """Record order of Mobibench's random modes (spec section 3.4)."""
    gen = MT64([0x12345, 0x23456, 0x34567, 0x45678])

    def shuffle(items: list[int]) -> None:
        for i in range(len(items)):
            j = gen.next() % len(items)
            items[i], items[j] = items[j], items[i]

    perm = list(range(n))
    shuffle(perm)
    overlap = n * overlap_pct // 100
    other = n - overlap
    if overlap_pct and overlap and other:
        tmp = list(range(n))
        shuffle(tmp)
        perm = tmp[:other] + [tmp[gen.next() % other] for _ in range(overlap)]
        shuffle(perm)
    return perm


def test_python_mt64_matches_the_reference_vector():
    gen = MT64([0x12345, 0x23456, 0x34567, 0x45678])
    assert [gen.next() for _ in range(3)] == [7266447313870364031, 4946485549665804864, 16945909448695747420]


# ---------------------------------------------------------------- file workload


def test_sequential_write_is_128_writes_of_512k_then_one_fsync(reference_binary, tmp_path):
    _, calls = strace_mobibench(reference_binary("mobibench"), tmp_path,
                                "-p", str(tmp_path / "w"), "-f", "65536", "-r", "512", "-a", "0", "-y", "0")
    before, inside = split_window(calls)
    fds = data_fds(calls, "test.dat0")
    setup = [c for c in before if c.name in ("write", "fsync") and c.fd in fds]
    # pre-creation of the missing file: 64 MiB in 512 KiB appends, then an fsync, all before the window
    assert shape(setup) == [("write", 524288)] * 128 + [("fsync", 0)]
    timed = [c for c in inside if c.args.split(",")[0].isdigit() and c.fd in fds]
    assert shape(timed) == [("write", 524288)] * 128 + [("fsync", 0)]
    assert all(c.ret == 524288 for c in timed if c.name == "write")


def test_random_write_with_fsync_is_lseek_write_fsync_per_record_in_seeded_order(reference_binary, tmp_path):
    _, calls = strace_mobibench(reference_binary("mobibench"), tmp_path,
                                "-p", str(tmp_path / "w"), "-f", "4096", "-r", "4", "-a", "1", "-y", "2")
    _, inside = split_window(calls)
    fds = data_fds(calls, "test.dat0")
    timed = [c for c in inside if c.args.split(",")[0].isdigit() and c.fd in fds]
    order = mobibench_order(1024)
    expected = []
    for record in order:
        expected += [("lseek", record * 4096), ("write", 4096), ("fsync", 0)]
    assert shape(timed) == expected + [("fsync", 0)]
    assert sum(1 for c in timed if c.name == "fsync") == 1025


def test_random_write_offsets_each_exactly_once(reference_binary, tmp_path):
    _, calls = strace_mobibench(reference_binary("mobibench"), tmp_path,
                                "-p", str(tmp_path / "w"), "-f", "12000", "-r", "4", "-a", "1", "-y", "0")
    _, inside = split_window(calls)
    offsets = [int(c.args.split(",")[1]) for c in inside if c.name == "lseek"]
    assert len(offsets) == 3000 and sorted(offsets) == [i * 4096 for i in range(3000)]
    assert offsets == [r * 4096 for r in mobibench_order(3000)]
    assert offsets != sorted(offsets)


def test_random_read_follows_the_same_order(reference_binary, tmp_path):
    _, calls = strace_mobibench(reference_binary("mobibench"), tmp_path,
                                "-p", str(tmp_path / "w"), "-f", "2048", "-r", "8", "-a", "3", "-y", "0")
    before, inside = split_window(calls)
    fds = data_fds(calls, "test.dat0")
    timed = [c for c in inside if c.args.split(",")[0].isdigit() and c.fd in fds]
    expected = []
    for record in mobibench_order(256):
        expected += [("lseek", record * 8192), ("read", 8192)]
    assert shape(timed) == expected  # reads end without a sync
    assert sum(c.ret for c in before if c.name == "write" and c.fd in fds) == 2048 * 1024


def test_overlap_repeats_half_of_the_records(reference_binary, tmp_path):
    _, calls = strace_mobibench(reference_binary("mobibench"), tmp_path,
                                "-p", str(tmp_path / "w"), "-f", "1024", "-r", "4", "-a", "1", "-v", "50")
    _, inside = split_window(calls)
    offsets = [int(c.args.split(",")[1]) // 4096 for c in inside if c.name == "lseek"]
    assert offsets == mobibench_order(256, 50)
    assert len(offsets) == 256 and len(set(offsets)) == 128


def test_fdatasync_mode_and_osync_open_flags(reference_binary, tmp_path):
    _, calls = strace_mobibench(reference_binary("mobibench"), tmp_path,
                                "-p", str(tmp_path / "w"), "-f", "256", "-r", "4", "-a", "0", "-y", "8")
    _, inside = split_window(calls)
    fds = data_fds(calls, "test.dat0")
    timed = [c for c in inside if c.args.split(",")[0].isdigit() and c.fd in fds]
    assert shape(timed) == [("write", 4096), ("fdatasync", 0)] * 64 + [("fsync", 0)]

    _, calls = strace_mobibench(reference_binary("mobibench"), tmp_path,
                                "-p", str(tmp_path / "s"), "-f", "256", "-r", "4", "-a", "0", "-y", "1")
    opens = [c for c in calls if c.name == "openat" and "test.dat0" in c.args]
    # pre-creation opens O_RDWR|O_CREAT, the timed file is opened with O_SYNC
    assert "O_SYNC" not in opens[0].args and "O_RDWR|O_CREAT|O_SYNC" in opens[-1].args
    assert "0766" in opens[-1].args


def test_mmap_sync_mode_msyncs_every_record_and_the_whole_map(reference_binary, tmp_path):
    _, calls = strace_mobibench(reference_binary("mobibench"), tmp_path,
                                "-p", str(tmp_path / "w"), "-f", "256", "-r", "4", "-a", "0", "-y", "7")
    before, inside = split_window(calls)
    msyncs = [c for c in inside if c.name == "msync"]
    assert len(msyncs) == 65
    assert all(c.args.endswith("4096, MS_SYNC") for c in msyncs[:-1])
    assert msyncs[-1].args.endswith("262144, MS_SYNC")
    assert not [c for c in inside if c.name in ("write", "fsync") and c.fd in data_fds(calls, "test.dat0")]
    maps = [c for c in before if c.name == "mmap" and "MAP_SHARED" in c.args]
    assert maps and "262144" in maps[-1].args


def test_append_unlinks_and_allocates_but_overwrite_precreates(reference_binary, tmp_path):
    work = tmp_path / "w"
    _, calls = strace_mobibench(reference_binary("mobibench"), tmp_path,
                                "-p", str(work), "-f", "512", "-r", "64", "-a", "4")
    before, inside = split_window(calls)
    assert [c.name for c in before if c.name == "unlink"] == ["unlink"]
    assert not [c for c in before if c.name == "write" and c.fd in data_fds(calls, "test.dat0")]
    assert (work / "test.dat0").stat().st_size == 512 * 1024

    # HEAD -a 0 on the existing full-size file: no unlink, no pre-creation, writes from offset 0
    _, calls = strace_mobibench(reference_binary("mobibench"), tmp_path,
                                "-p", str(work), "-f", "512", "-r", "64", "-a", "0")
    before, inside = split_window(calls)
    assert not [c for c in before if c.name in ("unlink", "write") and "test.dat0" in c.args]
    assert len([c for c in inside if c.name == "write" and c.fd in data_fds(calls, "test.dat0")]) == 8

    # 1.0.1 semantics: -a 0 unlinks first, like HEAD's -a 4
    _, calls = strace_mobibench(reference_binary("mobibench"), tmp_path, "--compat=1.0.1",
                                "-p", str(work), "-f", "512", "-r", "64", "-a", "0")
    before, _ = split_window(calls)
    assert [c.args for c in before if c.name == "unlink"] == [f'"{work}/test.dat0"']


def test_each_thread_writes_its_own_file(reference_binary, tmp_path):
    work = tmp_path / "w"
    stdout, calls = strace_mobibench(reference_binary("mobibench"), tmp_path,
                                     "-p", str(work), "-f", "4096", "-r", "16", "-a", "1", "-t", "4")
    _, inside = split_window(calls)
    owners = set()
    assert sorted(p.name for p in work.iterdir()) == [f"test.dat{k}" for k in range(4)]
    for k in range(4):
        path = work / f"test.dat{k}"
        assert path.stat().st_size == 1024 * 1024
        assert path.read_bytes() == b"\xfe" * (1024 * 1024)
        assert oct(path.stat().st_mode & 0o777) == oct(0o766 & ~0o022)
        # fd numbers are reused between threads' pre-creation and timed opens: key on (thread, fd)
        timed_open = [c for c in calls if c.name == "openat" and f'/test.dat{k}"' in c.args][-1]
        owners.add(timed_open.tid)
        mine = [c for c in inside if c.tid == timed_open.tid and c.args.split(",")[0] == str(timed_open.ret)]
        assert shape(mine)[-1] == ("fsync", 0)
        assert [offset // 16384 for name, offset in shape(mine) if name == "lseek"] == mobibench_order(64)
        assert [name for name, _ in shape(mine)].count("write") == 64
        # and the thread touches no other file in the window
        assert {c.args.split(",")[0] for c in inside if c.tid == timed_open.tid and c.name == "write"} == \
            {str(timed_open.ret)}
    assert len(owners) == 4
    assert "File size per thread : 1024 KB" in stdout and "[CON SWITCHES]" not in stdout


# ---------------------------------------------------------------- SQLite workload


def db_window_counts(binary: Path, tmp_path: Path, *args: str) -> dict[str, int]:
    _, calls = strace_mobibench(binary, tmp_path, *args)
    _, inside = split_window(calls)
    counts: dict[str, int] = {}
    journal_fds = {c.ret for c in inside if c.name == "openat" and '-journal"' in c.args}
    for call in inside:
        key = call.name
        if call.name in ("openat", "unlink") and '-journal"' in call.args:
            key += "-journal"
        elif call.name == "ftruncate" and call.fd in journal_fds:
            key += "-journal"
        counts[key] = counts.get(key, 0) + 1
    counts["syncs"] = counts.get("fsync", 0) + counts.get("fdatasync", 0)
    return counts


def test_journal_modes_per_transaction_syncs_and_writes(reference_binary, tmp_path):
    binary = reference_binary("mobibench")
    n = 20
    by_mode = {}
    for journal, name in ((0, "DELETE"), (1, "TRUNCATE"), (2, "PERSIST"), (3, "WAL")):
        by_mode[name] = db_window_counts(binary, tmp_path, "-p", str(tmp_path / name), "-d", "0", "-n", str(n),
                                         "-j", str(journal))
    delete, truncate, persist, wal = (by_mode[m] for m in ("DELETE", "TRUNCATE", "PERSIST", "WAL"))
    # rollback journals: the journal, the directory (where created) and the database are synced per transaction
    for mode in (delete, truncate, persist):
        assert mode["syncs"] % n == 0 and 3 <= mode["syncs"] // n <= 6, by_mode
        # 3 tables + page 1 of the database, journal pages and headers
        assert mode["pwrite64"] >= 5 * n, by_mode
    assert delete.get("unlink-journal", 0) == n and truncate.get("unlink-journal", 0) == 0
    assert truncate.get("ftruncate-journal", 0) >= n and persist.get("ftruncate-journal", 0) == 0
    assert persist.get("unlink-journal", 0) == 0
    # WAL: one sync per commit plus the checkpoint at the end of the loop, the fewest of all
    assert n <= wal["syncs"] <= n + 3, by_mode
    assert wal["syncs"] < min(delete["syncs"], truncate["syncs"], persist["syncs"])
    assert wal["pwrite64"] < delete["pwrite64"]
    # no journal on disk: only the database's own sync per transaction
    for journal in (4, 5):
        counts = db_window_counts(binary, tmp_path, "-p", str(tmp_path / f"j{journal}"), "-d", "0", "-n", str(n),
                                  "-j", str(journal))
        assert counts["syncs"] == n and "openat-journal" not in counts, counts


def test_head_db_layout_and_rows(reference_binary, tmp_path):
    work = tmp_path / "w"
    stdout, calls = strace_mobibench(reference_binary("mobibench"), tmp_path,
                                     "-p", str(work), "-d", "0", "-n", "30", "-T", "2", "-D", "2")
    for d in range(2):
        with sqlite3.connect(work / f"test.db0_{d}") as db:
            tables = sorted(r[0] for r in db.execute("select name from sqlite_master where type='table'"))
            assert tables == ["tblMyList0", "tblMyList1"]
            for table in tables:
                ids = [r[0] for r in db.execute(f"select id from {table} order by id")]
                assert ids == list(range(30))
                value = db.execute(f"select Value from {table} limit 1").fetchone()[0]
                assert value == "".join(ch * 10 for ch in "abcdefghij")
    assert f"[DB information of db {work}/test.db0_1]" in stdout


def test_compat_101_db_is_one_autoincrement_table_and_one_statement_per_transaction(reference_binary, tmp_path):
    work = tmp_path / "w"
    stdout, calls = strace_mobibench(reference_binary("mobibench"), tmp_path, "--compat=1.0.1",
                                     "-p", str(work), "-d", "0", "-n", "15", "-j", "0")
    assert sorted(p.name for p in work.iterdir() if not p.name.endswith("-journal")) == ["test.db0"]
    with sqlite3.connect(work / "test.db0") as db:
        assert [r[0] for r in db.execute("select id from tblMyList order by id")] == list(range(1, 16))
        assert db.execute("select seq from sqlite_sequence where name='tblMyList'").fetchone()[0] == 15
    _, inside = split_window(calls)
    # one autocommit INSERT = one rollback-journal transaction: the journal is unlinked 15 times
    assert sum(1 for c in inside if c.name == "unlink" and "test.db0-journal" in c.args) == 15
    assert "[DB information]" in stdout and "# of Tables" not in stdout


def test_delete_mode_removes_rows_then_the_files(reference_binary, tmp_path):
    work = tmp_path / "w"
    stdout, _ = strace_mobibench(reference_binary("mobibench"), tmp_path,
                                 "-p", str(work), "-d", "2", "-n", "10", "-T", "1")
    assert "init_db_for_update" in stdout and "trs : 296" in stdout
    assert not (work / "test.db0_0").exists()
