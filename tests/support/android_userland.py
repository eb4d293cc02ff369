"""The Android-shaped userland both test phones share: the chroot device (android_device.py, on this host's kernel)
and the virtual phone (vphone/, a QEMU guest with a kernel of its own).

  /system/bin/sh       mksh (Debian's static build), Android's shell since 4.0
  /system/bin/*        toybox applets (Debian's toybox); Android's toybox also has dd, tr and awk, which Debian's
                       lacks: coreutils dd and tr, mawk stand in
  /system/bin/getprop  a script over /system/build.prop (init's property service is not emulated)
  /system/xbin/su      a userdebug build's su (android_su.c): setuid root, `su 0 CMD` only, shell and root only
  /system/build.prop   Android 14 (SDK 34), userdebug; the ABI is the device's
  /system/etc/passwd   Android's ids (bionic knows them without files; toybox on glibc reads /etc/passwd)
  /sdcard              -> /storage/self/primary -> /storage/emulated/0

shape_system() lays it out in a root directory, taking the binaries from another root (`source`: this host for the
chroot device, whose libraries are copied beside them) or from the root itself (the virtual phone's image, whose
Debian packages already hold them).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

SHELL_UID = 2000
SU_SOURCE = Path(__file__).resolve().parent / "android_su.c"
MKSH = Path("/usr/lib/x86_64-linux-musl/bin/mksh")   # static; Debian package mksh
TOYBOX = Path("/usr/bin/toybox")                      # Debian package toybox
HOST_TOOLS = {"dd": "/usr/bin/dd", "tr": "/usr/bin/tr", "awk": "/usr/bin/mawk"}   # in Android's toybox, not Debian's
# toybox applets left out: they would act on the host (the chroot device shares its kernel), or clash with the
# device's own su and getprop.
TOYBOX_SKIP = {"su", "login", "passwd", "halt", "poweroff", "reboot", "switch_root", "pivot_root", "oneit",
               "swapon", "swapoff", "insmod", "rmmod", "killall5", "chroot", "unshare", "nsenter", "devmem",
               "hwclock", "rtcwake", "watchdog", "freeramdisk", "deallocvt", "openvt", "chvt", "getprop", "sh", "["}

# Android 14's build properties; each device adds its ABI, model and serial.
ANDROID_14_PROPS = {
    "ro.build.version.release": "14",
    "ro.build.version.sdk": "34",
    "ro.build.type": "userdebug",
    "ro.debuggable": "1",
    "sys.boot_completed": "1",
}

GETPROP = r"""#!/system/bin/sh
# getprop [NAME [DEFAULT]]: the properties of /system/build.prop (init's property service is not emulated).
if [ $# -eq 0 ]; then
  while IFS== read -r k v; do
    case $k in ''|'#'*) continue ;; esac
    echo "[$k]: [$v]"
  done < /system/build.prop
  exit 0
fi
while IFS== read -r k v; do
  [ "$k" = "$1" ] && { echo "$v"; exit 0; }
done < /system/build.prop
echo "${2-}"
"""

# Android's ids (bionic knows them without files; toybox on glibc reads /etc/passwd and /etc/group).
AIDS = (("root", 0), ("system", 1000), ("sdcard_rw", 1015), ("media_rw", 1023), ("shell", 2000),
        ("everybody", 9997))


def shared_libraries(binary: Path) -> list[Path]:
    """The libraries (and the ELF interpreter) a dynamic host binary needs, from ldd."""
    done = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, timeout=30)
    found = []
    for line in done.stdout.splitlines():
        for word in line.split():
            if word.startswith("/") and Path(word).exists():
                found.append(Path(word))
    return found


def install(src: Path, dest: Path, mode: int = 0o755) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src, dest)
    dest.chmod(mode)


def toybox_applets(toybox: Path, root: Path | None = None) -> list[str]:
    """The applets a toybox binary lists (run inside root when it is given: its libraries are there)."""
    argv = ["chroot", str(root), str(toybox)] if root else [str(toybox)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True).stdout.split()


def shape_system(root: Path, *, props: dict[str, str], su_binary: Path | None, source: Path = Path("/")) -> None:
    """Android's /system in root: the shell, toybox, the tools Debian's toybox lacks, getprop, build.prop, the ids,
    su, and the /sdcard links. Binaries come from `source` (a root directory: this host, or root itself)."""
    for d in ("system/bin", "system/xbin", "system/etc", "data", "storage/emulated/0", "storage/self", "mnt",
              "vendor/bin", "product/bin", "apex", "config", "acct"):
        (root / d).mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)
    bin_dir = root / "system/bin"
    own = source.resolve() == root.resolve()
    inside = lambda path: source / Path(path).relative_to("/")  # noqa: E731
    install(inside(MKSH), bin_dir / "mksh")
    (bin_dir / "sh").symlink_to("mksh")
    install(inside(TOYBOX), bin_dir / "toybox")
    for name in toybox_applets(TOYBOX, root if own else None):
        if name not in TOYBOX_SKIP and not (bin_dir / name).exists():
            (bin_dir / name).symlink_to("toybox")
    dynamic = [TOYBOX]
    for tool, path in HOST_TOOLS.items():
        real = inside(path).resolve()
        install(real, bin_dir / tool)
        dynamic.append(real)
    if not own:   # the host's libraries, where the device's root has none of its own
        for lib in {lib for binary in dynamic for lib in shared_libraries(binary)}:
            install(lib.resolve(), root / lib.relative_to("/"), 0o755)
    (bin_dir / "getprop").write_text(GETPROP)
    (bin_dir / "getprop").chmod(0o755)
    (root / "system/build.prop").write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    (root / "system/etc/passwd").write_text("".join(f"{n}:x:{i}:{i}::/:/system/bin/sh\n" for n, i in AIDS))
    (root / "system/etc/group").write_text("".join(f"{n}:x:{i}:\n" for n, i in AIDS))
    if su_binary is not None:
        su = root / "system/xbin/su"
        install(su_binary, su)
        os.chown(su, 0, SHELL_UID)
        su.chmod(0o4750)
    (root / "storage/self/primary").symlink_to("/storage/emulated/0")
    (root / "sdcard").symlink_to("/storage/self/primary")


def build_su(dest_dir: Path) -> Path:
    """android_su.c, built static for x86_64 Linux (this host, and the virtual phone)."""
    su = dest_dir / "su"
    if not su.exists():
        subprocess.run(["cc", "-static", "-O2", "-Wall", "-o", str(su), str(SU_SOURCE)], check=True, timeout=120,
                       capture_output=True)
    return su
