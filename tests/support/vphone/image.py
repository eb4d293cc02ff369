"""The virtual phone's image, built from Debian packages only and cached by what built it.

An image is a directory of four files:

  vmlinuz         Debian's kernel: linux-image-amd64 of bookworm (6.1, Android 14's GKI version) or, by option,
                  linux-image-6.12-amd64 (6.12, Android 16's)
  initrd.cpio     busybox-static and the modules that read /system (virtio, erofs): 3 MB, uncompressed, since the
                  kernel unpacks an initramfs whole before anything runs (the prototype's 64 MB one took 11 s of a
                  19 s boot under TCG)
  system.erofs    the root file system, read-only erofs as Android's /system is: a bookworm minbase with python3 (for
                  adbd), f2fs-tools and bindfs, shaped like Android 14 (android_userland.py: mksh as /system/bin/sh,
                  toybox, getprop over build.prop with ABI x86_64, su, no fusermount), the kernel's f2fs, fuse,
                  loop and virtio modules, busybox init, and the guest/ scripts
  userdata.f2fs   /data: a 2 GiB f2fs made by `mkfs.f2fs -g android` (sparse); each boot writes to an overlay

plus image.json (what built it). The cache key is the hash of every file that shapes the image (this module, the
guest scripts, the adbd, su's source, the shared userland) and the kernel package's name and version, so a change to
either builds a new image and an unchanged one is reused: `python -m vphone build [--rebuild]` (make vphone-image).

Building needs root (mmdebstrap in root mode, setuid su), Debian's mirror, and the packages of BUILD_TOOLS.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
SUPPORT = HERE.parent
sys.path.insert(0, str(SUPPORT))

from android_userland import ANDROID_14_PROPS, AIDS, build_su, shape_system  # noqa: E402

SUITE = "bookworm"
KERNELS = {"6.1": "linux-image-amd64", "6.12": "linux-image-6.12-amd64"}   # version -> Debian's meta package
USERLAND = ("python3-minimal", "libpython3.11-stdlib", "mksh", "toybox", "f2fs-tools", "bindfs")
BUILD_TOOLS = {"mmdebstrap": "mmdebstrap", "mkfs.erofs": "erofs-utils", "mkfs.f2fs": "f2fs-tools", "cpio": "cpio",
               "depmod": "kmod", "cc": "build-essential", "apt-get": "apt"}
DATA_SIZE = 2 << 30
# The kernel's modules the image carries: what the phone's storage and network need (the whole set is 400 MB).
MODULE_DIRS = ("kernel/fs/f2fs", "kernel/fs/fuse", "kernel/fs/erofs", "kernel/fs/quota", "kernel/lib", "kernel/crypto",
               "kernel/arch/x86/crypto", "kernel/drivers/virtio", "kernel/drivers/block/virtio_blk.ko",
               "kernel/drivers/block/loop.ko", "kernel/drivers/net/virtio_net.ko",
               "kernel/drivers/net/net_failover.ko", "kernel/net/core/failover.ko")
INITRD_MODULES = ("virtio_pci", "virtio_blk", "erofs", "crc32c_generic")
PROPS = {
    **ANDROID_14_PROPS,
    "ro.product.cpu.abi": "x86_64",          # the Android emulator's own ABI
    "ro.product.cpu.abilist": "x86_64",
    "ro.product.cpu.abilist64": "x86_64",
    "ro.product.manufacturer": "mobiperf",
    "ro.product.brand": "mobiperf",
    "ro.product.name": "vphone",
    "ro.product.model": "mobiperf virtual phone",
    "ro.product.device": "vphone",
    "ro.hardware": "qemu",
    "ro.serialno": "VPHONE0001",
}
INPUTS = (HERE / "image.py", *sorted((HERE / "guest").iterdir()), SUPPORT / "adbd_loopback.py",
          SUPPORT / "android_su.c", SUPPORT / "android_userland.py")


class ImageError(Exception):
    """The image cannot be built here; the message says why in one line."""


def default_cache() -> Path:
    """MOBIPERF_VPHONE_CACHE, else ~/.cache/mobiperf/vphone (shared by every clone on the machine)."""
    if os.environ.get("MOBIPERF_VPHONE_CACHE"):
        return Path(os.environ["MOBIPERF_VPHONE_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mobiperf" / "vphone"


def kernel_package(kernel: str) -> tuple[str, str]:
    """(package, version) of the kernel image Debian's meta package for `kernel` pulls in, from apt's lists."""
    if kernel not in KERNELS:
        raise ImageError(f"kernel {kernel!r}: the virtual phone has {', '.join(KERNELS)}")
    meta = KERNELS[kernel]
    done = subprocess.run(["apt-cache", "depends", meta], capture_output=True, text=True, timeout=60)
    package = next((line.split()[1] for line in done.stdout.splitlines()
                    if line.strip().startswith("Depends: linux-image-")), None)
    if package is None:
        raise ImageError(f"apt knows no {meta} (apt-get update, with {SUITE}'s main in the sources)")
    shown = subprocess.run(["apt-cache", "show", "--no-all-versions", package], capture_output=True, text=True,
                           timeout=60).stdout
    version = next((line.split(":", 1)[1].strip() for line in shown.splitlines() if line.startswith("Version:")), "")
    return package, version


def image_key(package: str, version: str) -> str:
    digest = hashlib.sha256(f"{SUITE} {package} {version}\n".encode())
    for path in INPUTS:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def image_dir(kernel: str, cache: Path | None = None) -> Path:
    package, version = kernel_package(kernel)
    return (cache or default_cache()) / f"{kernel}-{image_key(package, version)}"


def is_built(path: Path) -> bool:
    return (path / "image.json").exists()


def ensure_image(kernel: str = "6.1", *, cache: Path | None = None, rebuild: bool = False,
                 say=lambda line: print(line, file=sys.stderr)) -> Path:
    """The image directory for `kernel`, built first if the cache lacks it (or with rebuild). One builder at a
    time per cache (a lock file); a build that fails leaves nothing but its log."""
    target = image_dir(kernel, cache)
    if is_built(target) and not rebuild:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if is_built(target) and not rebuild:
            return target   # another process built it meanwhile
        problem = build_problem()
        if problem:
            raise ImageError(f"cannot build the virtual phone's image: {problem}")
        work = target.parent / f".build-{target.name}-{os.getpid()}"
        shutil.rmtree(work, ignore_errors=True)
        log = target.parent / f"{target.name}.build.log"
        say(f"vphone: building the {kernel} image into {target} (a few minutes; log: {log})")
        try:
            with open(log, "w") as out:
                build(kernel, work, out, fresh=rebuild)
            shutil.rmtree(target, ignore_errors=True)
            work.rename(target)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        _forget_older(target)
    return target


def _forget_older(target: Path) -> None:
    """Images of the same kernel under an older key are rebuilt never again: removed (they are 300 MB each)."""
    kernel = target.name.rsplit("-", 1)[0]
    for other in target.parent.glob(f"{kernel}-*"):
        if other != target and other.is_dir() and (other / "image.json").exists():
            shutil.rmtree(other, ignore_errors=True)


def build_problem() -> str | None:
    """Why an image cannot be built on this machine (None: it can)."""
    if os.geteuid() != 0:
        return "needs root (mmdebstrap in root mode, a setuid su)"
    missing = sorted({package for tool, package in BUILD_TOOLS.items() if not shutil.which(tool)})
    return f"missing Debian packages: {' '.join(missing)} (make setup installs them)" if missing else None


# --- the build ---------------------------------------------------------------------------------------------------

def _run(argv: list, log, *, timeout: float = 900, **kw) -> subprocess.CompletedProcess:
    log.write(f"$ {' '.join(map(str, argv))}\n")
    log.flush()
    done = subprocess.run([str(a) for a in argv], stdout=log, stderr=subprocess.STDOUT, timeout=timeout, **kw)
    if done.returncode != 0:
        raise ImageError(f"`{' '.join(map(str, argv))[:200]}` failed (status {done.returncode}; see {log.name})")
    return done


def build(kernel: str, out: Path, log, *, fresh: bool = False) -> None:
    """Build the image for `kernel` into the directory out (created); fresh: bootstrap Debian again."""
    package, version = kernel_package(kernel)
    debs, root, initrd = out / "debs", out / "root", out / "initrd"
    debs.mkdir(parents=True)
    # apt's sandbox user cannot write to a root-owned build directory; the download itself is all apt does here.
    _run(["apt-get", "download", "-q", "-o", "APT::Sandbox::User=root", package, "busybox-static"], log, cwd=debs)
    for deb in debs.glob("*.deb"):
        _run(["dpkg-deb", "-x", deb, debs / "x"], log)
    release = next((debs / "x/lib/modules").iterdir()).name
    _run(["depmod", "-b", debs / "x", release], log)   # the package leaves modules.dep to its postinst
    _debian_root(root, out.parent, log, fresh=fresh)
    _shape_root(root, debs / "x", release, log)
    _run(["mkfs.erofs", "--quiet", out / "system.erofs", root], log)
    _make_initrd(initrd, debs / "x", release, out / "initrd.cpio", log)
    _make_userdata(out / "userdata.f2fs", log)
    shutil.copy2(debs / "x" / "boot" / f"vmlinuz-{release}", out / "vmlinuz")
    for scratch in (debs, root, initrd):
        shutil.rmtree(scratch)
    info = {"kernel": kernel, "kernel_package": package, "kernel_version": version, "kernel_release": release,
            "suite": SUITE, "userland": list(USERLAND), "key": image_key(package, version),
            "built": datetime.now(timezone.utc).isoformat(timespec="seconds"), "props": PROPS}
    (out / "image.json").write_text(json.dumps(info, indent=2) + "\n")


def _debian_root(root: Path, cache: Path, log, *, fresh: bool) -> None:
    """The bookworm minbase with USERLAND, bootstrapped once per cache (a tarball beside the images, kept across
    image keys: a change to a guest script rebuilds in seconds) and again with --rebuild."""
    tarball = cache / f"userland-{SUITE}-{hashlib.sha256(' '.join(USERLAND).encode()).hexdigest()[:8]}.tar"
    if fresh or not tarball.exists():
        partial = tarball.with_name(tarball.stem + ".partial.tar")   # mmdebstrap writes a tar by its name
        _run(["mmdebstrap", "--variant=minbase", f"--include={','.join(USERLAND)}", SUITE, partial], log)
        partial.rename(tarball)
    root.mkdir()
    _run(["tar", "-xpf", tarball, "-C", root, "--numeric-owner"], log)


def _copy_modules(kernel_tree: Path, release: str, dest_root: Path, parts) -> None:
    source = kernel_tree / "lib/modules" / release
    dest = dest_root / "lib/modules" / release
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("modules.builtin", "modules.builtin.modinfo", "modules.order"):
        shutil.copy2(source / name, dest / name)
    for part in parts:
        src = source / part
        if src.is_dir():
            shutil.copytree(src, dest / part, dirs_exist_ok=True)
        elif src.exists():
            (dest / part).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / part)


def _shape_root(root: Path, kernel_tree: Path, release: str, log) -> None:
    """Android 14 on the Debian root: /system, su, the ids, the modules, busybox init and the guest scripts."""
    su = build_su(kernel_tree.parent)   # the build's scratch (debs/), gone with it
    shape_system(root, props=PROPS, su_binary=su, source=root)
    for name, file in (("passwd", "{n}:x:{i}:{i}::/:/system/bin/sh\n"), ("group", "{n}:x:{i}:\n")):
        path = root / "etc" / name
        known = {line.split(":", 1)[0] for line in path.read_text().splitlines()}
        with open(path, "a") as f:
            f.writelines(file.format(n=n, i=i) for n, i in AIDS if n not in known)
    for fusermount in (*root.glob("usr/bin/fusermount*"), *root.glob("bin/fusermount*")):
        fusermount.unlink(missing_ok=True)      # a phone has none: a FUSE daemon mounts as root, through mount(2)
    for junk in ("usr/share/doc", "usr/share/man", "usr/share/locale", "usr/share/info", "var/cache/apt",
                 "var/lib/apt/lists"):
        shutil.rmtree(root / junk, ignore_errors=True)
    _copy_modules(kernel_tree, release, root, MODULE_DIRS)
    _run(["depmod", "-b", root, release], log)
    vphone = root / "vphone"
    (vphone / "bin").mkdir(parents=True)
    (vphone / "lib").mkdir()
    shutil.copy2(kernel_tree / "bin/busybox", vphone / "bin/busybox")
    # The kernel loads modules on demand (f2fs asks for crc32) through /sbin/modprobe; busybox's reads modules.dep.
    (root / "usr/sbin/modprobe").unlink(missing_ok=True)
    (root / "usr/sbin/modprobe").symlink_to("/vphone/bin/busybox")
    for name in ("phone-init", "start-adbd"):
        shutil.copy2(HERE / "guest" / name, vphone / name)
        (vphone / name).chmod(0o755)
    shutil.copy2(HERE / "guest" / "inittab", root / "etc/inittab")
    shutil.copy2(SUPPORT / "adbd_loopback.py", vphone / "lib/adbd_loopback.py")
    # The root is read-only: Python's bytecode is compiled now, or every start of adbd compiles it again (seconds
    # under TCG). The adbd runs as its .pyc.
    _run(["chroot", root, "python3", "-m", "compileall", "-q", "-j", "0", "/usr/lib/python3.11"], log)
    _run(["chroot", root, "python3", "-c", "import py_compile; py_compile.compile('/vphone/lib/adbd_loopback.py', "
          "cfile='/vphone/lib/adbd_loopback.pyc', doraise=True)"], log)
    for mountpoint in ("data", "mnt", "storage/emulated", "sys/kernel/tracing"):
        (root / mountpoint).mkdir(parents=True, exist_ok=True)
    (root / "storage/emulated/0").rmdir()   # /data/media/0, seen through the FUSE daemon mounted at /storage/emulated


def _make_initrd(initrd: Path, kernel_tree: Path, release: str, dest: Path, log) -> None:
    (initrd / "bin").mkdir(parents=True)
    (initrd / "sbin").mkdir()
    for d in ("proc", "sys", "dev", "root"):
        (initrd / d).mkdir()
    shutil.copy2(kernel_tree / "bin/busybox", initrd / "bin/busybox")
    for applet in ("sh", "mount", "modprobe", "sleep", "cat", "switch_root", "poweroff"):
        (initrd / "bin" / applet).symlink_to("busybox")
    (initrd / "sbin/modprobe").symlink_to("/bin/busybox")   # the kernel's request_module() runs /sbin/modprobe
    shutil.copy2(HERE / "guest" / "initrd-init", initrd / "init")
    (initrd / "init").chmod(0o755)
    modules = subprocess.run(["modprobe", "-a", "-d", kernel_tree, "-S", release, "--show-depends", *INITRD_MODULES],
                             capture_output=True, text=True, timeout=60)
    wanted = [line.split()[1] for line in modules.stdout.splitlines() if line.startswith("insmod ")]
    if modules.returncode != 0 or not wanted:
        raise ImageError(f"the initrd's modules ({', '.join(INITRD_MODULES)}) are not in {release}: "
                         f"{modules.stderr.strip()}")
    module_root = kernel_tree / "lib/modules" / release
    _copy_modules(kernel_tree, release, initrd, [str(Path(m).relative_to(module_root)) for m in wanted])
    _run(["depmod", "-b", initrd, release], log)
    listing = subprocess.run(["find", "."], cwd=initrd, capture_output=True, text=True, check=True, timeout=60).stdout
    with open(dest, "wb") as f:
        subprocess.run(["cpio", "-o", "-H", "newc", "--quiet"], cwd=initrd, input=listing.encode(), stdout=f,
                       check=True, timeout=120)


def _make_userdata(dest: Path, log) -> None:
    with open(dest, "wb") as f:
        f.truncate(DATA_SIZE)
    # -g android: the defaults Android's fs_mgr formats /data with (project quota, extra attributes ...)
    _run(["mkfs.f2fs", "-f", "-g", "android", "-t", "0", "-l", "userdata", dest], log)
