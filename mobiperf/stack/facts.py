"""What a stack that is up tells the run: where to run, which devices to trace, what its layers are."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mobiperf.target.transport import Transport


@dataclass
class StackFacts:
    """What a run needs to know about a stack that is up: where to run, which device to trace."""

    spec: str
    workdir: str
    device: str
    dev_major: int
    dev_minor: int
    filesystem: str
    mount_options: str
    scheduler: str
    image_size_bytes: int
    layers: list[dict[str, Any]] = field(default_factory=list)
    journal_device: dict[str, Any] | None = None
    device_profile: str | None = None
    dirty_limit_bytes: int | None = None      # the data device's dirty page limit (None: the host's thresholds)
    cpu_share: str = "host"                   # the phone CPU model of the daemons and the workload
    cpu_procs_files: list[str] = field(default_factory=list)   # cgroup.procs files the workload joins
    fuse_wakeup_ns: int = 0                   # a phone's FUSE request wake-up latency, added in the daemons
    extra_devices: list[tuple[int, int]] = field(default_factory=list)  # e.g. the disk under a partition
    device_reset: dict[str, dict[str, str]] = field(default_factory=dict)  # settings an earlier user left, reset
    # FUSE daemons that are not the stack's own but serve its directory (a phone's /sdcard): pid, comm, fuse_fds,
    # mountpoint (fuse_servers below); traced like the stack's daemons
    fuse_servers: list[dict[str, Any]] = field(default_factory=list)

    @property
    def fuse_daemons(self) -> list[dict[str, Any]]:
        """Every FUSE daemon of the stack as a layer entry (layer, daemon_pid, fuse_fds, mountpoint): the stack's
        own layers' and the FUSE servers of its directory."""
        return [layer for layer in self.layers if layer.get("daemon_pid")] + [
            {"layer": s["comm"], "daemon": s["comm"], "daemon_pid": s["pid"], "fuse_fds": s["fuse_fds"],
             "mountpoint": s["mountpoint"]} for s in self.fuse_servers]

    @property
    def traced_devices(self) -> list[tuple[int, int]]:
        """The block devices whose events belong to this stack: the data device, an external journal, and the
        devices under the data device (a partition's disk, device-mapper slaves)."""
        devs = [(self.dev_major, self.dev_minor), *self.extra_devices]
        if self.journal_device:
            devs.append((self.journal_device["dev_major"], self.journal_device["dev_minor"]))
        return devs

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def wrap_workload(self, argv: list[str]) -> list[str]:
        """argv, made to join the stack's CPU share before it execs (so every thread and child is limited)."""
        if not self.cpu_procs_files:
            return list(argv)
        joins = "; ".join(f'echo $$ > "{path}"' for path in self.cpu_procs_files)
        return ["sh", "-c", f'{joins} && exec "$@"', "mobiperf-cpu-share", *argv]


def fuse_device_fds(transport: Transport, pid: int) -> list[int]:
    """The descriptors a FUSE daemon holds on /dev/fuse: its reads and writes there are the FUSE protocol itself,
    not calls into the file system under it."""
    return daemon_transport_fds(transport, pid)["fuse"]


def daemon_transport_fds(transport: Transport, pid: int) -> dict[str, list[int]]:
    """A FUSE daemon's descriptors that carry the FUSE protocol rather than reach the file system under it: "fuse"
    on /dev/fuse (a cloned one per worker thread too), "pipe" its pipes (libfuse splices each request from
    /dev/fuse into a pipe of the worker thread's and reads its header there; bfuse's request log tees it into a
    pipe of its own). Listed once the workload has run, the worker threads' are there too."""
    done = transport.run(["ls", "-l", f"/proc/{pid}/fd"], timeout=10)
    fds: dict[str, list[int]] = {"fuse": [], "pipe": []}
    for line in done.text.splitlines() if done.returncode == 0 else []:
        name, arrow, target = line.rpartition(" -> ")
        if not arrow or not name.split() or not name.split()[-1].isdigit():
            continue
        target = target.strip()
        kind = "fuse" if target == "/dev/fuse" else "pipe" if target.startswith("pipe:") else None
        if kind:
            fds[kind].append(int(name.split()[-1]))
    return fds


def fuse_servers(transport: Transport, mountpoint: str) -> list[dict[str, Any]]:
    """The processes that may serve a FUSE mount: those holding /dev/fuse whose command line names the mountpoint
    (a libfuse daemon's does), else every holder (Android's MediaProvider gets its descriptor from vold and names
    no mountpoint). Which of them answers the workload's requests the trace says (collectors/parse/
    fuse_dev_calls.py: the wake-ups of the replies)."""
    script = ('for f in /proc/[0-9]*/fd/*; do [ "$(readlink "$f" 2>/dev/null)" = /dev/fuse ] || continue; '
              'p=${f#/proc/}; p=${p%%/*}; echo "$p ${f##*/} $(cat /proc/$p/comm 2>/dev/null) '
              '@@ $(tr "\\0" " " < /proc/$p/cmdline 2>/dev/null)"; done')
    done = transport.run(["sh", "-c", script], timeout=30)
    found: dict[int, dict[str, Any]] = {}
    for line in done.text.splitlines():
        head, _, cmdline = line.partition(" @@ ")
        words = head.split()
        if len(words) < 2 or not words[0].isdigit() or not words[1].isdigit():
            continue
        server = found.setdefault(int(words[0]), {"pid": int(words[0]), "comm": " ".join(words[2:]) or "?",
                                                  "fuse_fds": [], "mountpoint": mountpoint,
                                                  "names_mount": f" {mountpoint}" in f" {cmdline} "})
        server["fuse_fds"].append(int(words[1]))
    servers = list(found.values())
    named = [s for s in servers if s.pop("names_mount")]
    return named or servers
