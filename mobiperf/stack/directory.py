"""Stacks on a target's own storage, how a phone is measured before and after: a directory as it is (`dir:PATH`),
and a bundled FUSE daemon mounted over one (`dir:PATH+bfuse[:opts]`, `dir:PATH+fjord[:opts]`, `dir:PATH+fuse`, the
legacy 4 KiB daemon).

A FUSE layer on the target, for one repetition (RUN = PATH/mobiperf-<pid>-<id>):

    BIN/bfuse            the daemon built for the device's ABI (`make -C reference-impl ARCH=...`), pushed to the
                         device's work directory (/data/local/tmp/mobiperf on a phone: shared storage is noexec)
    RUN/media            what the daemon serves: a directory of the data partition
    RUN/sdcard           the daemon's mountpoint, mobiperf's own: the workload's directory
    RUN/daemon.pid       the daemon's pid. Daemons are tracked by pid file, never by name: `pidof` cannot find a
                         binary run through qemu-user, and a phone runs daemons of its own
    RUN/daemon.log       the daemon's stderr; RUN/counters.json what it counted, written when it unmounts

as Android serves /data/media/0 at /storage/emulated/0. On a phone PATH must be a directory of /data: /sdcard is
already a FUSE (or sdcardfs) view of /data/media, mounted noexec.

The daemon runs as root and mounts through mount(2) on /dev/fuse (a phone has no fusermount). Root comes from the
transport: adbd running as root, `su -c`, `su 0`, or `adb root`, tried here when nothing else gives it. The
workload runs as the transport's user; when that is not the daemon's uid the mount gets allow_other (FUSE refuses
other users without it). Teardown, also after a failure or Ctrl-C: umount (retried while the mount is busy), then
umount -l; wait for the daemon to exit by its pid (it flushes its buffers and writes its counters); copy the
counters and the log into the run directory; remove RUN, the pushed binary and the directories made for them.
Every step has a timeout, and a device lost midway ends the teardown at once, saying what may be left.

The host's phone models (--phone, --device, --dirty-limit, --cpu, --fuse-wakeup) and --scheduler do not apply to
a target's own storage: a phone has its own eMMC, memory, CPU and scheduler. They are refused, not ignored.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import signal
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from mobiperf.core import signals
from mobiperf.core.errors import StackError, TargetError, UsageError
from mobiperf.core.mounts import Mount, is_mounted, mount_of, parse_mountinfo, parse_proc_mounts
from mobiperf.core.vocabulary import FUSE_LAYERS
from mobiperf.stack.facts import StackFacts, fuse_device_fds
from mobiperf.stack.options import StackOptions
from mobiperf.stack.spec import StackSpec
from mobiperf.stack.undo import Teardown
from mobiperf.target.target import Target
from mobiperf.target.transport import Transport
from mobiperf.target.undo_journal import journal_for

log = logging.getLogger(__name__)

MOUNT_TIMEOUT_S = 30.0     # a daemon run through qemu-user starts in a second or two
EXIT_TIMEOUT_S = 30.0      # after the unmount the daemon writes out what it buffers, then its counters
UMOUNT_ATTEMPTS = 10       # a workload's file may still be open for a moment: umount is retried, then made lazy
POLL_S = 0.1
# Where a phone's shared storage lives: FUSE (Android 11+, 4.x), sdcardfs (8-10) or esdfs views of /data/media.
SHARED_STORAGE = ("/sdcard", "/storage", "/mnt/sdcard", "/mnt/user", "/mnt/runtime", "/mnt/pass_through")
VIEW_FSTYPES = ("fuse", "sdcardfs", "esdfs")
PASSTHROUGH_KERNEL = (6, 9)   # FUSE_DEV_IOC_BACKING_OPEN and FOPEN_PASSTHROUGH upstream


class DirectoryStack:
    """A directory of the target's own storage, used as it is: how a phone is measured.

    Nothing is formatted or mounted. The run gets a fresh subdirectory (removed afterwards), and the traced block
    devices are those under the directory's mount: its device, the partition's disk and any device-mapper slaves.
    A directory on FUSE or sdcardfs (a phone's /sdcard) has no block device of its own: the data partition under
    /data is traced instead.
    """

    def __init__(self, target: Target, spec: StackSpec, options: StackOptions = StackOptions()):
        refuse_host_models(options)
        self.transport = target.transport
        self.spec = spec
        self.workdir = f"{spec.filesystem.options['path'].rstrip('/')}/mobiperf-{uuid.uuid4().hex[:8]}"
        self._made: list[str] = []

    def __enter__(self) -> StackFacts:
        from mobiperf.target.android import make_dirs

        self._entry = journal_for(self.transport).record("dir", path=self.workdir)  # before it exists
        self._made = make_dirs(self.transport, self.workdir, 30)
        try:
            return directory_facts(self.transport, self.workdir, str(self.spec))
        except BaseException:
            self.__exit__()
            raise

    def __exit__(self, *exc) -> None:
        from mobiperf.target.android import remove_dirs

        with signals.shielded():
            if self.transport.run(["rm", "-rf", "--", self.workdir], timeout=120).returncode == 0:
                journal_for(self.transport).done(self._entry)
            remove_dirs(self.transport, self._made)   # and the directories made for it (PATH)


class DeviceFuseStack:
    """A bundled FUSE daemon over a directory of the target's storage; see the module docstring.

    counters_dir receives the daemon's counters (<layer>-counters.json) and log (<layer>-daemon.log).
    """

    def __init__(self, target: Target, spec: StackSpec, options: StackOptions = StackOptions()):
        from mobiperf.target.adb import DeviceLostError

        refuse_host_models(options)
        self.target = target
        self.transport = target.transport
        self.spec = spec
        self.layer = spec.layers[0]
        self.path = spec.filesystem.options["path"].rstrip("/") or "/"
        self.run_dir = f"{self.path}/mobiperf-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.counters_dir = options.counters_dir
        self.timeout_s = options.timeout_s
        self._journal = journal_for(self.transport)
        self._undo = Teardown(self._journal, fatal=(DeviceLostError,))
        self._pid: int | None = None   # the daemon's, from its pid file
        self._served = False           # the daemon answered on its mount
        self._left: str | None = None  # why the run is void: the daemon left its mount before the teardown
        self.facts: StackFacts | None = None

    def __enter__(self) -> StackFacts:
        try:
            self.facts = self._build()
        except BaseException as e:
            try:
                self._teardown()
            except StackError as cleanup:   # the set-up error is the news; what it left comes after it
                log.error("%s", cleanup)
                raise e from cleanup
            raise
        return self.facts

    def __exit__(self, *exc) -> None:
        self._teardown()

    # --- set-up ---

    def _build(self) -> StackFacts:
        from mobiperf.target.android import make_dirs, push_reference_binaries, remove_dirs

        plan = plan_device_stack(self.target, self.spec)
        t = self.transport
        run_dir = self._journal.record("dir", path=self.run_dir)  # for the next run, if this one is killed
        made = make_dirs(t, self.run_dir, self.timeout_s)
        self._undo.push("directories", lambda: remove_dirs(t, made))
        self._undo.push("run directory", self._remove_run_dir, run_dir)
        media, mountpoint = f"{self.run_dir}/media", f"{self.run_dir}/sdcard"
        t.run(["mkdir", "-p", media, mountpoint], timeout=30).check()
        bindir = f"{plan['workdir']}/bin-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        pushed = push_reference_binaries(t, [plan["daemon"]], plan["abi"], bindir, android=plan["is_android"],
                                         timeout=self.timeout_s)
        binary = pushed.__enter__()[plan["daemon"]]
        self._undo.push("pushed binary", lambda: pushed.__exit__(None, None, None))
        options = {"preset": FUSE_LAYERS[self.layer.name][1], **self.layer.options,
                   "counters": f"{self.run_dir}/counters.json"}
        allow_other = plan["workload_uid"] != 0
        if allow_other:
            options.setdefault("allow_other", "1")
        self._start_daemon([binary, "-f", "-o", ",".join(f"{k}={v}" for k, v in options.items()), media,
                            mountpoint])
        facts = directory_facts(t, media, str(self.spec))
        facts.workdir = mountpoint
        counters = self._local(f"{self.layer.name}-counters.json")
        facts.layers = [{"layer": self.layer.name, "daemon": plan["daemon"], "options": options, "source": media,
                         "mountpoint": mountpoint, "pid": self._pid, "daemon_pid": self._pid,
                         "fuse_fds": fuse_device_fds(t, self._pid) if self._pid else [], "binary": binary,
                         "abi": plan["abi"],
                         "root_method": plan["root_method"], "allow_other": allow_other,
                         "counters_path": str(counters) if counters else None}]
        return facts

    def _start_daemon(self, argv: list[str]) -> None:
        """Start the daemon in the background as root, its pid in a file; wait for its mount."""
        pidfile, logfile = f"{self.run_dir}/daemon.pid", f"{self.run_dir}/daemon.log"
        # One simple command in the background (an and-list would leave a subshell holding adb's pipes open):
        # sh writes its pid, then becomes the daemon.
        script = (f"cd /; sh -c 'echo $$ > \"$0\" && exec \"$@\"' {shlex.quote(pidfile)} {shlex.join(argv)} "
                  f"> {shlex.quote(logfile)} 2>&1 < /dev/null &")
        mountpoint = argv[-1]
        mount = self._journal.record("mount", path=mountpoint)  # unmounting also ends the daemon
        self.transport.run(["sh", "-c", script], timeout=30).check()
        self._undo.push("daemon", self._stop_daemon, mount)
        deadline = time.monotonic() + MOUNT_TIMEOUT_S
        while True:
            mounted, pid, alive = self._state(mountpoint, pidfile)
            self._pid = pid or self._pid
            if mounted and self._answers(mountpoint):
                self._served = True
                return
            if (pid is not None and not alive) or mounted or time.monotonic() > deadline:
                said = self._read(logfile).strip() or ("timed out" if alive else "it exited")
                raise StackError(f"{Path(argv[0]).name} did not mount {mountpoint}: {said[-600:]}")
            time.sleep(POLL_S)

    def _answers(self, mountpoint: str) -> bool:
        """The daemon answers on its mount: a stat waits for its FUSE_INIT reply (after which it may still refuse,
        e.g. passthrough the kernel lacks: a moment later it must still be there)."""
        script = (f"stat -c %i {shlex.quote(mountpoint)} >/dev/null && sleep 0.3 && "
                  f"kill -0 \"$(cat {shlex.quote(self.run_dir)}/daemon.pid)\"")
        return self.transport.run(["sh", "-c", script], timeout=30).returncode == 0 and \
            self._state(mountpoint, f"{self.run_dir}/daemon.pid")[0]

    def _state(self, mountpoint: str, pidfile: str) -> tuple[bool, int | None, bool]:
        """(mounted, daemon pid, daemon alive) in one round trip."""
        script = (f"cat /proc/self/mounts; echo @@pid; p=$(cat {shlex.quote(pidfile)} 2>/dev/null) && "
                  'echo "$p" && kill -0 "$p" 2>/dev/null && echo alive; true')
        text = self.transport.run(["sh", "-c", script], timeout=30).text
        mounts, _, tail = text.partition("@@pid")
        mounted = is_mounted(mountpoint, parse_proc_mounts(mounts))
        words = tail.split()
        pid = int(words[0]) if words and words[0].isdigit() else None
        return mounted, pid, "alive" in words

    # --- teardown ---

    def _teardown(self) -> None:
        """Undo every step that succeeded, newest first. A failure is reported at the end; a lost device ends the
        teardown at once (nothing more can be done on it) and says what may be left there."""
        old = signal.signal(signal.SIGINT, signal.SIG_IGN) if _in_main_thread() else None
        try:
            failures = self._undo.close()
        finally:
            if old is not None:
                signal.signal(signal.SIGINT, old)
        if self._undo.lost is not None:
            lost, left = self._undo.lost, self._undo.not_run
            self._undo.lost, self._undo.not_run = None, []
            raise StackError(f"{lost}; on the device, the {', '.join(left)} may be left ({self.run_dir})") from lost
        if self._left:
            raise StackError(self._left + ("; teardown: " + "; ".join(failures) if failures else ""))
        if failures:
            raise StackError("stack teardown left things behind: " + "; ".join(failures))

    def _stop_daemon(self) -> None:
        mountpoint, pidfile = f"{self.run_dir}/sdcard", f"{self.run_dir}/daemon.pid"
        t = self.transport
        mounted, pid, alive = self._state(mountpoint, pidfile)
        pid = pid or self._pid
        if self._served and not mounted:
            # It unmounted on its own (a refusal after FUSE_INIT, a crash): the workload wrote to the bare
            # directory underneath, and the run measured no daemon at all.
            self._left = (f"the {self.layer.name} daemon left its mount during the run, so the workload ran on the "
                          f"bare directory, not through it: {self._read(f'{self.run_dir}/daemon.log').strip()[-400:]}")
        for attempt in range(UMOUNT_ATTEMPTS):
            if not mounted or t.run(["umount", mountpoint], timeout=30).returncode == 0:
                break
            time.sleep(0.1 * (attempt + 1))   # the workload or a collector may still hold a file open
            mounted = self._state(mountpoint, pidfile)[0]
        else:
            t.run(["umount", "-l", mountpoint], timeout=30).check()
        deadline = time.monotonic() + EXIT_TIMEOUT_S
        while pid is not None and alive and time.monotonic() < deadline:
            time.sleep(POLL_S)
            alive = t.run(["kill", "-0", str(pid)], timeout=30).returncode == 0
        killed = pid is not None and alive
        if killed:
            t.run(["kill", "-9", str(pid)], timeout=30)
        self._collect()
        if killed:
            raise StackError(f"the {self.layer.name} daemon (pid {pid}) did not exit within {EXIT_TIMEOUT_S:g} s "
                             "of its unmount and was killed: its buffered data and counters are lost")

    def _collect(self) -> None:
        """The daemon's counters and log, into the run directory."""
        for remote, name in (("counters.json", "counters.json"), ("daemon.log", "daemon.log")):
            local = self._local(f"{self.layer.name}-{name}")
            data = self._read(f"{self.run_dir}/{remote}")
            if local is not None and data:
                local.write_text(data)
        if self.counters_dir is not None and not self._local(f"{self.layer.name}-counters.json").exists():
            log.warning("the %s daemon wrote no counters (see %s-daemon.log)", self.layer.name, self.layer.name)

    def _remove_run_dir(self) -> None:
        mounted = self._state(f"{self.run_dir}/sdcard", f"{self.run_dir}/daemon.pid")[0]
        if mounted:  # never rm -rf through a live mount: that would delete the served files one by one
            raise StackError(f"{self.run_dir}/sdcard is still mounted; not removing {self.run_dir}")
        self.transport.run(["rm", "-rf", "--", self.run_dir], timeout=120).check()

    def _read(self, path: str) -> str:
        """A file of the run directory ('' if it is not there)."""
        from mobiperf.target.adb import DeviceLostError

        try:
            return self.transport.read_file(path, timeout=30).decode(errors="replace")
        except DeviceLostError:
            raise
        except TargetError:
            return ""

    def _local(self, name: str) -> Path | None:
        return None if self.counters_dir is None else self.counters_dir / name


# --- checks made before anything is created ---------------------------------------------------------------------

def plan_device_stack(target: Target, spec: StackSpec) -> dict[str, Any]:
    """What a dir:PATH+LAYER stack needs on this target, checked before anything is created: PATH may carry a
    daemon, the daemon is built for the device's ABI, root is available (tried: adb root). Raises UsageError or
    StackError/TargetError saying what to do. Returns daemon, abi, is_android, workdir (where binaries go),
    workload_uid, root_method, kernel."""
    from mobiperf.target.android import build_command, reference_binary_path

    transport = target.transport
    layer = spec.layers[0]
    daemon = FUSE_LAYERS[layer.name][0]
    path = spec.filesystem.options["path"].rstrip("/") or "/"
    facts = target.android
    check_fuse_path(transport, str(spec), path, facts)
    preset = layer.options.get("preset", FUSE_LAYERS[layer.name][1])
    if preset == "passthrough":
        check_passthrough_kernel(facts.get("kernel") or "")
    local = reference_binary_path(daemon, facts["abi"], android=facts["is_android"])
    if not local.is_file():
        raise StackError(f"{daemon} for the device's ABI {facts['abi']} is not built ({local} is missing): run "
                         f"`{build_command(local)}`")
    root_method = target.require_root(f"mounting {daemon} over {path} (mount(2) on /dev/fuse)")
    uid = transport.run(["id", "-u"], timeout=30).text.strip()   # the uid commands, and the workload, run as
    return {"daemon": daemon, "abi": facts["abi"], "is_android": facts["is_android"],
            "workdir": facts["default_workdir"], "workload_uid": int(uid) if uid.isdigit() else -1,
            "root_method": root_method, "kernel": facts.get("kernel")}


def check_fuse_path(transport: Transport, spec: str, path: str, facts: dict) -> None:
    """UsageError unless a FUSE daemon may serve path: never the shared storage (/sdcard), on a phone a directory
    of /data."""
    script = (f"p={shlex.quote(path)}; while [ -n \"$p\" ] && [ ! -e \"$p\" ]; do p=${{p%/*}}; done; "
              'readlink -f "${p:-/}"')
    resolved = transport.run(["sh", "-c", script], timeout=30).text.strip() or "/"
    mount = mount_of(resolved, [Mount(**m) for m in facts.get("mounts") or []])
    fstype = mount.fstype if mount else ""
    on_view = any(p == s or p.startswith(s + "/") for p in (path, resolved) for s in SHARED_STORAGE)
    if on_view or fstype.split(".")[0] in VIEW_FSTYPES:
        raise UsageError(
            f"stack {spec!r}: {path} is shared storage ({fstype or 'the /sdcard view'} of /data/media, mounted "
            "noexec): a daemon over it would put FUSE on FUSE, and its binary cannot run there. Use a directory of "
            "/data, e.g. dir:/data/local/tmp/mp+" + spec.split("+", 1)[1] + " (the partition /sdcard's files are on)")
    if facts.get("is_android") and not (resolved == "/data" or resolved.startswith("/data/")):
        raise UsageError(f"stack {spec!r}: on a phone the daemon serves a directory of /data (the userdata "
                         f"partition, which /sdcard's own daemon serves); {path} is not on it")


def check_passthrough_kernel(release: str) -> None:
    """StackError unless the kernel has upstream FUSE passthrough (preset=passthrough)."""
    m = re.match(r"(\d+)\.(\d+)", release)
    if m and (int(m.group(1)), int(m.group(2))) < PASSTHROUGH_KERNEL:
        raise StackError(f"preset=passthrough needs FUSE passthrough (FUSE_DEV_IOC_BACKING_OPEN, FOPEN_PASSTHROUGH: "
                         f"Linux {PASSTHROUGH_KERNEL[0]}.{PASSTHROUGH_KERNEL[1]} or later); this kernel is {release}")


def refuse_host_models(options: StackOptions) -> None:
    """UsageError for the options that model a phone around an emulated stack on this host: a dir: stack is a
    device's own storage (a phone's, with its own eMMC, memory, CPU and scheduler), measured as it is."""
    if options.scheduler is not None:
        raise UsageError("--scheduler changes an emulated stack's device; a dir: stack is measured as it is")
    given = options.host_models()
    if given:
        raise UsageError(f"{', '.join(given)} (and --phone, which sets them) model a phone around an emulated "
                         "stack on this host; a dir: stack is the device's own storage, measured as it is")


# --- the storage under a directory ---------------------------------------------------------------------------------

def directory_facts(transport: Transport, path: str, spec: str) -> StackFacts:
    """StackFacts of an existing directory on a target: its mount, and the block devices under it (the mount's
    device, the partition's disk, device-mapper slaves). A directory on FUSE or sdcardfs (a phone's /sdcard) has no
    block device of its own: the data partition under /data is traced instead."""
    mounts = parse_mountinfo(transport.read_file("/proc/self/mountinfo").decode(errors="replace"))
    mount = _mount_holding(path, mounts)
    if not mount.has_block_device:  # fuse, sdcardfs, tmpfs: no block device of its own
        data = _mount_holding("/data/", mounts)
        if not data.has_block_device:
            raise StackError(f"{path} is on {mount.fstype}, which has no block device to trace")
        mount = data
    devices = _device_chain(transport, mount.dev, path)
    major, minor = devices[0]
    disk = transport.run(["sh", "-c", f"basename $(readlink -f /sys/dev/block/{major}:{minor})"],
                         timeout=30).text.strip()
    knob = transport.run(["cat", f"/sys/block/{disk}/queue/scheduler"], timeout=30).text
    scheduler = knob[knob.find("[") + 1:knob.find("]")] if "[" in knob else knob.strip()
    return StackFacts(spec=spec, workdir=path, device=f"/dev/{disk}", dev_major=major, dev_minor=minor,
                      filesystem=mount.fstype, mount_options=mount.options, scheduler=scheduler, image_size_bytes=0,
                      extra_devices=devices[1:])


def _device_chain(transport: Transport, major_minor: str, path: str) -> list[tuple[int, int]]:
    """The mount's device, then its whole disk (for a partition) and device-mapper slaves."""
    script = (f"d=$(readlink -f /sys/dev/block/{major_minor}); cat $d/dev; "
              "[ -f $d/partition ] && cat $d/../dev; for s in $d/slaves/*; do [ -e $s/dev ] && cat $s/dev; done; true")
    found = []
    for line in transport.run(["sh", "-c", script], timeout=30).text.split():
        major, _, minor = line.partition(":")
        if major.isdigit() and (int(major), int(minor)) not in found:
            found.append((int(major), int(minor)))
    if not found:
        raise StackError(f"no block device found for {path} ({major_minor})")
    return found


def _mount_holding(path: str, mounts: list[Mount]) -> Mount:
    """The mount a path lives on; StackError when none holds it."""
    mount = mount_of(path.rstrip("/") or "/", mounts)
    if mount is None:
        raise StackError(f"{path} is on no mount")
    return mount


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()
