"""Stop signals: SIGTERM and SIGHUP take the path of Ctrl-C.

`timeout`, CI cancellation, systemd and a closed terminal stop a program with SIGTERM or SIGHUP, and a script
started with `&` inherits SIGINT ignored, so for it SIGTERM is the only way to stop a run. Python turns only
SIGINT into KeyboardInterrupt. `install()` makes all three raise `Stopped`, a KeyboardInterrupt that remembers its
signal, so every `except KeyboardInterrupt` and `finally` that tears a stack down serves them alike, and the
process ends with the shell's convention, 128 + the signal's number (`exit_status`).

Only the first stop signal is raised. A later one would interrupt the teardown the first one started and leave a
half-removed stack, so it is ignored with a note; SIGKILL still ends the process, and the undo journal
(mobiperf.target.undo_journal) leaves the cleanup to the next run or `mobiperf doctor --fix`.

`shielded()` holds stop signals back around a teardown that must not be cut (also where `install()` was not
called, e.g. a library user or a test): a signal that arrives inside is delivered when the block ends.
A SIGINT that the process inherited as ignored stays ignored.

Python drops an exception raised where it cannot propagate: in an at-fork callback (every subprocess started
with a preexec_fn runs them), a finalizer, a weakref callback. A stop signal that lands there is lost to the
code it should stop, so the places where a run goes forward (the wait for the workload, the start of each stage)
call `raise_if_stopping()`, which raises it again.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from contextlib import contextmanager
from typing import Iterator

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Stopped(KeyboardInterrupt):
    """A stop signal arrived: the run stops the way Ctrl-C stops it."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name


_stopping: int | None = None   # the first stop signal received, once one was


def _on_stop_signal(signum: int, frame) -> None:
    global _stopping
    if _stopping is not None:
        say(f"mobiperf: {signal.Signals(signum).name} ignored: still stopping after "
            f"{signal.Signals(_stopping).name} (SIGKILL would leave the cleanup to `mobiperf doctor --fix`)")
        return
    _stopping = signum
    raise Stopped(signum)


def install() -> None:
    """SIGTERM and SIGHUP (and SIGINT, unless inherited ignored) raise Stopped in the main thread."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in STOP_SIGNALS:
        if sig == signal.SIGINT and signal.getsignal(sig) == signal.SIG_IGN:
            continue
        signal.signal(sig, _on_stop_signal)
    sys.unraisablehook = _quiet_about_dropped_stops


def _quiet_about_dropped_stops(unraisable, *, _default=sys.unraisablehook) -> None:
    """A Stopped that Python dropped (see above) is not an error to print: raise_if_stopping() takes it up."""
    if not isinstance(unraisable.exc_value, Stopped):
        _default(unraisable)


def finished() -> None:
    """The command's work is done and said: a stop signal from now on has nothing left to stop (it would only
    turn a finished run's exit status into a failure)."""
    if threading.current_thread() is threading.main_thread():
        for sig in STOP_SIGNALS:
            if signal.getsignal(sig) is _on_stop_signal:
                signal.signal(sig, signal.SIG_IGN)


def raise_if_stopping() -> None:
    """Raise Stopped if a stop signal was received: call it only where the work goes forward, never on the way
    out (its exception may already be unwinding the stack, and the teardown must not be cut)."""
    if _stopping is not None:
        raise Stopped(_stopping)


def stopping() -> str | None:
    """The name of the stop signal this process received, None while none did."""
    return None if _stopping is None else signal.Signals(_stopping).name


def signal_name(exc: BaseException) -> str:
    """SIGTERM for a Stopped by SIGTERM; SIGINT for a plain KeyboardInterrupt (Python's own Ctrl-C)."""
    return exc.name if isinstance(exc, Stopped) else "SIGINT"


def exit_status(exc: BaseException) -> int:
    """128 + the signal's number: 130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP."""
    return 128 + (exc.signum if isinstance(exc, Stopped) else signal.SIGINT)


@contextmanager
def shielded() -> Iterator[None]:
    """Stop signals wait until the block ends (main thread; elsewhere signals never arrive anyway)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, frame: held.append(signum)) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if held:
            # Delivered to whatever handled it before: ours raises Stopped (or notes it when already stopping),
            # Python's raises KeyboardInterrupt, SIG_IGN drops it, SIG_DFL ends the process as it would have.
            signal.raise_signal(held[0])


def say(message: str) -> None:
    """One line to stderr that never fails: after SIGHUP the terminal is gone and writing to it raises EIO."""
    try:
        print(message, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        _detach_std_streams()


def _detach_std_streams() -> None:
    """Point stdout and stderr at /dev/null, so that flushing them at exit cannot fail either."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        for fd in (1, 2):
            os.dup2(null, fd)
        os.close(null)
    except OSError:
        pass


def flush_std_streams() -> None:
    """Flush stdout and stderr before a signal exit; detach them if the terminal is gone."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            _detach_std_streams()
            return
