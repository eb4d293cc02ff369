"""How a stack is built beyond its spec string: one typed options object for every kind of stack.

The phone models (device, dirty_limit, cpu_share, fuse_wakeup_ns; mobiperf.stack.phone bundles them) make this
host behave like a phone around an emulated stack: `device` puts a throttling store with a device profile between
the loop device and the host's disk (mobiperf.stack.device_model), `dirty_limit` bounds the dirty pages of the data
device (a phone's small memory starts writeback early), `cpu_share` puts the FUSE daemons and the workload into a
CPU-limited cgroup (a phone's CPU), `fuse_wakeup_ns` makes each request reach a FUSE daemon that much later (a
phone's per-request wake-up cost). They, and `scheduler`, change an emulated stack's device: a dir: stack, a
device's own storage, refuses them (host_models()).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mobiperf.core.errors import UsageError
from mobiperf.core.vocabulary import SCHEDULERS
from mobiperf.stack.spec import DEFAULT_IMAGE_SIZE


@dataclass(frozen=True)
class StackOptions:
    scheduler: str | None = None       # the loop device's IO scheduler (None: as the kernel set it)
    image_size: int = DEFAULT_IMAGE_SIZE   # bytes of the emulated data partition
    counters_dir: Path | None = None   # where the FUSE daemons, the device model and the CPU share write counters
    timeout_s: float = 120.0           # each set-up step (mkfs, a daemon's mount, pushing a binary)
    device: str | None = None          # a device profile of mobiperf.stack.device_model (None: the host's disk)
    dirty_limit: int | None = None     # the data device's dirty page limit in bytes (None: the host's thresholds)
    cpu_share: str = "host"            # CPU share of the workload and the FUSE daemons (mobiperf.stack.cpu_share)
    fuse_wakeup_ns: int = 0            # a phone's wake-up latency per FUSE request (reference-impl/phonemodel)
    workroot: str = "/var/tmp/mobiperf"  # where an emulated stack's private directory goes

    def __post_init__(self) -> None:
        if self.scheduler is not None and self.scheduler not in SCHEDULERS:
            raise UsageError(f"unknown IO scheduler {self.scheduler!r}; choose one of {', '.join(SCHEDULERS)}")

    def host_models(self) -> list[str]:
        """The options given that model a phone around an emulated stack on this host, as their CLI names."""
        given = (("--device", self.device is not None), ("--dirty-limit", self.dirty_limit is not None),
                 ("--cpu", self.cpu_share != "host"), ("--fuse-wakeup", bool(self.fuse_wakeup_ns)))
        return [name for name, on in given if on]
