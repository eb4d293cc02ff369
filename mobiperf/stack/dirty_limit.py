"""A phone's memory on a big host: a dirty page limit for one block device, restored afterwards.

A 2012 phone had 1-2 GB of RAM and small dirty thresholds, so background writeback of a large buffered write
started after a few tens of MB and overlapped the rest of the write: a sequential write took about
max(CPU time, device time). This host has tens of GB: a 512 MiB file stays dirty in the page cache until its
final fsync, and every configuration pays the same device phase after its CPU phase, which squeezes all
throughput ratios towards 1.

The kernel's per-device knobs (/sys/class/bdi/<major:minor>/, Linux >= 6.2 for the *_bytes files) bound one
device's share of the dirty pages without touching the machine-wide vm.dirty_* settings that other tenants
depend on:

- `strict_limit` = 1: the device is throttled against its own limit even while the machine as a whole is far
  below its global thresholds (without it, nothing happens until the global "freerun" ceiling, GBs here);
- `max_bytes` = LIMIT and `min_bytes` = 90 % of it: the device's dirty threshold is between 0.9 x LIMIT and
  LIMIT whatever share of writeback the other devices of the machine had lately (the proportional part is added
  to min and capped at max). min is below max because the kernel stores both as ratios of the global threshold,
  which moves with the machine's free memory between the two writes: min_bytes = max_bytes failed with EINVAL
  (min ratio above max ratio) in one of 63 runs of a study on this shared host. Its background
  threshold is LIMIT x dirty_background_ratio / dirty_ratio (half of it with the defaults 10/20): that is where
  background writeback of this device starts, and the writer is throttled from the midpoint between the two.

`DirtyLimit` sets these on entry and restores the previous values on exit (the loop device, and its BDI, outlive
our attachment); the previous values are written to the undo journal first, so that a mobiperf killed before its
exit has them restored by the next run (mobiperf.target.undo_journal). Everything goes through the Transport, as the
rest of the stack does.
"""

from __future__ import annotations

from mobiperf.core.errors import StackError
from mobiperf.target.transport import Transport
from mobiperf.target.undo_journal import journal_for
from mobiperf.core.units import parse_size

MIN_LIMIT = 1 << 20
MIN_SHARE_PERCENT = 90   # min_bytes as a share of the limit (see above: why not 100)


def parse_dirty_limit(text: str) -> int | None:
    """Bytes of the limit (`64M`), or None for `host`/`none` (the host's own thresholds)."""
    text = str(text).strip()
    if text.lower() in ("", "host", "none", "off"):
        return None
    size = parse_size(text)
    if size < MIN_LIMIT:
        from mobiperf.core.errors import UsageError

        raise UsageError(f"dirty limit {text} is too small; give at least 1M (or host)")
    return size


class DirtyLimit:
    """`with DirtyLimit(transport, "7:3", 64 << 20): ...` limits dirty pages of block device 7:3 to 64 MiB."""

    def __init__(self, transport: Transport, major_minor: str, limit_bytes: int):
        self.transport = transport
        self.bdi = f"/sys/class/bdi/{major_minor}"
        self.limit_bytes = limit_bytes
        self.saved: list[tuple[str, str]] = []   # (knob, previous value), in the order they were changed
        self._entry: int | None = None           # the undo journal's record of the previous values

    def __enter__(self) -> "DirtyLimit":
        missing = [k for k in ("strict_limit", "max_bytes", "min_bytes")
                   if not self.transport.exists(f"{self.bdi}/{k}")]
        if missing:
            raise StackError(f"this kernel has no per-device dirty limit ({self.bdi}/{', '.join(missing)} missing; "
                             "Linux >= 6.2 has max_bytes/min_bytes/strict_limit): a dirty= memory model cannot "
                             "be applied")
        try:
            # The ratio files hold the state exactly (max_bytes is derived from them); restore through them.
            for knob in ("max_ratio_fine", "min_ratio_fine", "strict_limit"):
                path = f"{self.bdi}/{knob}"
                if self.transport.exists(path):
                    self.saved.append((knob, self.read(knob)))
            self._entry = journal_for(self.transport).record("bdi", path=self.bdi, old=dict(self.saved))
            self._write_limits()
            self.write("strict_limit", "1")
        except BaseException:
            self.__exit__()
            raise
        return self

    def _write_limits(self, attempts: int = 3) -> None:
        """max first (min may not exceed it); a min refused because the global threshold moved is tried again."""
        for attempt in range(attempts):
            self.write("max_bytes", str(self.limit_bytes))
            try:
                self.write("min_bytes", str(self.limit_bytes * MIN_SHARE_PERCENT // 100))
                return
            except StackError:
                if attempt == attempts - 1:
                    raise

    def read(self, knob: str) -> str:
        return self.transport.read_file(f"{self.bdi}/{knob}").decode().strip()

    def write(self, knob: str, value: str) -> None:
        try:
            self.transport.write_file(f"{self.bdi}/{knob}", value.encode())
        except Exception as e:  # noqa: BLE001 - the transport's own error types differ; say which knob
            raise StackError(f"cannot set {self.bdi}/{knob} = {value}: {e}") from None

    def current(self) -> dict[str, str]:
        return {k: self.read(k) for k in ("max_bytes", "min_bytes", "strict_limit")}

    def __exit__(self, *exc) -> None:
        """Restore min before max (min may not exceed max), then strict_limit."""
        saved = dict(self.saved)
        failures = []
        for knob in ("min_ratio_fine", "max_ratio_fine", "strict_limit"):
            if knob in saved:
                try:
                    self.write(knob, saved[knob])
                except StackError as e:
                    failures.append(str(e))
        self.saved = []
        if failures:
            raise StackError("; ".join(failures))
        journal_for(self.transport).done(self._entry)
