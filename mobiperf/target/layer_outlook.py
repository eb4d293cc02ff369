"""What a run on a target can trace at each layer, from what the probe found: one line per layer for `mobiperf
probe`, so a phone's kernel that lacks an event says so before a run comes back without that layer.

A phone's kernel is not the host's: Android's GKI builds may lack `syscalls:*` while `raw_syscalls` exist; FUSE
events are missing before 6.x and on Android kernels (vendor hooks tracefs does not export); f2fs rather than ext4
holds /data; perfetto may own tracing. Each line names the events (or their absence) and what follows from it.
"""

from __future__ import annotations

from typing import Any


def _count(events: dict[str, list[str]], system: str) -> int:
    return len(events.get(system) or [])


def layer_outlook(caps: dict[str, Any], android: dict[str, Any] | None = None) -> list[tuple[str, str]]:
    """[(layer, line)] for the call, FUSE, file system, block and recorder layers of a run on this target."""
    events = caps.get("events") or {}
    lines = [("call", _call_line(events, caps.get("strace"))), ("FUSE", _fuse_line(events, caps, android))]
    fs = [f"{name} ({_count(events, name)})" for name in ("ext4", "jbd2", "f2fs") if _count(events, name)]
    data = (android or {}).get("data_fstype")
    lines.append(("fs", ("events of " + ", ".join(fs) if fs else "no file system events (ext4, jbd2, f2fs)")
                  + (f"; /data is {data}" + ("" if _count(events, data) else ", whose events this kernel lacks")
                     if data in ("ext4", "f2fs") else "")))
    block = _count(events, "block")
    lines.append(("block", f"block events ({block}): each request from queue to completion" if block else
                  "no block events: no block layer, no device time"))
    perfetto = caps.get("perfetto")
    if caps.get("target") == "local":
        lines.append(("recorder", "tracefs (a host records through tracefs)"))
    else:
        lines.append(("recorder", f"perfetto ({perfetto}): runs record through it (--recorder auto)" if perfetto
                      else "tracefs: no perfetto on this device"))
    return lines


def _call_line(events: dict[str, list[str]], strace: str | None) -> str:
    if _count(events, "syscalls"):
        return f"syscalls events ({_count(events, 'syscalls')}): each call of the workload with its arguments"
    if _count(events, "raw_syscalls"):
        return ("no syscalls events (as on Android's GKI builds); raw_syscalls: each call by its number, "
                "arguments as raw registers")
    return ("no syscall events: the call layer comes only from strace" if strace else
            "no syscall events and no strace: no call layer")


def _fuse_line(events: dict[str, list[str]], caps: dict[str, Any], android: dict[str, Any] | None) -> str:
    sdcard = (android or {}).get("sdcard_implementation")
    served = f"; /sdcard is served by {sdcard}" if sdcard else ""
    if not caps.get("fuse"):
        return "no /dev/fuse: no FUSE layer" + served
    if _count(events, "fuse"):
        return f"fuse events ({', '.join(events['fuse'])}): each request from send to reply" + served
    return "no fuse events in this kernel: a FUSE layer's requests cannot come from kernel events" + served
