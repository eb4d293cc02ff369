"""The protocol every collector follows (see the package docstring): no-op defaults for the optional steps."""

from __future__ import annotations

from typing import Any, Sequence


class Collector:
    """Base of all collectors: no-op defaults for the optional steps."""

    name = "?"
    # A snapshot (the layout, the target's facts) reads the device itself: it is taken after every tracing
    # collector has stopped, so its own IO (dumpe2fs, debugfs, filefrag) never lands in the workload's trace.
    snapshot = False

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
