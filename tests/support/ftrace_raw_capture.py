"""A real binary + text ftrace capture in a tracefs instance of our own: the oracle of the binary decoder's tests.

capture_raw_and_text() traces block, ext4, jbd2, writeback and a few syscalls while dd writes and fsyncs a file,
stops tracing, reads the non-consuming text file `trace` FIRST, then drains every CPU's trace_pipe_raw (which
consumes the buffer), so both views hold the very same events. It saves the layout parse_raw_dir() reads:

    out/ftrace.txt                       the text view
    out/ftrace_raw/cpuN, saved_cmdlines  the binary pages and the pid -> comm cache
    out/ftrace_raw/kernel_hz             CONFIG_HZ (jbd2_run_stats holds jiffies in binary, ms in the text)
    out/formats/<system>/<event>/format  the event formats, header_page, header_event
With fuse_dir (a FUSE mount, e.g. bfuse_mounted()), dd writes there as well and the fuse events are traced.

The instance is removed in a finally block, also when the workload fails. Run as a script to refresh the
fixture: `python tests/support/ftrace_raw_capture.py raw-6.18-rawdec`, then `tar -czf raw-6.18-rawdec.tar.gz
raw-6.18-rawdec` into tests/fixtures/ftrace/ (the archive holds the folder).
"""

from __future__ import annotations

import gzip
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

TRACEFS = Path("/sys/kernel/tracing")
REPO = Path(__file__).resolve().parents[2]
EVENTS = ("block", "ext4", "jbd2", "writeback",
          "syscalls/sys_enter_write", "syscalls/sys_exit_write", "syscalls/sys_enter_fsync",
          "syscalls/sys_exit_fsync", "syscalls/sys_enter_pwrite64", "syscalls/sys_exit_pwrite64",
          "raw_syscalls/sys_enter", "raw_syscalls/sys_exit")
# raw_syscalls fire for every system call of the machine: only fsync's (its number is the ABI's).
FILTERS = {"raw_syscalls": f"id == {dict(x86_64=74, aarch64=82).get(os.uname().machine, 74)}"}


def kernel_hz() -> int | None:
    try:
        config = gzip.decompress(Path("/proc/config.gz").read_bytes()).decode()
    except OSError:
        return None
    m = re.search(r"^CONFIG_HZ=(\d+)$", config, re.M)
    return int(m[1]) if m else None


def _events_of(spec: str) -> list[Path]:
    path = TRACEFS / "events" / spec
    return [path] if (path / "format").exists() else sorted(p for p in path.iterdir() if (p / "format").exists())


def drain_buffer(path: Path) -> bytes:
    """Every page a stopped per-CPU buffer holds (non-blocking: EAGAIN once it is empty)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    chunks = []
    try:
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


@contextmanager
def journaled_ext4(workdir: Path):
    """A 32 MiB ext4 with a journal on a loop device of our own (the root file system here has no journal, so
    no jbd2 events); unmounted and detached on the way out."""
    image = workdir / "mobiperf-rawdec.img"
    mnt = workdir / f"mobiperf-rawdec-{os.getpid()}"
    with open(image, "wb") as f:
        f.truncate(32 << 20)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-O", "has_journal", str(image)], check=True, timeout=60)
    loop = subprocess.run(["losetup", "--find", "--show", str(image)], check=True, timeout=30,
                          capture_output=True, text=True).stdout.strip()
    mounted = False
    try:
        mnt.mkdir()
        subprocess.run(["mount", "-t", "ext4", loop, str(mnt)], check=True, timeout=30)
        mounted = True
        yield mnt
    finally:
        if mounted:
            subprocess.run(["umount", str(mnt)], timeout=60)
        subprocess.run(["losetup", "-d", loop], timeout=30)
        if mnt.exists():
            mnt.rmdir()
        image.unlink()


@contextmanager
def bfuse_mounted(workdir: Path, binary: Path = REPO / "reference-impl" / "bin" / "bfuse"):
    """The reference bFUSE daemon over workdir/source at workdir/mnt (for fuse_request_send/end events), or None
    where FUSE or the binary is missing; unmounted and reaped on the way out."""
    if not (binary.exists() and Path("/dev/fuse").exists() and shutil.which("fusermount3")):
        yield None
        return
    from bfuse_mounts import start_bfuse, stop_quietly

    mount = start_bfuse(binary, workdir, "preset=bfuse")
    try:
        yield mount.mountpoint
    finally:
        stop_quietly(mount)


def capture_raw_and_text(out: Path, workdir: Path, writes: int = 4, buffer_kb: int = 4096,
                         fuse_dir: Path | None = None) -> Path:
    """Trace dd's writes + fsyncs of a file in workdir (on ext4 with a journal for the ext4 and jbd2 events), and
    of one in fuse_dir (a FUSE mount) if given."""
    inst = TRACEFS / "instances" / f"mobiperf-rawdec-{os.getpid()}"
    inst.mkdir()
    try:
        (inst / "tracing_on").write_text("0")
        (inst / "buffer_size_kb").write_text(str(buffer_kb))
        (inst / "trace_clock").write_text("mono")
        formats = out / "formats"
        for spec in EVENTS + (("fuse",) if fuse_dir else ()):
            for ev in _events_of(spec):
                dest = formats / ev.parent.name / ev.name
                dest.mkdir(parents=True, exist_ok=True)
                (dest / "format").write_bytes((ev / "format").read_bytes())
                if ev.parent.name in FILTERS:
                    (inst / "events" / ev.parent.name / ev.name / "filter").write_text(FILTERS[ev.parent.name])
                (inst / "events" / ev.parent.name / ev.name / "enable").write_text("1")
        dest = formats / "ftrace" / "print"
        dest.mkdir(parents=True, exist_ok=True)
        (dest / "format").write_bytes((TRACEFS / "events/ftrace/print/format").read_bytes())
        for header in ("header_page", "header_event"):
            (formats / header).write_bytes((TRACEFS / "events" / header).read_bytes())
        target = workdir / "rawdec.bin"
        (inst / "tracing_on").write_text("1")
        (inst / "trace_marker").write_text("rawdec start")
        for i in range(writes):
            for t in (target, *([fuse_dir / "rawdec.bin"] if fuse_dir else [])):
                subprocess.run(["dd", "if=/dev/zero", f"of={t}", "bs=4k", "count=1", f"seek={i}",
                                "conv=notrunc,fsync", "status=none"], check=True, timeout=30)
        time.sleep(0.05)  # jbd2's commit of the last fsync and its run stats
        (inst / "trace_marker").write_text("rawdec end")
        (inst / "tracing_on").write_text("0")
        out.mkdir(parents=True, exist_ok=True)
        (out / "ftrace.txt").write_bytes((inst / "trace").read_bytes())  # non-consuming: read it first
        raw = out / "ftrace_raw"
        raw.mkdir(exist_ok=True)
        for cpu_dir in sorted((inst / "per_cpu").iterdir(), key=lambda p: int(p.name[3:])):
            (raw / cpu_dir.name).write_bytes(drain_buffer(cpu_dir / "trace_pipe_raw"))
        (raw / "saved_cmdlines").write_bytes((TRACEFS / "saved_cmdlines").read_bytes())
        hz = kernel_hz()
        if hz:
            (raw / "kernel_hz").write_text(f"{hz}\n")
    finally:
        try:
            (inst / "events" / "enable").write_text("0")
        except OSError:
            pass
        for _ in range(50):  # rmdir fails with EBUSY while a reader still holds a file of the instance
            try:
                inst.rmdir()
                break
            except OSError:
                time.sleep(0.1)
    return out


def prune_formats(out: Path) -> None:
    """Keep only the formats of the events the capture holds (and the page headers): a small fixture."""
    text = (out / "ftrace.txt").read_text(errors="replace")
    seen = set(re.findall(r"\d+\.\d+: (\w+)[:(]", text))
    seen |= {f"sys_enter_{m}" for m in re.findall(r"\d+\.\d+: sys_(\w+)\(", text)}
    seen |= {f"sys_exit_{m}" for m in re.findall(r"\d+\.\d+: sys_(\w+) ->", text)}
    for fmt in (out / "formats").glob("*/*/format"):
        if fmt.parent.name not in seen and fmt.parent.name != "print":
            shutil.rmtree(fmt.parent)
    for system in (out / "formats").iterdir():
        if system.is_dir() and not any(system.iterdir()):
            system.rmdir()


if __name__ == "__main__":
    dest = Path(sys.argv[1])
    if dest.exists():
        shutil.rmtree(dest)
    with tempfile.TemporaryDirectory(dir="/var/tmp") as work, journaled_ext4(Path(work)) as fs, \
            bfuse_mounted(Path(work) / "fuse") as fuse:
        capture_raw_and_text(dest, fs, fuse_dir=fuse)
    prune_formats(dest)
    print(f"captured into {dest}")
