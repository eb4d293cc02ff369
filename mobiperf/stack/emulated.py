"""The emulated phone storage stack: a loop device over an image file, a filesystem, and optional FUSE layers
(the stack string is mobiperf.stack.spec's; how it is built beyond it, StackOptions).

Below the filesystem, a device profile (StackOptions.device, see mobiperf.stack.device_model) puts a throttling store
between the loop device and the host's disk. Three more options make the host behave like a phone around the stack
(mobiperf.stack.phone bundles them): `dirty_limit` bounds the dirty pages of the data device
(mobiperf.stack.dirty_limit: a phone's small memory starts writeback early), `cpu_share` puts the FUSE daemons the
stack starts, and the workload (`StackFacts.wrap_workload`), into a CPU-limited cgroup (mobiperf.stack.cpu_share: a
phone's CPU), and `fuse_wakeup_ns` makes each request reach a FUSE daemon that much later
(reference-impl/phonemodel/fuse_wakeup.c: a phone's per-request wake-up cost, which this host's scheduler does not
have).

Set-up mirrors Android: the filesystem is the data partition, mounted at PRIVATE/data; a FUSE layer serves
PRIVATE/data/media/0 at PRIVATE/sdcard. The workload runs in the top layer's directory.

Teardown always runs, newest step first, also when the workload fails or a stop signal comes (it waits until the
teardown is over): every change is pushed as an undo step (mobiperf.stack.undo) right after it is made, and first
written to the undo journal, for the next run to undo if mobiperf is killed; a loop device gets a fresh one's
settings before use. Everything goes through the target's transport, as for a rooted device.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
import uuid
from pathlib import Path
from typing import Any

from mobiperf.core import signals
from mobiperf.core.binaries import reference_bin_dir
from mobiperf.core.errors import StackError, TargetError, UsageError
from mobiperf.core.mounts import is_mounted, parse_proc_mounts
from mobiperf.core.units import parse_size
from mobiperf.core.vocabulary import FUSE_LAYERS, RAW
from mobiperf.stack.queue_settings import reset_loop_device
from mobiperf.stack.facts import StackFacts, fuse_device_fds
from mobiperf.stack.options import StackOptions
from mobiperf.stack.spec import MKFS, Layer, StackSpec
from mobiperf.stack.undo import Teardown
from mobiperf.target.target import Target
from mobiperf.target.transport import BackgroundProcess
from mobiperf.target.undo_journal import journal_for


class EmulatedStack:
    """Builds the stack on entry and always takes it down on exit.

    options.counters_dir receives each FUSE daemon's counters JSON (the daemons write it at unmount), the device
    model's and the CPU share's.
    """

    def __init__(self, target: Target, spec: StackSpec, options: StackOptions = StackOptions()):
        self.target = target
        self.transport = target.transport
        self.spec = spec
        self.options = options
        self.private = f"{options.workroot}/stack-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._cpu = None      # the CPU share, while the stack is up
        self._dirty = None    # the dirty limit, while the stack is up
        self._journal = journal_for(self.transport)
        self._teardown_steps = Teardown(self._journal)
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
        if not self.transport.is_root:
            raise StackError("the emulated stack needs root: it attaches a loop device, runs mkfs and mounts "
                             "(run mobiperf as root, e.g. with sudo)")
        fs = self.spec.filesystem
        if fs.name == RAW:
            return self._build_raw()
        mkfs, mount_opts = MKFS[fs.name]
        if not self.transport.which(mkfs[0]):
            raise StackError(f"{mkfs[0]} is not installed; it makes the {fs.name} data partition "
                             f"(Debian: {fs.name}progs / e2fsprogs)")
        device, scheduler, (major, minor), cpu_files = self._device()
        extra_mkfs = [o for o in fs.options.get("mkfs", "").split() if o]
        journal = None
        if "journal_dev" in fs.options:
            journal = self._make_journal_device(fs)
            extra_mkfs += ["-J", f"device={journal['device']}"]
        self._sh(mkfs + extra_mkfs + [device], timeout=self.options.timeout_s)
        data = f"{self.private}/data"
        self._sh(["mkdir", "-p", data])
        opts = fs.options.get("mount", mount_opts).replace(";", ",")
        if "data" in fs.options:
            opts = ",".join([o for o in opts.split(",") if not o.startswith("data=")] + [f"data={fs.options['data']}"])
        if journal:
            opts += f",journal_path={journal['device']}"
        self._mount(fs.name, opts, device, data)
        workdir, layers = data, []
        for layer in self.spec.layers:
            workdir, facts = self._mount_fuse_layer(layer, data)
            layers.append(facts)
        return self._facts(workdir, device, major, minor, fs.name, opts, scheduler, cpu_files,
                           layers=layers, journal_device=journal)

    def _build_raw(self) -> StackFacts:
        """The bare loop device on the device model: the workload writes $MOBIPERF_DEVICE (its path)."""
        device, scheduler, (major, minor), cpu_files = self._device()
        workdir = f"{self.private}/raw"
        self._sh(["mkdir", "-p", workdir])
        return self._facts(workdir, device, major, minor, RAW, "", scheduler, cpu_files)

    def _device(self) -> tuple[str, str, tuple[int, int], list[str]]:
        """The private directory, the data partition's loop device (over the device model when a profile is set)
        with its scheduler, dirty limit and the CPU share: (device, scheduler, (major, minor), cgroup.procs files)."""
        self._make_private_dir()
        device = self._attach_loop(self._make_image("userdata.img", self.options.image_size))
        scheduler = self._set_scheduler(device)
        major, minor = self._dev_numbers(device)
        if self.options.dirty_limit is not None:
            self._limit_dirty_pages(f"{major}:{minor}")
        return device, scheduler, (major, minor), self._start_cpu_share()

    def _facts(self, workdir: str, device: str, major: int, minor: int, filesystem: str, mount_options: str,
               scheduler: str, cpu_files: list[str], **more: Any) -> StackFacts:
        o = self.options
        return StackFacts(spec=str(self.spec), workdir=workdir, device=device, dev_major=major, dev_minor=minor,
                          filesystem=filesystem, mount_options=mount_options, scheduler=scheduler,
                          image_size_bytes=o.image_size, device_profile=o.device, dirty_limit_bytes=o.dirty_limit,
                          cpu_share=o.cpu_share, cpu_procs_files=cpu_files, fuse_wakeup_ns=o.fuse_wakeup_ns, **more)

    def _mount(self, fstype: str, opts: str, device: str, path: str) -> None:
        with signals.shielded():  # a change and its undo step are made as one: a stop signal waits for both
            entry = self._journal.record("mount", path=path)
            if self._sh(["mount", "-t", fstype, "-o", opts, device, path], check=False).returncode != 0:
                self._journal.done(entry)
                raise StackError(f"cannot mount {fstype} on {device}: does this kernel support {fstype}?")
            self._teardown_steps.push(f"umount {path}", lambda: self._umount(path), entry)

    def _make_private_dir(self) -> None:
        entry = self._journal.record("dir", path=self.private)
        self._teardown_steps.push(f"rmdir {self.private}", lambda: self._remove_dir(self.private), entry)
        self._sh(["mkdir", "-p", self.private])

    def _limit_dirty_pages(self, major_minor: str) -> None:
        """The phone's memory: the data device's own dirty limit, restored before the loop device is detached."""
        from mobiperf.stack.dirty_limit import DirtyLimit

        limit = self._dirty = DirtyLimit(self.transport, major_minor, self.options.dirty_limit)
        # pushed first: its exit restores whatever its entry got to change
        self._teardown_steps.push(f"dirty limit {major_minor}", lambda: limit.__exit__(None, None, None))
        limit.__enter__()

    def _start_cpu_share(self) -> list[str]:
        """The phone's CPU: a cgroup for the FUSE daemons and the workload, removed after they have exited."""
        if self.options.cpu_share == "host":
            return []
        if not self.target.is_local:
            raise UsageError("a CPU share models a phone's CPU on this host; a remote target has its own CPU")
        from mobiperf.stack.cpu_share import CpuShare

        share = self._cpu = CpuShare(self.options.cpu_share, Path(self.private).name)
        # pushed first: its exit removes whatever groups its entry got to make
        self._teardown_steps.push(f"cpu share {share}", lambda: self._remove_cpu_share(share))
        return share.__enter__().procs_files()

    def _make_image(self, name: str, size: int) -> str:
        """A sparse image file, served through the device model's throttling store when a profile is set."""
        if self.options.device is None:
            image = f"{self.private}/{name}"
            self._sh(["truncate", "-s", str(size), image])
            return image
        from mobiperf.stack.device_model import ThrottledStore

        daemon = reference_bin_dir() / "devmodel"
        if not daemon.exists():
            raise StackError(f"{daemon} is not built; run `make -C reference-impl` (or `make setup`)")
        store = ThrottledStore(Path(self.private) / f"backing-{name}", size, self.options.device,
                               Path(self.private) / f"devmodel-{name}", daemon)
        with signals.shielded(), self._journal.attempt("mount", path=str(store.mountpoint)) as entry:
            path = store.__enter__()
            self._teardown_steps.push(f"device model {name}", lambda: self._stop_store(name, store), entry)
        return str(path)

    def _make_journal_device(self, fs: Layer) -> dict[str, Any]:
        if fs.name != "ext4":
            raise UsageError("journal_dev is an ext4 option (an external journal device)")
        size = parse_size(fs.options["journal_dev"])
        image = self._make_image("journal.img", size)
        device = self._attach_loop(image)
        self._sh(["mkfs.ext4", "-q", "-F", "-O", "journal_dev", "-b", "4096", device],
                 timeout=self.options.timeout_s)
        major, minor = self._dev_numbers(device)
        return {"device": device, "dev_major": major, "dev_minor": minor, "size_bytes": size}

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
            self._teardown_steps.push(f"losetup -d {device}", lambda: self._sh(["losetup", "-d", device]), entry)
        self._journal.update(entry, device=device)
        found = reset_loop_device(self.transport, device)  # the settings an earlier user left: a fresh one's
        if found:
            self.device_reset[device] = found
        return device

    def _set_scheduler(self, device: str) -> str:
        knob = f"/sys/block/{Path(device).name}/queue/scheduler"
        current = self.transport.read_file(knob).decode()
        active = current[current.index("[") + 1:current.index("]")] if "[" in current else current.strip()
        wanted = self.options.scheduler
        if wanted and wanted != active:
            available = current.replace("[", "").replace("]", "").split()
            if wanted not in available:
                raise StackError(f"IO scheduler {wanted!r} is not available on {device}; "
                                 f"available: {', '.join(available)}")
            entry = self._journal.record("sysfs", path=knob, old=active)
            self._teardown_steps.push(f"sysfs {knob}", lambda: self.transport.write_file(knob, active.encode()),
                                      entry)
            self.transport.write_file(knob, wanted.encode())
            return wanted
        return active

    def _dev_numbers(self, device: str) -> tuple[int, int]:
        text = self.transport.read_file(f"/sys/block/{Path(device).name}/dev").decode().strip()
        major, minor = text.split(":")
        return int(major), int(minor)

    def _mount_fuse_layer(self, layer: Layer, data: str) -> tuple[str, dict[str, Any]]:
        daemon_name, default_preset = FUSE_LAYERS[layer.name]
        daemon = reference_bin_dir() / daemon_name
        if not daemon.exists():
            raise StackError(f"{daemon} is not built; run `make -C reference-impl` (or `make setup`)")
        source, mountpoint = f"{data}/media/0", f"{self.private}/sdcard"
        self._sh(["mkdir", "-p", source, mountpoint])
        options = {"preset": default_preset, **layer.options}
        counters = None
        counters_dir = self.options.counters_dir
        if counters_dir is not None:
            # Absolute: the daemon runs in another working directory (libfuse changes to /).
            counters = str(Path(counters_dir).absolute() / f"{layer.name}-counters.json")
            options["counters"] = counters
        argv = [str(daemon), "-f", "-o", ",".join(f"{k}={v}" for k, v in options.items()), source, mountpoint]
        log = (counters_dir or Path(self.private)) / f"{layer.name}-daemon.log"
        with signals.shielded(), self._journal.attempt("mount", path=mountpoint) as entry:
            proc = self.transport.start(argv, stdout_path=log, stderr_path=log, env=self._daemon_env(),
                                        death_signal=signal.SIGTERM)  # if we die: SIGTERM, the daemon unmounts
            self._teardown_steps.push(f"fuse {mountpoint}", lambda: self._stop_fuse(mountpoint, proc), entry)
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
        if not self.options.fuse_wakeup_ns:
            return None
        if not self.target.is_local:
            raise UsageError("fuse_wakeup models a phone's scheduler on this host; a remote target has its own")
        shim = reference_bin_dir() / "fuse_wakeup.so"
        if not shim.exists():
            raise StackError(f"{shim} is not built; run `make -C reference-impl` (or `make setup`)")
        preload = " ".join(filter(None, [str(shim), os.environ.get("LD_PRELOAD", "")]))
        return {"LD_PRELOAD": preload, "FUSE_WAKEUP_NS": str(self.options.fuse_wakeup_ns)}

    def _is_mounted(self, path: str) -> bool:
        mounts = self.transport.read_file("/proc/self/mounts").decode(errors="replace")
        return is_mounted(path, parse_proc_mounts(mounts))

    # --- teardown ---

    def _teardown(self) -> None:
        """Undo every step that succeeded, newest first; keep going past failures and report them at the end.
        Stop signals wait until it is over (a half-removed stack is the worst outcome), and a step that fails
        (a full run directory, a device gone) stays in the undo journal for the next run to finish."""
        with signals.shielded():
            failures = self._teardown_steps.close()
        if failures:
            raise StackError("stack teardown left things behind: " + "; ".join(failures))

    def _stop_fuse(self, mountpoint: str, proc: BackgroundProcess) -> None:
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

    def _remove_cpu_share(self, share) -> None:
        """After the daemons have exited (newer undo steps): their CPU time is in, and the group is empty."""
        facts = share.facts() if self.options.counters_dir is not None else None
        share.__exit__(None, None, None)
        if facts is not None:
            numbers = {k: v for k, v in facts.items() if isinstance(v, (int, float))}
            if "usage_ns" in numbers:
                numbers["usage_s"] = numbers.pop("usage_ns") / 1e9
            self._write_counters("cpu-counters.json",
                                 {"share": facts["share"], "cgroup": facts["cgroup"], "counters": numbers})

    def _umount(self, path: str) -> None:
        for attempt in range(20):
            if self._sh(["umount", path], check=False).returncode == 0:
                return
            time.sleep(0.1 * (attempt + 1))  # a daemon or the workload may still hold a file open
        self._sh(["umount", "-l", path])

    def _stop_store(self, name: str, store) -> None:
        store.__exit__(None, None, None)
        if self.options.counters_dir is not None:
            self._write_counters(f"device-counters-{Path(name).stem}.json", store.counters())

    def _write_counters(self, name: str, data: dict) -> None:
        """Into the run directory; a full one loses them (the run says which it lacks), but not the undo step."""
        with contextlib.suppress(OSError):
            (self.options.counters_dir / name).write_text(json.dumps(data, indent=2))

    def _remove_dir(self, path: str) -> None:
        self._sh(["rm", "-rf", "--one-file-system", path])

    def _sh(self, argv: list[str], *, check: bool = True, timeout: float = 60.0):
        done = self.transport.run(argv, timeout=timeout)
        return done.check() if check else done
