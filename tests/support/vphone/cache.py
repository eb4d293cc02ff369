"""The virtual phone's images, cached by what built them, and built when the cache lacks one.

The cache (MOBIPERF_VPHONE_CACHE, else ~/.cache/mobiperf/vphone, shared by every clone on the machine) holds one
directory per kernel and key: <kernel>-<key>/ with the files of image.py. The key is the hash of every file that
shapes the image (INPUTS: the recipe image.py, the guest scripts, the adbd, su's source, the shared userland) and
the kernel package's name and version, so a change to either builds a new image and an unchanged one is reused;
the Debian bootstrap underneath is kept as a tarball (image.py) and redone only by `--rebuild`
(`python -m vphone build [--rebuild]`, make vphone-image).
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from vphone.image import HERE, SUITE, SUPPORT, ImageError, build

KERNELS = {"6.1": "linux-image-amd64", "6.12": "linux-image-6.12-amd64"}   # version -> Debian's meta package
BUILD_TOOLS = {"mmdebstrap": "mmdebstrap", "mkfs.erofs": "erofs-utils", "mkfs.f2fs": "f2fs-tools", "cpio": "cpio",
               "depmod": "kmod", "cc": "build-essential", "apt-get": "apt"}
INPUTS = (HERE / "image.py", *sorted((HERE / "guest").iterdir()), SUPPORT / "adbd_loopback.py",
          SUPPORT / "android_su.c", SUPPORT / "android_userland.py")


def default_cache() -> Path:
    """MOBIPERF_VPHONE_CACHE, else ~/.cache/mobiperf/vphone (shared by every clone on the machine)."""
    if os.environ.get("MOBIPERF_VPHONE_CACHE"):
        return Path(os.environ["MOBIPERF_VPHONE_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mobiperf" / "vphone"


@functools.lru_cache(maxsize=None)
def kernel_package(kernel: str) -> tuple[str, str]:
    """(package, version) of the kernel image Debian's meta package for `kernel` pulls in, from apt's lists (one
    `apt-cache show`: the meta package depends on its kernel's exact version; seconds on a loaded machine)."""
    if kernel not in KERNELS:
        raise ImageError(f"kernel {kernel!r}: the virtual phone has {', '.join(KERNELS)}")
    meta = KERNELS[kernel]
    shown = subprocess.run(["apt-cache", "show", "--no-all-versions", meta], capture_output=True, text=True,
                           timeout=120).stdout
    m = re.search(r"^Depends:.*?\b(linux-image-[^\s,]+) \(= ([^)]+)\)", shown, re.M)
    if m is None:
        raise ImageError(f"apt knows no {meta} (apt-get update, with {SUITE}'s main in the sources)")
    return m.group(1), m.group(2)


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
            package, version = kernel_package(kernel)
            with open(log, "w") as out:
                build(kernel, package, version, image_key(package, version), work, out, fresh=rebuild)
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
        elif other.name.endswith(".build.log") and other.name != f"{target.name}.build.log":
            other.unlink(missing_ok=True)


def build_problem() -> str | None:
    """Why an image cannot be built on this machine (None: it can)."""
    if os.geteuid() != 0:
        return "needs root (mmdebstrap in root mode, a setuid su)"
    missing = sorted({package for tool, package in BUILD_TOOLS.items() if not shutil.which(tool)})
    return f"missing Debian packages: {' '.join(missing)} (make setup installs them)" if missing else None
