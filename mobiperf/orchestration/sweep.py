"""Sweeps: one workload over a grid of stack and workload parameters, repeated, in a seeded random order,
resumable after an interruption.

A sweep lives in a directory:

    SWEEP/sweep.json        the manifest: the cells (parameter values), the seeded order of the units
                            (cell x repetition), and each unit's status, run directory and metrics
    SWEEP/runs/<unit>/      one `mobiperf run` directory per unit and attempt (c003-r1-a1, ...)
    SWEEP/runs/<unit>.log   what that `mobiperf run` printed
    SWEEP/matrix.html       the matrix report (heatmap + table with confidence intervals)

Each unit runs as a child `mobiperf run` in its own session, so a crash of one stack cannot take the sweep down,
and the child gets SIGINT when the sweep dies (PR_SET_PDEATHSIG), so even a SIGKILLed sweep leaves no mounted
stack behind: the child tears its stack down and exits. The manifest is rewritten atomically after every state
change; re-running the sweep on the same directory skips the units that are done and runs the others again
(a unit that was running when the sweep died gets a new attempt and a new run directory). A failed unit is
recorded with its error and the sweep goes on; `retry_failed` runs failed units again.

Parameters are a closed vocabulary (PARAMETERS); an unknown name or value is a UsageError listing the valid ones.
A combination that cannot run here (a filesystem the kernel lacks, a FUSE option on a native stack) is a
"skipped" cell with its reason, never an error of the whole sweep.
"""

from __future__ import annotations

import ctypes
import itertools
import json
import math
import os
import random
import re
import shlex
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable

from mobiperf.stack.cpu_share import remove_stale_cgroups
from mobiperf.core.errors import UsageError
from mobiperf.core.exit_status import describe_exit_status
from mobiperf.core.units import parse_duration_ns, parse_size

FORMAT_NAME = "mobiperf-sweep"
FORMAT_VERSION = 1
MANIFEST = "sweep.json"
DEFAULT_METRIC = "run.throughput"
# One vocabulary with `mobiperf run`/`compare`: workload.* is what the workload reports itself, run.* what mobiperf
# measured around it. Sweeps written before the rename are read with these names (and units) translated.
LEGACY_METRICS = {"e2e.throughput": ("run.throughput", 1.0), "e2e.tps": ("run.tps", 1.0),
                  "run.elapsed": ("run.workload_time", 1e9)}


def canonical_metric(name: str) -> str:
    """A metric name in today's vocabulary (e2e.throughput -> run.throughput)."""
    return LEGACY_METRICS.get(name, (name,))[0]
CHILD_STOP_TIMEOUT_S = 90.0      # a child tearing its stack down after SIGINT (FUSE daemons flush, devmodel exits)


# --- the parameter vocabulary ---------------------------------------------------------------------------------

ACCESS_MODES = {"seq-write": 0, "rand-write": 1, "seq-read": 2, "rand-read": 3, "append": 4}
SYNC_MODES = {"buffered": 0, "osync": 1, "fsync": 2, "direct": 3, "osync-direct": 4, "mmap": 5,
              "mmap-async": 6, "mmap-sync": 7, "fdatasync": 8}
SQLITE_JOURNALS = {"delete": 0, "truncate": 1, "persist": 2, "wal": 3, "memory": 4, "off": 5}
SQLITE_SYNC = {"off": 0, "normal": 1, "full": 2}
WORKLOADS = ("file", "sqlite-insert", "sqlite-update", "sqlite-delete")
LAYERS = ("native", "fuse", "bfuse", "fjord")
FILESYSTEMS = ("ext4", "xfs", "btrfs", "f2fs", "raw")   # raw: no filesystem, the bare loop device
EXT4_DATA_MODES = ("ordered", "journal", "writeback")
SCHEDULERS = ("none", "mq-deadline", "bfq", "kyber")
BFUSE_PRESETS = ("legacy", "bfuse", "nobuf", "zerocopy", "passthrough")
FJORD_PRESETS = ("native", "logging", "rambuf", "both", "fjord-ram", "fjord-both")


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
    from mobiperf.stack.devmodel import resolve_profile

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
    Parameter("device", "device model profile under the loop device (mobiperf.stack.devmodel), or none",
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
    "syscalls": "off", "compat": "1.0.8", "target": "local",
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


# --- from parameters to a `mobiperf run` ----------------------------------------------------------------------

@dataclass
class CellPlan:
    """What one cell runs: the `mobiperf run` arguments, or why it cannot run here."""

    stack: str = ""
    target: str = "local"
    scheduler: str | None = None
    device: str | None = None
    cpu: str = "host"
    dirty: str = "host"
    fuse_wakeup: str = "0"
    image_size: str = "1g"
    command: list[str] = field(default_factory=list)
    bytes_moved: int = 0          # what the file workload writes or reads, for run.throughput
    transactions: int = 0         # SQLite transactions, for run.tps
    skip: str | None = None
    target: str = "local"         # the `mobiperf run -t` of the cell; with --cluster, the Dask resource it needs


def kernel_filesystems() -> set[str]:
    try:
        text = Path("/proc/filesystems").read_text()
    except OSError:
        return set()
    return {line.split()[-1] for line in text.splitlines() if line.strip()}


def _phone_params(name: str) -> dict[str, str]:
    if name in ("", "none"):
        return {}
    from mobiperf.stack.phone import resolve_phone

    return resolve_phone(name).params()


def plan_cell(params: dict[str, str], *, available_fs: set[str] | None = None) -> CellPlan:
    """The run of one cell. Parameters that do not apply give a skipped cell with the reason."""
    p = {**DEFAULTS, **_phone_params(params.get("phone", "none")), **params}
    plan = CellPlan(cpu=p["cpu"], dirty=p["dirty"], fuse_wakeup=p["fuse_wakeup"], image_size=p["image_size"],
                    target=p["target"])
    fs = p["fs"]
    fs_known = kernel_filesystems() if available_fs is None else available_fs
    if plan.target != "local":
        given = [n for n in TARGET_HOST_ONLY if n in params and params[n] != DEFAULTS.get(n)]
        if given:
            plan.skip = (f"{', '.join(given)} model or build the emulated stack on this host; on {plan.target} the "
                         "phone's own storage is measured as it is")
            return plan
    elif fs == "raw":
        return _plan_raw(p, params, plan)
    elif fs not in fs_known:
        plan.skip = (f"this kernel has no {fs} (not in /proc/filesystems; modprobe {fs} or use a kernel with "
                     f"CONFIG_{fs.upper()}_FS)")
        return plan
    fs_opts = []
    if p["fs_journal"] == "external":
        if fs != "ext4":
            plan.skip = f"an external journal is an ext4 feature (mkfs.ext4 -J device=); fs is {fs}"
            return plan
        fs_opts.append("journal_dev=64M")
    if "fs_data" in params:
        if fs != "ext4":
            plan.skip = f"data={p['fs_data']} is an ext4 journal mode; fs is {fs}"
            return plan
        fs_opts.append(f"data={p['fs_data']}")
    layer = p["layer"]
    given_fuse = [o for o in FUSE_OPTIONS if o in params]
    if layer == "native":
        if given_fuse:
            plan.skip = (f"{', '.join(given_fuse)} appl{'y' if len(given_fuse) > 1 else 'ies'} to a FUSE "
                         "layer; layer is native")
            return plan
        stack = fs + (":" + ",".join(fs_opts) if fs_opts else "")
    else:
        daemon_opts = []
        for name in given_fuse:
            value = p[name]
            if name == "preset":
                valid = FJORD_PRESETS if layer == "fjord" else BFUSE_PRESETS
                if value not in valid:
                    plan.skip = f"preset {value} is not a {layer} preset ({', '.join(valid)})"
                    return plan
            if name in ("buffer", "entry", "flush_ms") and layer == "fjord":
                if name != "flush_ms":
                    plan.skip = f"{name} is a bFUSE option; layer is fjord"
                    return plan
            if name == "whitelist" and layer != "fjord":
                plan.skip = f"whitelist is a Fjord option; layer is {layer}"
                return plan
            if name == "whitelist":
                value = value.replace("/", ":")
            if name == "splice":
                value = "1" if value == "on" else "0"
            if name == "flush_ms":
                ms = parse_duration_ns(value) // 1_000_000
                value = str(ms) if layer == "fjord" else f"{ms}ms"
            daemon_opts.append(f"{_DAEMON_OPTION_NAMES.get(name, name)}={value}")
        stack = (fs + (":" + ",".join(fs_opts) if fs_opts else "") + f"+{layer}"
                 + (":" + ",".join(daemon_opts) if daemon_opts else ""))
    if plan.target != "local":   # the same layer over a directory of the phone's /data
        stack = f"dir:{TARGET_DIR}" + stack[len(fs):]
    plan.stack = stack
    plan.scheduler = None if "scheduler" not in params else p["scheduler"]
    plan.device = None if p["device"] == "none" else p["device"]
    workdir = p.get("dir") or (p.get("whitelist", ".").split(":")[0] if layer == "fjord" else ".")
    mobibench = ["mobibench", "-p", workdir, "-q", "--no-drop-caches"]
    if p["compat"] != "1.0.8":
        mobibench.insert(1, f"--compat={p['compat']}")
    else:
        mobibench.append("--json=-")  # full-precision figures and per-IO latency percentiles after the text
    if p["workload"] == "file":
        file_kib = parse_size(p["file_size"]) // 1024
        record_kib = parse_size(p["record"]) // 1024
        if record_kib < 1 or file_kib < record_kib:
            plan.skip = f"record {p['record']} must be at least 1k and at most the file size {p['file_size']}"
            return plan
        mobibench += ["-f", str(file_kib), "-r", str(record_kib), "-a", str(ACCESS_MODES[p["access"]]),
                      "-y", str(SYNC_MODES[p["sync"]]), "-t", p["threads"]]
        plan.bytes_moved = file_kib * 1024
    else:
        op = {"sqlite-insert": 0, "sqlite-update": 1, "sqlite-delete": 2}[p["workload"]]
        mobibench += ["-d", str(op), "-n", p["transactions"], "-j", str(SQLITE_JOURNALS[p["journal"]]),
                      "-s", str(SQLITE_SYNC[p["sqlite_sync"]])]
        plan.transactions = int(p["transactions"])
    if p["syscalls"] == "on":
        # -c writes the per-syscall table to stderr when the workload ends (raw/rep0/stderr.txt)
        mobibench = ["strace", "-f", "-qq", "-c", "-U", "calls,name", "--", *mobibench]
    script = shlex.join(mobibench)
    if p["workload"] == "file" and p["final_fsync"] == "on" and p["access"] in ("seq-write", "rand-write",
                                                                                 "append"):
        # The papers' throughput is the device's: buffered data must reach it inside the timed command.
        files = " ".join(shlex.quote(f"{workdir}/test.dat{i}") for i in range(int(p["threads"])))
        script += f" && sync {files}"
    plan.command = ["sh", "-c", script]
    return plan


def _plan_raw(p: dict[str, str], params: dict[str, str], plan: CellPlan) -> CellPlan:
    """The bare device (the paper's raw bars): dd writes the file size in records to $MOBIPERF_DEVICE, buffered
    and fsynced at the end (sync=buffered), or O_DIRECT (sync=direct). Filesystem and FUSE parameters do not
    apply."""
    not_raw = [n for n in ("fs_journal", "fs_data", *FUSE_OPTIONS) if n in params]
    if p["layer"] != "native" or not_raw:
        plan.skip = f"raw is the bare device: {', '.join(not_raw) or 'layer=' + p['layer']} does not apply"
        return plan
    if p["workload"] != "file" or p["access"] not in ("seq-write", "append") or p["sync"] not in ("buffered",
                                                                                                   "direct"):
        plan.skip = "raw runs the sequential file write only (access seq-write/append, sync buffered/direct)"
        return plan
    record = parse_size(p["record"])
    count = parse_size(p["file_size"]) // record
    if count < 1:
        plan.skip = f"record {p['record']} must be at most the file size {p['file_size']}"
        return plan
    flag = "oflag=direct" if p["sync"] == "direct" else ("conv=fsync" if p["final_fsync"] == "on" else "")
    plan.stack = "raw"
    plan.scheduler = params.get("scheduler")
    plan.device = None if p["device"] == "none" else p["device"]
    plan.bytes_moved = count * record
    plan.command = ["sh", "-c", f'dd if=/dev/zero of="$MOBIPERF_DEVICE" bs={record} count={count} {flag}'.rstrip()
                    + " status=none"]
    return plan


# --- metrics of one unit ---------------------------------------------------------------------------------------

def unit_metrics(run_path: Path, plan: CellPlan) -> tuple[dict[str, float], list[str]]:
    """Flat {metric: value} of a one-repetition run directory, and notes. Reads raw files itself, so a run whose
    analysis failed still has its workload, counter and syscall figures."""
    from mobiperf.core.metrics import metric_key

    meta = json.loads((run_path / "run.json").read_text())
    reps = meta.get("repetitions") or []
    if not reps:
        raise NoRepetition("the run recorded no repetition (interrupted or failed before the workload)")
    rep = reps[0]
    raw = run_path / "raw" / f"rep{rep['index']}"
    if rep.get("exit_code") != 0:
        raise UnitFailed(f"the workload failed ({describe_exit_status(rep.get('exit_code'))}): "
                         f"{_tail(raw / 'stderr.txt') or _tail(raw / 'stdout.txt')}")
    out: dict[str, float] = {}
    notes: list[str] = []
    elapsed_s = rep["workload_ns"] / 1e9
    out["run.workload_time"] = float(rep["workload_ns"])   # ns, as in `mobiperf compare`
    if plan.bytes_moved and elapsed_s > 0:
        out["run.throughput"] = plan.bytes_moved / elapsed_s
    if plan.transactions and elapsed_s > 0:
        out["run.tps"] = plan.transactions / elapsed_s
    stdout = raw / "stdout.txt"
    text = stdout.read_text(errors="replace") if stdout.exists() else ""
    if "[Messurement Result]" in text or '"mobibench_version"' in text:  # Mobibench's own spelling
        from mobiperf.collectors.parse.mobibench import parse_mobibench_result

        try:
            for name, v in parse_mobibench_result(text).items():
                out[name] = float(v["value"])
        except ValueError as e:
            notes.append(f"workload output not parsed: {e}")
    out.update(counter_metrics(rep.get("counters", {})))
    stderr = raw / "stderr.txt"
    if stderr.exists():
        out.update({f"syscall.{name}": calls for name, calls in parse_strace_counts(
            stderr.read_text(errors="replace")).items()})
    for m in rep.get("metrics", []) or []:
        out.setdefault(metric_key(m), float(m["value"]))
    try:
        out.update(timed_window_metrics(run_path))
    except Exception as e:  # noqa: BLE001 - a table another version wrote differently is a note, not a failure
        notes.append(f"no timed-window block figures: {type(e).__name__}: {e}")
    if meta.get("status") != "complete":
        notes.append(f"run status {meta.get('status')!r}: analysis did not finish; raw figures only")
    return out, notes


def timed_window_metrics(run_path: Path) -> dict[str, float]:
    """Block requests issued inside the workload's own timed window (Mobibench's timed_start/timed_end trace
    markers), so a file's preparation does not count: window.block.{requests,bytes}{op=...}, and the mean and
    median device time (D2C, issue -> complete) and block-layer time (Q2C, queue -> complete) in ns, and
    window.block.d2c.sum (ns of device time). {} when the run has no markers or no block table."""
    import polars as pl

    tables = run_path / "tables"
    if not (tables / "trace_marker.parquet").exists() or not (tables / "block_rq.parquet").exists():
        return {}
    marks = pl.read_parquet(tables / "trace_marker.parquet").filter(pl.col("rep") == 0)
    start = marks.filter(pl.col("text").str.contains("timed_start"))["ts"]
    end = marks.filter(pl.col("text").str.contains("timed_end"))["ts"]
    if start.len() == 0 or end.len() == 0:
        return {}
    rq = pl.read_parquet(tables / "block_rq.parquet").filter(
        (pl.col("rep") == 0) & pl.col("issue_ts").is_not_null() & pl.col("complete_ts").is_not_null()
        & (pl.col("issue_ts") >= start.min()) & (pl.col("complete_ts") <= end.max()))
    out: dict[str, float] = {}
    for (op,), group in rq.group_by(["op"]):
        d2c = (group["complete_ts"] - group["issue_ts"]).cast(pl.Float64)
        out[f"window.block.requests{{op={op}}}"] = float(group.height)
        out[f"window.block.bytes{{op={op}}}"] = float(group["size_bytes"].sum())
        out[f"window.block.d2c.mean{{op={op}}}"] = float(d2c.mean())
        out[f"window.block.d2c.p50{{op={op}}}"] = float(d2c.median())
        out[f"window.block.d2c.sum{{op={op}}}"] = float(d2c.sum())
        queued = group.filter(pl.col("queue_ts").is_not_null())
        if queued.height:
            q2c = (queued["complete_ts"] - queued["queue_ts"]).cast(pl.Float64)
            out[f"window.block.q2c.mean{{op={op}}}"] = float(q2c.mean())
            out[f"window.block.q2c.p50{{op={op}}}"] = float(q2c.median())
    out["window.elapsed"] = (end.max() - start.min()) / 1e9
    return out


def counter_metrics(counters: dict) -> dict[str, float]:
    """The FUSE daemons' and the device model's counters as flat metrics (bfuse.daemon_pwrite_calls,
    fuse.ops.write.requests, device.write.count, journal_device.flush.count, ...)."""
    from mobiperf.stack.devmodel import summarize_device_counters

    out: dict[str, float] = {}
    for name, data in counters.items():
        if not isinstance(data, dict) or "error" in data:
            continue
        if name.startswith("device-counters"):
            prefix = "device" if name.endswith("userdata") else "journal_device"
            out.update({prefix + k[len("device"):]: float(v) for k, v in summarize_device_counters(data).items()})
            continue
        layer = name.removesuffix("-counters")
        for key, value in (data.get("counters") or {}).items():
            if isinstance(value, (int, float)):
                out[f"{layer}.{key}"] = float(value)
        for op, c in (data.get("ops") or {}).items():
            if isinstance(c, dict):
                for key, value in c.items():
                    if isinstance(value, (int, float)):
                        out[f"{layer}.ops.{op}.{key}"] = float(value)
    return out


_STRACE_ROW = re.compile(r"^\s*(\d+)\s+(?:(\d+)\s+)?([a-z_0-9]+)\s*$")


def parse_strace_counts(text: str) -> dict[str, float]:
    """{syscall: calls} from the `strace -c -U calls,name` table (errors column optional); {} if absent."""
    out: dict[str, float] = {}
    in_table = False
    for line in text.splitlines():
        if re.match(r"^\s*calls\s+(errors\s+)?syscall\s*$", line):
            in_table = True
            continue
        if not in_table or line.startswith("-"):
            continue
        m = _STRACE_ROW.match(line)
        if m and m.group(3) != "total":
            out[m.group(3)] = out.get(m.group(3), 0.0) + float(m.group(1))
    return out


def _tail(path: Path, n: int = 400) -> str:
    try:
        return " ".join(path.read_text(errors="replace").split())[-n:]
    except OSError:
        return ""


def _error_of(log: Path) -> str:
    """What a child `mobiperf run` said its error was (its last `mobiperf: error:` line), else its log's tail."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    said = [line for line in lines if line.startswith("mobiperf: error: ")]
    return said[-1][len("mobiperf: error: "):][:400] if said else _tail(log, 300)


class UnitFailed(Exception):
    """A unit that ran but did not produce a measurement."""


class NoRepetition(UnitFailed):
    """A unit whose run stopped before its workload (its stack could not be set up, say): the run's error says why."""


# --- the manifest ----------------------------------------------------------------------------------------------

@dataclass
class SweepDefinition:
    """What a sweep measures: the cells, repetitions and the seed of the order."""

    cells: list[dict[str, str]]
    repeat: int = 3
    seed: int = 0
    metric: str = DEFAULT_METRIC
    name: str = "sweep"
    timeout_s: float = 1800.0

    def __post_init__(self) -> None:
        if not self.cells:
            raise UsageError("a sweep needs at least one cell")
        if self.repeat < 1:
            raise UsageError("a sweep needs at least one repetition (-n 1)")
        self.cells = [check_params(c) for c in self.cells]


class SweepDir:
    """The sweep directory and its manifest; every change is written atomically at once."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.manifest_path = self.path / MANIFEST

    def exists(self) -> bool:
        return self.manifest_path.exists()

    def read(self) -> dict:
        try:
            data = json.loads(self.manifest_path.read_text())
        except FileNotFoundError:
            raise UsageError(f"{self.path}: no sweep here ({MANIFEST} is missing)") from None
        except ValueError as e:
            raise UsageError(f"{self.manifest_path}: unreadable manifest: {e}") from None
        if data.get("format") != FORMAT_NAME:
            raise UsageError(f"{self.manifest_path} is not a mobiperf sweep manifest")
        return data

    def write(self, data: dict) -> None:
        tmp = self.manifest_path.with_name(f".{MANIFEST}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1))
        os.replace(tmp, self.manifest_path)

    def create_or_resume(self, definition: SweepDefinition | None, *, grow: bool = False) -> dict:
        """The manifest: created from `definition`, or the existing one when it holds the same cells and
        repetitions (a resume). `definition=None` resumes whatever is there. With `grow`, a definition that has
        every stored cell and more (a study that gained configurations) adds the new cells and their units,
        keeping what was measured."""
        if self.exists():
            data = self.read()
            if definition is not None:
                stored = [c["params"] for c in data["cells"]]
                new = [c for c in definition.cells if c not in stored]
                same_runs = data["repeat"] == definition.repeat and data["seed"] == definition.seed
                if grow and same_runs and all(c in definition.cells for c in stored):
                    if new:
                        self._add_cells(data, new)
                elif stored != definition.cells or not same_runs:
                    raise UsageError(f"{self.path} holds a different sweep ({len(stored)} cells, -n "
                                     f"{data['repeat']}, seed {data['seed']}); resume it without parameters or "
                                     "choose another -o")
            return data
        if definition is None:
            raise UsageError(f"{self.path}: no sweep to resume; give its parameters (-p NAME=V1,V2)")
        self.path.mkdir(parents=True, exist_ok=True)
        available = kernel_filesystems()
        cells = []
        for i, params in enumerate(definition.cells):
            plan = plan_cell(params, available_fs=available)
            cells.append({"id": f"c{i:03d}", "params": params, "status": "skipped" if plan.skip else "planned",
                          "reason": plan.skip})
        units = [(c["id"], r) for c in cells if c["status"] == "planned" for r in range(definition.repeat)]
        random.Random(definition.seed).shuffle(units)
        data = {"format": FORMAT_NAME, "version": FORMAT_VERSION, "name": definition.name,
                "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "repeat": definition.repeat, "seed": definition.seed, "metric": definition.metric,
                "timeout_s": definition.timeout_s, "cells": cells,
                "units": [{"cell": cid, "rep": r, "status": "pending", "attempts": 0, "run": None,
                           "metrics": {}, "error": None, "notes": []} for cid, r in units]}
        self.write(data)
        return data

    def _add_cells(self, data: dict, new: list[dict[str, str]]) -> None:
        available = kernel_filesystems()
        first = len(data["cells"])
        units = []
        for i, params in enumerate(new, first):
            plan = plan_cell(params, available_fs=available)
            data["cells"].append({"id": f"c{i:03d}", "params": params, "reason": plan.skip,
                                  "status": "skipped" if plan.skip else "planned"})
            if not plan.skip:
                units += [(f"c{i:03d}", r) for r in range(data["repeat"])]
        random.Random(data["seed"] + first).shuffle(units)
        data["units"] += [{"cell": cid, "rep": r, "status": "pending", "attempts": 0, "run": None, "metrics": {},
                           "error": None, "notes": []} for cid, r in units]
        data.pop("finished", None)
        self.write(data)


# --- running ---------------------------------------------------------------------------------------------------

@dataclass
class Progress:
    """Callbacks for the CLI; the defaults say nothing."""

    unit_started: Callable[[dict, int, int], None] = lambda unit, i, n: None
    unit_finished: Callable[[dict, int, int], None] = lambda unit, i, n: None


def run_sweep(path: Path, definition: SweepDefinition | None = None, *, retry_failed: bool = False,
              progress: Progress | None = None, python: str = sys.executable, grow: bool = False) -> dict:
    """Run (or continue) the sweep in `path` until every unit is done, failed or skipped; returns the manifest.

    KeyboardInterrupt (Ctrl-C, SIGTERM) stops the running child cleanly, marks its unit pending again and
    propagates; the next call continues from there."""
    sweep = SweepDir(path)
    data = sweep.create_or_resume(definition, grow=grow)
    lock = _lock_sweep(sweep)
    progress = progress or Progress()
    cells = {c["id"]: c for c in data["cells"]}
    _wait_for_orphans(data)
    remove_stale_cgroups()  # CPU shares of a `mobiperf run` that was SIGKILLed
    todo = [u for u in data["units"] if u["status"] in ("pending", "running")
            or (retry_failed and u["status"] == "failed")]
    restore = _sigterm_as_interrupt()
    try:
        for i, unit in enumerate(todo, 1):
            progress.unit_started(unit, i, len(todo))
            _run_unit(sweep, data, cells[unit["cell"]], unit, python)
            progress.unit_finished(unit, i, len(todo))
    finally:
        restore()
        lock.close()
    data["finished"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    sweep.write(data)
    return data


def _lock_sweep(sweep: SweepDir):
    """One sweep process per directory: a second one would run the same units twice."""
    import fcntl

    lock = open(sweep.path / ".lock", "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.close()
        raise UsageError(f"another mobiperf sweep is running in {sweep.path}; wait for it or stop it") from None
    return lock


def _run_unit(sweep: SweepDir, data: dict, cell: dict, unit: dict, python: str) -> None:
    plan = plan_cell(cell["params"])
    unit["attempts"] += 1
    name = f"{cell['id']}-r{unit['rep']}-a{unit['attempts']}"
    run_path = sweep.path / "runs" / name
    run_path.parent.mkdir(exist_ok=True)
    argv = unit_argv(plan, run_path, int(data.get("timeout_s", 1800)), python)
    unit.update(status="running", run=str(run_path.relative_to(sweep.path)), error=None, notes=[],
                started=time.time(), argv=argv)
    log = sweep.path / "runs" / f"{name}.log"
    with open(log, "wb") as out:
        child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                 start_new_session=True, preexec_fn=_die_with_parent())
        unit["pid"] = child.pid
        sweep.write(data)
        try:
            code = child.wait(timeout=data.get("timeout_s", 1800) + 300)
        except BaseException:
            _stop_child(child)
            unit.update(status="pending", pid=None, error="interrupted; runs again when the sweep is resumed")
            sweep.write(data)
            raise
    unit["pid"] = None
    unit["elapsed_s"] = round(time.time() - unit.pop("started"), 3)
    try:
        if not (run_path / "run.json").exists():
            raise UnitFailed(f"mobiperf run ended ({describe_exit_status(code)}) before creating the run: "
                             f"{_tail(log)}")
        unit["metrics"], unit["notes"] = unit_metrics(run_path, plan)
        unit["status"] = "done"
        if code != 0:
            unit["notes"].append(f"mobiperf run ended ({describe_exit_status(code)}): {_tail(log, 300)}")
    except UnitFailed as e:
        why = f"mobiperf run exited with status {code}: {_error_of(log)}" if code and isinstance(e, NoRepetition) \
            else str(e)
        unit.update(status="failed", error=why, metrics={})
    except (OSError, ValueError, KeyError) as e:
        unit.update(status="failed", error=f"unreadable run {run_path}: {e}", metrics={})
    sweep.write(data)


def unit_argv(plan: CellPlan, run_path: Path, timeout_s: int, python: str = sys.executable) -> list[str]:
    """The child `mobiperf run` of one unit: the stack, the phone model options, the workload."""
    argv = [python, "-m", "mobiperf", "run", "--stack", plan.stack, "--image-size", plan.image_size,
            "-o", str(run_path), "--timeout", f"{timeout_s}s", "--no-report"]
    if plan.target != "local":
        argv[4:4] = ["-t", plan.target]
    if plan.scheduler:
        argv += ["--scheduler", plan.scheduler]
    if plan.target != "local":
        argv += ["-t", plan.target]
    if plan.device:
        argv += ["--device", plan.device]
    if plan.dirty != "host":
        argv += ["--dirty-limit", plan.dirty]
    if plan.cpu != "host":
        argv += ["--cpu", plan.cpu]
    if plan.fuse_wakeup != "0":
        argv += ["--fuse-wakeup", plan.fuse_wakeup]
    return argv + ["--", *plan.command]


def dry_run_script(cells: list[dict[str, str]], output: Path, repeat: int, timeout_s: int) -> str:
    """What a sweep would run, as a shell script: per cell a comment with its parameters, then its `mobiperf run`
    with every argument quoted (shlex), so that each line can be pasted into a shell; a skipped cell is a comment
    saying why."""
    lines = [f"# mobiperf sweep -o {shlex.quote(str(output))}: {len(cells)} cells, -n {repeat} each",
             "# (the sweep itself runs every repetition as a run of its own, in a seeded random order)"]
    for i, cell in enumerate(cells):
        plan = plan_cell(cell)
        lines.append(f"# c{i:03d}  " + " ".join(f"{k}={v}" for k, v in cell.items()))
        if plan.skip:
            lines.append(f"#   skipped: {plan.skip}")
            continue
        argv = unit_argv(plan, Path(output) / "runs" / f"c{i:03d}", timeout_s, python="mobiperf")
        argv = ["mobiperf", *argv[3:]]          # unit_argv starts with `python -m mobiperf`
        at = argv.index("run") + 1
        lines.append(shlex.join([*argv[:at], "-n", str(repeat), *argv[at:]]))
    return "\n".join(lines) + "\n"


def _stop_child(child: subprocess.Popen) -> None:
    """SIGINT (the child's `mobiperf run` tears its stack down), then SIGKILL if it hangs."""
    if child.poll() is not None:
        return
    try:
        child.send_signal(signal.SIGINT)
        child.wait(timeout=CHILD_STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait(timeout=10)
    except KeyboardInterrupt:  # a second Ctrl-C: stop waiting, the child still got its SIGINT
        pass


def _die_with_parent() -> Callable[[], None]:
    """preexec_fn: SIGINT when the sweep dies (even by SIGKILL), so the child's stack comes down."""
    parent = os.getpid()

    def setup() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGINT, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died before prctl took effect
            os.kill(os.getpid(), signal.SIGINT)
    return setup


def _wait_for_orphans(data: dict) -> None:
    """A unit left `running` by a killed sweep: its child got SIGINT and is taking its stack down; wait for it
    so the resumed sweep does not compete with it."""
    for unit in data["units"]:
        pid = unit.get("pid")
        if unit["status"] != "running" or not pid:
            continue
        deadline = time.monotonic() + CHILD_STOP_TIMEOUT_S
        while time.monotonic() < deadline and _is_our_child_run(pid, unit.get("run") or ""):
            time.sleep(0.2)
        unit["pid"] = None


def _is_our_child_run(pid: int, run: str) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False
    return "mobiperf" in cmdline and run.split("/")[-1] in cmdline


def _sigterm_as_interrupt() -> Callable[[], None]:
    """SIGTERM stops a sweep the way Ctrl-C does (the child is stopped cleanly, the manifest saved)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def handler(signum, frame):
        from mobiperf.core.signals import Stopped

        raise Stopped(signum)
    old = signal.signal(signal.SIGTERM, handler)
    return lambda: signal.signal(signal.SIGTERM, old)


# --- the results ----------------------------------------------------------------------------------------------

@dataclass
class CellSummary:
    """One cell's figures over its repetitions."""

    cell: str
    params: dict[str, str]
    status: str                     # done (every rep), partial, failed, skipped, pending
    reason: str | None
    values: dict[str, list[float]]  # metric -> one value per successful repetition

    def stat(self, metric: str, *, confidence: float = 0.95, seed: int = 0) -> dict[str, float]:
        """n, median, and a percentile-bootstrap confidence interval of the median (nan below 2 values)."""
        values = self.values.get(canonical_metric(metric), [])
        return summarize_values(values, confidence=confidence, seed=seed)


def summarize_values(values: list[float], *, confidence: float = 0.95, seed: int = 0) -> dict[str, float]:
    import numpy as np

    n = len(values)
    if n == 0:
        return {"n": 0, "median": math.nan, "ci_low": math.nan, "ci_high": math.nan, "min": math.nan,
                "max": math.nan}
    a = np.asarray(values, dtype=float)
    med = float(np.median(a))
    lo = hi = math.nan
    if n >= 2:
        rng = np.random.default_rng(seed)
        boots = np.median(a[rng.integers(0, n, size=(2000, n))], axis=1)
        tail = (1 - confidence) / 2
        lo, hi = (float(x) for x in np.quantile(boots, [tail, 1 - tail]))
    return {"n": n, "median": med, "ci_low": lo, "ci_high": hi, "min": float(a.min()), "max": float(a.max())}


def summarize(data: dict) -> list[CellSummary]:
    """Per cell: the metric values of its done units, and its overall status."""
    out = []
    for cell in data["cells"]:
        units = [u for u in data["units"] if u["cell"] == cell["id"]]
        values: dict[str, list[float]] = {}
        for u in sorted(units, key=lambda u: u["rep"]):
            if u["status"] == "done":
                for k, v in u["metrics"].items():
                    name, scale = LEGACY_METRICS.get(k, (k, 1.0))
                    values.setdefault(name, []).append(v * scale)
        if cell["status"] == "skipped":
            status, reason = "skipped", cell.get("reason")
        else:
            statuses = {u["status"] for u in units}
            errors = [u["error"] for u in units if u["status"] == "failed" and u.get("error")]
            reason = errors[0] if errors else None
            if statuses == {"done"}:
                status = "done"
            elif statuses <= {"failed"}:
                status = "failed"
            elif "done" in statuses:
                status = "partial"
            else:
                status = "pending" if statuses & {"pending", "running"} else "failed"
        out.append(CellSummary(cell["id"], cell["params"], status, reason, values))
    return out


def varying_params(data: dict) -> list[str]:
    """The parameters whose value differs between cells, in first-seen order."""
    names: list[str] = []
    for c in data["cells"]:
        for k in c["params"]:
            if k not in names:
                names.append(k)
    return [n for n in names if len({c["params"].get(n, DEFAULTS.get(n, "")) for c in data["cells"]}) > 1]


def status_counts(data: dict) -> dict[str, int]:
    counts: dict[str, int] = {}
    for u in data["units"]:
        counts[u["status"]] = counts.get(u["status"], 0) + 1
    skipped = sum(1 for c in data["cells"] if c["status"] == "skipped")
    if skipped:
        counts["skipped cells"] = skipped
    return counts


def format_matrix_text(data: dict, metric: str | None = None) -> str:
    """The matrix as a text table: one row per cell, the varying parameters, n, median and CI of `metric`."""
    from mobiperf.core.metrics import format_value

    metric = canonical_metric(metric or data.get("metric", DEFAULT_METRIC))
    unit = metric_unit(metric)
    names = varying_params(data) or list(data["cells"][0]["params"])[:1]
    rows = [[*names, "status", "n", f"median {metric}", "95% CI"]]
    for s in summarize(data):
        st = s.stat(metric)
        fmt = (lambda v: "-" if math.isnan(v) else format_value({"value": v, "unit": unit}))
        ci = "-" if math.isnan(st["ci_low"]) else f"[{fmt(st['ci_low'])}, {fmt(st['ci_high'])}]"
        note = s.status if s.status in ("done",) else f"{s.status}: {(s.reason or '')[:60]}"
        rows.append([*(s.params.get(n, DEFAULTS.get(n, "")) for n in names), note, str(st["n"]),
                     fmt(st["median"]), ci])
    return format_rows(rows)


def sweep_matrix(data: dict, metric: str | None = None):
    """The cells of a sweep with the statistics of `metric` (default: the sweep's), for the matrix page."""
    import polars as pl

    from mobiperf.reports.study_page import Matrix

    metric = canonical_metric(metric or data.get("metric") or DEFAULT_METRIC)
    names = list(dict.fromkeys(k for c in data["cells"] for k in c["params"]))
    rows = []
    for s in summarize(data):
        st = s.stat(metric)
        rows.append({"cell": s.cell, **{n: s.params.get(n, DEFAULTS.get(n, "")) for n in names},
                     "status": s.status, "reason": s.reason, **{k: st[k] for k in ("n", "median", "ci_low",
                                                                                    "ci_high", "min", "max")}})
    schema = {"cell": pl.Utf8, **{n: pl.Utf8 for n in names}, "status": pl.Utf8, "reason": pl.Utf8,
              "n": pl.Int64, **{k: pl.Float64 for k in ("median", "ci_low", "ci_high", "min", "max")}}
    varying = varying_params(data)
    counts = ", ".join(f"{v} {k}" for k, v in status_counts(data).items())
    intro = (f"{len(data['cells'])} cells × {data['repeat']} repetitions, seeded order (seed {data['seed']}); "
             f"units: {counts}.")
    return Matrix(pl.DataFrame(rows, schema=schema), metric, metric_unit(metric), varying,
                  varying or sorted(names), intro)


def write_matrix_page(data: dict, path: Path, *, metric: str | None = None) -> Path:
    """SWEEP/matrix.html: the heatmap and the table of `metric` (default: the sweep's) over the cells."""
    from mobiperf.reports.study_page import write_matrix_page as write_page

    return write_page(sweep_matrix(data, metric), path, name=data.get("name", ""))


def format_rows(rows: list[list[str]]) -> str:
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(str(v).ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines) + "\n"


_UNITS = (("*throughput*", "B/s"), ("*.tps", "tx/s"), ("*.iops", "IOPS"), ("run.workload_time", "ns"),
          ("*elapsed*", "s"),
          ("latency.*", "ns"), ("*.bytes", "B"))


def metric_unit(metric: str) -> str:
    import fnmatch

    for pattern, unit in _UNITS:
        if fnmatch.fnmatchcase(metric, pattern):
            return unit
    return "count"
