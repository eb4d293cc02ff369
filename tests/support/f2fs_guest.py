"""mobiperf itself inside a guest whose kernel has f2fs: how `--stack f2fs` is shown working for real on a machine
whose own kernel has none (this host's 6.18: CONFIG_F2FS_FS is not set).

The guest is an Android-shaped QEMU guest from Debian's packages with its adbd (the virtual phone's kind: a
directory with vmlinuz and initrd.gz whose init starts an adbd on port 5555, formats its first virtio disk as
f2fs /data, and has python3.11, mkfs.f2fs, losetup and a loop module). mobiperf goes in on a second, read-only
virtio disk: an f2fs image made here with mkfs.f2fs and filled with sload.f2fs (f2fs-tools: no mount needed)
with the package as it installs (setup.py build_py), this venv's site-packages (same CPython 3.11, manylinux
wheels) and the static x86_64 reference binaries. QEMU emulates `-cpu max` (polars needs AVX2; TCG's default
CPU has none). Inside, `python3 -m mobiperf` runs as root with the local target: the guest's own kernel, tracefs,
loop devices and f2fs, exactly the code a Linux host with f2fs runs.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
WRAPPER = """#!/system/bin/sh
export PATH=/opt/mp/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp NUMBA_CACHE_DIR=/tmp/numba
export PYTHONPATH=/opt/mp/src:/opt/mp/lib MOBIPERF_BIN=/opt/mp/bin
[ -d /opt/mp/src ] || { mkdir -p /opt/mp && mount -t f2fs -o ro /dev/vdb /opt/mp; } || exit 97
modprobe loop 2>/dev/null; mkdir -p /var/tmp
exec python3 -m mobiperf "$@"
"""
SKIP_PACKAGES = ("__editable__", "mobiperf", "_pytest", "pytest", "hypothesis", "importlinter", "grimp")
BOOT_S = 300.0


def build_mobiperf_disk(dest: Path, size: str = "3G") -> Path:
    """An f2fs image holding this tree's mobiperf as it installs, its dependencies and the x86_64 binaries."""
    with tempfile.TemporaryDirectory(prefix="mobiperf-guest-disk-") as tmp:
        root = Path(tmp)
        subprocess.run([sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(root / "src")], cwd=REPO,
                       check=True, capture_output=True, timeout=600)
        site = Path(sysconfig.get_paths()["purelib"])
        shutil.copytree(site, root / "lib", symlinks=True,
                        ignore=lambda d, names: [n for n in names if n.startswith(SKIP_PACKAGES)] if d == str(site)
                        else [])
        shutil.copytree(REPO / "reference-impl" / "bin" / "x86_64", root / "bin")
        dest.unlink(missing_ok=True)
        subprocess.run(["truncate", "-s", size, str(dest)], check=True)
        subprocess.run(["mkfs.f2fs", "-q", "-f", str(dest)], check=True, capture_output=True, timeout=120)
        subprocess.run(["sload.f2fs", "-f", str(root), str(dest)], check=True, capture_output=True, timeout=1200)
    return dest


@contextlib.contextmanager
def booted_guest(kernel_dir: Path, port: int, disk: Path, workdir: Path):
    """The guest up with `disk` as its read-only second disk; yields its adb serial. QEMU is ended and the adb
    connection dropped on the way out, whatever happened."""
    data = workdir / "data.img"
    subprocess.run(["truncate", "-s", "1G", str(data)], check=True)
    console, pidfile = workdir / "console.log", workdir / "qemu.pid"
    argv = ["qemu-system-x86_64", "-accel", "tcg", "-cpu", "max", "-m", "2048", "-smp", "1",
            "-kernel", str(kernel_dir / "vmlinuz"), "-initrd", str(kernel_dir / "initrd.gz"),
            "-append", "console=ttyS0 quiet rdinit=/init", "-drive", f"file={data},format=raw,if=virtio",
            "-drive", f"file={disk},format=raw,if=virtio,readonly=on",
            "-nic", f"user,model=virtio-net-pci,hostfwd=tcp:127.0.0.1:{port}-:5555", "-display", "none",
            "-serial", f"file:{console}", "-pidfile", str(pidfile), "-daemonize"]
    serial = f"127.0.0.1:{port}"
    subprocess.run(argv, check=True, timeout=60)
    try:
        deadline = time.monotonic() + BOOT_S
        while b"adbd starting" not in (console.read_bytes() if console.exists() else b""):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the guest did not start its adbd in {BOOT_S:.0f} s: {console}")
            time.sleep(1)
        while subprocess.run(["adb", "connect", serial], capture_output=True, text=True,
                             timeout=30).stdout.startswith("failed"):
            if time.monotonic() > deadline:
                raise TimeoutError(f"adb connect {serial} kept failing")
            time.sleep(2)
        wrapper = workdir / "mobiperf-in-guest.sh"
        wrapper.write_text(WRAPPER)
        subprocess.run(["adb", "-s", serial, "push", str(wrapper), "/data/local/tmp/mobiperf-in-guest.sh"],
                       check=True, capture_output=True, timeout=120)
        yield serial
    finally:
        subprocess.run(["adb", "disconnect", serial], capture_output=True, timeout=30)
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(pidfile.read_text()), signal.SIGKILL)
        data.unlink(missing_ok=True)


def mobiperf_in_guest(serial: str, *args: str, timeout: float = 3600) -> subprocess.CompletedProcess:
    """`mobiperf ARGS` run as root inside the guest (its local target); its output and status."""
    script = shlex.join(["sh", "/data/local/tmp/mobiperf-in-guest.sh", *args])
    return subprocess.run(["adb", "-s", serial, "shell", "-T", f"su 0 {script}"], capture_output=True, text=True,
                          timeout=timeout)
