"""The what-if: one recording replayed on several stacks, each compared with the first by compare's statistics.

Each stack gets a replay run (replay.py) in its own directory under the output (`1-ext4-fuse`, `2-ext4-bfuse`,
...), all from one script, so their command lines are the same and compare sees one workload on different
stacks. The verdict is compare's (mobiperf.compare.runs) on the replay's primary metric: the time spent in the
replayed calls (workload.io_time) when the replay keeps the recorded think times (open loop, where the elapsed
time is mostly the recording's own pauses), the elapsed time when it replays as fast as it can (closed loop).
Where the time moved: compare's row for every layer's exclusive time (`layer.time`, the calls' time that layer
was the deepest one active: syscall, FUSE, file system, journal, block, device), then compare's differential
profile, its top movers by call, layer, process and file (mobiperf.compare.moved).
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from mobiperf.compare import runs as compare
from mobiperf.compare.formats import summary_line, verdict_label
from mobiperf.compare.moved import attach_profile
from mobiperf.compare.profile_format import movers_text
from mobiperf.core.errors import UsageError
from mobiperf.core.metrics import format_quantity
from mobiperf.core.units import format_size
from mobiperf.core.runstore import RunDir
from mobiperf.orchestration.replay import SCRIPT_NAME, ReplaySource, run_replay, write_replay_script

if TYPE_CHECKING:
    from mobiperf.orchestration.run_request import RunRequest
    from mobiperf.target.target import Target

PRIMARY = {"open": "workload.io_time", "closed": "workload.elapsed"}
LAYERS = ("syscall", "fuse", "fs", "journal", "block", "device")


@dataclass
class WhatIf:
    runs: list[RunDir]
    labels: list[str]
    comparison: compare.CompareResult | None   # None with one stack


def stack_dirs(out: Path, requests: list[RunRequest]) -> list[Path]:
    """One directory per stack under out, numbered in the order given."""
    def slug(text: str) -> str:
        return re.sub(r"[^A-Za-z0-9._=-]+", "-", text).strip("-") or "stack"
    return [out / f"{i}-{slug(str(r.stack))}" for i, r in enumerate(requests, 1)]


def replay_on_stacks(target: Target, source: ReplaySource, requests: list[RunRequest], out: Path, *,
                     say: Callable[[str], None] = print, min_effect: float = 0.05) -> WhatIf:
    """Replay the source on every request's stack; with more than one, compare each with the first."""
    out = Path(out)
    if len(requests) == 1:
        return WhatIf([_one(target, requests[0], source, out)], [str(requests[0].stack)], None)
    if out.exists():
        raise UsageError(f"{out} already exists; a replay's output is never overwritten (choose another -o)")
    out.mkdir(parents=True)
    script = write_replay_script(source, out / SCRIPT_NAME)
    runs = []
    for request, where in zip(requests, stack_dirs(out, requests)):
        say(f"replaying on {request.stack} -> {where}")
        runs.append(run_replay(target, request, script, where))
    labels = [str(r.stack) for r in requests]
    groups = [compare.load_group(run.path, label) for run, label in zip(runs, labels)]
    timing = requests[0].replay["timing"]
    options = compare.CompareOptions(primary=PRIMARY[timing], min_effect=min_effect)
    result = compare.compare_groups(groups[0], groups[1:], options)
    attach_profile(result)  # compare's differential profile: the top movers (call, layer, process, file)
    return WhatIf(runs, labels, result)


def _one(target: Target, request: RunRequest, source: ReplaySource, out: Path) -> RunDir:
    """A single replay: on this host the generator reads the script the run directory keeps (RUN/replay.script);
    on a device, a copy pushed there from a scratch file."""
    with tempfile.TemporaryDirectory(prefix="mobiperf-replay-") as tmp:
        script = write_replay_script(source, Path(tmp) / SCRIPT_NAME)
        return run_replay(target, request, script, out, read_in_run=True)


def layer_rows(pair: compare.PairResult) -> list[compare.MetricRow]:
    """compare's rows of every layer's exclusive time, in the nest's order."""
    rows = [r for r in pair.rows if r.name == "layer.time"]
    return sorted(rows, key=lambda r: LAYERS.index(r.labels.get("layer")) if r.labels.get("layer") in LAYERS else 99)


def format_what_if(what_if: WhatIf) -> str:
    """Each stack against the first: compare's verdict line, then where the time moved, layer by layer."""
    result = what_if.comparison
    if result is None:
        return ""
    out = [f"what-if: every stack against {result.base.label} (compare's statistics; `mobiperf compare "
           f"{what_if.runs[0].path} {what_if.runs[1].path}` shows everything)"]
    for w in result.warnings:
        out.append(f"WARNING: {w}")
    for note in result.notes:
        out.append(f"note: {note}")
    for pair in result.pairs:
        v = pair.verdict
        out.append(f"== {result.base.label} -> {pair.new.label}")
        out.append(f"   {v.sentence() if v else summary_line(pair)}")
        out += _layer_table(pair)
        if getattr(result, "profile", None) is not None:
            out += movers_text(result.profile, result.pairs.index(pair))
            made = (what_if.runs[0].read_meta().get("replay") or {}).get("made_before") or {}
            if made.get("files"):
                out += [f"   (the movers cover each whole run: making the {made['files']} files that existed before "
                        f"the recording, {format_size(made.get('bytes', 0))},",
                        "   is in them; the time by layer above is the timed part's)"]
        elif getattr(result, "profile_note", None):
            out.append(f"   no differential profile: {result.profile_note}")
    return "\n".join(out) + "\n"


def _layer_table(pair: compare.PairResult) -> list[str]:
    """compare's rows of each layer's exclusive time in the timed part, as a small table."""
    rows = layer_rows(pair)
    if not rows:
        return ["   time by layer: no layer breakdown in these runs (their calls were not nested)"]
    out = ["   time by layer (each layer's exclusive time in the timed part, medians of the repetitions):",
           f"     {'layer':<9}{'base':>12}{'new':>12}{'change':>12}  verdict"]
    for r in rows:
        c = r.result
        diff = c.new_median - c.base_median
        out.append(f"     {r.labels.get('layer', '?'):<9}{format_quantity(c.base_median, 'ns'):>12}"
                   f"{format_quantity(c.new_median, 'ns'):>12}"
                   f"{('+' if diff >= 0 else '-') + format_quantity(abs(diff), 'ns'):>12}  {verdict_label(c)}")
    return out


