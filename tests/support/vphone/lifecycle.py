"""A phone left running by `python -m vphone up`, found again and stopped: through its undo journal, with mobiperf's
own recovery (mobiperf.target.leftovers), the same code `mobiperf doctor --fix` runs on a phone that died."""

from __future__ import annotations

import os
import signal
import time

from mobiperf.target.leftovers import find_leftovers, undo_leftovers
from mobiperf.target.transport import LocalTransport

from vphone.machine import PhoneState, _start_ticks

STOP_S = 15.0


def is_running(state: PhoneState) -> bool:
    """QEMU of that phone still runs (its pid, with the same start time: not a reused pid)."""
    return _start_ticks(state.pid) == state.start


def stop_detached(state: PhoneState) -> list[str]:
    """End the phone's QEMU, then undo its journal (adb connection, run directory); what could not be undone."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not is_running(state):
            break
        os.kill(state.pid, sig)
        deadline = time.monotonic() + STOP_S
        while is_running(state) and time.monotonic() < deadline:
            time.sleep(0.1)
    if is_running(state):
        return [f"QEMU pid {state.pid} survives SIGKILL"]
    transport = LocalTransport()
    problems: list[str] = []
    for dead in find_leftovers(transport):
        if dead.state.path == state.journal:
            problems += undo_leftovers(transport, dead)
        else:
            dead.release()
    if os.path.exists(state.run_dir):
        problems.append(f"{state.run_dir} (its journal {state.journal} is gone: remove it by hand)")
    return problems
