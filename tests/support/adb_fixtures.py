"""pytest fixtures for the adb path: a private adb server and loopback devices connected to it.

Use from a test module with `pytest_plugins = ["tests.adb_fixtures"]` (or import the fixtures). Every process
started here is ended in a finalizer with a timeout: the adb server (`adb -P PORT kill-server`, then its pid), each
loopback adbd (SIGTERM, then SIGKILL) and whatever commands a killed adbd left running (their process groups are
recorded by the daemon in its --pid-dir).

    adb_server        session: (adb path, port) of a private `adb nodaemon server` with its own HOME
    loopback_device   session: a LoopbackDevice connected to that server (commands run as this user)
    start_loopback    function: a factory for extra devices (its own adbd options), torn down after the test

MOBIPERF_TEST_ADB=/path/to/adb selects the client (default: adb on PATH).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from mobiperf.target.adb import AdbTransport

ADBD = Path(__file__).resolve().parent / "adbd_loopback.py"
START_TIMEOUT_S = 15.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_listener(port: int, timeout: float, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process {proc.args!r} exited with {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port} after {timeout:g} s")


def _end(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@dataclass
class AdbServer:
    adb: str
    port: int
    home: Path
    process: subprocess.Popen

    def client(self, *args: str, timeout: float = 15.0) -> subprocess.CompletedProcess:
        return subprocess.run([self.adb, "-P", str(self.port), *args], capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=timeout)

    def stop(self) -> None:
        try:
            self.client("kill-server", timeout=10)
        except subprocess.TimeoutExpired:
            pass
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            _end(self.process)


def start_adb_server(workdir: Path) -> AdbServer:
    # MOBIPERF_TEST_ADB runs the same tests with another client (e.g. a current platform-tools adb).
    adb = shutil.which(os.environ.get("MOBIPERF_TEST_ADB", "adb"))
    if adb is None:
        pytest.skip("needs the adb client (Debian package adb)")
    home = workdir / "adb-home"
    home.mkdir(parents=True, exist_ok=True)
    port = free_port()
    # nodaemon: the server stays our child, so its pid is known and it can always be ended; its own HOME keeps
    # its keys (~/.android) away from the user's.
    env = dict(os.environ, HOME=str(home))
    log = open(workdir / "adb-server.log", "wb")
    proc = subprocess.Popen([adb, "-P", str(port), "nodaemon", "server"], stdin=subprocess.DEVNULL, stdout=log,
                            stderr=subprocess.STDOUT, env=env, start_new_session=True)
    log.close()
    server = AdbServer(adb, port, home, proc)
    try:
        _wait_for_listener(port, START_TIMEOUT_S, proc)
    except RuntimeError:
        server.stop()
        raise
    return server


@dataclass
class LoopbackDevice:
    """One loopback adbd, connected to an adb server as serial 127.0.0.1:PORT."""

    server: AdbServer
    process: subprocess.Popen
    port: int
    pid_dir: Path
    workdir: Path
    home: Path
    options: tuple[str, ...] = ()
    transports: list = field(default_factory=list)

    @property
    def serial(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def server_port(self) -> int:
        return self.server.port

    # What the device is, for the tests every kind of device runs (the adb_device fixture): this host, as root.
    android = False
    patience = 1   # a multiplier of the tests' time limits (the virtual phone's CPU is emulated: 3)
    storage = None            # a directory of the device's data partition for a dir: stack (storage_dir)

    @property
    def facts(self) -> dict:
        machine = os.uname().machine
        return {"kernel": os.uname().release, "model": "Loopback", "android_version": None,
                "abi": {"x86_64": "x86_64", "aarch64": "arm64-v8a"}.get(machine, machine), "machine": machine,
                "root_method": "adbd", "sdcard_implementation": None, "workdir": "/tmp/mobiperf"}

    def transport(self, **kw) -> AdbTransport:
        t = AdbTransport(self.serial, adb=self.server.adb, server_port=self.server.port, **kw)
        self.transports.append(t)
        return t

    def kill(self) -> None:
        """The device vanishes: SIGKILL the daemon (the TCP connection drops), then end what it had started."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(5)
        self._end_orphans()

    def _end_orphans(self) -> None:
        for entry in list(self.pid_dir.iterdir()) if self.pid_dir.exists() else []:
            try:
                os.killpg(int(entry.name), signal.SIGKILL)
            except (ProcessLookupError, ValueError, PermissionError):
                pass
            entry.unlink(missing_ok=True)

    def stop(self) -> None:
        for t in self.transports:
            try:
                t.close()
            except Exception:
                pass
        if self.process.poll() is None:
            try:
                self.server.client("disconnect", self.serial, timeout=10)
            except subprocess.TimeoutExpired:
                pass
        _end(self.process)
        self._end_orphans()
        shutil.rmtree(self.home, ignore_errors=True)

    def fixture_errors(self) -> list[str]:
        """Lines where the daemon reported a bug of its own (a service that raised)."""
        log = self.workdir / "adbd.log"
        return [line for line in log.read_text(errors="replace").splitlines() if "service failed" in line] \
            if log.exists() else []


def start_loopback_device(server: AdbServer, workdir: Path, *options: str) -> LoopbackDevice:
    workdir.mkdir(parents=True, exist_ok=True)
    port_file = workdir / "port"
    pid_dir = workdir / "pids"
    pid_dir.mkdir(exist_ok=True)
    # The daemon's home holds su's unix socket: a short path under /tmp, not the (long) pytest one.
    home = Path(tempfile.mkdtemp(prefix="adbd-lb-"))
    log = open(workdir / "adbd.log", "wb")
    proc = subprocess.Popen([sys.executable, str(ADBD), "--port", "0", "--port-file", str(port_file),
                             "--pid-dir", str(pid_dir), "--home", str(home), *options], stdin=subprocess.DEVNULL,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    log.close()
    deadline = time.monotonic() + START_TIMEOUT_S
    while not port_file.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            _end(proc)
            shutil.rmtree(home, ignore_errors=True)
            raise RuntimeError(f"adbd_loopback did not start: {(workdir / 'adbd.log').read_text()[-2000:]}")
        time.sleep(0.05)
    device = LoopbackDevice(server, proc, int(port_file.read_text()), pid_dir, workdir, home, tuple(options))
    try:
        said = server.client("connect", device.serial).stdout.strip()
        if not said.startswith(("connected to", "already connected")):
            raise RuntimeError(f"adb connect {device.serial}: {said}")
        wait_for_state(server, device.serial, "device", START_TIMEOUT_S)
    except Exception:
        device.stop()
        raise
    return device


def wait_for_state(server: AdbServer, serial: str, state: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.client("-s", serial, "get-state", timeout=10).stdout.strip() == state:
            return
        time.sleep(0.1)
    raise RuntimeError(f"{serial} not in state {state!r} after {timeout:g} s")


@pytest.fixture(scope="session")
def adb_server(tmp_path_factory):
    server = start_adb_server(tmp_path_factory.mktemp("adb-server"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def loopback_device(adb_server, tmp_path_factory):
    device = start_loopback_device(adb_server, tmp_path_factory.mktemp("loopback"))
    yield device
    device.stop()
    assert not device.fixture_errors(), "the loopback adbd failed: " + "; ".join(device.fixture_errors())


@pytest.fixture
def start_loopback(adb_server, tmp_path):
    """Factory: start_loopback(*adbd_options) -> a LoopbackDevice of the test's own, ended after the test."""
    started: list[LoopbackDevice] = []

    def start(*options: str) -> LoopbackDevice:
        device = start_loopback_device(adb_server, tmp_path / f"loopback{len(started)}", *options)
        started.append(device)
        return device

    yield start
    for device in started:
        device.stop()
    errors = [e for device in started for e in device.fixture_errors()]
    assert not errors, "the loopback adbd failed: " + "; ".join(errors)
