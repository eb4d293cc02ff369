"""From a cell's parameters to the run it is: a CellPlan holding the `mobiperf run` arguments (the stack, the phone
models, the workload's command), or why the cell cannot run here (a filesystem the kernel lacks, a FUSE option on a
native stack: a "skipped" cell, never an error of the whole sweep).

A cell is one of three kinds: the bare device (fs=raw, dd writes it), the generator's file IO, or its SQLite
transactions; the stack under the last two is the same (a filesystem with its options, a FUSE layer with its
daemon's options, or on a phone a directory of its /data with the layer over it).
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

from mobiperf.core.units import parse_duration_ns, parse_size
from mobiperf.core.vocabulary import ACCESS_MODES, PRESETS, RAW, SQLITE_JOURNALS, SQLITE_OPS, SQLITE_SYNC, SYNC_MODES
from mobiperf.orchestration.run_request import RunRequest, write_request
from mobiperf.orchestration.sweep.params import (_DAEMON_OPTION_NAMES, DEFAULTS, FUSE_OPTIONS, TARGET_DIR,
                                                 TARGET_HOST_ONLY)
from mobiperf.stack.cpu_share import parse_cpu_share
from mobiperf.stack.dirty_limit import parse_dirty_limit
from mobiperf.stack.spec import Layer, StackSpec, check_stack, parse_image_size

WRITES = ("seq-write", "rand-write", "append")


@dataclass
class CellPlan:
    """What one cell runs: the `mobiperf run` arguments, or why it cannot run here."""

    spec: StackSpec | None = None   # the stack as typed layers (None: a skipped cell)
    target: str = "local"         # the `mobiperf run -t` of the cell; with --cluster, the Dask resource it needs
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

    @property
    def stack(self) -> str:
        """The stack as `mobiperf run --stack` spells it (what --dry-run prints)."""
        return str(self.spec) if self.spec else ""


class _Skip(Exception):
    """A parameter that does not apply to the cell: the cell is skipped with this reason."""


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
    try:
        if plan.target == "local" and p["fs"] == RAW:
            _plan_raw(p, params, plan)
            return plan
        plan.spec = _stack(p, params, plan.target, kernel_filesystems() if available_fs is None else available_fs)
        plan.scheduler = None if "scheduler" not in params else p["scheduler"]
        plan.device = None if p["device"] == "none" else p["device"]
        if p["workload"] == "file":
            mobibench, plan.bytes_moved = _file_workload(p)
        else:
            mobibench, plan.transactions = _sqlite_workload(p)
        plan.command = _command(p, mobibench)
    except _Skip as e:
        plan.skip = str(e)
    return plan


def _stack(p: dict[str, str], params: dict[str, str], target: str, fs_known: set[str]) -> StackSpec:
    """The stack of a cell: the filesystem with its options, and the FUSE layer with its daemon's options; on a
    target (a phone), the same layer over a directory of its /data."""
    fs = p["fs"]
    if target != "local":
        given = [n for n in TARGET_HOST_ONLY if n in params and params[n] != DEFAULTS.get(n)]
        if given:
            raise _Skip(f"{', '.join(given)} model or build the emulated stack on this host; on {target} the "
                        "phone's own storage is measured as it is")
    elif fs not in fs_known:
        raise _Skip(f"this kernel has no {fs} (not in /proc/filesystems; modprobe {fs} or use a kernel with "
                    f"CONFIG_{fs.upper()}_FS)")
    bottom = Layer(fs, _filesystem_options(p, params)) if target == "local" else Layer("dir", {"path": TARGET_DIR})
    if p["layer"] == "native":
        given_fuse = [o for o in FUSE_OPTIONS if o in params]
        if given_fuse:
            raise _Skip(f"{', '.join(given_fuse)} appl{'y' if len(given_fuse) > 1 else 'ies'} to a FUSE layer; "
                        "layer is native")
        return check_stack(StackSpec(bottom))
    return check_stack(StackSpec(bottom, (Layer(p["layer"], _daemon_options(p, params)),)))


def _filesystem_options(p: dict[str, str], params: dict[str, str]) -> dict[str, str]:
    """ext4's external journal and journal mode: the only filesystem options a sweep sets."""
    fs, options = p["fs"], {}
    if p["fs_journal"] == "external":
        if fs != "ext4":
            raise _Skip(f"an external journal is an ext4 feature (mkfs.ext4 -J device=); fs is {fs}")
        options["journal_dev"] = "64M"
    if "fs_data" in params:
        if fs != "ext4":
            raise _Skip(f"data={p['fs_data']} is an ext4 journal mode; fs is {fs}")
        options["data"] = p["fs_data"]
    return options


def _daemon_options(p: dict[str, str], params: dict[str, str]) -> dict[str, str]:
    """The FUSE daemon's options of a cell, in the daemon's own spelling (flush_ms=10ms for bfuse, 10 for fjord)."""
    layer = p["layer"]
    options = {}
    for name in (o for o in FUSE_OPTIONS if o in params):
        value = p[name]
        if name == "preset" and value not in PRESETS[layer]:
            raise _Skip(f"preset {value} is not a {layer} preset ({', '.join(PRESETS[layer])})")
        if name in ("buffer", "entry") and layer == "fjord":
            raise _Skip(f"{name} is a bFUSE option; layer is fjord")
        if name == "whitelist":
            if layer != "fjord":
                raise _Skip(f"whitelist is a Fjord option; layer is {layer}")
            value = value.replace("/", ":")
        if name == "splice":
            value = "1" if value == "on" else "0"
        if name == "flush_ms":
            ms = parse_duration_ns(value) // 1_000_000
            value = str(ms) if layer == "fjord" else f"{ms}ms"
        options[_DAEMON_OPTION_NAMES.get(name, name)] = value
    return options


def _workdir(p: dict[str, str]) -> str:
    """The workload's directory, relative to the top of the stack: `dir`, else Fjord's whitelist, else the top."""
    return p.get("dir") or (p.get("whitelist", ".").split(":")[0] if p["layer"] == "fjord" else ".")


def _mobibench(p: dict[str, str]) -> list[str]:
    """The generator's command line both workloads start with."""
    mobibench = ["mobibench", "-p", _workdir(p), "-q", "--no-drop-caches"]
    if p["compat"] != "1.0.8":
        mobibench.insert(1, f"--compat={p['compat']}")
    else:
        mobibench.append("--json=-")  # full-precision figures and per-IO latency percentiles after the text
    return mobibench


def _file_workload(p: dict[str, str]) -> tuple[list[str], int]:
    """The generator's file IO, and the bytes it moves (for run.throughput)."""
    file_kib = parse_size(p["file_size"]) // 1024
    record_kib = parse_size(p["record"]) // 1024
    if record_kib < 1 or file_kib < record_kib:
        raise _Skip(f"record {p['record']} must be at least 1k and at most the file size {p['file_size']}")
    return [*_mobibench(p), "-f", str(file_kib), "-r", str(record_kib), "-a", str(ACCESS_MODES[p["access"]]),
            "-y", str(SYNC_MODES[p["sync"]]), "-t", p["threads"]], file_kib * 1024


def _sqlite_workload(p: dict[str, str]) -> tuple[list[str], int]:
    """The generator's SQLite inserts, updates or deletes, and how many transactions (for run.tps)."""
    return [*_mobibench(p), "-d", str(SQLITE_OPS[p["workload"]]), "-n", p["transactions"],
            "-j", str(SQLITE_JOURNALS[p["journal"]]), "-s", str(SQLITE_SYNC[p["sqlite_sync"]])], \
        int(p["transactions"])


def _command(p: dict[str, str], mobibench: list[str]) -> list[str]:
    """The workload as the child runs it: under `strace -c` when asked, with the written files synced inside the
    timed command."""
    if p["syscalls"] == "on":
        # -c writes the per-syscall table to stderr when the workload ends (raw/rep0/stderr.txt)
        mobibench = ["strace", "-f", "-qq", "-c", "-U", "calls,name", "--", *mobibench]
    script = shlex.join(mobibench)
    if p["workload"] == "file" and p["final_fsync"] == "on" and p["access"] in WRITES:
        # The papers' throughput is the device's: buffered data must reach it inside the timed command.
        files = " ".join(shlex.quote(f"{_workdir(p)}/test.dat{i}") for i in range(int(p["threads"])))
        script += f" && sync {files}"
    return ["sh", "-c", script]


def _plan_raw(p: dict[str, str], params: dict[str, str], plan: CellPlan) -> None:
    """The bare device (the paper's raw bars): dd writes the file size in records to $MOBIPERF_DEVICE, buffered
    and fsynced at the end (sync=buffered), or O_DIRECT (sync=direct). Filesystem and FUSE parameters do not
    apply."""
    not_raw = [n for n in ("fs_journal", "fs_data", *FUSE_OPTIONS) if n in params]
    if p["layer"] != "native" or not_raw:
        raise _Skip(f"raw is the bare device: {', '.join(not_raw) or 'layer=' + p['layer']} does not apply")
    if p["workload"] != "file" or p["access"] not in ("seq-write", "append") or p["sync"] not in ("buffered",
                                                                                                   "direct"):
        raise _Skip("raw runs the sequential file write only (access seq-write/append, sync buffered/direct)")
    record = parse_size(p["record"])
    count = parse_size(p["file_size"]) // record
    if count < 1:
        raise _Skip(f"record {p['record']} must be at most the file size {p['file_size']}")
    flag = "oflag=direct" if p["sync"] == "direct" else ("conv=fsync" if p["final_fsync"] == "on" else "")
    plan.spec = StackSpec(Layer(RAW))
    plan.scheduler = params.get("scheduler")
    plan.device = None if p["device"] == "none" else p["device"]
    plan.bytes_moved = count * record
    plan.command = ["sh", "-c", f'dd if=/dev/zero of="$MOBIPERF_DEVICE" bs={record} count={count} {flag}'.rstrip()
                    + " status=none"]


def unit_request(plan: CellPlan, timeout_s: int) -> RunRequest:
    """The run of one unit, typed: what its child `mobiperf run --request` reads (the same run as the command line
    unit_argv spells: a test holds the two equal)."""
    return RunRequest(stack=plan.spec, command=list(plan.command), scheduler=plan.scheduler,
                      image_size=parse_image_size(plan.image_size), timeout_s=float(timeout_s), device=plan.device,
                      dirty_limit=parse_dirty_limit(plan.dirty), cpu_share=parse_cpu_share(plan.cpu),
                      fuse_wakeup_ns=parse_duration_ns(plan.fuse_wakeup) if plan.fuse_wakeup not in ("", "0") else 0,
                      report=False)


def unit_child(plan: CellPlan, run_path: Path, timeout_s: int, python: str = sys.executable) -> list[str]:
    """The child of one unit: `mobiperf run --request FILE`, the unit's request written beside its run directory
    (typed data, never a command line parsed back)."""
    request = write_request(unit_request(plan, timeout_s), run_path.parent / f"{run_path.name}.request.json")
    argv = [python, "-m", "mobiperf", "run", "--request", str(request), "-o", str(run_path)]
    if plan.target != "local":
        argv[4:4] = ["-t", plan.target]
    return argv


def unit_argv(plan: CellPlan, run_path: Path, timeout_s: int, python: str = sys.executable) -> list[str]:
    """The child `mobiperf run` of one unit as a command line (what --dry-run prints): the stack, the phone model
    options, the workload."""
    argv = [python, "-m", "mobiperf", "run", "--stack", plan.stack, "--image-size", plan.image_size,
            "-o", str(run_path), "--timeout", f"{timeout_s}s", "--no-report"]
    if plan.target != "local":
        argv[4:4] = ["-t", plan.target]
    if plan.scheduler:
        argv += ["--scheduler", plan.scheduler]
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
