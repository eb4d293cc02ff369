"""AdbTransport end to end: the real adb client and server against the loopback adbd (tests/support/adbd_loopback.py).

The loopback device runs its commands on this host, so what a command did can be checked directly here (/proc,
files). Covers exit codes and stderr, quoting of hostile paths, background processes, timeouts, and a device that
vanishes in the middle of a call.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

pytest_plugins = ["adb_fixtures"]  # adb_server, loopback_device, start_loopback
from mobiperf.core.errors import TargetError
from mobiperf.target.adb import AdbTransport, DeviceLostError
from mobiperf.target.adb_client import strip_marker as _strip_marker

# Every character a shell or adb could trip on, in one directory name and one file name.
NASTY_DIR = "dir with space 'single' \"double\" $HOME `x` ;semi \\back"
NASTY_FILE = "f$(echo no);  *?[a]\nnewline -e"


@pytest.fixture
def adb(loopback_device) -> AdbTransport:
    return loopback_device.transport()


@pytest.fixture
def workdir(tmp_path) -> Path:
    tmp_path.chmod(0o777)
    return tmp_path


def processes_with(token: str) -> list[int]:
    """Pids on this host whose command line contains token (the loopback's commands are local processes)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if token.encode() in f.read():
                        found.append(int(entry))
            except OSError:
                pass
    return found


def wait_until(predicate, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


# -- commands -----------------------------------------------------------------------------------------------------

def test_run_exit_code_stdout_and_stderr_apart(adb):
    done = adb.run(["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (done.returncode, done.stdout, done.stderr) == (3, b"out\n", b"err\n")
    assert adb.run(["true"]).returncode == 0
    assert adb.run(["sh", "-c", "exit 255"]).returncode == 255


def test_signal_death_is_reported_as_negative_signal(adb):
    assert adb.run(["sh", "-c", "kill -9 $$"]).returncode == -signal.SIGKILL


def test_stdin_reaches_the_command_and_binary_output_is_clean(adb):
    data = bytes(range(256)) * 4096  # 1 MiB with every byte value, NULs and CRs included
    done = adb.run(["sh", "-c", "cat; echo end >&2"], input=data)
    assert done.stdout == data and done.stderr == b"end\n"


def test_cwd_and_env_apply_and_are_quoted(adb, workdir):
    d = workdir / NASTY_DIR
    d.mkdir()
    done = adb.run(["sh", "-c", 'pwd; printf "%s" "$MOBIPERF_X"'], cwd=str(d),
                   env={"MOBIPERF_X": "a b;$HOME'\"\n"})
    assert done.text == f"{d}\na b;$HOME'\"\n"


def test_missing_command_is_a_target_error(adb):
    with pytest.raises(TargetError, match="no-such-command-xyz: command not found"):
        adb.run(["no-such-command-xyz", "arg"])


def test_exists_and_which(adb, workdir):
    f = workdir / NASTY_FILE
    assert not adb.exists(str(f))
    f.write_text("x")
    assert adb.exists(str(f))
    assert adb.which("sh") is not None and adb.which("no-such-command-xyz") is None


def test_marker_is_stripped_exactly():
    marker = "\x1emobiperf-1234abcd:"
    assert _strip_marker(b"err\n" + marker.encode() + b"17", marker) == (b"err\n", 17)
    assert _strip_marker(b"no marker at the end " + marker.encode() + b"1 x", marker)[1] is None


# -- files ----------------------------------------------------------------------------------------------------------

def test_push_pull_read_write_with_hostile_names(adb, workdir):
    local_dir = workdir / "local"
    local_dir.mkdir()
    src = local_dir / NASTY_FILE
    payload = os.urandom(300_000)
    src.write_bytes(payload)
    remote = str(workdir / NASTY_DIR / "sub" / NASTY_FILE)

    adb.push(src, remote)
    assert Path(remote).read_bytes() == payload
    assert adb.read_file(remote) == payload
    assert adb.run(["cat", remote]).stdout == payload

    adb.write_file(remote, b"small text; with $dollar 'quote'\n")
    assert Path(remote).read_bytes() == b"small text; with $dollar 'quote'\n"
    binary = b"\0\x01bin\xff" * 2000
    adb.write_file(remote, binary)
    assert Path(remote).read_bytes() == binary

    back = workdir / "back" / NASTY_FILE
    back.parent.mkdir()
    adb.pull(remote, back)
    assert back.read_bytes() == binary


def test_push_and_pull_of_a_tree_copy_its_content(adb, workdir):
    tree = workdir / "tree"
    (tree / "a b").mkdir(parents=True)
    (tree / "a b" / "x;y").write_bytes(b"1")
    (tree / "top").write_bytes(b"2")
    remote = workdir / "remote tree"
    adb.push(tree, str(remote))
    assert (remote / "a b" / "x;y").read_bytes() == b"1" and (remote / "top").read_bytes() == b"2"
    pulled = workdir / "pulled"
    adb.pull(str(remote), pulled)
    assert sorted(str(p.relative_to(pulled)) for p in pulled.rglob("*")) == ["a b", "a b/x;y", "top"]


def test_file_errors_are_target_errors(adb, workdir):
    with pytest.raises(TargetError, match="cannot read"):
        adb.read_file(str(workdir / "missing"))
    with pytest.raises(TargetError, match="writing"):
        adb.write_file(str(workdir / "no-dir" / "f"), b"1")
    with pytest.raises(TargetError, match="adb pull"):
        adb.pull(str(workdir / "missing"), workdir / "x")


@pytest.fixture
def tracefs_instance():
    root = Path("/sys/kernel/tracing")
    if os.geteuid() != 0 or not (root / "instances").is_dir():
        pytest.skip("needs root and tracefs instances at /sys/kernel/tracing")
    inst = root / "instances" / f"adbtest-{os.getpid()}"
    inst.mkdir()
    yield inst
    for _ in range(50):  # rmdir fails with EBUSY while a reader still holds the buffer
        try:
            inst.rmdir()
            break
        except OSError:
            time.sleep(0.1)


@pytest.mark.parametrize("size", [900, 2500], ids=["printf", "staged-dd"])
def test_write_file_is_one_write_on_a_tracefs_knob(adb, tracefs_instance, size):
    # Each write() to trace_marker is one event: a value split over two writes would show as two markers.
    text = "mobiperf-marker " + "x" * (size - len("mobiperf-marker  end")) + " end"
    adb.write_file(str(tracefs_instance / "tracing_on"), b"0")
    assert adb.read_file(str(tracefs_instance / "tracing_on")) == b"0\n"
    adb.write_file(str(tracefs_instance / "tracing_on"), b"1")
    adb.write_file(str(tracefs_instance / "trace_marker"), text.encode())
    trace = adb.read_file(str(tracefs_instance / "trace")).decode()
    markers = [line for line in trace.splitlines() if "mobiperf-marker" in line or line.endswith(" end")]
    assert len(markers) == 1 and markers[0].endswith(text)
    with pytest.raises(TargetError, match="buffer_size_kb.*Invalid argument"):
        adb.write_file(str(tracefs_instance / "buffer_size_kb"), b"not-a-number" * size)


# -- background processes ----------------------------------------------------------------------------------------

def test_background_process_has_its_pid_streams_output_and_exits(adb, workdir):
    out, err = workdir / "out", workdir / "err"
    p = adb.start(["sh", "-c", "echo first; echo oops >&2; sleep 0.5; echo second; exit 7"],
                  stdout_path=out, stderr_path=err, cwd=str(workdir), env={"MOBIPERF_Y": "1"})
    assert p.pid is not None
    assert wait_until(lambda: out.read_bytes() == b"first\n")  # streamed while the process still runs
    with open(f"/proc/{p.pid}/environ", "rb") as f:
        assert b"MOBIPERF_Y=1" in f.read().split(b"\0")
    assert os.readlink(f"/proc/{p.pid}/cwd") == str(workdir)
    assert p.poll() is None
    assert p.wait(10) == 7
    assert out.read_bytes() == b"first\nsecond\n" and err.read_bytes() == b"oops\n"


def test_kill_ends_the_process_and_its_children(adb, workdir):
    token = f"31.{os.getpid()}1"
    p = adb.start(["sh", "-c", f"sleep {token} & sleep {token}; wait"])
    assert wait_until(lambda: len(processes_with(f"sleep\0{token}")) == 2)
    t0 = time.monotonic()
    assert p.kill() == -signal.SIGTERM
    assert time.monotonic() - t0 < 5
    assert wait_until(lambda: not processes_with(f"sleep\0{token}"))
    assert wait_until(lambda: not os.path.exists(f"/proc/{p.pid}"))


def test_kill_escalates_to_sigkill(adb):
    p = adb.start(["sh", "-c", "trap '' TERM; while :; do sleep 0.1; done"])
    time.sleep(0.3)
    assert p.kill(signal.SIGTERM, grace_s=0.5) == -signal.SIGKILL
    assert wait_until(lambda: not os.path.exists(f"/proc/{p.pid}"))


def test_kill_with_a_signal_the_workload_handles(adb, workdir):
    out = workdir / "out"
    p = adb.start(["sh", "-c", "trap 'echo got-int; exit 3' INT; while :; do sleep 0.1; done"], stdout_path=out)
    time.sleep(0.3)
    assert p.kill(signal.SIGINT) == 3
    assert out.read_bytes() == b"got-int\n"


def test_wait_times_out_with_a_target_error(adb):
    p = adb.start(["sleep", "30"])
    with pytest.raises(TargetError, match="did not end within 0.3 s"):
        p.wait(0.3)
    p.kill()


# -- timeouts and a vanishing device --------------------------------------------------------------------------------

def test_run_timeout_is_a_target_error_and_the_remote_command_stops(adb):
    token = f"41.{os.getpid()}2"
    t0 = time.monotonic()
    with pytest.raises(TargetError, match="did not end within 1 s"):
        adb.run(["sleep", token], timeout=1)
    assert time.monotonic() - t0 < 3
    assert wait_until(lambda: not processes_with(token))


def test_blocked_file_io_times_out(adb, workdir):
    # Two FIFOs: a reader still being killed on a loaded machine would let the write to the first one succeed.
    read_fifo, write_fifo = workdir / "read-fifo", workdir / "write-fifo"
    os.mkfifo(read_fifo)
    os.mkfifo(write_fifo)
    t0 = time.monotonic()
    with pytest.raises(TargetError, match="did not end within 0.5 s"):
        adb.read_file(str(read_fifo), timeout=0.5)
    with pytest.raises(TargetError, match="did not end within 0.5 s"):
        adb.write_file(str(write_fifo), b"1", timeout=0.5)
    assert time.monotonic() - t0 < 4
    # the device-side commands blocked on the FIFOs do not outlive their timeouts
    assert wait_until(lambda: not processes_with("-fifo"))


def test_device_vanishing_mid_call_is_a_prompt_target_error(start_loopback):
    device = start_loopback()
    adb = device.transport()
    background = adb.start(["sleep", "60"])
    errors: list[Exception] = []

    def long_call():
        try:
            adb.run(["sleep", "60"], timeout=60)
        except Exception as e:  # noqa: BLE001 - the test inspects it
            errors.append(e)

    caller = threading.Thread(target=long_call)
    caller.start()
    time.sleep(0.5)
    t0 = time.monotonic()
    device.kill()
    caller.join(10)
    assert not caller.is_alive() and time.monotonic() - t0 < 5
    assert len(errors) == 1 and isinstance(errors[0], DeviceLostError) and "went away" in str(errors[0])
    with pytest.raises(DeviceLostError, match="went away"):
        background.wait(5)
    assert background.kill() is None
    t0 = time.monotonic()
    with pytest.raises(DeviceLostError, match=r"adb state now: (offline|not connected)"):
        adb.read_file("/proc/version")
    assert time.monotonic() - t0 < 5
