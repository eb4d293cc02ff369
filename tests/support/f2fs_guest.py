"""mobiperf itself inside the virtual phone, whose kernel (Debian's 6.1) has f2fs: how `--stack f2fs` is shown
working for real on a machine whose own kernel has none (this host's 6.18: CONFIG_F2FS_FS is not set).

mobiperf goes in on one more read-only virtio disk of the phone (tests/support/vphone: VirtualPhone's
extra_disks, serial `mobiperf`): an f2fs image made here with mkfs.f2fs and filled with sload.f2fs (f2fs-tools:
no mount needed) with the package as it installs (setup.py build_py), this venv's site-packages (the same
CPython 3.11 as the phone's Debian userland, manylinux wheels) and the static x86_64 reference binaries, mounted on
/mnt (the phone's root is a read-only erofs; the emulated stack's work root goes on /data). The phone runs with
`-cpu max` under TCG (polars needs AVX2; TCG's default CPU has none). Inside, `python3 -m mobiperf` runs
as root with the local target: the phone's own kernel, tracefs, loop devices and f2fs, with util-linux's
losetup and f2fs-tools' mkfs.f2fs from its Debian userland: the code a Linux host with f2fs runs.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DISK_SERIAL = "mobiperf"
WRAPPER = "/data/local/tmp/mobiperf-in-guest.sh"
# Finds the disk by its serial, mounts it once (on /mnt: the phone's root is a read-only erofs), puts the emulated
# stack's work root (/var/tmp/mobiperf) on /data, and runs mobiperf from the disk with Debian's tools first on the
# PATH.
WRAPPER_TEXT = f"""#!/system/bin/sh
MP=/mnt/mobiperf
export PATH=$MP/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/data/local/tmp NUMBA_CACHE_DIR=/data/local/tmp/numba
export PYTHONPATH=$MP/src:$MP/lib MOBIPERF_BIN=$MP/bin PYTHONDONTWRITEBYTECODE=1
if [ ! -d $MP/src ]; then
  for d in /sys/block/vd*; do [ "$(cat $d/serial 2>/dev/null)" = {DISK_SERIAL} ] && dev=/dev/${{d##*/}}; done
  mkdir -p $MP && mount -t f2fs -o ro "$dev" $MP || exit 97
  mkdir -p /data/local/tmp/var-tmp && mount --bind /data/local/tmp/var-tmp /var/tmp || exit 98
fi
modprobe loop 2>/dev/null
exec python3 -m mobiperf "$@"
"""
SKIP_PACKAGES = ("__editable__", "mobiperf", "_pytest", "pytest", "hypothesis", "importlinter", "grimp")


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


def install_wrapper(phone, workdir: Path) -> None:
    """The script that runs mobiperf from the disk, pushed to the phone (a PhoneDevice of vphone_fixtures)."""
    local = workdir / "mobiperf-in-guest.sh"
    local.write_text(WRAPPER_TEXT)
    phone.server.client("-s", phone.serial, "push", str(local), WRAPPER, timeout=120)


def mobiperf_in_guest(phone, *args: str, timeout: float = 3600) -> subprocess.CompletedProcess:
    """`mobiperf ARGS` run as root inside the phone (its local target); its output and status."""
    return phone.server.client("-s", phone.serial, "shell", "-T", "su 0 " + shlex.join(["sh", WRAPPER, *args]),
                               timeout=timeout)
