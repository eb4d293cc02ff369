"""What is Android about a target, and putting the reference binaries on it.

android_facts() asks everything in one shell round trip (a phone over USB costs tens of ms per call) and answers
for any Linux target: on a host that is not Android (the loopback device is this very host) "is_android" is False
and the Android-only facts are None, while the kernel facts (tracefs, mounts, schedulers) stay right.

push_reference_binaries() copies the reference implementations built for the device's ABI into the run's work
directory and removes them afterwards, so a run leaves nothing behind unless asked to keep it.
"""

from __future__ import annotations

import contextlib
import logging
import platform
import re
import shlex
from pathlib import Path
from typing import Iterator, Sequence

from mobiperf.core.binaries import reference_bin_dir
from mobiperf.core.errors import TargetError
from mobiperf.core.mounts import Mount, mount_of, parse_mountinfo, parse_proc_mounts
from mobiperf.target.file_batch import PREAMBLE
from mobiperf.target.script_sections import script_sections
from mobiperf.target.transport import Transport

log = logging.getLogger(__name__)

TRACEFS_CANDIDATES = ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")
PROPS = ("ro.build.version.release", "ro.build.version.sdk", "ro.product.cpu.abi", "ro.product.model",
         "ro.build.type", "persist.sys.fuse.passthrough.enable")
# uname -m -> Android ABI name, for hosts without getprop
MACHINE_ABI = {"x86_64": "x86_64", "aarch64": "arm64-v8a", "arm64": "arm64-v8a", "armv7l": "armeabi-v7a",
               "armv8l": "armeabi-v7a", "i686": "x86", "i386": "x86"}
# Android ABI -> the ARCH= of its static build (reference-impl/cross.mk), in bin/<ARCH>/
ABI_ARCH = {"arm64-v8a": "aarch64", "armeabi-v7a": "arm", "x86_64": "x86_64"}
# Filesystem types that hold data (not proc, sysfs, cgroups, tmpfs ...), for the mount table in the facts.
DATA_FS_PREFIXES = ("ext", "f2fs", "xfs", "btrfs", "erofs", "vfat", "exfat", "fuse", "sdcardfs", "esdfs", "overlay")
DEFAULT_WORKDIR = {True: "/data/local/tmp/mobiperf", False: "/tmp/mobiperf"}
# Programs that use tracefs themselves (Perfetto's probes daemon, atrace): a run beside them shares the trace
# buffers' settings at the top level, and on Android they own the tracefs files.
TRACERS = ("traced_probes", "traced", "perfetto", "atrace", "trace-cmd", "simpleperf")
# What run.json records about the target in each repetition's facts (see parse_android_facts).
RUN_FACTS = ("is_android", "android_version", "sdk", "build_type", "model", "abi", "machine", "kernel", "selinux",
             "tracefs_path", "tracefs_owner", "tracefs_users", "sdcard_path", "sdcard_fstype",
             "sdcard_implementation", "fuse_passthrough", "kernel_fuse_features", "data_fstype",
             "data_block_devices", "cpu_model", "clocksource", "clocksources")

# One script, sections introduced by @@name lines. Portable across dash, bash and Android's mksh + toybox, and
# built of shell builtins where it can (file_batch.PREAMBLE): each fork and exec costs a phone under emulation
# tenths of a second (the script took 10 s on a virtual phone with `$(getprop p)` per property and `$(cat f)` per
# scheduler file; getprop now lists every property once).
FACTS_SCRIPT = PREAMBLE + r"""
_lines() {{ while IFS= read -r _l; do _line "$_l"; done < "$1"; }}
echo @@uid; id -u
echo @@path; _line "$PATH"
echo @@uname; read -r k < /proc/sys/kernel/osrelease; _line "$k"; uname -m
echo @@android; if [ -e /system/build.prop ] && [ -e /system/bin/sh ]; then echo yes; fi
echo @@props; getprop 2>/dev/null
echo @@tracefs; for d in {tracefs}; do
  [ -e "$d/trace" ] && echo "$d"; [ -d "$d/instances" ] && echo "$d instances"
done
echo @@selinux; getenforce 2>/dev/null ||
  {{ [ -r /sys/fs/selinux/enforce ] && read -r e < /sys/fs/selinux/enforce && echo "enforce=$e"; }}
echo @@sdcard; [ -e /sdcard ] && readlink -f /sdcard
echo @@fusefeatures; for f in /sys/fs/fuse/features/*; do [ -e "$f" ] && _line "${{f##*/}}"; done
echo @@tracefsowner; for d in {tracefs}; do
  [ -e "$d/trace" ] && {{ stat -c '%u:%g %a' "$d/trace"; break; }}; done
echo @@tracers; for p in /proc/[0-9]*; do
  c=; read -r c 2>/dev/null < "$p/comm"
  case $c in {tracers}) echo "${{p#/proc/}} $c" ;; esac
done
echo @@mounts; _lines /proc/mounts
echo @@mountinfo; _lines /proc/self/mountinfo
echo @@block; for b in /sys/class/block/*; do
  [ -e "$b/dev" ] || continue
  n=${{b##*/}}; read -r d < "$b/dev"; p=
  [ -e "$b/partition" ] && {{ p=$(readlink -f "$b/.."); p=${{p##*/}}; }}
  s=; for x in "$b"/slaves/*; do [ -e "$x" ] && s="$s ${{x##*/}}"; done
  echo "$n|$d|$p|$s"
done
echo @@schedulers; for f in /sys/block/*/queue/scheduler; do [ -r "$f" ] && read -r l < "$f" && _line "$f $l"; done
echo @@cpu; while IFS=: read -r k v; do case $k in "model name"*|Hardware*) _line "${{v# }}"; break ;; esac
  done < /proc/cpuinfo
echo @@clocksource; c=/sys/devices/system/clocksource/clocksource0
  [ -r $c/current_clocksource ] && read -r a < $c/current_clocksource && read -r b < $c/available_clocksource &&
  _line "$a" && _line "$b"
echo @@end
""".format(tracefs=" ".join(TRACEFS_CANDIDATES), tracers="|".join(TRACERS))
PROPERTY_LINE = re.compile(r"^\[([^\]]+)\]: \[(.*)\]$")


def android_facts(transport: Transport, *, timeout: float = 30.0) -> dict:
    """The Android-aware facts of a target, from one shell call. See parse_android_facts for the keys."""
    done = transport.run(["sh", "-c", FACTS_SCRIPT], timeout=timeout)
    if "@@end" not in done.text:
        raise TargetError(f"{transport.name}: the facts script did not finish: {done.stderr.decode(errors='replace')}")
    return parse_android_facts(done.text)


def storage_layer(fstype: str | None) -> str | None:
    """How the shared storage (/sdcard) is served: "fuse" (Android 11+ and before 8), "sdcardfs" (8-10), "esdfs",
    or None when it is a plain filesystem or missing."""
    if fstype is None:
        return None
    if fstype == "fuse" or fstype.startswith("fuse."):
        return "fuse"
    if fstype in ("sdcardfs", "esdfs"):
        return fstype
    return None


def parse_schedulers(lines: Sequence[str]) -> dict[str, dict]:
    found = {}
    for line in lines:
        path, _, choices = line.partition(" ")
        parts = path.split("/")
        if len(parts) < 4:
            continue
        device = parts[3]
        if device.startswith(("loop", "ram")):  # dozens of apex loop devices on a phone, none of them storage
            continue
        names = choices.split()
        current = next((n.strip("[]") for n in names if n.startswith("[")), None)
        found[device] = {"current": current, "available": [n.strip("[]") for n in names]}
    return found


def parse_block_devices(lines: Sequence[str]) -> dict[str, dict]:
    """"name|major:minor|parent disk (partitions)|slaves (dm, md)" lines -> {name: {dev, parent, slaves}}."""
    found = {}
    for line in lines:
        parts = line.split("|")
        if len(parts) != 4:
            continue
        name, dev, parent, slaves = parts
        found[name] = {"dev": dev.strip(), "parent": parent.strip() or None, "slaves": slaves.split()}
    return found


def device_chain(dev: str | None, block: dict[str, dict]) -> list[str]:
    """The block devices under a mount's major:minor, top first: e.g. dm-48 (/data's dm-default-key), its slave
    sda34, that partition's disk sda. Empty for mounts without a block device (fuse, tmpfs, overlay)."""
    by_dev = {info["dev"]: name for name, info in block.items()}
    start = by_dev.get(dev or "")
    chain: list[str] = []
    queue = [start] if start else []
    while queue:
        name = queue.pop(0)
        if name in chain or name not in block:
            continue
        chain.append(name)
        info = block[name]
        queue += info["slaves"] + ([info["parent"]] if info["parent"] else [])
    return chain


def _mount_summary(path: str, mounts: Sequence[Mount], devs: dict[str, str], block: dict[str, dict]) -> dict | None:
    m = mount_of(path, mounts)
    if m is None:
        return None
    chain = device_chain(devs.get(m.mountpoint), block)
    disks = [n for n in chain if not block[n]["slaves"] and not block[n]["parent"]]
    return {"source": m.source, "mountpoint": m.mountpoint, "fstype": m.fstype, "options": m.options,
            "block_devices": chain, "disks": disks}


def parse_android_facts(text: str) -> dict:
    """The output of FACTS_SCRIPT as a dict.

    is_android, android_version, sdk, build_type, model, abi, kernel, machine, uid, root, path (the shell's PATH),
    tracefs_path, tracefs_instances, tracefs_owner ("uid:gid mode" of its trace file: on Android
    root:readtracefs), tracefs_users [{pid, name}] (TRACERS running), selinux ("enforcing", "permissive",
    "disabled"), sdcard_path
    (resolved), sdcard_fstype, sdcard_layer ("fuse", "sdcardfs", "esdfs" or None), sdcard_implementation (how
    /sdcard is served: "fuse-passthrough", "fuse", "sdcardfs", "esdfs", "direct <fstype>", or None without one),
    fuse_passthrough (the MediaProvider property, bool or None), kernel_fuse_features (/sys/fs/fuse/features:
    e.g. fuse_passthrough on Android kernels), data_fstype, data_source,
    data_options, data_block_devices (top first, e.g. ["dm-48", "sda34", "sda"]), default_workdir, workdir_mount
    (the mount holding default_workdir: source, mountpoint, fstype, options, block_devices, disks), schedulers
    {device: {current, available}}, mounts [data-bearing mounts], cpu_model, clocksource, clocksources (_cpu).
    """
    s = script_sections(text, keep_indent=True)
    props = {}
    for line in s.get("props", []):   # getprop's "[name]: [value]" lines (or "name=value"), PROPS kept
        m = PROPERTY_LINE.match(line.strip())
        key, value = (m.group(1), m.group(2)) if m else line.partition("=")[::2]
        if key in PROPS:
            props[key] = value.strip()
    is_android = bool(s.get("android")) and props.get("ro.build.version.sdk", "").isdigit()
    tracefs_path, instances = _tracefs(s.get("tracefs", []))
    mounts = parse_proc_mounts("\n".join(s.get("mounts", [])))
    users = [{"pid": int(pid), "name": name} for pid, _, name in (line.partition(" ") for line in s.get("tracers", []))
             if pid.isdigit()]
    return {
        **_identity(s, props, is_android),
        "tracefs_path": tracefs_path,
        "tracefs_instances": instances,
        "selinux": _selinux(s.get("selinux", [])),
        **_sdcard(s, props, is_android, mounts),
        "kernel_fuse_features": s.get("fusefeatures", []),
        "tracefs_owner": (s.get("tracefsowner") or [None])[0],
        "tracefs_users": users,
        **_data(s, mounts, is_android),
        "schedulers": parse_schedulers(s.get("schedulers", [])),
        **_cpu(s),
        "mounts": [m.as_fact() for m in mounts if m.fstype.startswith(DATA_FS_PREFIXES)],
    }


def _identity(s: dict[str, list[str]], props: dict[str, str], is_android: bool) -> dict:
    """What the device is: Android's build properties (None off Android), kernel, machine and ABI, the shell's
    uid and PATH."""
    uname = s.get("uname", [])
    machine = uname[1].strip() if len(uname) > 1 else None
    uid_text = (s.get("uid") or [""])[0].strip()
    uid = int(uid_text) if uid_text.isdigit() else None
    abi = props.get("ro.product.cpu.abi") if is_android else None
    return {
        "is_android": is_android,
        "android_version": props.get("ro.build.version.release") or None if is_android else None,
        "sdk": int(props["ro.build.version.sdk"]) if is_android else None,
        "build_type": props.get("ro.build.type") or None if is_android else None,
        "model": props.get("ro.product.model") or None if is_android else None,
        "abi": abi or MACHINE_ABI.get(machine or "", machine),
        "kernel": uname[0].strip() if uname else None,
        "machine": machine,
        "uid": uid,
        "root": uid == 0,
        "path": (s.get("path") or [None])[0],
    }


def _cpu(s: dict[str, list[str]]) -> dict:
    """What runs the device's code and keeps its time: the CPU's model name (an emulated CPU says so: "QEMU Virtual
    CPU" under QEMU's TCG), the kernel's clocksource and those it has (kvm-clock under KVM, arch_sys_counter on
    arm64 phones)."""
    clocks = s.get("clocksource", [])
    return {"cpu_model": (s.get("cpu") or [None])[0], "clocksource": clocks[0].strip() if clocks else None,
            "clocksources": clocks[1].split() if len(clocks) > 1 else []}


def _tracefs(lines: list[str]) -> tuple[str | None, bool]:
    """The first tracefs mount listed, and whether it has instances."""
    tracefs_path = None
    instances = False
    for line in lines:
        path, _, flag = line.partition(" ")
        if tracefs_path is None and not flag:
            tracefs_path = path
        if flag == "instances" and path == tracefs_path:
            instances = True
    return tracefs_path, instances


def _selinux(lines: list[str]) -> str:
    """enforcing, permissive or disabled (no SELinux said)."""
    selinux = "disabled"
    if lines:
        said = lines[0].strip().lower()
        if said.startswith("enforce="):
            selinux = "enforcing" if said.endswith("1") else "permissive"
        elif said in ("enforcing", "permissive", "disabled"):
            selinux = said
    return selinux


def _sdcard(s: dict[str, list[str]], props: dict[str, str], is_android: bool, mounts: list[Mount]) -> dict:
    """Where /sdcard resolves, the mount under it and how it is served (FUSE, passthrough, sdcardfs ...)."""
    sdcard_path = (s.get("sdcard") or [None])[0]
    sdcard_mount = mount_of(sdcard_path, mounts) if sdcard_path else None
    passthrough = props.get("persist.sys.fuse.passthrough.enable") or None
    layer = storage_layer(sdcard_mount.fstype) if sdcard_mount else None
    passthrough_on = {"true": True, "1": True, "false": False, "0": False}.get(passthrough or "") if is_android \
        else None
    return {
        "sdcard_path": sdcard_path,
        "sdcard_fstype": sdcard_mount.fstype if sdcard_mount else None,
        "sdcard_layer": layer,
        "sdcard_implementation": _sdcard_implementation(layer, sdcard_mount, passthrough_on),
        "fuse_passthrough": passthrough_on,
    }


def _data(s: dict[str, list[str]], mounts: list[Mount], is_android: bool) -> dict:
    """The /data mount and its block devices, and the default work directory with the mount holding it."""
    # Android mounts /data on its own; a plain /data directory on a host's root filesystem says nothing.
    data_mount = next((m for m in reversed(mounts) if m.mountpoint == "/data"), None)
    # the last mount on a mount point wins: it hides the others
    devs = {m.mountpoint: m.dev for m in parse_mountinfo("\n".join(s.get("mountinfo", [])))}
    block = parse_block_devices(s.get("block", []))
    return {
        "data_fstype": data_mount.fstype if data_mount else None,
        "data_source": data_mount.source if data_mount else None,
        "data_options": data_mount.options if data_mount else None,
        "data_block_devices": device_chain(devs.get("/data"), block) if data_mount else [],
        "default_workdir": DEFAULT_WORKDIR[is_android],
        "workdir_mount": _mount_summary(DEFAULT_WORKDIR[is_android], mounts, devs, block),
    }


def _sdcard_implementation(layer: str | None, mount: Mount | None, passthrough: bool | None) -> str | None:
    if mount is None:
        return None
    if layer == "fuse":
        return "fuse-passthrough" if passthrough else "fuse"
    return layer or f"direct {mount.fstype}"


def run_facts(facts: dict) -> dict:
    """The target facts a run records (RUN_FACTS) from android_facts()."""
    return {key: facts.get(key) for key in RUN_FACTS}


# -- reference binaries on the device ---------------------------------------------------------------------------------

def reference_binary_path(name: str, abi: str, bin_dir: Path | None = None, *, android: bool = False) -> Path:
    """Where the build of the reference-impl Makefile puts name for abi: bin/<arch>/ (static, `make ARCH=<arch>`)
    for an Android target, whose libc is bionic, and for any other ABI than this host's; bin/ otherwise (this
    host's build: a Linux target of the host's ABI, e.g. the loopback device, which is this host)."""
    bin_dir = bin_dir or reference_bin_dir()
    native = MACHINE_ABI.get(platform.machine())
    if abi == native and not android:
        return bin_dir / name
    arch = ABI_ARCH.get(abi)
    if arch is None:
        builds = ", ".join(f"`make -C reference-impl ARCH={a}` ({b})" for b, a in ABI_ARCH.items())
        raise TargetError(f"no reference builds for ABI {abi!r}: the Makefile builds {builds}")
    return bin_dir / arch / name


def build_command(path: Path, bin_dir: Path | None = None) -> str:
    """The make command that builds a missing reference binary at path."""
    if path.parent == (bin_dir or reference_bin_dir()):
        return "make -C reference-impl"
    return f"make -C reference-impl ARCH={path.parent.name}"


@contextlib.contextmanager
def push_reference_binaries(transport: Transport, names: Sequence[str], abi: str, workdir: str, *,
                            keep: bool = False, bin_dir: Path | None = None, android: bool = False,
                            timeout: float = 120.0) -> Iterator[dict[str, str]]:
    """Push reference-impl binaries for abi into workdir on the target; yields {name: remote path}.

    The binaries are made executable, and removed on exit (success, error or Ctrl-C) unless keep. The directories
    this created for workdir are removed too if they are empty by then. A directory created as root is given to
    the owner of the directory it was made in (on a phone, /data/local/tmp belongs to the shell user, who does
    `adb push` when root comes from su). A missing build is a TargetError naming the make command.
    """
    local = {}
    for name in names:
        path = reference_binary_path(name, abi, bin_dir, android=android)
        if not path.is_file():
            raise TargetError(f"reference binary {name!r} for ABI {abi} is not built ({path} is missing): run "
                              f"`{build_command(path, bin_dir)}`")
        local[name] = path
    from mobiperf.target.undo_journal import journal_for

    journal = journal_for(transport)  # a killed mobiperf's pushed files are removed by the next run
    entries = []
    if not keep and not transport.exists(workdir, timeout=timeout):
        entries.append(journal.record("dir", path=workdir, only_if_empty=True))  # others may use it later
    created = make_dirs(transport, workdir, timeout)
    if entries:
        journal.update(entries[0], made=created)
    remote = {name: f"{workdir.rstrip('/')}/{name}" for name in names}
    pushed: list[str] = []
    try:
        for name, path in local.items():
            if not keep:
                entries.append(journal.record("file", path=remote[name]))
            pushed.append(remote[name])
            transport.push(path, remote[name], timeout=timeout)
        if pushed:
            transport.run(["chmod", "755", *pushed], timeout=timeout).check()
        yield remote
    finally:
        if not keep and _remove_pushed(transport, pushed, created):
            for entry in reversed(entries):
                journal.done(entry)


def make_dirs(transport: Transport, workdir: str, timeout: float) -> list[str]:
    """mkdir -p workdir in one round trip; the directories it created, outermost first (remove them with
    remove_dirs), each owned like the directory they were made in."""
    script = (f"w={shlex.quote(workdir.rstrip('/') or '/')}; p=$w; made=\n"
              'while [ -n "$p" ] && [ "$p" != / ] && [ ! -e "$p" ]; do made="$p\n$made"; p=${p%/*}; done\n'
              '[ -n "$p" ] || p=/\n'
              'mkdir -p -- "$w" || exit 1\n'
              'if [ -n "$made" ] && [ "$(id -u)" = 0 ]; then\n'
              '  o=$(stat -c %u:%g "$p") && printf "%s" "$made" | while read -r d; do chown "$o" "$d"; done\n'
              'fi\n'
              'printf "%s" "$made"')
    done = transport.run(["sh", "-c", script], timeout=timeout).check()
    return [line for line in done.text.splitlines() if line]


def remove_dirs(transport: Transport, created_dirs: Sequence[str]) -> None:
    """Remove the directories make_dirs created, innermost first, those that are empty (best effort)."""
    _remove_pushed(transport, [], created_dirs)


def _remove_pushed(transport: Transport, paths: Sequence[str], created_dirs: Sequence[str]) -> bool:
    """True when the files are gone. Best effort with a short timeout: on a device that went away this must not
    hang or hide the real error (the undo journal keeps them for the next run)."""
    script = "rm -f -- " + " ".join(shlex.quote(p) for p in paths) if paths else "true"
    for directory in reversed(created_dirs):  # innermost first; one still in use by another run stays
        script += f"; rmdir -- {shlex.quote(directory)} 2>/dev/null"
    script += "; true"
    try:
        done = transport.run(["sh", "-c", script], timeout=15)
        if done.returncode != 0:
            log.warning("could not remove the reference binaries from %s: %s", transport.name,
                        done.stderr.decode(errors="replace").strip())
        return done.returncode == 0
    except TargetError as e:
        log.warning("could not remove the reference binaries from %s: %s", transport.name, e)
        return False
