"""Sizes and durations as users write them: `4k`, `512k`, `8M`, `1G`; `10ms`, `2s`, `500us`.

Sizes are binary (k = 1024), as in dd, fio and the papers' "4 KB" records.
"""

from __future__ import annotations

import re

from mobiperf.core.errors import UsageError

_SIZE_SUFFIX = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_DURATION_NS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000, "m": 60_000_000_000}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)
_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ns|us|ms|s|m)?\s*$")


def parse_size(text: str | int) -> int:
    """Bytes in `text`: `4096`, `4k`, `512K`, `8M`, `1g`, `4KiB`."""
    if isinstance(text, int):
        return text
    m = _SIZE_RE.match(text)
    if not m:
        raise UsageError(f"not a size: {text!r} (examples: 4096, 4k, 512k, 8M, 1G)")
    return int(float(m.group(1)) * _SIZE_SUFFIX[m.group(2).lower()])


def parse_duration_ns(text: str) -> int:
    """Nanoseconds in `text`: `10ms`, `2s`, `500us`; a bare number is seconds."""
    m = _DURATION_RE.match(text)
    if not m:
        raise UsageError(f"not a duration: {text!r} (examples: 500us, 10ms, 2s)")
    return int(float(m.group(1)) * _DURATION_NS[m.group(2) or "s"])


def format_size(n: float) -> str:
    """`4096` -> `4 KiB`; whole units where exact."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= scale:
            v = n / scale
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.1f} {unit}"
    return f"{n:.0f} B"


def format_duration_ns(ns: float) -> str:
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.0f} ns"
