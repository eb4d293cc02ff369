"""The sweep's parameters: a closed vocabulary, each name with what it means and how a value is checked and
normalised. An unknown name or value is a UsageError listing the valid ones. The names of filesystems, schedulers,
layers, presets and the generator's modes are mobiperf.core.vocabulary's, shared with the stack and the studies.
"""

from __future__ import annotations

import itertools
import re
import textwrap
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from mobiperf.core.errors import UsageError
from mobiperf.core.units import parse_duration_ns, parse_size
from mobiperf.core.vocabulary import (ACCESS_MODES, BFUSE_PRESETS, EXT4_DATA_MODES, FILESYSTEMS, FJORD_PRESETS, LAYERS,
                                      SCHEDULERS, SQLITE_JOURNALS, SQLITE_SYNC, SYNC_MODES, WORKLOADS)


@dataclass(frozen=True)
class Parameter:
    """One sweepable knob: its name, what it means, and how a value is checked and normalised."""

    name: str
    help: str
    normalise: Callable[[str], str]
    choices: tuple[str, ...] = ()

    def check(self, value: Any) -> str:
        text = str(value).strip()
        try:
            return self.normalise(text)
        except UsageError as e:
            raise UsageError(f"bad value {text!r} for sweep parameter {self.name!r}: {e}") from None


def _choice(choices: Iterable[str]) -> Callable[[str], str]:
    options = tuple(choices)

    def check(text: str) -> str:
        low = text.lower()
        if low not in options:
            raise UsageError(f"valid values: {', '.join(options)}")
        return low
    return check


def _size(text: str) -> str:
    parse_size(text)
    return text.lower()


def _count(text: str) -> str:
    if not text.isdigit() or int(text) < 1:
        raise UsageError("a positive whole number")
    return str(int(text))


def _on_off(text: str) -> str:
    return _choice(("on", "off"))({"1": "on", "0": "off", "true": "on", "false": "off"}.get(text.lower(), text))


def _duration(text: str) -> str:
    parse_duration_ns(text)
    return text


def _profile(text: str) -> str:
    from mobiperf.stack.device_model import resolve_profile

    if text.lower() in ("", "none", "off"):
        return "none"
    resolve_profile(text)
    return text


def _cpu_share(text: str) -> str:
    from mobiperf.stack.cpu_share import parse_cpu_share

    return parse_cpu_share(text)


def _dirty(text: str) -> str:
    from mobiperf.stack.dirty_limit import parse_dirty_limit

    return "host" if parse_dirty_limit(text) is None else text.lower()


def _wakeup(text: str) -> str:
    if text in ("", "0", "off", "none"):
        return "0"
    parse_duration_ns(text)
    return text


def _phone(text: str) -> str:
    from mobiperf.stack.phone import resolve_phone

    if text.lower() in ("", "none", "host"):
        return "none"
    return resolve_phone(text.lower()).name


def _target(text: str) -> str:
    if text in ("local", "adb") or re.fullmatch(r"adb:[A-Za-z0-9._:-]+", text):
        return text
    raise UsageError("local, adb or adb:SERIAL")


def _free_text(text: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9._:/-]+", text):
        raise UsageError("letters, digits and . _ : / - only")
    return text


PARAMETERS: dict[str, Parameter] = {p.name: p for p in (
    Parameter("fs", "filesystem of the data partition (raw: none, the file workload writes the bare device with "
              "dd)", _choice(FILESYSTEMS), FILESYSTEMS),
    Parameter("fs_data", "ext4 journal mode (data=)", _choice(EXT4_DATA_MODES), EXT4_DATA_MODES),
    Parameter("fs_journal", "ext4 journal: internal, or external on a second loop device (seed 002)",
              _choice(("internal", "external")), ("internal", "external")),
    Parameter("scheduler", "IO scheduler of the loop device", _choice(SCHEDULERS), SCHEDULERS),
    Parameter("device", "device model profile under the loop device (mobiperf.stack.device_model), or none",
              _profile, ("none", "emmc-2012", "ufs-2020", "host")),
    Parameter("phone", "phone profile: device + dirty + cpu + fuse_wakeup at once (mobiperf.stack.phone); explicit "
              "values of those override it", _phone, ("none", "galaxy-s3-2012")),
    Parameter("cpu", "CPU share of one core for the workload and its FUSE daemons (cgroup quota): a phone's CPU",
              _cpu_share, ("host", "15%", "25%")),
    Parameter("dirty", "dirty page limit of the stack's data device (per-device BDI limit): a phone's memory",
              _dirty, ("host", "64m")),
    Parameter("fuse_wakeup", "wake-up latency added to every FUSE request in the daemons: a phone's scheduler",
              _wakeup, ("0", "430us")),
    Parameter("image_size", "size of the emulated data partition", _size),
    Parameter("layer", "FUSE layer over the filesystem (native = none)", _choice(LAYERS), LAYERS),
    Parameter("preset", "preset of the FUSE layer (bfuse: legacy/bfuse/nobuf/zerocopy/passthrough; fjord: native/"
              "logging/rambuf/both/fjord-ram/fjord-both)", _choice(BFUSE_PRESETS + FJORD_PRESETS),
              BFUSE_PRESETS + FJORD_PRESETS),
    Parameter("io_unit", "FUSE IO unit (max_write)", _size),
    Parameter("buffer", "bFUSE write buffer (0 = off)", _size),
    Parameter("entry", "bFUSE buffer entry size", _size),
    Parameter("flush_ms", "bFUSE management thread period, 1ms..60s (Fjord: age bound)", _duration),
    Parameter("fuse_threads", "FUSE daemon worker threads", _count),
    Parameter("splice", "zero-copy splice in the FUSE daemon", _on_off, ("on", "off")),
    Parameter("whitelist", "Fjord whitelisted directory (the workload runs in it)", _free_text),
    Parameter("dir", "directory of the workload, relative to the top of the stack (default: the Fjord whitelist, "
              "else the top)", _free_text),
    Parameter("workload", "file (Mobibench file IO) or sqlite-insert/-update/-delete", _choice(WORKLOADS),
              WORKLOADS),
    Parameter("access", "file access pattern", _choice(ACCESS_MODES), tuple(ACCESS_MODES)),
    Parameter("sync", "file sync mode", _choice(SYNC_MODES), tuple(SYNC_MODES)),
    Parameter("record", "record (IO) size of the file workload", _size),
    Parameter("file_size", "file size (all threads together)", _size),
    Parameter("threads", "workload threads", _count),
    Parameter("final_fsync", "fsync the files at the end, inside the timed command", _on_off, ("on", "off")),
    Parameter("journal", "SQLite journal mode", _choice(SQLITE_JOURNALS), tuple(SQLITE_JOURNALS)),
    Parameter("sqlite_sync", "SQLite PRAGMA synchronous", _choice(SQLITE_SYNC), tuple(SQLITE_SYNC)),
    Parameter("transactions", "SQLite transactions", _count),
    Parameter("compat", "Mobibench semantics: 1.0.8, or 1.0.1 (2013: one autocommit statement per transaction on one "
              "table, as the papers ran it)", _choice(("1.0.8", "1.0.1")), ("1.0.8", "1.0.1")),
    Parameter("syscalls", "count the workload's system calls with strace -c (slows it down)", _on_off,
              ("on", "off")),
    Parameter("target", "where the cell runs: local (the emulated stack on this host) or adb[:SERIAL] (a phone's "
              "own storage, a directory of its /data with the FUSE layer over it; the host-side models and the "
              "filesystem parameters do not apply; with --cluster, the worker offering that target as a Dask "
              "resource)", _target),
)}

DEFAULTS: dict[str, str] = {
    "target": "local", "fs": "ext4", "fs_journal": "internal", "phone": "none", "device": "none", "cpu": "host",
    "dirty": "host",
    "fuse_wakeup": "0", "image_size": "1g", "layer": "native",
    "workload": "file", "access": "append", "sync": "buffered", "record": "512k", "file_size": "64m",
    "threads": "1", "final_fsync": "on", "journal": "truncate", "sqlite_sync": "full", "transactions": "100",
    "syscalls": "off", "compat": "1.0.8",
}
# On a target (a phone), cells run on a directory of its data partition; these parameters do not apply there.
TARGET_DIR = "/data/local/tmp/mobiperf-sweep"
TARGET_HOST_ONLY = ("fs", "fs_data", "fs_journal", "scheduler", "device", "phone", "cpu", "dirty", "fuse_wakeup")
FUSE_OPTIONS = ("preset", "io_unit", "buffer", "entry", "flush_ms", "fuse_threads", "splice", "whitelist")
_DAEMON_OPTION_NAMES = {"fuse_threads": "threads"}


def describe_parameters() -> str:
    """The parameter vocabulary for --help and error messages."""
    lines = []
    for p in PARAMETERS.values():
        values = f" ({'|'.join(p.choices)})" if p.choices else ""
        default = f" [default {DEFAULTS[p.name]}]" if p.name in DEFAULTS else ""
        lines += textwrap.wrap(f"{p.help}{values}{default}", 100, initial_indent=f"  {p.name:<13}",
                               subsequent_indent=" " * 15, break_on_hyphens=False)
    return "\n".join(lines)


def check_params(params: dict[str, Any]) -> dict[str, str]:
    """Normalised parameter values; UsageError naming the valid parameters for an unknown name."""
    out = {}
    for name, value in params.items():
        if name not in PARAMETERS:
            raise UsageError(f"unknown sweep parameter {name!r}; valid parameters: {', '.join(PARAMETERS)}")
        out[name] = PARAMETERS[name].check(value)
    return out


def parse_grid(items: Iterable[str]) -> dict[str, list[str]]:
    """`name=v1,v2` items (the -p options) -> {name: [values]}, checked and normalised."""
    grid: dict[str, list[str]] = {}
    for item in items:
        name, eq, values = item.partition("=")
        name = name.strip()
        if not eq or not values.strip():
            raise UsageError(f"sweep parameter {item!r} is not NAME=VALUE[,VALUE...] (e.g. fs=ext4,xfs)")
        if name not in PARAMETERS:
            raise UsageError(f"unknown sweep parameter {name!r}; valid parameters: {', '.join(PARAMETERS)}")
        if name in grid:
            raise UsageError(f"sweep parameter {name!r} given twice; list its values once: {name}=A,B")
        grid[name] = [PARAMETERS[name].check(v) for v in values.split(",")]
    return grid


def grid_cells(grid: dict[str, list[str]], fixed: dict[str, str] | None = None) -> list[dict[str, str]]:
    """Every combination of the grid's values (in the order given), on top of `fixed`."""
    names = list(grid)
    return [{**(fixed or {}), **dict(zip(names, combo))} for combo in itertools.product(*(grid[n] for n in names))]
