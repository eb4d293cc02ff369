"""The device model: a phone's flash storage emulated on a fast host.

The papers measured stacks that were bound by their eMMC (about 40 MB/s sequential write, milliseconds per random
write, a slow cache flush). This host's disk does more than 1 GB/s, so an emulated stack would be bound by CPU
instead. `ThrottledStore` puts a device between the loop device and the host's disk: the `devmodel` daemon
(reference-impl/devmodel) serves the image file as MOUNT/disk.img through FUSE and completes every read, write and
flush at the speed of a `DeviceProfile`. Attach the loop device to the returned path; `losetup --direct-io=on` works
on it and is the recommended way (no page cache copy; the daemon's file is direct_io either way, so the host page
cache cannot absorb the emulated device's writes).

Why FUSE: this kernel has no device-mapper (dm-delay), no nbd and no ublk. A loop device over a FUSE file sends one
FUSE request per block request, and its REQ_PREFLUSH/FUA become fsync() of the file, i.e. FUSE_FSYNC, which is where
the flush cost is charged.

The daemon's counters (requests, bytes, sequential/random, flushes, time spent throttled, log2 latency and size
histograms) are the "device" layer of a run: `ThrottledStore.counters()` and `summarize_device_counters()`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, replace
from pathlib import Path

from mobiperf.core.errors import StackError, UsageError
from mobiperf.core.lifeline import die_with_owner, helper_env
from mobiperf.core.units import parse_duration_ns, parse_size

MOUNT_TIMEOUT_S = 10.0
UNMOUNT_TIMEOUT_S = 10.0
UNMOUNT_RETRY_S = 3.0
DAEMON_EXIT_TIMEOUT_S = 15.0
COUNTERS_TIMEOUT_S = 5.0
IMAGE_NAME = "disk.img"


@dataclass(frozen=True)
class DeviceProfile:
    """How fast the emulated device is. Bandwidth 0 = unlimited; latencies in ns.

    A request's service time is its latency (seq_lat_ns when it starts where one of the last `seq_window`
    requests of its direction ended, otherwise the random latency) plus size / bandwidth; each direction serves one
    request at a time, and a flush occupies the write direction for flush_lat_ns after all earlier writes. The
    transfer part draws on a token bucket of burst_bytes that idle time refills (a device cache absorbing the
    host's gaps between requests); latency is always paid. sync_backing: a flush also fdatasyncs the backing file
    and aligned IO goes to it with O_DIRECT, so `host` costs what a plain `losetup --direct-io` file would.
    """

    name: str
    description: str
    write_bw_bytes_per_s: int = 0
    read_bw_bytes_per_s: int = 0
    rand_write_lat_ns: int = 0
    rand_read_lat_ns: int = 0
    seq_lat_ns: int = 0
    flush_lat_ns: int = 0
    burst_bytes: int = 0
    seq_window: int = 4
    sync_backing: bool = False  # a flush also fsyncs the backing file (its real cost overlaps the modelled one)
    sources: tuple[str, ...] = ()

    def daemon_options(self) -> str:
        """The `-o` value that makes the daemon enforce exactly these numbers."""
        return ",".join(
            [
                f"profile={self.name.partition(':')[0]}",
                f"write_bw={self.write_bw_bytes_per_s}",
                f"read_bw={self.read_bw_bytes_per_s}",
                f"rand_write_lat={self.rand_write_lat_ns}ns",
                f"rand_read_lat={self.rand_read_lat_ns}ns",
                f"seq_lat={self.seq_lat_ns}ns",
                f"flush_lat={self.flush_lat_ns}ns",
                f"burst={self.burst_bytes}",
                f"seq_window={self.seq_window}",
                f"sync_backing={int(self.sync_backing)}",
            ]
        )


_MS = 1_000_000
_US = 1_000

PROFILES: dict[str, DeviceProfile] = {
    p.name: p
    for p in (
        DeviceProfile(
            name="emmc-2012",
            description="Galaxy S3 class eMMC 4.5: 40 MB/s seq write, 80 MB/s read, 2 ms random write, 5 ms flush",
            write_bw_bytes_per_s=40_000_000,
            read_bw_bytes_per_s=80_000_000,
            rand_write_lat_ns=2 * _MS,
            rand_read_lat_ns=500 * _US,
            seq_lat_ns=50 * _US,
            flush_lat_ns=5 * _MS,
            burst_bytes=256 * 1024,
            sources=(
                "paper 000 (bFUSE) sec. 2.3: raw eMMC (NOOP) sequential write 39 MB/s (ICS) and 40 MB/s (JB), "
                "Galaxy S3, 512 KB records; sec. 5: 'MAX' 38.6 and 39.8 MB/s -> write_bw 40 MB/s",
                "paper 001 (Fjord) sec. 1: eMMC ~15 MB/s sequential write, 'the gap is even bigger for random "
                "writes' -> random writes cost milliseconds, not transfer time",
                "paper 004 (cross-layered view) Fig. 3: device latency dominates small random writes (no numbers "
                "in the text) -> rand_write_lat 2 ms (assumed, 'a few ms' per issue 9)",
                "burst 256 KiB: the eMMC cache absorbs the host's gaps between requests, as it did for the "
                "paper's app-level raw measurement; it pays transfer time only, never latency",
                "read_bw 80 MB/s, rand_read_lat 0.5 ms, seq_lat 50 us, flush_lat 5 ms: assumptions (issue 9); "
                "paper 002's polling slide reports ~1000 4 KB write+fsync per second with 1 thread, which would "
                "mean a faster flush: use flush_lat=1ms to model that device",
            ),
        ),
        DeviceProfile(
            name="ufs-2020",
            description="UFS 3.x class: 500 MB/s write, 1 GB/s read, 0.1 ms random IO, 1 ms flush",
            write_bw_bytes_per_s=500_000_000,
            read_bw_bytes_per_s=1_000_000_000,
            rand_write_lat_ns=100 * _US,
            rand_read_lat_ns=100 * _US,
            seq_lat_ns=10 * _US,
            flush_lat_ns=1 * _MS,
            burst_bytes=1024 * 1024,
            sources=(
                "issue 9 (typical UFS 3.x figures); through FUSE and a loop device this host reaches about "
                "0.8 GB/s (specs/fuse-notes.md sec. 3.2), so reads at 1 GB/s are host-bound",
            ),
        ),
        DeviceProfile(
            name="host",
            description="no throttling: the host's own speed, counters only",
            # the host's speed includes its flush: without it `host` would beat a plain loop device on fsync
            sync_backing=True,
        ),
    )
}

_SETTINGS = {
    "write_bw": ("write_bw_bytes_per_s", parse_size),
    "read_bw": ("read_bw_bytes_per_s", parse_size),
    "burst": ("burst_bytes", parse_size),
    "rand_write_lat": ("rand_write_lat_ns", parse_duration_ns),
    "rand_read_lat": ("rand_read_lat_ns", parse_duration_ns),
    "seq_lat": ("seq_lat_ns", parse_duration_ns),
    "flush_lat": ("flush_lat_ns", parse_duration_ns),
    "seq_window": ("seq_window", int),
    "sync_backing": ("sync_backing", int),
}


def resolve_profile(spec: str) -> DeviceProfile:
    """A profile from `NAME`, `NAME:key=value,...` or `key=value,...` (on top of `host`).

    Keys: write_bw, read_bw, burst (sizes, per second for bandwidths: `40M` = 40 MiB/s), rand_write_lat,
    rand_read_lat, seq_lat, flush_lat (durations: `2ms`), seq_window (1..16), sync_backing (0|1).
    Example: `emmc-2012:flush_lat=1ms`.
    """
    spec = spec.strip()
    if ":" in spec:
        name, _, overrides = spec.partition(":")
    elif "=" in spec:
        name, overrides = "host", spec
    else:
        name, overrides = spec, ""
    if name not in PROFILES:
        raise UsageError(f"unknown device profile {name!r}; valid profiles: {', '.join(PROFILES)}")
    profile = PROFILES[name]
    if not overrides:
        return profile
    changes: dict[str, int] = {}
    for item in overrides.split(","):
        key, eq, value = item.partition("=")
        key = key.strip()
        if key not in _SETTINGS or not eq:
            raise UsageError(
                f"bad device profile setting {item!r} in {spec!r}; valid keys: {', '.join(_SETTINGS)}"
            )
        field, parse = _SETTINGS[key]
        try:
            number = parse(value.strip())
        except (UsageError, ValueError) as exc:
            raise UsageError(f"bad value for {key} in device profile {spec!r}: {exc}") from None
        if field == "seq_window" and not 1 <= number <= 16:
            raise UsageError(f"bad value for seq_window in device profile {spec!r}: {number} (expected 1..16)")
        if field == "sync_backing":
            if number not in (0, 1):
                raise UsageError(f"bad value for sync_backing in device profile {spec!r}: {number} (expected 0 or 1)")
            number = bool(number)
        changes[field] = number
    return replace(profile, name=f"{name}:{overrides}", **changes)


def profile_as_daemon_json(profile: DeviceProfile) -> dict:
    """The profile as the daemon reports it (`devmodel --list-profiles`, counters' "profile")."""
    return {
        "name": profile.name,
        "write_bw_bytes_per_s": profile.write_bw_bytes_per_s,
        "read_bw_bytes_per_s": profile.read_bw_bytes_per_s,
        "rand_write_lat_ns": profile.rand_write_lat_ns,
        "rand_read_lat_ns": profile.rand_read_lat_ns,
        "seq_lat_ns": profile.seq_lat_ns,
        "flush_lat_ns": profile.flush_lat_ns,
        "burst_bytes": profile.burst_bytes,
        "seq_window": profile.seq_window,
        "sync_backing": profile.sync_backing,
    }


class ThrottledStore:
    """The emulated device: `with ThrottledStore(...) as image:` then attach a loop device to `image`.

    Detach the loop device before the block ends: the daemon cannot unmount while the kernel holds the file open
    (the exit then falls back to a lazy unmount and finally kills the daemon).
    """

    def __init__(self, backing_file: Path, size_bytes: int, profile: str, workdir: Path, daemon: Path):
        self.profile = resolve_profile(profile)
        self.backing_file = Path(backing_file)
        self.size_bytes = int(size_bytes)
        self.workdir = Path(workdir)
        self.daemon = Path(daemon)
        self.mountpoint = self.workdir / "devmodel-mnt"
        self.counters_path = self.workdir / "devmodel-counters.json"
        self.log_path = self.workdir / "devmodel.log"
        self._proc: subprocess.Popen | None = None
        self._final: dict | None = None
        if self.size_bytes <= 0:
            raise UsageError(f"device size must be positive, got {size_bytes}")

    @property
    def image(self) -> Path:
        return self.mountpoint / IMAGE_NAME

    def __enter__(self) -> Path:
        if not self.daemon.exists():
            raise StackError(f"devmodel daemon not found at {self.daemon}; build it with `make -C reference-impl`")
        if not os.path.exists("/dev/fuse"):
            raise StackError("the device model needs FUSE: /dev/fuse is missing")
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        self.counters_path.unlink(missing_ok=True)
        argv = [
            str(self.daemon),
            "-f",
            "-o",
            f"{self.profile.daemon_options()},size={self.size_bytes},counters={self.counters_path}",
            str(self.backing_file),
            str(self.mountpoint),
        ]
        with open(self.log_path, "wb") as log:
            # a session of its own: Ctrl-C in the terminal must not take the device away from under a mounted
            # filesystem; __exit__ stops it after the caller has unmounted and detached. If we are killed, it
            # gets SIGTERM (it unmounts and exits; mobiperf.core.lifeline) and the undo journal does the rest.
            self._proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                          start_new_session=True, env=helper_env(),
                                          preexec_fn=die_with_owner(signal.SIGTERM))
        deadline = time.monotonic() + MOUNT_TIMEOUT_S
        while not (os.path.ismount(self.mountpoint) and self.counters_path.exists()):
            if self._proc.poll() is not None:
                self._proc = None
                raise StackError(f"devmodel failed to start: {self._log_tail()}")
            if time.monotonic() > deadline:
                self._stop()
                raise StackError(f"devmodel did not mount {self.mountpoint} within {MOUNT_TIMEOUT_S:.0f} s")
            time.sleep(0.02)
        return self.image

    def __exit__(self, *exc_info) -> None:
        self._stop()

    def counters(self) -> dict:
        """The daemon's counters: fresh while it runs (SIGUSR1), the final dump after exit."""
        if self._proc is None or self._proc.poll() is not None:
            if self._final is None:
                self._final = self._read_counters()
            return self._final
        before = self._read_counters().get("dump_seq", 0)
        self._proc.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + COUNTERS_TIMEOUT_S
        while time.monotonic() < deadline:
            current = self._read_counters()
            if current.get("dump_seq", 0) > before:
                return current
            time.sleep(0.01)
        raise StackError(f"devmodel did not dump its counters within {COUNTERS_TIMEOUT_S:.0f} s")

    def _read_counters(self) -> dict:
        try:
            return json.loads(self.counters_path.read_text())
        except FileNotFoundError:
            return {}
        except json.JSONDecodeError as exc:
            raise StackError(f"devmodel wrote unreadable counters to {self.counters_path}: {exc}") from None

    def _log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace").strip()[-1000:] or "(no output)"
        except OSError:
            return "(no log)"

    def _stop(self) -> None:
        """Unmount (lazily if busy), wait for the daemon, keep its final counters. Never raises."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if os.path.ismount(self.mountpoint):
            # a loop device detached a moment ago may still hold the file: retry before unmounting lazily
            deadline = time.monotonic() + UNMOUNT_RETRY_S
            while not _run_quietly(["fusermount3", "-u", str(self.mountpoint)], UNMOUNT_TIMEOUT_S):
                if time.monotonic() > deadline:
                    _run_quietly(["fusermount3", "-uz", str(self.mountpoint)], UNMOUNT_TIMEOUT_S)
                    break
                time.sleep(0.1)
        try:
            proc.wait(timeout=DAEMON_EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        try:
            self._final = self._read_counters()
        except StackError:
            self._final = {}


def _run_quietly(argv: list[str], timeout: float) -> bool:
    try:
        return subprocess.run(argv, capture_output=True, timeout=timeout).returncode == 0
    except (subprocess.TimeoutExpired, OSError):
        return False


def summarize_device_counters(counters: dict) -> dict[str, float]:
    """The device layer as dotted metrics: `device.write.count`, `device.write.bytes`, `device.flush.count`,
    `device.write.seq_fraction`, `device.write.throttled_s`, `device.elapsed_s`, ...

    throttled_s is summed over requests: concurrent requests sleep at the same time, so it can exceed elapsed_s.
    """
    out: dict[str, float] = {}
    if not counters:
        return out
    out["device.elapsed_s"] = counters.get("elapsed_ns", 0) / 1e9
    out["device.max_inflight"] = counters.get("max_inflight", 0)
    for op, c in counters.get("ops", {}).items():
        out[f"device.{op}.count"] = c["count"]
        out[f"device.{op}.bytes"] = c["bytes"]
        out[f"device.{op}.errors"] = c["errors"]
        out[f"device.{op}.throttled_s"] = c["throttled_ns"] / 1e9
        out[f"device.{op}.service_s"] = c["service_ns"] / 1e9
        if op in ("read", "write") and c["count"]:
            out[f"device.{op}.seq_fraction"] = c["seq"] / max(1, c["seq"] + c["rand"])
    return out


def latency_histogram(counters: dict, op: str) -> list[tuple[int, int, int]]:
    """The daemon's log2 latency histogram of `op` as (low_us, high_us, count) rows, empty buckets left out."""
    hist = counters.get("ops", {}).get(op, {}).get("latency_us_log2", [])
    return [(0 if i == 0 else 1 << i, 2 << i, n) for i, n in enumerate(hist) if n]


__all__ = [
    "DeviceProfile",
    "PROFILES",
    "ThrottledStore",
    "latency_histogram",
    "profile_as_daemon_json",
    "resolve_profile",
    "summarize_device_counters",
]
