"""Collectors: bring raw traces back from a target (ftrace through a tracefs instance, strace, blktrace, ...).

Installed as mobiperf.collectors. Collectors touch the device; the parsers in parse/ never do.

Every collector follows one protocol, so the pipeline runs any set of them the same way:

    with collector:                       # set up (nothing recorded yet); __exit__ restores the device
        env.update(collector.workload_env())
        argv = collector.wrap_command(argv)   # e.g. strace prefixes the workload
        collector.start()
        ... the workload runs ...
        summary = collector.stop()        # a JSON-able dict for run.json; raw files are in its out_dir

plan_collectors() decides which collectors a run gets from what the target offers and what was asked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence


class Collector:
    """Base of all collectors: no-op defaults for the optional steps."""

    name = "?"

    def __enter__(self) -> "Collector":
        return self

    def __exit__(self, *exc) -> None:
        pass

    def workload_env(self) -> dict[str, str]:
        return {}

    def wrap_command(self, argv: Sequence[str]) -> list[str]:
        return list(argv)

    def start(self) -> None:
        pass

    def stop(self) -> dict[str, Any]:
        return {}


def plan_collectors(transport, caps, stack, raw_dir: Path, *, extra_events=()) -> list[Collector]:
    """The collectors of one repetition: ftrace (block events of the stack's device, plus extra events)."""
    from mobiperf.collectors.ftrace import FtraceCollector, block_event_specs

    events = block_event_specs(stack.traced_devices) + list(extra_events)
    return [FtraceCollector(transport, caps.tracefs_path, events, raw_dir)]
