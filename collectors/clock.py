"""The wall clock against the trace clock: what puts strace's timestamps on the kernel's.

strace stamps each call with CLOCK_REALTIME; ftrace (trace_clock mono) and blktrace stamp CLOCK_MONOTONIC. Their
difference is read on the target right before and right after the workload: each reading takes the closest of
many back-to-back (realtime, monotonic, realtime) triples, so it is exact to half the gap between the two
realtime reads (typically < 1 us). Two readings bound any slew of the wall clock (NTP) over the run; the parser
interpolates between them. Only the local host can be read this way (a phone's shell is far too slow for µs);
elsewhere analyzers/syscall.py falls back on the trace markers and says how uncertain that is.
"""

from __future__ import annotations

import time

SAMPLES = 200


def read_clock_offset() -> dict[str, int]:
    """{mono_ns, realtime_minus_mono_ns, error_ns} from the tightest of SAMPLES back-to-back readings."""
    best = None
    for _ in range(SAMPLES):
        r0 = time.clock_gettime_ns(time.CLOCK_REALTIME)
        m = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        r1 = time.clock_gettime_ns(time.CLOCK_REALTIME)
        if best is None or r1 - r0 < best[2] - best[0]:
            best = (r0, m, r1)
    r0, m, r1 = best
    return {"mono_ns": m, "realtime_minus_mono_ns": (r0 + r1) // 2 - m, "error_ns": (r1 - r0 + 1) // 2}
