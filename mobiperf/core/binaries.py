"""Where the reference binaries are: one function for the whole of mobiperf.

The reference binaries are the C programs of reference-impl/ (mobibench, bfuse, fjord, devmodel, fuse_wakeup.so)
built for this host, and the static phone builds beside them in <arch>/ (aarch64/, arm/, x86_64/). They are
looked for, in this order:

  1. $MOBIPERF_BIN, when it is set: a directory laid out like reference-impl/bin (taken as given, even empty:
     an explicit choice is never second-guessed)
  2. the install's data directory, <data>/share/mobiperf/bin, where `pip install .` (the wheel builds them,
     setup.py) and `make -C reference-impl install` put them;
     <data> is sysconfig's "data" path of the running Python: the virtual environment's prefix, or /usr/local
     for a system-wide `pip install`
  3. reference-impl/bin of the source tree this package sits in (a checkout, an editable install)

The first of 2 and 3 that exists is used; when neither does, the source tree's path is returned, so that the
messages about a missing binary name the place `make -C reference-impl` builds into.
"""

from __future__ import annotations

import os
import sysconfig
from pathlib import Path

ENV_VAR = "MOBIPERF_BIN"
INSTALL_SUBDIR = Path("share") / "mobiperf" / "bin"


def installed_bin_dir() -> Path:
    """<data>/share/mobiperf/bin of the running Python (where the wheel and `make -C reference-impl install` put the
    binaries)."""
    return Path(sysconfig.get_path("data")) / INSTALL_SUBDIR


def source_bin_dir() -> Path:
    """reference-impl/bin of the source tree this package was imported from (it may not exist: an install)."""
    return Path(__file__).resolve().parents[2] / "reference-impl" / "bin"


def reference_bin_dir() -> Path:
    """The directory of the reference binaries (see the module docstring for the order)."""
    chosen = os.environ.get(ENV_VAR)
    if chosen:
        return Path(chosen)
    for candidate in (installed_bin_dir(), source_bin_dir()):
        if candidate.is_dir():
            return candidate
    return source_bin_dir()
