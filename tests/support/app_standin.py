"""An installed app on the Android-shaped test device, launched the way the launcher launches one.

install_app(device, package, uid) puts on the device (android_device.py):
  /data/system/packages.list   `PACKAGE UID ...`: what `pm` reads, as Android's package manager keeps it
  /data/data/PACKAGE           the app's data directory, owned by its uid (0700)
  /system/bin/pm               `pm list packages [-U] [FILTER]` from packages.list (`package:NAME uid:N`)
  /system/bin/monkey           `monkey -p PACKAGE ...`: asks the zygote stand-in to start the package, as the
                               activity manager asks zygote; prints `Events injected: 1`
  /system/bin/zygote-standin   started as root: reads package names from a FIFO and forks app_standin (app_standin.c)
                               for each, through a long-named link to it so the child can rename its command line
so the app's process is a child of the zygote stand-in (root), not of the shell that asked for it: mobiperf finds it
by the package's uid, as on a phone. The app's process drops to the uid, names itself (comm and command line) and
does known IO from named threads (app_standin.c); then it exits.
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIFO = "/data/local/tmp/.zygote"
# argv[0] with room for the package name the app writes over it (as zygote's setArgV0 does)
LONG_NAME = "/system/bin/app_process" + "_" * 96
# The virtual phone's /system is read-only erofs: the stand-ins go to /product/bin (first on adbd's PATH), a tmpfs
PHONE_BIN = "/product/bin"


def zygote_script(long_name: str = LONG_NAME, alive_s: int = 3) -> str:
    """alive_s: how long the app lives after its IO (a slow, emulated phone looks for it less often)."""
    return f"""#!/system/bin/sh
# zygote-standin: forks an app's process for every package name written to {FIFO} (tests/support/app_standin.py)
rm -f {FIFO}
mkfifo {FIFO} && chmod 666 {FIFO} || exit 1   # (toybox's mkfifo -m honours the umask)
while :; do
  while read -r pkg; do
    uid=$(grep "^$pkg " /data/system/packages.list | cut -d' ' -f2)
    [ -n "$uid" ] && {long_name} "$pkg" "$uid" "/data/data/$pkg" {alive_s} </dev/null >/dev/null 2>&1 &
  done < {FIFO}
done
"""


ZYGOTE = zygote_script()

MONKEY = f"""#!/system/bin/sh
# monkey -p PACKAGE [-c CATEGORY] COUNT: the stand-in starts PACKAGE's process through the zygote stand-in
pkg=
while [ $# -gt 0 ]; do case $1 in -p) pkg=$2; shift 2 ;; *) shift ;; esac; done
if [ -z "$pkg" ] || ! grep -q "^$pkg " /data/system/packages.list; then
  echo "** No activities found to run, monkey aborted."
  exit 1
fi
echo "$pkg" > {FIFO}
echo "Events injected: 1"
"""

PM = """#!/system/bin/sh
# pm list packages [-U] [FILTER]: the stand-in reads /data/system/packages.list
if [ "$1" != list ] || [ "$2" != packages ]; then echo "pm stand-in: only list packages" >&2; exit 1; fi
shift 2
u= f=
for a in "$@"; do case $a in -U) u=1 ;; -*) ;; *) f=$a ;; esac; done
while read -r p id rest; do
  case $p in *"$f"*) ;; *) continue ;; esac
  if [ -n "$u" ]; then echo "package:$p uid:$id"; else echo "package:$p"; fi
done < /data/system/packages.list
"""


def build_app_standin(dest_dir: Path) -> Path:
    """app_standin.c built static for this host (the device runs host binaries)."""
    binary = dest_dir / "app_standin"
    if not binary.exists():
        subprocess.run(["cc", "-static", "-O2", "-Wall", "-pthread", "-o", str(binary), str(HERE / "app_standin.c")],
                       check=True, timeout=120, capture_output=True)
    return binary


def install_app(device, package: str, uid: int) -> None:
    """The package installed on the device and its zygote stand-in running (module docstring)."""
    bin_dir = device.root / "system/bin"
    binary = build_app_standin(device.workdir)
    (bin_dir / "app_standin").write_bytes(binary.read_bytes())
    (bin_dir / "app_standin").chmod(0o755)
    (device.root / LONG_NAME.lstrip("/")).symlink_to("app_standin")
    for name, script in (("zygote-standin", ZYGOTE), ("monkey", MONKEY), ("pm", PM)):
        (bin_dir / name).write_text(script)
        (bin_dir / name).chmod(0o755)
    _register(device, package, uid, "/system/bin")


def install_app_on_phone(phone, package: str, uid: int) -> None:
    """The same on the virtual phone (tests/support/vphone_fixtures.py), through adb: the stand-ins pushed to
    /data/local/tmp, then copied as root to a tmpfs mounted on /product/bin (the phone's /system is read-only)."""
    binary = build_app_standin(Path(phone.phone.run_dir))
    staging = "/data/local/tmp/app-standin"
    long_name = PHONE_BIN + "/app_process" + "_" * 96
    scripts = Path(phone.phone.run_dir) / "app-standin"
    scripts.mkdir(exist_ok=True)
    for name, script in (("zygote-standin", zygote_script(long_name, alive_s=60)), ("monkey", MONKEY), ("pm", PM)):
        (scripts / name).write_text(script)
    phone.shell(f"mkdir -p {staging}")
    for path in (binary, *sorted(scripts.iterdir())):
        done = phone.server.client("-s", phone.serial, "push", str(path), f"{staging}/{path.name}", timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"adb push {path.name} failed: {done.stderr}")
    copy = (f"mount -t tmpfs -o mode=0755 tmpfs {PHONE_BIN} && cp {staging}/* {PHONE_BIN}/ && "
            f"chmod 0755 {PHONE_BIN}/* && ln -s app_standin {long_name} && rm -r {staging}")
    done = phone.shell(f"su 0 sh -c {shlex.quote(copy)}", timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"installing the app stand-ins on the phone failed: {done.stdout}{done.stderr}")
    _register(phone, package, uid, PHONE_BIN)


def uninstall_app_on_phone(phone, package: str) -> None:
    """What install_app_on_phone left, gone: the zygote stand-in and the app's processes ended, the FIFO, the
    package's data and listing removed, /product/bin unmounted (the session's phone is shared by later tests,
    which find /data/local/tmp as they expect it)."""
    # the patterns' brackets keep pkill -f from matching (and ending) the shell that runs it
    undo = (f"rm -f {FIFO}; rm -rf /data/data/{package} /data/system/packages.list; pkill -f [z]ygote-standin; "
            f"pkill -f [a]pp_process_; umount {PHONE_BIN}; true")
    phone.shell(f"su 0 sh -c {shlex.quote(undo)}", timeout=60)


def _register(device, package: str, uid: int, bin_dir: str) -> None:
    """packages.list, the app's data directory, and the zygote stand-in started as root, waited for."""
    setup = (f"mkdir -p /data/system /data/data/{package} && "
             f"echo '{package} {uid} 0 /data/data/{package} default:targetSdkVersion=34 none' "
             f"> /data/system/packages.list && chmod 0644 /data/system/packages.list && "
             f"chown {uid}:{uid} /data/data/{package} && chmod 0700 /data/data/{package} && "
             f"(nohup {bin_dir}/zygote-standin </dev/null >/dev/null 2>&1 &) && "
             f"i=0; while [ ! -p {FIFO} ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; test -p {FIFO}")
    done = device.shell(f"su 0 sh -c {shlex.quote(setup)}", timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"installing {package} on the device failed: {done.stdout}{done.stderr}")
