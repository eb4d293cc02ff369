"""Benchmark of the device model: does an emulated eMMC behave like the profile says, and what does the model cost?

    python bench/devmodel_bench.py [--reps 3] [--quick]

1. emmc-2012 (and ufs-2020) through loop + ext4 on the throttled store: sequential 512 KiB writes (O_DIRECT, and
   buffered + one fsync) and 4 KiB random overwrites each followed by fsync; MB/s and IOPS against the profile's
   nominal figures, with what the device saw per operation (writes, flushes) and how much of the elapsed time the
   modelled device was busy (device busy % near 100 = device-bound, as on the phones of the papers).
2. The `host` profile against a plain loop device on a plain file: the cost of the FUSE hop itself.

Needs root, FUSE and reference-impl/bin/devmodel (make -C reference-impl). Medians of --reps runs with min-max.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mobiperf.stack.device_model import PROFILES, ThrottledStore  # noqa: E402

MiB = 1 << 20
DAEMON = REPO / "reference-impl" / "bin" / "devmodel"
DEVICE_SIZE = 1024 * MiB


def run(argv: list[str], timeout: float = 60) -> str:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=True).stdout


@contextmanager
def ext4_stack(workdir: Path, profile: str | None, loop_dio: bool = True):
    """ext4 on a loop device on the throttled store, or on a plain file when profile is None."""
    workdir.mkdir(parents=True)
    backing = workdir / "backing.img"
    with ExitStack() as cleanup:
        store = None
        if profile is None:
            with open(backing, "wb") as f:
                f.truncate(DEVICE_SIZE)
            image = backing
        else:
            store = ThrottledStore(backing, DEVICE_SIZE, profile, workdir, DAEMON)
            image = cleanup.enter_context(store)
        loop = run(["losetup", "-f", "--show", f"--direct-io={'on' if loop_dio else 'off'}", str(image)]).strip()
        cleanup.callback(subprocess.run, ["losetup", "-d", loop], capture_output=True, timeout=30)
        run(["mkfs.ext4", "-q", "-F", "-E", "nodiscard,lazy_itable_init=0,lazy_journal_init=0", loop], 300)
        mnt = workdir / "fs"
        mnt.mkdir()
        run(["mount", loop, str(mnt)])
        cleanup.callback(subprocess.run, ["umount", str(mnt)], capture_output=True, timeout=60)
        yield mnt, store
    if store is not None:
        backing.unlink(missing_ok=True)


def aligned_buffer(size: int) -> memoryview:
    buf = mmap.mmap(-1, size)
    buf.write(os.urandom(size))
    return memoryview(buf)


def seq_write(path: Path, size: int, direct: bool, record: int = 512 * 1024) -> float:
    buf = aligned_buffer(record)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | (os.O_DIRECT if direct else 0), 0o644)
    try:
        start = time.monotonic()
        for off in range(0, size, record):
            os.pwrite(fd, buf, off)
        os.fsync(fd)
        return time.monotonic() - start
    finally:
        os.close(fd)


def prepare_file(path: Path, size: int) -> None:
    seq_write(path, size, direct=True)
    run(["sync", "-f", str(path)])


def rand_write_fsync(path: Path, file_size: int, count: int, record: int = 4096, seed: int = 7) -> float:
    """Overwrite `count` random 4 KiB blocks of an existing file, fsync after each (SQLite's pattern)."""
    buf = aligned_buffer(record)
    rng = random.Random(seed)
    offsets = [rng.randrange(file_size // record) * record for _ in range(count)]
    fd = os.open(path, os.O_WRONLY)
    try:
        start = time.monotonic()
        for off in offsets:
            os.pwrite(fd, buf, off)
            os.fsync(fd)
        return time.monotonic() - start
    finally:
        os.close(fd)


@dataclass
class Sample:
    seconds: float
    device: dict  # deltas of the daemon's counters over the run


def counter_delta(store: ThrottledStore | None, before: dict | None) -> dict:
    if store is None:
        return {}
    after = store.counters()
    out = {}
    for op in ("write", "flush"):
        for key in ("count", "bytes", "service_ns", "rand", "seq"):
            out[f"{op}.{key}"] = after["ops"][op][key] - before["ops"][op][key]
    return out


def measure(store: ThrottledStore | None, body) -> Sample:
    before = store.counters() if store else None
    seconds = body()
    return Sample(seconds, counter_delta(store, before))


def median_range(values: list[float]) -> tuple[float, float, float]:
    return statistics.median(values), min(values), max(values)


@dataclass
class Row:
    config: str
    workload: str
    unit: str
    values: list[float]
    nominal: float | None
    per_op: str
    busy: float | None


def emmc_rows(profile_name: str, workdir: Path, reps: int, seq_size: int, rand_count: int,
              loop_dio: bool = True) -> list[Row]:
    profile = PROFILES[profile_name]
    config = profile_name if loop_dio else f"{profile_name} (loop dio off)"
    rows: list[Row] = []
    with ext4_stack(workdir, profile_name, loop_dio) as (mnt, store):
        for direct, label in ((True, "seq 512 KiB O_DIRECT"), (False, "seq 512 KiB buffered+fsync")):
            samples = []
            for i in range(reps):
                target = mnt / f"seq{i}"
                samples.append(measure(store, lambda: seq_write(target, seq_size, direct)))
                target.unlink()
                run(["sync", "-f", str(mnt)])
            mbps = [seq_size / s.seconds / 1e6 for s in samples]
            dev = samples[len(samples) // 2].device
            busy = statistics.median(
                (s.device["write.service_ns"] + s.device["flush.service_ns"]) / 1e9 / s.seconds for s in samples
            )
            per_op = f"{dev['write.count']} writes, {dev['flush.count']} flushes, {dev['write.bytes'] / MiB:.1f} MiB"
            rows.append(Row(config, label, "MB/s", mbps, profile.write_bw_bytes_per_s / 1e6, per_op, busy))

        if rand_count:
            file_size = 64 * MiB
            prepare_file(mnt / "db", file_size)
            samples = [measure(store, lambda: rand_write_fsync(mnt / "db", file_size, rand_count, seed=i))
                       for i in range(reps)]
            iops = [rand_count / s.seconds for s in samples]
            dev = samples[len(samples) // 2].device
            # nominal: one random 4 KiB write plus one flush per fsync, the device's own floor
            nominal = 1e9 / (profile.rand_write_lat_ns + 4096 * 1e9 / profile.write_bw_bytes_per_s
                             + profile.flush_lat_ns)
            busy = statistics.median(
                (s.device["write.service_ns"] + s.device["flush.service_ns"]) / 1e9 / s.seconds for s in samples
            )
            per_op = (f"{dev['write.count'] / rand_count:.2f} writes ({dev['write.rand'] / rand_count:.2f} random), "
                      f"{dev['flush.count'] / rand_count:.2f} flushes, "
                      f"{dev['write.bytes'] / rand_count / 1024:.0f} KiB per fsync")
            rows.append(Row(config, "rand 4 KiB write+fsync", "IOPS", iops, nominal, per_op, busy))
    return rows


def host_overhead_rows(workdir: Path, reps: int, seq_size: int, rand_count: int) -> list[tuple[str, list, list]]:
    """Both stacks mounted at once and measured in alternation, so a change of load hits both alike."""
    results: dict[str, dict[str, list[float]]] = {"plain loop": {}, "host profile": {}}
    with ExitStack() as stacks:
        mounts = {
            config: stacks.enter_context(ext4_stack(workdir / config.replace(" ", "-"), profile))[0]
            for config, profile in (("plain loop", None), ("host profile", "host"))
        }
        for mnt in mounts.values():
            prepare_file(mnt / "db", 64 * MiB)
        for i in range(reps):
            order = list(mounts.items()) if i % 2 == 0 else list(reversed(mounts.items()))
            for config, mnt in order:
                r = results[config]
                t = seq_write(mnt / "seq", seq_size, direct=True)
                r.setdefault("seq 512 KiB O_DIRECT (MB/s)", []).append(seq_size / t / 1e6)
                t = seq_write(mnt / "seq", seq_size, direct=False)
                r.setdefault("seq 512 KiB buffered+fsync (MB/s)", []).append(seq_size / t / 1e6)
                (mnt / "seq").unlink()
                t = rand_write_fsync(mnt / "db", 64 * MiB, rand_count, seed=i)
                r.setdefault("rand 4 KiB write+fsync (IOPS)", []).append(rand_count / t)
    return [(w, results["plain loop"][w], results["host profile"][w]) for w in results["plain loop"]]


def print_profile_rows(rows: list[Row]) -> None:
    print(f"{'profile':27} {'workload':28} {'measured':>24} {'nominal':>9} {'ratio':>6} {'dev busy':>8}  device saw")
    for r in rows:
        med = statistics.median(r.values)
        ratio = med / r.nominal if r.nominal else float("nan")
        busy = f"{100 * r.busy:7.0f}%" if r.busy is not None else ""
        print(f"{r.config:27} {r.workload:28} {fmt(r.values):>19} {r.unit:4} {r.nominal:9.1f} {ratio:6.2f} "
              f"{busy:>8}  {r.per_op}")
    print("\nnominal: seq = write_bw; rand = 1 / (rand_write_lat + 4 KiB / write_bw + flush_lat)")
    print("dev busy: modelled device busy time (write + flush service) / elapsed\n")


def fmt(values: list[float]) -> str:
    med, lo, hi = median_range(values)
    return f"{med:8.1f} ({lo:.1f}-{hi:.1f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="smaller files (a smoke run, noisier)")
    parser.add_argument("--only", choices=("profiles", "host"), help="run one part only")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        print("devmodel_bench: needs root and /dev/fuse", file=sys.stderr)
        return 2
    if not DAEMON.exists():
        run(["make", "-s", "-C", str(REPO / "reference-impl")], 600)
    seq_size = (16 if args.quick else 128) * MiB
    rand_count = 50 if args.quick else 300

    load = os.getloadavg()
    print(f"devmodel benchmark: {args.reps} reps, medians (min-max); load average {load[0]:.2f} on "
          f"{os.cpu_count()} CPUs (shared machine: figures are noisy)\n")
    with tempfile.TemporaryDirectory(prefix="devmodel-bench-", dir="/var/tmp") as tmp:
        rows = []
        if args.only != "host":
            rows += emmc_rows("emmc-2012", Path(tmp) / "emmc", args.reps, seq_size, rand_count)
            rows += emmc_rows("emmc-2012", Path(tmp) / "emmc-bufloop", args.reps, seq_size, rand_count, loop_dio=False)
            rows += emmc_rows("ufs-2020", Path(tmp) / "ufs", args.reps, 4 * seq_size, 4 * rand_count)
        if rows:
            print_profile_rows(rows)
        host = []
        if args.only != "profiles":
            host = host_overhead_rows(Path(tmp) / "host", args.reps, 2 * seq_size, 4 * rand_count)
            print(f"{'ext4 on loop (dio), workload':36} {'plain loop':>22} {'host profile':>22} {'host/plain':>10}")
            for workload, plain, hosted in host:
                ratio = statistics.median(hosted) / statistics.median(plain)
                print(f"{workload:36} {fmt(plain):>22} {fmt(hosted):>22} {ratio:10.2f}")
    if args.json:
        args.json.write_text(json.dumps({
            "load_average": load[0],
            "reps": args.reps,
            "profiles": [
                {"config": r.config, "workload": r.workload, "unit": r.unit, "values": r.values,
                 "nominal": r.nominal, "device_busy": r.busy, "device_saw": r.per_op}
                for r in rows
            ],
            "host_overhead": [{"workload": w, "plain_loop": p, "host_profile": h} for w, p, h in host],
        }, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
