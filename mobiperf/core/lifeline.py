"""What ties every helper process to the mobiperf process that started it.

Helpers are the processes mobiperf starts and means to end: FUSE daemons, trace_pipe readers, strace, the
workload and its wrappers, the device model's store, the adb clients that keep remote commands alive. A helper
that outlives a killed mobiperf keeps a stack busy, appends to a dead run's trace until the disk is full, or keeps
writing to the device under test. Two ties:

- PR_SET_PDEATHSIG (`die_with_owner`): the kernel signals the helper when the thread that started it exits, also
  when mobiperf is killed with SIGKILL. FUSE daemons and the device model get SIGTERM (they unmount and write
  their counters on the way out); everything else gets SIGKILL. Limits: the signal follows the *thread* that
  forked (start helpers from the main thread, or from a thread that outlives them); the helper's own children do
  not inherit it (a workload's `sh -c 'a; b'` leaves `a` behind); and exec of a set-uid program clears it.
- The owner token, MOBIPERF_OWNER=<pid>-<hex> in each helper's environment (`helper_env`). Children inherit it,
  so every descendant of every helper carries it. A watchdog (one small `sh` per mobiperf process, started with
  the first helper, in a session of its own) waits on a pipe that only mobiperf holds open; when mobiperf ends,
  however it ends, the pipe reaches EOF and the watchdog, after WATCHDOG_GRACE_S for the FUSE daemons to unmount,
  SIGKILLs every process still carrying the token: what PDEATHSIG misses (a workload's `sleep` in `sh -c 'a;
  sleep'`, strace's tracees). The undo journal records the token too; `kill_owned` is the same sweep, done by the
  next run or `mobiperf doctor` if the watchdog itself was killed. Over adb the remote commands carry the token
  too (mobiperf.target.adb).

The token identifies one mobiperf process for its lifetime: a process whose environment holds it descends from a
helper of that process, and nothing else sets it (the adb server, which mobiperf may start and which must outlive
it, is started without it).
"""

from __future__ import annotations

import ctypes
import os
import secrets
import signal
import time
from pathlib import Path
from typing import Callable, Mapping

OWNER_ENV = "MOBIPERF_OWNER"
PR_SET_PDEATHSIG = 1
KILL_TIMEOUT_S = 5.0
WATCHDOG_GRACE_S = 2.0
# $1: the needle (in argv, not in the environment: the watchdog and its grep must not carry the token themselves)
WATCHDOG_SCRIPT = (f"read -r _; sleep {WATCHDOG_GRACE_S:g}; i=0; while [ $i -lt 25 ]; do "
                   "p=$(grep -lsF \"$1\" /proc/[0-9]*/environ | cut -d/ -f3); [ -n \"$p\" ] || exit 0; "
                   "kill -9 $p 2>/dev/null; i=$((i+1)); sleep 0.2; done")

_watchdog: tuple[int, int] | None = None   # (pid of its owner, the pipe's write end, held open until we exit)

_token: tuple[int, str] | None = None   # (pid, token): a forked child makes its own
try:
    _prctl = ctypes.CDLL(None, use_errno=True).prctl   # resolved here: the child only calls it
except (OSError, AttributeError):  # not Linux: no PDEATHSIG, the token still works
    _prctl = None


def owner_token() -> str:
    """This process's token: `<pid>-<8 hex digits>`, the same for every helper it starts."""
    global _token
    if _token is None or _token[0] != os.getpid():
        _token = (os.getpid(), f"{os.getpid()}-{secrets.token_hex(4)}")
    return _token[1]


def helper_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a helper: ours, then `extra`, then the owner token (and the watchdog is started)."""
    start_watchdog()
    env = dict(os.environ)
    env.update(extra or {})
    env[OWNER_ENV] = owner_token()
    return env


def start_watchdog() -> None:
    """Start this process's watchdog once (see the module docstring); a failure to start it is not fatal."""
    global _watchdog
    if _watchdog is not None and _watchdog[0] == os.getpid():
        return
    import subprocess

    read, write = os.pipe()   # not inheritable: no other child keeps the pipe open
    try:
        subprocess.Popen(["sh", "-c", WATCHDOG_SCRIPT, "mobiperf-watchdog", f"{OWNER_ENV}={owner_token()}"],
                         stdin=read, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         env=without_token(), start_new_session=True)
    except OSError:
        os.close(write)
        return
    finally:
        os.close(read)
    _watchdog = (os.getpid(), write)


def without_token(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """An environment for a process that must outlive us (the adb server): no owner token."""
    env = dict(os.environ if env is None else env)
    env.pop(OWNER_ENV, None)
    return env


def die_with_owner(death_signal: int = signal.SIGKILL) -> Callable[[], None]:
    """A preexec_fn: the child gets death_signal when the thread that forks it exits."""
    parent = os.getpid()

    def arm() -> None:
        if _prctl is not None:
            _prctl(PR_SET_PDEATHSIG, int(death_signal), 0, 0, 0)
        if os.getppid() != parent:  # the owner died between fork and prctl: nothing will signal us later
            os.kill(os.getpid(), death_signal)
    return arm


def owned_processes(token: str, proc: Path = Path("/proc")) -> dict[int, str]:
    """{pid: command name} of the live processes whose environment carries this owner token."""
    needle = f"{OWNER_ENV}={token}".encode()
    found = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:  # gone, or a kernel thread
            continue
        if needle in environ.split(b"\0"):
            found[int(entry.name)] = _comm(entry)
    return found


def kill_owned(token: str, timeout_s: float = KILL_TIMEOUT_S) -> dict[int, str]:
    """SIGKILL every process carrying the token, again until none is left (a dying helper may fork); returns
    {pid: name} of those killed. Processes that survive the timeout stay in the result of owned_processes()."""
    killed: dict[int, str] = {}
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = owned_processes(token)
        if not found:
            break
        for pid, name in found.items():
            try:
                os.kill(pid, signal.SIGKILL)
                killed.setdefault(pid, name)
            except ProcessLookupError:
                pass
        time.sleep(0.05)
    return killed


def _comm(entry: Path) -> str:
    try:
        return (entry / "comm").read_text().strip()
    except OSError:
        return "?"
