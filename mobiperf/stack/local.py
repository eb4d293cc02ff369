"""The emulated phone storage stack: a loop device over an image file, a filesystem, and optional FUSE layers.

A stack is described by a string, bottom layer first:

    ext4                              the data partition alone
    raw                               no filesystem: the bare loop device (the paper's raw-device bars); the
                                      workload gets its path in $MOBIPERF_DEVICE
    ext4:data=journal                 ext4 with another journal mode (ordered, the default; journal; writeback)
    ext4+fuse                         /sdcard over /data/media the legacy Android way (4 KiB FUSE IO unit)
    dir:/data/local/tmp               a directory of the target's own storage, used as it is (phones)
    dir:/data/local/tmp/mp+bfuse      the bundled bFUSE daemon mounted over that directory (mobiperf.stack.device)
    ext4+bfuse:io_unit=512k           the Buffered FUSE daemon with options
    xfs+fjord:preset=fjord-ram,whitelist=cache

The first element is a filesystem, the others are layers mounted on top, each a reference daemon from
reference-impl/bin. Filesystem options: `mkfs=ARGS` (extra mkfs arguments, space-separated), `mount=OPTS` (replaces
the Android-like mount options; separate them with `;`, since `,` separates the layer's options), for ext4
`data=ordered|journal|writeback` (the journal mode in the Android-like options), and for ext4 `journal_dev=SIZE`
(the journal on a second loop device, seed 002's external journal). Below the filesystem, a device profile
(`device=emmc-2012`, see mobiperf.stack.devmodel) puts a throttling store between the loop device and the host's disk.

Three more options make the host behave like a phone around the stack (mobiperf.stack.phone bundles them):
`dirty_limit` bounds the dirty pages of the data device (mobiperf.stack.dirty_limit: a phone's small memory starts
writeback early), `cpu_share` puts the FUSE daemons the stack starts, and the workload
(`StackFacts.wrap_workload`), into a CPU-limited cgroup (mobiperf.stack.cpu_share: a phone's CPU), and `fuse_wakeup_ns`
makes each request reach a FUSE daemon that much later (reference-impl/phonemodel/fuse_wakeup.c: a phone's
per-request wake-up cost, which this host's scheduler does not have).

Set-up mirrors Android: the filesystem is the data partition, mounted at PRIVATE/data; a FUSE layer serves
PRIVATE/data/media/0 at PRIVATE/sdcard. The workload runs in the top layer's directory.

Teardown always runs, newest step first, also when the workload fails or a stop signal comes (it waits until the
teardown is over). Each change is first written to the undo journal, for the next run to undo if mobiperf is killed;
a loop device gets a fresh one's settings before use. Everything goes through a Transport, as for a rooted device.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mobiperf.core import signals
from mobiperf.stack.device_settings import reset_loop_device
from mobiperf.core.errors import MobiperfError, StackError, TargetError, UsageError
from mobiperf.target.transport import BackgroundProcess, Transport
from mobiperf.target.undo_journal import journal_for
from mobiperf.core.units import parse_size

FILESYSTEMS = {
    # name: (mkfs argv prefix, Android-like mount options)
    # lazy_itable_init=0 keeps ext4lazyinit from writing inode tables in the background of a traced run.
    "ext4": (["mkfs.ext4", "-q", "-F", "-b", "4096", "-E", "lazy_itable_init=0,lazy_journal_init=0"],
             "rw,nosuid,nodev,noatime,data=ordered,barrier=1"),
    "xfs": (["mkfs.xfs", "-q", "-f"], "rw,nosuid,nodev,noatime"),
    "btrfs": (["mkfs.btrfs", "-q", "-f"], "rw,nosuid,nodev,noatime"),
    "f2fs": (["mkfs.f2fs", "-q", "-f"], "rw,nosuid,nodev,noatime"),
}
FUSE_LAYERS = {
    # layer name: (daemon in reference-impl/bin, preset used when none is given)
    "fuse": ("bfuse", "legacy"),
    "bfuse": ("bfuse", "bfuse"),
    "fjord": ("fjord", "fjord-ram"),
}
SCHEDULERS = ("none", "mq-deadline", "bfq", "kyber")
RAW = "raw"   # no filesystem: the workload writes the loop device itself
EXT4_DATA_MODES = ("ordered", "journal", "writeback")
REFERENCE_BIN = Path(__file__).resolve().parents[2] / "reference-impl" / "bin"
DEFAULT_IMAGE_SIZE = 1 << 30


@dataclass(frozen=True)
class Layer:
    name: str
    options: dict[str, str] = field(default_factory=dict)

    def spec(self) -> str:
        opts = ",".join(f"{k}={v}" for k, v in self.options.items())
        return f"{self.name}:{opts}" if opts else self.name


@dataclass(frozen=True)
class StackSpec:
    filesystem: Layer
    layers: tuple[Layer, ...] = ()

    def __str__(self) -> str:
        bottom = (f"dir:{self.filesystem.options['path']}" if self.filesystem.name == "dir"
                  else self.filesystem.spec())
        return "+".join([bottom, *(layer.spec() for layer in self.layers)])


def parse_stack_spec(text: str) -> StackSpec:
    """StackSpec of `fs[:k=v,...][+layer[:k=v,...]]...` or `dir:PATH[+layer[:k=v,...]]`; UsageError naming the
    valid choices."""
    if text.startswith("dir:"):
        path, plus, upper = text[4:].partition("+")
        if not path.startswith("/"):
            raise UsageError(f"stack {text!r}: dir: takes an absolute path on the target (e.g. dir:/data/local/tmp)")
        layers = [_parse_layer(p.strip(), text) for p in upper.split("+")] if plus else []
        _check_fuse_layers(layers, text)
        return StackSpec(Layer("dir", {"path": path}), tuple(layers))
    parts = [p.strip() for p in text.split("+")]
    if not parts or not parts[0]:
        raise UsageError(f"empty stack spec {text!r} (examples: ext4, ext4+fuse, ext4+bfuse:io_unit=512k)")
    layers = [_parse_layer(p, text) for p in parts]
    fs, upper = layers[0], layers[1:]
    if fs.name == RAW:
        if upper or fs.options:
            raise UsageError(f"stack {text!r}: raw is the bare device: no options, no layers over it")
        return StackSpec(fs)
    if fs.name not in FILESYSTEMS:
        raise UsageError(f"stack {text!r}: {fs.name!r} is not a filesystem; choose one of "
                         f"{', '.join(FILESYSTEMS)} (or raw, the bare device)")
    if "data" in fs.options and (fs.name != "ext4" or fs.options["data"] not in EXT4_DATA_MODES):
        raise UsageError(f"stack {text!r}: data= is ext4's journal mode: {', '.join(EXT4_DATA_MODES)}")
    _check_fuse_layers(upper, text)
    return StackSpec(fs, tuple(upper))


def _check_fuse_layers(layers: list[Layer], whole: str) -> None:
    for layer in layers:
        if layer.name not in FUSE_LAYERS:
            raise UsageError(f"stack {whole!r}: unknown layer {layer.name!r}; layers are {', '.join(FUSE_LAYERS)}")
    if len(layers) > 1:
        raise UsageError(f"stack {whole!r}: at most one FUSE layer over the filesystem")


def _parse_layer(part: str, whole: str) -> Layer:
    name, _, opts = part.partition(":")
    options: dict[str, str] = {}
    for item in filter(None, opts.split(",")):
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise UsageError(f"stack {whole!r}: option {item!r} of {name!r} is not key=value")
        options[key.strip()] = value.strip()
    return Layer(name.strip(), options)


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


class LocalStack:
    """Builds the stack on entry and always takes it down on exit.

    counters_dir receives each FUSE daemon's counters JSON (the daemons write it at unmount).
    """

    def __init__(self, transport: Transport, spec: StackSpec, *, scheduler: str | None = None,
                 image_size: int = DEFAULT_IMAGE_SIZE, workroot: str = "/var/tmp/mobiperf",
                 counters_dir: Path | None = None, timeout_s: float = 120.0, device: str | None = None,
                 dirty_limit: int | None = None, cpu_share: str = "host", fuse_wakeup_ns: int = 0):
        if scheduler is not None and scheduler not in SCHEDULERS:
            raise UsageError(f"unknown IO scheduler {scheduler!r}; choose one of {', '.join(SCHEDULERS)}")
        self.transport = transport
        self.spec = spec
        self.scheduler = scheduler
        self.image_size = image_size
        self.private = f"{workroot}/stack-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.counters_dir = counters_dir
        self.timeout_s = timeout_s
        self.device = device
        self.dirty_limit = dirty_limit
        self.cpu_share = cpu_share
        self.fuse_wakeup_ns = fuse_wakeup_ns
        self._cpu = None
        self._undo: list[tuple] = []   # (kind, arg[, undo journal entry]), newest last
        self._journal = journal_for(transport)
        self.device_reset: dict[str, dict[str, str]] = {}
        self.facts: StackFacts | None = None

    # --- set-up ---

    def __enter__(self) -> StackFacts:
        try:
            self.facts = self._build()
            self.facts.device_reset = self.device_reset
        except BaseException:
            self._teardown()
            raise
        return self.facts

    def __exit__(self, *exc) -> None:
        self._teardown()

    def _build(self) -> StackFacts:
        self._require_root()
        fs = self.spec.filesystem
        if fs.name == RAW:
            return self._build_raw()
        mkfs, mount_opts = FILESYSTEMS[fs.name]
        if not self.transport.which(mkfs[0]):
            raise StackError(f"{mkfs[0]} is not installed; it makes the {fs.name} data partition "
                             f"(Debian: {fs.name}progs / e2fsprogs)")
        self._make_private_dir()
        image = self._make_image("userdata.img", self.image_size)
        device = self._attach_loop(image)
        scheduler = self._set_scheduler(device)
        major, minor = self._dev_numbers(device)
        if self.dirty_limit is not None:
            self._limit_dirty_pages(f"{major}:{minor}")
        cpu_files = self._start_cpu_share()
        extra_mkfs = [o for o in fs.options.get("mkfs", "").split() if o]
        journal = None
        if "journal_dev" in fs.options:
            journal = self._make_journal_device(fs)
            extra_mkfs += ["-J", f"device={journal['device']}"]
        self._sh(mkfs + extra_mkfs + [device], timeout=self.timeout_s)
        data = f"{self.private}/data"
        self._sh(["mkdir", "-p", data])
        opts = fs.options.get("mount", mount_opts).replace(";", ",")
        if "data" in fs.options:
            opts = ",".join([o for o in opts.split(",") if not o.startswith("data=")] + [f"data={fs.options['data']}"])
        if journal:
            opts += f",journal_path={journal['device']}"
        with signals.shielded():  # a change and its undo step are made as one: a stop signal waits for both
            entry = self._journal.record("mount", path=data)
            if self._sh(["mount", "-t", fs.name, "-o", opts, device, data], check=False).returncode != 0:
                self._journal.done(entry)
                raise StackError(f"cannot mount {fs.name} on {device}: does this kernel support {fs.name}?")
            self._undo.append(("umount", data, entry))
        workdir, layers = data, []
        for layer in self.spec.layers:
            workdir, facts = self._mount_fuse_layer(layer, data)
            layers.append(facts)
        return StackFacts(spec=str(self.spec), workdir=workdir, device=device, dev_major=major, dev_minor=minor,
                          filesystem=fs.name, mount_options=opts, scheduler=scheduler,
                          image_size_bytes=self.image_size, layers=layers, journal_device=journal,
                          device_profile=self.device, dirty_limit_bytes=self.dirty_limit,
                          cpu_share=self.cpu_share, cpu_procs_files=cpu_files, fuse_wakeup_ns=self.fuse_wakeup_ns)

    def _build_raw(self) -> StackFacts:
        """The bare loop device on the device model: the workload writes $MOBIPERF_DEVICE (its path)."""
        self._make_private_dir()
        device = self._attach_loop(self._make_image("userdata.img", self.image_size))
        scheduler = self._set_scheduler(device)
        major, minor = self._dev_numbers(device)
        if self.dirty_limit is not None:
            self._limit_dirty_pages(f"{major}:{minor}")
        cpu_files = self._start_cpu_share()
        workdir = f"{self.private}/raw"
        self._sh(["mkdir", "-p", workdir])
        return StackFacts(spec=str(self.spec), workdir=workdir, device=device, dev_major=major, dev_minor=minor,
                          filesystem=RAW, mount_options="", scheduler=scheduler, image_size_bytes=self.image_size,
                          device_profile=self.device, dirty_limit_bytes=self.dirty_limit, cpu_share=self.cpu_share,
                          cpu_procs_files=cpu_files, fuse_wakeup_ns=self.fuse_wakeup_ns)

    def _make_private_dir(self) -> None:
        self._undo.append(("rmdir", self.private, self._journal.record("dir", path=self.private)))
        self._sh(["mkdir", "-p", self.private])

    def _limit_dirty_pages(self, major_minor: str) -> None:
        """The phone's memory: the data device's own dirty limit, restored before the loop device is detached."""
        from mobiperf.stack.dirty_limit import DirtyLimit

        limit = DirtyLimit(self.transport, major_minor, self.dirty_limit)
        self._undo.append(("dirty", limit))  # first: its exit restores whatever its entry got to change
        limit.__enter__()

    def _start_cpu_share(self) -> list[str]:
        """The phone's CPU: a cgroup for the FUSE daemons and the workload, removed after they have exited."""
        if self.cpu_share == "host":
            return []
        if self.transport.name != "local":
            raise UsageError("a CPU share models a phone's CPU on this host; a remote target has its own CPU")
        from mobiperf.stack.cpu_share import CpuShare

        self._cpu = CpuShare(self.cpu_share, Path(self.private).name)
        self._undo.append(("cpu", self._cpu))  # first: its exit removes whatever groups its entry got to make
        return self._cpu.__enter__().procs_files()

    def _make_image(self, name: str, size: int) -> str:
        """A sparse image file, served through the device model's throttling store when a profile is set."""
        if self.device is None:
            image = f"{self.private}/{name}"
            self._sh(["truncate", "-s", str(size), image])
            return image
        from mobiperf.stack.devmodel import ThrottledStore

        daemon = REFERENCE_BIN / "devmodel"
        if not daemon.exists():
            raise StackError(f"{daemon} is not built; run `make -C reference-impl` (or `make setup`)")
        store = ThrottledStore(Path(self.private) / f"backing-{name}", size, self.device,
                               Path(self.private) / f"devmodel-{name}", daemon)
        with signals.shielded(), self._journal.attempt("mount", path=str(store.mountpoint)) as entry:
            path = store.__enter__()
            self._undo.append(("store", (name, store), entry))
        return str(path)

    def _make_journal_device(self, fs: Layer) -> dict[str, Any]:
        if fs.name != "ext4":
            raise UsageError("journal_dev is an ext4 option (an external journal device)")
        size = parse_size(fs.options["journal_dev"])
        image = self._make_image("journal.img", size)
        device = self._attach_loop(image)
        self._sh(["mkfs.ext4", "-q", "-F", "-O", "journal_dev", "-b", "4096", device], timeout=self.timeout_s)
        major, minor = self._dev_numbers(device)
        return {"device": device, "dev_major": major, "dev_minor": minor, "size_bytes": size}

    def _require_root(self) -> None:
        uid = self.transport.run(["id", "-u"], timeout=10).text.strip()
        if uid != "0":
            raise StackError("the emulated stack needs root: it attaches a loop device, runs mkfs and mounts "
                             "(run mobiperf as root, e.g. with sudo)")

    def _attach_loop(self, image: str) -> str:
        entry = self._journal.record("loop", image=image)
        with signals.shielded():  # the device and its undo step as one
            # direct-io keeps the host's page cache out of the device layer, as on a phone's flash.
            done = self._sh(["losetup", "--find", "--show", "--direct-io=on", image], check=False)
            if done.returncode != 0:
                done = self._sh(["losetup", "--find", "--show", image], check=False)
            if done.returncode != 0:
                self._journal.done(entry)
                raise StackError(f"cannot attach a loop device: {done.stderr.decode(errors='replace').strip()} "
                                 "(is the loop module loaded? are loop devices left?)")
            device = done.text.strip()
            self._undo.append(("losetup", device, entry))
        self._journal.update(entry, device=device)
        found = reset_loop_device(self.transport, device)  # the settings an earlier user left: a fresh one's
        if found:
            self.device_reset[device] = found
        return device

    def _set_scheduler(self, device: str) -> str:
        knob = f"/sys/block/{Path(device).name}/queue/scheduler"
        current = self.transport.read_file(knob).decode()
        active = current[current.index("[") + 1:current.index("]")] if "[" in current else current.strip()
        if self.scheduler and self.scheduler != active:
            available = current.replace("[", "").replace("]", "").split()
            if self.scheduler not in available:
                raise StackError(f"IO scheduler {self.scheduler!r} is not available on {device}; "
                                 f"available: {', '.join(available)}")
            entry = self._journal.record("sysfs", path=knob, old=active)
            self._undo.append(("sysfs", (knob, active), entry))
            self.transport.write_file(knob, self.scheduler.encode())
            return self.scheduler
        return active

    def _dev_numbers(self, device: str) -> tuple[int, int]:
        text = self.transport.read_file(f"/sys/block/{Path(device).name}/dev").decode().strip()
        major, minor = text.split(":")
        return int(major), int(minor)

    def _mount_fuse_layer(self, layer: Layer, data: str) -> tuple[str, dict[str, Any]]:
        daemon_name, default_preset = FUSE_LAYERS[layer.name]
        daemon = REFERENCE_BIN / daemon_name
        if not daemon.exists():
            raise StackError(f"{daemon} is not built; run `make -C reference-impl` (or `make setup`)")
        source, mountpoint = f"{data}/media/0", f"{self.private}/sdcard"
        self._sh(["mkdir", "-p", source, mountpoint])
        options = {"preset": default_preset, **layer.options}
        counters = None
        if self.counters_dir is not None:
            # Absolute: the daemon runs in another working directory (libfuse changes to /).
            counters = str(Path(self.counters_dir).absolute() / f"{layer.name}-counters.json")
            options["counters"] = counters
        argv = [str(daemon), "-f", "-o", ",".join(f"{k}={v}" for k, v in options.items()), source, mountpoint]
        log = (self.counters_dir or Path(self.private)) / f"{layer.name}-daemon.log"
        with signals.shielded(), self._journal.attempt("mount", path=mountpoint) as entry:
            proc = self.transport.start(argv, stdout_path=log, stderr_path=log, env=self._daemon_env(),
                                        death_signal=signal.SIGTERM)  # if we die: SIGTERM, the daemon unmounts
            self._undo.append(("fuse", (mountpoint, proc), entry))
        if self._cpu is not None:
            # Before it mounts: the daemon's threads (and its FUSE INIT) run on the phone's CPU from the start.
            self._cpu.add(proc.pid)
        deadline = time.monotonic() + 15
        while not self._is_mounted(mountpoint):
            if proc.poll() is not None or time.monotonic() > deadline:
                message = log.read_text(errors="replace").strip() if log.exists() else ""
                raise StackError(f"{daemon_name} did not mount {mountpoint}: {message[-400:] or 'timed out'}")
            time.sleep(0.05)
        return mountpoint, {"layer": layer.name, "daemon": daemon_name, "options": options, "source": source,
                            "mountpoint": mountpoint, "counters_path": counters, "daemon_pid": proc.pid,
                            "fuse_fds": fuse_device_fds(self.transport, proc.pid)}

    def _daemon_env(self) -> dict[str, str] | None:
        """The phone's FUSE wake-up latency, preloaded into the daemon (None: the daemon as it is)."""
        if not self.fuse_wakeup_ns:
            return None
        if self.transport.name != "local":
            raise UsageError("fuse_wakeup models a phone's scheduler on this host; a remote target has its own")
        shim = REFERENCE_BIN / "fuse_wakeup.so"
        if not shim.exists():
            raise StackError(f"{shim} is not built; run `make -C reference-impl` (or `make setup`)")
        preload = " ".join(filter(None, [str(shim), os.environ.get("LD_PRELOAD", "")]))
        return {"LD_PRELOAD": preload, "FUSE_WAKEUP_NS": str(self.fuse_wakeup_ns)}

    def _is_mounted(self, path: str) -> bool:
        mounts = self.transport.read_file("/proc/self/mounts").decode(errors="replace")
        return any(line.split()[1] == path for line in mounts.splitlines() if len(line.split()) > 1)

    # --- teardown ---

    def _teardown(self) -> None:
        """Undo every step that succeeded, newest first; keep going past failures and report them at the end.
        Stop signals wait until it is over (a half-removed stack is the worst outcome), and a step that fails
        (a full run directory, a device gone) stays in the undo journal for the next run to finish."""
        failures = []
        with signals.shielded():
            while self._undo:
                kind, arg, *entry = self._undo.pop()
                try:
                    getattr(self, f"_undo_{kind}")(arg)
                except (MobiperfError, OSError) as e:
                    failures.append(f"{kind} {arg}: {e}")
                    continue
                for e in entry:
                    self._journal.done(e)
        if failures:
            raise StackError("stack teardown left things behind: " + "; ".join(failures))

    def _undo_fuse(self, arg: tuple[str, BackgroundProcess]) -> None:
        mountpoint, proc = arg
        if not self._is_mounted(mountpoint):
            proc.kill()  # stopped while it was mounting: SIGTERM (unmounts if it got there), then SIGKILL
        elif self._sh(["fusermount3", "-u", mountpoint], check=False).returncode != 0:
            self._sh(["fusermount3", "-uz", mountpoint], check=False)
        try:
            proc.wait(timeout=30)  # the daemon flushes its buffers and writes its counters on the way out
        except TargetError:
            proc.kill()
        if self._is_mounted(mountpoint):  # a daemon killed before it unmounted leaves its mount behind
            self._sh(["fusermount3", "-uz", mountpoint], check=False)

    def _undo_sysfs(self, arg: tuple[str, str]) -> None:
        self.transport.write_file(arg[0], arg[1].encode())  # (knob, old value)

    def _undo_dirty(self, limit) -> None:
        limit.__exit__(None, None, None)

    def _undo_cpu(self, share) -> None:
        """After the daemons have exited (newer undo steps): their CPU time is in, and the group is empty."""
        facts = share.facts() if self.counters_dir is not None else None
        share.__exit__(None, None, None)
        if facts is not None:
            numbers = {k: v for k, v in facts.items() if isinstance(v, (int, float))}
            if "usage_ns" in numbers:
                numbers["usage_s"] = numbers.pop("usage_ns") / 1e9
            self._write_counters("cpu-counters.json",
                                 {"share": facts["share"], "cgroup": facts["cgroup"], "counters": numbers})

    def _undo_umount(self, path: str) -> None:
        for attempt in range(20):
            if self._sh(["umount", path], check=False).returncode == 0:
                return
            time.sleep(0.1 * (attempt + 1))  # a daemon or the workload may still hold a file open
        self._sh(["umount", "-l", path])

    def _undo_store(self, arg) -> None:
        name, store = arg
        store.__exit__(None, None, None)
        if self.counters_dir is not None:
            self._write_counters(f"device-counters-{Path(name).stem}.json", store.counters())

    def _write_counters(self, name: str, data: dict) -> None:
        """Into the run directory; a full one loses them (the run says which it lacks), but not the undo step."""
        with contextlib.suppress(OSError):
            (self.counters_dir / name).write_text(json.dumps(data, indent=2))

    def _undo_losetup(self, device: str) -> None:
        self._sh(["losetup", "-d", device])

    def _undo_rmdir(self, path: str) -> None:
        self._sh(["rm", "-rf", "--one-file-system", path])

    def _sh(self, argv: list[str], *, check: bool = True, timeout: float = 60.0):
        done = self.transport.run(argv, timeout=timeout)
        return done.check() if check else done


def fuse_device_fds(transport: Transport, pid: int) -> list[int]:
    """The descriptors a FUSE daemon holds on /dev/fuse: its reads and writes there are the FUSE protocol itself,
    not calls into the file system under it."""
    done = transport.run(["ls", "-l", f"/proc/{pid}/fd"], timeout=10)
    fds = []
    for line in done.text.splitlines() if done.returncode == 0 else []:
        name, arrow, target = line.rpartition(" -> ")
        if arrow and target.strip() == "/dev/fuse" and name.split()[-1].isdigit():
            fds.append(int(name.split()[-1]))
    return fds


def make_stack(transport: Transport, spec: StackSpec, **options):
    """The stack a spec describes: an existing directory (with a bundled FUSE daemon over it), or an emulated stack
    built on loop devices."""
    if spec.filesystem.name == "dir":
        from mobiperf.stack.device import DeviceFuseStack, DirectoryStack

        return (DeviceFuseStack if spec.layers else DirectoryStack)(transport, spec, **options)
    return LocalStack(transport, spec, **options)


def parse_image_size(text: str) -> int:
    size = parse_size(text)
    if size < 64 << 20:
        raise UsageError(f"image size {text} is too small; the stack needs at least 64M")
    return size
