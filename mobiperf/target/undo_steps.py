"""How each kind of change in an undo journal is found still in place, and undone, on any target.

Everything goes through a Transport, so the same steps clean the host and a phone. Each kind has two functions:
`still_there(transport, entry)` says what of the change is still in place (None when nothing is: it was undone,
or it never happened because the owner died between writing the entry and making the change), and
`undo(transport, entry)` undoes it, raising UndoError when it cannot. Both are safe to repeat.

The helpers of a dead owner are ended first (`owned_processes`, `end_owned_processes`): a workload or a FUSE daemon
still running keeps mounts busy. Locally they are found by the owner token in /proc/*/environ; on a device by the
same token (grep over /proc/*/environ) and by the pid files its background commands left.
"""

from __future__ import annotations

import shlex
import time
from pathlib import Path
from typing import Any, Callable

from mobiperf.core.errors import MobiperfError
from mobiperf.core.lifeline import OWNER_ENV, kill_owned, owned_processes as local_owned_processes
from mobiperf.core.mounts import parse_mountinfo

RETRY_S = 10.0


class UndoError(MobiperfError):
    """A change could not be undone; the journal keeps it for the next attempt."""


Entry = dict[str, Any]


def describe(entry: Entry) -> str:
    """One line naming a change, e.g. `mount /var/tmp/mobiperf/stack-1-ab/data`."""
    kind = entry["kind"]
    if kind == "loop":
        return f"loop device {entry.get('device') or '?'} over {entry['image']}"
    if kind == "sysfs":
        return f"{entry['path']} (was {entry['old']!r})"
    if kind == "bdi":
        return f"{entry['path']} dirty limits (were {', '.join(f'{k}={v}' for k, v in entry['old'].items())})"
    if kind == "blktrace":
        return f"block trace of {entry['device']}"
    if kind == "process":
        return f"process {entry.get('pid') or '?'} ({entry['name']})"
    if kind == "adb_connection":
        return f"adb connection {entry['serial']} (adb server port {entry['server_port']})"
    return f"{kind.replace('_', ' ')} {entry['path']}"


def still_there(transport, entry: Entry) -> str | None:
    return STEPS[entry["kind"]][0](transport, entry)


def undo(transport, entry: Entry) -> None:
    STEPS[entry["kind"]][1](transport, entry)


# --- processes ---

def owned_processes(transport, token: str, pid_dir: str | None = None) -> dict[int, str]:
    """{pid: name} of the live processes carrying the owner token on the target."""
    if transport.is_local:
        return local_owned_processes(token)
    script = (f"grep -lsF {shlex.quote(f'{OWNER_ENV}={token}')} /proc/[0-9]*/environ 2>/dev/null | "
              "while read -r f; do d=${f%/environ}; echo \"${d#/proc/} $(cat $d/comm 2>/dev/null)\"; done; true")
    found = {}
    for line in transport.run(["sh", "-c", script], timeout=60).text.splitlines():
        pid, _, name = line.partition(" ")
        if pid.isdigit():
            found[int(pid)] = name or "?"
    return found


def end_owned_processes(transport, token: str, pid_dir: str | None = None) -> dict[int, str]:
    """SIGKILL every process carrying the token (and, on a device, forget its pid files); returns those ended."""
    if transport.is_local:
        return kill_owned(token)
    killed: dict[int, str] = {}
    deadline = time.monotonic() + RETRY_S
    while time.monotonic() < deadline:
        found = owned_processes(transport, token)
        if not found:
            break
        killed.update(found)
        transport.run(["sh", "-c", "kill -9 " + " ".join(map(str, found)) + " 2>/dev/null; true"], timeout=30)
        time.sleep(0.1)
    if pid_dir and pid_dir.endswith(".pids"):  # (a journal's word, but only ever a pid directory)
        transport.run(["rm", "-rf", pid_dir], timeout=30)
    return killed


def pid_files(transport, pid_dir: str | None) -> list[str]:
    """The pid files a device's background commands left (`<workload pid> <status shell pid>` each)."""
    if not pid_dir:
        return []
    done = transport.run(["sh", "-c", f"cat {shlex.quote(pid_dir)}/* 2>/dev/null; true"], timeout=30)
    return [line.strip() for line in done.text.splitlines() if line.strip()]


# --- the kinds ---

def _mounts(transport) -> list[str]:
    text = transport.read_file("/proc/self/mountinfo").decode(errors="replace")
    return [m.mountpoint for m in parse_mountinfo(text)]


def _mount_there(transport, entry: Entry) -> str | None:
    return "mounted" if entry["path"] in _mounts(transport) else None


def _umount(transport, entry: Entry) -> None:
    path = entry["path"]
    deadline = time.monotonic() + RETRY_S
    while path in _mounts(transport):
        if transport.run(["umount", path], timeout=60).returncode == 0:
            continue
        if time.monotonic() > deadline:
            done = transport.run(["umount", "-l", path], timeout=60)  # detach it: the last user releases it
            if done.returncode != 0:
                raise UndoError(f"cannot unmount {path}: {done.stderr.decode(errors='replace').strip()}")
            return
        time.sleep(0.2)


def _loop_devices(transport, image: str) -> list[str]:
    """The loop devices whose backing file is image (also when it was deleted or its mount went away)."""
    script = ("for f in /sys/block/loop*/loop/backing_file; do [ -r \"$f\" ] && "
              "printf '%s %s\\n' \"$(basename $(dirname $(dirname $f)))\" \"$(cat $f)\"; done; true")
    found = []
    for line in transport.run(["sh", "-c", script], timeout=30).text.splitlines():
        name, _, backing = line.partition(" ")
        if backing == image or backing.startswith(image + " "):  # "<path> (deleted)"
            found.append(f"/dev/{name}")
    return found


def _loop_there(transport, entry: Entry) -> str | None:
    devices = _loop_devices(transport, entry["image"])
    return f"attached as {', '.join(devices)}" if devices else None


def _detach_loop(transport, entry: Entry) -> None:
    for device in _loop_devices(transport, entry["image"]):
        done = transport.run(["losetup", "-d", device], timeout=60)
        if done.returncode != 0 and _loop_devices(transport, entry["image"]):
            raise UndoError(f"cannot detach {device}: {done.stderr.decode(errors='replace').strip()}")


def _read(transport, path: str) -> str | None:
    try:
        return transport.read_file(path).decode(errors="replace").strip()
    except MobiperfError:
        return None


def active_choice(text: str) -> str:
    """`none [bfq] kyber` -> `bfq`: the chosen value of a sysfs or tracefs choice file; other values as they are."""
    return text[text.index("[") + 1:text.index("]")] if "[" in text and "]" in text else text.strip()


def _sysfs_there(transport, entry: Entry) -> str | None:
    now = _read(transport, entry["path"])
    if now is None:
        return None  # the knob is gone with its device: nothing to restore
    return f"now {active_choice(now)!r}" if active_choice(now) != active_choice(entry["old"]) else None


def _restore_sysfs(transport, entry: Entry) -> None:
    _write(transport, entry["path"], active_choice(entry["old"]))


def _write(transport, path: str, value: str) -> None:
    try:
        transport.write_file(path, value.encode())
    except MobiperfError as e:
        raise UndoError(f"cannot restore {path} to {value!r}: {e}") from None


def _bdi_there(transport, entry: Entry) -> str | None:
    changed = [f"{knob}={now}" for knob, old in entry["old"].items()
               if (now := _read(transport, f"{entry['path']}/{knob}")) is not None and now != old]
    return f"now {', '.join(changed)}" if changed else None


def _restore_bdi(transport, entry: Entry) -> None:
    """min to 0 first (always valid), then max, then min: min may never exceed max on the way."""
    old = entry["old"]
    for knob, value in (("min_ratio_fine", "0"), ("max_ratio_fine", old.get("max_ratio_fine")),
                        ("min_ratio_fine", old.get("min_ratio_fine")), ("strict_limit", old.get("strict_limit"))):
        if value is not None and _read(transport, f"{entry['path']}/{knob}") is not None:
            _write(transport, f"{entry['path']}/{knob}", value)


def _exists(transport, entry: Entry) -> str | None:
    return "exists" if transport.exists(entry["path"]) else None


def _remove_dir(transport, entry: Entry) -> None:
    path = entry["path"].rstrip("/")
    inside = [m for m in _mounts(transport) if m == path or m.startswith(path + "/")]
    if inside:
        raise UndoError(f"not removing {path}: {', '.join(inside)} is still mounted there")
    if entry.get("only_if_empty"):  # a shared directory we happened to create: others may have put files there
        transport.run(["rmdir", "--", path], timeout=60)
        return
    done = transport.run(["rm", "-rf", "--", path], timeout=300)
    if done.returncode != 0:
        raise UndoError(f"cannot remove {path}: {done.stderr.decode(errors='replace').strip()}")


def _remove_file(transport, entry: Entry) -> None:
    transport.run(["rm", "-f", "--", entry["path"]], timeout=60)


def _rmdir_retrying(transport, entry: Entry) -> None:
    """A cgroup whose last member is still exiting, a tracefs instance whose reader still holds it: EBUSY."""
    deadline = time.monotonic() + RETRY_S
    while transport.exists(entry["path"]):
        done = transport.run(["rmdir", entry["path"]], timeout=30)
        if done.returncode == 0:
            return
        if time.monotonic() > deadline:
            raise UndoError(f"cannot remove {entry['path']}: {done.stderr.decode(errors='replace').strip()}")
        time.sleep(0.2)


def _blktrace_there(transport, entry: Entry) -> str | None:
    return "set up" if transport.exists(f"/sys/kernel/debug/block/{Path(entry['device']).name}/trace0") else None


def _teardown_blktrace(transport, entry: Entry) -> None:
    transport.run(["blktrace", "-k", "-d", entry["device"]], timeout=60)


def _process_start(transport, pid: int) -> int | None:
    """The start time (clock ticks after boot) of a live pid, None when there is no such process (or only its
    zombie, which nothing has reaped yet)."""
    stat = _read(transport, f"/proc/{pid}/stat")
    try:
        fields = stat.rsplit(")", 1)[1].split() if stat else []
        return int(fields[19]) if fields and fields[0] != "Z" else None
    except (IndexError, ValueError):
        return None


def _process_there(transport, entry: Entry) -> str | None:
    pid = entry.get("pid")
    if not pid or _process_start(transport, pid) != entry.get("start"):
        return None    # never started, gone, or its pid now someone else's
    return "running"


def _end_process(transport, entry: Entry) -> None:
    """SIGTERM, then SIGKILL after a grace period; checked by pid and start time before each signal."""
    for sig, patience in (("TERM", RETRY_S), ("KILL", RETRY_S)):
        if _process_there(transport, entry) is None:
            return
        transport.run(["kill", f"-{sig}", str(entry["pid"])], timeout=30)
        deadline = time.monotonic() + patience
        while time.monotonic() < deadline and _process_there(transport, entry) is not None:
            time.sleep(0.1)
    if _process_there(transport, entry) is not None:
        raise UndoError(f"process {entry['pid']} ({entry['name']}) survives SIGKILL")


def _adb_server_listens(port: int) -> bool:
    """Whether an adb server answers on this host's port: asking `adb` otherwise would start one."""
    import socket

    try:
        with socket.create_connection(("127.0.0.1", int(port)), timeout=2):
            return True
    except OSError:
        return False


def _adb(transport, entry: Entry, *args: str):
    return transport.run(["adb", "-P", str(entry["server_port"]), *args], timeout=30)


def _adb_connection_there(transport, entry: Entry) -> str | None:
    if not _adb_server_listens(entry["server_port"]):
        return None    # the server is gone, and its connections with it
    for line in _adb(transport, entry, "devices").text.splitlines()[1:]:
        serial, _, state = line.partition("\t")
        if serial == entry["serial"]:
            return f"listed ({state.strip() or '?'})"
    return None


def _adb_disconnect(transport, entry: Entry) -> None:
    done = _adb(transport, entry, "disconnect", entry["serial"])
    if _adb_connection_there(transport, entry) is not None:
        raise UndoError(f"adb disconnect {entry['serial']}: {done.text.strip()}")


STEPS: dict[str, tuple[Callable[[Any, Entry], str | None], Callable[[Any, Entry], None]]] = {
    "dir": (_exists, _remove_dir),
    "file": (_exists, _remove_file),
    "mount": (_mount_there, _umount),
    "loop": (_loop_there, _detach_loop),
    "sysfs": (_sysfs_there, _restore_sysfs),
    "bdi": (_bdi_there, _restore_bdi),
    "cgroup": (_exists, _rmdir_retrying),
    "tracefs_instance": (_exists, _rmdir_retrying),
    "blktrace": (_blktrace_there, _teardown_blktrace),
    "process": (_process_there, _end_process),
    "adb_connection": (_adb_connection_there, _adb_disconnect),
}
