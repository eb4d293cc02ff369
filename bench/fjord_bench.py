"""Fjord's six configurations on one loop-device ext4: SQLite (Mobibench) and 4 KiB random writes with fsync.

    python bench/fjord_bench.py [--repeat 3] [--transactions 1000] [--fio-ios 4096] [--json out.json]
        [--configs plain,native,fjord-ram] [--workloads sqlite-update] [--locations critical]
    python bench/fjord_bench.py --soak [--soak-ops 100000] [--soak-options flush_ms=20,checkpoint_ms=100]

For each preset (native, logging, rambuf, both, fjord-ram, fjord-both) a fresh Fjord mount over a directory of the
same loop-device ext4 (whitelist=cache) runs: Mobibench insert and update (journal_mode=TRUNCATE, synchronous=FULL,
`mobibench -d 0|1 -n N -j 1 -s 2`) in the whitelisted directory `cache/` and in the critical directory `data/`, and
fio 4 KiB random writes with fsync=1 in both. Reported per cell: transactions (or IOs) per second, and bytes written
to the block device (/sys/block/loopN/stat sectors written) from just before the workload until after the daemon
has unmounted (its RAM buffer written out) and the ext4 has been synced, so deferred bytes are counted, not hidden.
Ratios are against the `native` preset (FUSE passthrough); plain ext4 without FUSE is shown for context.
The machine is shared: medians of --repeat runs, with min-max.

Needs root (loop device, mount), fuse3, fio, and reference-impl/bin/{fjord,mobibench} (built if missing).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BIN = REPO / "reference-impl" / "bin"
PRESETS = ["native", "logging", "rambuf", "both", "fjord-ram", "fjord-both"]
PLAIN = "ext4 (no FUSE)"
LOCATIONS = {"whitelisted": "cache", "critical": "data"}


@dataclass
class Cell:
    config: str
    workload: str  # sqlite-insert, sqlite-update, fio-randwrite-fsync
    location: str  # whitelisted | critical
    rep: int
    rate: float  # transactions/s or IOPS
    device_bytes: int
    seconds: float


def run(cmd: list[str], timeout: float = 600, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, timeout=timeout, capture_output=True, text=True, **kw)


@contextmanager
def loop_ext4(size_gib: int = 3):
    """A fresh ext4 on a loop device of our own; always detached and removed afterwards."""
    work = Path(tempfile.mkdtemp(prefix="fjord-bench-", dir="/var/tmp"))
    image, mnt = work / "ext4.img", work / "fs"
    loop = None
    try:
        with open(image, "wb") as f:
            f.truncate(size_gib << 30)
        loop = run(["losetup", "--find", "--show", "--direct-io=on", str(image)]).stdout.strip()
        run(["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", loop])
        mnt.mkdir()
        run(["mount", "-t", "ext4", loop, str(mnt)])
        yield loop, mnt
    finally:
        if loop:
            subprocess.run(["umount", str(mnt)], timeout=120)
            subprocess.run(["losetup", "-d", loop], timeout=60)
        shutil.rmtree(work, ignore_errors=True)


def sectors_written(loop: str) -> int:
    fields = Path(f"/sys/block/{Path(loop).name}/stat").read_text().split()
    return int(fields[6])


def sync_fs(path: Path) -> None:
    run(["sync", "-f", str(path)], timeout=300)


def is_mounted(path: Path) -> bool:
    with open("/proc/self/mountinfo") as info:
        return any(line.split()[4] == str(path) for line in info)


@contextmanager
def fjord(preset: str, source: Path, mountpoint: Path, counters: Path, extra: str = ""):
    """A Fjord daemon for the duration of the block; yields nothing, unmounts cleanly (flushing) at the end."""
    source.mkdir(parents=True, exist_ok=True)
    mountpoint.mkdir(parents=True, exist_ok=True)
    opts = f"preset={preset},whitelist=cache,counters={counters}" + (f",{extra}" if extra else "")
    proc = subprocess.Popen([str(BIN / "fjord"), "-f", "-o", opts, str(source), str(mountpoint)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120  # a new 128 MiB log is zero-filled first
        while not is_mounted(mountpoint):
            if proc.poll() is not None:
                raise RuntimeError(f"fjord {preset} failed: {proc.stderr.read()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"fjord {preset} did not mount")
            time.sleep(0.05)
        yield
        run(["fusermount3", "-u", str(mountpoint)], timeout=300)
        proc.wait(timeout=300)
    finally:
        if is_mounted(mountpoint):
            subprocess.run(["fusermount3", "-uz", str(mountpoint)], timeout=60)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=60)


def mobibench(directory: Path, op: int, transactions: int) -> float:
    out = run([str(BIN / "mobibench"), "--no-drop-caches", "-q", "-p", str(directory), "-d", str(op),
               "-n", str(transactions), "-j", "1", "-s", "2"], timeout=1800).stdout
    match = re.search(r"([\d.]+) Transactions/sec", out)
    if not match:
        raise RuntimeError(f"no TPS in mobibench output:\n{out}")
    return float(match.group(1))


def fio_layout(directory: Path) -> None:
    run(["fio", "--name=lay", f"--directory={directory}", "--size=64M", "--bs=1M", "--rw=write",
         "--create_only=1", "--fallocate=none"], timeout=600)
    run(["fio", "--name=lay", f"--directory={directory}", "--size=64M", "--bs=1M", "--rw=write",
         "--end_fsync=1"], timeout=600)


def fio_randwrite(directory: Path, ios: int) -> float:
    out = run(["fio", "--name=lay", f"--directory={directory}", "--size=64M", "--bs=4k", "--rw=randwrite",
               "--ioengine=psync", "--fsync=1", f"--number_ios={ios}", "--randrepeat=1", "--norandommap",
               "--output-format=json"], timeout=1800).stdout
    job = json.loads(out[out.index("{"):])["jobs"][0]["write"]
    return float(job["iops"])


def measure(loop: str, fs: Path, work: Path, body) -> tuple[float, int, float]:
    """Runs body() -> rate inside the measured window; returns (rate, device bytes, seconds)."""
    sync_fs(fs)
    before = sectors_written(loop)
    start = time.monotonic()
    rate = body()
    seconds = time.monotonic() - start
    return rate, before, seconds


WORKLOADS = ["sqlite-insert", "sqlite-update", "fio-randwrite-fsync"]


def bench(args) -> list[Cell]:
    cells: list[Cell] = []
    configs = [c for c in [PLAIN] + PRESETS if (c if c != PLAIN else "plain") in args.configs]
    with loop_ext4() as (loop, fs):
        print(f"loop device {loop}, ext4 at {fs}", file=sys.stderr)
        for rep in range(args.repeat):
            for config in configs:
                for workload in [w for w in WORKLOADS if w in args.workloads]:
                    for location, subdir in [(k, v) for k, v in LOCATIONS.items() if k in args.locations]:
                        cells.append(one_cell(args, loop, fs, config, workload, location, subdir, rep))
                        c = cells[-1]
                        print(f"  rep {rep} {config:15} {workload:20} {location:11} {c.rate:9.1f}/s "
                              f"{c.device_bytes / 1e6:8.2f} MB", file=sys.stderr)
    return cells


def one_cell(args, loop, fs, config, workload, location, subdir, rep) -> Cell:
    slug = "plain" if config == PLAIN else config
    source = fs / f"{slug}-src"
    mnt = fs.parent / f"{slug}-mnt"
    counters = fs.parent / f"{slug}-counters.json"
    tag = f"{workload}-{rep}"
    native_dir = source / subdir / tag
    native_dir.mkdir(parents=True, exist_ok=True)

    def workload_in(directory: Path) -> float:
        if workload == "sqlite-insert":
            return mobibench(directory, 0, args.transactions)
        if workload == "sqlite-update":
            return mobibench(directory, 1, args.transactions)
        return fio_randwrite(directory, args.fio_ios)

    if workload.startswith("fio"):
        fio_layout(native_dir)  # laid out natively, outside the measured window
    if config == PLAIN:
        sync_fs(fs)
        before = sectors_written(loop)
        start = time.monotonic()
        rate = workload_in(native_dir)
        seconds = time.monotonic() - start
    else:
        with fjord(config, source, mnt, counters):
            sync_fs(fs)
            before = sectors_written(loop)
            start = time.monotonic()
            rate = workload_in(mnt / subdir / tag)
            seconds = time.monotonic() - start
        # unmounted: Fjord's buffer is out; now the native filesystem's own
    sync_fs(fs)
    after = sectors_written(loop)
    shutil.rmtree(native_dir, ignore_errors=True)
    return Cell(config, workload, location, rep, rate, (after - before) * 512, seconds)


def median_range(values: list[float]) -> tuple[float, float, float]:
    return statistics.median(values), min(values), max(values)


def report(cells: list[Cell]) -> str:
    lines = []
    for workload in WORKLOADS:
        unit = "IOPS" if workload.startswith("fio") else "TPS"
        for location in LOCATIONS:
            lines.append(f"\n{workload}, {location} directory ({unit}; device MB incl. deferred writes)")
            lines.append(f"{'config':16} {unit + ' median':>12} {'min-max':>17} {'x native':>9} "
                         f"{'MB median':>10} {'x native':>9}")
            base = [c for c in cells if c.config == "native" and c.workload == workload and c.location == location]
            base_rate = statistics.median(c.rate for c in base) if base else float("nan")
            base_bytes = statistics.median(c.device_bytes for c in base) if base else float("nan")
            for config in [PLAIN] + PRESETS:
                mine = [c for c in cells if c.config == config and c.workload == workload and c.location == location]
                if not mine:
                    continue
                rate, lo, hi = median_range([c.rate for c in mine])
                mb = statistics.median(c.device_bytes for c in mine) / 1e6
                lines.append(f"{config:16} {rate:12.1f} {lo:8.1f}-{hi:<8.1f} {rate / base_rate:9.2f} "
                             f"{mb:10.2f} {mb * 1e6 / base_bytes:9.2f}")
    return "\n".join(lines)


def targets(cells: list[Cell]) -> str:
    """The issue's targets, checked on the SQLite cells (insert and update together)."""
    def med(config, location, key):
        vals = [getattr(c, key) for c in cells if c.config == config and c.location == location
                and c.workload.startswith("sqlite")]
        return statistics.median(vals) if vals else float("nan")

    out = ["\ntargets (SQLite insert+update cells, medians):"]
    for config in ("fjord-ram", "fjord-both"):
        tps = med(config, "whitelisted", "rate") / med("native", "whitelisted", "rate")
        dev = med(config, "whitelisted", "device_bytes") / med("native", "whitelisted", "device_bytes")
        crit = med(config, "critical", "rate") / med("native", "critical", "rate")
        def verdict(value: float, ok: bool) -> str:
            return "not run" if value != value else ("met" if ok else "NOT met")

        out.append(f"  {config}: whitelisted TPS x{tps:.2f} (target >= 2: {verdict(tps, tps >= 2)}), "
                   f"device bytes x{dev:.2f} (target <= 0.33: {verdict(dev, dev <= 1 / 3)}), "
                   f"critical TPS x{crit:.2f} (target within 10 %: {verdict(crit, crit >= 0.9)})")
    return "\n".join(out)


def soak(ops: int, extra: str) -> int:
    sys.path.insert(0, str(REPO / "tests" / "support"))
    from fsx_model import run_fsx

    failures = 0
    with tempfile.TemporaryDirectory(prefix="fjord-soak-") as tmp:
        for preset in PRESETS:
            source, mnt = Path(tmp) / f"{preset}-src", Path(tmp) / f"{preset}-mnt"
            (source / "cache").mkdir(parents=True)
            with fjord(preset, source, mnt, Path(tmp) / f"{preset}.json", extra):
                runs = [("critical", mnt, source, 1)]
                if preset.startswith("fjord-"):
                    runs.append(("whitelisted", mnt / "cache", None, 2))
                for label, directory, native, seed in runs:
                    start = time.monotonic()
                    result = run_fsx(directory, ops=ops, seed=seed, native_dir=native)
                    failures += result.miscompares
                    print(f"{preset:11} {label:11} {result.ops_done} ops, {result.miscompares} miscompares "
                          f"({time.monotonic() - start:.0f} s)" + (f"\n{result.summary()}" if result.failure else ""),
                          flush=True)
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     epilog="examples: python bench/fjord_bench.py --repeat 3; "
                                            "python bench/fjord_bench.py --soak --soak-ops 100000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--transactions", type=int, default=1000)
    parser.add_argument("--fio-ios", type=int, default=4096)
    parser.add_argument("--json", type=Path, help="write every repetition's cell here")
    parser.add_argument("--configs", type=lambda s: s.split(","), default=["plain"] + PRESETS,
                        help="comma-separated subset of plain," + ",".join(PRESETS))
    parser.add_argument("--workloads", type=lambda s: s.split(","), default=WORKLOADS,
                        help="comma-separated subset of " + ",".join(WORKLOADS))
    parser.add_argument("--locations", type=lambda s: s.split(","), default=list(LOCATIONS),
                        help="whitelisted,critical or one of them")
    parser.add_argument("--soak", action="store_true", help="fsx soak through every preset instead")
    parser.add_argument("--soak-ops", type=int, default=100_000)
    parser.add_argument("--soak-options", default="",
                        help="extra fjord options for the soak, e.g. flush_ms=20,checkpoint_ms=100,log_size=4M")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("needs root (loop device, mounts)", file=sys.stderr)
        return 2
    if not (BIN / "fjord").exists() or not (BIN / "mobibench").exists():
        subprocess.run(["make", "-s", "-C", str(REPO / "reference-impl")], check=True, timeout=600)
    if args.soak:
        print(f"fsx soak, {args.soak_ops} ops per run, extra options '{args.soak_options}'", flush=True)
        failures = soak(args.soak_ops, args.soak_options)
        print(f"soak: {failures} miscompares in total")
        return 1 if failures else 0
    cells = bench(args)
    if args.json:
        args.json.write_text(json.dumps([asdict(c) for c in cells], indent=1))
    print(f"Fjord on loop-device ext4, {args.transactions} transactions per Mobibench run, {args.fio_ios} fio IOs, "
          f"{args.repeat} repetitions; shared, loaded machine (load average {os.getloadavg()[0]:.1f})")
    print(report(cells))
    print(targets(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
