"""Phone profiles: the papers' phone around the emulated stack, as one name.

A phone profile bundles the four host-side models that make this host's emulated stack behave like the phone the
papers measured; each is also a stack option of its own (`mobiperf run --device/--dirty-limit/--cpu/--fuse-wakeup`,
sweep parameters `device`, `dirty`, `cpu`, `fuse_wakeup`), and an explicit value overrides the profile's.

galaxy-s3-2012 (paper 000, sec. 2.3: Samsung Galaxy S3, Exynos 4412 quad Cortex-A9 at 1.4 GHz, 2 GB RAM, 32 GB
eMMC, Android 4.0.4/4.1.2 on Linux 3.0.15/3.0.30):

- device = emmc-2012: 40 MB/s sequential write (sec. 2.3: raw eMMC 39/40 MB/s), see mobiperf.stack.device_model.
- dirty = 64M: the phone's small memory. Linux 3.0 starts background writeback at dirty_background_ratio of the
  dirtyable memory (free + reclaimable page cache, a few hundred MB on a 2 GB phone running Android: Android's
  init.rc sets the ratio to 5 %) and throttles writers at dirty_ratio (20 %): background writeback starts after
  a few tens of MB and overlaps the rest of a large write. Here the data device's own limit is 64 MiB, so its
  background writeback starts at 32 MiB (this host's background/dirty ratio, 10/20) and writers are throttled
  from about 48 MiB: the same regime. With the host's thresholds (GBs), a 256 MiB file stays dirty until its
  fsync and every configuration pays the whole device time after its CPU time (measured: legacy FUSE 81 % and
  bFUSE 82 % of native, instead of the paper's 18 % and 91 %).
- cpu = 25%: a Cortex-A9 core at 1.4 GHz does about 3.5k DMIPS (2.5 DMIPS/MHz), roughly an eighth of a current
  server core; the writer and the FUSE daemon ran on two of the four cores: 2 x 1/8 = a quarter of one core
  for the workload and its daemon together. The device model's daemon and kernel threads (writeback, loop) stay
  at host speed: they were the eMMC and the phone's other cores.
- fuse_wakeup = 430us: the per-request cost of the phone's FUSE round trip (the daemon thread woken on a core
  leaving idle, cache-cold), fitted to paper 000's Fig. 6: 7 MB/s with a 4 KiB unit and 30 MB/s with 512 KiB
  give (1/7 - 1/30 s per MB) / (256 - 2 requests per MB) = 0.43 ms per request. This host's round trip costs a
  few microseconds, and a CPU share cannot restore the difference: it slows every byte of every configuration
  alike, while the phone's price was per request (Table 3: 128,000 pwrite() for legacy FUSE, 249 for bFUSE).
"""

from __future__ import annotations

from dataclasses import dataclass

from mobiperf.core.errors import UsageError


@dataclass(frozen=True)
class PhoneProfile:
    name: str
    description: str
    device: str            # mobiperf.stack.device_model profile
    dirty: str             # dirty page limit of the data device (mobiperf.stack.dirty_limit)
    cpu: str               # CPU share of the workload and the FUSE daemons (mobiperf.stack.cpu_share)
    fuse_wakeup: str       # wake-up latency per FUSE request (reference-impl/phonemodel)

    def params(self) -> dict[str, str]:
        """The profile as sweep parameters."""
        return {"device": self.device, "dirty": self.dirty, "cpu": self.cpu, "fuse_wakeup": self.fuse_wakeup}


PHONES: dict[str, PhoneProfile] = {p.name: p for p in (
    PhoneProfile("galaxy-s3-2012", "Galaxy S3 (paper 000): eMMC 40 MB/s, 2 GB RAM, quad Cortex-A9 1.4 GHz",
                 device="emmc-2012", dirty="64m", cpu="25%", fuse_wakeup="430us"),
)}


def resolve_phone(name: str) -> PhoneProfile:
    if name not in PHONES:
        raise UsageError(f"unknown phone profile {name!r}; profiles: {', '.join(PHONES)}")
    return PHONES[name]
