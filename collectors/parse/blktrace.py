"""A set of blktrace files -> block_event and trace_marker rows, read by the decoder that is faster for its size:
blktrace_numpy.py below NUMPY_MAX_BYTES (no numba start), the compiled one of blktrace.py above. Both make the
same rows (tests hold them equal)."""

from __future__ import annotations

import os
from pathlib import Path

from mobiperf.collectors.parse.blktrace_format import NUMPY_MAX_BYTES, BlktraceTables


def parse_blktrace(paths: list[Path], rep: int = 0) -> BlktraceTables:
    """block_event and trace_marker rows of a set of blktrace files (per-CPU files or one stream), by the
    decoder that is faster for its size (NUMPY_MAX_BYTES)."""
    total = 0
    for p in paths:
        try:
            total += os.stat(p).st_size
        except OSError:
            pass  # the decoder says why it cannot read it
    if total < NUMPY_MAX_BYTES:
        from mobiperf.collectors.parse.blktrace_numpy import parse_blktrace_numpy

        return parse_blktrace_numpy(paths, rep)
    from mobiperf.collectors.parse.blktrace_compiled import parse_blktrace_compiled

    return parse_blktrace_compiled(paths, rep)
