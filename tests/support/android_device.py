"""An Android-shaped test device: what mobiperf meets on a phone, on this host, through the real adb client.

The device is a directory ROOT served by the loopback adbd (adbd_loopback.py --chroot ROOT), started in a mount
namespace of its own (unshare -m) that holds the device's mounts: they are invisible to the host and go away with
the namespace's last process.

  /system                 Android 14's userland (android_userland.py: mksh, toybox, getprop, su), from this host's
                          Debian packages; ABI arm64-v8a
  /data                   ext4 on a loop device of its own (autoclear: freed when the namespace ends)
  /data/local/tmp         the shell user's scratch directory (0771 shell:shell)
  /storage/emulated/0     /data/media/0 bound noexec,nosuid,nodev (binaries cannot run from shared storage)
  /sdcard                 -> /storage/self/primary -> /storage/emulated/0
  /dev /proc /sys         the host's (/dev/fuse; tracefs at /sys/kernel/tracing)

Commands run as the shell user (uid 2000) with Android's PATH and environment. There is no fusermount (a phone has
none; the host's setuid fusermount3 must not leak in), no /bin, no /tmp, no Python. The ABI is arm64-v8a while
`uname -m` says x86_64: the aarch64 binaries mobiperf pushes run through qemu-user-static's binfmt_misc entry, whose
flag F opens the interpreter when the entry is registered, so it also works inside the chroot. `pidof` does not
find programs run that way: mobiperf must track its daemons by pid file.

Each device has its own root, image, pid directory and namespace (two devices sharing one home broke su once).
What the host cannot give (root, binfmt_misc, a Debian package) skips the tests that need the device, with the
reason (device_problem()).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from adb_fixtures import ADBD, START_TIMEOUT_S, AdbServer, LoopbackDevice, _end, wait_for_state
from android_userland import ANDROID_14_PROPS, MKSH, SHELL_UID, TOYBOX, build_su, shape_system

ABI = "arm64-v8a"
MACHINE = "aarch64"                        # the qemu-user machine that runs the ABI's binaries
DATA_SIZE = 256 << 20
PROPS = {
    **ANDROID_14_PROPS,
    "ro.product.cpu.abi": ABI,
    "ro.product.cpu.abilist": "arm64-v8a,armeabi-v7a,armeabi",
    "ro.product.model": "Android_Shaped",
    "ro.product.name": "android_shaped",
    "ro.product.device": "shaped",
    "ro.serialno": "SHAPED0001",
}

# Runs as root in the device's new mount namespace, with the host's tools, then execs the adbd.
SETUP = r"""set -eu
R=$1 IMG=$2
shift 2
mount -o loop,rw,nosuid,nodev,noatime "$IMG" "$R/data"
mkdir -p "$R/data/local/tmp" "$R/data/media/0"
chmod 0771 "$R/data" "$R/data/local/tmp"
chmod 0751 "$R/data/local"
chown 2000:2000 "$R/data/local/tmp" "$R/data/media/0"
chmod 0775 "$R/data/media/0"
mount --bind "$R/data/media/0" "$R/storage/emulated/0"
mount -o remount,bind,noexec,nosuid,nodev "$R/storage/emulated/0"
mount --rbind /dev "$R/dev"
mount -t proc proc "$R/proc"
mount --rbind /sys "$R/sys"
exec "$@"
"""


# -- what the host must offer ---------------------------------------------------------------------------------------

def qemu_binfmt_problem(machine: str = MACHINE) -> str | None:
    """Why binaries of `machine` cannot run here through qemu-user binfmt_misc with flag F (None: they can).

    Mounts binfmt_misc and registers Debian's qemu-MACHINE entry (/usr/lib/binfmt.d) if that is all that is
    missing, as installing qemu-user-static does on a machine whose init mounts binfmt_misc."""
    if not shutil.which(f"qemu-{machine}-static"):
        return f"qemu-{machine}-static is missing (apt-get install qemu-user-static binfmt-support; make setup does)"
    misc = Path("/proc/sys/fs/binfmt_misc")
    if not (misc / "register").exists():
        done = subprocess.run(["mount", "-t", "binfmt_misc", "binfmt_misc", str(misc)], capture_output=True,
                              text=True, timeout=30)
        if done.returncode != 0:
            return f"binfmt_misc is not mounted and mounting it failed: {done.stderr.strip()}"
    entry = misc / f"qemu-{machine}"
    conf = Path(f"/usr/lib/binfmt.d/qemu-{machine}.conf")
    if not entry.exists() and conf.exists():
        line = next((x for x in conf.read_text().splitlines() if x.startswith(":")), "")
        try:
            (misc / "register").write_text(line)
        except OSError as e:
            return f"registering {conf} in binfmt_misc failed: {e}"
    if not entry.exists():
        return f"no binfmt_misc entry qemu-{machine} (update-binfmts --enable qemu-{machine})"
    text = entry.read_text()
    if not text.startswith("enabled"):
        return f"the binfmt_misc entry qemu-{machine} is disabled (update-binfmts --enable qemu-{machine})"
    flags = next((x.split(":", 1)[1] for x in text.splitlines() if x.startswith("flags:")), "")
    if "F" not in flags:
        return (f"the binfmt_misc entry qemu-{machine} lacks flag F (fix binary), so it cannot work inside a "
                f"chroot: re-register it with fix_binary yes (Debian's qemu-user-static does)")
    return None


def device_problem() -> str | None:
    """Why the Android-shaped device cannot be built on this host (None: it can)."""
    if os.geteuid() != 0:
        return "needs root (a loop device, a mount namespace, a setuid su)"
    for path, package in ((MKSH, "mksh"), (TOYBOX, "toybox")):
        if not path.exists():
            return f"{path} is missing (apt-get install {package}; make setup does)"
    for tool, package in (("unshare", "util-linux"), ("mkfs.ext4", "e2fsprogs"), ("cc", "build-essential"),
                          ("mawk", "mawk")):
        if not shutil.which(tool):
            return f"{tool} is missing (apt-get install {package})"
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse"
    return qemu_binfmt_problem()


# -- the device's root ----------------------------------------------------------------------------------------------

def build_root(root: Path, *, su_binary: Path | None, props: dict[str, str]) -> None:
    """The device's file tree (without its mounts, which SETUP makes in the device's namespace): Android's /system
    from this host's binaries (android_userland.py), and the mount points of the host's /dev, /proc and /sys."""
    for d in ("dev", "proc", "sys"):
        (root / d).mkdir(parents=True, exist_ok=True)
    shape_system(root, props=props, su_binary=su_binary, source=Path("/"))
    (root / "etc").symlink_to("/system/etc")


# -- the device -----------------------------------------------------------------------------------------------------

@dataclass
class AndroidDevice(LoopbackDevice):
    """A LoopbackDevice whose adbd serves the Android-shaped root, in a mount namespace of its own."""

    root: Path = Path()
    image: Path = Path()
    namespace: str = ""
    has_su: bool = True

    def namespace_pids(self) -> list[int]:
        """Every process in the device's mount namespace (the adbd, its shells, daemons they left running)."""
        pids = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if os.readlink(entry / "ns/mnt") == self.namespace:
                        pids.append(int(entry.name))
                except OSError:
                    pass
        return pids

    def shell(self, script: str, *, timeout: float = 60) -> subprocess.CompletedProcess:
        """`adb shell` as the shell user (no su): what a test asks the device directly."""
        return self.server.client("-s", self.serial, "shell", script, timeout=timeout)

    def stop(self) -> None:
        super().stop()
        # The device's namespace ends with its last process; kill what the adbd's shells left behind (a daemon
        # started with `&` is in no group the adbd recorded). Its mounts, and so the loop device, then go.
        deadline = time.monotonic() + 15
        while (pids := self.namespace_pids()) and time.monotonic() < deadline:
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)
        attached = subprocess.run(["losetup", "-j", str(self.image)], capture_output=True, text=True,
                                  timeout=30).stdout.split(":")[0]
        if attached:
            subprocess.run(["losetup", "-d", attached], capture_output=True, timeout=30)
        shutil.rmtree(self.root, ignore_errors=True)
        self.image.unlink(missing_ok=True)


def start_android_device(server: AdbServer, workdir: Path, *, su: bool = True, su_binary: Path | None = None,
                         props: dict[str, str] | None = None) -> AndroidDevice:
    """Build a device root in workdir and serve it; su=False is a phone without root (a user build, no su)."""
    workdir.mkdir(parents=True, exist_ok=True)
    props = {**PROPS, **(props or {})}
    root = workdir / "root"
    build_root(root, su_binary=(su_binary or build_su(workdir)) if su else None, props=props)
    image = workdir / "userdata.img"
    with open(image, "wb") as f:
        f.truncate(DATA_SIZE)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-b", "4096", "-E", "lazy_itable_init=0,lazy_journal_init=0",
                    str(image)], check=True, timeout=120, capture_output=True)
    port_file, pid_dir = workdir / "port", workdir / "pids"
    pid_dir.mkdir(exist_ok=True)
    log = open(workdir / "adbd.log", "wb")
    argv = ["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", SETUP, "android-setup",
            str(root), str(image), sys.executable, str(ADBD), "--port", "0", "--port-file", str(port_file),
            "--pid-dir", str(pid_dir), "--chroot", str(root), "--uid", str(SHELL_UID), "--shell",
            "/system/bin/sh", "--model", props["ro.product.model"], "--product", props["ro.product.name"],
            "--device", props["ro.product.device"], "--serial", props["ro.serialno"]]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    log.close()
    device = None
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not port_file.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the Android-shaped device did not start: "
                                   f"{(workdir / 'adbd.log').read_text()[-2000:]}")
            time.sleep(0.05)
        namespace = os.readlink(f"/proc/{proc.pid}/ns/mnt")
        if namespace == os.readlink("/proc/self/ns/mnt"):
            raise RuntimeError("the device's adbd is not in a mount namespace of its own")
        home = workdir / "home"   # LoopbackDevice removes it; the device's su needs none
        home.mkdir(exist_ok=True)
        device = AndroidDevice(server, proc, int(port_file.read_text()), pid_dir, workdir, home,
                               ("--chroot",), root=root, image=image, namespace=namespace, has_su=su)
        said = server.client("connect", device.serial).stdout.strip()
        if not said.startswith(("connected to", "already connected")):
            raise RuntimeError(f"adb connect {device.serial}: {said}")
        wait_for_state(server, device.serial, "device", START_TIMEOUT_S)
    except BaseException:
        if device is not None:
            device.stop()
        else:
            _end(proc)
            shutil.rmtree(root, ignore_errors=True)
            image.unlink(missing_ok=True)
        raise
    return device


# -- helpers of the tests on adb devices (plain loopback and Android-shaped) ------------------------------------------

MOBIPERF = [sys.executable, "-m", "mobiperf"]


def mobiperf_via(device, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """`mobiperf ARGS` against the device's adb server; .pid is the mobiperf process's (it names what it pushes)."""
    env = dict(os.environ, ANDROID_ADB_SERVER_PORT=str(device.server_port))
    with subprocess.Popen([*MOBIPERF, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=env) as proc:
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    done = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    done.pid = proc.pid
    return done


def pushed_leftovers(device, pid: int) -> list[str]:
    """What a mobiperf process (pid) left in the device's work directory for pushed binaries."""
    workdir = "/data/local/tmp/mobiperf" if isinstance(device, AndroidDevice) else "/tmp/mobiperf"
    listing = device.server.client("-s", device.serial, "shell", f"ls -A {workdir} 2>/dev/null").stdout.split()
    if isinstance(device, AndroidDevice):
        return listing    # the device is this test session's: nothing at all may be left
    return [name for name in listing if name.startswith(f"bin-{pid}-")]


def storage_dir(device, tmp_path) -> str:
    """A directory of the device's data partition for a dir: stack (made here on the plain device, this host)."""
    if isinstance(device, AndroidDevice):
        return "/data/local/tmp/mp"
    base = tmp_path / "device-storage"
    base.mkdir(exist_ok=True)
    return str(base)


# -- fixtures -------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def android_device(adb_server, tmp_path_factory):
    """A rooted (su) Android-shaped device for the whole session; skips with the reason where it cannot be built."""
    problem = device_problem()
    if problem:
        pytest.skip(f"Android-shaped test device: {problem}")
    device = start_android_device(adb_server, tmp_path_factory.mktemp("android"))
    yield device
    device.stop()
    assert not device.fixture_errors(), "the loopback adbd failed: " + "; ".join(device.fixture_errors())


@pytest.fixture
def start_android(adb_server, tmp_path):
    """Factory: start_android(su=..., props=...) -> an Android-shaped device of the test's own."""
    problem = device_problem()
    if problem:
        pytest.skip(f"Android-shaped test device: {problem}")
    started: list[AndroidDevice] = []

    def start(**kw) -> AndroidDevice:
        device = start_android_device(adb_server, tmp_path / f"android{len(started)}", **kw)
        started.append(device)
        return device

    yield start
    for device in started:
        device.stop()


@pytest.fixture(scope="session", params=["plain", "android"])
def adb_device(request):
    """Each adb test twice: on the plain loopback device (this host, as root) and on the Android-shaped one."""
    return request.getfixturevalue("loopback_device" if request.param == "plain" else "android_device")
