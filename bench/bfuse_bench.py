"""bFUSE benchmark and its gates: legacy FUSE vs bFUSE vs libfuse's passthrough_ll (and native, passthrough).

Every configuration is measured side by side in one run on one filesystem, repetitions alternated (round robin,
so load swings spread over all of them), medians of --repeat (>= 5 for the gates). Two parts:

  host   this host's loop-device ext4 as it is. Sequential 512 KiB writes of a 512 MiB file (default) + fsync, on
         a fresh mount each time: MB/s (MiB/s, context only: the shared VM varies 2-5x), and the daemon's CPU
         seconds per GiB written: user + sys of the daemon's whole life (mount, write, unmount) from wait4(2) when
         it exits, the same measure for every daemon. bFUSE's pwrite() count (Table 3, from its counters). 4 KiB
         random writes + fsync (IOPS) on a mount of their own, as context.
  phone  the same write (64 MiB) under the galaxy-s3-2012 phone model applied alike to every daemon (and to the
         writer): emmc-2012 device model, 64 MiB dirty limit, one 25 % CPU share, each FUSE request 430 us late
         (bench/bench_phone_model.py). MB/s.

Gates (exit status 3 if one is missed; the machine is shared: report the load, the lead re-runs on a quiet one):
  cpu      bFUSE daemon CPU/GiB <= 1.2 x passthrough_ll's best configuration, and <= 1/5 of legacy's
  pwrite   daemon pwrite() per 512 MiB: legacy 131,072 and nobuf 1,024 exactly, bFUSE <= 260 (paper: 128,000 /
           1,000 / 249)
  phone    under the phone model, bFUSE MB/s >= 1.0 x passthrough_ll's best configuration, and >= 5 x legacy

Needs root (loop devices, mounts, a cgroup), /dev/fuse, reference-impl built (bfuse, devmodel, fuse_wakeup.so) and
libfuse's examples (/usr/share/doc/libfuse3-dev/examples) to build passthrough_ll.

    python bench/bfuse_bench.py                       # 512 MiB, 5 repetitions, both parts, gates
    python bench/bfuse_bench.py --quick               # 64 MiB (phone part 16 MiB), 2 repetitions: checks the bench
    python bench/bfuse_bench.py --only legacy,nobuf,bfuse,ptll_mw512k --no-phone --json out.json
    python bench/bfuse_bench.py --tmpfs --quick       # host part over a tmpfs: the FUSE path without a device
    python bench/bfuse_bench.py --quick --no-phone --only nobuf,bfuse --baseline /tmp/bfuse.before
                                                      # this build against another, side by side
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
from dataclasses import dataclass, field, replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BFUSE = REPO / "reference-impl" / "bin" / "bfuse"
EXAMPLES = Path("/usr/share/doc/libfuse3-dev/examples")
MIB = 1 << 20
KIB = 1 << 10
GIB = 1 << 30
GATE_REPEAT = 5
TABLE3_BYTES = 512 * MIB
PHONE = "galaxy-s3-2012"


@dataclass
class Config:
    name: str
    kind: str            # native | bfuse | ptll
    options: str = ""    # -o value for the daemon
    note: str = ""
    phone: bool = False  # also measured in the phone part
    binary: Path | None = None  # the bfuse to run (None: this tree's); set by --baseline


CONFIGS = [
    Config("native", "native", note="ext4 on the loop device", phone=True),
    Config("legacy", "bfuse", "preset=legacy", "4 KiB unit, 1 thread, pwrite per request", phone=True),
    Config("nobuf", "bfuse", "preset=nobuf", "512 KiB unit, no buffer"),
    Config("nobuf+splice", "bfuse", "preset=zerocopy", "512 KiB unit, splice, no buffer (seed 003)"),
    Config("bfuse", "bfuse", "preset=bfuse", "512 KiB, 8 MiB of 2 MiB entries, 10 ms; spliced, pipe read into entry",
           phone=True),
    Config("bfuse+aligned", "bfuse", "preset=bfuse,entry_phase=0",
           "bfuse with entries at 2 MiB-aligned offsets: 2 MiB page-cache folios natively"),
    Config("bfuse+ownloop", "bfuse", "preset=bfuse,splice=0", "bfuse on fusecore's loop: receive buffers adopted"),
    Config("bfuse+copy", "bfuse", "preset=bfuse,splice=0,own_loop=0", "bfuse on libfuse's loop: data copied"),
    Config("bfuse+wbcache", "bfuse", "preset=bfuse,writeback_cache=1", "bfuse with kernel writeback cache"),
    Config("passthrough", "bfuse", "preset=passthrough", "kernel FUSE passthrough (today's /sdcard)", phone=True),
    Config("ptll", "ptll", "", "passthrough_ll default (1 MiB, splice falls back)", phone=True),
    Config("ptll_mw512k", "ptll", "max_write=524288", "512 KiB, splice", phone=True),
    Config("ptll_mw512k_nosplice", "ptll", "max_write=524288,no_splice_read", "512 KiB, read+pwrite", phone=True),
    Config("ptll_wb_mw512k", "ptll", "max_write=524288,writeback", "512 KiB, writeback cache", phone=True),
]


@dataclass
class Result:
    config: Config
    seq_mbps: list[float] = field(default_factory=list)
    seq_write_phase_mbps: list[float] = field(default_factory=list)
    daemon_cpu_s_per_gib: list[float] = field(default_factory=list)
    rand_iops: list[float] = field(default_factory=list)
    phone_mbps: list[float] = field(default_factory=list)
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


class DaemonMount:
    """A daemon serving `mnt`; after the `with` block, cpu_s holds its user + sys seconds (wait4 rusage)."""

    def __init__(self, process: subprocess.Popen):
        self.process = process
        self.cpu_s: float | None = None

    def reap(self, timeout: float = 30) -> None:
        """Wait for the daemon to exit and take its whole-life CPU time from wait4(2); kill it if it hangs."""
        deadline = time.monotonic() + timeout
        while True:
            pid, status, usage = os.wait4(self.process.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                self.process.kill()
                pid, status, usage = os.wait4(self.process.pid, 0)
                break
            time.sleep(0.01)
        self.process.returncode = os.waitstatus_to_exitcode(status)
        self.cpu_s = usage.ru_utime + usage.ru_stime


@contextmanager
def fuse_mount(config: Config, source: Path, mnt: Path, ptll: Path | None, counters: Path,
               env: dict[str, str] | None = None, join=None):
    """Start the daemon of `config` in the foreground, wait for its mount, always unmount and reap it.
    env: extra environment (the phone model's preload); join(pid): put the daemon in the phone model's CPU share
    before it mounts."""
    if config.kind == "bfuse":
        cmd = [str(config.binary or BFUSE), "-f", "-o", f"{config.options},counters={counters}", str(source),
               str(mnt)]
    else:
        opts = f"source={source}" + (f",{config.options}" if config.options else "")
        cmd = [str(ptll), "-f", "-o", opts, str(mnt)]
    stderr = tempfile.TemporaryFile()
    process = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=stderr,
                               env={**os.environ, **env} if env else None)
    mount = DaemonMount(process)
    try:
        if join is not None:
            join(process.pid)
        deadline = time.monotonic() + 10
        while not is_mounted(mnt):
            if process.poll() is not None or time.monotonic() > deadline:
                stderr.seek(0)
                raise RuntimeError(f"{config.name} did not mount: {stderr.read().decode(errors='replace')}")
            time.sleep(0.02)
        yield mount
    finally:
        for flag in ("-u", "-uz"):
            if is_mounted(mnt):
                subprocess.run(["fusermount3", flag, str(mnt)], capture_output=True, timeout=30)
        if process.returncode is None:
            mount.reap()
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


def measure_host(config: Config, fs: Path, ptll: Path | None, args, rep: int, result: Result) -> None:
    """One repetition of the host part: the sequential write on a mount of its own (daemon CPU over its whole
    life, pwrite counters on the first repetition), then the random writes on another.

    Every configuration writes into the same source directory (emptied after each run), so all of them write into
    the same ext4 block group: ext4 spreads top-level directories over block groups (Orlov)."""
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
        with fuse_mount(config, source, mnt, ptll, counters) as mount:
            before = bfuse_counters(mount.process, counters) if config.kind == "bfuse" and rep == 0 else None
            total, phase = sequential_write(mnt / "seq", args.seq_bytes)
            if before is not None:
                after = bfuse_counters(mount.process, counters)
                result.pwrite_calls = (after["counters"]["daemon_pwrite_calls"] +
                                       after["counters"]["daemon_splice_write_calls"] -
                                       before["counters"]["daemon_pwrite_calls"] -
                                       before["counters"]["daemon_splice_write_calls"])
                result.fuse_writes = (after["ops"].get("write", {"requests": 0})["requests"] -
                                      before["ops"].get("write", {"requests": 0})["requests"])
        result.daemon_cpu_s_per_gib.append(mount.cpu_s * GIB / args.seq_bytes)
        result.seq_mbps.append(total)
        result.seq_write_phase_mbps.append(phase)
        with fuse_mount(config, source, mnt, ptll, counters):
            result.rand_iops.append(random_fsync_writes(mnt / "rand", args.rand_count, seed=rep))
    except Exception as err:   # one broken configuration must not lose the others' figures
        result.error = str(err)[:300]
    finally:
        empty(source)


def measure_phone(config: Config, model, ptll: Path | None, args, result: Result) -> None:
    """One repetition of the phone part: the sequential write under the phone model, the daemon in its CPU share
    with the wake-up latency preloaded."""
    source = model.fs / "src"
    source.mkdir(exist_ok=True)
    mnt = model.fs.parent / f"phone-mnt-{config.name}"
    mnt.mkdir(exist_ok=True)
    try:
        subprocess.run(["sync"], timeout=300)
        if config.kind == "native":
            result.phone_mbps.append(model.write(source / "seq", args.phone_bytes))
            return
        with fuse_mount(config, source, mnt, ptll, model.fs.parent / f"phone-counters-{config.name}.json",
                        env=model.daemon_env, join=model.join):
            result.phone_mbps.append(model.write(mnt / "seq", args.phone_bytes))
    except Exception as err:
        result.error = f"phone: {str(err)[:300]}"
    finally:
        empty(source)


def empty(directory: Path) -> None:
    for leftover in directory.iterdir():
        if leftover.is_dir() and not leftover.is_symlink():
            shutil.rmtree(leftover, ignore_errors=True)
        else:
            leftover.unlink(missing_ok=True)


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


@dataclass
class Gate:
    name: str
    passed: bool | None     # None: not measured
    detail: str


def evaluate_gates(results: list[Result], args) -> list[Gate]:
    """The issue's targets, from the medians of this run's side-by-side repetitions."""
    by = {r.config.name: r for r in results if not r.error}
    gates: list[Gate] = []
    bfuse, legacy = by.get("bfuse"), by.get("legacy")
    ptlls = [r for r in by.values() if r.config.kind == "ptll"]
    cpu = {name: median(r.daemon_cpu_s_per_gib) for name, r in by.items() if r.daemon_cpu_s_per_gib}
    best_cpu = min(((cpu[r.config.name], r.config.name) for r in ptlls if r.config.name in cpu), default=None)
    if bfuse and legacy and best_cpu and "bfuse" in cpu and "legacy" in cpu:
        b, limit = cpu["bfuse"], 1.2 * best_cpu[0]
        gates.append(Gate("cpu vs passthrough_ll", b <= limit,
                          f"bFUSE {b:.3f} s/GiB vs 1.2 x {best_cpu[1]} {best_cpu[0]:.3f} = {limit:.3f}"))
        gates.append(Gate("cpu vs legacy", b <= cpu["legacy"] / 5,
                          f"bFUSE {b:.3f} s/GiB vs legacy {cpu['legacy']:.3f} / 5 = {cpu['legacy'] / 5:.3f}"))
    else:
        gates.append(Gate("cpu", None, "bfuse, legacy and a passthrough_ll configuration are all needed"))
    scale = TABLE3_BYTES / args.seq_bytes
    expect = {"legacy": (TABLE3_BYTES // 4096, "=="), "nobuf": (TABLE3_BYTES // (512 * KIB), "=="),
              "bfuse": (260, "<=")}
    for name, (target, op) in expect.items():
        r = by.get(name)
        if r is None or r.pwrite_calls is None:
            gates.append(Gate(f"pwrite {name}", None, "not measured"))
            continue
        per = r.pwrite_calls * scale
        ok = round(per) == target if op == "==" else per <= target
        gates.append(Gate(f"pwrite {name}", ok, f"{per:,.0f} per 512 MiB ({op} {target:,})"))
    phone = {name: median(r.phone_mbps) for name, r in by.items() if r.phone_mbps}
    best = max(((phone[r.config.name], r.config.name) for r in ptlls if r.config.name in phone), default=None)
    if "bfuse" in phone and "legacy" in phone and best:
        b = phone["bfuse"]
        gates.append(Gate("phone vs passthrough_ll", b >= best[0],
                          f"bFUSE {b:.1f} MB/s vs {best[1]} {best[0]:.1f} ({b / best[0]:.2f}x)"))
        gates.append(Gate("phone vs legacy", b >= 5 * phone["legacy"],
                          f"bFUSE {b:.1f} MB/s vs legacy {phone['legacy']:.1f} ({b / phone['legacy']:.1f}x)"))
    elif not args.no_phone:
        gates.append(Gate("phone", None, "bfuse, legacy and a passthrough_ll configuration are all needed"))
    if args.repeat < GATE_REPEAT:
        for gate in gates:
            gate.detail += f" [indicative: {args.repeat} repetitions, the gates want >= {GATE_REPEAT}]"
    return gates


def print_table(results: list[Result], args) -> None:
    by_name = {r.config.name: r for r in results if not r.error and r.seq_mbps}
    native, legacy = by_name.get("native"), by_name.get("legacy")

    def ratio(value: float | None, peer: Result | None, attr: str) -> str:
        base = median(getattr(peer, attr)) if peer else None
        return "-" if value is None or not base else f"{value / base:.2f}x"

    print(f"\nhost: sequential 512 KiB writes of {args.seq_bytes // MIB} MiB + fsync; 4 KiB random writes + fsync x "
          f"{args.rand_count}; phone ({PHONE} model): {args.phone_bytes // MIB} MiB; medians of {args.repeat}, "
          f"alternated; load average now {os.getloadavg()[0]:.1f} (machine shared: MB/s is context, CPU/GiB gates)")
    head = (f"{'config':22} {'MB/s':>6} {'range':>9} {'/native':>7} {'/legacy':>7} {'cpu s/GiB':>9} {'range':>11} "
            f"{'IOPS':>6} {'FUSE wr':>7} {'pwrites':>7} {'phone MB/s':>10} {'range':>11}")
    print(head)
    print("-" * len(head))
    for r in results:
        if r.error:
            print(f"{r.config.name:22} ERROR: {r.error}")
            continue
        seq, cpu, phone = median(r.seq_mbps), median(r.daemon_cpu_s_per_gib), median(r.phone_mbps)
        span = (lambda v, f: f"{min(v):{f}}-{max(v):{f}}" if v else "-")
        print(f"{r.config.name:22} {seq or 0:6.0f} {span(r.seq_mbps, '.0f'):>9} "
              f"{ratio(seq, native, 'seq_mbps'):>7} {ratio(seq, legacy, 'seq_mbps'):>7} "
              f"{f'{cpu:.3f}' if cpu is not None else '-':>9} {span(r.daemon_cpu_s_per_gib, '.2f'):>11} "
              f"{median(r.rand_iops) or 0:6.0f} {r.fuse_writes if r.fuse_writes is not None else '-':>7} "
              f"{r.pwrite_calls if r.pwrite_calls is not None else '-':>7} "
              f"{f'{phone:.1f}' if phone is not None else '-':>10} {span(r.phone_mbps, '.1f'):>11}")
    print("cpu s/GiB = the daemon's user+sys seconds over its whole life (wait4) per GiB written")


def with_baseline(configs: list[Config], binary: Path) -> list[Config]:
    """Each bFUSE configuration followed by itself run with another build of bfuse (CONFIG@baseline), so that the
    round robin measures the two builds side by side, one right after the other."""
    out = []
    for config in configs:
        out.append(config)
        if config.kind == "bfuse":
            out.append(replace(config, name=f"{config.name}@baseline", binary=binary,
                               note=f"{config.note}; {binary}"))
    return out


def print_baseline(results: list[Result], binary: Path) -> None:
    """This build against the baseline build: median daemon CPU s/GiB of each, their ratio, and the ratio of each
    repetition's adjacent pair (the load moves less between the two runs of a pair than over the whole bench)."""
    by_name = {r.config.name: r for r in results if not r.error}
    print(f"\nthis bfuse ({BFUSE}) vs baseline ({binary}): daemon cpu s/GiB, medians; ratio; ratio per repetition")
    for name, base in by_name.items():
        this = by_name.get(name.removesuffix("@baseline")) if name.endswith("@baseline") else None
        a, b = median(this.daemon_cpu_s_per_gib) if this else None, median(base.daemon_cpu_s_per_gib)
        if a is None or not b:
            continue
        pairs = " ".join(f"{x / y:.2f}" for x, y in zip(this.daemon_cpu_s_per_gib, base.daemon_cpu_s_per_gib) if y)
        print(f"  {this.config.name:22} {a:.3f} vs {b:.3f}  {a / b:.2f}x  ({pairs})")


def visit_order(results: list[Result], rep: int) -> list[Result]:
    """The round robin's order in repetition rep: as listed, but with each CONFIG, CONFIG@baseline pair swapped
    in odd repetitions, so that neither build always runs first."""
    order = list(results)
    if rep % 2:
        for k in range(len(order) - 1):
            if order[k + 1].config.name == order[k].config.name + "@baseline":
                order[k], order[k + 1] = order[k + 1], order[k]
    return order


def run_parts(configs: list[Config], args) -> list[Result]:
    results = [Result(config) for config in configs]
    with tempfile.TemporaryDirectory(prefix="bfuse-bench-", dir="/var/tmp") as tmp:
        workdir = Path(tmp)
        ptll = build_passthrough_ll(workdir) if any(c.kind == "ptll" for c in configs) else None
        image_mib = max(2048, 3 * args.seq_bytes // MIB + 512)
        filesystem = own_tmpfs(workdir, image_mib) if args.tmpfs else loop_ext4(workdir, image_mib)
        with filesystem as (device, fs):
            print(f"host: {'tmpfs' if args.tmpfs else 'ext4 on ' + device} ({image_mib} MiB), kernel "
                  f"{os.uname().release}, load average {os.getloadavg()[0]:.1f}", flush=True)
            for rep in range(args.repeat):   # round robin: each repetition visits every configuration
                for result in visit_order(results, rep):
                    if not result.error:
                        measure_host(result.config, fs, ptll, args, rep, result)
                        print(f"  host rep {rep + 1} {result.config.name}: " + (result.error or (
                            f"{result.seq_mbps[-1]:.0f} MB/s, {result.daemon_cpu_s_per_gib[-1]:.3f} s/GiB"
                            if result.daemon_cpu_s_per_gib else f"{result.seq_mbps[-1]:.0f} MB/s")), flush=True)
        if args.no_phone:
            return results
        from bench_phone_model import phone_model

        with phone_model(workdir, max(1024, 3 * args.phone_bytes // MIB + 256), PHONE) as model:
            print(f"phone: {PHONE} model on {model.fs}, load average {os.getloadavg()[0]:.1f}", flush=True)
            for rep in range(args.repeat):
                for result in visit_order(results, rep):
                    if result.config.phone and not result.error:
                        measure_phone(result.config, model, ptll, args, result)
                        print(f"  phone rep {rep + 1} {result.config.name}: "
                              + (result.error or f"{result.phone_mbps[-1]:.1f} MB/s"), flush=True)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog="examples: python bench/bfuse_bench.py --quick; "
                                            "python bench/bfuse_bench.py --json bfuse.json")
    parser.add_argument("--quick", action="store_true", help="64 MiB (phone part 16 MiB), 2 repetitions, "
                                                             "300 random writes: checks that the bench runs")
    parser.add_argument("--list", action="store_true", help="list the configurations and exit")
    parser.add_argument("--tmpfs", action="store_true",
                        help="the host part over a tmpfs instead of the loop-device ext4 (FUSE path cost only)")
    parser.add_argument("--repeat", type=int, default=None, help=f"repetitions (default {GATE_REPEAT})")
    parser.add_argument("--size-mib", type=int, default=None, help="host part file size (default 512)")
    parser.add_argument("--phone-size-mib", type=int, default=None, help="phone part file size (default 64)")
    parser.add_argument("--rand-count", type=int, default=None, help="random 4 KiB writes per run (default 2000)")
    parser.add_argument("--no-phone", action="store_true", help="skip the phone part (and its gate)")
    parser.add_argument("--only", default="", help="comma-separated config names")
    parser.add_argument("--json", type=Path, help="write all repetitions and the gates here")
    parser.add_argument("--baseline", type=Path, metavar="BFUSE",
                        help="another build of bfuse (say, before a change): every bFUSE configuration also runs "
                             "with it, as CONFIG@baseline, alternated with this tree's; CPU ratios are printed")
    args = parser.parse_args(argv)
    args.repeat = args.repeat or (2 if args.quick else GATE_REPEAT)
    args.seq_bytes = (args.size_mib or (64 if args.quick else 512)) * MIB
    args.phone_bytes = (args.phone_size_mib or (16 if args.quick else 64)) * MIB
    args.rand_count = args.rand_count or (300 if args.quick else 2000)
    if args.list:
        for config in CONFIGS:
            print(f"{config.name:22} {config.kind:7} {config.options:40} {'phone ' if config.phone else '':6}"
                  f"{config.note}")
        return 0
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        print("bfuse_bench: needs root (loop devices, mounts, a cgroup) and /dev/fuse", file=sys.stderr)
        return 2
    if not BFUSE.exists():
        run(["make", "-s", "-C", str(REPO / "reference-impl")], timeout=600)
    configs = [c for c in CONFIGS if not args.only or c.name in args.only.split(",")]
    if args.baseline:
        if not os.access(args.baseline, os.X_OK):
            print(f"bfuse_bench: --baseline {args.baseline}: not an executable file", file=sys.stderr)
            return 2
        configs = with_baseline(configs, args.baseline.resolve())
    results = run_parts(configs, args)
    print_table(results, args)
    if args.baseline:
        print_baseline(results, args.baseline.resolve())
    gates = evaluate_gates(results, args)
    print("\ngates:")
    for g in gates:
        print(f"  [{ {True: 'MET', False: 'NOT MET', None: 'NOT MEASURED'}[g.passed] }] {g.name}: {g.detail}")
    if args.json:
        args.json.write_text(json.dumps({
            "load_average": os.getloadavg(), "repeat": args.repeat, "seq_bytes": args.seq_bytes,
            "phone_bytes": args.phone_bytes, "gates": [g.__dict__ for g in gates],
            "results": [{"config": r.config.name, "options": r.config.options, "note": r.config.note,
                         "seq_mbps": r.seq_mbps, "seq_write_phase_mbps": r.seq_write_phase_mbps,
                         "daemon_cpu_s_per_gib": r.daemon_cpu_s_per_gib, "rand_iops": r.rand_iops,
                         "phone_mbps": r.phone_mbps, "pwrite_calls": r.pwrite_calls, "fuse_writes": r.fuse_writes,
                         "error": r.error} for r in results]}, indent=2))
    if any(r.error for r in results):
        return 1
    return 3 if any(g.passed is False for g in gates) else 0


if __name__ == "__main__":
    sys.exit(main())
