"""bFUSE benchmark: native vs legacy FUSE vs bFUSE vs libfuse's passthrough_ll, on one loop-device ext4.

One run creates its own ext4 on its own loop device (image in /var/tmp, cleaned up in all cases), builds libfuse's
passthrough_ll example from /usr/share/doc/libfuse3-dev/examples into a temp dir (with libfuse's own
fuse_parse_conn_info_opts/fuse_apply_conn_info_opts added at build time so that -o max_write= works; the source is
not kept), and measures every configuration on the same filesystem:

  seq   sequential 512 KiB writes of a 512 MiB file (default) followed by fsync: MB/s (MiB/s, 2^20)
  rand  4 KiB random writes into a 64 MiB file, each followed by fsync: IOPS

and, for bfuse configurations, the daemon's pwrite calls for one sequential file (the paper's Table 3: 131,072
legacy / 1,024 with a 512 KiB IO unit / <= 260 with the 8 MiB buffer). Figures are medians of --repeat runs with
their range. Needs root (loop device, mounts) and /dev/fuse.

    python bench/bfuse_bench.py                 # full size: 512 MiB, 3 repetitions
    python bench/bfuse_bench.py --quick         # 64 MiB, 2 repetitions, fewer random writes
    python bench/bfuse_bench.py --only native,legacy,bfuse --json results.json
    python bench/bfuse_bench.py --tmpfs --quick   # same, over a tmpfs: the FUSE path without a device
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BFUSE = REPO / "reference-impl" / "bin" / "bfuse"
EXAMPLES = Path("/usr/share/doc/libfuse3-dev/examples")
MIB = 1 << 20
KIB = 1 << 10


@dataclass
class Config:
    name: str
    kind: str            # native | bfuse | ptll
    options: str = ""    # -o value for the daemon
    note: str = ""


CONFIGS = [
    Config("native", "native", note="ext4 on the loop device"),
    Config("legacy", "bfuse", "preset=legacy", "4 KiB unit, 1 thread, pwrite per request"),
    Config("nobuf", "bfuse", "preset=nobuf", "512 KiB unit, no buffer"),
    Config("nobuf+splice", "bfuse", "preset=zerocopy", "512 KiB unit, splice, no buffer (seed 003)"),
    Config("bfuse", "bfuse", "preset=bfuse", "512 KiB, 8 MiB of 2 MiB entries, 10 ms; spliced, pipe read into entry"),
    Config("bfuse+aligned", "bfuse", "preset=bfuse,entry_phase=0",
           "bfuse with entries at 2 MiB-aligned offsets: 2 MiB page-cache folios natively"),
    Config("bfuse+ownloop", "bfuse", "preset=bfuse,splice=0", "bfuse on fusecore's loop: receive buffers adopted"),
    Config("bfuse+copy", "bfuse", "preset=bfuse,splice=0,own_loop=0", "bfuse on libfuse's loop: data copied"),
    Config("bfuse+wbcache", "bfuse", "preset=bfuse,writeback_cache=1", "bfuse with kernel writeback cache"),
    Config("ptll", "ptll", "", "passthrough_ll default (1 MiB, splice falls back)"),
    Config("ptll_mw512k", "ptll", "max_write=524288", "512 KiB, splice"),
    Config("ptll_mw512k_nosplice", "ptll", "max_write=524288,no_splice_read", "512 KiB, read+pwrite"),
    Config("ptll_wb_mw512k", "ptll", "max_write=524288,writeback", "512 KiB, writeback cache"),
]


@dataclass
class Result:
    config: Config
    seq_mbps: list[float] = field(default_factory=list)
    seq_write_phase_mbps: list[float] = field(default_factory=list)
    daemon_cpu_s_per_gib: list[float] = field(default_factory=list)
    rand_iops: list[float] = field(default_factory=list)
    pwrite_calls: int | None = None
    fuse_writes: int | None = None
    error: str = ""


def run(cmd: list[str], timeout: float = 60, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=timeout, **kwargs)


def is_mounted(path: Path) -> bool:
    with open("/proc/self/mountinfo") as mountinfo:
        return any(line.split()[4] == str(path) for line in mountinfo)


@contextmanager
def loop_ext4(workdir: Path, size_mib: int):
    """A fresh ext4 on a loop device of our own; unmounted and detached whatever happens."""
    image, mnt = workdir / "ext4.img", workdir / "ext4"
    mnt.mkdir()
    with open(image, "wb") as f:
        f.truncate(size_mib * MIB)
    device = None
    try:
        device = run(["losetup", "--find", "--show", str(image)]).stdout.strip()
        run(["mkfs.ext4", "-q", "-F", "-L", "bfuse-bench", "-E", "lazy_itable_init=0,lazy_journal_init=0", device],
            timeout=300)
        run(["mount", "-t", "ext4", device, str(mnt)])
        yield device, mnt
    finally:
        if is_mounted(mnt):
            subprocess.run(["umount", str(mnt)], capture_output=True, timeout=60)
            if is_mounted(mnt):
                subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=60)
        if device:
            subprocess.run(["losetup", "-d", device], capture_output=True, timeout=60)
        image.unlink(missing_ok=True)


@contextmanager
def own_tmpfs(workdir: Path, size_mib: int):
    """A tmpfs of our own (--tmpfs): no device under the daemons, so only the FUSE path costs are measured."""
    mnt = workdir / "tmpfs"
    mnt.mkdir()
    run(["mount", "-t", "tmpfs", "-o", f"size={size_mib}m", "bfuse-bench-tmpfs", str(mnt)])
    try:
        yield "tmpfs", mnt
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True, timeout=60)
        if is_mounted(mnt):
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=60)


def build_passthrough_ll(workdir: Path) -> Path:
    """Compile libfuse's passthrough_ll example, with -o max_write= & co via libfuse's conn-info option helpers."""
    source = (EXAMPLES / "passthrough_ll.c").read_text()
    source = source.replace(
        "static void lo_init(void *userdata,",
        "static struct fuse_conn_info_opts *bench_conn_opts;\n\nstatic void lo_init(void *userdata,", 1)
    source = source.replace(
        "\tstruct lo_data *lo = (struct lo_data*) userdata;\n\n\tif(conn->capable & FUSE_CAP_EXPORT_SUPPORT)",
        "\tstruct lo_data *lo = (struct lo_data*) userdata;\n\n"
        "\tif (bench_conn_opts)\n\t\tfuse_apply_conn_info_opts(bench_conn_opts, conn);\n"
        "\tif(conn->capable & FUSE_CAP_EXPORT_SUPPORT)", 1)
    source = source.replace(
        "\tif (fuse_opt_parse(&args, &lo, lo_opts, NULL)== -1)",
        "\tbench_conn_opts = fuse_parse_conn_info_opts(&args);\n"
        "\tif (fuse_opt_parse(&args, &lo, lo_opts, NULL)== -1)", 1)
    if source.count("bench_conn_opts") != 4:
        raise RuntimeError("passthrough_ll.c did not take the max_write patch (different libfuse version?)")
    build = workdir / "ptll"
    build.mkdir()
    (build / "passthrough_ll.c").write_text(source)
    shutil.copy(EXAMPLES / "passthrough_helpers.h", build)
    flags = run(["pkg-config", "--cflags", "--libs", "fuse3"]).stdout.split()
    binary = build / "passthrough_ll"
    run(["cc", "-O2", "-o", str(binary), str(build / "passthrough_ll.c"), *flags, "-lpthread"], timeout=120)
    return binary


@contextmanager
def fuse_mount(config: Config, source: Path, mnt: Path, ptll: Path | None, counters: Path):
    """Start the daemon of `config` in the foreground, wait for its mount, always unmount and reap it."""
    if config.kind == "bfuse":
        cmd = [str(BFUSE), "-f", "-o", f"{config.options},counters={counters}", str(source), str(mnt)]
    else:
        opts = f"source={source}" + (f",{config.options}" if config.options else "")
        cmd = [str(ptll), "-f", "-o", opts, str(mnt)]
    stderr = tempfile.TemporaryFile()
    process = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        deadline = time.monotonic() + 10
        while not is_mounted(mnt):
            if process.poll() is not None or time.monotonic() > deadline:
                stderr.seek(0)
                raise RuntimeError(f"{config.name} did not mount: {stderr.read().decode(errors='replace')}")
            time.sleep(0.02)
        yield process
    finally:
        if is_mounted(mnt):
            subprocess.run(["fusermount3", "-u", str(mnt)], capture_output=True, timeout=30)
        if is_mounted(mnt):
            subprocess.run(["fusermount3", "-uz", str(mnt)], capture_output=True, timeout=30)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        stderr.close()


def bfuse_counters(process: subprocess.Popen, path: Path) -> dict:
    path.unlink(missing_ok=True)
    process.send_signal(signal.SIGUSR1)
    deadline = time.monotonic() + 10
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError("bfuse wrote no counters")
        time.sleep(0.01)
    return json.loads(path.read_text())


def sequential_write(path: Path, total: int, record: int = 512 * KIB) -> tuple[float, float]:
    """MB/s of writing `total` bytes in `record` writes plus fsync, and MB/s of the write() phase alone."""
    block = os.urandom(record)
    start = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for _ in range(total // record):
            os.write(fd, block)
        written = time.perf_counter()
        os.fsync(fd)
    finally:
        os.close(fd)
    elapsed = time.perf_counter() - start
    path.unlink()
    return total / MIB / elapsed, total / MIB / (written - start)


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads) from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def random_fsync_writes(path: Path, count: int, file_size: int = 64 * MIB, seed: int = 1) -> float:
    """IOPS of `count` 4 KiB writes at random aligned offsets, each followed by fsync."""
    rng = random.Random(seed)
    block = os.urandom(4096)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        chunk = os.urandom(MIB)
        for off in range(0, file_size, MIB):
            os.pwrite(fd, chunk, off)
        os.fsync(fd)
        offsets = [rng.randrange(file_size // 4096) * 4096 for _ in range(count)]
        start = time.perf_counter()
        for off in offsets:
            os.pwrite(fd, block, off)
            os.fsync(fd)
        elapsed = time.perf_counter() - start
    finally:
        os.close(fd)
    path.unlink()
    return count / elapsed


def warm_free_memory(size: int) -> None:
    """Touch `size` bytes of fresh anonymous memory and give it back, right before a measured run.

    This VM reports free guest pages to its host (virtio free page reporting) a few seconds after they are
    freed; touching such a page again costs ~10x more (measured here: 2.2-3.1 s/GiB against 0.23 s/GiB for a
    page freed a moment ago), so a run whose page cache lands on reported pages pays ~3 s/GiB more, depending on
    what ran before it rather than on its configuration. The allocator hands out the most recently freed pages
    first, so each run starts on warm pages; a run longer than the reporting delay (legacy: ~11 s) still reaches
    cold ones. This narrowed the spread of some configurations but not all (native 293-1138 MB/s in one run):
    the VM's disk adds its own."""
    import mmap

    region = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        page = mmap.PAGESIZE
        for offset in range(0, size, page):
            region[offset] = 1
    finally:
        region.close()


def measure_once(config: Config, fs: Path, ptll: Path | None, args, rep: int, result: Result) -> None:
    """One repetition of both workloads on `config`, with a fresh mount (and counters on the first one).

    Every configuration writes into the same source directory (emptied after each run), so all of them write into
    the same ext4 block group: ext4 spreads top-level directories over block groups (Orlov). (This did not remove
    the effect it was tried against: in most full runs one or two configurations are 2-5x slower, daemon CPU
    included, in every repetition of that run, and which ones changes with the set of configurations run.)"""
    source = fs / "src"
    source.mkdir(exist_ok=True)
    mnt = fs.parent / f"mnt-{config.name}"
    mnt.mkdir(exist_ok=True)
    counters = fs.parent / f"counters-{config.name}.json"
    try:
        subprocess.run(["sync"], timeout=120)
        # every cached byte of the run: the source file system's pages, the FUSE side's (writeback cache) and
        # the loop device's backing file's
        warm_free_memory(3 * args.seq_bytes + 256 * MIB)
        if config.kind == "native":
            total, phase = sequential_write(source / "seq", args.seq_bytes)
            result.seq_mbps.append(total)
            result.seq_write_phase_mbps.append(phase)
            result.rand_iops.append(random_fsync_writes(source / "rand", args.rand_count, seed=rep))
            return
        with fuse_mount(config, source, mnt, ptll, counters) as process:
            before = bfuse_counters(process, counters) if config.kind == "bfuse" and rep == 0 else None
            cpu_before = cpu_seconds(process.pid)
            total, phase = sequential_write(mnt / "seq", args.seq_bytes)
            result.daemon_cpu_s_per_gib.append((cpu_seconds(process.pid) - cpu_before) * (1 << 30) / args.seq_bytes)
            result.seq_mbps.append(total)
            result.seq_write_phase_mbps.append(phase)
            if before is not None:
                after = bfuse_counters(process, counters)
                result.pwrite_calls = (after["counters"]["daemon_pwrite_calls"] +
                                       after["counters"]["daemon_splice_write_calls"] -
                                       before["counters"]["daemon_pwrite_calls"] -
                                       before["counters"]["daemon_splice_write_calls"])
                result.fuse_writes = (after["ops"]["write"]["requests"] -
                                      before["ops"].get("write", {"requests": 0})["requests"])
            result.rand_iops.append(random_fsync_writes(mnt / "rand", args.rand_count, seed=rep))
    except Exception as err:   # one broken configuration must not lose the others' figures
        result.error = str(err)[:300]
    finally:
        for leftover in source.iterdir():
            if leftover.is_dir() and not leftover.is_symlink():
                shutil.rmtree(leftover, ignore_errors=True)
            else:
                leftover.unlink(missing_ok=True)


def median_range(values: list[float]) -> tuple[float, float, float]:
    return statistics.median(values), min(values), max(values)


def print_table(results: list[Result], args) -> None:
    by_name = {r.config.name: r for r in results if not r.error and r.seq_mbps}
    native = by_name.get("native")
    legacy = by_name.get("legacy")
    ptlls = [r for r in by_name.values() if r.config.kind == "ptll"]
    best_seq = max(ptlls, key=lambda r: statistics.median(r.seq_mbps), default=None)
    best_rand = max(ptlls, key=lambda r: statistics.median(r.rand_iops), default=None)

    def ratio(value: float, peer: Result | None, attr: str) -> str:
        if not peer:
            return "-"
        return f"{value / statistics.median(getattr(peer, attr)):.2f}x"

    size = f"{args.seq_bytes // MIB} MiB"
    print(f"\nsequential 512 KiB writes of {size} + fsync; 4 KiB random writes + fsync x {args.rand_count}; "
          f"median of {args.repeat} (range); machine shared with other jobs: figures are noisy")
    head = (f"{'config':22} {'seq MB/s':>8} {'range':>9} {'/native':>7} {'/legacy':>7} {'/best ll':>8} "
            f"{'wr-phase':>8} {'cpu s/GiB':>9} {'rand IOPS':>9} {'range':>9} {'/native':>7} {'/best ll':>8} "
            f"{'FUSE wr':>7} {'pwrites':>7}")
    print(head)
    print("-" * len(head))
    for r in results:
        if r.error:
            print(f"{r.config.name:22} ERROR: {r.error}")
            continue
        seq, seq_lo, seq_hi = median_range(r.seq_mbps)
        iops, iops_lo, iops_hi = median_range(r.rand_iops)
        phase = statistics.median(r.seq_write_phase_mbps)
        cpu = f"{statistics.median(r.daemon_cpu_s_per_gib):.2f}" if r.daemon_cpu_s_per_gib else "-"
        print(f"{r.config.name:22} {seq:8.0f} {f'{seq_lo:.0f}-{seq_hi:.0f}':>9} {ratio(seq, native, 'seq_mbps'):>7} "
              f"{ratio(seq, legacy, 'seq_mbps'):>7} {ratio(seq, best_seq, 'seq_mbps'):>8} {phase:8.0f} {cpu:>9} "
              f"{iops:9.0f} {f'{iops_lo:.0f}-{iops_hi:.0f}':>9} {ratio(iops, native, 'rand_iops'):>7} "
              f"{ratio(iops, best_rand, 'rand_iops'):>8} "
              f"{r.fuse_writes if r.fuse_writes is not None else '-':>7} "
              f"{r.pwrite_calls if r.pwrite_calls is not None else '-':>7}")
    print("seq MB/s includes the final fsync; wr-phase = MB/s of the write() calls alone (before fsync); "
          "cpu s/GiB = daemon user+sys CPU per GiB written (less sensitive to machine load than MB/s)")
    if best_seq:
        print(f"\nbest passthrough_ll: seq {best_seq.config.name}, rand {best_rand.config.name}")
    bfuse = by_name.get("bfuse")
    if bfuse and best_seq and legacy:
        seq = statistics.median(bfuse.seq_mbps)
        print(f"targets: bfuse >= best passthrough_ll: {seq / statistics.median(best_seq.seq_mbps):.2f}x "
              f"({'met' if seq >= statistics.median(best_seq.seq_mbps) else 'NOT met'}); "
              f"bfuse >= 7x legacy: {seq / statistics.median(legacy.seq_mbps):.1f}x "
              f"({'met' if seq >= 7 * statistics.median(legacy.seq_mbps) else 'NOT met'})")
    if bfuse and ptlls:
        # the best of several noisy medians is biased upwards (winner's curse): show every peer, and the
        # daemon CPU per GiB, which the load disturbs less than MB/s
        peers = ", ".join(f"{r.config.name} {statistics.median(bfuse.seq_mbps) / statistics.median(r.seq_mbps):.2f}x"
                          for r in ptlls)
        print(f"bfuse seq vs each passthrough_ll: {peers}")
        if bfuse.daemon_cpu_s_per_gib:
            cpus = ", ".join(f"{r.config.name} {statistics.median(r.daemon_cpu_s_per_gib):.2f}" for r in ptlls
                             if r.daemon_cpu_s_per_gib)
            print(f"daemon CPU s/GiB: bfuse {statistics.median(bfuse.daemon_cpu_s_per_gib):.2f}; {cpus}")
    scale = 512 * MIB / args.seq_bytes
    counts = ", ".join(f"{name} {by_name[name].pwrite_calls * scale:,.0f}" for name in ("legacy", "nobuf", "bfuse")
                       if name in by_name and by_name[name].pwrite_calls is not None)
    if counts:
        print(f"daemon pwrite calls per 512 MiB (targets 131,072 / 1,024 / <= 260): {counts}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog="examples: python bench/bfuse_bench.py --quick; "
                                            "python bench/bfuse_bench.py --json bfuse.json")
    parser.add_argument("--quick", action="store_true", help="64 MiB, 2 repetitions, 300 random writes")
    parser.add_argument("--list", action="store_true", help="list the configurations and exit")
    parser.add_argument("--tmpfs", action="store_true",
                        help="a tmpfs instead of the loop-device ext4 (FUSE path cost without a device)")
    parser.add_argument("--repeat", type=int, default=None)
    parser.add_argument("--size-mib", type=int, default=None, help="sequential file size (default 512)")
    parser.add_argument("--rand-count", type=int, default=None, help="random 4 KiB writes per run (default 2000)")
    parser.add_argument("--only", default="", help="comma-separated config names")
    parser.add_argument("--json", type=Path, help="write all repetitions here")
    args = parser.parse_args(argv)
    args.repeat = args.repeat or (2 if args.quick else 3)
    args.seq_bytes = (args.size_mib or (64 if args.quick else 512)) * MIB
    args.rand_count = args.rand_count or (300 if args.quick else 2000)
    if args.list:
        for config in CONFIGS:
            print(f"{config.name:22} {config.kind:7} {config.options:40} {config.note}")
        return 0
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        print("bfuse_bench: needs root (loop device, mounts) and /dev/fuse", file=sys.stderr)
        return 2
    if not BFUSE.exists():
        run(["make", "-s", "-C", str(REPO / "reference-impl" / "bfuse")], timeout=300)
    configs = [c for c in CONFIGS if not args.only or c.name in args.only.split(",")]

    with tempfile.TemporaryDirectory(prefix="bfuse-bench-", dir="/var/tmp") as tmp:
        workdir = Path(tmp)
        ptll = build_passthrough_ll(workdir) if any(c.kind == "ptll" for c in configs) else None
        image_mib = max(2048, 3 * args.seq_bytes // MIB + 512)
        filesystem = own_tmpfs(workdir, image_mib) if args.tmpfs else loop_ext4(workdir, image_mib)
        with filesystem as (device, fs):
            print(f"{'tmpfs' if args.tmpfs else 'ext4 on ' + device} ({image_mib} MiB), "
                  f"kernel {os.uname().release}, load average {os.getloadavg()[0]:.1f}")
            # round robin: every repetition visits every configuration, so load swings spread evenly
            results = [Result(config) for config in configs]
            for rep in range(args.repeat):
                for result in results:
                    if result.error:
                        continue
                    measure_once(result.config, fs, ptll, args, rep, result)
                    status = result.error or (f"seq {result.seq_mbps[-1]:.0f} MB/s, "
                                              f"rand {result.rand_iops[-1]:.0f} IOPS")
                    print(f"  rep {rep + 1} {result.config.name}: {status}", flush=True)
    print_table(results, args)
    if args.json:
        args.json.write_text(json.dumps([
            {"config": r.config.name, "options": r.config.options, "note": r.config.note,
             "seq_mbps": r.seq_mbps, "seq_write_phase_mbps": r.seq_write_phase_mbps,
             "daemon_cpu_s_per_gib": r.daemon_cpu_s_per_gib, "rand_iops": r.rand_iops, "pwrite_calls": r.pwrite_calls,
             "fuse_writes": r.fuse_writes, "seq_bytes": args.seq_bytes, "error": r.error}
            for r in results], indent=2))
    return 1 if any(r.error for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
