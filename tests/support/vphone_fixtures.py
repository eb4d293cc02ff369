"""pytest fixtures of the virtual phone (tests/support/vphone): a QEMU guest with a kernel of its own, reached
through the session's private adb server like the loopback devices (adb_fixtures.py).

    vphone        session: Android 14 on Debian's 6.1 kernel, booted once, torn down in a finalizer
    vphone_612    session: the same userland on Debian's 6.12 kernel (Android 16's)
    start_vphone  function: a factory for a phone of the test's own (another clock, one to kill), ended after it

A PhoneDevice looks like a LoopbackDevice to the adb tests (serial, server, server_port, transport(), shell()).
Where the host cannot run one (no root, no QEMU, an image that cannot be built: no network to Debian's mirror), the
tests that need it skip with the reason; an image build that fails for another reason fails them.
Use from a test module with `pytest_plugins = ["adb_fixtures", "vphone_fixtures"]`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field

import pytest

from adb_fixtures import AdbServer
from mobiperf.target.adb import AdbTransport
from vphone.image import build_problem, ensure_image, image_dir, is_built
from vphone.machine import DEFAULT_RTC, QEMU, VirtualPhone, boot_phone


@dataclass
class PhoneDevice:
    server: AdbServer
    phone: VirtualPhone
    transports: list = field(default_factory=list)

    @property
    def serial(self) -> str:
        return self.phone.serial

    @property
    def server_port(self) -> int:
        return self.server.port

    @property
    def kernel(self) -> str:
        return self.phone.info["kernel_release"]

    def transport(self, **kw) -> AdbTransport:
        t = AdbTransport(self.serial, adb=self.server.adb, server_port=self.server.port, **kw)
        self.transports.append(t)
        return t

    def shell(self, script: str, *, timeout: float = 60) -> subprocess.CompletedProcess:
        """`adb shell` as the shell user (no su)."""
        return self.server.client("-s", self.serial, "shell", script, timeout=timeout)

    def kill(self) -> None:
        """The phone dies: QEMU is SIGKILLed (its journal and connection stay for the recovery to find)."""
        self.phone.kill()

    def stop(self) -> None:
        for t in self.transports:
            try:
                t.close()
            except Exception:
                pass
        self.phone.stop(self.server.adb)


def phone_problem(kernel: str) -> str | None:
    """Why a phone of `kernel` cannot run here (None: it can)."""
    if os.geteuid() != 0:
        return "needs root (its image is built with mmdebstrap, a setuid su)"
    if not shutil.which(QEMU):
        return f"{QEMU} is missing (apt-get install qemu-system-x86; make setup does)"
    if not is_built(image_dir(kernel)):
        return build_problem()
    return None


def start_phone(server: AdbServer, kernel: str = "6.1", *, rtc: str = DEFAULT_RTC) -> PhoneDevice:
    problem = phone_problem(kernel)
    if problem:
        pytest.skip(f"virtual phone ({kernel}): {problem}")
    phone = boot_phone(ensure_image(kernel), rtc=rtc)
    device = PhoneDevice(server, phone)
    try:
        phone.connect(server.adb, server.port)
    except BaseException:
        device.stop()
        raise
    return device


@pytest.fixture(scope="session")
def vphone(adb_server):
    device = start_phone(adb_server, "6.1")
    yield device
    device.stop()


@pytest.fixture(scope="session")
def vphone_612(adb_server):
    device = start_phone(adb_server, "6.12")
    yield device
    device.stop()


@pytest.fixture
def start_vphone(adb_server):
    """Factory: start_vphone(kernel="6.1", rtc=...) -> a phone of the test's own, ended after the test."""
    started: list[PhoneDevice] = []

    def start(kernel: str = "6.1", **kw) -> PhoneDevice:
        device = start_phone(adb_server, kernel, **kw)
        started.append(device)
        return device

    yield start
    for device in started:
        device.stop()
