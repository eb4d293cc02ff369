"""What `mobiperf run` is asked to do, typed: the RunRequest, from the command line, from a run's run.json (to add
repetitions later), or from a JSON file (`mobiperf run --request FILE`: how a sweep hands a cell to its child run,
typed data both ways, never a command line parsed back).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mobiperf.core.errors import UsageError
from mobiperf.stack.spec import Layer, StackSpec, check_stack

if TYPE_CHECKING:
    from mobiperf.collectors.ftrace import EventSpec
    from mobiperf.stack.options import StackOptions

REQUEST_FORMAT = "mobiperf-run-request"


@dataclass
class RunRequest:
    """What `mobiperf run` was asked to do."""

    stack: StackSpec
    command: list[str]
    scheduler: str | None = None
    repeat: int = 1
    image_size: int = 1 << 30
    extra_events: list[EventSpec] = field(default_factory=list)
    timeout_s: float | None = None
    device: str | None = None       # a device profile of mobiperf.stack.device_model (None: the host's disk as it is)
    dirty_limit: int | None = None  # the data device's dirty page limit in bytes (None: the host's thresholds)
    cpu_share: str = "host"         # CPU share of the workload and the FUSE daemons (mobiperf.stack.cpu_share)
    fuse_wakeup_ns: int = 0         # a phone's wake-up latency per FUSE request (reference-impl/phonemodel)
    sources: tuple[str, ...] | None = None     # trace sources (collectors.SOURCES); None: the defaults
    event_sets: tuple[str, ...] | None = None  # whole ftrace event sets; None: the stack's light events
    report: bool = True             # sweeps skip the per-run HTML page: they draw one matrix for all runs
    scope: str = "workload"         # whose IO the figures count (analyzers/scope.py): workload or all
    auto: Any = None                # -n auto: an auto_repeat.AutoRepeat that stops the loop (repeat is ignored)
    recorder: str = "auto"          # ftrace through the device's perfetto or tracefs (collectors.RECORDERS)
    # What the workload moves, when its caller knows (a sweep cell): run.throughput (bytes per second of the
    # workload's time) and run.tps (transactions per second) are then among each repetition's metrics.
    workload_bytes: int = 0
    workload_transactions: int = 0

    def stack_options(self, counters_dir: Path | None = None) -> StackOptions:
        """How the stack of one repetition is built (its counters go to that repetition's raw directory)."""
        from mobiperf.stack.options import StackOptions

        return StackOptions(scheduler=self.scheduler, image_size=self.image_size, counters_dir=counters_dir,
                            device=self.device, dirty_limit=self.dirty_limit, cpu_share=self.cpu_share,
                            fuse_wakeup_ns=self.fuse_wakeup_ns)


def default_run_path(request: RunRequest) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    program = Path(request.command[0]).name if request.command else "run"
    return Path("runs") / f"{stamp}-{str(request.stack).split(':')[0].replace('+', '-')}-{program}"


# The fields a request file carries; auto (-n auto's loop) and the extra events stay on the command line.
_FILE_FIELDS = ("command", "scheduler", "repeat", "image_size", "timeout_s", "device", "dirty_limit", "cpu_share",
                "fuse_wakeup_ns", "sources", "event_sets", "report", "scope", "recorder", "workload_bytes",
                "workload_transactions")


def request_to_json(request: RunRequest) -> dict[str, Any]:
    """A request as JSON-able data: the stack as its typed layers (never a string to be parsed again)."""
    if request.auto is not None or request.extra_events:
        raise UsageError("a request file carries neither -n auto nor extra trace events")
    stack = {"filesystem": asdict(request.stack.filesystem), "layers": [asdict(x) for x in request.stack.layers]}
    data = {name: getattr(request, name) for name in _FILE_FIELDS}
    data.update(sources=list(request.sources) if request.sources else None,
                event_sets=list(request.event_sets) if request.event_sets else None)
    return {"format": REQUEST_FORMAT, "version": 1, "stack": stack, **data}


def request_from_json(data: dict[str, Any]) -> RunRequest:
    """The request a request file holds; UsageError saying what is wrong with it."""
    if not isinstance(data, dict) or data.get("format") != REQUEST_FORMAT:
        raise UsageError(f"not a mobiperf run request (format is not {REQUEST_FORMAT!r})")
    try:
        stack = data["stack"]
        spec = check_stack(StackSpec(Layer(**stack["filesystem"]), tuple(Layer(**x) for x in stack["layers"])))
        values = {name: data[name] for name in _FILE_FIELDS if name in data}
    except (KeyError, TypeError) as e:
        raise UsageError(f"run request: missing or malformed {e}") from None
    command = values.get("command")
    if not command or not isinstance(command, list) or not all(isinstance(w, str) for w in command):
        raise UsageError("run request: command must be the workload's argv, a non-empty list of strings")
    for name in ("sources", "event_sets"):
        values[name] = tuple(values[name]) if values.get(name) else None
    return RunRequest(stack=spec, **values)


def write_request(request: RunRequest, path: Path) -> Path:
    path.write_text(json.dumps(request_to_json(request), indent=1) + "\n")
    return path


def read_request(path: Path) -> RunRequest:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise UsageError(f"{path}: unreadable run request: {e}") from None
    return request_from_json(data)


def request_from_meta(meta: dict, *, report: bool = True) -> RunRequest:
    """The RunRequest that made a run, rebuilt from its run.json (trace sources from what each repetition
    recorded, when the run predates their being saved)."""
    from mobiperf.collectors.plan import SOURCES
    from mobiperf.stack.spec import parse_stack_spec

    reps = meta.get("repetitions") or [{}]
    first = reps[0]
    sources = meta.get("sources") or tuple(s for s in SOURCES if s in first) or None
    image = (first.get("stack") or {}).get("image_size_bytes") or (1 << 30)
    return RunRequest(stack=parse_stack_spec(meta["stack"]), command=list(meta["command"]),
                      scheduler=meta.get("scheduler"), image_size=int(image), device=meta.get("device"),
                      dirty_limit=meta.get("dirty_limit"), cpu_share=meta.get("cpu_share") or "host",
                      fuse_wakeup_ns=int(meta.get("fuse_wakeup_ns") or 0), sources=tuple(sources) if sources else None,
                      event_sets=tuple(meta["event_sets"]) if meta.get("event_sets") else None, report=report)
