"""Stop signals take Ctrl-C's path (mobiperf.core.signals), and helpers die with the mobiperf that started them
(mobiperf.core.lifeline): PR_SET_PDEATHSIG for the processes it starts, its watchdog for their children.

Each case runs in a child Python process of its own: signal handlers and helper processes are process-wide."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from mobiperf.core.lifeline import OWNER_ENV, kill_owned, owned_processes, without_token

REPO = Path(__file__).resolve().parents[2]


def run_child(code: str, *, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, **kw)


def test_sigterm_and_sighup_raise_stopped_with_the_shell_exit_status():
    done = run_child("""
        import os, signal
        from mobiperf.core import signals
        signals.install()
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signals._stopping = None   # a fresh process each time, as far as the handler knows
            try:
                os.kill(os.getpid(), sig)
                print("not raised")
            except KeyboardInterrupt as e:
                print(type(e).__name__, signals.signal_name(e), signals.exit_status(e))
    """)
    assert done.stdout.splitlines() == ["Stopped SIGTERM 143", "Stopped SIGHUP 129", "Stopped SIGINT 130"]


def test_a_second_stop_signal_is_ignored_while_stopping():
    done = run_child("""
        import os, signal
        from mobiperf.core import signals
        signals.install()
        try:
            os.kill(os.getpid(), signal.SIGTERM)
        except KeyboardInterrupt:
            os.kill(os.getpid(), signal.SIGHUP)   # arrives during the teardown the first one started
            print("teardown finished")
    """)
    assert done.stdout == "teardown finished\n"
    assert "SIGHUP ignored: still stopping after SIGTERM" in done.stderr


def test_shielded_blocks_hold_stop_signals_until_they_end():
    done = run_child("""
        import os, signal, time
        from mobiperf.core import signals
        signals.install()
        try:
            with signals.shielded():
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.2)
                print("teardown finished")
            print("not raised")
        except KeyboardInterrupt as e:
            print("raised after", signals.signal_name(e))
    """)
    assert done.stdout.splitlines() == ["teardown finished", "raised after SIGTERM"]


def test_sigint_inherited_ignored_stays_ignored():
    done = run_child("""
        import os, signal, time
        from mobiperf.core import signals
        signals.install()
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.1)
        print("still running")
    """, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert done.stdout == "still running\n"


def test_mobiperf_cli_exits_with_128_plus_the_signal():
    """The CLI's own path: a stop signal during a command ends it with the shell's convention, one line."""
    proc = subprocess.Popen([sys.executable, "-c", "import sys, time; sys.argv = ['mobiperf', 'stall']\n"
                             "from mobiperf import cli\n"
                             "@cli.cli.command('stall')\ndef stall():\n    print('ready', flush=True); time.sleep(60)\n"
                             "cli.main()"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    assert proc.stdout.readline() == "ready\n"
    proc.send_signal(signal.SIGHUP)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 129 and stderr.strip().splitlines()[-1] == "SIGHUP: stopped"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_helpers_and_their_children_die_with_a_killed_owner():
    """SIGKILL of the owner: the helper it started dies at once (PDEATHSIG), the helper's own child (which
    PDEATHSIG does not reach) within the watchdog's grace."""
    owner = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import time
        from mobiperf.target.transport import LocalTransport
        helper = LocalTransport().start(["sh", "-c", "sleep 300 & echo child $!; wait"], stdout_path="/dev/stdout")
        print("helper", helper.pid, flush=True)
        time.sleep(300)
    """)], stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        said = dict(owner.stdout.readline().split() for _ in range(2))
        child, helper = int(said["child"]), int(said["helper"])
        token = Path(f"/proc/{helper}/environ").read_bytes().split(f"{OWNER_ENV}=".encode())[1].split(b"\0")[0]
        assert token.decode().startswith(f"{owner.pid}-")
        assert set(owned_processes(token.decode())) == {helper, child}
    finally:
        owner.kill()
        owner.wait(10)
    deadline = time.monotonic() + 1
    while _alive(helper) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _alive(helper)                     # PDEATHSIG: at once
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(child)                      # the watchdog: after its grace
    assert owned_processes(token.decode()) == {}


def test_kill_owned_ends_every_process_of_a_token_and_nothing_else():
    env = dict(os.environ, **{OWNER_ENV: "424242-feedbeef"})
    ours = [subprocess.Popen(["sleep", "300"], env=env, start_new_session=True) for _ in range(2)]
    other = subprocess.Popen(["sleep", "300"], env=dict(os.environ, **{OWNER_ENV: "424242-feedbee"}),
                             start_new_session=True)
    try:
        assert set(owned_processes("424242-feedbeef")) == {p.pid for p in ours}
        killed = kill_owned("424242-feedbeef")
        assert set(killed) == {p.pid for p in ours} and set(killed.values()) == {"sleep"}
        for p in ours:
            assert p.wait(5) == -signal.SIGKILL
        assert other.poll() is None
    finally:
        for p in (*ours, other):
            p.kill()
            p.wait(5)


def test_the_adb_server_does_not_carry_the_token():
    assert without_token({OWNER_ENV: "1-ab", "HOME": "/root"}) == {"HOME": "/root"}


def test_a_stop_that_python_dropped_is_taken_up_at_the_next_step_forward():
    """A stop signal landing in a finalizer (or an at-fork callback: every subprocess started with a preexec_fn)
    raises where Python drops exceptions; raise_if_stopping() raises it again, and nothing is printed about it."""
    done = run_child("""
        import gc, os, signal
        from mobiperf.core import signals
        signals.install()
        class Finalized:
            def __del__(self):
                os.kill(os.getpid(), signal.SIGTERM)
        Finalized()
        gc.collect()
        print("went on; stopping:", signals.stopping())
        try:
            signals.raise_if_stopping()
        except KeyboardInterrupt as e:
            print("raised", signals.signal_name(e))
    """)
    assert done.stdout.splitlines() == ["went on; stopping: SIGTERM", "raised SIGTERM"]
    assert done.stderr == ""
